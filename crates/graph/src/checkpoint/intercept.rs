//! A saver that wraps another and forwards every call to it, except the calls its [`Intercept`] handles.
//!
//! Counting a saver's traffic, adding latency, failing some saves, or changing one policy (such as
//! [`get_next_version`](Checkpointer::get_next_version)) of an existing saver takes one `impl Intercept`
//! with the methods that differ; [`Intercepted`] forwards the rest.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//!
//! use async_trait::async_trait;
//! use weft_graph::checkpoint::{CheckpointError, Checkpointer, InMemorySaver, Intercept, Intercepted, SaveOp};
//!
//! /// Counts the batches of saves handed to the saver.
//! #[derive(Debug, Default)]
//! struct CountBatches(AtomicUsize);
//!
//! #[async_trait]
//! impl Intercept for CountBatches {
//!     async fn put_batch(&self, inner: &dyn Checkpointer, ops: Vec<SaveOp>) -> Result<(), CheckpointError> {
//!         self.0.fetch_add(1, Ordering::Relaxed);
//!         inner.put_batch(ops).await
//!     }
//! }
//!
//! let saver: Arc<dyn Checkpointer> = Arc::new(InMemorySaver::new());
//! let counted = Arc::new(Intercepted::new(saver, CountBatches::default()));
//! assert_eq!(counted.intercept().0.load(Ordering::Relaxed), 0);
//! ```

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::{
    ChannelAppends, ChannelVersion, ChannelVersions, Checkpoint, CheckpointConfig, CheckpointError,
    CheckpointMetadata, CheckpointTuple, Checkpointer, ListOptions, SaveOp,
};

/// What a wrapper does around the calls of a saver of type `C`: each method receives the wrapped saver
/// (`inner`) and by default forwards the call to it unchanged. Override the methods whose calls differ;
/// logic that several of them share (a `put` saved as a one-op batch, say) belongs in a method of the
/// implementing type that takes `inner`.
///
/// A type with no overrides (`impl Intercept for MyGuard {}`) makes [`Intercepted`] a plain forwarder
/// that keeps the value alive as long as the saver, such as a guard that drops a test database.
#[async_trait]
pub trait Intercept<C: Checkpointer + ?Sized = dyn Checkpointer>: fmt::Debug + Send + Sync {
    /// Intercepts [`Checkpointer::get_tuple`].
    async fn get_tuple(
        &self,
        inner: &C,
        config: &CheckpointConfig,
    ) -> Result<Option<CheckpointTuple>, CheckpointError> {
        inner.get_tuple(config).await
    }

    /// Intercepts [`Checkpointer::list`].
    async fn list(
        &self,
        inner: &C,
        config: Option<&CheckpointConfig>,
        options: ListOptions,
    ) -> Result<Vec<CheckpointTuple>, CheckpointError> {
        inner.list(config, options).await
    }

    /// Intercepts [`Checkpointer::put`].
    async fn put(
        &self,
        inner: &C,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<CheckpointConfig, CheckpointError> {
        inner.put(config, checkpoint, metadata, new_versions).await
    }

    /// Intercepts [`Checkpointer::get_next_version`].
    fn get_next_version(&self, inner: &C, current: Option<&str>) -> Result<ChannelVersion, CheckpointError> {
        inner.get_next_version(current)
    }

    /// Intercepts [`Checkpointer::stores_appends`].
    fn stores_appends(&self, inner: &C) -> bool {
        inner.stores_appends()
    }

    /// Intercepts [`Checkpointer::put_with_appends`].
    async fn put_with_appends(
        &self,
        inner: &C,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        appends: ChannelAppends,
    ) -> Result<CheckpointConfig, CheckpointError> {
        inner.put_with_appends(config, checkpoint, metadata, new_versions, appends).await
    }

    /// Intercepts [`Checkpointer::save_now`].
    fn save_now(&self, inner: &C, op: SaveOp) -> Result<Option<SaveOp>, CheckpointError> {
        inner.save_now(op)
    }

    /// Intercepts [`Checkpointer::put_batch`].
    async fn put_batch(&self, inner: &C, ops: Vec<SaveOp>) -> Result<(), CheckpointError> {
        inner.put_batch(ops).await
    }

    /// Intercepts [`Checkpointer::put_writes`].
    async fn put_writes(
        &self,
        inner: &C,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<(), CheckpointError> {
        inner.put_writes(config, writes, task_id, task_path).await
    }

    /// Intercepts [`Checkpointer::delete_thread`].
    async fn delete_thread(&self, inner: &C, thread_id: &str) -> Result<(), CheckpointError> {
        inner.delete_thread(thread_id).await
    }

    /// Intercepts [`Checkpointer::copy_thread`].
    async fn copy_thread(&self, inner: &C, src: &str, dst: &str) -> Result<(), CheckpointError> {
        inner.copy_thread(src, dst).await
    }

    /// Intercepts [`Checkpointer::prune`].
    async fn prune(&self, inner: &C, thread_id: &str, keep_latest: usize) -> Result<(), CheckpointError> {
        inner.prune(thread_id, keep_latest).await
    }

    /// Intercepts [`Checkpointer::list_ids`].
    async fn list_ids(&self, inner: &C, config: &CheckpointConfig) -> Result<Vec<String>, CheckpointError> {
        inner.list_ids(config).await
    }
}

/// A [`Checkpointer`] made of a saver (`C`, any saver by default) and an [`Intercept`] (`I`) that sees
/// every call first.
#[derive(Debug)]
pub struct Intercepted<I, C: ?Sized = dyn Checkpointer> {
    inner: Arc<C>,
    intercept: I,
}

impl<I, C: ?Sized> Intercepted<I, C> {
    /// Wraps `inner`, handing every call to `intercept` first.
    pub fn new(inner: Arc<C>, intercept: I) -> Self {
        Self { inner, intercept }
    }

    /// The wrapped saver.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    /// What intercepts the calls.
    pub fn intercept(&self) -> &I {
        &self.intercept
    }

    /// The wrapped saver and what intercepted its calls.
    pub fn into_parts(self) -> (Arc<C>, I) {
        (self.inner, self.intercept)
    }
}

#[async_trait]
impl<I, C> Checkpointer for Intercepted<I, C>
where
    I: Intercept<C>,
    C: Checkpointer + ?Sized,
{
    async fn get_tuple(&self, config: &CheckpointConfig) -> Result<Option<CheckpointTuple>, CheckpointError> {
        self.intercept.get_tuple(&self.inner, config).await
    }

    async fn list(
        &self,
        config: Option<&CheckpointConfig>,
        options: ListOptions,
    ) -> Result<Vec<CheckpointTuple>, CheckpointError> {
        self.intercept.list(&self.inner, config, options).await
    }

    async fn put(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Result<CheckpointConfig, CheckpointError> {
        self.intercept.put(&self.inner, config, checkpoint, metadata, new_versions).await
    }

    fn get_next_version(&self, current: Option<&str>) -> Result<ChannelVersion, CheckpointError> {
        self.intercept.get_next_version(&self.inner, current)
    }

    fn stores_appends(&self) -> bool {
        self.intercept.stores_appends(&self.inner)
    }

    async fn put_with_appends(
        &self,
        config: &CheckpointConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        appends: ChannelAppends,
    ) -> Result<CheckpointConfig, CheckpointError> {
        self.intercept
            .put_with_appends(&self.inner, config, checkpoint, metadata, new_versions, appends)
            .await
    }

    fn save_now(&self, op: SaveOp) -> Result<Option<SaveOp>, CheckpointError> {
        self.intercept.save_now(&self.inner, op)
    }

    async fn put_batch(&self, ops: Vec<SaveOp>) -> Result<(), CheckpointError> {
        self.intercept.put_batch(&self.inner, ops).await
    }

    async fn put_writes(
        &self,
        config: &CheckpointConfig,
        writes: Vec<(String, Value)>,
        task_id: &str,
        task_path: &str,
    ) -> Result<(), CheckpointError> {
        self.intercept.put_writes(&self.inner, config, writes, task_id, task_path).await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<(), CheckpointError> {
        self.intercept.delete_thread(&self.inner, thread_id).await
    }

    async fn copy_thread(&self, src: &str, dst: &str) -> Result<(), CheckpointError> {
        self.intercept.copy_thread(&self.inner, src, dst).await
    }

    async fn prune(&self, thread_id: &str, keep_latest: usize) -> Result<(), CheckpointError> {
        self.intercept.prune(&self.inner, thread_id, keep_latest).await
    }

    async fn list_ids(&self, config: &CheckpointConfig) -> Result<Vec<String>, CheckpointError> {
        self.intercept.list_ids(&self.inner, config).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::checkpoint::{InMemorySaver, conformance};

    /// Counts `put` calls and forwards every call.
    #[derive(Debug, Default)]
    struct CountPuts(AtomicUsize);

    #[async_trait]
    impl Intercept for CountPuts {
        async fn put(
            &self,
            inner: &dyn Checkpointer,
            config: &CheckpointConfig,
            checkpoint: Checkpoint,
            metadata: CheckpointMetadata,
            new_versions: ChannelVersions,
        ) -> Result<CheckpointConfig, CheckpointError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            inner.put(config, checkpoint, metadata, new_versions).await
        }
    }

    #[tokio::test]
    async fn a_forwarding_wrapper_passes_the_conformance_suite() {
        let saver =
            Intercepted::new(Arc::new(InMemorySaver::new()) as Arc<dyn Checkpointer>, CountPuts::default());
        let failures = conformance::run_all(&saver).await;
        assert!(failures.is_empty(), "{failures:#?}");
        assert!(saver.intercept().0.load(Ordering::SeqCst) > 0, "the suite's puts go through the intercept");
    }

    /// Intercepts nothing.
    #[derive(Debug)]
    struct Plain;

    impl Intercept for Plain {}

    #[test]
    fn policies_come_from_the_wrapped_saver() {
        let inner = Arc::new(InMemorySaver::new());
        assert!(inner.stores_appends(), "the trait's default is false: the check below tells forwarding");
        let saver = Intercepted::new(inner as Arc<dyn Checkpointer>, Plain);
        assert!(saver.stores_appends());
    }
}
