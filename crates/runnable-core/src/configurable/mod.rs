//! Runnables configured per call through `config.configurable`: rebuilt from declared fields
//! ([`Configurable`]) or chosen among alternatives ([`ConfigurableAlternatives`]).

mod alternatives;
mod fields;
mod owned_stream;

pub use alternatives::ConfigurableAlternatives;
pub use fields::{Configurable, ConfigurableField};
