//! Procedural macros of weft. Re-exported by the crates that use them; depend on those instead.

use proc_macro::TokenStream;

mod state;

/// Derives `weft_graph::State` for a struct with named fields: one channel per field, and a partial-update
/// type `<Name>Update` (same visibility) with one `Option` per field, builder methods
/// (`<Name>Update::new().field(v)`, `<Name>::update().field(v)`, `.overwrite_field(v)` on reducer fields),
/// `From<Name>`, serde (`None` fields skipped, overwrites as `{"__overwrite__": v}`) and `IntoNodeOutput`.
///
/// Field attributes (`#[state(...)]`), one per field:
/// - none: a last-value channel (two writes in one step are an error naming the key);
/// - `reducer = path`: writes are folded with `fn(&mut T, T) -> R`, where `R` is `()` or
///   `Result<(), E: Display>` (an error becomes `UpdateError::Reducer` naming the key);
/// - `append`: a `Vec<T>` extended by each write;
/// - `add_messages`: a `Messages` list merged by id (writes are `Vec<Message>`);
/// - `ephemeral`: an `Option<T>` cleared at the end of a step in which it was not written (writes are `T`);
/// - `topic` / `topic(accumulate)`: a `Vec<T>` of every item written, cleared at the end of a step in which
///   it was not written unless it accumulates;
/// - `untracked`: a last-value channel that is never checkpointed.
///
/// On the struct, `#[state(crate = path)]` names the `weft_graph` crate when it is re-exported elsewhere.
#[proc_macro_derive(State, attributes(state))]
pub fn derive_state(item: TokenStream) -> TokenStream {
    match syn::parse::<syn::DeriveInput>(item) {
        Ok(input) => state::expand(input).unwrap_or_else(syn::Error::into_compile_error).into(),
        Err(err) => err.into_compile_error().into(),
    }
}
