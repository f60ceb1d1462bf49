//! `RunnableConfig`: the per-call settings every runnable receives, and how children inherit them.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};
use uuid::Uuid;

use crate::events::EventSink;

/// Default recursion limit of plain runnables, as in langchain-core.
pub const DEFAULT_RECURSION_LIMIT: u32 = 25;

/// Per-call settings: tags, metadata, limits, user configuration and the event sink.
///
/// Child runs inherit the config of their parent: tags are a union, `metadata` and `configurable` merge
/// with the child's keys winning (see [`RunnableConfig::merge`]).
#[derive(Clone)]
pub struct RunnableConfig {
    /// Tags of this run and its children.
    pub tags: Vec<String>,
    /// Metadata of this run and its children.
    pub metadata: Map<String, Value>,
    /// Name of this run in events and traces; defaults to the runnable's own name.
    pub run_name: Option<String>,
    /// Id of this run; a fresh time-ordered id is made when absent.
    pub run_id: Option<Uuid>,
    /// The most sub-calls a batch or a parallel step runs at once; unbounded when absent.
    pub max_concurrency: Option<usize>,
    /// The most steps a recursive runnable may take; `None` means the runnable's own default
    /// ([`DEFAULT_RECURSION_LIMIT`] for plain runnables, a much higher one for graphs).
    pub recursion_limit: Option<u32>,
    /// User configuration: `session_id`, `thread_id`, configurable fields and alternatives, ...
    pub configurable: Map<String, Value>,
    /// Where run events go; `None` means nobody listens and no event is built.
    pub callbacks: Option<EventSink>,
    /// Typed values passed down to nested runnables (used by the graph engine).
    pub extensions: Extensions,
    /// Ids of the enclosing runs, root first.
    pub(crate) parent_ids: Arc<[Uuid]>,
}

impl Default for RunnableConfig {
    fn default() -> Self {
        Self {
            tags: Vec::new(),
            metadata: Map::new(),
            run_name: None,
            run_id: None,
            max_concurrency: None,
            recursion_limit: None,
            configurable: Map::new(),
            callbacks: None,
            extensions: Extensions::default(),
            parent_ids: Arc::from(Vec::new()),
        }
    }
}

impl fmt::Debug for RunnableConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunnableConfig")
            .field("tags", &self.tags)
            .field("metadata", &self.metadata)
            .field("run_name", &self.run_name)
            .field("run_id", &self.run_id)
            .field("max_concurrency", &self.max_concurrency)
            .field("recursion_limit", &self.recursion_limit)
            .field("configurable", &self.configurable)
            .field("callbacks", &self.callbacks.is_some())
            .finish_non_exhaustive()
    }
}

impl RunnableConfig {
    /// An empty config with defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tag.
    pub fn with_tag(mut self, tag: impl Into<String>) -> Self {
        let tag = tag.into();
        if !self.tags.contains(&tag) {
            self.tags.push(tag);
        }
        self
    }

    /// Adds a metadata entry.
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Adds a `configurable` entry.
    pub fn with_configurable(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.configurable.insert(key.into(), value.into());
        self
    }

    /// Sets the concurrency cap of batches and parallel steps.
    pub fn with_max_concurrency(mut self, max: usize) -> Self {
        self.max_concurrency = Some(max);
        self
    }

    /// Sets the recursion limit.
    pub fn with_recursion_limit(mut self, limit: u32) -> Self {
        self.recursion_limit = Some(limit);
        self
    }

    /// Sets the run name.
    pub fn with_run_name(mut self, name: impl Into<String>) -> Self {
        self.run_name = Some(name.into());
        self
    }

    /// Sets the event sink.
    pub fn with_callbacks(mut self, sink: EventSink) -> Self {
        self.callbacks = Some(sink);
        self
    }

    /// The recursion limit, or `default` when none is set.
    pub fn recursion_limit_or(&self, default: u32) -> u32 {
        self.recursion_limit.unwrap_or(default)
    }

    /// Ids of the enclosing runs, root first.
    pub fn parent_ids(&self) -> &[Uuid] {
        &self.parent_ids
    }

    /// Overlays `other` on `self`: tags are a union, metadata and configurable merge with `other` winning,
    /// scalar settings are taken from `other` when it sets them.
    pub fn merge(&self, other: &RunnableConfig) -> RunnableConfig {
        let mut merged = self.clone();
        for tag in &other.tags {
            if !merged.tags.contains(tag) {
                merged.tags.push(tag.clone());
            }
        }
        for (k, v) in &other.metadata {
            merged.metadata.insert(k.clone(), v.clone());
        }
        for (k, v) in &other.configurable {
            merged.configurable.insert(k.clone(), v.clone());
        }
        if other.run_name.is_some() {
            merged.run_name.clone_from(&other.run_name);
        }
        if other.run_id.is_some() {
            merged.run_id = other.run_id;
        }
        if other.max_concurrency.is_some() {
            merged.max_concurrency = other.max_concurrency;
        }
        if other.recursion_limit.is_some() {
            merged.recursion_limit = other.recursion_limit;
        }
        if other.callbacks.is_some() {
            merged.callbacks.clone_from(&other.callbacks);
        }
        merged.extensions.extend(&other.extensions);
        merged
    }

    /// The config a child run receives: the run name and id are reset (they name only this run), and
    /// `tag` is added when given (for example `seq:step:2`).
    pub fn child(&self, tag: Option<String>) -> RunnableConfig {
        let mut child = self.clone();
        child.run_name = None;
        child.run_id = None;
        if let Some(tag) = tag {
            if !child.tags.contains(&tag) {
                child.tags.push(tag);
            }
        }
        child
    }

    /// This config made into its own [`child`](Self::child) without a tag, in place (no copy).
    pub(crate) fn into_child(mut self) -> RunnableConfig {
        self.run_name = None;
        self.run_id = None;
        self
    }

    /// A string from `configurable`, if present.
    pub fn configurable_str(&self, key: &str) -> Option<&str> {
        self.configurable.get(key).and_then(Value::as_str)
    }
}

/// A small type map carried in the config, so that layers above (the graph engine) can hand typed values
/// to the runnables they call without this crate knowing their types.
#[derive(Clone, Default)]
pub struct Extensions {
    map: Option<Arc<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>>,
}

impl Extensions {
    /// Stores `value`, replacing any value of the same type.
    pub fn insert<T: Any + Send + Sync>(&mut self, value: T) {
        let map = Arc::make_mut(self.map.get_or_insert_with(Default::default));
        map.insert(TypeId::of::<T>(), Arc::new(value));
    }

    /// The value of type `T`, if one was stored.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.map.as_ref()?.get(&TypeId::of::<T>())?.downcast_ref::<T>()
    }

    /// Removes the value of type `T`.
    pub fn remove<T: Any + Send + Sync>(&mut self) {
        if let Some(map) = self.map.as_mut() {
            Arc::make_mut(map).remove(&TypeId::of::<T>());
        }
    }

    /// Copies every value of `other` into `self` (values of `other` win).
    pub fn extend(&mut self, other: &Extensions) {
        let Some(theirs) = other.map.as_ref() else { return };
        match self.map.as_mut() {
            None => self.map = Some(Arc::clone(theirs)),
            Some(ours) => {
                let ours = Arc::make_mut(ours);
                for (k, v) in theirs.iter() {
                    ours.insert(*k, Arc::clone(v));
                }
            }
        }
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.map.as_ref().is_none_or(|m| m.is_empty())
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Extensions").field("len", &self.map.as_ref().map_or(0, |m| m.len())).finish()
    }
}
