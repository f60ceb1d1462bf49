//! The prebuilt agents through the facade: `weft::agents` and the prelude.
#![allow(clippy::unwrap_used, missing_docs)]

use serde_json::json;
use weft::fakes::{FakeChatModel, FakeReply};
use weft::prelude::*;

/// Multiplies two integers.
#[tool]
fn multiply(
    /// The first factor.
    a: i64,
    /// The second factor.
    b: i64,
) -> i64 {
    a * b
}

#[tokio::test]
async fn a_react_agent_from_the_prelude_runs_a_tool() {
    let model =
        FakeChatModel::new([FakeReply::tool_call("multiply", json!({"a": 6, "b": 7}), "c1"), "42".into()]);
    let agent = create_react_agent(model, [multiply.shared()]).prompt("You multiply.").build().unwrap();
    let input = AgentState::update().messages(vec![Message::human("6 * 7?")]);
    let out = agent.invoke(input, &RunnableConfig::default()).await.unwrap();
    let texts: Vec<String> = out.value.messages.iter().map(Message::text).collect();
    assert_eq!(texts, ["6 * 7?", "", "42", "42"]);
    let _: weft::agents::ToolNode = ToolNode::new([multiply.shared()]);
    let _ = HumanApproval::all_tools();
    let _ = ApprovalDecision::Approve;
    let _ = tools_condition::<AgentState>;
}
