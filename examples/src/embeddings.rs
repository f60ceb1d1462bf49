//! `WordEmbeddings`: vectors from the words of a text, so that retrieval works without a model.

use async_trait::async_trait;
use weft::Embeddings;

/// Words too common to say what a text is about.
const STOP_WORDS: &[&str] = &[
    "about", "and", "are", "can", "does", "for", "from", "has", "have", "how", "into", "its", "not", "one",
    "that", "the", "their", "them", "then", "this", "what", "when", "where", "which", "who", "why", "will",
    "with", "you", "your",
];

/// Embeddings that need no model: a text's words (lower-cased, plurals folded, short and common words
/// dropped) are hashed into `dims` buckets and the counts normalised, so texts that share words are
/// close and texts that share none are orthogonal (barring hash collisions).
///
/// weft's [`FakeEmbeddings`](weft::fakes::FakeEmbeddings) gives unrelated vectors to any two different
/// texts, which suits tests of exact matches; a retrieval example needs "similar words, nearby vectors",
/// which this gives, deterministically.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WordEmbeddings {
    dims: usize,
}

impl WordEmbeddings {
    /// Vectors of `dims` components (at least 1).
    pub fn new(dims: usize) -> Self {
        Self { dims: dims.max(1) }
    }

    /// The number of components of each vector.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The words of `text` that count: lower case, at least three letters, not a stop word, with a
    /// plural `s` dropped.
    pub fn words(text: &str) -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .map(str::to_lowercase)
            .filter(|w| w.chars().count() >= 3 && !STOP_WORDS.contains(&w.as_str()))
            .map(|w| match w.strip_suffix('s') {
                Some(stem) if stem.len() >= 3 && !stem.ends_with('s') => stem.to_owned(),
                _ => w,
            })
            .collect()
    }

    /// The vector of `text`: all zeros when it has no word that counts.
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let mut vector = vec![0.0_f32; self.dims];
        for word in Self::words(text) {
            // FNV-1a: fixed, so vectors are the same on every run and machine.
            let hash = word
                .bytes()
                .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
            let bucket = usize::try_from(hash % self.dims as u64).unwrap_or(0);
            vector[bucket] += 1.0;
        }
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            vector.iter_mut().for_each(|x| *x /= norm);
        }
        vector
    }
}

#[async_trait]
impl Embeddings for WordEmbeddings {
    async fn embed_documents(&self, texts: Vec<String>) -> weft::Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|t| self.embed(t)).collect())
    }

    async fn embed_query(&self, text: &str) -> weft::Result<Vec<f32>> {
        Ok(self.embed(text))
    }
}
