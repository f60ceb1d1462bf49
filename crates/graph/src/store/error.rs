//! Why a store operation failed.

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A namespace breaks LangGraph's rules (empty, an empty label, a label with a period or NUL, the
    /// reserved root label `"langgraph"`).
    #[error("invalid namespace {namespace:?}: {reason}")]
    InvalidNamespace {
        /// The namespace.
        namespace: Vec<String>,
        /// Which rule it breaks.
        reason: String,
    },
    /// A value that is not a JSON object.
    #[error("invalid value for key '{key}' in namespace {namespace:?}: {reason}")]
    InvalidValue {
        /// The namespace.
        namespace: Vec<String>,
        /// The key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// A TTL that is negative, NaN or infinite (minutes, as given).
    #[error("invalid ttl {0}: a TTL must be a finite number of minutes, zero or more")]
    InvalidTtl(f64),
    /// A search filter with an unknown operator.
    #[error("invalid filter: {0}")]
    InvalidFilter(String),
    /// The embedding model failed or returned vectors of the wrong number or size.
    #[error("embedding failed for {0}")]
    Embedding(String),
    /// The backend failed (connection, I/O, SQL).
    #[error("store backend error: {0}")]
    Backend(String),
}

/// A store's error met in user code converts with `?`, kept whole (`Error::downcast_custom`).
impl From<StoreError> for weft_runnable_core::Error {
    fn from(err: StoreError) -> Self {
        Self::custom(err)
    }
}
