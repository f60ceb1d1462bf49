//! # weft-graph
//!
//! The Pregel engine lands here: `StateGraph` (build, then compile), channels and reducers, the superstep
//! loop, interrupts, and the `Checkpointer` and `Store` traits with in-memory implementations.
//!
//! In progress: nothing is exported yet. Until it is, compose with the runnables of `weft-runnable-core`.
