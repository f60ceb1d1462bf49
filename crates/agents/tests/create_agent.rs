//! `create_agent`: what the differential suite does not cover (typed contexts, the store, `ToolRuntime`,
//! tools returning several outputs, build errors, strict structured output, human review edge cases).

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt as _;
use serde::Deserialize;
use serde_json::{Value, json};
use weft_agents::agent::{
    AgentError, AgentRuntime, AgentState, AgentUpdate, HookResult, Hooks, JumpTo, Middleware,
    StructuredErrors, ToolStrategy, before_model,
};
use weft_agents::middleware::{HumanInTheLoop, InterruptMode};
use weft_agents::{ToolRuntime, create_agent, tool_command};
use weft_graph::{Command, InMemorySaver, InMemoryStore, RunOptions, Store, StreamData, StreamMode};
use weft_runnable_core::fakes::{FakeChatModel, FakeReply};
use weft_runnable_core::{
    AiMessage, InvalidToolCall, Message, RunnableConfig, StructuredTool, ToolContext, ToolExt, ToolMessage,
    ToolOutput,
};

fn ask(text: &str) -> AgentUpdate {
    AgentState::update().messages(vec![Message::human(text)])
}

fn thread(id: &str) -> RunnableConfig {
    RunnableConfig::default().with_configurable("thread_id", id)
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
struct User {
    name: String,
}

/// Greets the user of the run's context, in a hook.
struct Greeter;

#[async_trait]
impl Middleware<User> for Greeter {
    fn hooks(&self) -> Hooks {
        Hooks::new().before_agent()
    }

    async fn before_agent(&self, _state: &AgentState, rt: &AgentRuntime<User>) -> HookResult {
        let name = rt.context().map_or("nobody", |u| u.name.as_str());
        Ok(Some(AgentUpdate::new().messages(vec![Message::system(format!("user: {name}"))])))
    }
}

/// Says who asks, from the run's context, and how many messages the state holds.
fn whoami() -> weft_runnable_core::SharedTool {
    let schema = json!({"type": "object"});
    StructuredTool::from_fn("whoami", "Says who asks.", schema, |_: Value, ctx: ToolContext| async move {
        let rt = ToolRuntime::of(&ctx);
        let user: Option<User> = rt.context_as()?;
        let seen = rt.state::<AgentState>().map_or(0, |s| s.messages().len());
        rt.write(&json!({"seen": seen}));
        Ok(ToolOutput::text(format!("{} after {seen}", user.map_or("?".into(), |u| u.name))))
    })
    .shared()
}

#[tokio::test]
async fn a_typed_context_reaches_hooks_and_tools_from_json() {
    let model = FakeChatModel::new([FakeReply::tool_call("whoami", json!({}), "w1"), "done".into()]);
    let agent = create_agent(model, [whoami()]).context_schema::<User>().middleware(Greeter).build().unwrap();
    let options = RunOptions { context: Some(Arc::new(json!({"name": "ada"}))), ..RunOptions::default() };
    let modes = [StreamMode::Values, StreamMode::Custom];
    let mut parts = agent.stream_with(ask("who?"), &RunnableConfig::default(), &modes, options);
    let mut custom = Vec::new();
    let mut last = None;
    while let Some(part) = parts.next().await {
        match part.unwrap().data {
            StreamData::Custom { value, .. } => custom.push(value),
            StreamData::Values { state, .. } => last = Some(state),
            _ => {}
        }
    }
    let texts: Vec<String> = last.unwrap().messages().iter().map(Message::text).collect();
    assert_eq!(texts[1], "user: ada");
    assert_eq!(texts[3], "ada after 3");
    assert_eq!(custom, [json!({"seen": 3})]);
}

#[tokio::test]
async fn a_typed_context_may_be_the_value_itself_and_bad_json_is_an_error() {
    let agent = create_agent(FakeChatModel::new(["hi"]), [])
        .context_schema::<User>()
        .middleware(Greeter)
        .build()
        .unwrap();
    let typed = RunOptions { context: Some(Arc::new(User { name: "bo".into() })), ..RunOptions::default() };
    let out = agent.invoke_with(ask("?"), &RunnableConfig::default(), typed).await.unwrap().value;
    assert_eq!(out.messages()[1].text(), "user: bo");

    let agent = create_agent(FakeChatModel::new(["hi"]), [])
        .context_schema::<User>()
        .middleware(Greeter)
        .build()
        .unwrap();
    let bad = RunOptions { context: Some(Arc::new(json!({"nom": 1}))), ..RunOptions::default() };
    let err = agent.invoke_with(ask("?"), &RunnableConfig::default(), bad).await.unwrap_err();
    assert!(err.to_string().contains("the run's context is not a"), "{err}");
}

#[tokio::test]
async fn tools_reach_the_store_and_may_return_several_outputs() {
    let schema = json!({"type": "object"});
    let remember =
        StructuredTool::from_fn("remember", "Remembers.", schema, |_: Value, ctx: ToolContext| async move {
            let rt = ToolRuntime::of(&ctx);
            let store = rt.store().ok_or_else(|| weft_runnable_core::Error::msg("no store"))?;
            store
                .put(&["notes".into()], "k", json!({"v": 1}))
                .await
                .map_err(weft_runnable_core::Error::custom)?;
            let id = rt.tool_call_id().unwrap_or_default().to_owned();
            let answer = ToolMessage { content: "noted".into(), tool_call_id: id, ..ToolMessage::default() };
            let extra = Command::<AgentState>::new()
                .update(AgentUpdate::new().messages(vec![Message::ai("side note")]));
            Ok(ToolOutput::many([ToolOutput::message(answer), tool_command(extra)]))
        });
    let store = Arc::new(InMemoryStore::new());
    let model = FakeChatModel::new([FakeReply::tool_call("remember", json!({}), "r1"), "ok".into()]);
    let agent = create_agent(model, [remember.shared()]).store(store.clone()).build().unwrap();
    let out = agent.invoke(ask("note it"), &RunnableConfig::default()).await.unwrap().value;
    let texts: Vec<String> = out.messages().iter().map(Message::text).collect();
    assert_eq!(texts, ["note it", "", "noted", "side note", "ok"]);
    assert!(store.get(&["notes".into()], "k").await.unwrap().is_some());
}

#[tokio::test]
async fn several_outputs_must_answer_the_call_exactly_once() {
    let schema = json!({"type": "object"});
    let twice =
        StructuredTool::from_fn("twice", "Answers twice.", schema, |_: Value, ctx: ToolContext| async move {
            let id = ctx.tool_call_id().unwrap_or_default().to_owned();
            let answer = || {
                ToolOutput::message(ToolMessage {
                    content: "x".into(),
                    tool_call_id: id.clone(),
                    ..ToolMessage::default()
                })
            };
            Ok(ToolOutput::many([answer(), answer()]))
        });
    let model = FakeChatModel::new([FakeReply::tool_call("twice", json!({}), "t1")]);
    let agent = create_agent(model, [twice.shared()]).build().unwrap();
    let err = agent.invoke(ask("?"), &RunnableConfig::default()).await.unwrap_err();
    assert!(err.to_string().contains("2 messages bound to tool_call_id 't1'"), "{err}");
}

struct Named(&'static str);

#[async_trait]
impl Middleware for Named {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed(self.0)
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().before_model()
    }
}

#[test]
fn building_refuses_duplicate_middleware_and_a_late_context() {
    let model = FakeChatModel::new(["x"]);
    let err =
        create_agent(model.clone(), []).middleware(Named("a")).middleware(Named("a")).build().unwrap_err();
    assert!(matches!(err, AgentError::DuplicateMiddleware(ref n) if n == "a"), "{err}");
    let err = create_agent(model, []).middleware(Named("a")).context_schema::<User>().build().unwrap_err();
    assert!(matches!(err, AgentError::ContextAfterMiddleware), "{err}");
}

#[tokio::test]
async fn a_middleware_adding_an_unknown_tool_fails_the_model_call() {
    let sneaky = weft_agents::agent::wrap_model_call("sneaky", |mut request, next| {
        let schema = json!({"type": "object"});
        let extra =
            StructuredTool::from_fn(
                "ghost",
                "Boo.",
                schema,
                |_: Value, _ctx| async move { Ok(json!("boo")) },
            );
        request.tools.push(extra.shared());
        next.call(request)
    });
    let agent = create_agent(FakeChatModel::new(["x"]), []).middleware(sneaky).build().unwrap();
    let err = agent.invoke(ask("?"), &RunnableConfig::default()).await.unwrap_err();
    assert!(err.to_string().contains("Unknown tools: [\"ghost\"]"), "{err}");
}

/// A plan.
#[derive(Debug, serde::Serialize, Deserialize, schemars::JsonSchema)]
struct Plan {
    steps: Vec<String>,
}

#[tokio::test]
async fn a_strict_tool_strategy_fails_on_a_bad_structured_reply() {
    let model = FakeChatModel::new([FakeReply::structured_json("Plan", json!({"steps": "not a list"}))]);
    let strategy = ToolStrategy::of::<Plan>().handle_errors(StructuredErrors::Never);
    let agent = create_agent(model, []).response_format(strategy).build().unwrap();
    let err = agent.invoke(ask("plan"), &RunnableConfig::default()).await.unwrap_err();
    assert!(err.to_string().contains("Failed to parse structured output for tool 'Plan'"), "{err}");
}

#[tokio::test]
async fn an_unanswered_invalid_tool_call_is_answered_before_the_next_model_call() {
    let broken = AiMessage {
        invalid_tool_calls: vec![InvalidToolCall {
            name: Some("add".into()),
            args: Some("{oops".into()),
            id: Some("bad1".into()),
            error: None,
        }],
        ..AiMessage::default()
    };
    let model = FakeChatModel::new([FakeReply::from(broken), "fixed".into()]);
    let agent = create_agent(model.clone(), []).checkpointer(Arc::new(InMemorySaver::new())).build().unwrap();
    agent.invoke(ask("go"), &thread("t")).await.unwrap();
    let out = agent.invoke(ask("again"), &thread("t")).await.unwrap().value;
    let answer = out.messages().iter().find_map(Message::as_tool).unwrap();
    assert_eq!(
        answer.content.text(),
        "Tool call add with id bad1 could not be executed - arguments were malformed or truncated."
    );
    let seen = &model.calls()[1].messages;
    assert!(seen.iter().any(|m| m.as_tool().is_some_and(|t| t.tool_call_id == "bad1")));
}

#[tokio::test]
async fn a_jump_to_the_end_skips_the_model() {
    let stop = before_model("stop", |_s: &AgentState, _rt: &AgentRuntime| {
        Ok(Some(AgentUpdate::new().messages(vec![Message::ai("stop")]).jump_to(JumpTo::End)))
    })
    .can_jump_to([JumpTo::End]);
    let model = FakeChatModel::new(Vec::<&str>::new());
    let agent = create_agent(model.clone(), []).middleware(stop).build().unwrap();
    let out = agent.invoke(ask("?"), &RunnableConfig::default()).await.unwrap().value;
    assert_eq!(out.messages().last().unwrap().text(), "stop");
    assert!(model.calls().is_empty(), "the model must not run after the jump");
}

#[tokio::test]
async fn a_per_call_review_refuses_a_malformed_answer_and_takes_a_good_one() {
    let schema = json!({"type": "object"});
    let email =
        StructuredTool::from_fn("send", "Sends.", schema, |_: Value, _ctx| async move { Ok(json!("sent")) });
    let model = FakeChatModel::new([FakeReply::tool_call("send", json!({}), "s1"), "done".into()]);
    let review = HumanInTheLoop::new().review("send").interrupt_mode(InterruptMode::PerCall);
    let agent = create_agent(model, [email.shared()])
        .middleware(review)
        .checkpointer(Arc::new(InMemorySaver::new()))
        .build()
        .unwrap();
    let out = agent.invoke(ask("send it"), &thread("t")).await.unwrap();
    assert_eq!(out.interrupts.len(), 1);
    assert_eq!(out.interrupts[0].value["type"], "tool_approval");
    let err = agent
        .invoke(Command::<AgentState>::resume(json!({"type": "maybe"})), &thread("t"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("is not a decision"), "{err}");
    let out =
        agent.invoke(Command::<AgentState>::resume(json!({"type": "approve"})), &thread("t")).await.unwrap();
    assert!(out.interrupts.is_empty());
    let texts: Vec<String> = out.value.messages().iter().map(Message::text).collect();
    assert_eq!(texts, ["send it", "", "sent", "done"]);
}
