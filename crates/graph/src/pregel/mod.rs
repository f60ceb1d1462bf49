//! The superstep engine: plan tasks, run them concurrently, apply their writes, checkpoint, repeat.

pub(crate) mod apply;
pub(crate) mod calls;
pub(crate) mod channels;
pub(crate) mod emit;
pub(crate) mod execute;
pub(crate) mod graph;
pub(crate) mod parent;
pub(crate) mod plan;
pub(crate) mod run;
pub(crate) mod save;
pub(crate) mod saved;
pub(crate) mod saver;
pub(crate) mod sink;
pub(crate) mod spec;
pub(crate) mod step;
pub(crate) mod task;
pub(crate) mod task_runtime;
pub(crate) mod trace;
