//! The server's records, in the shapes LangGraph's API gives them: assistants, threads and runs.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A JSON object.
pub(crate) type Object = Map<String, Value>;

/// An assistant: a graph with its configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Assistant {
    pub(crate) assistant_id: String,
    pub(crate) graph_id: String,
    pub(crate) config: Value,
    pub(crate) context: Value,
    pub(crate) metadata: Object,
    pub(crate) name: String,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
    pub(crate) version: i64,
    pub(crate) description: Option<String>,
}

impl Assistant {
    /// The version record of the assistant as it is now.
    pub(crate) fn version_record(&self) -> AssistantVersion {
        AssistantVersion {
            assistant_id: self.assistant_id.clone(),
            graph_id: self.graph_id.clone(),
            config: self.config.clone(),
            context: self.context.clone(),
            metadata: self.metadata.clone(),
            name: self.name.clone(),
            created_at: self.updated_at.clone(),
            version: self.version,
            description: self.description.clone(),
        }
    }
}

/// One saved version of an assistant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AssistantVersion {
    pub(crate) assistant_id: String,
    pub(crate) graph_id: String,
    pub(crate) config: Value,
    pub(crate) context: Value,
    pub(crate) metadata: Object,
    pub(crate) name: String,
    pub(crate) created_at: String,
    pub(crate) version: i64,
    pub(crate) description: Option<String>,
}

/// What a thread is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ThreadStatus {
    Idle,
    Busy,
    Interrupted,
    Error,
}

impl ThreadStatus {
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "idle" => Some(Self::Idle),
            "busy" => Some(Self::Busy),
            "interrupted" => Some(Self::Interrupted),
            "error" => Some(Self::Error),
            _ => None,
        }
    }
}

/// A thread: a conversation whose state the checkpointer keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Thread {
    pub(crate) thread_id: String,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
    pub(crate) state_updated_at: String,
    pub(crate) metadata: Object,
    pub(crate) status: ThreadStatus,
    pub(crate) config: Value,
    pub(crate) values: Option<Value>,
    pub(crate) error: Option<Value>,
    pub(crate) interrupts: Object,
    /// Its TTL, when it has one (see [`crate::retention`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ttl: Option<crate::retention::ThreadTtl>,
}

impl Thread {
    /// The graph the thread's runs used (set by its first run).
    pub(crate) fn graph_id(&self) -> Option<&str> {
        self.metadata.get("graph_id").and_then(Value::as_str)
    }

    /// A copy without the values and interrupts, for a caller about to set them.
    pub(crate) fn without_state(&self) -> Self {
        Self {
            thread_id: self.thread_id.clone(),
            created_at: self.created_at.clone(),
            updated_at: self.updated_at.clone(),
            state_updated_at: self.state_updated_at.clone(),
            metadata: self.metadata.clone(),
            status: self.status,
            config: self.config.clone(),
            values: None,
            error: self.error.clone(),
            interrupts: Object::new(),
            ttl: self.ttl,
        }
    }
}

/// Where a run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RunStatus {
    Pending,
    Running,
    Success,
    Error,
    Timeout,
    Interrupted,
}

impl RunStatus {
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(Self::Pending),
            "running" => Some(Self::Running),
            "success" => Some(Self::Success),
            "error" => Some(Self::Error),
            "timeout" => Some(Self::Timeout),
            "interrupted" => Some(Self::Interrupted),
            _ => None,
        }
    }

    /// Pending or running.
    pub(crate) fn is_active(self) -> bool {
        matches!(self, Self::Pending | Self::Running)
    }
}

/// The arguments a run was created with (LangGraph's `kwargs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunKwargs {
    pub(crate) input: Value,
    pub(crate) command: Value,
    pub(crate) config: Value,
    pub(crate) context: Value,
    pub(crate) stream_mode: Vec<String>,
    pub(crate) interrupt_before: Value,
    pub(crate) interrupt_after: Value,
    pub(crate) webhook: Value,
    pub(crate) feedback_keys: Value,
    pub(crate) temporary: bool,
    pub(crate) subgraphs: bool,
    pub(crate) resumable: bool,
    pub(crate) checkpoint_during: bool,
    pub(crate) durability: String,
}

/// A run of an assistant on a thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Run {
    pub(crate) run_id: String,
    pub(crate) thread_id: String,
    pub(crate) assistant_id: String,
    pub(crate) metadata: Arc<Object>,
    pub(crate) status: RunStatus,
    pub(crate) kwargs: Arc<RunKwargs>,
    pub(crate) multitask_strategy: String,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
    pub(crate) langsmith_session_name: Option<String>,
}

/// A run as the server keeps it: the run, and what `/wait` and `/join` answer once it has finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunRecord {
    pub(crate) run: Run,
    /// The body `/wait` and `/join` answer, once the run has finished.
    #[serde(default)]
    pub(crate) result: Option<Value>,
    /// How many times a worker has started the run.
    #[serde(default)]
    pub(crate) attempt: u32,
    /// The thread is deleted once the run ends (stateless runs).
    #[serde(default)]
    pub(crate) delete_thread: bool,
}

impl RunRecord {
    /// Marks the run started by a worker: `running`, one attempt more, updated now.
    pub(crate) fn mark_running(&mut self) {
        self.run.status = RunStatus::Running;
        self.run.updated_at = crate::app::now();
        self.attempt += 1;
    }
}

/// A cron: a run made on a schedule, on its thread or (stateless) on a new thread each time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Cron {
    pub(crate) cron_id: String,
    pub(crate) assistant_id: String,
    pub(crate) thread_id: Option<String>,
    pub(crate) user_id: Option<String>,
    pub(crate) end_time: Option<String>,
    pub(crate) schedule: String,
    pub(crate) timezone: Option<String>,
    /// The request the cron was made with: each run is made from it.
    pub(crate) payload: Object,
    /// When it fires next (kept, so that a restart neither forgets nor repeats a fire).
    pub(crate) next_run_date: Option<String>,
    pub(crate) metadata: Object,
    /// What becomes of a stateless cron's thread after each run: `delete` or `keep` (none for a thread's).
    pub(crate) on_run_completed: Option<String>,
    pub(crate) enabled: bool,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
}
