//! `Embeddings`: models that turn text into vectors, for retrieval and semantic memory.

use std::sync::Arc;

use async_trait::async_trait;

use crate::error::Result;

/// A model that embeds text as vectors; similar texts get nearby vectors.
#[async_trait]
pub trait Embeddings: Send + Sync {
    /// Embeds documents, one vector per text, in order.
    async fn embed_documents(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>>;

    /// Embeds a search query (some providers embed queries differently from documents).
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>>;
}

#[async_trait]
impl<E: Embeddings + ?Sized> Embeddings for Arc<E> {
    async fn embed_documents(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>> {
        (**self).embed_documents(texts).await
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        (**self).embed_query(text).await
    }
}
