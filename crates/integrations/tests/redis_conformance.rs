//! The checkpointer conformance suite against the Redis at 127.0.0.1:6379, each case on a key prefix of
//! its own (deleted when the case ends).
#![cfg(feature = "redis")]
#![allow(clippy::unwrap_used, missing_docs)]

mod redis_common;

weft_graph::checkpointer_conformance_tests!(saver_or_skip!("conformance"));
