//! # weft-integrations
//!
//! Implementations of weft's traits for outside services, one cargo feature each: `openai` (chat model
//! and embeddings), `sqlite` and `postgres` (checkpointer and store), `redis` (checkpointer and store).
//!
//! - [`redis`] (feature `redis`): [`RedisSaver`](redis::RedisSaver) and [`RedisStore`](redis::RedisStore),
//!   checkpoints and long-term memory on plain Redis.
//!
//! The other features are declared so that dependents can name them, but add no code yet.

#[cfg(feature = "redis")]
pub mod redis;
