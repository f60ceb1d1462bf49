//! The setters both agent builders share: what they pass on to the compiled graph.

/// Writes `name`, `checkpointer`, `store`, `interrupt_before` and `interrupt_after` for a builder with the
/// fields `compile: CompileConfig` and `name: Option<String>`.
macro_rules! compile_setters {
    () => {
        /// Names the agent: the graph's name, and the `name` of every AI message it writes.
        pub fn name(mut self, name: impl Into<String>) -> Self {
            let name = name.into();
            self.compile.name = Some(name.clone());
            self.name = Some(name);
            self
        }

        /// Saves checkpoints (threads, interrupts, resumes).
        pub fn checkpointer(mut self, checkpointer: Arc<dyn Checkpointer>) -> Self {
            self.compile.checkpointer = Some(checkpointer);
            self
        }

        /// Gives nodes, hooks and tools a long-term memory store ([`tool_store`](crate::tool_store)).
        pub fn store(mut self, store: Arc<dyn Store>) -> Self {
            self.compile.store = Some(store);
            self
        }

        /// Pauses before these nodes.
        pub fn interrupt_before<I: IntoIterator<Item = T>, T: Into<String>>(mut self, nodes: I) -> Self {
            self.compile.interrupt_before = nodes.into_iter().map(Into::into).collect();
            self
        }

        /// Pauses after these nodes.
        pub fn interrupt_after<I: IntoIterator<Item = T>, T: Into<String>>(mut self, nodes: I) -> Self {
            self.compile.interrupt_after = nodes.into_iter().map(Into::into).collect();
            self
        }
    };
}
