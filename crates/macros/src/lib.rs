//! Procedural macros of weft. Re-exported by the crates that use them; depend on those instead.
