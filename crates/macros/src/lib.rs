//! Procedural macros of weft. Re-exported by the crates that use them; depend on those instead.

use proc_macro::TokenStream;

mod destinations;
mod krate;
mod state;
mod tool;

/// Turns a documented function into a tool: a unit struct with the function's name that implements
/// `Tool` and `Runnable<ToolCall, ToolMessage>`.
///
/// - name: the function's name (or `name = "..."`);
/// - description: the doc comment (or `description = "..."`);
/// - arguments: one field per parameter, with the parameter's doc comment as its description; the JSON
///   schema is the schemars schema of those fields;
/// - a parameter of type `&ToolContext` receives the context and is not an argument;
/// - `#[inject(tool_call_id)]`, `#[inject(state)]`, `#[inject(state = "key")]` or
///   `#[inject(value = "name")]` on a parameter fills it from the context and hides it from the model;
/// - the function may be sync or async and return `T` or `Result<T, E>`, where `T` is a `ToolOutput` or
///   any `Serialize` value (strings become text, other values JSON) and `E` is weft's `Error`, any
///   `std::error::Error`, or anything `Display`;
/// - `return_direct` marks the tool as ending an agent's loop;
/// - `crate = path` names the path of `weft_runnable_core`; by default it is `::weft_runnable_core`, or
///   `::weft::core` when the calling crate depends on the `weft` facade and not on the core crate.
///
/// The original function stays callable as `<name>::run(...)`.
///
/// ```
/// use serde_json::json;
/// use weft_runnable_core::{Runnable, RunnableConfig, Tool, ToolCall, tool};
///
/// /// Adds two numbers.
/// #[tool]
/// async fn add(
///     /// The first number.
///     a: i64,
///     b: i64,
/// ) -> i64 {
///     a + b
/// }
///
/// // `add` is now a tool: `add.invoke(tool_call, &config)`, `model.bind_tools([&add], None)`.
/// assert_eq!(Tool::name(&add), "add");
/// assert_eq!(add.description(), "Adds two numbers.");
/// assert_eq!(add.args_schema()["properties"]["a"]["description"], "The first number.");
/// # tokio_test::block_on(async {
/// let call = ToolCall { name: "add".into(), args: json!({"a": 2, "b": 3}), id: Some("c1".into()) };
/// assert_eq!(add.invoke(call, &RunnableConfig::default()).await?.content.text(), "5");
/// assert_eq!(add::run(2, 3).await, 5);
/// # Ok::<(), weft_runnable_core::Error>(())
/// # }).unwrap();
/// ```
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    tool::expand(attr.into(), item.into()).unwrap_or_else(syn::Error::into_compile_error).into()
}

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
/// On the struct, `#[state(crate = path)]` names the path of the `weft_graph` crate; by default it is
/// `::weft_graph`, or `::weft::graph` when the calling crate depends on the `weft` facade and not on
/// `weft-graph`.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use weft_graph::State;
///
/// #[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
/// struct Research {
///     topic: String,
///     #[state(append)]
///     notes: Vec<String>,
/// }
///
/// let mut state = Research::default();
/// state.apply(vec![Research::update().topic("tides").notes(vec!["moon".into()])]).unwrap();
/// state.apply(vec![ResearchUpdate::new().notes(vec!["sun".into()])]).unwrap();
/// assert_eq!(state.topic, "tides");
/// assert_eq!(state.notes, ["moon", "sun"]);
/// // Two writes to a last-value field in one step are an error naming the field.
/// let twice = vec![Research::update().topic("a"), Research::update().topic("b")];
/// assert!(state.apply(twice).unwrap_err().to_string().contains("topic"));
/// ```
#[proc_macro_derive(State, attributes(state))]
pub fn derive_state(item: TokenStream) -> TokenStream {
    match syn::parse::<syn::DeriveInput>(item) {
        Ok(input) => state::expand(input).unwrap_or_else(syn::Error::into_compile_error).into(),
        Err(err) => err.into_compile_error().into(),
    }
}

/// Derives `weft_graph::Destinations` and `weft_graph::IntoRoutes` for an enum of unit variants, the
/// destinations of a router: each variant is a node, named after the variant in snake case
/// (`CallTool` → `call_tool`), or `#[route(name = "node")]`, or `END` with `#[route(end)]`. A router that
/// returns the enum needs no path map: its destinations are drawn and checked at compile (an unknown
/// node is a compile error naming it). On the enum, `#[route(crate = path)]` names the path of the
/// `weft_graph` crate.
///
/// ```
/// use weft_graph::Destinations;
///
/// #[derive(Destinations)]
/// enum Next {
///     Agent,
///     #[route(name = "search_web")]
///     Search,
///     #[route(end)]
///     Finish,
/// }
///
/// assert_eq!(<Next as Destinations>::destinations(), ["agent", "search_web", "__end__"]);
/// ```
#[proc_macro_derive(Destinations, attributes(route))]
pub fn derive_destinations(item: TokenStream) -> TokenStream {
    match syn::parse::<syn::DeriveInput>(item) {
        Ok(input) => destinations::expand(input).unwrap_or_else(syn::Error::into_compile_error).into(),
        Err(err) => err.into_compile_error().into(),
    }
}
