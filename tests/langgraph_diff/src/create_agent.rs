//! langchain 1.x's `create_agent` with a scripted model: the loop, streams and history, structured output
//! in both strategies, middleware hooks and their order, jumps, `wrap_model_call` and `wrap_tool_call`
//! (python/s_create_agent.py).

use std::borrow::Cow;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use weft::agents::agent::{
    AgentRuntime, AgentState, AgentUpdate, HookResult, Hooks, JumpTo, Middleware, ModelResponse,
    ProviderStrategy, SchemaSpec, StructuredErrors, ToolStrategy, after_agent, after_model, before_agent,
    before_model, wrap_model_call, wrap_tool_call,
};
use weft::agents::{AgentBuilder, create_agent};
use weft::fakes::{FakeChatModel, FakeReply};
use weft::graph::{InMemorySaver, StreamMode};
use weft::{
    AiMessage, Message, SharedTool, StructuredTool, ToolCall, ToolCallOutput, ToolExt as _, ToolMessage,
};

use crate::rec::{Rec, thread};
use crate::{Outcome, scenarios};

scenarios![
    create_agent_calls_a_tool_then_answers,
    create_agent_streams_updates_and_values,
    create_agent_history,
    create_agent_without_tools_answers_once,
    create_agent_reports_an_unknown_tool,
    create_agent_return_direct_ends_after_the_tool,
    structured_output_by_tool_strategy,
    structured_output_tool_strategy_retries_a_bad_reply,
    structured_output_tool_strategy_refuses_two_replies,
    structured_output_by_provider_strategy,
    structured_output_from_a_schema_built_at_run_time,
    middleware_hooks_run_in_langchain_order,
    before_model_jumps_to_the_end,
    after_model_jumps_back_to_the_model,
    before_agent_jumps_to_the_tools,
    wrap_model_call_composes_outermost_first,
    wrap_tool_call_composes_outermost_first,
    after_agent_runs_once_at_the_end,
];

/// `add(a, b)`: the sum.
pub(crate) fn add() -> SharedTool {
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"]});
    StructuredTool::from_fn("add", "Adds two integers.", schema, |args: Value, _ctx| async move {
        Ok(json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)))
    })
    .shared()
}

/// `lookup(key)`, returning directly.
fn lookup() -> SharedTool {
    let schema = json!({"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]});
    StructuredTool::from_fn("lookup", "Looks a key up.", schema, |args: Value, _ctx| async move {
        Ok(json!(format!("value of {}", args["key"].as_str().unwrap_or_default())))
    })
    .with_return_direct(true)
    .shared()
}

/// An AI message calling `(name, args, id)`s.
pub(crate) fn calls(specs: &[(&str, Value, &str)]) -> FakeReply {
    FakeReply::tool_calls(specs.iter().map(|(n, a, i)| ToolCall {
        name: (*n).into(),
        args: a.clone(),
        id: Some((*i).into()),
    }))
}

pub(crate) fn add_2_3() -> FakeReply {
    calls(&[("add", json!({"a": 2, "b": 3}), "c1")])
}

/// The user's question, with the id the Python half gives it.
pub(crate) fn ask(text: &str) -> AgentUpdate {
    AgentState::update().messages(vec![Message::human(text).with_id("h-1")])
}

/// An agent over a scripted model, `tools`, with a checkpointer.
pub(crate) fn agent(replies: Vec<FakeReply>, tools: Vec<SharedTool>) -> AgentBuilder {
    create_agent(FakeChatModel::new(replies), tools).checkpointer(Arc::new(InMemorySaver::new()))
}

fn create_agent_calls_a_tool_then_answers(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app =
            agent(vec![add_2_3(), "5".into()], vec![add()]).system_prompt("You add numbers.").build()?;
        rec.invoke(&app, ask("2 + 3?"), &thread("t")).await;
        rec.state(&app, &thread("t"), false).await;
        Ok(())
    })
}

fn create_agent_streams_updates_and_values(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let first = calls(&[("add", json!({"a": 1, "b": 2}), "c1"), ("add", json!({"a": 3, "b": 4}), "c2")]);
        let app = agent(vec![first, "3 and 7".into()], vec![add()]).build()?;
        let modes = [StreamMode::Updates, StreamMode::Values];
        rec.stream(&app, ask("1+2, 3+4?"), &thread("t"), &modes, Default::default()).await;
        rec.unorder_parallel_results();
        Ok(())
    })
}

fn create_agent_history(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = agent(vec![add_2_3(), "5".into()], vec![add()]).build()?;
        rec.invoke(&app, ask("2 + 3?"), &thread("t")).await;
        rec.history(&app, &thread("t")).await;
        Ok(())
    })
}

fn create_agent_without_tools_answers_once(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = agent(vec!["hello".into()], vec![]).build()?;
        rec.invoke(&app, ask("hi"), &thread("t")).await;
        Ok(())
    })
}

fn create_agent_reports_an_unknown_tool(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = agent(vec![calls(&[("nope", json!({}), "c1")]), "sorry".into()], vec![add()]).build()?;
        rec.invoke(&app, ask("?"), &thread("t")).await;
        Ok(())
    })
}

fn create_agent_return_direct_ends_after_the_tool(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let first = calls(&[("lookup", json!({"key": "k"}), "c1")]);
        let app = agent(vec![first, "never".into()], vec![add(), lookup()]).build()?;
        rec.invoke(&app, ask("k?"), &thread("t")).await;
        Ok(())
    })
}

/// The weather in a city.
#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct Weather {
    city: String,
    temp: i64,
}

fn structured_output_by_tool_strategy(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let reply = calls(&[("Weather", json!({"city": "Paris", "temp": 21}), "s1")]);
        let app = agent(vec![add_2_3(), reply], vec![add()])
            .response_format(ToolStrategy::of::<Weather>())
            .build()?;
        rec.invoke(&app, ask("weather in Paris after 2+3?"), &thread("t")).await;
        Ok(())
    })
}

fn structured_output_tool_strategy_retries_a_bad_reply(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let bad = calls(&[("Weather", json!({"city": "Paris"}), "s1")]);
        let good = calls(&[("Weather", json!({"city": "Paris", "temp": 21}), "s2")]);
        let strategy =
            ToolStrategy::of::<Weather>().handle_errors(StructuredErrors::Text("Give both fields.".into()));
        let app = agent(vec![bad, good], vec![add()]).response_format(strategy).build()?;
        rec.invoke(&app, ask("weather?"), &thread("t")).await;
        Ok(())
    })
}

fn structured_output_tool_strategy_refuses_two_replies(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let two = calls(&[
            ("Weather", json!({"city": "A", "temp": 1}), "s1"),
            ("Weather", json!({"city": "B", "temp": 2}), "s2"),
        ]);
        let good = calls(&[("Weather", json!({"city": "A", "temp": 1}), "s3")]);
        let strategy =
            ToolStrategy::of::<Weather>().handle_errors(StructuredErrors::Text("Only one.".into()));
        let app = agent(vec![two, good], vec![add()]).response_format(strategy).build()?;
        rec.invoke(&app, ask("weather?"), &thread("t")).await;
        Ok(())
    })
}

fn structured_output_by_provider_strategy(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = agent(vec![r#"{"city": "Oslo", "temp": 3}"#.into()], vec![])
            .response_format(ProviderStrategy::of::<Weather>())
            .build()?;
        rec.invoke(&app, ask("weather in Oslo?"), &thread("t")).await;
        Ok(())
    })
}

fn structured_output_from_a_schema_built_at_run_time(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let members = ["researcher", "coder", "FINISH"];
        let schema = json!({"title": "Route", "type": "object",
            "properties": {"next": {"enum": members}}, "required": ["next"]});
        let reply = calls(&[("Route", json!({"next": "coder"}), "r1")]);
        let app = agent(vec![reply], vec![])
            .response_format(ToolStrategy::new(SchemaSpec::from_json(schema)))
            .build()?;
        rec.invoke(&app, ask("who next?"), &thread("t")).await;
        Ok(())
    })
}

/// A middleware running every node hook and writing nothing, so that their order shows.
struct Tracer(&'static str);

#[async_trait::async_trait]
impl Middleware for Tracer {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed(self.0)
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().before_agent().before_model().after_model().after_agent()
    }

    async fn before_model(&self, _state: &AgentState, _rt: &AgentRuntime) -> HookResult {
        Ok(None)
    }
}

fn middleware_hooks_run_in_langchain_order(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = agent(vec![add_2_3(), "5".into()], vec![add()])
            .middleware(Tracer("A"))
            .middleware(Tracer("B"))
            .build()?;
        rec.stream(&app, ask("2 + 3?"), &thread("t"), &[StreamMode::Updates], Default::default()).await;
        Ok(())
    })
}

fn before_model_jumps_to_the_end(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let stop = before_model("stop_early", |state: &AgentState, _rt: &AgentRuntime| {
            Ok((state.messages().len() >= 3).then(|| {
                AgentUpdate::new()
                    .messages(vec![Message::ai("stopping").with_id("stop-1")])
                    .jump_to(JumpTo::End)
            }))
        })
        .can_jump_to([JumpTo::End]);
        let app = agent(vec![add_2_3(), "never".into()], vec![add()]).middleware(stop).build()?;
        rec.stream(&app, ask("2 + 3?"), &thread("t"), &[StreamMode::Updates], Default::default()).await;
        rec.state(&app, &thread("t"), false).await;
        Ok(())
    })
}

fn after_model_jumps_back_to_the_model(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let retry = after_model("retry_empty", |state: &AgentState, _rt: &AgentRuntime| {
            let empty = matches!(state.messages().last(), Some(Message::Ai(ai)) if ai.text().is_empty());
            Ok(empty.then(|| {
                AgentUpdate::new()
                    .messages(vec![Message::human("say something").with_id("nudge")])
                    .jump_to(JumpTo::Model)
            }))
        })
        .can_jump_to([JumpTo::Model]);
        let app = agent(vec!["".into(), "something".into()], vec![]).middleware(retry).build()?;
        rec.invoke(&app, ask("hi"), &thread("t")).await;
        Ok(())
    })
}

fn before_agent_jumps_to_the_tools(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let replay = before_agent("replay_calls", |_state: &AgentState, _rt: &AgentRuntime| {
            let call = ToolCall { name: "add".into(), args: json!({"a": 2, "b": 3}), id: Some("c1".into()) };
            let ask = AiMessage { tool_calls: vec![call], ..AiMessage::default() };
            Ok(Some(AgentUpdate::new().messages(vec![Message::Ai(ask)]).jump_to(JumpTo::Tools)))
        })
        .can_jump_to([JumpTo::Tools]);
        let app = agent(vec!["5".into()], vec![add()]).middleware(replay).build()?;
        rec.stream(&app, ask("2 + 3?"), &thread("t"), &[StreamMode::Updates], Default::default()).await;
        Ok(())
    })
}

fn bracket(label: &'static str) -> weft::agents::agent::FnMiddleware {
    wrap_model_call(format!("bracket_{label}"), move |request, next| {
        Box::pin(async move {
            let response = next.call(request).await?;
            let Some(Message::Ai(ai)) = response.result.into_iter().next() else {
                return Err(weft::Error::msg("the model gave no AI message"));
            };
            let content = format!("{label}[{}]", ai.text());
            Ok(ModelResponse::message(AiMessage { content: content.into(), ..ai }))
        })
    })
}

fn wrap_model_call_composes_outermost_first(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = agent(vec!["hi".into()], vec![])
            .middleware(bracket("outer"))
            .middleware(bracket("inner"))
            .build()?;
        rec.invoke(&app, ask("hi"), &thread("t")).await;
        Ok(())
    })
}

fn tag_tool(label: &'static str) -> weft::agents::agent::FnMiddleware {
    wrap_tool_call(format!("tag_{label}"), move |request, next| {
        Box::pin(async move {
            match next.call(request).await? {
                ToolCallOutput::Message(m) => Ok(ToolCallOutput::Message(ToolMessage {
                    content: format!("{label}({})", m.content.text()).into(),
                    ..m
                })),
                other => Ok(other),
            }
        })
    })
}

fn wrap_tool_call_composes_outermost_first(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = agent(vec![add_2_3(), "done".into()], vec![add()])
            .middleware(tag_tool("outer"))
            .middleware(tag_tool("inner"))
            .build()?;
        rec.invoke(&app, ask("2 + 3?"), &thread("t")).await;
        Ok(())
    })
}

fn after_agent_runs_once_at_the_end(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let sign = after_agent("sign", |_state: &AgentState, _rt: &AgentRuntime| {
            Ok(Some(AgentUpdate::new().messages(vec![Message::ai("-- signed").with_id("sig")])))
        });
        let app = agent(vec![add_2_3(), "5".into()], vec![add()]).middleware(sign).build()?;
        rec.stream(&app, ask("2 + 3?"), &thread("t"), &[StreamMode::Updates], Default::default()).await;
        Ok(())
    })
}
