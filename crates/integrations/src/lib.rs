//! # weft-integrations
//!
//! Implementations of weft's traits for outside services, one cargo feature each: `openai` (chat model
//! and embeddings), `sqlite` and `postgres` (checkpointer and store), `redis` (store and run queue).
//!
//! Nothing is implemented yet: the features exist so that dependents can name them, but enabling one adds
//! no code and no dependency. Each feature brings its dependency when its integration lands.
