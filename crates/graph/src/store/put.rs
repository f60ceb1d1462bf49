//! What every store does before writing an item, in one place.

use std::time::Duration;

use serde_json::Value;

use super::{IndexConfig, PutOptions, StoreError, Ttl, TtlConfig, validate_namespace};

/// An item checked and ready to write: its embeddings (empty without an index or with indexing off) and
/// how long it lives.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedPut {
    /// One vector per indexed text of the value.
    pub vectors: Vec<Vec<f32>>,
    /// The item's TTL (`None`: forever).
    pub ttl: Option<Duration>,
}

/// Validates a put (namespace labels, a JSON-object value), embeds the indexed fields, and resolves the
/// TTL against the store's default. Store backends call this first, so every store rejects the same inputs
/// with the same errors.
pub async fn prepare_put(
    namespace: &[String],
    key: &str,
    value: &Value,
    options: &PutOptions,
    index: Option<&IndexConfig>,
    ttl: &TtlConfig,
) -> Result<PreparedPut, StoreError> {
    validate_namespace(namespace)?;
    if !value.is_object() {
        return Err(StoreError::InvalidValue {
            namespace: namespace.to_vec(),
            key: key.to_owned(),
            reason: format!("values must be JSON objects, got {value}"),
        });
    }
    let vectors = match index {
        Some(index) => {
            let texts = index.texts(value, &options.index);
            index.embed_documents(texts, &format!("item '{key}' in namespace {namespace:?}")).await?
        }
        None => Vec::new(),
    };
    Ok(PreparedPut { vectors, ttl: resolve_ttl(options.ttl, ttl) })
}

/// The TTL a put gives an item, given the store's settings.
pub fn resolve_ttl(ttl: Ttl, config: &TtlConfig) -> Option<Duration> {
    match ttl {
        Ttl::Default => config.default_ttl,
        Ttl::Never => None,
        Ttl::After(ttl) => Some(ttl),
    }
}
