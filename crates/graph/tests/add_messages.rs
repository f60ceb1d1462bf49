#![allow(clippy::unwrap_used, missing_docs)]

use serde_json::json;
use weft_graph::messages::{
    Message, MessagesState, MessagesStateUpdate, REMOVE_ALL_MESSAGES, convert_to_messages, messages_from,
};
use weft_graph::{Messages, State, UpdateError, add_messages};
use weft_runnable_core::{AiMessage, ToolCallChunk};

fn ids(list: &Messages) -> Vec<&str> {
    list.iter().map(|m| m.id().unwrap()).collect()
}

fn texts(list: &Messages) -> Vec<String> {
    list.iter().map(Message::text).collect()
}

#[test]
fn id_less_messages_get_uuid_v4_ids_on_both_sides() {
    let mut list = Messages::from(vec![Message::human("left")]);
    add_messages(&mut list, vec![Message::ai("right")]).unwrap();
    for id in ids(&list) {
        let parsed = uuid::Uuid::parse_str(id).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
        assert_eq!(id, parsed.hyphenated().to_string());
    }
    assert_ne!(list[0].id(), list[1].id());
}

#[test]
fn a_message_with_a_known_id_replaces_it_in_place() {
    let mut list = Messages::from(vec![
        Message::human("a").with_id("1"),
        Message::ai("b").with_id("2"),
        Message::human("c").with_id("3"),
    ]);
    add_messages(&mut list, vec![Message::ai("B").with_id("2"), Message::ai("d").with_id("4")]).unwrap();
    assert_eq!(texts(&list), ["a", "B", "c", "d"]);
    assert_eq!(ids(&list), ["1", "2", "3", "4"]);
    assert_eq!(list.get_by_id("2").unwrap().text(), "B");
    assert_eq!(list.position("4"), Some(3));
}

#[test]
fn a_second_new_message_with_the_same_id_in_a_batch_replaces_the_first() {
    let mut list = Messages::new();
    add_messages(&mut list, vec![Message::ai("first").with_id("x"), Message::ai("second").with_id("x")])
        .unwrap();
    assert_eq!(texts(&list), ["second"]);
}

#[test]
fn a_remove_marker_deletes_the_message_with_its_id() {
    let mut list = Messages::from(vec![Message::human("a").with_id("1"), Message::ai("b").with_id("2")]);
    add_messages(&mut list, vec![Message::remove("1")]).unwrap();
    assert_eq!(ids(&list), ["2"]);
    assert_eq!(list.position("2"), Some(0), "the index follows the removal");
    assert!(!list.contains_id("1"));
}

#[test]
fn a_remove_can_delete_a_message_added_earlier_in_the_same_batch() {
    let mut list = Messages::new();
    add_messages(
        &mut list,
        vec![Message::ai("tmp").with_id("t"), Message::remove("t"), Message::ai("x").with_id("k")],
    )
    .unwrap();
    assert_eq!(ids(&list), ["k"]);
}

#[test]
fn a_later_message_with_the_same_id_cancels_an_earlier_remove() {
    let mut list = Messages::from(vec![Message::human("a").with_id("1"), Message::ai("b").with_id("2")]);
    add_messages(&mut list, vec![Message::remove("1"), Message::human("again").with_id("1")]).unwrap();
    assert_eq!(texts(&list), ["again", "b"]);
}

#[test]
fn removing_an_unknown_id_is_an_error_and_changes_nothing() {
    let mut list = Messages::from(vec![Message::human("a").with_id("1")]);
    let err =
        add_messages(&mut list, vec![Message::ai("new").with_id("2"), Message::remove("9")]).unwrap_err();
    assert_eq!(err, "attempting to delete a message with an id that doesn't exist ('9')");
    assert_eq!(ids(&list), ["1"]);
}

#[test]
fn a_removal_error_in_a_state_names_the_key() {
    let mut state = MessagesState::default();
    let err = state.apply(vec![MessagesState::update().messages(vec![Message::remove("9")])]).unwrap_err();
    assert_eq!(
        err,
        UpdateError::Reducer {
            key: "messages".to_owned(),
            message: "attempting to delete a message with an id that doesn't exist ('9')".to_owned()
        }
    );
    assert_eq!(
        err.to_string(),
        "at key 'messages': attempting to delete a message with an id that doesn't exist ('9')"
    );
}

#[test]
fn remove_all_keeps_only_what_follows_the_last_marker() {
    let mut list = Messages::from(vec![Message::human("a").with_id("1"), Message::ai("b").with_id("2")]);
    add_messages(
        &mut list,
        vec![
            Message::ai("dropped").with_id("3"),
            Message::remove(REMOVE_ALL_MESSAGES),
            Message::ai("also dropped"),
            Message::remove(REMOVE_ALL_MESSAGES),
            Message::human("kept").with_id("1"),
            Message::ai("kept too"),
        ],
    )
    .unwrap();
    assert_eq!(texts(&list), ["kept", "kept too"]);
    assert_eq!(list.position("1"), Some(0));
    assert!(list[1].id().is_some());
}

#[test]
fn ai_chunks_become_whole_messages() {
    let chunk = AiMessage {
        tool_call_chunks: vec![ToolCallChunk { name: Some("f".to_owned()), ..Default::default() }],
        chunk_position: Some("last".to_owned()),
        ..AiMessage::new("streamed")
    };
    let mut list = Messages::new();
    add_messages(&mut list, vec![chunk.into()]).unwrap();
    let ai = list[0].as_ai().unwrap();
    assert!(ai.tool_call_chunks.is_empty());
    assert_eq!(ai.chunk_position, None);
}

#[test]
fn writes_do_not_touch_a_clone_taken_before() {
    let mut list = Messages::from(vec![Message::human("a").with_id("1")]);
    let snapshot = list.clone();
    assert!(snapshot.ptr_eq(&list));
    add_messages(&mut list, vec![Message::ai("b").with_id("2"), Message::human("A").with_id("1")]).unwrap();
    assert_eq!(texts(&snapshot), ["a"]);
    assert_eq!(texts(&list), ["A", "b"]);
    assert!(!snapshot.contains_id("2"));
}

#[test]
fn messages_serialize_as_a_plain_list() {
    let list = Messages::from(vec![Message::human("hi").with_id("1")]);
    let json = serde_json::to_value(&list).unwrap();
    assert_eq!(json, json!([{"type": "human", "content": "hi", "id": "1"}]));
    let back: Messages = serde_json::from_value(json).unwrap();
    assert_eq!(back, list);
    assert_eq!(back.position("1"), Some(0));
}

#[test]
fn message_likes_are_coerced() {
    let messages = convert_to_messages(json!([
        "plain",
        ["user", "pair"],
        ["assistant", "reply"],
        {"role": "system", "content": "rules"},
        {"role": "developer", "content": "dev"},
        {"role": "tool", "content": "42", "tool_call_id": "c1"},
        {"type": "ai", "content": "typed", "id": "a1"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 1}"}}
        ]},
    ]))
    .unwrap();
    assert_eq!(messages[0], Message::human("plain"));
    assert_eq!(messages[1], Message::human("pair"));
    assert_eq!(messages[2], Message::ai("reply"));
    assert_eq!(messages[3], Message::system("rules"));
    assert_eq!(messages[4].type_name(), "system");
    assert_eq!(messages[5], Message::tool("42", "c1"));
    assert_eq!(messages[6], Message::ai("typed").with_id("a1"));
    let call = &messages[7].as_ai().unwrap().tool_calls[0];
    assert_eq!((call.name.as_str(), &call.args, call.id.as_deref()), ("add", &json!({"a": 1}), Some("c2")));
    assert_eq!(convert_to_messages(json!("one")).unwrap(), [Message::human("one")]);
    assert_eq!(
        messages_from([("human", "a"), ("ai", "b")]).unwrap(),
        [Message::human("a"), Message::ai("b")]
    );
}

#[test]
fn malformed_tool_call_arguments_become_invalid_tool_calls() {
    // As langchain-core: the call is kept as an invalid tool call with its raw arguments, not run with `{}`.
    let messages = convert_to_messages(json!([{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{not json"}}
    ]}]))
    .unwrap();
    let ai = messages[0].as_ai().unwrap();
    assert!(ai.tool_calls.is_empty(), "{ai:?}");
    assert_eq!(ai.invalid_tool_calls.len(), 1, "{ai:?}");
    assert_eq!(ai.invalid_tool_calls[0].args.as_deref(), Some("{not json"));
}

#[test]
fn bad_message_likes_are_errors_that_say_where() {
    let err = convert_to_messages(json!(["fine", ["wizard", "abracadabra"]])).unwrap_err();
    assert!(err.to_string().contains("at index 1: unexpected message type: 'wizard'"), "{err}");
    let err = convert_to_messages(json!([{"role": "user"}])).unwrap_err();
    assert!(err.to_string().contains("must contain 'role' (or 'type') and 'content'"), "{err}");
    let err = convert_to_messages(json!(42)).unwrap_err();
    assert!(err.to_string().contains("cannot convert 42 to a message"), "{err}");
}

#[test]
fn messages_state_takes_message_likes_from_json() {
    let mut state = MessagesState::default();
    let update = state.update_from_json(vec![(0, json!([["user", "hi"], "there"]))]).unwrap();
    state.apply(vec![update]).unwrap();
    assert_eq!(texts(&state.messages), ["hi", "there"]);
    let err = state.update_from_json(vec![(0, json!([["wizard", "x"]]))]).unwrap_err();
    assert!(err.to_string().starts_with("at key 'messages': at index 0: unexpected message type"), "{err}");
}

#[test]
fn messages_state_update_builder_and_json_form() {
    let update: MessagesStateUpdate = MessagesState::update().messages(vec![Message::ai("x").with_id("1")]);
    assert_eq!(
        serde_json::to_value(&update).unwrap(),
        json!({"messages": [{"type": "ai", "content": "x", "id": "1", "tool_calls": [], "invalid_tool_calls": []}]})
    );
}

#[tokio::test]
async fn messages_state_is_a_graph_state_its_nodes_take_by_value() {
    let mut graph = weft_graph::StateGraph::<MessagesState>::new();
    graph.add_node("echo", |s: MessagesState| {
        MessagesState::update().messages(vec![Message::ai(format!("echo: {}", s.messages[0].text()))])
    });
    graph.add_edge(weft_graph::START, "echo");
    let saver = std::sync::Arc::new(weft_graph::InMemorySaver::new());
    let app = graph.compile_with(weft_graph::CompileConfig::new().checkpointer(saver)).unwrap();
    let config = weft_runnable_core::RunnableConfig::default().with_configurable("thread_id", "t");
    let out =
        app.invoke(MessagesState::update().messages(vec![Message::human("hi")]), &config).await.unwrap();
    assert_eq!(texts(&out.value.messages), ["hi", "echo: hi"]);
    let saved = app.get_state(&config).await.unwrap();
    assert_eq!(texts(&saved.values.messages), ["hi", "echo: hi"], "the checkpoint round-trips the list");
}
