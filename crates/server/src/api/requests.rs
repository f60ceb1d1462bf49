//! Request bodies: their schemas (checked first, for LangGraph's 422 texts) and the typed forms read
//! after.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::validate::{Rule, Schema, Ty};
use crate::runs::modes::API_MODES;

fn is_mode(value: &Value) -> bool {
    value.as_str().is_some_and(|m| API_MODES.contains(&m))
}

fn is_stream_mode(value: &Value) -> bool {
    match value {
        Value::Array(items) => items.iter().all(is_mode),
        other => is_mode(other),
    }
}

const OBJECT: Rule = Rule::Types(&[Ty::Object]);
const BOOLEAN: Rule = Rule::Types(&[Ty::Boolean]);
const INTEGER: Rule = Rule::Types(&[Ty::Integer]);
const STRING: Rule = Rule::Types(&[Ty::String]);
const ARRAY: Rule = Rule::Types(&[Ty::Array]);
const SORT_ORDER: Rule = Rule::Enum(&["asc", "desc"], true);
/// A page's size: 1 to 1000.
const LIMIT: Rule = Rule::Range(Some(1), Some(1000));
/// A page's start: 0 or more.
const OFFSET: Rule = Rule::Range(Some(0), None);

/// A run's `config`.
const CONFIG: Schema = Schema {
    path: "",
    required: &[],
    properties: &[("tags", Rule::Each(&STRING)), ("recursion_limit", INTEGER), ("configurable", OBJECT)],
};

/// What every run's request takes, then `$extra`.
macro_rules! run_properties {
    ($($extra:expr),* $(,)?) => {
        &[
            ("assistant_id", Rule::AnyOf(Value::is_string)),
            ("command", Rule::Types(&[Ty::Object, Ty::Null])),
            ("metadata", OBJECT),
            ("config", Rule::Object(&CONFIG)),
            ("context", OBJECT),
            ("webhook", Rule::Types(&[Ty::String, Ty::Null])),
            ("stream_mode", Rule::AnyOf(is_stream_mode)),
            ("stream_subgraphs", BOOLEAN),
            ("stream_resumable", BOOLEAN),
            ("after_seconds", Rule::Types(&[Ty::Number])),
            ("checkpoint_during", BOOLEAN),
            ("feedback_keys", Rule::Each(&STRING)),
            ("durability", DURABILITY),
            $($extra,)*
        ]
    };
}

/// `POST /runs/...` without a thread.
pub(crate) const RUN_STATELESS: Schema = Schema {
    path: "schema[\"components\"][\"schemas\"][\"RunCreateStateless\"]",
    required: &["assistant_id"],
    properties: run_properties![("on_completion", Rule::Enum(&["delete", "keep"], false))],
};

/// `POST /threads/{id}/runs/...`.
pub(crate) const RUN_STATEFUL: Schema = Schema {
    path: "schema[\"components\"][\"schemas\"][\"RunCreateStateful\"]",
    required: &["assistant_id"],
    properties: run_properties![
        ("checkpoint", OBJECT),
        ("interrupt_before", Rule::AnyOf(is_breakpoints)),
        ("interrupt_after", Rule::AnyOf(is_breakpoints)),
        ("multitask_strategy", MULTITASK),
        ("if_not_exists", Rule::Enum(&["create", "reject"], false)),
    ],
};

/// What a streamed run's request adds (`allOf` the run's schema and this one).
pub(crate) const RUN_STREAMED: Schema = Schema {
    path: "schema[\"allOf\"][1]",
    required: &[],
    properties: &[("on_disconnect", Rule::Enum(&["cancel", "continue"], false))],
};

const MULTITASK: Rule = Rule::Enum(&["reject", "rollback", "interrupt", "enqueue"], false);

/// A string field that LangGraph's schema for the request has no rule for (a stateless run's
/// `multitask_strategy`): any other JSON is taken as absent.
fn text<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    let value = Option::<Value>::deserialize(deserializer)?;
    Ok(value.and_then(|v| v.as_str().map(str::to_owned)))
}

/// A run to create.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct RunCreate {
    pub(crate) assistant_id: String,
    pub(crate) input: Value,
    pub(crate) command: Option<Map<String, Value>>,
    pub(crate) checkpoint_id: Option<String>,
    pub(crate) checkpoint: Option<Map<String, Value>>,
    pub(crate) metadata: Option<Map<String, Value>>,
    pub(crate) config: Option<Map<String, Value>>,
    pub(crate) context: Option<Map<String, Value>>,
    pub(crate) webhook: Option<String>,
    pub(crate) interrupt_before: Value,
    pub(crate) interrupt_after: Value,
    #[serde(deserialize_with = "text")]
    pub(crate) multitask_strategy: Option<String>,
    #[serde(deserialize_with = "text")]
    pub(crate) on_completion: Option<String>,
    #[serde(deserialize_with = "text")]
    pub(crate) on_disconnect: Option<String>,
    pub(crate) stream_mode: Value,
    pub(crate) stream_subgraphs: Option<bool>,
    pub(crate) stream_resumable: Option<bool>,
    pub(crate) feedback_keys: Value,
    pub(crate) after_seconds: Option<f64>,
    #[serde(deserialize_with = "text")]
    pub(crate) if_not_exists: Option<String>,
    #[serde(deserialize_with = "text")]
    pub(crate) durability: Option<String>,
    pub(crate) checkpoint_during: Option<bool>,
    /// The cron that makes the run (never read from a request).
    #[serde(skip)]
    pub(crate) cron_id: Option<String>,
}

/// `POST /threads`.
pub(crate) const THREAD_CREATE: Schema = Schema {
    path: "schema",
    required: &[],
    properties: &[
        ("thread_id", STRING),
        ("metadata", OBJECT),
        ("if_exists", Rule::Enum(&["raise", "do_nothing"], false)),
        ("ttl", Rule::Object(&TTL)),
        ("supersteps", Rule::Each(&Rule::Object(&SUPERSTEP))),
    ],
};

const TTL: Schema = Schema {
    path: "",
    required: &[],
    properties: &[
        ("strategy", Rule::Enum(&["delete", "keep_latest"], false)),
        ("ttl", Rule::Types(&[Ty::Number])),
    ],
};

const SUPERSTEP: Schema = Schema {
    path: "",
    required: &["updates"],
    properties: &[("updates", Rule::Each(&Rule::Object(&SUPERSTEP_UPDATE)))],
};

fn is_update_values(value: &Value) -> bool {
    match value {
        Value::Array(items) => items.iter().all(Value::is_object),
        other => other.is_object() || other.is_null(),
    }
}

const SUPERSTEP_UPDATE: Schema = Schema {
    path: "schema[\"components\"][\"schemas\"][\"ThreadSuperstepUpdate\"]",
    required: &["as_node"],
    properties: &[
        ("values", Rule::AnyOf(is_update_values)),
        ("command", Rule::Types(&[Ty::Object, Ty::Null])),
        ("as_node", STRING),
    ],
};

/// A thread to create.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ThreadCreate {
    pub(crate) thread_id: Option<String>,
    pub(crate) metadata: Option<Map<String, Value>>,
    pub(crate) if_exists: Option<String>,
    pub(crate) ttl: Option<Value>,
    pub(crate) supersteps: Option<Vec<Superstep>>,
}

/// One superstep of a thread made with `supersteps`: its updates, applied together.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Superstep {
    pub(crate) updates: Vec<SuperstepUpdate>,
}

/// An update of a superstep: values written as a node (or a command, which weft does not take yet).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct SuperstepUpdate {
    pub(crate) values: Option<Value>,
    pub(crate) command: Option<Value>,
    pub(crate) as_node: Option<String>,
}

/// The fields a thread search may select, in LangGraph's order.
pub(crate) const THREAD_FIELDS: &[&str] = &[
    "thread_id",
    "created_at",
    "updated_at",
    "state_updated_at",
    "metadata",
    "config",
    "status",
    "values",
    "interrupts",
];

/// The fields an assistant search may select, in LangGraph's order.
pub(crate) const ASSISTANT_FIELDS: &[&str] = &[
    "assistant_id",
    "graph_id",
    "name",
    "description",
    "config",
    "context",
    "created_at",
    "updated_at",
    "metadata",
    "version",
];

/// The fields a listing of a thread's runs may select, in LangGraph's order.
pub(crate) const RUN_FIELDS: &[&str] = &[
    "run_id",
    "thread_id",
    "assistant_id",
    "created_at",
    "updated_at",
    "status",
    "metadata",
    "kwargs",
    "multitask_strategy",
    "langsmith_session_name",
];

/// `POST /threads/search` and `/threads/count`.
pub(crate) const THREAD_SEARCH: Schema = Schema {
    path: "schema",
    required: &[],
    properties: &[
        ("metadata", OBJECT),
        ("values", OBJECT),
        ("status", Rule::Enum(&["idle", "busy", "interrupted", "error"], false)),
        ("limit", LIMIT),
        ("offset", OFFSET),
        (
            "sort_by",
            Rule::Enum(&["thread_id", "status", "created_at", "updated_at", "state_updated_at"], true),
        ),
        ("sort_order", SORT_ORDER),
        ("ids", Rule::Each(&STRING)),
        ("select", Rule::Items(THREAD_FIELDS)),
    ],
};

/// A thread search.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ThreadSearch {
    pub(crate) metadata: Option<Map<String, Value>>,
    pub(crate) values: Option<Map<String, Value>>,
    pub(crate) status: Option<String>,
    pub(crate) limit: Option<i64>,
    pub(crate) offset: Option<i64>,
    pub(crate) sort_by: Option<String>,
    pub(crate) sort_order: Option<String>,
    pub(crate) ids: Option<Vec<String>>,
    pub(crate) select: Option<Vec<String>>,
}

/// `PATCH /threads/{id}`.
pub(crate) const THREAD_PATCH: Schema = Schema {
    path: "schema",
    required: &[],
    properties: &[("metadata", OBJECT), ("ttl", Rule::Object(&TTL))],
};

/// A thread patch.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ThreadPatch {
    pub(crate) metadata: Option<Map<String, Value>>,
    pub(crate) ttl: Option<Value>,
}

/// `POST /threads/{id}/state`.
pub(crate) const STATE_UPDATE: Schema = Schema {
    path: "schema",
    required: &[],
    properties: &[("as_node", Rule::Types(&[Ty::String, Ty::Null])), ("checkpoint", OBJECT)],
};

/// A state update.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct StateUpdate {
    pub(crate) values: Value,
    pub(crate) as_node: Option<String>,
    /// Not in LangGraph's schema: read when it is a string.
    #[serde(deserialize_with = "text")]
    pub(crate) checkpoint_id: Option<String>,
    pub(crate) checkpoint: Option<Map<String, Value>>,
}

/// `POST /threads/{id}/history`.
pub(crate) const HISTORY: Schema = Schema {
    path: "schema",
    required: &[],
    properties: &[
        ("limit", LIMIT),
        ("metadata", Rule::Types(&[Ty::Object, Ty::Null])),
        ("checkpoint", OBJECT),
    ],
};

/// A history query.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct History {
    pub(crate) limit: Option<i64>,
    pub(crate) before: Value,
    pub(crate) metadata: Option<Map<String, Value>>,
    pub(crate) checkpoint: Option<Map<String, Value>>,
}

/// `POST /threads/{id}/state/checkpoint`.
pub(crate) const STATE_AT: Schema = Schema {
    path: "schema",
    required: &["checkpoint"],
    properties: &[("checkpoint", OBJECT), ("subgraphs", BOOLEAN)],
};

/// A state read at a checkpoint.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct StateAt {
    pub(crate) checkpoint: Map<String, Value>,
    pub(crate) subgraphs: bool,
}

/// `POST /threads/prune`.
pub(crate) const THREAD_PRUNE: Schema = Schema {
    path: "schema",
    required: &["thread_ids"],
    properties: &[("thread_ids", ARRAY), ("strategy", Rule::Enum(&["delete", "keep_latest"], false))],
};

/// A prune.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ThreadPrune {
    pub(crate) thread_ids: Vec<String>,
    pub(crate) strategy: Option<String>,
}

/// `POST /assistants`.
pub(crate) const ASSISTANT_CREATE: Schema = Schema {
    path: "schema",
    required: &["graph_id"],
    properties: &[
        ("graph_id", STRING),
        ("assistant_id", STRING),
        ("config", OBJECT),
        ("context", OBJECT),
        ("metadata", OBJECT),
        ("if_exists", Rule::Enum(&["raise", "do_nothing"], false)),
        ("name", STRING),
        ("description", Rule::Types(&[Ty::String, Ty::Null])),
    ],
};

/// An assistant to create.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct AssistantCreate {
    pub(crate) graph_id: String,
    pub(crate) assistant_id: Option<String>,
    pub(crate) config: Option<Map<String, Value>>,
    pub(crate) context: Option<Map<String, Value>>,
    pub(crate) metadata: Option<Map<String, Value>>,
    pub(crate) if_exists: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) description: Option<String>,
}

/// `PATCH /assistants/{id}`.
pub(crate) const ASSISTANT_PATCH: Schema = Schema {
    path: "schema",
    required: &[],
    properties: &[
        ("graph_id", STRING),
        ("config", OBJECT),
        ("context", OBJECT),
        ("metadata", OBJECT),
        ("name", STRING),
        ("description", Rule::Types(&[Ty::String, Ty::Null])),
    ],
};

/// An assistant patch.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct AssistantPatch {
    pub(crate) graph_id: Option<String>,
    pub(crate) config: Option<Map<String, Value>>,
    pub(crate) context: Option<Map<String, Value>>,
    pub(crate) metadata: Option<Map<String, Value>>,
    pub(crate) name: Option<String>,
    pub(crate) description: Option<String>,
}

/// `POST /assistants/search` and `/assistants/count`.
pub(crate) const ASSISTANT_SEARCH: Schema = Schema {
    path: "schema",
    required: &[],
    properties: &[
        ("graph_id", STRING),
        ("name", STRING),
        ("metadata", OBJECT),
        ("limit", LIMIT),
        ("offset", OFFSET),
        ("sort_by", Rule::Enum(&["assistant_id", "graph_id", "name", "created_at", "updated_at"], true)),
        ("sort_order", SORT_ORDER),
        ("select", Rule::Items(ASSISTANT_FIELDS)),
    ],
};

/// An assistant search.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct AssistantSearch {
    pub(crate) graph_id: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) metadata: Option<Map<String, Value>>,
    pub(crate) limit: Option<i64>,
    pub(crate) offset: Option<i64>,
    pub(crate) sort_by: Option<String>,
    pub(crate) sort_order: Option<String>,
    pub(crate) select: Option<Vec<String>>,
}

/// `POST /assistants/{id}/versions`.
pub(crate) const VERSIONS: Schema = Schema {
    path: "schema",
    required: &[],
    properties: &[("metadata", OBJECT), ("limit", LIMIT), ("offset", OFFSET)],
};

/// A version search.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Versions {
    pub(crate) metadata: Option<Map<String, Value>>,
    pub(crate) limit: Option<i64>,
    pub(crate) offset: Option<i64>,
}

/// `POST /assistants/{id}/latest`.
pub(crate) const LATEST: Schema =
    Schema { path: "schema", required: &["version"], properties: &[("version", INTEGER)] };

/// A version to make the latest.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Latest {
    pub(crate) version: i64,
}

/// `PUT /store/items`.
pub(crate) const STORE_PUT: Schema = Schema {
    path: "schema",
    required: &["namespace", "key", "value"],
    properties: &[
        ("namespace", ARRAY),
        ("key", STRING),
        ("value", OBJECT),
        ("ttl", Rule::Types(&[Ty::Number, Ty::Null])),
    ],
};

/// An item to put.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct StorePut {
    pub(crate) namespace: Vec<String>,
    pub(crate) key: String,
    pub(crate) value: Map<String, Value>,
    /// Minutes the item lives (none: the store's default TTL).
    pub(crate) ttl: Option<f64>,
}

/// `DELETE /store/items`.
pub(crate) const STORE_DELETE: Schema =
    Schema { path: "schema", required: &["key"], properties: &[("namespace", ARRAY), ("key", STRING)] };

/// An item to delete.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct StoreDelete {
    pub(crate) namespace: Vec<String>,
    pub(crate) key: String,
}

/// `POST /store/items/search`.
pub(crate) const STORE_SEARCH: Schema = Schema {
    path: "schema",
    required: &[],
    properties: &[
        ("namespace_prefix", Rule::Types(&[Ty::Array, Ty::Null])),
        ("filter", Rule::Types(&[Ty::Object, Ty::Null])),
        ("limit", INTEGER),
        ("offset", INTEGER),
        ("query", Rule::Types(&[Ty::String, Ty::Null])),
        ("refresh_ttl", Rule::Types(&[Ty::Boolean, Ty::Null])),
    ],
};

/// A store search.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct StoreSearch {
    pub(crate) namespace_prefix: Option<Vec<String>>,
    pub(crate) filter: Option<Map<String, Value>>,
    pub(crate) limit: Option<i64>,
    pub(crate) offset: Option<i64>,
    pub(crate) query: Option<String>,
    /// Whether the found items' TTLs restart (none: the store's setting).
    pub(crate) refresh_ttl: Option<bool>,
}

/// `POST /store/namespaces`.
pub(crate) const STORE_NAMESPACES: Schema = Schema {
    path: "schema",
    required: &[],
    properties: &[
        ("prefix", Rule::Types(&[Ty::Array, Ty::Null])),
        ("suffix", Rule::Types(&[Ty::Array, Ty::Null])),
        ("max_depth", Rule::Types(&[Ty::Integer, Ty::Null])),
        ("limit", INTEGER),
        ("offset", INTEGER),
    ],
};

/// A namespace listing.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct StoreNamespaces {
    pub(crate) prefix: Option<Vec<String>>,
    pub(crate) suffix: Option<Vec<String>>,
    pub(crate) max_depth: Option<usize>,
    pub(crate) limit: Option<i64>,
    pub(crate) offset: Option<i64>,
}

/// `POST /runs/cancel`.
pub(crate) const RUNS_CANCEL: Schema = Schema {
    path: "schema",
    required: &[],
    properties: &[
        ("thread_id", Rule::Types(&[Ty::String, Ty::Null])),
        ("run_ids", Rule::Types(&[Ty::Array, Ty::Null])),
        ("status", Rule::Types(&[Ty::String, Ty::Null])),
    ],
};

/// Runs to cancel.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct RunsCancel {
    pub(crate) thread_id: Option<String>,
    pub(crate) run_ids: Option<Vec<String>>,
    pub(crate) status: Option<String>,
}

fn is_breakpoints(value: &Value) -> bool {
    match value {
        Value::String(s) => s == "*",
        Value::Array(items) => items.iter().all(Value::is_string),
        _ => false,
    }
}

fn is_input(value: &Value) -> bool {
    match value {
        Value::Array(items) => items.iter().all(Value::is_object),
        other => other.is_object(),
    }
}

const DURABILITY: Rule = Rule::Enum(&["sync", "async", "exit"], false);

/// What a cron's request and a cron patch share.
macro_rules! cron_properties {
    ($($extra:expr),* $(,)?) => {
        &[
            ("schedule", STRING),
            ("timezone", STRING),
            ("input", Rule::AnyOf(is_input)),
            ("metadata", OBJECT),
            ("config", OBJECT),
            ("context", OBJECT),
            ("webhook", STRING),
            ("interrupt_before", Rule::AnyOf(is_breakpoints)),
            ("interrupt_after", Rule::AnyOf(is_breakpoints)),
            ("enabled", BOOLEAN),
            ("stream_mode", Rule::AnyOf(is_stream_mode)),
            ("stream_subgraphs", BOOLEAN),
            ("stream_resumable", BOOLEAN),
            ("durability", DURABILITY),
            $($extra,)*
        ]
    };
}

/// `POST /runs/crons`.
pub(crate) const CRON_CREATE: Schema = Schema {
    path: "schema[\"components\"][\"schemas\"][\"CronCreate\"]",
    required: &["assistant_id", "schedule"],
    properties: cron_properties![
        ("assistant_id", STRING),
        ("end_time", STRING),
        ("on_run_completed", Rule::Enum(&["delete", "keep"], false)),
    ],
};

/// `POST /threads/{id}/runs/crons`.
pub(crate) const THREAD_CRON_CREATE: Schema = Schema {
    path: "schema[\"components\"][\"schemas\"][\"ThreadCronCreate\"]",
    required: &["assistant_id", "schedule"],
    properties: cron_properties![
        ("assistant_id", STRING),
        ("end_time", STRING),
        ("multitask_strategy", Rule::Enum(&["reject", "rollback", "interrupt", "enqueue"], false)),
    ],
};

/// A cron to create (what its runs are made from stays in the request's JSON: the cron's payload).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct CronCreate {
    pub(crate) assistant_id: String,
    pub(crate) schedule: String,
    pub(crate) timezone: Option<String>,
    pub(crate) end_time: Option<String>,
    pub(crate) metadata: Option<Map<String, Value>>,
    pub(crate) webhook: Option<String>,
    pub(crate) on_run_completed: Option<String>,
    pub(crate) enabled: Option<bool>,
}

/// `PATCH /runs/crons/{id}`.
pub(crate) const CRON_PATCH: Schema = Schema {
    path: "schema[\"components\"][\"schemas\"][\"CronPatch\"]",
    required: &[],
    properties: cron_properties![
        ("end_time", Rule::Types(&[Ty::String, Ty::Null])),
        ("on_run_completed", Rule::Enum(&["delete", "keep"], false)),
    ],
};

/// A cron patch; `end_time: null` clears the end time, an absent one leaves it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct CronPatch {
    pub(crate) schedule: Option<String>,
    pub(crate) timezone: Option<String>,
    pub(crate) metadata: Option<Map<String, Value>>,
    pub(crate) webhook: Option<String>,
    pub(crate) on_run_completed: Option<String>,
    pub(crate) enabled: Option<bool>,
}

/// The fields a cron search may select.
pub(crate) const CRON_FIELDS: &[&str] = &[
    "cron_id",
    "assistant_id",
    "thread_id",
    "on_run_completed",
    "end_time",
    "schedule",
    "timezone",
    "created_at",
    "updated_at",
    "user_id",
    "payload",
    "next_run_date",
    "metadata",
    "enabled",
];

fn is_cron_selection(value: &Value) -> bool {
    value
        .as_array()
        .is_some_and(|items| items.iter().all(|i| i.as_str().is_some_and(|f| CRON_FIELDS.contains(&f))))
}

/// `POST /runs/crons/search`.
pub(crate) const CRON_SEARCH: Schema = Schema {
    path: "schema",
    required: &[],
    properties: &[
        ("assistant_id", STRING),
        ("thread_id", STRING),
        ("enabled", BOOLEAN),
        ("metadata", OBJECT),
        ("limit", LIMIT),
        ("offset", OFFSET),
        (
            "sort_by",
            Rule::Enum(
                &[
                    "cron_id",
                    "assistant_id",
                    "thread_id",
                    "next_run_date",
                    "end_time",
                    "created_at",
                    "updated_at",
                ],
                false,
            ),
        ),
        ("sort_order", Rule::Enum(&["asc", "desc"], false)),
        ("select", Rule::AnyOf(is_cron_selection)),
    ],
};

/// A cron search (and count: its filters only).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct CronSearch {
    pub(crate) assistant_id: Option<String>,
    pub(crate) thread_id: Option<String>,
    pub(crate) enabled: Option<bool>,
    pub(crate) metadata: Option<Map<String, Value>>,
    pub(crate) limit: Option<i64>,
    pub(crate) offset: Option<i64>,
    pub(crate) sort_by: Option<String>,
    pub(crate) sort_order: Option<String>,
    pub(crate) select: Option<Vec<String>>,
}

/// `POST /runs/crons/count`.
pub(crate) const CRON_COUNT: Schema = Schema {
    path: "schema",
    required: &[],
    properties: &[("assistant_id", STRING), ("thread_id", STRING), ("metadata", OBJECT)],
};
