#![allow(clippy::unwrap_used, missing_docs)]

use serde_json::{Value, json};
use weft_graph::{
    ChannelKind, ChannelSet, IntoNodeOutput, JsonChannel, JsonState, JsonUpdate, NodeOutput, State,
    UpdateError,
};

fn state() -> JsonState {
    JsonState::builder()
        .channel("count", ChannelKind::LastValue)
        .channel("sum", ChannelKind::Reducer)
        .reducer("max", |current: &mut Value, value: Value| {
            let (Some(a), Some(b)) = (current.as_i64(), value.as_i64()) else {
                return Err(format!("expected integers, got {current} and {value}"));
            };
            *current = json!(a.max(b));
            Ok(())
        })
        .append("log")
        .add_messages("messages")
        .channel("flash", ChannelKind::Ephemeral)
        .channel("events", ChannelKind::Topic { accumulate: false })
        .channel("all", JsonChannel::Topic { accumulate: true })
        .channel("secret", ChannelKind::Untracked)
        .build()
}

fn index(state: &JsonState, name: &str) -> usize {
    state.channel_index(name).unwrap()
}

#[test]
fn channels_are_declared_at_run_time() {
    let state = state();
    let kinds: Vec<(String, ChannelKind)> =
        state.channels().iter().map(|c| (c.name.to_string(), c.kind)).collect();
    assert_eq!(kinds[0], ("count".to_owned(), ChannelKind::LastValue));
    assert_eq!(kinds[2], ("max".to_owned(), ChannelKind::Reducer));
    assert_eq!(kinds[4], ("messages".to_owned(), ChannelKind::Reducer));
    assert_eq!(kinds[8], ("secret".to_owned(), ChannelKind::Untracked));
    assert_eq!(state.to_json(), json!({"messages": []}));
}

#[test]
fn last_value_rejects_a_second_write_in_the_step() {
    let mut state = state();
    state.apply(vec![JsonUpdate::new().write("count", json!(1))]).unwrap();
    assert_eq!(state.get("count"), Some(&json!(1)));
    let err =
        state.apply(vec![JsonUpdate::new().write("count", json!(2)).write("count", json!(3))]).unwrap_err();
    assert_eq!(err, UpdateError::ConcurrentUpdate { key: "count".to_owned(), writers: vec![] });
}

#[test]
fn reducers_fold_writes_in_order() {
    let mut state = state();
    state
        .apply(vec![
            JsonUpdate::new().write("sum", json!(2)).write("max", json!(3)).write("log", json!(["a"])),
            JsonUpdate::new().write("sum", json!(5)).write("max", json!(1)).write("log", json!("b")),
        ])
        .unwrap();
    assert_eq!(state.get("sum"), Some(&json!(7)));
    assert_eq!(state.get("max"), Some(&json!(3)));
    assert_eq!(state.get("log"), Some(&json!(["a", "b"])));
}

#[test]
fn reducer_errors_name_the_key() {
    let mut state = state();
    state.apply(vec![JsonUpdate::new().write("max", json!(1)).write("sum", json!("a"))]).unwrap();
    let err = state.apply(vec![JsonUpdate::new().write("max", json!("x"))]).unwrap_err();
    assert_eq!(err.to_string(), "at key 'max': expected integers, got 1 and \"x\"");
    let err = state.apply(vec![JsonUpdate::new().write("sum", json!(1))]).unwrap_err();
    assert_eq!(err.to_string(), "at key 'sum': cannot add a number to a string");
}

#[test]
fn overwrite_replaces_and_ignores_later_writes() {
    let mut state = state();
    state.apply(vec![JsonUpdate::new().write("log", json!(["old"]))]).unwrap();
    state
        .apply(vec![
            JsonUpdate::new().write("log", json!(["before"])),
            JsonUpdate::new().overwrite("log", json!(["fresh"])),
            JsonUpdate::new().write("log", json!(["after"])),
        ])
        .unwrap();
    assert_eq!(state.get("log"), Some(&json!(["fresh"])));
    let err = state
        .apply(vec![JsonUpdate::new().overwrite("log", json!([])).overwrite("log", json!([]))])
        .unwrap_err();
    assert_eq!(err, UpdateError::ConcurrentOverwrite { key: "log".to_owned() });
}

#[test]
fn writes_to_undeclared_channels_are_dropped() {
    let mut state = state();
    let before = state.to_json();
    let changed = state.apply(vec![JsonUpdate::new().write("nope", json!(1))]).unwrap();
    assert!(changed.is_empty());
    assert_eq!(state.to_json(), before);
    let changed =
        state.apply(vec![JsonUpdate::new().write("nope", json!(1)).write("count", json!(2))]).unwrap();
    assert_eq!(changed.iter().count(), 1, "the declared write still applies");
    assert_eq!(state.get("count"), Some(&json!(2)));
    assert!(state.update_to_json(&JsonUpdate::new().write("nope", json!(1))).unwrap().is_empty());
}

#[test]
fn messages_merge_by_id_and_get_ids_at_write_time() {
    let mut state = state();
    let mut update = JsonUpdate::new().write("messages", json!([["user", "hi"], "there"]));
    state.prepare_update(&mut update);
    let written = &update.writes()[0].1;
    let ids: Vec<String> =
        written.as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(ids.len(), 2);
    state.apply(vec![update]).unwrap();
    let messages = state.messages("messages").unwrap();
    assert_eq!(messages.iter().map(|m| m.id().unwrap()).collect::<Vec<_>>(), ids);
    let first = ids[0].clone();
    state
        .apply(vec![
            JsonUpdate::new().write("messages", json!({"type": "human", "content": "edited", "id": first})),
        ])
        .unwrap();
    assert_eq!(state.messages("messages").unwrap()[0].text(), "edited");
    let err = state
        .apply(vec![JsonUpdate::new().write("messages", json!({"type": "remove", "id": "9"}))])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "at key 'messages': attempting to delete a message with an id that doesn't exist ('9')"
    );
}

#[test]
fn ephemeral_and_topic_clear_after_a_quiet_step() {
    let mut state = state();
    let update = JsonUpdate::new()
        .write("flash", json!("now"))
        .write("events", json!(["a", "b"]))
        .write("all", json!("x"));
    let mut written = ChannelSet::new();
    state.written(&update, &mut written);
    state.apply(vec![update]).unwrap();
    assert!(state.end_step(&written).is_empty());
    assert_eq!(state.get("events"), Some(&json!(["a", "b"])));
    state.apply(vec![JsonUpdate::new().write("events", json!("c")).write("all", json!(["y"]))]).unwrap();
    assert_eq!(state.get("events"), Some(&json!(["c"])), "a new step's writes replace the old ones");
    let cleared = state.end_step(&ChannelSet::new());
    assert_eq!(cleared.iter().collect::<Vec<_>>(), [index(&state, "flash"), index(&state, "events")]);
    assert_eq!(state.get("flash"), None);
    assert_eq!(state.get("events"), None);
    assert_eq!(state.get("all"), Some(&json!(["x", "y"])));
}

#[test]
fn checkpoint_round_trip_skips_untracked() {
    let mut state = state();
    state
        .apply(vec![
            JsonUpdate::new()
                .write("count", json!(4))
                .write("secret", json!("s"))
                .write("messages", json!([{"type": "ai", "content": "a", "id": "1"}])),
        ])
        .unwrap();
    let mut restored = JsonState::builder()
        .channel("count", ChannelKind::LastValue)
        .channel("sum", ChannelKind::Reducer)
        .append("max")
        .append("log")
        .add_messages("messages")
        .channel("flash", ChannelKind::Ephemeral)
        .channel("events", ChannelKind::Topic { accumulate: false })
        .channel("all", JsonChannel::Topic { accumulate: true })
        .channel("secret", ChannelKind::Untracked)
        .build();
    for i in 0..state.channels().len() {
        if let Some(value) = state.channel_to_json(i).unwrap() {
            restored.channel_from_json(i, value).unwrap();
        }
    }
    assert_eq!(restored.get("count"), Some(&json!(4)));
    assert_eq!(restored.get("secret"), None);
    assert_eq!(restored.messages("messages").unwrap().position("1"), Some(0));
    restored.channel_from_json(index(&restored, "count"), Value::Null).unwrap();
    assert_eq!(restored.get("count"), None);
}

#[test]
fn updates_round_trip_through_indexed_json() {
    let state = state();
    let update =
        JsonUpdate::new().write("count", json!(1)).overwrite("log", json!([])).write("sum", json!(2));
    let writes = state.update_to_json(&update).unwrap();
    assert_eq!(writes[1], (index(&state, "log"), json!({"__overwrite__": []})));
    assert_eq!(state.update_from_json(writes).unwrap(), update);
    assert!(matches!(state.update_from_json(vec![(99, json!(1))]), Err(UpdateError::UnknownChannel { .. })));
}

#[test]
fn json_objects_are_node_outputs() {
    let out = IntoNodeOutput::<JsonState>::into_node_output(json!({"count": 1, "log": ["a"]})).unwrap();
    let NodeOutput::Update(update) = out else { panic!("expected an update") };
    assert_eq!(update.writes()[0], ("count".to_owned(), json!(1)));
    assert!(matches!(IntoNodeOutput::<JsonState>::into_node_output(Value::Null).unwrap(), NodeOutput::Empty));
    let err = IntoNodeOutput::<JsonState>::into_node_output(json!(5)).unwrap_err();
    assert_eq!(err.to_string(), "expected dict, got 5");
    assert!(err.downcast_custom::<weft_graph::InvalidNodeReturn>().is_some());
    // A string reads bare, as LangGraph's message shows it.
    let err = IntoNodeOutput::<JsonState>::into_node_output(json!("hello")).unwrap_err();
    assert_eq!(err.to_string(), "expected dict, got hello");
}

#[test]
fn clones_share_the_schema_and_not_the_values() {
    let mut state = state();
    let before = state.clone();
    state.apply(vec![JsonUpdate::new().write("count", json!(9))]).unwrap();
    assert_eq!(before.get("count"), None);
    assert_eq!(state.get("count"), Some(&json!(9)));
}

#[tokio::test]
async fn a_node_returning_no_object_fails_the_run_as_an_invalid_return() {
    let mut g = weft_graph::StateGraph::with_initial(state());
    g.add_node("a", |_: &JsonState| json!("hello"));
    g.add_edge(weft_graph::START, "a");
    let err = g
        .compile()
        .unwrap()
        .invoke(weft_graph::GraphInput::Update(vec![JsonUpdate::new()]), &Default::default())
        .await
        .unwrap_err();
    let weft_graph::GraphError::InvalidNodeReturn { node, step, got } = &err else { panic!("{err:?}") };
    assert_eq!((node.name(), *step, got.as_str()), ("a", 1, "hello"));
    assert_eq!(err.to_string(), "expected dict, got hello");
}

#[tokio::test]
async fn an_error_handler_is_told_a_nodes_invalid_return_as_its_own_error() {
    let mut g = weft_graph::StateGraph::with_initial(state());
    g.add_node("a", |_: &JsonState| json!(5));
    g.add_error_handler("a", |_: &JsonState, rt: &weft_graph::Runtime| {
        let failure = rt.node_error().unwrap();
        let own = failure.source().and_then(|e| e.downcast_custom::<weft_graph::InvalidNodeReturn>());
        json!({"log": [format!("{}: {} ({})", failure.node(), failure.message(), own.is_some())]})
    });
    g.add_edge(weft_graph::START, "a");
    let input = weft_graph::GraphInput::Update(vec![JsonUpdate::new()]);
    let out = g.compile().unwrap().invoke(input, &Default::default()).await.unwrap();
    assert_eq!(out.value.get("log"), Some(&json!(["a: expected dict, got 5 (true)"])));
}
