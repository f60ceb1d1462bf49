//! Human approval of tool calls: the pause, and approve / edit / reject per call, on InMemorySaver and
//! SQLite (a new saver and a new graph on the same file resume the pause).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod common;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use common::{add, asks, call, echo, kinds, texts, thread};
use serde_json::json;
use weft_agents::{
    AgentState, AgentVersion, ApprovalDecision, ApprovalError, ApprovalRequest, HumanApproval,
    create_react_agent,
};
use weft_graph::checkpoint::InMemorySaver;
use weft_graph::{Checkpointer, CompiledGraph, GraphError};
use weft_integrations::sqlite::SqliteSaver;
use weft_runnable_core::fakes::{FakeChatModel, FakeReply};
use weft_runnable_core::{Message, ToolStatus};

type Log = Arc<Mutex<Vec<String>>>;

fn agent(
    model: &FakeChatModel,
    log: &Log,
    approval: HumanApproval,
    saver: Arc<dyn Checkpointer>,
) -> CompiledGraph<AgentState> {
    create_react_agent(model.clone(), [add(), echo(Arc::clone(log))])
        .human_approval(approval)
        .checkpointer(saver)
        .build()
        .unwrap()
}

fn echo_and_add() -> FakeChatModel {
    FakeChatModel::new([
        FakeReply::tool_calls([
            call("echo", json!({"text": "hi"}), "c1"),
            call("add", json!({"a": 1, "b": 2}), "c2"),
        ]),
        "finished".into(),
    ])
}

fn ask() -> weft_agents::AgentStateUpdate {
    AgentState::update().messages(vec![Message::human("go")])
}

fn memory() -> Arc<dyn Checkpointer> {
    Arc::new(InMemorySaver::new())
}

#[tokio::test]
async fn the_agent_pauses_with_the_calls_that_need_approval_and_runs_them_once_approved() {
    let (model, log) = (echo_and_add(), Log::default());
    let app = agent(&model, &log, HumanApproval::tools(["echo"]), memory());
    let paused = app.invoke(ask(), &thread("t")).await.unwrap();
    assert_eq!(paused.interrupts.len(), 1);
    let request: ApprovalRequest = serde_json::from_value(paused.interrupts[0].value.clone()).unwrap();
    assert_eq!(request.action_requests.len(), 1, "add needs no approval");
    let pending = &request.action_requests[0];
    assert_eq!(
        (pending.name.as_str(), pending.tool_call_id.as_str(), &pending.args),
        ("echo", "c1", &json!({"text": "hi"}))
    );
    assert_eq!(pending.description, "Tool execution requires approval");
    assert_eq!(kinds(&paused.value.messages), ["human", "ai"]);
    assert!(log.lock().unwrap().is_empty(), "nothing ran before the decision");
    assert_eq!(app.get_state(&thread("t")).await.unwrap().next, ["human_approval"]);

    let done = app.invoke(HumanApproval::resume([ApprovalDecision::Approve]), &thread("t")).await.unwrap();
    assert!(!done.is_interrupted());
    assert_eq!(*log.lock().unwrap(), ["hi"]);
    assert_eq!(kinds(&done.value.messages), ["human", "ai", "tool", "tool", "ai"]);
    assert_eq!(texts(&done.value.messages[2..]), ["hi", "3", "finished"]);
}

#[tokio::test]
async fn an_edit_runs_the_call_with_the_new_arguments_and_rewrites_the_ai_message() {
    let (model, log) = (echo_and_add(), Log::default());
    let app = agent(&model, &log, HumanApproval::tools(["echo"]), memory());
    app.invoke(ask(), &thread("t")).await.unwrap();
    let done = app
        .invoke(HumanApproval::resume([ApprovalDecision::edit(json!({"text": "bye"}))]), &thread("t"))
        .await
        .unwrap();
    assert_eq!(*log.lock().unwrap(), ["bye"]);
    assert_eq!(
        kinds(&done.value.messages),
        ["human", "ai", "tool", "tool", "ai"],
        "the AI message is replaced, not added"
    );
    let ai = done.value.messages[1].as_ai().unwrap();
    assert_eq!(ai.tool_calls[0].args, json!({"text": "bye"}));
    assert_eq!(ai.tool_calls[1].args, json!({"a": 1, "b": 2}));
    assert_eq!(texts(&done.value.messages[2..4]), ["bye", "3"]);
    // The model's second call sees the edited history.
    assert_eq!(model.calls()[1].messages[1].as_ai().unwrap().tool_calls[0].args, json!({"text": "bye"}));
}

#[tokio::test]
async fn a_rejection_skips_the_call_and_tells_the_model() {
    let (model, log) = (echo_and_add(), Log::default());
    let app = agent(&model, &log, HumanApproval::all_tools(), memory());
    let paused = app.invoke(ask(), &thread("t")).await.unwrap();
    let request: ApprovalRequest = serde_json::from_value(paused.interrupts[0].value.clone()).unwrap();
    assert_eq!(request.action_requests.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["echo", "add"]);
    let decisions = [ApprovalDecision::reject("do not echo"), ApprovalDecision::Approve];
    let done = app.invoke(HumanApproval::resume(decisions), &thread("t")).await.unwrap();
    assert!(log.lock().unwrap().is_empty(), "the rejected call did not run");
    let tools: Vec<(String, String, ToolStatus)> = done
        .value
        .messages
        .iter()
        .filter_map(Message::as_tool)
        .map(|t| (t.tool_call_id.clone(), t.content.text(), t.status))
        .collect();
    assert_eq!(
        tools,
        [
            ("c1".to_owned(), "do not echo".to_owned(), ToolStatus::Error),
            ("c2".to_owned(), "3".to_owned(), ToolStatus::Success)
        ]
    );
    assert_eq!(done.value.messages.last().unwrap().text(), "finished");
    let second = &model.calls()[1].messages;
    assert!(second.iter().any(|m| m.text() == "do not echo"), "the model got the reviewer's message");
}

#[tokio::test]
async fn rejecting_every_call_goes_back_to_the_model_with_a_default_message() {
    let model =
        FakeChatModel::new([FakeReply::tool_call("echo", json!({"text": "x"}), "c1"), "understood".into()]);
    let log = Log::default();
    for version in [AgentVersion::V1, AgentVersion::V2] {
        model.push_reply(FakeReply::tool_call("echo", json!({"text": "x"}), "c1"));
        model.push_reply("understood");
        let _ = version;
    }
    for (i, version) in [AgentVersion::V1, AgentVersion::V2].into_iter().enumerate() {
        let app = create_react_agent(model.clone(), [echo(Arc::clone(&log))])
            .human_approval(HumanApproval::all_tools())
            .checkpointer(memory())
            .version(version)
            .build()
            .unwrap();
        let t = thread(&format!("t{i}"));
        app.invoke(ask(), &t).await.unwrap();
        let done = app
            .invoke(HumanApproval::resume([ApprovalDecision::Reject { message: None }]), &t)
            .await
            .unwrap();
        assert_eq!(kinds(&done.value.messages), ["human", "ai", "tool", "ai"], "{version:?}");
        assert_eq!(done.value.messages[2].text(), "The user rejected the call of tool 'echo' (id c1).");
        assert_eq!(done.value.messages[3].text(), "understood");
    }
    assert!(log.lock().unwrap().is_empty());
}

#[tokio::test]
async fn calls_that_need_no_approval_run_without_a_pause() {
    let (model, log) = (echo_and_add(), Log::default());
    let app = agent(&model, &log, HumanApproval::tools(["delete_everything"]), memory());
    let done = app.invoke(ask(), &thread("t")).await.unwrap();
    assert!(!done.is_interrupted());
    assert_eq!(texts(&done.value.messages[2..]), ["hi", "3", "finished"]);
}

#[tokio::test]
async fn a_resume_with_the_wrong_number_of_decisions_is_an_error() {
    let (model, log) = (echo_and_add(), Log::default());
    let app = agent(&model, &log, HumanApproval::all_tools(), memory());
    app.invoke(ask(), &thread("t")).await.unwrap();
    let err = app.invoke(HumanApproval::resume([ApprovalDecision::Approve]), &thread("t")).await.unwrap_err();
    let GraphError::Node { node, source, .. } = &err else { panic!("{err:?}") };
    assert_eq!(node, "human_approval");
    assert_eq!(
        source.downcast_custom::<ApprovalError>(),
        Some(&ApprovalError::DecisionCount { expected: 2, got: 1 })
    );
    assert!(log.lock().unwrap().is_empty());
    let err = app
        .invoke(
            weft_graph::Command::<AgentState>::resume(json!([{"type": "maybe"}, {"type": "approve"}])),
            &thread("t"),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("resume value for node 'human_approval' has the wrong shape"), "{err}");
}

#[test]
fn decisions_read_and_write_their_json_form() {
    let decisions = [
        ApprovalDecision::Approve,
        ApprovalDecision::edit(json!({"a": 1})),
        ApprovalDecision::reject("no"),
        ApprovalDecision::Reject { message: None },
    ];
    for decision in decisions {
        let json = decision.to_json();
        assert_eq!(serde_json::to_value(&decision).unwrap(), json);
        assert_eq!(serde_json::from_value::<ApprovalDecision>(json).unwrap(), decision);
    }
}

fn temp_db() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-agents-approval-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("agent.db")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_on_sqlite_is_resumed_by_a_new_saver_and_a_new_graph() {
    let db = temp_db();
    let log = Log::default();
    {
        let model = FakeChatModel::new([FakeReply::tool_call("echo", json!({"text": "hi"}), "c1")]);
        let saver = Arc::new(SqliteSaver::open(&db).await.unwrap());
        let app = agent(&model, &log, HumanApproval::all_tools(), saver);
        let paused = app.invoke(ask(), &thread("sq")).await.unwrap();
        assert!(paused.is_interrupted());
    }
    // As after a restart: nothing of the first graph is left but the file.
    let model = FakeChatModel::new(["echoed"]);
    let saver = Arc::new(SqliteSaver::open(&db).await.unwrap());
    let app = agent(&model, &log, HumanApproval::all_tools(), saver);
    let snapshot = app.get_state(&thread("sq")).await.unwrap();
    assert_eq!(snapshot.next, ["human_approval"]);
    let request: ApprovalRequest = serde_json::from_value(snapshot.interrupts[0].value.clone()).unwrap();
    assert_eq!(request.action_requests[0].tool_call_id, "c1");
    let done = app
        .invoke(HumanApproval::resume([ApprovalDecision::edit(json!({"text": "edited"}))]), &thread("sq"))
        .await
        .unwrap();
    assert_eq!(*log.lock().unwrap(), ["edited"]);
    assert_eq!(texts(&done.value.messages), ["go", "", "edited", "echoed"]);
    assert_eq!(model.calls().len(), 1, "the model is not asked again for the step it had answered");
    let _ = asks(Vec::new());
}
