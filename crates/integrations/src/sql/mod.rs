//! Code shared by the SQL backends: stored formats, row conversions, delta planning, migrations and the
//! in-weft parts of store searches. Each backend keeps its own queries.

pub(crate) mod batch;
pub(crate) mod codec;
pub(crate) mod delta;
pub(crate) mod heads;
pub(crate) mod migrate;
pub(crate) mod prune;
pub(crate) mod rows;
pub(crate) mod store;
pub(crate) mod store_rows;

/// How much a saver stores (for benchmarks and capacity planning).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StorageStats {
    /// Checkpoint rows.
    pub checkpoints: u64,
    /// Channel value rows (whole values and deltas).
    pub blobs: u64,
    /// Pending write rows.
    pub writes: u64,
    /// Bytes of stored data in those rows (checkpoint and metadata text, blobs, keys excluded).
    pub data_bytes: u64,
}

impl StorageStats {
    /// The stats of the counts read (checkpoints, blobs, writes, data bytes); a negative count is 0.
    pub(crate) fn from_counts((checkpoints, blobs, writes, data_bytes): (i64, i64, i64, i64)) -> Self {
        let n = |v: i64| u64::try_from(v).unwrap_or(0);
        Self { checkpoints: n(checkpoints), blobs: n(blobs), writes: n(writes), data_bytes: n(data_bytes) }
    }
}

/// A failure of an SQL backend: what failed, with the driver's error when there is one.
#[derive(Debug)]
pub(crate) struct Failure {
    /// What failed (no password in it).
    pub(crate) message: String,
    /// The driver's error.
    pub(crate) source: Option<sqlx::Error>,
}

impl Failure {
    /// A failure of `message` caused by `source`.
    pub(crate) fn new(message: String, source: sqlx::Error) -> Self {
        Self { message, source: Some(source) }
    }

    /// A failure with no driver error behind it.
    pub(crate) fn plain(message: String) -> Self {
        Self { message, source: None }
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Self::plain(message)
    }
}

impl From<Failure> for weft_graph::checkpoint::CheckpointError {
    fn from(failure: Failure) -> Self {
        match failure.source {
            Some(source) => checkpoint_error(failure.message, source),
            None => Self::backend(failure.message),
        }
    }
}

/// The checkpoint error of a driver error: [`Unavailable`](weft_graph::checkpoint::CheckpointErrorKind)
/// when the failure is passing (see `is_unavailable`), a backend error otherwise; `message` (which
/// must hold no password) says what failed, the driver's error is kept as the source.
pub fn checkpoint_error(message: String, source: sqlx::Error) -> weft_graph::checkpoint::CheckpointError {
    use weft_graph::checkpoint::CheckpointError;
    if is_unavailable(&source) {
        CheckpointError::unavailable_from(message, source)
    } else if matches!(source, sqlx::Error::Configuration(_)) {
        // A configuration error may quote the connection string.
        CheckpointError::backend(message)
    } else {
        CheckpointError::backend_from(message, source)
    }
}

/// Whether a driver error says the database could not be used for a passing reason: a connection that
/// broke or could not be made (I/O, TLS, protocol errors, SQLSTATE class 08), no pooled connection in
/// time, a server shutting down or starting (57P01-57P03), too many connections (53300), a
/// serialization failure or deadlock (40001, 40P01), an SQLite database busy or locked.
pub(crate) fn is_unavailable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            code.starts_with("08")
                || matches!(
                    code.as_ref(),
                    "57P01" | "57P02" | "57P03" | "53300" | "40001" | "40P01"
                    // SQLite: BUSY, LOCKED and their extended codes.
                    | "5" | "6" | "261" | "262" | "517"
                )
        }),
        _ => false,
    }
}
