//! Helpers of the store conformance cases.

use std::fmt::Debug;

use async_trait::async_trait;
use serde_json::Value;
use weft_runnable_core::Embeddings;

use crate::store::{Item, SearchItem, SearchOptions, Store, StoreError};

/// What a case returns: `Err` names the rule that broke.
pub(super) type Outcome = Result<(), String>;

/// A root label no other case (or run) uses, so cases can share one store.
pub(super) fn fresh_root(label: &str) -> String {
    format!("conformance-{label}-{}", uuid::Uuid::new_v4().simple())
}

/// A namespace under `root`.
pub(super) fn ns(root: &str, rest: &[&str]) -> Vec<String> {
    std::iter::once(root.to_owned()).chain(rest.iter().map(|s| (*s).to_owned())).collect()
}

/// `Err(rule)` when `ok` is false.
pub(super) fn ensure(ok: bool, rule: impl FnOnce() -> String) -> Outcome {
    if ok { Ok(()) } else { Err(rule()) }
}

/// `Err` naming `rule`, `got` and `want` when they differ.
pub(super) fn ensure_eq<T: PartialEq + Debug>(got: T, want: T, rule: &str) -> Outcome {
    if got == want { Ok(()) } else { Err(format!("{rule}: got {got:?}, want {want:?}")) }
}

/// Adds the failed call's name to a store error.
pub(super) trait Ctx<T> {
    /// `Err` as "`call` failed: error".
    fn ctx(self, call: &str) -> Result<T, String>;
}

impl<T> Ctx<T> for Result<T, StoreError> {
    fn ctx(self, call: &str) -> Result<T, String> {
        self.map_err(|e| format!("{call} failed: {e}"))
    }
}

/// The item at `namespace`/`key`, or an error naming `what`.
pub(super) async fn must_get(
    store: &dyn Store,
    namespace: &[String],
    key: &str,
    what: &str,
) -> Result<Item, String> {
    store.get(namespace, key).await.ctx("get")?.ok_or_else(|| format!("{what}: get returned nothing"))
}

/// Keys of search results, in order.
pub(super) fn keys(items: &[SearchItem]) -> Vec<String> {
    items.iter().map(|i| i.item.key.clone()).collect()
}

/// Search keys under `prefix` with `options`.
pub(super) async fn search_keys(
    store: &dyn Store,
    prefix: &[String],
    options: SearchOptions,
) -> Result<Vec<String>, String> {
    Ok(keys(&store.search(prefix, options).await.ctx("search")?))
}

/// Puts `(key, value)` pairs one after another under `namespace`.
pub(super) async fn put_all(store: &dyn Store, namespace: &[String], items: &[(&str, Value)]) -> Outcome {
    for (key, value) in items {
        store.put(namespace, key, value.clone()).await.ctx("put")?;
    }
    Ok(())
}

/// Embeddings for the conformance cases: bag of words hashed into `dims` buckets, normalised. Texts
/// sharing words are similar; deterministic on every machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WordEmbeddings {
    /// Components of each vector.
    pub dims: usize,
}

impl WordEmbeddings {
    /// The vector of `text`.
    pub fn vector(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0_f32; self.dims.max(1)];
        let len = u64::try_from(v.len()).unwrap_or(1);
        for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
            let hash = word
                .to_lowercase()
                .bytes()
                .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
            if let Some(slot) = usize::try_from(hash % len).ok().and_then(|i| v.get_mut(i)) {
                *slot += 1.0;
            }
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|x| *x /= norm);
        }
        v.truncate(self.dims);
        v
    }
}

#[async_trait]
impl Embeddings for WordEmbeddings {
    async fn embed_documents(&self, texts: Vec<String>) -> weft_runnable_core::Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|t| self.vector(t)).collect())
    }

    async fn embed_query(&self, text: &str) -> weft_runnable_core::Result<Vec<f32>> {
        Ok(self.vector(text))
    }
}
