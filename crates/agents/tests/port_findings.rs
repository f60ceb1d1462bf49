//! What porting four LangGraph tutorials to weft ran into (plan-and-execute, hierarchical teams, customer
//! support, a supervisor with hand-offs): one test per finding, each of which failed before the fix.

use std::collections::BTreeMap;

use futures::StreamExt as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use weft_agents::agent::{AgentState, SchemaSpec, ToolStrategy};
use weft_agents::{ToolNode, create_agent, create_react_agent, tool_command, tools_condition};
use weft_graph::{Command, END, Messages, NodeConfig, Runtime, START, State, StateGraph};
use weft_runnable_core::fakes::{FakeChatModel, FakeReply, GenericFakeChatModel};
use weft_runnable_core::{
    AiMessage, ChatModelExt, Error, Message, PromptValue, Runnable, RunnableConfig, StructuredOutputMethod,
    StructuredTool, ToolCall, ToolContext, ToolExt, ToolMessage, tool,
};

/// Inserts lines into a document, by line number.
#[tool]
fn insert_lines(
    /// Line number -> text.
    inserts: BTreeMap<usize, String>,
) -> String {
    inserts.iter().map(|(n, t)| format!("{n}:{t}")).collect::<Vec<_>>().join(",")
}

/// Finding 1: Integer-keyed map arguments (`Dict[int, str]`): schemars describes them with `patternProperties`,
/// which the hand-written validator ignored ("inserts.2: unexpected field").
#[tokio::test]
async fn integer_keyed_map_arguments_are_accepted() {
    let call = ToolCall {
        name: "insert_lines".into(),
        args: json!({"inserts": {"2": "b", "10": "j"}}),
        id: Some("c".into()),
    };
    let out = insert_lines.invoke(call, &RunnableConfig::default()).await.unwrap();
    assert_eq!(out.content.text(), "2:b,10:j");
    let bad = ToolCall { name: "insert_lines".into(), args: json!({"inserts": {"two": "b"}}), id: None };
    let Err(Error::ToolArguments { errors, .. }) = insert_lines.invoke(bad, &RunnableConfig::default()).await
    else {
        panic!("a non-numeric key must be refused");
    };
    assert_eq!(errors, ["inserts.two: unexpected field"]);
}

/// The supervisor's state: its own key besides the conversation.
#[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
struct Team {
    #[state(add_messages)]
    messages: Messages,
    active: String,
}

/// Finding 2: A hand-off tool inside a prebuilt agent writes a command to the parent in the parent's terms (its
/// state's keys and nodes), as in LangGraph; it failed at run time ("not a Command of this graph's
/// state").
#[tokio::test]
async fn a_hand_off_tool_in_a_prebuilt_agent_commands_the_parent_in_its_terms() {
    let hand_off = StructuredTool::from_fn(
        "transfer_to_writer",
        "Hands the work to the writer.",
        json!({"type": "object"}),
        |_args: Value, ctx: ToolContext| async move {
            let answer = ToolMessage {
                content: "Transferred to writer".into(),
                tool_call_id: ctx.tool_call_id().unwrap_or_default().to_owned(),
                ..ToolMessage::default()
            };
            let command = Command::<Team>::new()
                .update(Team::update().active("writer").messages(vec![Message::Tool(answer)]))
                .goto("writer")
                .to_parent();
            Ok(tool_command(command))
        },
    );
    let model = FakeChatModel::new([FakeReply::tool_call("transfer_to_writer", json!({}), "h1")]);
    let researcher = create_react_agent(model, [hand_off.shared()]).name("researcher").build().unwrap();
    let mut team = StateGraph::<Team>::new();
    team.add_node("researcher", researcher);
    team.add_node("writer", |s: Team| {
        Team::update().messages(vec![Message::ai(format!("writing after {}", s.messages.len()))])
    });
    team.add_edge(START, "researcher");
    team.add_edge("writer", END);
    let app = team.compile().unwrap();
    let input = Team::update().messages(vec![Message::human("write it up")]);
    let out = app.invoke(input, &RunnableConfig::default()).await.unwrap().value;
    assert_eq!(out.active, "writer");
    let last = out.messages.last().unwrap();
    assert_eq!(last.text(), "writing after 2", "{:?}", out.messages);
    assert!(out.messages.iter().any(|m| m.text() == "Transferred to writer"));
}

/// A command for a parent whose state is another type is refused with both types named.
#[tokio::test]
async fn a_command_for_a_parent_of_another_state_is_a_clear_error() {
    let hand_off =
        StructuredTool::from_fn("hop", "Hops.", json!({"type": "object"}), |_: Value, _ctx| async move {
            Ok(tool_command(Command::<AgentState>::new().goto("nowhere").to_parent()))
        });
    let model = FakeChatModel::new([FakeReply::tool_call("hop", json!({}), "h1")]);
    let inner = create_react_agent(model, [hand_off.shared()]).build().unwrap();
    let mut team = StateGraph::<Team>::new();
    team.add_node("inner", inner);
    team.add_edge(START, "inner");
    let err = team.compile().unwrap().invoke(Team::update(), &RunnableConfig::default()).await.unwrap_err();
    let text = format!("{err}");
    assert!(text.contains("AgentState") && text.contains("Team"), "{text}");
}

/// Finding 3: Nodes routing with `Command` declare their destinations: the drawing shows the supervisor's edges
/// and compile does not call the workers unreached.
#[test]
fn command_routing_nodes_declare_their_destinations() {
    let mut graph = StateGraph::<Team>::new();
    graph.add_node_with(
        "supervisor",
        |s: Team| Command::<Team>::new().goto(if s.active.is_empty() { "researcher" } else { END }),
        NodeConfig::new().destinations(["researcher", "coder", END]),
    );
    graph.add_node("researcher", |_: Team| Team::update().active("r"));
    graph.add_node("coder", |_: Team| Team::update().active("c"));
    graph.add_edge(START, "supervisor");
    graph.add_edge("researcher", "supervisor");
    graph.add_edge("coder", "supervisor");
    assert!(graph.unreached_nodes().is_empty(), "{:?}", graph.unreached_nodes());
    let drawing = graph.compile().unwrap().get_graph().draw_mermaid();
    for edge in ["supervisor -.-> researcher;", "supervisor -.-> coder;", "supervisor -.-> __end__;"] {
        assert!(drawing.contains(edge), "{edge} missing from\n{drawing}");
    }
    let mut unknown = StateGraph::<Team>::new();
    unknown.add_node_with("a", |_: Team| (), NodeConfig::new().destinations(["ghost"]));
    unknown.add_edge(START, "a");
    assert!(unknown.compile().is_err());
}

/// Finding 4: Structured output from a schema built at run time (LangGraph's router over `Literal[*members]`).
#[tokio::test]
async fn structured_output_from_a_schema_built_at_run_time() {
    let members = ["researcher".to_owned(), "coder".to_owned()];
    let mut options: Vec<Value> = members.iter().map(|m| json!(m)).collect();
    options.push(json!("FINISH"));
    let route = json!({"title": "Route", "type": "object", "properties": {"next": {"enum": options}}, "required": ["next"]});

    let model = FakeChatModel::new([FakeReply::structured_json("Route", json!({"next": "coder"}))]);
    let router = model.with_structured_output_schema(route.clone(), StructuredOutputMethod::FunctionCalling);
    let next = router.invoke(PromptValue::from("who next?"), &RunnableConfig::default()).await.unwrap();
    assert_eq!(next["next"], "coder");

    let model = FakeChatModel::new([FakeReply::structured_json("Route", json!({"next": "FINISH"}))]);
    let agent = create_agent(model, [])
        .response_format(ToolStrategy::new(SchemaSpec::from_json(route)))
        .build()
        .unwrap();
    let out = agent
        .invoke(AgentState::update().messages(vec![Message::human("?")]), &RunnableConfig::default())
        .await;
    assert_eq!(out.unwrap().value.structured_response(), Some(&json!({"next": "FINISH"})));
}

/// A plan, as a structured reply.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
struct Plan {
    steps: Vec<String>,
}

/// Finding 5: langchain-core's `GenericFakeChatModel` (words and single spaces, the last chunk marked) and
/// helpers to script a structured reply or a tool call.
#[tokio::test]
async fn generic_fake_chat_model_and_scripted_structured_replies() {
    let model = GenericFakeChatModel::new(["one  two"]);
    let chunks: Vec<AiMessage> =
        model.stream("hi", &RunnableConfig::default()).map(|c| c.unwrap()).collect().await;
    let texts: Vec<String> = chunks.iter().map(AiMessage::text).collect();
    assert_eq!(texts, ["one", " ", "", " ", "two"]);
    assert_eq!(chunks.last().and_then(|c| c.chunk_position.as_deref()), Some("last"));
    assert_eq!(chunks.iter().filter(|c| c.chunk_position.is_some()).count(), 1);

    let plan = Plan { steps: vec!["look".into(), "write".into()] };
    let model = FakeChatModel::new([FakeReply::structured(&plan), FakeReply::json(&plan)]);
    let by_tool = model.clone().with_structured_output::<Plan>(StructuredOutputMethod::FunctionCalling);
    assert_eq!(by_tool.invoke(PromptValue::from("plan"), &RunnableConfig::default()).await.unwrap(), plan);
    let by_json = model.with_structured_output::<Plan>(StructuredOutputMethod::JsonSchema);
    assert_eq!(by_json.invoke(PromptValue::from("plan"), &RunnableConfig::default()).await.unwrap(), plan);
}

/// Finding 6: `ToolNode(tools).with_fallbacks([handle_tool_error], exception_key="error")`: a failing call has
/// every call of the message answered.
#[tokio::test]
async fn a_tool_node_fallback_answers_every_call_of_the_message() {
    let flaky = StructuredTool::from_fn(
        "book",
        "Books.",
        json!({"type": "object"}),
        |args: Value, _ctx| async move {
            if args["fail"] == json!(true) {
                return Err(Error::msg("no seats"));
            }
            Ok(json!("booked"))
        },
    );
    let tools = ToolNode::new([flaky.shared()])
        .on_error(|err, _call| format!("Error: {err}\n please fix your mistakes."));
    let model = FakeChatModel::new([
        FakeReply::tool_calls([
            ToolCall { name: "book".into(), args: json!({}), id: Some("b1".into()) },
            ToolCall { name: "book".into(), args: json!({"fail": true}), id: Some("b2".into()) },
        ]),
        "sorry".into(),
    ]);
    let mut graph = StateGraph::<weft_graph::MessagesState>::new();
    graph.add_node("model", move |s: weft_graph::MessagesState, rt: Runtime| {
        let model = model.clone();
        async move {
            let reply = model.invoke(PromptValue::Messages(s.messages.to_vec()), rt.config()).await?;
            Ok::<_, Error>(weft_graph::MessagesState::update().messages(vec![reply.into()]))
        }
    });
    graph.add_node("tools", tools);
    graph.add_edge(START, "model");
    graph.add_conditional_edges("model", tools_condition, ["tools", END]);
    graph.add_edge("tools", "model");
    let input = weft_graph::MessagesState::update().messages(vec![Message::human("book twice")]);
    let out = graph.compile().unwrap().invoke(input, &RunnableConfig::default()).await.unwrap().value;
    let answers: Vec<(String, String)> = out
        .messages
        .iter()
        .filter_map(Message::as_tool)
        .map(|t| (t.tool_call_id.clone(), t.content.text()))
        .collect();
    let expected = "Error: no seats\n please fix your mistakes.".to_owned();
    assert_eq!(answers, [("b1".to_owned(), expected.clone()), ("b2".to_owned(), expected)]);
    assert_eq!(out.messages.last().unwrap().text(), "sorry");
}
