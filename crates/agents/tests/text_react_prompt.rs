//! The ReAct prompt: its rendering, the tool descriptions, the scratchpad, the stop sequence, and both
//! kinds of model.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use serde_json::json;
use weft_agents::text_react::{
    AgentAction, AgentExecutor, AgentStep, REACT_PROMPT_TEMPLATE, StopSequence, TextReactError,
    TextReactOptions, create_text_react_agent, create_text_react_agent_with, format_log_to_str,
    format_log_to_str_with, react_prompt, render_text_description, render_tool_names,
};
use weft_runnable_core::fakes::{FakeChatModel, FakeListLlm};
use weft_runnable_core::{
    Message, PromptTemplate, Runnable, RunnableConfig, SharedTool, StructuredTool, ToolExt, tool,
};

fn echo() -> SharedTool {
    StructuredTool::from_fn(
        "echo",
        "Echo input.",
        json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
        |args, _| async move { Ok(format!("ECHO[{}]", args["q"].as_str().unwrap_or_default())) },
    )
    .shared()
}

/// Adds two integers.
#[tool]
fn add(
    /// The first number.
    a: i64,
    /// The second number.
    b: i64,
) -> i64 {
    a + b
}

const EXPECTED_FIRST_PROMPT: &str =
    "Answer the following questions as best you can. You have access to the following tools:

echo(q: string) - Echo input.
add(a: integer, b: integer) - Adds two integers.

Use the following format:

Question: the input question you must answer
Thought: you should always think about what to do
Action: the action to take, should be one of [echo, add]
Action Input: the input to the action
Observation: the result of the action
... (this Thought/Action/Action Input/Observation can repeat N times)
Thought: I now know the final answer
Final Answer: the final answer to the original input question

Begin!

Question: what is 2 + 3?
Thought:";

#[tokio::test]
async fn the_standard_prompt_renders_tools_names_question_and_an_empty_scratchpad() {
    let model = FakeListLlm::new(["Final Answer: 5"]);
    let tools = vec![echo(), add.shared()];
    let agent = create_text_react_agent(model.clone(), &tools, react_prompt().unwrap()).unwrap();
    AgentExecutor::new(agent, tools)
        .unwrap()
        .invoke(json!({"input": "what is 2 + 3?"}), &RunnableConfig::default())
        .await
        .unwrap();
    assert_eq!(model.prompts(), [EXPECTED_FIRST_PROMPT]);
    assert_eq!(react_prompt().unwrap().template(), REACT_PROMPT_TEMPLATE);
    assert_eq!(
        react_prompt().unwrap().input_variables(),
        ["agent_scratchpad", "input", "tool_names", "tools"]
    );
}

#[test]
fn tools_are_described_one_per_line_from_their_schemas() {
    let defaults = StructuredTool::from_fn(
        "fetch",
        "Fetches a page.",
        json!({"type": "object", "properties": {
            "url": {"type": "string"},
            "retries": {"type": "integer", "default": 3},
            "tags": {"type": "array", "items": {"type": "string"}},
            "mode": {"type": ["string", "null"]},
            "kind": {"anyOf": [{"$ref": "#/$defs/Kind"}, {"type": "null"}]},
            "raw": {}
        }}),
        |_, _| async move { Ok("page") },
    )
    .shared();
    let bare =
        StructuredTool::from_fn(
            "ping",
            "Pings.",
            json!({"type": "object"}),
            |_, _| async move { Ok("pong") },
        )
        .shared();
    let no_args = StructuredTool::from_fn(
        "now",
        "The time.",
        json!({"type": "object", "properties": {}}),
        |_, _| async move { Ok("noon") },
    )
    .shared();
    let tools = vec![echo(), add.shared(), defaults, bare, no_args];
    assert_eq!(
        render_text_description(&tools),
        "echo(q: string) - Echo input.\n\
         add(a: integer, b: integer) - Adds two integers.\n\
         fetch(url: string, retries: integer = 3, tags: array[string], mode: string | null, kind: Kind | null, raw: any) - Fetches a page.\n\
         ping - Pings.\n\
         now() - The time."
    );
    assert_eq!(render_tool_names(&tools), "echo, add, fetch, ping, now");
    assert_eq!(render_text_description(&[]), "");
}

#[test]
fn the_scratchpad_is_each_log_then_its_observation_and_a_new_thought() {
    let steps = [
        AgentStep::new(AgentAction::new("echo", "a", " first\nAction: echo\nAction Input: a"), "A"),
        AgentStep::new(AgentAction::new("echo", "b", "second\nAction: echo\nAction Input: b"), "B"),
    ];
    assert_eq!(
        format_log_to_str(&steps),
        " first\nAction: echo\nAction Input: a\nObservation: A\nThought: second\nAction: echo\nAction Input: b\nObservation: B\nThought: "
    );
    assert_eq!(format_log_to_str(&[]), "");
    assert_eq!(
        format_log_to_str_with(&steps[..1], "Obs:", ""),
        " first\nAction: echo\nAction Input: a\nObs:A\n"
    );
}

#[test]
fn a_prompt_without_the_agent_variables_is_refused() {
    let tools = vec![echo()];
    let prompt = PromptTemplate::from_template("Question: {input}").unwrap();
    let err = create_text_react_agent(FakeListLlm::new(["x"]), &tools, prompt).unwrap_err();
    assert_eq!(
        err,
        TextReactError::MissingPromptVariables {
            missing: vec!["agent_scratchpad".into(), "tool_names".into(), "tools".into()]
        }
    );
    assert_eq!(
        err.to_string(),
        "prompt missing required variables: [\"agent_scratchpad\", \"tool_names\", \"tools\"]"
    );
    // Pre-filled variables count.
    let prompt = PromptTemplate::from_template("{tools} {tool_names} {input} {agent_scratchpad}")
        .unwrap()
        .partial("tools", "mine");
    assert!(create_text_react_agent(FakeListLlm::new(["x"]), &tools, prompt).is_ok());
}

/// A model that writes the observation itself: the stop sequence cuts it off.
const HALLUCINATING: &str =
    " I will echo.\nAction: echo\nAction Input: hi\nObservation: made up\nThought: done";

#[tokio::test]
async fn the_stop_sequence_cuts_the_model_before_an_observation_of_its_own() {
    let model = FakeListLlm::new([HALLUCINATING, "Final Answer: ok"]);
    let tools = vec![echo()];
    let agent = create_text_react_agent(model.clone(), &tools, react_prompt().unwrap()).unwrap();
    let out = AgentExecutor::new(agent, tools)
        .unwrap()
        .with_return_intermediate_steps(true)
        .invoke(json!({"input": "x"}), &RunnableConfig::default())
        .await
        .unwrap();
    let steps: Vec<AgentStep> = serde_json::from_value(out["intermediate_steps"].clone()).unwrap();
    assert_eq!(steps[0].action.input_text(), "hi");
    assert_eq!(steps[0].action.log, " I will echo.\nAction: echo\nAction Input: hi");
}

#[tokio::test]
async fn the_stop_sequence_can_be_replaced_or_disabled() {
    let run = |stop: StopSequence, reply: &'static str| async move {
        let model = FakeListLlm::new([reply, "Final Answer: ok"]);
        let tools = vec![echo()];
        let options = TextReactOptions { stop_sequence: stop, ..TextReactOptions::default() };
        let agent = create_text_react_agent_with(model, &tools, react_prompt().unwrap(), options).unwrap();
        let out = AgentExecutor::new(agent, tools)
            .unwrap()
            .with_return_intermediate_steps(true)
            .invoke(json!({"input": "x"}), &RunnableConfig::default())
            .await
            .unwrap();
        let steps: Vec<AgentStep> = serde_json::from_value(out["intermediate_steps"].clone()).unwrap();
        steps[0].action.input_text()
    };
    assert_eq!(run(StopSequence::Disabled, HALLUCINATING).await, "hi\nObservation: made up\nThought: done");
    assert_eq!(
        run(StopSequence::Custom(vec!["\nThought".into()]), HALLUCINATING).await,
        "hi\nObservation: made up"
    );
}

#[tokio::test]
async fn a_custom_renderer_describes_the_tools() {
    let model = FakeListLlm::new(["Final Answer: ok"]);
    let tools = vec![echo()];
    let options = TextReactOptions {
        tools_renderer: Some(std::sync::Arc::new(|tools: &[SharedTool]| format!("{} tool(s)", tools.len()))),
        ..TextReactOptions::default()
    };
    let prompt = PromptTemplate::from_template("{tools}|{tool_names}|{input}|{agent_scratchpad}").unwrap();
    let agent = create_text_react_agent_with(model.clone(), &tools, prompt, options).unwrap();
    AgentExecutor::new(agent, tools)
        .unwrap()
        .invoke(json!({"input": "q"}), &RunnableConfig::default())
        .await
        .unwrap();
    assert_eq!(model.prompts(), ["1 tool(s)|echo|q|"]);
}

#[tokio::test]
async fn a_chat_model_gets_the_prompt_as_one_human_message_and_the_stop_sequence() {
    let model = FakeChatModel::new([
        " I will echo.\nAction: echo\nAction Input: hi",
        " Now I know.\nFinal Answer: ECHO[hi]",
    ]);
    let tools = vec![echo()];
    let agent = create_text_react_agent(model.clone(), &tools, react_prompt().unwrap()).unwrap();
    let out = AgentExecutor::new(agent, tools)
        .unwrap()
        .invoke(json!({"input": "echo hi"}), &RunnableConfig::default())
        .await
        .unwrap();
    assert_eq!(out["output"], "ECHO[hi]");
    let calls = model.calls();
    assert_eq!(calls.len(), 2);
    for call in &calls {
        assert_eq!(call.options.stop, Some(vec!["\nObservation".to_owned()]));
        assert_eq!(call.messages.len(), 1);
        assert!(matches!(call.messages[0], Message::Human(_)));
    }
    assert!(calls[1].messages[0].text().ends_with(
        "Thought: I will echo.\nAction: echo\nAction Input: hi\nObservation: ECHO[hi]\nThought: "
    ));
}
