//! Procedural macros of weft. Re-exported by the crates that use them; depend on those instead.

use proc_macro::TokenStream;

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
/// ```ignore
/// /// Adds two numbers.
/// #[tool]
/// async fn add(
///     /// The first number.
///     a: i64,
///     b: i64,
/// ) -> i64 {
///     a + b
/// }
/// // `add` is now a tool: `add.invoke(tool_call, &config)`, `model.bind_tools([&add], None)`.
/// ```
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    tool::expand(attr.into(), item.into()).unwrap_or_else(syn::Error::into_compile_error).into()
}
