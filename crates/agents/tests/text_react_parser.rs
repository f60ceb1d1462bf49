//! The ReAct output parser: LangChain's `ReActSingleInputOutputParser` rules and texts.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use serde_json::json;
use weft_agents::text_react::{
    AgentAction, AgentDecision, AgentFinish, FINAL_ANSWER_AND_PARSABLE_ACTION_ERROR_MESSAGE,
    MISSING_ACTION_AFTER_THOUGHT_ERROR_MESSAGE, MISSING_ACTION_INPUT_AFTER_ACTION_ERROR_MESSAGE,
    ReActSingleInputOutputParser, parse_react_output,
};
use weft_runnable_core::{AiMessage, EventRecorder, OutputParserError, Runnable, RunnableConfig};

fn action(text: &str) -> AgentAction {
    match parse_react_output(text) {
        Ok(AgentDecision::Action(action)) => action,
        other => panic!("expected an action for {text:?}, got {other:?}"),
    }
}

fn error(text: &str) -> OutputParserError {
    match parse_react_output(text) {
        Err(err) => err,
        other => panic!("expected an error for {text:?}, got {other:?}"),
    }
}

#[test]
fn action_and_input_are_read_and_the_whole_text_is_the_log() {
    let text = "Thought: agent thought here\nAction: search\nAction Input: what is the temperature in SF?";
    assert_eq!(action(text), AgentAction::new("search", "what is the temperature in SF?", text));
}

#[test]
fn a_final_answer_finishes_with_the_text_after_it_trimmed() {
    let text = "Thought: agent thought here\nFinal Answer: The temperature is 100 ";
    assert_eq!(
        parse_react_output(text).unwrap(),
        AgentDecision::Finish(AgentFinish::new("The temperature is 100", text))
    );
}

#[test]
fn the_last_final_answer_wins() {
    let AgentDecision::Finish(finish) = parse_react_output("Final Answer: a\nFinal Answer:\n b \n").unwrap()
    else {
        panic!("expected a finish")
    };
    assert_eq!(finish.output(), Some("b"));
    assert_eq!(finish.return_values, json!({"output": "b"}).as_object().unwrap().clone());
}

#[test]
fn an_action_together_with_a_final_answer_is_an_error_not_sent_to_the_model() {
    for text in [
        "Thought: agent thought here\nAction: search Final Answer:\nAction Input: what is the temperature in SF?",
        "Final Answer: margherita\n\nAction: foo\nAction Input: bar",
        "Action: foo\nAction Input: bar\nFinal Answer: margherita",
    ] {
        let err = error(text);
        assert_eq!(
            err.error,
            format!("Parsing LLM output produced both a final answer and a parse-able action:: {text}")
        );
        assert!(err.error.starts_with(FINAL_ANSWER_AND_PARSABLE_ACTION_ERROR_MESSAGE));
        assert!(!err.send_to_llm);
        assert_eq!((err.observation, err.llm_output), (None, None));
    }
}

#[test]
fn spaces_then_double_quotes_are_stripped_from_the_input() {
    assert_eq!(action("Action: search\nAction Input: \"hello\"").input_text(), "hello");
    assert_eq!(action("Action: search\nAction Input:   \"q q\" ").input_text(), "q q");
    // Only spaces are stripped before the quotes: a trailing newline keeps the closing quote.
    assert_eq!(action("Action: search\nAction Input: \"x\"\n").input_text(), "x\"\n");
    // Single quotes stay.
    assert_eq!(action("Action: search\nAction Input: 'x'").input_text(), "'x'");
}

#[test]
fn the_tool_name_is_trimmed_and_may_share_a_line_with_the_input() {
    assert_eq!(action("Action:   search  \n\nAction Input: x").tool, "search");
    assert_eq!(action("Action: search Action Input: x").tool, "search");
    assert_eq!(action("Action:\nAction Input: x").tool, "");
}

#[test]
fn numbered_actions_and_inputs_are_accepted() {
    let a = action("Thought: t\nAction 1: search\nAction 1 Input 1: rust");
    assert_eq!((a.tool.as_str(), a.input_text().as_str()), ("search", "rust"));
    let a = action("Action2:lookup\nAction2Input2:weft");
    assert_eq!((a.tool.as_str(), a.input_text().as_str()), ("lookup", "weft"));
    let a = action("Action 12 : calc\nAction 12 Input : 1+1");
    assert_eq!((a.tool.as_str(), a.input_text().as_str()), ("calc", "1+1"));
}

#[test]
fn the_input_runs_to_the_end_of_the_text_across_lines() {
    let a = action("Action: python\nAction Input: print(1)\nprint(2)");
    assert_eq!(a.input_text(), "print(1)\nprint(2)");
    // With two actions the first one wins and its input swallows the rest.
    let a = action("Action: a\nAction Input: 1\nAction: b\nAction Input: 2");
    assert_eq!(a.tool, "a");
    assert_eq!(a.input_text(), "1\nAction: b\nAction Input: 2");
}

#[test]
fn a_later_action_header_is_used_when_an_earlier_action_word_is_not_one() {
    let a = action("Actionable thoughts. Action: search\nAction Input: x");
    assert_eq!((a.tool.as_str(), a.input_text().as_str()), ("search", "x"));
}

#[test]
fn missing_action_is_sent_back_to_the_model() {
    let text = "I can use the `foo` tool to achieve the goal.";
    let err = error(text);
    assert_eq!(err.error, format!("Could not parse LLM output: `{text}`"));
    assert_eq!(err.observation.as_deref(), Some("Invalid Format: Missing 'Action:' after 'Thought:'"));
    assert_eq!(err.observation.as_deref(), Some(MISSING_ACTION_AFTER_THOUGHT_ERROR_MESSAGE));
    assert_eq!(err.llm_output.as_deref(), Some(text));
    assert!(err.send_to_llm);
}

#[test]
fn missing_action_input_is_sent_back_to_the_model() {
    let text = "I can use the `foo` tool to achieve the goal.\n    Action: foo";
    let err = error(text);
    assert_eq!(err.error, format!("Could not parse LLM output: `{text}`"));
    assert_eq!(err.observation.as_deref(), Some("Invalid Format: Missing 'Action Input:' after 'Action:'"));
    assert_eq!(err.observation.as_deref(), Some(MISSING_ACTION_INPUT_AFTER_ACTION_ERROR_MESSAGE));
    assert_eq!(err.llm_output.as_deref(), Some(text));
    assert!(err.send_to_llm);
}

#[test]
fn an_input_before_its_action_is_a_plain_parse_error() {
    let text = "Action Input: x\nAction: search";
    let err = error(text);
    assert_eq!(err, OutputParserError::new(format!("Could not parse LLM output: `{text}`")));
}

#[test]
fn an_empty_output_misses_its_action() {
    assert_eq!(error("").observation.as_deref(), Some(MISSING_ACTION_AFTER_THOUGHT_ERROR_MESSAGE));
}

#[test]
fn non_ascii_text_is_handled_on_character_boundaries() {
    let a = action("Pensée : é\nAction: ñandú\u{3000}\nAction Input:\u{3000}«ü»");
    // U+3000 is white space for the pattern as for Python, so it is skipped after the colon.
    assert_eq!((a.tool.as_str(), a.input_text().as_str()), ("ñandú", "«ü»"));
}

#[tokio::test]
async fn the_parser_runnable_reads_strings_and_messages_and_traces_as_a_parser() {
    let recorder = EventRecorder::new();
    let config = RunnableConfig::default().with_callbacks(recorder.sink());
    let from_text: AgentDecision =
        ReActSingleInputOutputParser.invoke("Final Answer: 4".to_owned(), &config).await.unwrap();
    let from_message: AgentDecision =
        ReActSingleInputOutputParser.invoke(AiMessage::new("Final Answer: 4"), &config).await.unwrap();
    assert_eq!(from_text, from_message);
    let names = recorder.names();
    assert_eq!(names[0], ("on_parser_start".to_owned(), "ReActSingleInputOutputParser".to_owned()));
    assert_eq!(names[1].0, "on_parser_end");

    let err =
        Runnable::<String, AgentDecision>::invoke(&ReActSingleInputOutputParser, "nope".to_owned(), &config)
            .await
            .unwrap_err();
    let parse_error = err.as_output_parser().unwrap();
    assert_eq!(parse_error.observation.as_deref(), Some(MISSING_ACTION_AFTER_THOUGHT_ERROR_MESSAGE));
}

#[test]
fn decisions_and_steps_serialize_as_plain_json() {
    let decision = AgentDecision::Action(AgentAction::new("echo", "hi", "log"));
    assert_eq!(
        serde_json::to_value(&decision).unwrap(),
        json!({"action": {"tool": "echo", "tool_input": "hi", "log": "log"}})
    );
    let back: AgentDecision = serde_json::from_value(serde_json::to_value(&decision).unwrap()).unwrap();
    assert_eq!(back, decision);
}

/// Every case of `fixtures/react_parser_cases.json`, whose expectations were computed with Python's
/// `re` and the reference parser's rules (see `fixtures/gen_react_parser_cases.py`).
#[test]
fn the_matcher_agrees_with_the_reference_regular_expressions() {
    let cases: Vec<serde_json::Value> =
        serde_json::from_str(include_str!("fixtures/react_parser_cases.json")).unwrap();
    assert!(cases.len() >= 300);
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let expected = &case["expected"];
        let got = parse_react_output(text);
        if let Some(action) = expected.get("action") {
            let want: AgentAction = serde_json::from_value(action.clone()).unwrap();
            assert_eq!(got, Ok(AgentDecision::Action(want)), "{text:?}");
        } else if let Some(output) = expected.get("finish") {
            assert_eq!(
                got,
                Ok(AgentDecision::Finish(AgentFinish::new(output.as_str().unwrap(), text))),
                "{text:?}"
            );
        } else {
            let err = got.unwrap_err();
            assert_eq!(err.error, expected["error"].as_str().unwrap(), "{text:?}");
            assert_eq!(err.observation.as_deref(), expected["observation"].as_str(), "{text:?}");
            assert_eq!(err.send_to_llm, expected["send_to_llm"].as_bool().unwrap(), "{text:?}");
        }
    }
}
