//! Procedural macros of weft. Re-exported by the crates that use them; depend on those instead.

use proc_macro::TokenStream;

mod destinations;
mod func;
mod has_messages;
mod krate;
mod node;
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
///   `::weft::core` when the calling crate depends on the `weft` facade (package `weft-llm`) and not on the core crate.
///
/// The original function stays callable as `<name>::run(...)`.
///
/// On a method taking `&self` (in an `impl` block), the method stays as it is and a second one,
/// `<name>_tool(&self)`, returns a `StructuredTool` that holds a clone of the value: a tool that needs a
/// database handle or a working folder captures it this way, without statics (the type must be
/// `Clone + Send + Sync + 'static`; wrap a handle in an `Arc` if need be).
///
/// ```
/// use weft_runnable_core::{Tool, tool};
///
/// #[derive(Clone)]
/// struct Shop {
///     prices: std::sync::Arc<std::collections::HashMap<String, u32>>,
/// }
///
/// impl Shop {
///     /// Looks up the price of an item, in cents.
///     #[tool]
///     fn price(
///         &self,
///         /// The item.
///         item: String,
///     ) -> Result<u32, String> {
///         self.prices.get(&item).copied().ok_or(format!("no item {item}"))
///     }
/// }
///
/// let shop = Shop { prices: std::sync::Arc::new([("tea".to_owned(), 250)].into()) };
/// let tool = shop.price_tool();
/// assert_eq!(Tool::name(&tool), "price");
/// assert_eq!(tool.description(), "Looks up the price of an item, in cents.");
/// assert_eq!(shop.price("tea".into()), Ok(250));
/// ```
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

/// Makes an async function a task of LangGraph's functional API (`@task`): a plain function of the same
/// parameters that, called inside an [`entrypoint`](macro@entrypoint) (or another task), returns a
/// `weft_graph::func::TaskFuture` of its result. The result is saved with the run, so a resumed run gets
/// it back without running the task again. Await several calls together to run them in parallel.
///
/// - the function is `async`, not generic, and returns weft's `Result<T>`; its parameters (owned,
///   `Serialize + Clone`) are the task's input: the one parameter's value, or a tuple of several;
/// - `name = ".."` names the task (its `updates` chunks carry the name; the function's name by default);
/// - `retry = policy` (repeatable) adds a `RetryPolicy`, as `Task::with_retry` does;
/// - `crate = path` names the path of `weft_graph` (`::weft::graph` through the facade).
///
/// Called outside an entrypoint, the future fails with `FuncError::OutsideEntrypoint`. The builder this
/// stands for is `weft_graph::func::task`, for tasks made at run time (closures that capture values).
///
/// ```
/// use weft_graph::func::{entrypoint, task};
/// use weft_graph::{Command, InMemorySaver, Runtime};
/// use weft_runnable_core::{Result, RunnableConfig};
///
/// /// Writes one part of an essay (a model call in a real program).
/// #[task]
/// async fn write(topic: String, part: u32) -> Result<String> {
///     Ok(format!("part {part} on {topic}"))
/// }
///
/// /// Writes two parts together, then asks for approval.
/// #[entrypoint]
/// async fn review(topic: String, rt: Runtime) -> Result<String> {
///     let (a, b) = futures::try_join!(write(topic.clone(), 1), write(topic, 2))?;
///     let approved: bool = rt.interrupt(format!("{a}; {b}"))?;
///     Ok(if approved { format!("{a}; {b}") } else { "rejected".to_owned() })
/// }
///
/// # tokio_test::block_on(async {
/// let app = review().compile_with(
///     weft_graph::CompileConfig::new().checkpointer(std::sync::Arc::new(InMemorySaver::new())),
/// )?;
/// let thread = RunnableConfig::default().with_configurable("thread_id", "1");
/// let paused = app.invoke("cats".to_owned(), &thread).await?;
/// assert_eq!(paused.interrupts[0].value, "part 1 on cats; part 2 on cats");
/// let done = app.invoke(Command::resume(true), &thread).await?;
/// assert_eq!(done.value.into_value().as_deref(), Some("part 1 on cats; part 2 on cats"));
/// # Ok::<(), weft_runnable_core::Error>(())
/// # }).unwrap();
/// ```
#[proc_macro_attribute]
pub fn task(attr: TokenStream, item: TokenStream) -> TokenStream {
    match syn::parse::<syn::ItemFn>(item) {
        Ok(item) => {
            func::expand_task(attr.into(), item).unwrap_or_else(syn::Error::into_compile_error).into()
        }
        Err(err) => err.into_compile_error().into(),
    }
}

/// Makes an async function an entrypoint of LangGraph's functional API (`@entrypoint`): a function of no
/// parameters returning its `StateGraph` (one node, named after the function), to compile with a
/// checkpointer, store or cache. The run's input is the first parameter's type (or a `Command` to
/// resume); its state a `FuncState` whose `value()` is what the function returned.
///
/// - the function is `async`, not generic, and returns weft's `Result<R>`, where `R` is the returned
///   value, or `Final<O, P>` to return `O` and save `P` for the thread's next run;
/// - parameters: the input, then optionally `previous: Option<P>` (what the thread's last run saved) and a
///   `Runtime` (for `interrupt`, the store, the stream writer), in that order;
/// - `name = ".."` names the entrypoint's node (the function's name by default);
/// - `crate = path` names the path of `weft_graph` (`::weft::graph` through the facade).
///
/// Inside, [`task`](macro@task) functions run as the run's tasks. The builder this stands for is
/// `weft_graph::func::entrypoint`, for entrypoints made at run time.
///
/// ```
/// use weft_graph::InMemorySaver;
/// use weft_graph::func::{Final, entrypoint};
/// use weft_runnable_core::{Result, RunnableConfig};
///
/// /// Returns the running total, and saves it for the thread's next run.
/// #[entrypoint(name = "accumulate")]
/// async fn total(add: i64, previous: Option<i64>) -> Result<Final<String, i64>> {
///     let sum = previous.unwrap_or(0) + add;
///     Ok(Final::new(format!("total {sum}"), sum))
/// }
///
/// # tokio_test::block_on(async {
/// let app = total().compile_with(
///     weft_graph::CompileConfig::new().checkpointer(std::sync::Arc::new(InMemorySaver::new())),
/// )?;
/// let thread = RunnableConfig::default().with_configurable("thread_id", "1");
/// app.invoke(2, &thread).await?;
/// let out = app.invoke(3, &thread).await?;
/// assert_eq!(out.value.into_value().as_deref(), Some("total 5"));
/// # Ok::<(), weft_runnable_core::Error>(())
/// # }).unwrap();
/// ```
#[proc_macro_attribute]
pub fn entrypoint(attr: TokenStream, item: TokenStream) -> TokenStream {
    match syn::parse::<syn::ItemFn>(item) {
        Ok(item) => {
            func::expand_entrypoint(attr.into(), item).unwrap_or_else(syn::Error::into_compile_error).into()
        }
        Err(err) => err.into_compile_error().into(),
    }
}

/// Makes an `async fn` a graph node as it reads: `(state)` or `(state, runtime)`, the runtime by value or
/// by reference (`&Runtime`), returning an update, a `Command` (or anything a node returns), or a
/// `Result` of one with **any** error (weft's own as it is, a `std::error::Error` kept whole, anything
/// `Display` as its message).
///
/// On a free function, the function keeps its name and becomes `async fn(state, Runtime) ->
/// weft::Result<...>`, which `add_node("name", name)` takes. On a method taking `&self`, the method stays
/// as it is and `NAME_node(&self)` returns a [`BoxNode`](../weft_graph/type.BoxNode.html) holding a clone
/// of the value: a node that needs a model or a client captures it this way, with no closure that clones
/// it into an `async move` block (`#[node(state = S)]` names the graph's state when the first parameter
/// is another input type).
///
/// `crate = path` names the path of `weft_graph` (`::weft::graph` through the facade).
///
/// ```
/// use weft_graph::{BoxNode, MessagesState, Runtime, START, StateGraph, node};
///
/// #[derive(Debug)]
/// struct Closed;
///
/// impl std::fmt::Display for Closed {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("the archive is closed")
///     }
/// }
///
/// impl std::error::Error for Closed {}
///
/// /// Reads nothing, fails with an error of its own.
/// #[node]
/// async fn archive(_state: MessagesState, _runtime: &Runtime) -> Result<MessagesState, Closed> {
///     Err(Closed)
/// }
///
/// #[derive(Clone)]
/// struct Greeter {
///     greeting: String,
/// }
///
/// impl Greeter {
///     #[node]
///     async fn greet(&self, state: MessagesState) -> Result<weft_graph::MessagesStateUpdate, String> {
///         let who = state.messages.len();
///         let text = format!("{} ({who})", self.greeting);
///         Ok(MessagesState::update().messages(vec![weft_runnable_core::Message::ai(text)]))
///     }
/// }
///
/// let greeter = Greeter { greeting: "hello".into() };
/// let node: BoxNode<MessagesState> = greeter.greet_node();
/// let mut graph = StateGraph::<MessagesState>::new();
/// graph.add_node("greet", node).add_node("archive", archive);
/// graph.add_edge(START, "greet").add_edge("greet", "archive");
/// let app = graph.compile().unwrap();
/// # tokio_test::block_on(async {
/// let err = app.invoke(MessagesState::update(), &Default::default()).await.unwrap_err();
/// assert!(err.to_string().contains("the archive is closed"), "{err}");
/// # });
/// ```
#[proc_macro_attribute]
pub fn node(attr: TokenStream, item: TokenStream) -> TokenStream {
    node::expand(attr.into(), item.into()).unwrap_or_else(syn::Error::into_compile_error).into()
}

/// Derives `weft_agents::HasMessages` for a state struct (also `#[derive(State)]`): its conversation is
/// the field named `messages`, or else the one field marked `#[state(add_messages)]`. The prebuilt agents
/// (`ToolNode`, `tools_condition`, `create_react_agent`) then work on the state as they do on
/// `MessagesState`. `#[has_messages(crate = path)]` names the path of `weft_agents` (by default
/// `::weft_agents`, or `::weft::agents` through the facade). The example is on the trait's page.
#[proc_macro_derive(HasMessages, attributes(has_messages, state))]
pub fn derive_has_messages(input: TokenStream) -> TokenStream {
    match syn::parse::<syn::DeriveInput>(input) {
        Ok(input) => has_messages::expand(input).unwrap_or_else(syn::Error::into_compile_error).into(),
        Err(err) => err.into_compile_error().into(),
    }
}
