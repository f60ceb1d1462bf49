//! create_react_agent: the loop, its options and its streams.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::sync::{Arc, Mutex};

use common::{add, asks, boom, call, echo, kinds, texts, thread};
use futures::StreamExt as _;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use weft_agents::{
    AgentState, AgentStateUpdate, AgentVersion, HandleToolErrors, HasMessages, NEED_MORE_STEPS, Prompt,
    ReactAgentBuilder, ReactAgentError, ReactAgentState, create_react_agent,
};
use weft_graph::checkpoint::InMemorySaver;
use weft_graph::{
    CompiledGraph, GraphError, GraphInput, Messages, MessagesState, State, StreamData, StreamMode,
};
use weft_runnable_core::fakes::{FakeChatModel, FakeReply, TokenSplit};
use weft_runnable_core::{
    InjectedArg, Message, RunnableConfig, StructuredTool, SystemMessage, ToolContext, ToolExt,
};

fn ask(text: &str) -> AgentStateUpdate {
    AgentState::update().messages(vec![Message::human(text)])
}

fn add_then_answer() -> FakeChatModel {
    FakeChatModel::new([FakeReply::tool_call("add", json!({"a": 2, "b": 3}), "c1"), "2 + 3 = 5".into()])
}

#[tokio::test]
async fn the_agent_calls_tools_until_the_model_answers() {
    let model = add_then_answer();
    let agent = create_react_agent(model.clone(), [add()]).build().unwrap();
    let out = agent.invoke(ask("what is 2 + 3?"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(kinds(&out.value.messages), ["human", "ai", "tool", "ai"]);
    assert_eq!(texts(&out.value.messages[2..]), ["5", "2 + 3 = 5"]);
    let calls = model.calls();
    assert_eq!(calls.len(), 2);
    let bound: Vec<&str> = calls[0].options.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(bound, ["add"], "the tools are bound to the model");
    assert_eq!(kinds(&calls[1].messages), ["human", "ai", "tool"], "the model sees the tool's result");
    assert!(out.value.structured_response.is_none());
}

#[tokio::test]
async fn without_tools_the_agent_is_one_model_call() {
    let model = FakeChatModel::new(["hello"]);
    let agent = create_react_agent(model.clone(), []).build().unwrap();
    let out = agent.invoke(ask("hi"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(texts(&out.value.messages), ["hi", "hello"]);
    assert!(model.calls()[0].options.tools.is_empty());
}

#[tokio::test]
async fn a_prompt_is_put_before_the_conversation_and_not_kept() {
    for prompt in [
        Prompt::from("You add."),
        Prompt::from(SystemMessage { content: "You add.".into(), ..SystemMessage::default() }),
    ] {
        let model = add_then_answer();
        let agent = create_react_agent(model.clone(), [add()]).prompt(prompt).build().unwrap();
        let out = agent.invoke(ask("2 + 3?"), &RunnableConfig::default()).await.unwrap();
        assert_eq!(
            kinds(&out.value.messages),
            ["human", "ai", "tool", "ai"],
            "the prompt is not in the state"
        );
        for call in model.calls() {
            assert_eq!(call.messages[0], Message::system("You add."));
            assert_eq!(call.messages[1].text(), "2 + 3?");
        }
    }
    let model = FakeChatModel::new(["ok"]);
    let prompt = Prompt::from_fn(|state: &AgentState, messages: &[Message]| {
        Ok(vec![
            Message::system(format!("{} messages so far", state.messages.len())),
            messages[messages.len() - 1].clone(),
        ])
    });
    let agent = create_react_agent(model.clone(), [add()]).prompt(prompt).build().unwrap();
    agent
        .invoke(
            AgentState::update().messages(vec![Message::human("a"), Message::ai("b"), Message::human("c")]),
            &RunnableConfig::default(),
        )
        .await
        .unwrap();
    assert_eq!(texts(&model.calls()[0].messages), ["3 messages so far", "c"]);
}

async fn tools_tasks(agent: &CompiledGraph<AgentState>) -> (Vec<String>, AgentState) {
    let mut nodes = Vec::new();
    let mut parts =
        agent.stream(ask("go"), &RunnableConfig::default(), &[StreamMode::Updates, StreamMode::Values]);
    let mut last = None;
    while let Some(part) = parts.next().await {
        match part.unwrap().data {
            StreamData::Updates { node, .. } => nodes.push(node),
            StreamData::Values { state, .. } => last = Some(state),
            _ => {}
        }
    }
    (nodes, last.unwrap())
}

#[tokio::test]
async fn v2_runs_each_call_as_its_own_task_and_v1_one_task_for_all() {
    let script = || {
        FakeChatModel::new([
            FakeReply::tool_calls([
                call("add", json!({"a": 1, "b": 2}), "c1"),
                call("add", json!({"a": 3, "b": 4}), "c2"),
            ]),
            "3 and 7".into(),
        ])
    };
    let v2 = create_react_agent(script(), [add()]).build().unwrap();
    let (nodes, state) = tools_tasks(&v2).await;
    assert_eq!(nodes, ["agent", "tools", "tools", "agent"]);
    assert_eq!(texts(&state.messages[2..4]), ["3", "7"]);
    let v1 = create_react_agent(script(), [add()]).version(AgentVersion::V1).build().unwrap();
    let (nodes, state_v1) = tools_tasks(&v1).await;
    assert_eq!(nodes, ["agent", "tools", "agent"]);
    assert_eq!(texts(&state_v1.messages), texts(&state.messages));
}

#[tokio::test]
async fn too_few_remaining_steps_answer_sorry_instead_of_failing() {
    let replies: Vec<FakeReply> =
        (1..=5).map(|i| FakeReply::tool_call("add", json!({"a": i, "b": i}), format!("c{i}"))).collect();
    let model = FakeChatModel::new(replies);
    let agent = create_react_agent(model.clone(), [add()]).build().unwrap();
    let out = agent.invoke(ask("loop"), &RunnableConfig::default().with_recursion_limit(6)).await.unwrap();
    assert_eq!(kinds(&out.value.messages), ["human", "ai", "tool", "ai", "tool", "ai"]);
    let last = out.value.messages.last().unwrap().as_ai().unwrap().clone();
    assert_eq!(last.text(), NEED_MORE_STEPS);
    assert!(last.tool_calls.is_empty());
    assert_eq!(model.calls().len(), 3);
}

#[tokio::test]
async fn a_history_with_unanswered_tool_calls_is_an_error_naming_them() {
    let agent = create_react_agent(FakeChatModel::new(["never"]), [add()]).build().unwrap();
    let input = AgentState::update().messages(vec![
        Message::human("hi"),
        asks(vec![call("add", json!({"a": 1}), "lost")]).into(),
        Message::human("again"),
    ]);
    let err = agent.invoke(input, &RunnableConfig::default()).await.unwrap_err();
    let GraphError::Node { node, source, .. } = &err else { panic!("{err:?}") };
    assert_eq!(node, "agent");
    let Some(ReactAgentError::InvalidChatHistory { calls }) = source.downcast_custom::<ReactAgentError>()
    else {
        panic!("{source:?}")
    };
    assert_eq!(calls[0].id.as_deref(), Some("lost"));
    assert_eq!(
        source.to_string(),
        "Found AIMessages with tool_calls that do not have a corresponding ToolMessage. Here are the first few of \
         those tool calls: [{\"type\":\"tool_call\",\"name\":\"add\",\"args\":{\"a\":1},\"id\":\"lost\"}].\n\nEvery \
         tool call (LLM requesting to call a tool) in the message history MUST have a corresponding ToolMessage \
         (result of a tool invocation to return to the LLM) - this is required by most LLM providers."
    );
}

/// The structured answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Weather {
    temperature: i64,
    sky: String,
}

#[tokio::test]
async fn a_response_format_adds_a_structured_response_after_the_loop() {
    let model = FakeChatModel::new([
        FakeReply::tool_call("add", json!({"a": 10, "b": 10}), "c1"),
        "It is 20 degrees and sunny.".into(),
        FakeReply::tool_call("Weather", json!({"temperature": 20, "sky": "sunny"}), "s1"),
    ]);
    let agent = create_react_agent(model.clone(), [add()]).response_format::<Weather>().build().unwrap();
    let out = agent.invoke(ask("weather?"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.structured_response, Some(json!({"temperature": 20, "sky": "sunny"})));
    assert_eq!(
        kinds(&out.value.messages),
        ["human", "ai", "tool", "ai"],
        "the structured call adds no message"
    );
    let last = model.calls().pop().unwrap();
    let tools: Vec<&str> = last.options.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, ["Weather"], "the structured call binds only the schema");
    assert_eq!(kinds(&last.messages), ["human", "ai", "tool", "ai"]);

    let model = FakeChatModel::new([
        FakeReply::from("sunny"),
        FakeReply::tool_call("Weather", json!({"temperature": 1, "sky": "x"}), "s"),
    ]);
    let agent = create_react_agent(model.clone(), [])
        .response_format_with::<Weather>(Some("Extract the weather."), Default::default())
        .build()
        .unwrap();
    let out = agent.invoke(ask("weather?"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.value.structured_response, Some(json!({"temperature": 1, "sky": "x"})));
    assert_eq!(model.calls()[1].messages[0], Message::system("Extract the weather."));
}

#[test]
fn a_response_format_needs_a_structured_response_channel() {
    let err = ReactAgentBuilder::<MessagesState>::new(FakeChatModel::new(["x"]), [add()])
        .response_format::<Weather>()
        .build()
        .unwrap_err();
    assert!(matches!(err, ReactAgentError::NoStructuredResponseChannel(_)));
    assert!(
        err.to_string().starts_with("a response format needs a state with a structured response channel")
    );
}

#[tokio::test]
async fn a_pre_model_hook_can_choose_what_the_model_sees_without_changing_the_conversation() {
    let model = add_then_answer();
    let agent = create_react_agent(model.clone(), [add()])
        .pre_model_hook(|s: AgentState| {
            let last = s.messages.last().cloned().into_iter().collect::<Vec<_>>();
            AgentState::update().llm_input_messages(last)
        })
        .build()
        .unwrap();
    let (nodes, state) = tools_tasks(&agent).await;
    assert_eq!(nodes, ["pre_model_hook", "agent", "tools", "pre_model_hook", "agent"]);
    assert_eq!(kinds(&state.messages), ["human", "ai", "tool", "ai"]);
    assert!(state.llm_input_messages.is_none(), "the hook's choice lives one step");
    let seen: Vec<Vec<&str>> = model.calls().iter().map(|c| kinds(&c.messages)).collect();
    assert_eq!(seen, [vec!["human"], vec!["tool"]]);
}

#[tokio::test]
async fn a_pre_model_hook_can_rewrite_the_conversation() {
    let model = FakeChatModel::new(["short"]);
    let agent = create_react_agent(model.clone(), [])
        .pre_model_hook(|s: AgentState| {
            let mut keep = vec![Message::remove(weft_runnable_core::REMOVE_ALL_MESSAGES)];
            keep.extend(s.messages.last().cloned());
            AgentState::update().messages(keep)
        })
        .build()
        .unwrap();
    let input = AgentState::update().messages(vec![
        Message::human("old"),
        Message::ai("old answer"),
        Message::human("new"),
    ]);
    let out = agent.invoke(input, &RunnableConfig::default()).await.unwrap();
    assert_eq!(texts(&out.value.messages), ["new", "short"]);
    assert_eq!(texts(&model.calls()[0].messages), ["new"]);
}

#[tokio::test]
async fn a_post_model_hook_runs_after_every_model_call_and_routing_follows_it() {
    let model = add_then_answer();
    let agent = create_react_agent(model, [add()]).post_model_hook(|_: AgentState| ()).build().unwrap();
    let (nodes, state) = tools_tasks(&agent).await;
    assert_eq!(nodes, ["agent", "post_model_hook", "tools", "agent", "post_model_hook"]);
    assert_eq!(kinds(&state.messages), ["human", "ai", "tool", "ai"]);
}

#[tokio::test]
async fn a_return_direct_tool_ends_the_run_with_its_result() {
    let lookup = StructuredTool::from_fn(
        "lookup",
        "Looks up.",
        json!({"type": "object"}),
        |_a: Value, _c| async move { Ok("the answer is 42") },
    )
    .with_return_direct(true)
    .shared();
    let model = FakeChatModel::new([FakeReply::tool_call("lookup", json!({}), "c1"), "unused".into()]);
    let agent = create_react_agent(model.clone(), [lookup, add()]).build().unwrap();
    let out = agent.invoke(ask("?"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(texts(&out.value.messages[2..]), ["the answer is 42"]);
    assert_eq!(model.calls().len(), 1);
    assert_eq!(model.remaining(), 1);
}

#[tokio::test]
async fn the_name_names_the_graph_and_the_ai_messages() {
    let agent = create_react_agent(add_then_answer(), [add()]).name("calculator").build().unwrap();
    assert_eq!(agent.name(), "calculator");
    let out = agent.invoke(ask("2 + 3?"), &RunnableConfig::default()).await.unwrap();
    let names: Vec<Option<&str>> =
        out.value.messages.iter().filter_map(Message::as_ai).map(|a| a.name.as_deref()).collect();
    assert_eq!(names, [Some("calculator"), Some("calculator")]);
}

#[tokio::test]
async fn interrupt_before_tools_pauses_and_a_resume_goes_on() {
    let model = add_then_answer();
    let agent = create_react_agent(model, [add()])
        .checkpointer(Arc::new(InMemorySaver::new()))
        .interrupt_before(["tools"])
        .build()
        .unwrap();
    let paused = agent.invoke(ask("2 + 3?"), &thread("t")).await.unwrap();
    assert_eq!(kinds(&paused.value.messages), ["human", "ai"]);
    assert_eq!(agent.get_state(&thread("t")).await.unwrap().next, ["tools"]);
    let done = agent.invoke(GraphInput::Resume, &thread("t")).await.unwrap();
    assert_eq!(kinds(&done.value.messages), ["human", "ai", "tool", "ai"]);
    // The thread remembers the conversation: the next question continues it.
    let agent_again = done.value.messages.len();
    assert_eq!(agent_again, 4);
}

#[tokio::test]
async fn tool_errors_follow_the_error_policy() {
    let script = || FakeChatModel::new([FakeReply::tool_call("boom", json!({}), "c1"), "sorry".into()]);
    let err = create_react_agent(script(), [boom()])
        .build()
        .unwrap()
        .invoke(ask("x"), &RunnableConfig::default())
        .await
        .unwrap_err();
    assert!(matches!(&err, GraphError::Node { node, .. } if node == "tools"), "{err:?}");
    let agent =
        create_react_agent(script(), [boom()]).handle_tool_errors(HandleToolErrors::All).build().unwrap();
    let out = agent.invoke(ask("x"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(texts(&out.value.messages[2..]), ["Error: kaboom\n Please fix your mistakes.", "sorry"]);
}

#[tokio::test]
async fn messages_mode_streams_the_model_tokens_with_the_agent_node() {
    let model = FakeChatModel::new([
        FakeReply::from(weft_runnable_core::AiMessage {
            tool_calls: vec![call("add", json!({"a": 2, "b": 3}), "c1")],
            ..weft_runnable_core::AiMessage::new("Let me add.")
        }),
        "The sum is 5".into(),
    ])
    .with_split(TokenSplit::Words);
    let agent = create_react_agent(model, [add()]).build().unwrap();
    let mut parts = agent.stream(ask("2 + 3?"), &RunnableConfig::default(), &[StreamMode::Messages]);
    let mut tokens: Vec<(String, String, String)> = Vec::new();
    while let Some(part) = parts.next().await {
        if let StreamData::Message { chunk, metadata } = part.unwrap().data {
            let node = metadata["langgraph_node"].as_str().unwrap_or_default().to_owned();
            tokens.push((node, chunk.type_name().to_owned(), chunk.text()));
        }
    }
    let from_agent: Vec<&str> = tokens.iter().filter(|t| t.0 == "agent").map(|t| t.2.as_str()).collect();
    // Each reply ends with the empty chunk that closes the model's stream, as in LangGraph.
    assert_eq!(from_agent, ["Let", " me", " add.", "", "The", " sum", " is", " 5", ""]);
    let from_tools: Vec<(&str, &str)> =
        tokens.iter().filter(|t| t.0 == "tools").map(|t| (t.1.as_str(), t.2.as_str())).collect();
    assert_eq!(from_tools, [("tool", "5")], "the tool message is streamed whole, from the tools node");
}

#[tokio::test]
async fn updates_mode_shows_agent_tools_agent() {
    let agent = create_react_agent(add_then_answer(), [add()]).build().unwrap();
    let mut parts = agent.stream(ask("2 + 3?"), &RunnableConfig::default(), &[StreamMode::Updates]);
    let mut chunks = Vec::new();
    while let Some(part) = parts.next().await {
        if let StreamData::Updates { node, updates, .. } = part.unwrap().data {
            let written: Vec<String> = updates
                .into_iter()
                .flat_map(|u| u.messages.unwrap_or_default())
                .map(|m| m.type_name().to_owned())
                .collect();
            chunks.push((node, written));
        }
    }
    assert_eq!(
        chunks,
        [
            ("agent".to_owned(), vec!["ai".to_owned()]),
            ("tools".to_owned(), vec!["tool".to_owned()]),
            ("agent".to_owned(), vec!["ai".to_owned()])
        ]
    );
}

/// A state of one's own: the conversation and the user, which a tool reads as an injected argument.
#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Session {
    #[state(add_messages)]
    messages: Messages,
    user: String,
}

impl HasMessages for Session {
    fn messages(&self) -> &[Message] {
        &self.messages
    }

    fn messages_update(messages: Vec<Message>) -> SessionUpdate {
        Session::update().messages(messages)
    }
}

impl ReactAgentState for Session {}

#[tokio::test]
async fn an_agent_over_a_state_of_ones_own_injects_its_fields() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let greet = StructuredTool::from_fn(
        "greet",
        "Greets the user.",
        json!({"type": "object", "properties": {"user": {"type": "string"}}, "required": ["user"]}),
        |args: Value, _ctx: ToolContext| async move {
            Ok(format!("hello {}", args["user"].as_str().unwrap_or("?")))
        },
    )
    .with_injected(InjectedArg::state_key("user", "user"))
    .shared();
    let model = FakeChatModel::new(Vec::<FakeReply>::new());
    for _ in 0..2 {
        model.push_reply(FakeReply::tool_call("greet", json!({}), "c1"));
        model.push_reply("done");
    }
    let _ = echo(Arc::clone(&log));
    for version in [AgentVersion::V1, AgentVersion::V2] {
        let agent = ReactAgentBuilder::<Session>::new(model.clone(), [greet.clone()])
            .version(version)
            .build()
            .unwrap();
        let input = Session::update().messages(vec![Message::human("hi")]).user("Ada");
        let out = agent.invoke(input, &RunnableConfig::default()).await.unwrap();
        assert_eq!(texts(&out.value.messages[2..]), ["hello Ada", "done"], "{version:?}");
    }
    let spec = model.calls()[0].options.tools[0].clone();
    assert_eq!(spec.parameters["properties"], json!({}), "the injected field is hidden from the model");
}

/// A reply whose one tool call has arguments that are not JSON (as a model's output parser reports it).
fn unparsable_add_call(id: &str) -> FakeReply {
    FakeReply::from(weft_runnable_core::AiMessage {
        invalid_tool_calls: vec![weft_runnable_core::InvalidToolCall {
            name: Some("add".into()),
            args: Some(r#"{"a": 2, "b": "#.into()),
            id: Some(id.into()),
            error: Some("EOF while parsing an object at line 1 column 14".into()),
        }],
        ..weft_runnable_core::AiMessage::default()
    })
}

#[tokio::test]
async fn a_tool_call_whose_arguments_are_not_json_is_answered_with_the_error_and_the_model_tries_again() {
    for version in [AgentVersion::V1, AgentVersion::V2] {
        let model = FakeChatModel::new([
            unparsable_add_call("c1"),
            FakeReply::tool_call("add", json!({"a": 2, "b": 3}), "c2"),
            "2 + 3 = 5".into(),
        ]);
        let agent = create_react_agent(model.clone(), [add()]).version(version).build().unwrap();
        let out = agent.invoke(ask("what is 2 + 3?"), &RunnableConfig::default()).await.unwrap();
        assert_eq!(kinds(&out.value.messages), ["human", "ai", "tool", "ai", "tool", "ai"], "{version:?}");
        let error = out.value.messages[2].as_tool().unwrap();
        assert_eq!(error.tool_call_id, "c1");
        assert_eq!(error.name.as_deref(), Some("add"));
        assert_eq!(error.status, weft_runnable_core::ToolStatus::Error);
        assert_eq!(
            error.content.text(),
            "Error invoking tool 'add' with kwargs {\"a\": 2, \"b\":  with error:\n EOF while parsing an object at \
             line 1 column 14\n Please fix the error and try again."
        );
        assert_eq!(texts(&out.value.messages[4..]), ["5", "2 + 3 = 5"]);
        // The model saw the error before its second call.
        let calls = model.calls();
        assert_eq!(calls.len(), 3);
        assert_eq!(kinds(&calls[1].messages), ["human", "ai", "tool"]);
        assert_eq!(calls[1].messages[2], out.value.messages[2]);
    }
}
