//! The vector index of a store: which fields to embed, with which model, and cosine similarity.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;
use weft_runnable_core::Embeddings;

use super::{IndexFields, StoreError, texts_at_path};

/// A store's vector index: items' `fields` are embedded with `embed` into vectors of `dims` components,
/// and searches with a query rank items by cosine similarity.
#[derive(Clone)]
pub struct IndexConfig {
    /// Components of each vector; vectors of another size are an error.
    pub dims: usize,
    /// JSON paths of the fields to embed (`"$"`: the whole value); see [`texts_at_path`].
    pub fields: Vec<String>,
    /// The embedding model.
    pub embed: Arc<dyn Embeddings>,
}

impl fmt::Debug for IndexConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IndexConfig")
            .field("dims", &self.dims)
            .field("fields", &self.fields)
            .finish_non_exhaustive()
    }
}

impl IndexConfig {
    /// Embeds the whole value (`fields = ["$"]`).
    pub fn new(dims: usize, embed: Arc<dyn Embeddings>) -> Self {
        Self { dims, fields: vec!["$".to_owned()], embed }
    }

    /// Embeds these fields instead.
    pub fn with_fields<I: IntoIterator<Item = S>, S: Into<String>>(mut self, fields: I) -> Self {
        self.fields = fields.into_iter().map(Into::into).collect();
        self
    }

    /// The texts of `value` to embed under `choice` (nothing when indexing is off).
    pub fn texts(&self, value: &Value, choice: &IndexFields) -> Vec<String> {
        let fields = match choice {
            IndexFields::Off => return Vec::new(),
            IndexFields::Default => &self.fields,
            IndexFields::Fields(fields) => fields,
        };
        fields.iter().flat_map(|f| texts_at_path(value, f)).collect()
    }

    /// Embeds documents, checking the count and size of the vectors; `what` names them in errors.
    pub async fn embed_documents(&self, texts: Vec<String>, what: &str) -> Result<Vec<Vec<f32>>, StoreError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let count = texts.len();
        let vectors = self
            .embed
            .embed_documents(texts)
            .await
            .map_err(|e| StoreError::Embedding(format!("{what}: {e}")))?;
        if vectors.len() != count {
            return Err(StoreError::Embedding(format!(
                "{what}: {count} texts gave {} vectors",
                vectors.len()
            )));
        }
        vectors.iter().try_for_each(|v| self.check_dims(v, what))?;
        Ok(vectors)
    }

    /// Embeds a query, checking the size of the vector.
    pub async fn embed_query(&self, query: &str) -> Result<Vec<f32>, StoreError> {
        let what = format!("query '{query}'");
        let vector =
            self.embed.embed_query(query).await.map_err(|e| StoreError::Embedding(format!("{what}: {e}")))?;
        self.check_dims(&vector, &what)?;
        Ok(vector)
    }

    fn check_dims(&self, vector: &[f32], what: &str) -> Result<(), StoreError> {
        if vector.len() == self.dims {
            Ok(())
        } else {
            Err(StoreError::Embedding(format!(
                "{what}: got a vector of {} components, the index expects {}",
                vector.len(),
                self.dims
            )))
        }
    }
}

/// Cosine similarity of two vectors (0 when either is all zeros or their sizes differ).
pub fn cosine_similarity(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0_f64, 0.0_f64, 0.0_f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 { 0.0 } else { dot / (na.sqrt() * nb.sqrt()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_of_parallel_orthogonal_and_zero_vectors() {
        assert!((cosine_similarity(&[1.0, 2.0], &[2.0, 4.0]) - 1.0).abs() < 1e-9);
        assert!(cosine_similarity(&[1.0, 0.0], &[0.0, 3.0]).abs() < 1e-9);
        assert_eq!(cosine_similarity(&[0.0, 0.0], &[1.0, 1.0]), 0.0);
        assert_eq!(cosine_similarity(&[1.0], &[1.0, 1.0]), 0.0);
    }
}
