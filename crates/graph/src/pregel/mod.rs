//! The superstep engine: plan tasks, run them concurrently, apply their writes, checkpoint, repeat.

pub(crate) mod channels;
pub(crate) mod run;
pub(crate) mod saver;
pub(crate) mod spec;
pub(crate) mod stamp;
pub(crate) mod task;
