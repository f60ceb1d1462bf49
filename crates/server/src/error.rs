//! Errors: [`ServerError`] for starting and running the server, and the HTTP errors its routes answer
//! with (`{"detail": ...}` bodies, as LangGraph's server sends them).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// Two graphs were registered under one id.
    #[error("graph id '{0}' is registered twice")]
    DuplicateGraph(String),
    /// A graph id that cannot name a graph (empty).
    #[error("graph id '{0}' is not valid: it must not be empty")]
    InvalidGraphId(String),
    /// The database could not be opened, read or written: the saver's or the store's error, kept whole
    /// (its kind and whether trying again may help: [`StorageError::is_retryable`]).
    #[error("storage failed: {0}")]
    Storage(#[from] StorageError),
    /// Another process serves the SQLite file: one process per file (see [`crate::ServerBuilder::sqlite`]).
    #[error(
        "the database {} is in use by another weft-server process ({}): stop it first, one process per \
         SQLite file (scaled mode serves one database from many)",
        .database.display(),
        .holder.map_or_else(|| "process id unknown".to_owned(), |pid| format!("pid {pid}"))
    )]
    DatabaseInUse {
        /// The database file.
        database: std::path::PathBuf,
        /// The holder's process id, as its lock file says.
        holder: Option<u32>,
    },
    /// The lock file beside a SQLite file (`<database>.lock`) could not be made or locked.
    #[error("cannot lock {}: {source}", .path.display())]
    DatabaseLock {
        /// The lock file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Redis (the wake-ups, cancellations and streams of a scaled-out server) could not be reached or
    /// answered wrongly.
    #[cfg(feature = "scale")]
    #[error("redis failed: {0}")]
    Redis(#[source] redis::RedisError),
    /// The settings of a scaled-out server do not go together (PostgreSQL without Redis, or the reverse).
    #[error("invalid scale-out settings: {0}")]
    ScaleConfig(String),
    /// The HTTP client that calls webhooks could not be made.
    #[error("cannot make the webhook client: {0}")]
    Webhooks(#[source] reqwest::Error),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The server would listen beyond this machine with no authentication
    /// ([`crate::ServerBuilder::allow_unauthenticated`] allows it).
    #[error(
        "refusing to serve {addr} without authentication: it is reachable from other machines; set api_keys, \
         bearer_tokens or auth, or allow_unauthenticated()"
    )]
    Unauthenticated {
        /// The address.
        addr: String,
    },
    /// The thread TTL settings (`checkpointer.ttl` of `langgraph.json`) are not valid: what is wrong.
    #[error("invalid thread TTL settings: {0}")]
    TtlConfig(String),
    /// The store TTL settings (`store.ttl` of `langgraph.json`) are not valid: what is wrong.
    #[error("invalid store TTL settings: {0}")]
    StoreTtlConfig(String),

    /// The v2 protocol's replay buffer size (`LSD_PROTOCOL_V2_BUFFER_SIZE`, or
    /// [`crate::ServerBuilder::protocol_v2_buffer`]) is not a positive integer: what was given.
    #[error("invalid v2 protocol buffer size: {0}")]
    ProtocolBuffer(String),

    /// The scaled-out records' schema was changed by a newer weft-server in a way this build cannot work
    /// with (a change older builds can work with lets them start: see docs/server.md, "Upgrades").
    #[error(
        "the records' schema is at version {found}, which needs a weft-server that knows versions up to \
         {needs} at least; this one knows versions up to {knows} (a newer weft-server changed the database)"
    )]
    SchemaTooNew {
        /// The version the database records.
        found: i32,
        /// The oldest build's version that works with it.
        needs: i32,
        /// This build's version.
        knows: i32,
    },

    /// Both a custom [`crate::Auth`] and static credentials were given.

    #[error("both a custom auth and API keys or bearer tokens were given: choose one")]
    AuthConflict,
}

impl ServerError {
    /// Whether trying again later may succeed: storage that could not be reached or answered in time
    /// ([`StorageError::is_retryable`]), Redis that could not be reached or timed out.
    pub fn is_retryable(&self) -> bool {
        match self {
            ServerError::Storage(e) => e.is_retryable(),
            #[cfg(feature = "scale")]
            ServerError::Redis(e) => {
                e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal()
            }
            _ => false,
        }
    }
}

/// Why the server's storage failed. Its records are kept beside the checkpoints and written through the
/// checkpoint saver, so their failures are checkpoint errors too.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// The checkpoint saver failed, or the records beside it (with the error's
    /// [`CheckpointErrorKind`](weft_graph::checkpoint::CheckpointErrorKind)).
    #[error(transparent)]
    Checkpoint(#[from] weft_graph::checkpoint::CheckpointError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] weft_graph::store::StoreError),
}

impl StorageError {
    /// Whether trying again later may succeed (the database could not be reached, was busy or locked).
    pub fn is_retryable(&self) -> bool {
        match self {
            StorageError::Checkpoint(e) => e.is_retryable(),
            StorageError::Store(_) => false,
        }
    }

    /// The checkpoint error's kind; `None` for the store's errors.
    pub fn checkpoint_kind(&self) -> Option<weft_graph::checkpoint::CheckpointErrorKind> {
        match self {
            StorageError::Checkpoint(e) => Some(e.kind()),
            StorageError::Store(_) => None,
        }
    }
}

impl From<weft_graph::checkpoint::CheckpointError> for ServerError {
    fn from(e: weft_graph::checkpoint::CheckpointError) -> Self {
        ServerError::Storage(e.into())
    }
}

impl From<weft_graph::store::StoreError> for ServerError {
    fn from(e: weft_graph::store::StoreError) -> Self {
        ServerError::Storage(e.into())
    }
}

/// An HTTP error answer: a status and the `detail` text of its JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) detail: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self { status, detail: detail.into() }
    }

    pub(crate) fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, detail)
    }

    pub(crate) fn unprocessable(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, detail)
    }

    pub(crate) fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, detail)
    }

    pub(crate) fn conflict(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, detail)
    }

    pub(crate) fn internal(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, detail)
    }

    /// `Thread with ID … not found` (LangGraph's wording).
    pub(crate) fn thread_not_found(thread_id: &str) -> Self {
        Self::not_found(format!("Thread with ID {thread_id} not found"))
    }
}

impl From<ServerError> for ApiError {
    fn from(e: ServerError) -> Self {
        tracing::error!(error = %e, "request failed");
        ApiError::internal(e.to_string())
    }
}

impl From<crate::auth::AuthError> for ApiError {
    fn from(e: crate::auth::AuthError) -> Self {
        let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::FORBIDDEN);
        ApiError::new(status, e.detail())
    }
}

impl From<weft_graph::GraphError> for ApiError {
    fn from(e: weft_graph::GraphError) -> Self {
        use weft_graph::GraphError as G;
        match &e {
            G::UpdateUnknownNode(_)
            | G::AmbiguousUpdate
            | G::AsNodeRequired
            | G::CopyWithOtherUpdates
            | G::NoSupersteps
            | G::NoUpdates
            | G::InvalidUpdate { .. }
            | G::Serialization(_)
            | G::Checkpoint(_) => ApiError::bad_request(e.to_string()),
            _ => ApiError::internal(e.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        crate::api::reply::json(self.status, &serde_json::json!({"detail": self.detail}))
    }
}

/// Result of a route.
pub(crate) type ApiResult<T> = Result<T, ApiError>;

/// The server's error met in `main` (building or serving) converts with `?`, kept whole
/// (`Error::downcast_custom`), so `fn main() -> weft::Result<()>` can serve.
impl From<ServerError> for weft_runnable_core::Error {
    fn from(err: ServerError) -> Self {
        Self::custom(err)
    }
}

#[cfg(test)]
mod tests {
    use weft_graph::checkpoint::{CheckpointError, CheckpointErrorKind};

    use super::*;

    #[test]
    fn storage_errors_keep_their_kind_and_retryability_and_answer_500() {
        let busy = ServerError::from(CheckpointError::unavailable("sqlite: database is locked"));
        assert!(busy.is_retryable());
        let ServerError::Storage(storage) = &busy else { panic!("{busy:?}") };
        assert_eq!(storage.checkpoint_kind(), Some(CheckpointErrorKind::Unavailable));
        let broken = ServerError::from(CheckpointError::backend("sqlite: no such table"));
        assert!(!broken.is_retryable());
        let store = ServerError::from(weft_graph::store::StoreError::Backend("disk full".into()));
        assert!(!store.is_retryable());
        let ServerError::Storage(storage) = &store else { panic!("{store:?}") };
        assert_eq!(storage.checkpoint_kind(), None);
        for e in [busy, broken, store] {
            let text = e.to_string();
            let answer = ApiError::from(e);
            assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
            assert_eq!(answer.detail, text);
        }
    }
}
