//! `FakeEmbeddings`: deterministic vectors made from a hash of the text.

use async_trait::async_trait;

use crate::embeddings::Embeddings;
use crate::error::Result;

/// Embeddings that need no model: each text maps to a fixed pseudo-random unit vector of the given
/// dimension, seeded by a hash of the text. Equal texts get equal vectors, on every run and machine;
/// different texts get unrelated ones (so similarity search finds exact matches only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FakeEmbeddings {
    dimension: usize,
}

impl FakeEmbeddings {
    /// Vectors of `dimension` components.
    pub fn new(dimension: usize) -> Self {
        Self { dimension }
    }

    /// The vector of `text`.
    pub fn embed(&self, text: &str) -> Vec<f32> {
        // FNV-1a gives the seed, splitmix64 the sequence: both fixed, so vectors never change.
        let mut state = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
        let mut next = move || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        // The top 24 bits give a value in [-1, 1) exactly representable as f32.
        let raw: Vec<f32> =
            (0..self.dimension).map(|_| ((next() >> 40) as f32 / 8_388_608.0) - 1.0).collect();
        let norm = raw.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm == 0.0 { raw } else { raw.into_iter().map(|x| x / norm).collect() }
    }
}

#[async_trait]
impl Embeddings for FakeEmbeddings {
    async fn embed_documents(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|t| self.embed(t)).collect())
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        Ok(self.embed(text))
    }
}
