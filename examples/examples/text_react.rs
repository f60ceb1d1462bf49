//! Text ReAct: an agent for a model without function calling, run by `AgentExecutor`.
//!
//! The model only writes text. The ReAct prompt shows it the tools and a format (`Thought:`, `Action:`,
//! `Action Input:`); the executor parses each reply, runs the tool it names and writes the
//! `Observation:` back into the prompt, until the model writes `Final Answer:`. The model here is
//! weft's scripted completion model, so no API key or server is needed; its fourth reply is garbled on
//! purpose, to show how a parsing error goes back to the model. Every result is checked: a wrong one
//! panics and the exit status is non-zero.
//!
//! Run it from the repository root: `cargo run --example text_react`.

use serde_json::json;
use weft::agents::text_react::{
    AgentExecutor, AgentStep, ParsingErrorPolicy, create_text_react_agent, react_prompt,
};
use weft::fakes::FakeListLlm;
use weft::prelude::*;

/// Looks up the population of a city, in millions.
#[tool]
fn population(
    /// The city's name.
    city: String,
) -> weft::Result<f64> {
    match city.as_str() {
        "Paris" => Ok(2.1),
        "Lyon" => Ok(0.5),
        other => Err(Error::msg(format!("no data for {other}"))),
    }
}

/// Adds two numbers.
#[tool]
fn add(
    /// The first number.
    a: f64,
    /// The second number.
    b: f64,
) -> f64 {
    a + b
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    weft_examples::report(example().await)
}

async fn example() -> weft::Result<()> {
    // What the model will write, one reply per call. The executor binds the stop sequence
    // "\nObservation", so the model stops where the tool's result belongs: the first reply's invented
    // observation is cut off.
    let model = FakeListLlm::new([
        " I need the population of Paris.\nAction: population\nAction Input: Paris\nObservation: 3 million",
        " Now the population of Lyon.\nAction: population\nAction Input: \"Lyon\"",
        " I have both; I add them.\nAction: add\nAction Input: {\"a\": 2.1, \"b\": 0.5}",
        " The sum is 2.6, so that is the answer",
        " I now know the final answer.\nFinal Answer: Paris and Lyon have 2.6 million inhabitants together.",
    ]);
    let tools = vec![population.shared(), add.shared()];

    // The agent: the standard ReAct prompt, the model, and the ReAct output parser.
    let agent = create_text_react_agent(model.clone(), &tools, react_prompt()?)?;
    let executor = AgentExecutor::new(agent, tools)?
        .with_handle_parsing_errors(ParsingErrorPolicy::SendToModel)
        .with_return_intermediate_steps(true)
        .with_max_iterations(Some(6));

    let question = "How many people live in Paris and Lyon together?";
    let out = executor.invoke(json!({ "input": question }), &RunnableConfig::default()).await?;

    // The steps: three tool runs, and the garbled reply answered with a format reminder.
    let steps: Vec<AgentStep> = serde_json::from_value(out["intermediate_steps"].clone())?;
    for step in &steps {
        println!("{}({}) -> {}", step.action.tool, step.action.input_text(), step.observation);
    }
    let seen: Vec<(&str, String, &str)> = steps
        .iter()
        .map(|s| (s.action.tool.as_str(), s.action.input_text(), s.observation.as_str()))
        .collect();
    let reminder = "Invalid Format: Missing 'Action:' after 'Thought:'";
    assert_eq!(
        seen,
        [
            ("population", "Paris".to_owned(), "2.1"),
            ("population", "Lyon".to_owned(), "0.5"),
            ("add", r#"{"a": 2.1, "b": 0.5}"#.to_owned(), "2.6"),
            ("_Exception", reminder.to_owned(), reminder),
        ]
    );

    // The answer, next to the question it answers.
    println!("{question}\n{}", out["output"].as_str().unwrap_or_default());
    assert_eq!(out["input"], question);
    assert_eq!(out["output"], "Paris and Lyon have 2.6 million inhabitants together.");

    // What the model saw last: the standard prompt, its tools, and every step so far in the
    // scratchpad, each observation written by the executor, never by the model.
    let last_prompt = model.prompts().pop().unwrap_or_default();
    assert!(
        last_prompt.contains("population(city: string) - Looks up the population of a city, in millions.")
    );
    assert!(last_prompt.contains("Action: the action to take, should be one of [population, add]"));
    assert!(last_prompt.contains("Action Input: Paris\nObservation: 2.1\nThought: "));
    assert!(!last_prompt.contains("3 million"), "the invented observation was cut off");
    assert!(last_prompt.ends_with(&format!("answer\nObservation: {reminder}\nThought: ")));
    assert_eq!(model.remaining(), 0);

    println!("text_react: all checks passed");
    Ok(())
}
