//! # weft-agents
//!
//! Prebuilt agents, built from the public API of `weft-runnable-core` and `weft-graph` only.
//!
//! - [`text_react`]: the classic text ReAct loop for models without function calling,
//!   [`AgentExecutor`] with [`create_text_react_agent`].

pub mod text_react;

pub use text_react::{AgentExecutor, create_text_react_agent};

/// The crate's README, whose example is tested as a doc test so that it cannot fall out of date.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
