//! The executor's loop without I/O: AgentLoop's transitions, its misuse, and AgentRun's serialization.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use std::time::Duration;

use serde_json::{Map, Value, json};
use weft_agents::text_react::{
    AgentAction, AgentDecision, AgentFinish, AgentLoop, AgentRun, EarlyStopping, Next, ParsingErrorPolicy,
    STOPPED_OUTPUT, TextReactError, ToolRun,
};
use weft_runnable_core::{OutputParserError, SharedTool, StructuredTool, ToolExt};

fn tool(name: &str, direct: bool) -> SharedTool {
    StructuredTool::from_fn(name, "A tool.", json!({"type": "object", "properties": {}}), |_, _| async move {
        Ok("")
    })
    .with_return_direct(direct)
    .shared()
}

fn inputs() -> Map<String, Value> {
    json!({"input": "q"}).as_object().unwrap().clone()
}

#[test]
fn a_run_alternates_agent_and_tool_until_a_final_answer() {
    let rules = AgentLoop::new(&[tool("echo", false)]).with_return_intermediate_steps(true);
    let mut run = rules.start(inputs());
    assert_eq!(run.next(), &Next::CallAgent);
    assert_eq!(rules.agent_input(&run).unwrap(), json!({"input": "q", "intermediate_steps": []}));

    rules.on_model_output(&mut run, "Thought: t\nAction: echo\nAction Input: hi").unwrap();
    let action = AgentAction::new("echo", "hi", "Thought: t\nAction: echo\nAction Input: hi");
    assert_eq!(run.next(), &Next::CallTool(ToolRun::Tool(action.clone())));

    rules.on_tool_output(&mut run, "HI").unwrap();
    assert_eq!((run.next(), run.iterations()), (&Next::CallAgent, 1));
    assert_eq!(
        rules.agent_input(&run).unwrap()["intermediate_steps"],
        json!([{"action": {"tool": "echo", "tool_input": "hi", "log": action.log}, "observation": "HI"}])
    );

    rules.on_model_output(&mut run, "Final Answer: HI").unwrap();
    assert_eq!(run.finish(), Some(&AgentFinish::new("HI", "Final Answer: HI")));
    assert_eq!(
        rules.output(&run).unwrap(),
        json!({"input": "q", "output": "HI", "intermediate_steps": [
            {"action": {"tool": "echo", "tool_input": "hi", "log": action.log}, "observation": "HI"}
        ]})
    );
}

#[test]
fn events_out_of_turn_are_typed_errors() {
    let rules = AgentLoop::new(&[tool("echo", false)]);
    let mut run = rules.start(inputs());
    let err = rules.on_tool_output(&mut run, "early").unwrap_err();
    assert_eq!(
        err,
        TextReactError::UnexpectedEvent { waiting_for: "the agent's output", received: "a tool output" }
    );
    assert_eq!(err.to_string(), "the agent run waits for the agent's output, but received a tool output");

    rules.on_model_output(&mut run, "Action: echo\nAction Input: x").unwrap();
    assert!(rules.on_model_output(&mut run, "Final Answer: no").is_err());
    assert!(rules.agent_input(&run).is_err());

    rules.on_tool_output(&mut run, "x").unwrap();
    rules.on_model_output(&mut run, "Final Answer: yes").unwrap();
    let before = run.clone();
    assert!(rules.on_model_output(&mut run, "Final Answer: again").is_err());
    assert!(rules.on_tool_output(&mut run, "again").is_err());
    assert_eq!(run, before, "a refused event changes nothing");
    assert!(rules.output(&rules.start(inputs())).is_none(), "an unfinished run has no output");
}

#[test]
fn an_unknown_tool_and_a_handled_parse_error_wait_for_their_known_observation() {
    let rules = AgentLoop::new(&[tool("a", false), tool("b", false)])
        .with_handle_parsing_errors(ParsingErrorPolicy::SendToModel);
    let mut run = rules.start(inputs());
    rules.on_model_output(&mut run, "Action: c\nAction Input: x").unwrap();
    let Next::CallTool(ToolRun::InvalidTool { observation, .. }) = run.next().clone() else {
        panic!("{:?}", run.next())
    };
    assert_eq!(observation, "c is not a valid tool, try one of [a, b].");
    rules.on_tool_output(&mut run, observation).unwrap();

    rules
        .on_agent_output(
            &mut run,
            Err(OutputParserError::new("bad").send_to_llm("fix it").with_llm_output("raw")),
        )
        .unwrap();
    let Next::CallTool(ToolRun::ParsingError { action, observation }) = run.next() else {
        panic!("{:?}", run.next())
    };
    assert_eq!((action, observation.as_str()), (&AgentAction::new("_Exception", "fix it", "raw"), "fix it"));
}

#[test]
fn a_return_direct_tool_finishes_without_counting_an_iteration() {
    let rules = AgentLoop::new(&[tool("lookup", true)]);
    let mut run = rules.start(inputs());
    rules
        .on_agent_output(&mut run, Ok(AgentDecision::Action(AgentAction::new("lookup", "x", "log"))))
        .unwrap();
    rules.on_tool_output(&mut run, "found it").unwrap();
    assert_eq!(run.finish(), Some(&AgentFinish::new("found it", "")));
    assert_eq!(run.iterations(), 0);
    assert_eq!(run.intermediate_steps().len(), 1);
}

#[test]
fn time_reported_by_the_driver_counts_against_the_limit() {
    let rules = AgentLoop::new(&[tool("echo", false)]).with_max_execution_time(Some(Duration::from_secs(10)));
    let mut run = rules.start(inputs());
    rules.on_model_output(&mut run, "Action: echo\nAction Input: x").unwrap();
    run.add_elapsed(Duration::from_secs(10));
    assert_eq!(rules.remaining_time(&run), Some(Duration::ZERO));
    rules.on_tool_output(&mut run, "x").unwrap();
    assert_eq!(run.finish(), Some(&AgentFinish::new(STOPPED_OUTPUT, "")));
}

#[test]
fn a_time_limit_hit_mid_call_drops_the_call_and_stops() {
    let rules = AgentLoop::new(&[tool("echo", false)])
        .with_max_execution_time(Some(Duration::from_secs(3)))
        .with_early_stopping(EarlyStopping::Generate);
    let mut run = rules.start(inputs());
    rules.on_time_limit(&mut run);
    assert_eq!(run.next(), &Next::CallAgentFinal);
    assert_eq!(run.elapsed(), Duration::from_secs(3));
    let input = rules.agent_input(&run).unwrap();
    assert_eq!(
        input["agent_scratchpad"],
        "\n\nI now need to return a final answer based on the previous steps:"
    );
    rules.on_time_limit(&mut run);
    assert_eq!(run.next(), &Next::CallAgentFinal, "the final call is not cut short");
    rules.on_model_output(&mut run, "Final Answer: late but fine").unwrap();
    assert_eq!(run.finish().unwrap().output(), Some("late but fine"));
}

#[test]
fn generate_without_an_llm_output_raises_the_parse_error() {
    let rules = AgentLoop::new(&[]).with_max_iterations(Some(0)).with_early_stopping(EarlyStopping::Generate);
    let mut run = rules.start(inputs());
    let err = rules.on_agent_output(&mut run, Err(OutputParserError::new("opaque"))).unwrap_err();
    assert_eq!(err, TextReactError::OutputParsing(OutputParserError::new("opaque")));
}

#[test]
fn a_run_survives_a_json_round_trip_at_every_point() {
    let rules = AgentLoop::new(&[tool("echo", false)]);
    let mut run = rules.start(inputs());
    let round_trip = |run: &AgentRun| -> AgentRun {
        let text = serde_json::to_string(run).unwrap();
        serde_json::from_str(&text).unwrap()
    };
    assert_eq!(round_trip(&run), run);
    rules.on_model_output(&mut run, "Action: echo\nAction Input: x").unwrap();
    run.add_elapsed(Duration::from_millis(1500));
    let mut restored = round_trip(&run);
    assert_eq!(restored, run);
    rules.on_tool_output(&mut restored, "X").unwrap();
    rules.on_model_output(&mut restored, "Final Answer: X").unwrap();
    assert_eq!(round_trip(&restored), restored);
    assert_eq!(restored.elapsed(), Duration::from_millis(1500));
    assert_eq!(rules.output(&restored).unwrap(), json!({"input": "q", "output": "X"}));

    let json = serde_json::to_value(&run).unwrap();
    assert_eq!(
        json["next"],
        json!({"call_tool": {"tool": {"tool": "echo", "tool_input": "x", "log": "Action: echo\nAction Input: x"}}})
    );
}
