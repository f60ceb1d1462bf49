//! Why a saver failed: [`CheckpointError`], with a [`CheckpointErrorKind`] a caller can match on.

use std::fmt;
use std::sync::Arc;

/// The error a [`CheckpointError`] was made from (a driver's error), kept for
/// [`source`](std::error::Error::source). Shared so that the error stays cheap to clone.
pub type ErrorSource = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// What kind of failure a [`CheckpointError`] is: what a caller can do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CheckpointErrorKind {
    /// The backend could not be reached or answered in time (connection refused or reset, a timeout, no
    /// pooled connection, a server starting or shutting down, a database locked or busy). Passing:
    /// trying again later may succeed.
    Unavailable,
    /// Stored data cannot be read back (bad JSON, a value of the wrong type, a key or row that is gone
    /// while others point at it). Trying again does not help; the thread can still be deleted.
    Corrupt,
    /// A checkpoint was refused because the thread's head moved: another run saved to the same thread
    /// and namespace since this writer read it (see [`ExpectedHead`](super::ExpectedHead)).
    Conflict,
    /// The request itself is wrong (an unknown checkpoint, an id the backend cannot store, a value that
    /// cannot be serialized).
    InvalidRequest,
    /// Any other failure of the backend (an SQL error, a refused command, a bad configuration).
    Backend,
}

impl fmt::Display for CheckpointErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Unavailable => "unavailable",
            Self::Corrupt => "corrupt",
            Self::Conflict => "conflict",
            Self::InvalidRequest => "invalid request",
            Self::Backend => "backend",
        })
    }
}

/// Why a saver failed. [`kind`](Self::kind) says what kind of failure it is and
/// [`is_retryable`](Self::is_retryable) whether trying again may help; the driver's error, when there is
/// one, is the [`source`](std::error::Error::source). Texts never hold a password.
///
/// Two errors are equal when they are of the same kind and read the same (sources are not compared).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// The backend could not be reached or answered in time ([`CheckpointErrorKind::Unavailable`]).
    #[error("storage unavailable: {message}")]
    Unavailable {
        /// What failed, and where.
        message: String,
        /// The driver's error.
        #[source]
        source: Option<ErrorSource>,
    },
    /// The backend failed for another reason ([`CheckpointErrorKind::Backend`]).
    #[error("backend error: {message}")]
    Backend {
        /// What failed, and where.
        message: String,
        /// The driver's error.
        #[source]
        source: Option<ErrorSource>,
    },
    /// A stored value could not be read back ([`CheckpointErrorKind::Corrupt`]).
    #[error(
        "corrupt checkpoint data in thread '{thread_id}'{}{}: {message}",
        checkpoint_suffix(.checkpoint_id),
        channel_suffix(.channel)
    )]
    Corrupt {
        /// The thread.
        thread_id: String,
        /// The checkpoint (empty when the damage is not in one checkpoint, as a thread's lost index).
        checkpoint_id: String,
        /// The channel, when the damage is in one channel's value.
        channel: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// A checkpoint was refused because the thread's head is not the one its writer expected
    /// ([`CheckpointErrorKind::Conflict`]): another run saved to the thread meanwhile.
    #[error("{0}")]
    Conflict(Box<HeadConflict>),
    /// A value could not be serialized ([`CheckpointErrorKind::InvalidRequest`]).
    #[error("cannot serialize channel '{channel}' of thread '{thread_id}': {message}")]
    Serialize {
        /// The thread.
        thread_id: String,
        /// The channel.
        channel: String,
        /// What went wrong, with the path inside the value.
        message: String,
    },
    /// The request was invalid (an unknown checkpoint to copy from, a bad id)
    /// ([`CheckpointErrorKind::InvalidRequest`]).
    #[error("invalid request: {0}")]
    Invalid(String),
}

/// What a [`CheckpointError::Conflict`] refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "conflict in thread '{thread_id}'{}: checkpoint '{checkpoint_id}' expected head {} but the head is {}; \
     another run saved to this thread meanwhile",
    ns_suffix(.checkpoint_ns),
    head_text(.expected),
    head_text(.found)
)]
pub struct HeadConflict {
    /// The thread.
    pub thread_id: String,
    /// The namespace.
    pub checkpoint_ns: String,
    /// The checkpoint that was refused.
    pub checkpoint_id: String,
    /// The head its writer expected (`None`: no checkpoint).
    pub expected: Option<String>,
    /// The head found (`None`: no checkpoint).
    pub found: Option<String>,
}

fn checkpoint_suffix(id: &str) -> String {
    if id.is_empty() { String::new() } else { format!(" checkpoint '{id}'") }
}

fn channel_suffix(channel: &Option<String>) -> String {
    channel.as_ref().map(|c| format!(" channel '{c}'")).unwrap_or_default()
}

fn ns_suffix(ns: &str) -> String {
    if ns.is_empty() { String::new() } else { format!(" namespace '{ns}'") }
}

fn head_text(head: &Option<String>) -> String {
    head.as_ref().map_or_else(|| "none".to_owned(), |id| format!("'{id}'"))
}

impl PartialEq for CheckpointError {
    fn eq(&self, other: &Self) -> bool {
        self.kind() == other.kind() && self.to_string() == other.to_string()
    }
}

impl CheckpointError {
    /// The kind of failure.
    pub fn kind(&self) -> CheckpointErrorKind {
        match self {
            Self::Unavailable { .. } => CheckpointErrorKind::Unavailable,
            Self::Backend { .. } => CheckpointErrorKind::Backend,
            Self::Corrupt { .. } => CheckpointErrorKind::Corrupt,
            Self::Conflict { .. } => CheckpointErrorKind::Conflict,
            Self::Serialize { .. } | Self::Invalid(_) => CheckpointErrorKind::InvalidRequest,
        }
    }

    /// Whether trying the same call again later may succeed (the backend was unavailable).
    pub fn is_retryable(&self) -> bool {
        self.kind() == CheckpointErrorKind::Unavailable
    }

    /// Whether the thread's head moved under the writer ([`CheckpointErrorKind::Conflict`]).
    pub fn is_conflict(&self) -> bool {
        self.kind() == CheckpointErrorKind::Conflict
    }

    /// Whether stored data is damaged ([`CheckpointErrorKind::Corrupt`]).
    pub fn is_corrupt(&self) -> bool {
        self.kind() == CheckpointErrorKind::Corrupt
    }

    /// The thread the error names, when it names one.
    pub fn thread_id(&self) -> Option<&str> {
        match self {
            Self::Corrupt { thread_id, .. } | Self::Serialize { thread_id, .. } => Some(thread_id),
            Self::Conflict(conflict) => Some(&conflict.thread_id),
            _ => None,
        }
    }

    /// A backend failure with no driver error behind it.
    pub fn backend(message: impl Into<String>) -> Self {
        Self::Backend { message: message.into(), source: None }
    }

    /// A backend failure caused by `source`.
    pub fn backend_from(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Backend { message: message.into(), source: Some(Arc::new(source)) }
    }

    /// An unavailable backend, with no driver error behind it.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::Unavailable { message: message.into(), source: None }
    }

    /// An unavailable backend, as `source` says.
    pub fn unavailable_from(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Unavailable { message: message.into(), source: Some(Arc::new(source)) }
    }

    /// Damaged data of checkpoint `checkpoint_id` (empty when not one checkpoint's) of thread `thread_id`.
    pub fn corrupt(
        thread_id: impl Into<String>,
        checkpoint_id: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self::Corrupt {
            thread_id: thread_id.into(),
            checkpoint_id: checkpoint_id.into(),
            channel: None,
            message: message.into(),
        }
    }

    /// The same error naming `channel` (a corrupt value of that channel); other kinds are unchanged.
    pub fn in_channel(mut self, name: impl Into<String>) -> Self {
        if let Self::Corrupt { channel, .. } = &mut self {
            *channel = Some(name.into());
        }
        self
    }
}

/// A saver's error met in user code (opening a checkpointer, reading a thread) converts with `?`, kept
/// whole: `Error::downcast_custom::<CheckpointError>()` gives it back with its kind.
impl From<CheckpointError> for weft_runnable_core::Error {
    fn from(err: CheckpointError) -> Self {
        Self::custom(err)
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn kinds_and_sources_are_kept() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        let err = CheckpointError::unavailable_from("postgres connect to 127.0.0.1:1", io);
        assert_eq!(err.kind(), CheckpointErrorKind::Unavailable);
        assert!(err.is_retryable());
        assert_eq!(err.source().map(ToString::to_string).as_deref(), Some("connection refused"));
        let corrupt = CheckpointError::corrupt("t1", "c1", "bad json").in_channel("messages");
        assert_eq!(
            corrupt.to_string(),
            "corrupt checkpoint data in thread 't1' checkpoint 'c1' channel 'messages': bad json"
        );
        assert!(corrupt.is_corrupt() && !corrupt.is_retryable());
        let lost = CheckpointError::corrupt("t1", "", "the index is gone");
        assert_eq!(lost.to_string(), "corrupt checkpoint data in thread 't1': the index is gone");
        assert_eq!(corrupt.thread_id(), Some("t1"));
        let conflict = CheckpointError::Conflict(Box::new(HeadConflict {
            thread_id: "t1".into(),
            checkpoint_ns: String::new(),
            checkpoint_id: "c3".into(),
            expected: Some("c1".into()),
            found: Some("c2".into()),
        }));
        assert!(conflict.is_conflict());
        assert!(conflict.to_string().contains("expected head 'c1' but the head is 'c2'"), "{conflict}");
        assert_eq!(CheckpointError::Invalid("x".into()).kind(), CheckpointErrorKind::InvalidRequest);
        assert!(std::mem::size_of::<CheckpointError>() <= 104, "small enough to return by value");
    }
}
