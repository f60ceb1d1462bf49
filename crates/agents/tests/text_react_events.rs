//! How an AgentExecutor run shows in run events: chain, prompt, model, parser and tool runs.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use futures::StreamExt as _;
use serde_json::json;
use weft_agents::text_react::{AgentExecutor, ParsingErrorPolicy, create_text_react_agent, react_prompt};
use weft_runnable_core::fakes::FakeListLlm;
use weft_runnable_core::{RunnableConfig, RunnableExt, SharedTool, StreamEvent, StructuredTool, ToolExt};

fn echo() -> SharedTool {
    StructuredTool::from_fn(
        "echo",
        "Echo input.",
        json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
        |args, _| async move { Ok(format!("ECHO[{}]", args["q"].as_str().unwrap_or_default())) },
    )
    .shared()
}

async fn events(script: &[&'static str]) -> Vec<StreamEvent> {
    let model = FakeListLlm::new(script.iter().copied());
    let tools = vec![echo()];
    let agent = create_text_react_agent(model, &tools, react_prompt().unwrap()).unwrap();
    let executor =
        AgentExecutor::new(agent, tools).unwrap().with_handle_parsing_errors(ParsingErrorPolicy::SendToModel);
    let config = RunnableConfig::default();
    executor.stream_events(json!({"input": "hi"}), &config).map(|e| e.unwrap()).collect().await
}

fn starts_and_ends(events: &[StreamEvent]) -> Vec<String> {
    events
        .iter()
        .filter(|e| !e.event.ends_with("_stream"))
        .map(|e| format!("{} {}", e.event, e.name))
        .collect()
}

#[tokio::test]
async fn a_run_traces_the_executor_the_agent_sequence_the_model_and_the_tool() {
    let events =
        events(&[" go\nAction: echo\nAction Input: hello", " done\nFinal Answer: ECHO[hello]"]).await;
    let agent_call = [
        "on_chain_start RunnableSequence",
        "on_chain_start RunnableAssign<agent_scratchpad>",
        "on_chain_start RunnableParallel<agent_scratchpad>",
        "on_chain_start RunnableLambda",
        "on_chain_end RunnableLambda",
        "on_chain_end RunnableParallel<agent_scratchpad>",
        "on_chain_end RunnableAssign<agent_scratchpad>",
        "on_prompt_start PromptTemplate",
        "on_prompt_end PromptTemplate",
        "on_llm_start FakeListLlm",
        "on_llm_end FakeListLlm",
        "on_parser_start ReActSingleInputOutputParser",
        "on_parser_end ReActSingleInputOutputParser",
        "on_chain_end RunnableSequence",
    ];
    let mut expected = vec!["on_chain_start AgentExecutor"];
    expected.extend(agent_call);
    expected.extend(["on_tool_start echo", "on_tool_end echo"]);
    expected.extend(agent_call);
    expected.push("on_chain_end AgentExecutor");
    assert_eq!(starts_and_ends(&events), expected);

    // Tokens stream from the model; the tool and the agent sequence are children of the executor's run.
    assert!(events.iter().any(|e| e.event == "on_llm_stream"));
    let root = events[0].run_id;
    for name in ["echo", "RunnableSequence"] {
        let start = events.iter().find(|e| e.name == name && e.event.ends_with("_start")).unwrap();
        assert_eq!(start.parent_ids, vec![root], "{name}");
    }
    let tool_start = events.iter().find(|e| e.event == "on_tool_start").unwrap();
    assert_eq!(tool_start.data.input, Some(json!({"q": "hello"})));
    let tool_end = events.iter().find(|e| e.event == "on_tool_end").unwrap();
    assert_eq!(tool_end.data.output.as_ref().unwrap()["content"], "ECHO[hello]");
    // `stream_events` streams the executor, so its end event holds the merged chunks of its stream.
    let end = events.last().unwrap();
    let output = end.data.output.as_ref().unwrap();
    assert_eq!(output["output"], "ECHO[hello]");
    assert_eq!(output["steps"][0]["observation"], "ECHO[hello]");
    assert_eq!(output["actions"][0]["tool"], "echo");
}

#[tokio::test]
async fn handled_errors_and_unknown_tools_trace_as_pseudo_tool_runs() {
    let events = events(&["garbage", "Action: nosuch\nAction Input: x", "Final Answer: ok"]).await;
    let tools: Vec<&StreamEvent> = events.iter().filter(|e| e.event.starts_with("on_tool_")).collect();
    let names: Vec<String> = tools.iter().map(|e| format!("{} {}", e.event, e.name)).collect();
    assert_eq!(
        names,
        [
            "on_tool_start _Exception",
            "on_tool_end _Exception",
            "on_tool_start invalid_tool",
            "on_tool_end invalid_tool"
        ]
    );
    assert_eq!(tools[0].data.input, Some(json!("Invalid Format: Missing 'Action:' after 'Thought:'")));
    assert_eq!(
        tools[2].data.input,
        Some(json!({"requested_tool_name": "nosuch", "available_tool_names": ["echo"]}))
    );
    assert_eq!(tools[3].data.output, Some(json!("nosuch is not a valid tool, try one of [echo].")));
    // The failed parse shows as a parser run that ended with an error.
    let parser_end = events.iter().find(|e| e.event == "on_parser_end").unwrap();
    assert!(parser_end.data.error.as_deref().unwrap().starts_with("Could not parse LLM output"));
}
