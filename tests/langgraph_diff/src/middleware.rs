//! langchain 1.5's built-in middleware on `create_agent` with scripted models: human review (batched and per
//! call), summarization, call limits, fallbacks, retries, tool errors, PII, the todo list, tool selection,
//! context editing, dynamic prompts (python/s_middleware.py).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use weft::agents::agent::{
    AgentState, AgentUpdate, FnMiddleware, Middleware, ModelHandler, ModelRequest, ModelResponse,
    dynamic_prompt, wrap_model_call,
};
use weft::agents::middleware::{
    ClearToolUses, ContextEditing, Detector, ExitBehavior, HumanInTheLoop, InterruptMode, InterruptOn,
    LlmToolSelector, ModelCallLimit, ModelFallback, ModelRetry, Pii, RetrySettings, Strategy, Summarization,
    TodoList, ToolCallLimit, ToolErrorHandler, ToolRetry,
};
use weft::agents::middleware::{ContextSize, DecisionType, error_parts};
use weft::fakes::{FakeChatModel, FakeReply};
use weft::graph::Command;
use weft::{Error, Message, SharedTool, StructuredTool, Tool, ToolExt as _};

use crate::create_agent::{add, agent, calls};
use crate::rec::{Rec, thread};
use crate::{Outcome, scenarios};

scenarios![
    hitl_batched_approve_runs_the_call,
    hitl_batched_edit_runs_the_reviewers_call,
    hitl_batched_reject_and_respond,
    hitl_batched_refuses_a_decision_not_allowed,
    hitl_per_call_pauses_each_call,
    summarization_keeps_a_tool_call_with_its_result,
    model_call_limit_ends_the_run,
    model_call_limit_per_thread_raises,
    tool_call_limit_blocks_the_extra_calls,
    tool_call_limit_ends_the_run,
    model_fallback_answers_when_the_model_fails,
    model_retry_tries_again_then_gives_up,
    tool_retry_tries_again_then_reports,
    tool_error_middleware_answers_the_model,
    pii_redacts_masks_and_hashes_the_input,
    pii_custom_pattern_and_block,
    todo_list_writes_the_todos,
    todo_list_refuses_parallel_writes,
    llm_tool_selector_narrows_the_tools,
    context_editing_clears_old_tool_results,
    dynamic_prompt_sets_the_system_prompt,
];

fn ask(text: &str) -> AgentUpdate {
    crate::create_agent::ask(text)
}

fn send_email() -> SharedTool {
    let schema = json!({"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
        "required": ["to", "body"]});
    StructuredTool::from_fn("send_email", "Sends an email.", schema, |args: Value, _ctx| async move {
        Ok(json!(format!("sent to {}", args["to"].as_str().unwrap_or_default())))
    })
    .shared()
}

fn add_call(id: &str, a: i64, b: i64) -> FakeReply {
    calls(&[("add", json!({"a": a, "b": b}), id)])
}

fn email_and_add() -> FakeReply {
    calls(&[("send_email", json!({"to": "bob", "body": "hi"}), "e1"), ("add", json!({"a": 2, "b": 3}), "c1")])
}

fn review() -> HumanInTheLoop {
    HumanInTheLoop::new().review("send_email")
}

fn resume(value: Value) -> Command<AgentState> {
    Command::resume(value)
}

fn hitl_batched_approve_runs_the_call(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = agent(vec![email_and_add(), "done".into()], vec![add(), send_email()])
            .middleware(review())
            .build()?;
        rec.invoke(&app, ask("mail bob"), &thread("t")).await;
        rec.state(&app, &thread("t"), false).await;
        rec.invoke(&app, resume(json!({"decisions": [{"type": "approve"}]})), &thread("t")).await;
        Ok(())
    })
}

fn hitl_batched_edit_runs_the_reviewers_call(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = agent(vec![email_and_add(), "done".into()], vec![add(), send_email()])
            .middleware(review())
            .build()?;
        rec.invoke(&app, ask("mail bob"), &thread("t")).await;
        let edit = json!({"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "alice", "body": "hello"}}});
        rec.invoke(&app, resume(json!({"decisions": [edit]})), &thread("t")).await;
        rec.state(&app, &thread("t"), false).await;
        Ok(())
    })
}

fn hitl_batched_reject_and_respond(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let two = calls(&[
            ("send_email", json!({"to": "bob", "body": "hi"}), "e1"),
            ("send_email", json!({"to": "eve", "body": "yo"}), "e2"),
        ]);
        let app = agent(vec![two, "done".into()], vec![add(), send_email()]).middleware(review()).build()?;
        rec.invoke(&app, ask("mail bob and eve"), &thread("t")).await;
        let decisions =
            json!([{"type": "reject", "message": "not bob"}, {"type": "respond", "message": "eve is away"}]);
        rec.invoke(&app, resume(json!({"decisions": decisions})), &thread("t")).await;
        Ok(())
    })
}

fn hitl_batched_refuses_a_decision_not_allowed(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let only_approve =
            HumanInTheLoop::new().interrupt_on("send_email", InterruptOn::new([DecisionType::Approve]))?;
        let app = agent(vec![email_and_add(), "done".into()], vec![add(), send_email()])
            .middleware(only_approve)
            .build()?;
        rec.invoke(&app, ask("mail bob"), &thread("t")).await;
        rec.invoke(&app, resume(json!({"decisions": [{"type": "reject"}]})), &thread("t")).await;
        Ok(())
    })
}

fn hitl_per_call_pauses_each_call(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let two = calls(&[
            ("send_email", json!({"to": "bob", "body": "hi"}), "e1"),
            ("send_email", json!({"to": "eve", "body": "yo"}), "e2"),
        ]);
        let per_call = review().interrupt_mode(InterruptMode::PerCall);
        let app = agent(vec![two, "done".into()], vec![add(), send_email()]).middleware(per_call).build()?;
        let Some(out) = rec.invoke(&app, ask("mail bob and eve"), &thread("t")).await else { return Ok(()) };
        let mut answers = Map::new();
        for i in &out.interrupts {
            let answer = if i.value["args"]["to"] == "bob" {
                json!({"type": "approve"})
            } else {
                json!({"type": "reject", "message": "not eve"})
            };
            answers.insert(i.id.clone(), answer);
        }
        rec.invoke(&app, Command::resume_by_id(answers), &thread("t")).await;
        Ok(())
    })
}

fn summarization_keeps_a_tool_call_with_its_result(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let summarizer = FakeChatModel::new(["the summary"]);
        let middleware = Summarization::new(summarizer)
            .trigger([ContextSize::Messages(7)])?
            .keep(ContextSize::Messages(1))?;
        let replies =
            vec![add_call("c1", 2, 3), add_call("c2", 2, 3), add_call("c3", 2, 3), "all done".into()];
        let app = agent(replies, vec![add()]).middleware(middleware).build()?;
        rec.invoke(&app, ask("add thrice"), &thread("t")).await;
        Ok(())
    })
}

fn model_call_limit_ends_the_run(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let limit = ModelCallLimit::new(None, Some(2), ExitBehavior::End)?;
        let app = agent(vec![add_call("c1", 2, 3), add_call("c2", 2, 3), "never".into()], vec![add()])
            .middleware(limit)
            .build()?;
        rec.invoke(&app, ask("add"), &thread("t")).await;
        rec.state(&app, &thread("t"), false).await;
        Ok(())
    })
}

fn model_call_limit_per_thread_raises(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let limit = ModelCallLimit::new(Some(1), None, ExitBehavior::Error)?;
        let app = agent(vec!["one".into(), "two".into()], vec![]).middleware(limit).build()?;
        rec.invoke(&app, ask("first"), &thread("t")).await;
        let second = AgentState::update().messages(vec![Message::human("second").with_id("h-2")]);
        rec.invoke(&app, second, &thread("t")).await;
        Ok(())
    })
}

fn tool_call_limit_blocks_the_extra_calls(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let limit = ToolCallLimit::new(Some("add".into()), None, Some(1), ExitBehavior::Continue)?;
        let twice = calls(&[("add", json!({"a": 1, "b": 2}), "c1"), ("add", json!({"a": 3, "b": 4}), "c2")]);
        let app = agent(vec![twice, "ok".into()], vec![add()]).middleware(limit).build()?;
        rec.invoke(&app, ask("add twice"), &thread("t")).await;
        Ok(())
    })
}

fn tool_call_limit_ends_the_run(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let limit = ToolCallLimit::new(None, None, Some(1), ExitBehavior::End)?;
        let app = agent(vec![add_call("c1", 2, 3), add_call("c2", 2, 3), "never".into()], vec![add()])
            .middleware(limit)
            .build()?;
        rec.invoke(&app, ask("add"), &thread("t")).await;
        Ok(())
    })
}

fn model_fallback_answers_when_the_model_fails(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let backup = FakeChatModel::new(["from the backup"]);
        let app =
            agent(vec![FakeReply::rate_limited()], vec![]).middleware(ModelFallback::new(backup)).build()?;
        rec.invoke(&app, ask("hi"), &thread("t")).await;
        Ok(())
    })
}

fn no_waits() -> RetrySettings {
    RetrySettings::new().max_retries(1).backoff(Duration::ZERO, 2.0, Duration::from_secs(60), false)
}

fn model_retry_tries_again_then_gives_up(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let app = agent(vec![FakeReply::rate_limited(), "recovered".into()], vec![])
            .middleware(ModelRetry::new(no_waits()))
            .build()?;
        rec.invoke(&app, ask("one"), &thread("a")).await;
        let app = agent(vec![FakeReply::rate_limited(), FakeReply::rate_limited()], vec![])
            .middleware(ModelRetry::new(no_waits()))
            .build()?;
        rec.invoke(&app, ask("two"), &thread("b")).await;
        Ok(())
    })
}

/// `flaky(x)`: fails with a tool error the first `failures` times.
fn flaky(failures: usize) -> SharedTool {
    let left = Arc::new(AtomicUsize::new(failures));
    let schema = json!({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]});
    StructuredTool::from_fn("flaky", "Fails the first few times.", schema, move |args: Value, _ctx| {
        let left = Arc::clone(&left);
        async move {
            if left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
                return Err(Error::Tool { tool: "flaky".into(), message: "flaky".into() });
            }
            Ok(json!(format!("ok {}", args["x"])))
        }
    })
    .shared()
}

fn tool_retry_tries_again_then_reports(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let first = calls(&[("flaky", json!({"x": 1}), "f1")]);
        let app = agent(vec![first, "fine".into()], vec![flaky(1)])
            .middleware(ToolRetry::new(no_waits()))
            .build()?;
        rec.invoke(&app, ask("try"), &thread("a")).await;
        let first = calls(&[("flaky", json!({"x": 2}), "f1")]);
        let app = agent(vec![first, "gave up".into()], vec![flaky(5)])
            .middleware(ToolRetry::new(no_waits()))
            .build()?;
        rec.invoke(&app, ask("try"), &thread("b")).await;
        Ok(())
    })
}

fn tool_error_middleware_answers_the_model(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let handler = ToolErrorHandler::new(|err: &Error, request: &weft::agents::agent::ToolCallRequest| {
            Some(format!("{} failed: {}", request.tool_call.name, error_parts(err).1))
        });
        let first = calls(&[("flaky", json!({"x": 1}), "f1")]);
        let app = agent(vec![first, "noted".into()], vec![flaky(9)]).middleware(handler).build()?;
        rec.invoke(&app, ask("try"), &thread("t")).await;
        Ok(())
    })
}

fn pii_redacts_masks_and_hashes_the_input(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        for (name, strategy) in
            [("redact", Strategy::Redact), ("mask", Strategy::Mask), ("hash", Strategy::Hash)]
        {
            let app = agent(vec!["noted".into()], vec![]).middleware(Pii::new("email", strategy)?).build()?;
            rec.invoke(&app, ask("mail me at ada@example.com or card 4111 1111 1111 1111"), &thread(name))
                .await;
        }
        let app = agent(vec!["noted".into()], vec![])
            .middleware(Pii::new("credit_card", Strategy::Mask)?)
            .build()?;
        rec.invoke(&app, ask("card 4111-1111-1111-1111 please"), &thread("card")).await;
        Ok(())
    })
}

fn pii_custom_pattern_and_block(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let detector = Detector::regex("api_key", r"sk-[a-z0-9]{8}")?;
        let custom = Pii::with_detector("api_key", Strategy::Redact, detector).apply_to(true, true, false);
        let app = agent(vec!["your key sk-abcd1234 is set".into()], vec![]).middleware(custom).build()?;
        rec.invoke(&app, ask("use sk-zzzz9999"), &thread("a")).await;
        let app = agent(vec!["never".into()], vec![]).middleware(Pii::new("ip", Strategy::Block)?).build()?;
        rec.invoke(&app, ask("host 10.0.0.1"), &thread("b")).await;
        Ok(())
    })
}

fn todo_list_writes_the_todos(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let todos =
            json!([{"content": "plan", "status": "in_progress"}, {"content": "ship", "status": "pending"}]);
        let first = calls(&[("write_todos", json!({"todos": todos}), "t1")]);
        let app = agent(vec![first, "planned".into()], vec![]).middleware(TodoList::new()).build()?;
        rec.invoke(&app, ask("plan it"), &thread("t")).await;
        Ok(())
    })
}

fn todo_list_refuses_parallel_writes(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let todos = json!([{"content": "a", "status": "pending"}]);
        let twice = calls(&[
            ("write_todos", json!({"todos": todos}), "t1"),
            ("write_todos", json!({"todos": todos}), "t2"),
        ]);
        let app = agent(vec![twice, "ok".into()], vec![]).middleware(TodoList::new()).build()?;
        rec.invoke(&app, ask("plan"), &thread("t")).await;
        Ok(())
    })
}

/// Answers with what the model would have been sent: the tools, the system prompt, the tool results.
fn shown(request: &ModelRequest) -> ModelResponse {
    let mut tools: Vec<&str> = request.tools.iter().map(|t| Tool::name(t.as_ref())).collect();
    tools.sort_unstable();
    let results: Vec<String> =
        request.messages.iter().filter_map(Message::as_tool).map(|t| t.content.text()).collect();
    let system = request.system_prompt().unwrap_or_else(|| "None".to_owned());
    let content = format!("tools={} system={system} results={}", tools.join(","), results.join("|"));
    ModelResponse::message(Message::ai(content).with_id("shown"))
}

fn show_request() -> FnMiddleware {
    wrap_model_call("show_request", |request: ModelRequest, _next: ModelHandler<'_, ()>| {
        Box::pin(async move { Ok(shown(&request)) })
    })
}

fn multiply() -> SharedTool {
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"]});
    StructuredTool::from_fn("multiply", "Multiplies two integers.", schema, |args: Value, _ctx| async move {
        Ok(json!(args["a"].as_i64().unwrap_or(0) * args["b"].as_i64().unwrap_or(0)))
    })
    .shared()
}

fn llm_tool_selector_narrows_the_tools(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let selector = FakeChatModel::new([calls(&[(
            "ToolSelectionResponse",
            json!({"tools": ["multiply", "add"]}),
            "s1",
        )])]);
        let middleware = LlmToolSelector::new().model(selector).max_tools(1);
        let app = agent(vec![], vec![add(), multiply(), send_email()])
            .middleware(middleware)
            .middleware(show_request())
            .build()?;
        rec.invoke(&app, ask("times?"), &thread("t")).await;
        Ok(())
    })
}

/// Lets the first `n` model calls through, then answers with what the model would have been sent.
struct ShowAfter(AtomicUsize);

#[async_trait::async_trait]
impl Middleware for ShowAfter {
    fn hooks(&self) -> weft::agents::agent::Hooks {
        weft::agents::agent::Hooks::new().wrap_model_call()
    }

    async fn wrap_model_call(
        &self,
        request: ModelRequest,
        next: ModelHandler<'_, ()>,
    ) -> weft::Result<ModelResponse> {
        if self.0.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
            return next.call(request).await;
        }
        Ok(shown(&request))
    }
}

fn context_editing_clears_old_tool_results(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let edit =
            ClearToolUses { trigger: 0, keep: 1, placeholder: "[gone]".into(), ..ClearToolUses::default() };
        let app = agent(vec![add_call("c1", 2, 3), add_call("c2", 5, 6)], vec![add()])
            .middleware(ContextEditing::new([edit]))
            .middleware(ShowAfter(AtomicUsize::new(2)))
            .build()?;
        rec.invoke(&app, ask("add twice"), &thread("t")).await;
        Ok(())
    })
}

fn dynamic_prompt_sets_the_system_prompt(rec: &mut Rec) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let prompt = dynamic_prompt("count_prompt", |request: &ModelRequest| {
            format!("You have {} messages.", request.messages.len())
        });
        let app = agent(vec![], vec![add()])
            .system_prompt("static")
            .middleware(prompt)
            .middleware(show_request())
            .build()?;
        rec.invoke(&app, ask("hi"), &thread("t")).await;
        Ok(())
    })
}
