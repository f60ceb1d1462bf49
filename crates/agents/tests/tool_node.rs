//! ToolNode: call order, concurrency, message fields, error policy, commands, injected arguments, `Send`
//! dispatch, interrupts from tools; and tools_condition.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{add, asks, boom, call, echo, kinds, texts, thread};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use weft_agents::{
    HandleToolErrors, HasMessages, ToolCallWithContext, ToolNode, ToolNodeError, tool_command, tool_runtime,
    tool_store, tools_condition,
};
use weft_graph::checkpoint::InMemorySaver;
use weft_graph::{
    Command, CompileConfig, CompiledGraph, END, GraphError, GraphInput, GraphResult, InMemoryStore, Messages,
    MessagesState, START, Send, State, StateGraph,
};
use weft_runnable_core::{
    Error, InjectedArg, Message, Runnable, RunnableConfig, SharedTool, StructuredTool, Tool, ToolCall,
    ToolContext, ToolExt, ToolMessage, ToolStatus,
};

fn graph(node: ToolNode) -> CompiledGraph<MessagesState> {
    let mut g = StateGraph::<MessagesState>::new();
    g.add_node("tools", node);
    g.add_edge(START, "tools");
    g.compile().unwrap()
}

async fn run(node: ToolNode, calls: Vec<ToolCall>) -> GraphResult<Vec<Message>> {
    let input = MessagesState::update().messages(vec![Message::human("go"), asks(calls).into()]);
    let out = graph(node).invoke(input, &RunnableConfig::default()).await?;
    Ok(out.value.messages.into_vec())
}

fn tool_messages(messages: &[Message]) -> Vec<ToolMessage> {
    messages.iter().filter_map(Message::as_tool).cloned().collect()
}

fn slow(name: &'static str, millis: u64) -> SharedTool {
    StructuredTool::from_fn(name, "Waits.", json!({"type": "object"}), move |_args: Value, _ctx| async move {
        tokio::time::sleep(Duration::from_millis(millis)).await;
        Ok(format!("{name} done"))
    })
    .shared()
}

#[tokio::test]
async fn answers_every_call_in_call_order_with_content_id_name_and_status() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let node = ToolNode::new([add(), echo(log), slow("slow", 40)]);
    let calls = vec![
        call("slow", json!({}), "c1"),
        call("add", json!({"a": 2, "b": 3}), "c2"),
        call("echo", json!({"text": "hi"}), "c3"),
    ];
    let messages = run(node, calls).await.unwrap();
    assert_eq!(kinds(&messages), ["human", "ai", "tool", "tool", "tool"]);
    let tools = tool_messages(&messages);
    let seen: Vec<(String, String, Option<String>, ToolStatus)> =
        tools.iter().map(|t| (t.content.text(), t.tool_call_id.clone(), t.name.clone(), t.status)).collect();
    assert_eq!(
        seen,
        [
            ("slow done".to_owned(), "c1".to_owned(), Some("slow".to_owned()), ToolStatus::Success),
            ("5".to_owned(), "c2".to_owned(), Some("add".to_owned()), ToolStatus::Success),
            ("hi".to_owned(), "c3".to_owned(), Some("echo".to_owned()), ToolStatus::Success),
        ]
    );
    assert!(tools.iter().all(|t| t.id.is_some()), "tool messages get ids");
}

#[tokio::test]
async fn runs_the_calls_concurrently() {
    // Each tool waits for the other: run one after the other, they would never finish.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let make = |name: &'static str| {
        let barrier = Arc::clone(&barrier);
        StructuredTool::from_fn(name, "Meets.", json!({"type": "object"}), move |_args: Value, _ctx| {
            let barrier = Arc::clone(&barrier);
            async move {
                barrier.wait().await;
                Ok(name)
            }
        })
        .shared()
    };
    let node = ToolNode::new([make("left"), make("right")]);
    let calls = vec![call("left", json!({}), "1"), call("right", json!({}), "2")];
    let messages = tokio::time::timeout(Duration::from_secs(10), run(node, calls))
        .await
        .expect("tools ran one by one")
        .unwrap();
    assert_eq!(
        texts(&tool_messages(&messages).into_iter().map(Message::from).collect::<Vec<_>>()),
        ["left", "right"]
    );
}

#[tokio::test]
async fn a_bare_message_list_gives_a_list_of_tool_messages() {
    let node = ToolNode::new([add()]);
    let input = vec![Message::human("2+3"), asks(vec![call("add", json!({"a": 2, "b": 3}), "c1")]).into()];
    let out = node.invoke(input, &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].content.text(), out[0].tool_call_id.as_str()), ("5".to_owned(), "c1"));

    let err = node.invoke(vec![Message::human("no call")], &RunnableConfig::default()).await.unwrap_err();
    assert_eq!(err.downcast_custom::<ToolNodeError>(), Some(&ToolNodeError::NoAiMessage));
    assert_eq!(err.to_string(), "no AI message found in input");
}

#[tokio::test]
async fn only_calls_without_a_tool_message_run() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let node = ToolNode::new([echo(Arc::clone(&log))]);
    let ai = asks(vec![call("echo", json!({"text": "a"}), "1"), call("echo", json!({"text": "b"}), "2")]);
    let answered =
        ToolMessage { content: "done before".into(), tool_call_id: "1".into(), ..ToolMessage::default() };
    let out = node.invoke(vec![ai.into(), answered.into()], &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.iter().map(|t| t.tool_call_id.as_str()).collect::<Vec<_>>(), ["2"]);
    assert_eq!(*log.lock().unwrap(), ["b"]);
}

#[tokio::test]
async fn an_unknown_tool_becomes_an_error_message_naming_the_tools() {
    let node = ToolNode::new([add(), boom()]);
    let messages = run(node, vec![call("nosuch", json!({}), "c1")]).await.unwrap();
    let tool = &tool_messages(&messages)[0];
    assert_eq!(tool.content.text(), "Error: nosuch is not a valid tool, try one of [add, boom].");
    assert_eq!(
        (tool.status, tool.name.as_deref(), tool.tool_call_id.as_str()),
        (ToolStatus::Error, Some("nosuch"), "c1")
    );
}

#[tokio::test]
async fn invalid_arguments_become_an_error_message_by_default() {
    let node = ToolNode::new([add()]);
    let messages = run(node, vec![call("add", json!({"a": "zz"}), "c1")]).await.unwrap();
    let tool = &tool_messages(&messages)[0];
    assert_eq!(tool.status, ToolStatus::Error);
    assert_eq!(
        tool.content.text(),
        "Error invoking tool 'add' with kwargs {\"a\":\"zz\"} with error:\n b: missing required field\na: expected \
         integer, got string \"zz\"\n Please fix the error and try again."
    );
}

#[tokio::test]
async fn other_tool_errors_propagate_by_default() {
    let err = run(ToolNode::new([boom()]), vec![call("boom", json!({}), "c1")]).await.unwrap_err();
    let GraphError::Node { node, source, .. } = &err else { panic!("expected a node error, got {err:?}") };
    assert_eq!(node, "tools");
    assert_eq!(source.to_string(), "kaboom");
}

#[tokio::test]
async fn catch_all_sends_every_error_to_the_model() {
    let node = ToolNode::new([boom(), add()]).handle_tool_errors(HandleToolErrors::All);
    let messages =
        run(node, vec![call("boom", json!({}), "c1"), call("add", json!({"a": 1}), "c2")]).await.unwrap();
    let tools = tool_messages(&messages);
    assert_eq!(tools[0].content.text(), "Error: kaboom\n Please fix your mistakes.");
    assert_eq!(
        tools[1].content.text(),
        "Error: Error invoking tool 'add' with kwargs {\"a\":1} with error:\n b: missing required field\n Please \
         fix the error and try again.\n Please fix your mistakes."
    );
    assert!(tools.iter().all(|t| t.status == ToolStatus::Error));
}

#[tokio::test]
async fn a_fixed_text_or_a_function_of_the_error() {
    let node = ToolNode::new([boom()]).handle_tool_errors(HandleToolErrors::text("try something else"));
    let messages = run(node, vec![call("boom", json!({}), "c1")]).await.unwrap();
    assert_eq!(tool_messages(&messages)[0].content.text(), "try something else");

    let handler = HandleToolErrors::handler(|e: &Error| {
        let text = e.to_string();
        text.contains("kaboom").then(|| format!("handled: {text}"))
    });
    let messages =
        run(ToolNode::new([boom()]).handle_tool_errors(handler.clone()), vec![call("boom", json!({}), "c1")])
            .await
            .unwrap();
    assert_eq!(tool_messages(&messages)[0].content.text(), "handled: kaboom");
    // The function declines argument errors: they propagate.
    let err = run(ToolNode::new([add()]).handle_tool_errors(handler), vec![call("add", json!({}), "c1")])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("error invoking tool 'add'"), "{err}");
}

#[tokio::test]
async fn never_lets_invalid_arguments_propagate() {
    let node = ToolNode::new([add()]).handle_tool_errors(HandleToolErrors::Never);
    let err = run(node, vec![call("add", json!({"a": 1}), "c1")]).await.unwrap_err();
    let GraphError::Node { source: Error::ToolArguments { tool, errors, .. }, .. } = &err else {
        panic!("expected the argument error, got {err:?}")
    };
    assert_eq!((tool.as_str(), errors.as_slice()), ("add", &["b: missing required field".to_owned()][..]));
    // Unknown tools still become messages.
    let node = ToolNode::new([add()]).handle_tool_errors(HandleToolErrors::Never);
    let messages = run(node, vec![call("sub", json!({}), "c1")]).await.unwrap();
    assert_eq!(
        tool_messages(&messages)[0].content.text(),
        "Error: sub is not a valid tool, try one of [add]."
    );
}

/// Fields injected from the state, the call id and the store; none visible to the model.
fn inspector() -> SharedTool {
    let schema = json!({
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "call_id": {"type": "string"},
            "history": {"type": "array"},
            "state": {"type": "object"}
        },
        "required": ["query", "call_id", "history", "state"]
    });
    StructuredTool::from_fn("inspect", "Inspects.", schema, |args: Value, ctx: ToolContext| async move {
        let store = tool_store(&ctx).ok_or_else(|| Error::msg("no store"))?;
        let ns = vec!["notes".to_owned()];
        store.put(&ns, "q", json!({"query": args["query"]})).await.map_err(Error::custom)?;
        let stored =
            store.get(&ns, "q").await.map_err(Error::custom)?.map(|item| item.value["query"].clone());
        Ok(json!({
            "query": args["query"],
            "call_id": args["call_id"],
            "history": args["history"].as_array().map(Vec::len),
            "state_keys": args["state"].as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()),
            "stored": stored,
        }))
    })
    .with_injected(InjectedArg::tool_call_id("call_id"))
    .with_injected(InjectedArg::state_key("history", "messages"))
    .with_injected(InjectedArg::state("state"))
    .shared()
}

#[tokio::test]
async fn injected_arguments_are_filled_by_the_node_and_hidden_from_the_model() {
    let tool = inspector();
    let spec = tool.spec();
    assert_eq!(spec.parameters["properties"].as_object().unwrap().keys().collect::<Vec<_>>(), ["query"]);
    assert_eq!(spec.parameters["required"], json!(["query"]));

    let mut g = StateGraph::<MessagesState>::new();
    g.add_node("tools", ToolNode::new([tool]));
    g.add_edge(START, "tools");
    let app = g.compile_with(CompileConfig::new().store(Arc::new(InMemoryStore::new()))).unwrap();
    // The model tries to set an injected argument: the node's value wins.
    let ask = asks(vec![call("inspect", json!({"query": "rust", "call_id": "forged"}), "c9")]);
    let input = MessagesState::update().messages(vec![Message::human("look"), ask.into()]);
    let out = app.invoke(input, &RunnableConfig::default()).await.unwrap();
    let result: Value = serde_json::from_str(&out.value.messages[2].text()).unwrap();
    assert_eq!(
        result,
        json!({"query": "rust", "call_id": "c9", "history": 2, "state_keys": ["messages"], "stored": "rust"})
    );
}

#[tokio::test]
async fn a_tool_without_a_store_in_the_graph_sees_none() {
    let out = run(
        ToolNode::new([inspector()]).handle_tool_errors(HandleToolErrors::All),
        vec![call("inspect", json!({"query": "q"}), "c1")],
    )
    .await
    .unwrap();
    assert_eq!(tool_messages(&out)[0].content.text(), "Error: no store\n Please fix your mistakes.");
}

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Hops {
    #[state(add_messages)]
    messages: Messages,
    #[state(append)]
    visited: Vec<String>,
}

impl HasMessages for Hops {
    fn messages(&self) -> &[Message] {
        &self.messages
    }

    fn messages_update(messages: Vec<Message>) -> HopsUpdate {
        Hops::update().messages(messages)
    }
}

/// `transfer`: answers its call and sends the graph to `other`, or (with `answer: false`) forgets the
/// tool message.
fn transfer() -> SharedTool {
    StructuredTool::from_fn(
        "transfer",
        "Transfers.",
        json!({"type": "object"}),
        |args: Value, ctx: ToolContext| async move {
            let mut update = Hops::update().visited(vec!["transfer".to_owned()]);
            if args["answer"] != json!(false) {
                let id = ctx.tool_call_id().unwrap_or_default().to_owned();
                let reply =
                    ToolMessage { content: "transferred".into(), tool_call_id: id, ..ToolMessage::default() };
                update = update.messages(vec![reply.into()]);
            }
            Ok(tool_command(Command::<Hops>::new().update(update).goto("other")))
        },
    )
    .shared()
}

fn hops_graph(node: ToolNode) -> CompiledGraph<Hops> {
    let mut g = StateGraph::<Hops>::new();
    g.add_node("tools", node);
    g.add_node("other", |_: Hops| Hops::update().visited(vec!["other".to_owned()]));
    g.add_edge(START, "tools");
    g.compile().unwrap()
}

#[tokio::test]
async fn a_command_from_a_tool_updates_the_state_and_routes() {
    let app = hops_graph(ToolNode::new([transfer(), add()]));
    let ask = asks(vec![call("add", json!({"a": 1, "b": 1}), "c1"), call("transfer", json!({}), "c2")]);
    let out =
        app.invoke(Hops::update().messages(vec![ask.into()]), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.visited, ["transfer", "other"]);
    let ids: Vec<&str> =
        out.value.messages.iter().filter_map(Message::as_tool).map(|t| t.tool_call_id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2"], "tool results stay in call order");
    assert_eq!(texts(&out.value.messages[1..]), ["2", "transferred"]);
}

#[tokio::test]
async fn a_command_must_answer_its_call() {
    let app = hops_graph(ToolNode::new([transfer()]));
    let ask = asks(vec![call("transfer", json!({"answer": false}), "c1")]);
    let err =
        app.invoke(Hops::update().messages(vec![ask.into()]), &RunnableConfig::default()).await.unwrap_err();
    let GraphError::Node { source, .. } = &err else { panic!("{err:?}") };
    assert!(matches!(
        source.downcast_custom::<ToolNodeError>(),
        Some(ToolNodeError::MissingToolMessage { .. })
    ));
    assert_eq!(
        source.to_string(),
        "Expected to have a matching ToolMessage in Command.update for tool 'transfer', got: []. Every tool call \
         (LLM requesting to call a tool) in the message history MUST have a corresponding ToolMessage."
    );
}

#[tokio::test]
async fn a_command_for_another_state_type_is_an_error() {
    let foreign = StructuredTool::from_fn(
        "foreign",
        "Wrong state.",
        json!({"type": "object"}),
        |_a: Value, _c| async move { Ok(tool_command(Command::<MessagesState>::new().goto("other"))) },
    )
    .shared();
    let app = hops_graph(ToolNode::new([foreign]));
    let ask = asks(vec![call("foreign", json!({}), "c1")]);
    let err =
        app.invoke(Hops::update().messages(vec![ask.into()]), &RunnableConfig::default()).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("tool 'foreign' returned a command that is not a Command of this graph's state"),
        "{err}"
    );
    // Outside a graph a command cannot be applied.
    let node = ToolNode::new([transfer()]);
    let err = node
        .invoke(vec![asks(vec![call("transfer", json!({}), "c1")]).into()], &RunnableConfig::default())
        .await;
    assert_eq!(
        err.unwrap_err().downcast_custom::<ToolNodeError>(),
        Some(&ToolNodeError::CommandOutsideGraph("transfer".into()))
    );
}

#[tokio::test]
async fn sends_run_one_task_per_call_and_merge_in_call_order() {
    let calls = vec![
        call("slow", json!({}), "c1"),
        call("add", json!({"a": 4, "b": 5}), "c2"),
        call("nope", json!({}), "c3"),
    ];
    let ask = asks(calls.clone());
    let mut g = StateGraph::<MessagesState>::new();
    g.add_node("agent", move |_: MessagesState| MessagesState::update().messages(vec![ask.clone().into()]));
    g.add_node("tools", ToolNode::new([slow("slow", 30), add()]));
    g.add_edge(START, "agent");
    g.add_conditional_edges(
        "agent",
        move |_: &MessagesState| {
            calls
                .iter()
                .map(|c| Send::new("tools", ToolCallWithContext { tool_call: c.clone(), state: None }))
                .collect::<Vec<_>>()
        },
        None,
    );
    let app = g.compile().unwrap();
    let mut tasks = 0;
    let mut parts = app.stream(
        MessagesState::update().messages(vec![Message::human("go")]),
        &RunnableConfig::default(),
        &[weft_graph::StreamMode::Updates],
    );
    let mut last = Vec::new();
    use futures::StreamExt as _;
    while let Some(part) = parts.next().await {
        if let weft_graph::StreamData::Updates { node, updates, .. } = part.unwrap().data {
            if node == "tools" {
                tasks += 1;
                last.extend(updates.into_iter().flat_map(|u| u.messages.unwrap_or_default()));
            }
        }
    }
    assert_eq!(tasks, 3, "one task per call");
    assert_eq!(last.len(), 3);
    let out = app
        .invoke(MessagesState::update().messages(vec![Message::human("go")]), &RunnableConfig::default())
        .await
        .unwrap();
    let tools: Vec<(String, String)> = out
        .value
        .messages
        .iter()
        .filter_map(Message::as_tool)
        .map(|t| (t.tool_call_id.clone(), t.content.text()))
        .collect();
    assert_eq!(
        tools,
        [
            ("c1".to_owned(), "slow done".to_owned()),
            ("c2".to_owned(), "9".to_owned()),
            ("c3".to_owned(), "Error: nope is not a valid tool, try one of [slow, add].".to_owned())
        ]
    );
}

#[tokio::test]
async fn a_send_with_something_else_is_an_error() {
    let mut g = StateGraph::<MessagesState>::new();
    g.add_node("tools", ToolNode::new([add()]));
    g.set_conditional_entry_point(|_: &MessagesState| Send::new("tools", "not a call".to_owned()), None);
    let err =
        g.compile().unwrap().invoke(MessagesState::update(), &RunnableConfig::default()).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("the tool node takes a ToolCallWithContext from a Send, got alloc::string::String"),
        "{err}"
    );
}

/// `ask`: interrupts with "may I?", then answers `human said <answer>`.
fn ask_human() -> SharedTool {
    StructuredTool::from_fn(
        "ask",
        "Asks a human.",
        json!({"type": "object"}),
        |_a: Value, ctx: ToolContext| async move {
            let runtime = tool_runtime(&ctx).ok_or_else(|| Error::msg("not in a graph"))?;
            let answer: String = runtime.interrupt("may I?")?;
            Ok(format!("human said {answer}"))
        },
    )
    .shared()
}

#[tokio::test]
async fn an_interrupt_inside_a_tool_pauses_the_graph_whatever_the_error_policy() {
    let ask_human = ask_human();
    let mut g = StateGraph::<MessagesState>::new();
    g.add_node("tools", ToolNode::new([ask_human]).handle_tool_errors(HandleToolErrors::All));
    g.add_edge(START, "tools");
    let app = g.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap();
    let input = MessagesState::update().messages(vec![asks(vec![call("ask", json!({}), "c1")]).into()]);
    let paused = app.invoke(input, &thread("t")).await.unwrap();
    assert_eq!(paused.interrupts.len(), 1);
    assert_eq!(paused.interrupts[0].value, json!("may I?"));
    assert_eq!(paused.value.messages.len(), 1, "no tool message while paused");
    let done = app.invoke(Command::<MessagesState>::resume("yes"), &thread("t")).await.unwrap();
    assert_eq!(done.value.messages[1].text(), "human said yes");
    let _ = GraphInput::<MessagesState>::Resume;
}

#[test]
fn tools_condition_routes_on_the_last_message() {
    let with_calls = MessagesState {
        messages: vec![Message::human("hi"), asks(vec![call("add", json!({}), "1")]).into()].into(),
    };
    assert_eq!(tools_condition(&with_calls).unwrap(), "tools");
    let answer = MessagesState { messages: vec![Message::human("hi"), Message::ai("hello")].into() };
    assert_eq!(tools_condition(&answer).unwrap(), END);
    let tool_last = MessagesState {
        messages: vec![asks(vec![call("add", json!({}), "1")]).into(), Message::tool("2", "1")].into(),
    };
    assert_eq!(tools_condition(&tool_last).unwrap(), END);
    let err = tools_condition(&MessagesState::default()).unwrap_err();
    assert_eq!(err.to_string(), "no messages found in input state to tool_edge");
}

#[tokio::test]
async fn tool_node_and_tools_condition_make_a_loop() {
    let state = std::sync::Arc::new(Mutex::new(0));
    let turns = Arc::clone(&state);
    let mut g = StateGraph::<MessagesState>::new();
    g.add_node("agent", move |s: MessagesState| {
        let mut n = turns.lock().unwrap();
        *n += 1;
        let reply: Message = if s.messages.iter().any(|m| m.as_tool().is_some()) {
            Message::ai("done")
        } else {
            asks(vec![call("add", json!({"a": 1, "b": 2}), "c1")]).into()
        };
        MessagesState::update().messages(vec![reply])
    });
    g.add_node("tools", ToolNode::new([add()]));
    g.add_edge(START, "agent");
    g.add_conditional_edges("agent", tools_condition, ["tools", END]);
    g.add_edge("tools", "agent");
    let out = g
        .compile()
        .unwrap()
        .invoke(MessagesState::update().messages(vec![Message::human("go")]), &RunnableConfig::default())
        .await
        .unwrap();
    assert_eq!(kinds(&out.value.messages), ["human", "ai", "tool", "ai"]);
    assert_eq!(*state.lock().unwrap(), 2);
    let _ = Tool::name(add().as_ref());
}

#[tokio::test]
async fn calls_whose_arguments_are_not_json_are_answered_with_the_error_after_the_others() {
    let mut message = asks(vec![call("add", json!({"a": 1, "b": 2}), "ok")]);
    message.invalid_tool_calls.push(weft_runnable_core::InvalidToolCall {
        name: Some("add".into()),
        args: Some("{a: 1}".into()),
        id: Some("bad".into()),
        error: Some("key must be a string at line 1 column 2".into()),
    });
    let text = "Error invoking tool 'add' with kwargs {a: 1} with error:\n key must be a string at line 1 \
                column 2\n Please fix the error and try again.";
    // As a graph node, routed there by tools_condition.
    let mut g = StateGraph::<MessagesState>::new();
    g.add_node("model", |_: MessagesState| ());
    g.add_node("tools", ToolNode::new([add()]));
    g.add_edge(START, "model");
    g.add_conditional_edges("model", tools_condition, ["tools", END]);
    let input = MessagesState::update().messages(vec![Message::human("go"), message.clone().into()]);
    let out = g.compile().unwrap().invoke(input, &RunnableConfig::default()).await.unwrap();
    let answers = tool_messages(&out.value.messages);
    assert_eq!(answers.len(), 2);
    assert_eq!((answers[0].tool_call_id.as_str(), answers[0].content.text()), ("ok", "3".to_owned()));
    assert_eq!((answers[1].tool_call_id.as_str(), answers[1].content.text()), ("bad", text.to_owned()));
    assert_eq!(answers[1].status, ToolStatus::Error);
    // On a bare message list.
    let node = ToolNode::new([add()]);
    let out =
        node.invoke(vec![Message::human("go"), message.into()], &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.iter().map(|m| m.tool_call_id.as_str()).collect::<Vec<_>>(), ["ok", "bad"]);
    assert_eq!(out[1].content.text(), text);
}

#[test]
fn tools_condition_routes_a_message_with_only_unparsable_calls_to_the_tools() {
    let mut message = asks(Vec::new());
    message.invalid_tool_calls.push(weft_runnable_core::InvalidToolCall::default());
    let state = MessagesState { messages: vec![Message::human("go"), message.into()].into() };
    assert_eq!(tools_condition(&state).unwrap(), "tools");
}

#[tokio::test]
async fn unparsable_calls_follow_the_error_policy() {
    let mut message = asks(Vec::new());
    message.invalid_tool_calls.push(weft_runnable_core::InvalidToolCall {
        name: Some("add".into()),
        args: Some("{a: 1}".into()),
        id: Some("bad".into()),
        error: Some("key must be a string at line 1 column 2".into()),
    });
    let input = vec![Message::human("go"), message.into()];
    let config = RunnableConfig::default();
    let node = ToolNode::new([add()]).handle_tool_errors(HandleToolErrors::text("try again"));
    let out = node.invoke(input.clone(), &config).await.unwrap();
    assert_eq!(out[0].content.text(), "try again");
    let err = ToolNode::new([add()]).handle_tool_errors(HandleToolErrors::Never).invoke(input, &config).await;
    match err.unwrap_err() {
        Error::ToolArguments { tool, args, errors } => {
            assert_eq!((tool.as_str(), *args), ("add", json!("{a: 1}")));
            assert_eq!(errors, ["key must be a string at line 1 column 2"]);
        }
        other => panic!("not a ToolArguments error: {other:?}"),
    }
}

#[tokio::test]
async fn a_graph_run_by_a_tool_never_reads_the_tool_nodes_state() {
    // The inner graph's node reads the state as a tool called with its task's config would: that task is
    // no tool node's.
    let mut inner = StateGraph::<MessagesState>::new();
    inner.add_node("direct", |_: MessagesState, rt: &weft_graph::Runtime| {
        let ctx = ToolContext::new(rt.config().clone());
        let seen = weft_agents::ToolRuntime::of(&ctx).state::<MessagesState>().map(|s| s.messages.len());
        MessagesState::update().messages(vec![Message::ai(format!("inner {seen:?}"))])
    });
    inner.add_edge(START, "direct");
    let inner = inner.compile().unwrap();
    let nested = StructuredTool::from_fn("nested", "Runs a graph.", json!({"type": "object"}), {
        move |_args: Value, ctx: ToolContext| {
            let inner = inner.clone();
            async move {
                let own =
                    weft_agents::ToolRuntime::of(&ctx).state::<MessagesState>().map(|s| s.messages.len());
                let out = inner.invoke(MessagesState::update(), ctx.config()).await?;
                Ok(format!("own {own:?}, {}", out.value.messages[0].text()))
            }
        }
    })
    .shared();
    let messages = run(ToolNode::new([nested]), vec![call("nested", json!({}), "c1")]).await.unwrap();
    let text = tool_messages(&messages)[0].content.text();
    assert_eq!(text, "own Some(2), inner None");
}

/// The `tools` chunks of running `app` on `input` (under `config`), as LangGraph's `tools` mode writes
/// them, each with its namespace.
async fn tool_chunks(
    app: &CompiledGraph<MessagesState>,
    input: impl weft_graph::IntoGraphInput<MessagesState>,
    config: &RunnableConfig,
) -> Vec<(Vec<String>, Value)> {
    use futures::StreamExt as _;
    let mut parts =
        app.stream(input, config, &[weft_graph::StreamMode::Tools, weft_graph::StreamMode::Values]);
    let mut out = Vec::new();
    while let Some(part) = parts.next().await {
        let part = part.unwrap();
        if let weft_graph::StreamData::Tool(event) = part.data {
            out.push((part.ns, event.to_json()));
        }
    }
    out
}

#[tokio::test]
async fn tools_mode_streams_each_calls_start_then_its_end_or_its_error() {
    let node = ToolNode::new([add(), boom()]).handle_tool_errors(HandleToolErrors::All);
    let calls = vec![call("add", json!({"a": 2, "b": 3}), "c1"), call("boom", json!({}), "c2")];
    let input = MessagesState::update().messages(vec![Message::human("go"), asks(calls).into()]);
    let chunks = tool_chunks(&graph(node), input, &RunnableConfig::default()).await;
    assert!(chunks.iter().all(|(ns, _)| ns.is_empty()), "the root graph's tools");
    let of = |id: &str| -> Vec<Value> {
        chunks.iter().map(|(_, e)| e.clone()).filter(|e| e["tool_call_id"] == id).collect()
    };
    let added = of("c1");
    assert_eq!(
        added[0],
        json!({"event": "tool-started", "tool_call_id": "c1", "tool_name": "add", "input": {"a": 2, "b": 3}})
    );
    assert_eq!(added[1]["event"], "tool-finished");
    assert_eq!(
        (added[1]["output"]["content"].clone(), added[1]["output"]["tool_call_id"].clone()),
        (json!("5"), json!("c1"))
    );
    assert_eq!(added.len(), 2);
    let failed = of("c2");
    assert_eq!(failed[0]["event"], "tool-started");
    assert_eq!(failed[1], json!({"event": "tool-error", "tool_call_id": "c2", "message": "kaboom"}));
    assert_eq!(chunks.len(), 4);
}

#[tokio::test]
async fn a_tool_paused_by_an_interrupt_reports_no_end_and_starts_again_on_resume() {
    let ask_human = ask_human();
    let mut g = StateGraph::<MessagesState>::new();
    g.add_node("tools", ToolNode::new([ask_human]));
    g.add_edge(START, "tools");
    let app = g.compile_with(CompileConfig::new().checkpointer(Arc::new(InMemorySaver::new()))).unwrap();
    let input = MessagesState::update().messages(vec![asks(vec![call("ask", json!({}), "c1")]).into()]);
    let paused = tool_chunks(&app, input, &thread("tools-mode")).await;
    let events: Vec<&Value> = paused.iter().map(|(_, e)| &e["event"]).collect();
    assert_eq!(events, [&json!("tool-started")], "paused, not failed");
    let resumed = tool_chunks(&app, Command::<MessagesState>::resume("yes"), &thread("tools-mode")).await;
    let events: Vec<&Value> = resumed.iter().map(|(_, e)| &e["event"]).collect();
    assert_eq!(events, [&json!("tool-started"), &json!("tool-finished")]);
    assert_eq!(resumed[1].1["output"]["content"], "human said yes");
}
