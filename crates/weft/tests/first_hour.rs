//! What a new user meets in the first hour, in the shorter form weft now allows: errors that convert with
//! `?` and read well from `main`, nodes and tools without ceremony.
#![allow(clippy::unwrap_used, missing_docs)]

use weft::prelude::*;

/// `main() -> weft::Result<()>` takes `?` on the errors of a weft program.
#[tokio::test]
async fn question_mark_converts_io_json_and_saver_errors() {
    async fn program(dir: &std::path::Path) -> weft::Result<()> {
        std::fs::create_dir_all(dir)?; // std::io::Error
        let settings: serde_json::Value = serde_json::from_str("{\"model\": \"gpt-4o-mini\"}")?; // serde_json
        assert_eq!(settings["model"], "gpt-4o-mini");
        #[cfg(feature = "sqlite")]
        let _saver = weft::sqlite::SqliteSaver::open(dir.join("threads.db")).await?; // CheckpointError
        std::fs::read_to_string(dir.join("missing.txt"))?;
        Ok(())
    }
    let dir = std::env::temp_dir().join(format!("weft-first-hour-{}", std::process::id()));
    let err = program(&dir).await.unwrap_err();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        err.downcast_custom::<std::io::Error>().map(std::io::Error::kind),
        Some(std::io::ErrorKind::NotFound)
    );
}

/// A failed run prints, in `main`'s `Error: {:?}`, the readable chain rather than nested variants.
#[tokio::test]
async fn a_failed_run_debug_prints_the_readable_chain() {
    let mut graph = StateGraph::<MessagesState>::new();
    graph.add_node("fetch", |_: MessagesState| async {
        std::fs::read_to_string("/no/such/weft/input.txt")?;
        Ok::<_, weft::Error>(MessagesState::update())
    });
    graph.add_edge(START, "fetch");
    let app = graph.compile().unwrap();
    // What `?` in `main() -> weft::Result<()>` makes of the run's error.
    let err: weft::Error =
        app.invoke(MessagesState::update(), &RunnableConfig::default()).await.unwrap_err().into();
    let readable = format!("{err:?}");
    assert!(readable.starts_with("node 'fetch' of graph"), "{readable}");
    assert!(readable.contains("failed at step 1: No such file or directory"), "{readable}");
    assert!(!readable.contains("Custom("), "{readable}");
    // The structure stays reachable.
    assert!(format!("{err:#?}").starts_with("Custom(\n    Node {"), "{err:#?}");
}

/// A tool that needs a value (a working directory, a database handle) is a `#[tool]` method taking
/// `&self`: `NAME_tool()` makes a tool holding a clone of the value. No statics.
#[derive(Clone)]
struct Workspace {
    root: std::path::PathBuf,
    /// A stand-in for a database handle: shared, and seen by every clone.
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Workspace {
    /// Reads a file of the workspace.
    #[tool]
    async fn read_file(
        &self,
        /// The file's path, relative to the workspace.
        path: String,
    ) -> weft::Result<String> {
        self.log.lock().unwrap().push(format!("read {path}"));
        Ok(std::fs::read_to_string(self.root.join(path))?)
    }

    /// Counts what the workspace has done.
    #[tool(name = "count_actions", return_direct)]
    fn count(&self, tool_call_id: Option<String>, #[inject(tool_call_id)] call: String) -> String {
        let _ = tool_call_id;
        format!("{} actions (call {call})", self.log.lock().unwrap().len())
    }
}

#[tokio::test]
async fn a_tool_method_captures_its_value() {
    let root = std::env::temp_dir().join(format!("weft-first-hour-tools-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("notes.txt"), "buy milk").unwrap();
    let workspace = Workspace { root: root.clone(), log: Default::default() };
    let read = workspace.read_file_tool();
    assert_eq!(Tool::name(&read), "read_file");
    assert_eq!(read.description(), "Reads a file of the workspace.");
    assert_eq!(
        read.args_schema()["properties"]["path"]["description"],
        "The file's path, relative to the workspace."
    );
    let config = RunnableConfig::default();
    let call = |name: &str, args| ToolCall { name: name.into(), args, id: Some("call-1".into()) };
    let out =
        read.invoke(call("read_file", serde_json::json!({"path": "notes.txt"})), &config).await.unwrap();
    assert_eq!(out.content.text(), "buy milk");
    // A failed read is the tool's error (a ToolNode reports it to the model), not a panic.
    let missing = read.invoke(call("read_file", serde_json::json!({"path": "none.txt"})), &config).await;
    let err = missing.unwrap_err();
    assert_eq!(
        err.downcast_custom::<std::io::Error>().map(std::io::Error::kind),
        Some(std::io::ErrorKind::NotFound)
    );
    // Bad arguments are refused with the tool's name.
    let bad = read.invoke(call("read_file", serde_json::json!({"path": 3})), &config).await.unwrap_err();
    assert!(bad.to_string().contains("read_file"), "{bad}");

    let count = workspace.count_tool();
    assert_eq!(Tool::name(&count), "count_actions");
    assert!(count.return_direct());
    // The injected argument is hidden from the model.
    assert!(count.model_schema()["properties"].get("call").is_none(), "{}", count.model_schema());
    let out = count.invoke(call("count_actions", serde_json::json!({})), &config).await.unwrap();
    assert_eq!(out.content.text(), "2 actions (call call-1)");
    // The method itself stays callable.
    assert_eq!(workspace.read_file("notes.txt".into()).await.unwrap(), "buy milk");
    let _ = std::fs::remove_dir_all(&root);
}

/// A node that needs a model is a `#[node]` method of a value holding it: no closure cloning the model
/// into an `async move` block, no `Ok::<_, weft::Error>`; the node factory's type is `BoxNode<S>`.
#[derive(Clone)]
struct Agent {
    model: weft::fakes::FakeChatModel,
}

impl Agent {
    #[node]
    async fn call_model(&self, state: MessagesState, rt: &Runtime) -> weft::Result<Command<MessagesState>> {
        let reply = self.model.invoke(state.messages.into(), rt.config()).await?;
        let done = reply.text().contains("done");
        let update = MessagesState::update().messages(vec![reply.into()]);
        Ok(Command::new().update(update).goto(if done { END } else { "notes" }))
    }
}

/// A free `async fn` node with an error of its own type: `?` on `std::io::Error`, no conversion by hand.
#[node]
async fn notes(state: MessagesState) -> Result<weft::graph::MessagesStateUpdate, std::io::Error> {
    let count = state.messages.len();
    if count > 10 {
        return Err(std::io::Error::other("too many messages"));
    }
    Ok(MessagesState::update().messages(vec![Message::human(format!("{count} messages so far"))]))
}

/// A node factory says what it returns in two words.
fn agent_node(replies: &[&str]) -> BoxNode<MessagesState> {
    Agent { model: weft::fakes::FakeChatModel::new(replies.iter().copied()) }.call_model_node()
}

#[tokio::test]
async fn nodes_without_ceremony() {
    let mut graph = StateGraph::<MessagesState>::new();
    graph.add_node("agent", agent_node(&["thinking", "done"])).add_node("notes", notes);
    graph.add_edge(START, "agent").add_edge("notes", "agent");
    let app: weft::graph::CompiledGraph<MessagesState> = graph.compile().unwrap();
    let input = MessagesState::update().messages(vec![Message::human("go")]);
    let out = app.invoke(input, &RunnableConfig::default()).await.unwrap();
    let texts: Vec<String> = out.value.messages.iter().map(Message::text).collect();
    assert_eq!(texts, ["go", "thinking", "2 messages so far", "done"]);
}

/// A compiled graph joins another under its own name, and a prompt of one human message needs no list.
#[tokio::test]
async fn a_subgraph_is_added_under_its_name_and_a_prompt_from_one_template() {
    let prompt = ChatPromptTemplate::from_template("Summarise {topic}").unwrap();
    let mut inner = StateGraph::<MessagesState>::new();
    inner.add_node("write", move |state: MessagesState| {
        let line = format!("{} notes", state.messages.len());
        MessagesState::update().messages(vec![Message::ai(line)])
    });
    inner.add_edge(START, "write");
    let research = inner.compile_with(CompileConfig::new().name("research")).unwrap();

    let mut outer = StateGraph::<MessagesState>::new();
    outer.add_subgraph(research);
    outer.add_edge(START, "research");
    let app = outer.compile().unwrap();
    let asked =
        prompt.invoke(serde_json::json!({"topic": "tides"}), &RunnableConfig::default()).await.unwrap();
    let input = MessagesState::update().messages(asked.into_messages());
    let out = app.invoke(input, &RunnableConfig::default()).await.unwrap();
    let texts: Vec<String> = out.value.messages.iter().map(Message::text).collect();
    assert_eq!(texts, ["Summarise tides", "1 notes"]);
}

/// `with_structured_output` takes `None` for the default method (function calling); the method is in the
/// prelude.
#[tokio::test]
async fn structured_output_has_a_default_method() {
    #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    struct Route {
        next: String,
    }
    let call =
        ToolCall { name: "Route".into(), args: serde_json::json!({"next": "search"}), id: Some("c1".into()) };
    let model = weft::fakes::FakeChatModel::new([weft::fakes::FakeReply::tool_calls([call])]);
    let router = model.with_structured_output::<Route>(None);
    let route = router.invoke("where next?".into(), &RunnableConfig::default()).await.unwrap();
    assert_eq!(route, Route { next: "search".into() });
    assert_eq!(StructuredOutputMethod::default(), StructuredOutputMethod::FunctionCalling);
}

/// A custom state with a `messages` field works with the prebuilt `ToolNode` and `tools_condition` by
/// deriving `HasMessages`.
#[derive(State, weft::agents::HasMessages, Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Support {
    #[state(add_messages)]
    messages: Messages,
    ticket: String,
}

/// Says which ticket it is.
#[tool]
fn ticket_status(
    /// The ticket.
    ticket: String,
) -> String {
    format!("{ticket} is open")
}

#[tokio::test]
async fn a_custom_state_derives_has_messages_for_the_prebuilt_nodes() {
    let mut graph = StateGraph::<Support>::new();
    graph.add_node("tools", ToolNode::new([ticket_status.shared()]));
    graph.add_conditional_edges(START, tools_condition::<Support>, None);
    let app = graph.compile().unwrap();
    let ask = AiMessage {
        tool_calls: vec![ToolCall {
            name: "ticket_status".into(),
            args: serde_json::json!({"ticket": "T-7"}),
            id: Some("c1".into()),
        }],
        ..AiMessage::new("")
    };
    let input = Support::update().messages(vec![ask.into()]).ticket("T-7".to_owned());
    let state = app.invoke(input, &RunnableConfig::default()).await.unwrap().value;
    assert_eq!(state.messages.last().map(Message::text).as_deref(), Some("T-7 is open"));
}

/// Prompt variables that are lists are written as JSON (README, "A taste"), not as Python's repr.
#[tokio::test]
async fn list_variables_render_as_json() {
    let prompt = PromptTemplate::from_template("Buy {items} ({count} things)").unwrap();
    let input = serde_json::json!({"items": ["tea", "milk"], "count": 2});
    let value = prompt.invoke(input, &RunnableConfig::default()).await.unwrap();
    assert_eq!(value.to_text(), "Buy [\"tea\",\"milk\"] (2 things)");
}
