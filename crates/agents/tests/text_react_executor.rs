//! AgentExecutor with the text ReAct agent: the loop's rules, limits, error handling and outputs.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use weft_agents::text_react::{
    AgentAction, AgentExecutor, AgentStep, EarlyStopping, GENERATE_FINAL_SUFFIX, ParsingErrorPolicy,
    STOPPED_OUTPUT, TextReactError, TrimSteps, create_text_react_agent, react_prompt,
};
use weft_runnable_core::fakes::FakeListLlm;
use weft_runnable_core::{
    Error, Runnable, RunnableConfig, SharedTool, StructuredTool, ToolErrorPolicy, ToolExt, tool,
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

fn executor(model: &FakeListLlm, tools: Vec<SharedTool>) -> AgentExecutor {
    let agent = create_text_react_agent(model.clone(), &tools, react_prompt().unwrap()).unwrap();
    AgentExecutor::new(agent, tools).unwrap()
}

fn config() -> RunnableConfig {
    RunnableConfig::default()
}

fn steps(out: &Value) -> Vec<AgentStep> {
    serde_json::from_value(out["intermediate_steps"].clone()).unwrap()
}

fn step(tool: &str, input: &str, log: &str, observation: &str) -> AgentStep {
    AgentStep::new(AgentAction::new(tool, input, log), observation)
}

/// The four outputs of the reference run: an echo action, garbage, an unknown tool, a final answer.
fn reference_script() -> FakeListLlm {
    FakeListLlm::new([
        " I should echo.\nAction: echo\nAction Input: hello",
        "garbage",
        " Try another.\nAction: nosuch\nAction Input: x",
        " Done.\nFinal Answer: done!",
    ])
}

#[tokio::test]
async fn the_reference_run_records_tool_parse_error_and_unknown_tool_steps() {
    let model = reference_script();
    let executor = executor(&model, vec![echo()])
        .with_handle_parsing_errors(ParsingErrorPolicy::SendToModel)
        .with_return_intermediate_steps(true);
    let out = executor.invoke(json!({"input": "hi"}), &config()).await.unwrap();
    assert_eq!(out["input"], "hi");
    assert_eq!(out["output"], "done!");
    let missing_action = "Invalid Format: Missing 'Action:' after 'Thought:'";
    assert_eq!(
        steps(&out),
        vec![
            step("echo", "hello", " I should echo.\nAction: echo\nAction Input: hello", "ECHO[hello]"),
            step("_Exception", missing_action, "garbage", missing_action),
            step(
                "nosuch",
                "x",
                " Try another.\nAction: nosuch\nAction Input: x",
                "nosuch is not a valid tool, try one of [echo]."
            ),
        ]
    );
    assert_eq!(model.remaining(), 0);
    // Each observation reaches the model in the next prompt's scratchpad.
    let prompts = model.prompts();
    assert!(prompts[1].ends_with(
        "Thought: I should echo.\nAction: echo\nAction Input: hello\nObservation: ECHO[hello]\nThought: "
    ));
    assert!(prompts[2].ends_with(&format!("garbage\nObservation: {missing_action}\nThought: ")));
    assert!(prompts[3].ends_with("Observation: nosuch is not a valid tool, try one of [echo].\nThought: "));
}

#[tokio::test]
async fn max_iterations_stops_with_the_forced_answer() {
    let model = reference_script();
    let executor = executor(&model, vec![echo()])
        .with_handle_parsing_errors(ParsingErrorPolicy::SendToModel)
        .with_return_intermediate_steps(true)
        .with_max_iterations(Some(3));
    let out = executor.invoke(json!({"input": "hi"}), &config()).await.unwrap();
    assert_eq!(out["output"], "Agent stopped due to iteration limit or time limit.");
    assert_eq!(out["output"], STOPPED_OUTPUT);
    assert_eq!(steps(&out).len(), 3);
    assert_eq!(model.remaining(), 1, "the final answer was never asked for");
}

#[tokio::test]
async fn max_iterations_defaults_to_fifteen() {
    let model = FakeListLlm::new(vec![" again\nAction: echo\nAction Input: x"; 16]);
    let executor = executor(&model, vec![echo()]).with_return_intermediate_steps(true);
    assert_eq!(executor.rules().max_iterations(), Some(15));
    let out = executor.invoke(json!({"input": "loop"}), &config()).await.unwrap();
    assert_eq!(out["output"], STOPPED_OUTPUT);
    assert_eq!(steps(&out).len(), 15);
    assert_eq!(model.remaining(), 1);
}

#[tokio::test]
async fn zero_iterations_or_zero_time_stop_before_any_model_call() {
    for executor in [
        executor(&FakeListLlm::new(Vec::<String>::new()), vec![echo()]).with_max_iterations(Some(0)),
        executor(&FakeListLlm::new(Vec::<String>::new()), vec![echo()])
            .with_max_execution_time(Some(Duration::ZERO)),
    ] {
        let out = executor.invoke(json!({"input": "when was weft made"}), &config()).await.unwrap();
        assert_eq!(out["output"], STOPPED_OUTPUT);
    }
}

#[tokio::test(start_paused = true)]
async fn the_time_limit_abandons_a_slow_tool_and_stops() {
    let slow = StructuredTool::from_fn(
        "slow",
        "Takes a minute.",
        json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        |_, _| async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok("late")
        },
    )
    .shared();
    let model = FakeListLlm::new([
        " quick\nAction: echo\nAction Input: a",
        " slow now\nAction: slow\nAction Input: b",
        " never asked\nFinal Answer: no",
    ]);
    let executor = executor(&model, vec![echo(), slow])
        .with_max_execution_time(Some(Duration::from_secs(5)))
        .with_return_intermediate_steps(true);
    let mut run = executor.start(json!({"input": "go"})).unwrap();
    while run.finish().is_none() {
        executor.advance(&mut run, &config()).await.unwrap();
    }
    assert_eq!(run.finish().unwrap().output(), Some(STOPPED_OUTPUT));
    assert_eq!(run.intermediate_steps().len(), 1, "the abandoned call records no step");
    assert_eq!(run.elapsed(), Duration::from_secs(5));
    assert_eq!(model.remaining(), 1);
}

#[tokio::test]
async fn parsing_errors_are_raised_by_default() {
    let model = FakeListLlm::new(["I am confused"]);
    let err = executor(&model, vec![echo()]).invoke(json!({"input": "hi"}), &config()).await.unwrap_err();
    let Some(TextReactError::OutputParsing(parse_error)) = TextReactError::from_error(&err) else {
        panic!("expected an output parsing error, got {err:?}")
    };
    assert_eq!(parse_error.error, "Could not parse LLM output: `I am confused`");
    let message = err.to_string();
    assert!(message.contains("set handle_parsing_errors on the AgentExecutor"), "{message}");
    assert!(message.ends_with("Could not parse LLM output: `I am confused`"), "{message}");
}

#[tokio::test]
async fn an_error_not_meant_for_the_model_is_answered_with_invalid_or_incomplete_response() {
    let both = "Action: echo\nAction Input: x\nFinal Answer: y";
    let model = FakeListLlm::new([both, "Final Answer: fine"]);
    let executor = executor(&model, vec![echo()])
        .with_handle_parsing_errors(ParsingErrorPolicy::SendToModel)
        .with_return_intermediate_steps(true);
    let out = executor.invoke(json!({"input": "hi"}), &config()).await.unwrap();
    let error = format!("Parsing LLM output produced both a final answer and a parse-able action:: {both}");
    assert_eq!(
        steps(&out),
        vec![step("_Exception", "Invalid or incomplete response", &error, "Invalid or incomplete response")]
    );
    assert_eq!(out["output"], "fine");
}

#[tokio::test]
async fn a_fixed_text_or_a_function_answers_parsing_errors() {
    let model = FakeListLlm::new(["nonsense", "Final Answer: ok"]);
    let out = executor(&model, vec![echo()])
        .with_handle_parsing_errors(ParsingErrorPolicy::Text(
            "Check your output and make sure it conforms!".into(),
        ))
        .with_return_intermediate_steps(true)
        .invoke(json!({"input": "hi"}), &config())
        .await
        .unwrap();
    let step0 = &steps(&out)[0];
    assert_eq!(step0.observation, "Check your output and make sure it conforms!");
    assert_eq!(step0.action.log, "Could not parse LLM output: `nonsense`");
    assert!(
        model.prompts()[1].ends_with("Observation: Check your output and make sure it conforms!\nThought: ")
    );

    let model = FakeListLlm::new(["nonsense", "Final Answer: ok"]);
    let policy =
        ParsingErrorPolicy::handler(|err| format!("bad ({})", err.observation.as_deref().unwrap_or("-")));
    let out = executor(&model, vec![echo()])
        .with_handle_parsing_errors(policy)
        .with_return_intermediate_steps(true)
        .invoke(json!({"input": "hi"}), &config())
        .await
        .unwrap();
    assert_eq!(steps(&out)[0].observation, "bad (Invalid Format: Missing 'Action:' after 'Thought:')");
    assert_eq!(out["output"], "ok");
}

#[tokio::test]
async fn a_missing_action_input_goes_back_to_the_model() {
    let model = FakeListLlm::new([" hmm\nAction: echo", "Final Answer: ok"]);
    let out = executor(&model, vec![echo()])
        .with_handle_parsing_errors(ParsingErrorPolicy::SendToModel)
        .with_return_intermediate_steps(true)
        .invoke(json!({"input": "hi"}), &config())
        .await
        .unwrap();
    let missing = "Invalid Format: Missing 'Action Input:' after 'Action:'";
    assert_eq!(steps(&out), vec![step("_Exception", missing, " hmm\nAction: echo", missing)]);
}

#[tokio::test]
async fn a_return_direct_tool_ends_the_run_with_its_observation() {
    let search = StructuredTool::from_fn(
        "Search",
        "Useful for searching",
        json!({"type": "object", "properties": {"query": {"type": "string"}}}),
        |args, _| async move { Ok(args["query"].clone()) },
    )
    .with_return_direct(true)
    .shared();
    let model = FakeListLlm::new([
        "FooBarBaz\nAction: Search\nAction Input: misalignment",
        "Oh well\nFinal Answer: no",
    ]);
    let out = executor(&model, vec![search])
        .with_return_intermediate_steps(true)
        .invoke(json!({"input": "when was weft made"}), &config())
        .await
        .unwrap();
    assert_eq!(out["output"], "misalignment");
    assert_eq!(steps(&out).len(), 1);
    assert_eq!(steps(&out)[0].action.tool, "Search");
    assert_eq!(model.remaining(), 1);
}

#[tokio::test]
async fn an_unknown_tool_lists_every_tool_and_never_returns_directly() {
    let direct = StructuredTool::from_fn(
        "lookup",
        "Looks up.",
        json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        |_, _| async move { Ok("found") },
    )
    .with_return_direct(true)
    .shared();
    let model = FakeListLlm::new(["FooBarBaz\nAction: Foo\nAction Input: Bar"]);
    let out = executor(&model, vec![echo(), direct])
        .with_return_intermediate_steps(true)
        .with_max_iterations(Some(1))
        .invoke(json!({"input": "x"}), &config())
        .await
        .unwrap();
    assert_eq!(steps(&out)[0].observation, "Foo is not a valid tool, try one of [echo, lookup].");
    assert_eq!(out["output"], STOPPED_OUTPUT);
}

#[tokio::test]
async fn trimming_limits_what_the_agent_sees_but_not_what_is_returned() {
    let script = [
        " one\nAction: echo\nAction Input: 1",
        " two\nAction: echo\nAction Input: 2",
        " three\nAction: echo\nAction Input: 3",
        "Final Answer: done",
    ];
    let model = FakeListLlm::new(script);
    let out = executor(&model, vec![echo()])
        .with_trim_intermediate_steps(TrimSteps::Last(1))
        .with_return_intermediate_steps(true)
        .invoke(json!({"input": "count"}), &config())
        .await
        .unwrap();
    assert_eq!(steps(&out).len(), 3);
    let last = &model.prompts()[3];
    assert!(last.ends_with("Thought: three\nAction: echo\nAction Input: 3\nObservation: ECHO[3]\nThought: "));
    assert!(!last.contains("ECHO[2]") && !last.contains("ECHO[1]"));

    // Last(0) keeps everything, as LangChain's trim_intermediate_steps=0 does; a function decides freely.
    let model = FakeListLlm::new(script);
    executor(&model, vec![echo()])
        .with_trim_intermediate_steps(TrimSteps::Last(0))
        .invoke(json!({"input": "count"}), &config())
        .await
        .unwrap();
    assert!(model.prompts()[3].contains("ECHO[1]"));
    let model = FakeListLlm::new(script);
    executor(&model, vec![echo()])
        .with_trim_intermediate_steps(TrimSteps::handler(|steps| steps.iter().take(1).cloned().collect()))
        .invoke(json!({"input": "count"}), &config())
        .await
        .unwrap();
    let last = &model.prompts()[3];
    assert!(last.contains("ECHO[1]") && !last.contains("ECHO[3]"));
}

#[tokio::test]
async fn generate_early_stopping_asks_the_model_for_a_last_answer() {
    let model = FakeListLlm::new([" look\nAction: echo\nAction Input: a", " I know now.\nFinal Answer: 42"]);
    let out = executor(&model, vec![echo()])
        .with_max_iterations(Some(1))
        .with_early_stopping(EarlyStopping::Generate)
        .with_return_intermediate_steps(true)
        .invoke(json!({"input": "q"}), &config())
        .await
        .unwrap();
    assert_eq!(out["output"], "42");
    assert_eq!(steps(&out).len(), 1);
    let last = &model.prompts()[1];
    assert!(last.ends_with(&format!("Observation: ECHO[a]\nThought: {GENERATE_FINAL_SUFFIX}")), "{last}");
    assert!(last.ends_with("\n\nI now need to return a final answer based on the previous steps:"));

    // An action, or a text that does not parse, is the answer as it stands.
    for (last_reply, expected) in
        [("Action: echo\nAction Input: more", "Action: echo\nAction Input: more"), ("It is 42.", "It is 42.")]
    {
        let model = FakeListLlm::new([" look\nAction: echo\nAction Input: a", last_reply]);
        let out = executor(&model, vec![echo()])
            .with_max_iterations(Some(1))
            .with_early_stopping(EarlyStopping::Generate)
            .invoke(json!({"input": "q"}), &config())
            .await
            .unwrap();
        assert_eq!(out["output"], expected);
    }
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

/// Squares an integer.
#[tool]
fn square(
    /// The number.
    n: i64,
) -> i64 {
    n * n
}

#[tokio::test]
async fn string_inputs_become_tool_arguments() {
    let model = FakeListLlm::new([
        "Action: square\nAction Input: 7",
        "Action: add\nAction Input: {\"a\": 2, \"b\": 3}",
        "Action: echo\nAction Input: {\"not\": \"parsed\"}",
        "Final Answer: done",
    ]);
    let tools = vec![square.shared(), add.shared(), echo()];
    let out = executor(&model, tools)
        .with_return_intermediate_steps(true)
        .invoke(json!({"input": "math"}), &config())
        .await
        .unwrap();
    let observations: Vec<String> = steps(&out).into_iter().map(|s| s.observation).collect();
    assert_eq!(observations, ["49", "5", "ECHO[{\"not\": \"parsed\"}]"]);
}

#[tokio::test]
async fn tool_errors_propagate_unless_the_tool_handles_them() {
    let failing = StructuredTool::from_fn(
        "fail",
        "Always fails.",
        json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        |_, _| async move { Err::<String, _>(Error::msg("kaboom")) },
    );
    let model = FakeListLlm::new(["Action: fail\nAction Input: x"]);
    let err = executor(&model, vec![failing.clone().shared()])
        .invoke(json!({"input": "x"}), &config())
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "kaboom");

    let model = FakeListLlm::new(["Action: fail\nAction Input: x", "Final Answer: recovered"]);
    let handled = failing.with_error_policy(ToolErrorPolicy::text("the tool failed")).shared();
    let out = executor(&model, vec![handled])
        .with_return_intermediate_steps(true)
        .invoke(json!({"input": "x"}), &config())
        .await
        .unwrap();
    assert_eq!(steps(&out)[0].observation, "the tool failed");
    assert_eq!(out["output"], "recovered");

    // Arguments that break the schema are an error too.
    let model = FakeListLlm::new(["Action: add\nAction Input: 1"]);
    let err =
        executor(&model, vec![add.shared()]).invoke(json!({"input": "x"}), &config()).await.unwrap_err();
    assert!(matches!(err, Error::ToolArguments { .. }), "{err:?}");
}

#[tokio::test]
async fn model_errors_propagate() {
    let model = FakeListLlm::new(Vec::<String>::new());
    let err = executor(&model, vec![echo()]).invoke(json!({"input": "x"}), &config()).await.unwrap_err();
    assert!(err.as_output_parser().is_none());
    assert!(TextReactError::from_error(&err).is_none(), "{err:?}");
}

#[tokio::test]
async fn inputs_are_an_object_or_a_string_and_extra_variables_reach_the_prompt() {
    let model = FakeListLlm::new(["Final Answer: a"]);
    let out = executor(&model, vec![echo()]).invoke(json!("just a question"), &config()).await.unwrap();
    assert_eq!(out, json!({"input": "just a question", "output": "a"}));
    assert!(model.prompts()[0].contains("Question: just a question\nThought:"));

    let err = executor(&model, vec![echo()]).invoke(json!(42), &config()).await.unwrap_err();
    assert!(matches!(TextReactError::from_error(&err), Some(TextReactError::InvalidInput(_))), "{err:?}");

    let model = FakeListLlm::new(["Final Answer: Bob"]);
    let prompt = weft_runnable_core::PromptTemplate::from_template(
        "{chat_history}\nTools:\n{tools}\n[{tool_names}]\nQuestion: {input}\nThought:{agent_scratchpad}",
    )
    .unwrap();
    let tools = vec![echo()];
    let agent = create_text_react_agent(model.clone(), &tools, prompt).unwrap();
    let out = AgentExecutor::new(agent, tools)
        .unwrap()
        .invoke(json!({"input": "what's my name?", "chat_history": "Human: I am Bob"}), &config())
        .await
        .unwrap();
    assert_eq!(out["output"], "Bob");
    assert_eq!(out["chat_history"], "Human: I am Bob");
    assert_eq!(
        model.prompts()[0],
        "Human: I am Bob\nTools:\necho(q: string) - Echo input.\n[echo]\nQuestion: what's my name?\nThought:"
    );
}

#[tokio::test]
async fn tools_must_have_unique_names() {
    let model = FakeListLlm::new(Vec::<String>::new());
    let tools = vec![echo(), echo()];
    let agent = create_text_react_agent(model, &tools, react_prompt().unwrap()).unwrap();
    let err = AgentExecutor::new(agent, tools).unwrap_err();
    assert_eq!(err, TextReactError::DuplicateTool("echo".into()));
    assert_eq!(err.to_string(), "two tools are named 'echo'; tool names must be unique");
}

#[tokio::test]
async fn an_executor_serves_concurrent_runs() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let count = StructuredTool::from_fn(
        "count",
        "Counts calls.",
        json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        move |_, _| {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            async move { Ok(n.to_string()) }
        },
    )
    .shared();
    let model = FakeListLlm::new([
        "Action: count\nAction Input: x",
        "Final Answer: one",
        "Action: count\nAction Input: y",
        "Final Answer: two",
    ]);
    let executor = executor(&model, vec![count]).with_max_iterations(Some(4));
    let outs = executor
        .batch(vec![json!({"input": "a"}), json!({"input": "b"})], &config().with_max_concurrency(1))
        .await
        .unwrap();
    assert_eq!(outs.len(), 2);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn streaming_yields_each_action_each_step_and_the_output() {
    use futures::StreamExt as _;
    let search = StructuredTool::from_fn(
        "Search",
        "Useful for searching",
        json!({"type": "object", "properties": {"query": {"type": "string"}}}),
        |args, _| async move { Ok(format!("Results for: {}", args["query"].as_str().unwrap_or_default())) },
    )
    .shared();
    let first = "FooBarBaz\nAction: Search\nAction Input: misalignment";
    let second = "FooBarBaz\nAction: Search\nAction Input: something else";
    let model = FakeListLlm::new([first, second, "Oh well\nFinal Answer: curses foiled again"]);
    let executor = executor(&model, vec![search]);
    let chunks: Vec<Value> = executor
        .stream(json!({"input": "when was weft made"}), &config())
        .map(|c| c.unwrap())
        .collect()
        .await;
    let action = |log: &str, input: &str| json!({"tool": "Search", "tool_input": input, "log": log});
    assert_eq!(
        chunks,
        [
            json!({"actions": [action(first, "misalignment")]}),
            json!({"steps": [{"action": action(first, "misalignment"), "observation": "Results for: misalignment"}]}),
            json!({"actions": [action(second, "something else")]}),
            json!({"steps": [{"action": action(second, "something else"), "observation": "Results for: something else"}]}),
            json!({"output": "curses foiled again"}),
        ]
    );
    let merged = chunks.into_iter().reduce(|a, b| executor.merge_chunks(a, b).unwrap()).unwrap();
    assert_eq!(merged["actions"].as_array().unwrap().len(), 2);
    assert_eq!(merged["steps"].as_array().unwrap().len(), 2);
    assert_eq!(merged["output"], "curses foiled again");
}

#[tokio::test]
async fn streaming_a_handled_parse_error_yields_a_step_without_an_action() {
    use futures::StreamExt as _;
    let model = FakeListLlm::new(["garbage", "Action: nosuch\nAction Input: x", "Final Answer: ok"]);
    let executor = executor(&model, vec![echo()])
        .with_handle_parsing_errors(ParsingErrorPolicy::SendToModel)
        .with_return_intermediate_steps(true);
    let chunks: Vec<Value> = executor.stream(json!("q"), &config()).map(|c| c.unwrap()).collect().await;
    let keys: Vec<Vec<&str>> =
        chunks.iter().map(|c| c.as_object().unwrap().keys().map(String::as_str).collect()).collect();
    assert_eq!(keys, [vec!["steps"], vec!["actions"], vec!["steps"], vec!["output", "intermediate_steps"]]);
    assert_eq!(chunks[0]["steps"][0]["action"]["tool"], "_Exception");
    assert_eq!(chunks[3]["intermediate_steps"].as_array().unwrap().len(), 2);

    let errors: Vec<_> = executor.stream(json!(7), &config()).collect().await;
    assert_eq!(errors.len(), 1);
    assert!(errors[0].is_err());
}
