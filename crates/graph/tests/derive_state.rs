#![allow(clippy::unwrap_used, missing_docs)]

use serde::{Deserialize, Serialize};
use serde_json::json;
use weft_graph::messages::Message;
use weft_graph::{ChannelKind, ChannelSet, IntoNodeOutput, Messages, NodeOutput, State, UpdateError};

fn add(total: &mut i64, value: i64) {
    *total += value;
}

fn bounded_add(total: &mut u32, value: u32) -> Result<(), String> {
    if *total + value > 100 {
        return Err(format!("{} would pass the limit of 100", *total + value));
    }
    *total += value;
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Item {
    name: String,
    qty: u32,
}

#[derive(State, Debug, Clone, Default, PartialEq)]
pub struct Every {
    /// The current question.
    question: String,
    count: i64,
    items: Vec<Item>,
    #[state(reducer = add)]
    total: i64,
    #[state(reducer = bounded_add)]
    budget: u32,
    #[state(append)]
    log: Vec<String>,
    #[state(add_messages)]
    messages: Messages,
    #[state(ephemeral)]
    flash: Option<String>,
    #[state(topic)]
    events: Vec<String>,
    #[state(topic(accumulate))]
    history: Vec<u32>,
    #[state(untracked)]
    scratch: u32,
}

fn index(name: &str) -> usize {
    Every::default().channel_index(name).unwrap()
}

#[test]
fn channels_follow_fields_and_attributes() {
    let state = Every::default();
    let channels: Vec<(String, ChannelKind)> =
        state.channels().iter().map(|c| (c.name.to_string(), c.kind)).collect();
    assert_eq!(
        channels,
        [
            ("question".to_owned(), ChannelKind::LastValue),
            ("count".to_owned(), ChannelKind::LastValue),
            ("items".to_owned(), ChannelKind::LastValue),
            ("total".to_owned(), ChannelKind::Reducer),
            ("budget".to_owned(), ChannelKind::Reducer),
            ("log".to_owned(), ChannelKind::Reducer),
            ("messages".to_owned(), ChannelKind::Reducer),
            ("flash".to_owned(), ChannelKind::Ephemeral),
            ("events".to_owned(), ChannelKind::Topic { accumulate: false }),
            ("history".to_owned(), ChannelKind::Topic { accumulate: true }),
            ("scratch".to_owned(), ChannelKind::Untracked),
        ]
    );
    assert_eq!(state.channel_index("log"), Some(5));
    assert_eq!(state.channel_index("nope"), None);
}

#[test]
fn written_lists_the_fields_an_update_sets() {
    let state = Every::default();
    let mut out = ChannelSet::new();
    state.written(&Every::update().count(1).log(vec!["a".to_owned()]), &mut out);
    assert_eq!(out.iter().collect::<Vec<_>>(), [1, 5]);
}

#[test]
fn last_value_takes_the_single_write_of_a_step() {
    let mut state = Every::default();
    let changed = state.apply(vec![Every::update().question("why?").count(3)]).unwrap();
    assert_eq!(state.question, "why?");
    assert_eq!(state.count, 3);
    assert_eq!(changed.iter().collect::<Vec<_>>(), [0, 1]);
}

#[test]
fn last_value_rejects_two_writes_in_one_step_naming_the_key() {
    let mut state = Every::default();
    let err = state.apply(vec![Every::update().count(1), Every::update().count(2)]).unwrap_err();
    assert_eq!(err, UpdateError::ConcurrentUpdate { key: "count".to_owned(), writers: vec![] });
    assert_eq!(
        err.to_string(),
        "at key 'count': can receive only one value per step; use a reducer to handle multiple values"
    );
    assert_eq!(state.count, 0, "nothing is applied when a step is rejected up front");
}

#[test]
fn reducer_folds_every_write_in_order() {
    let mut state = Every { total: 10, ..Every::default() };
    state.apply(vec![Every::update().total(1), Every::update().total(2), Every::update().total(-4)]).unwrap();
    assert_eq!(state.total, 9);
}

#[test]
fn reducer_error_names_the_key() {
    let mut state = Every::default();
    let err = state.apply(vec![Every::update().budget(60), Every::update().budget(50)]).unwrap_err();
    assert_eq!(err.to_string(), "at key 'budget': 110 would pass the limit of 100");
    assert!(matches!(err, UpdateError::Reducer { ref key, .. } if key == "budget"));
}

#[test]
fn append_extends_the_list() {
    let mut state = Every { log: vec!["a".to_owned()], ..Every::default() };
    state
        .apply(vec![Every::update().log(vec!["b".to_owned()]), Every::update().log(vec!["c".to_owned()])])
        .unwrap();
    assert_eq!(state.log, ["a", "b", "c"]);
}

#[test]
fn overwrite_replaces_the_value_and_later_writes_of_the_step_are_ignored() {
    let mut state = Every { log: vec!["old".to_owned()], total: 5, ..Every::default() };
    state
        .apply(vec![
            Every::update().log(vec!["before".to_owned()]).total(1),
            Every::update().overwrite_log(vec!["fresh".to_owned()]).overwrite_total(100),
            Every::update().log(vec!["after".to_owned()]).total(1),
        ])
        .unwrap();
    assert_eq!(state.log, ["fresh"]);
    assert_eq!(state.total, 100);
    // The next step folds again.
    state.apply(vec![Every::update().log(vec!["next".to_owned()])]).unwrap();
    assert_eq!(state.log, ["fresh", "next"]);
}

#[test]
fn two_overwrites_in_one_step_are_an_error_naming_the_key() {
    let mut state = Every::default();
    let err = state
        .apply(vec![Every::update().overwrite_total(1), Every::update().overwrite_total(2)])
        .unwrap_err();
    assert_eq!(err, UpdateError::ConcurrentOverwrite { key: "total".to_owned() });
    assert_eq!(err.to_string(), "at key 'total': can receive only one overwrite value per super-step");
}

#[test]
fn a_plain_write_after_overwrite_in_the_builder_clears_the_overwrite() {
    let update = Every::update().overwrite_total(1).total(2);
    let mut state = Every { total: 5, ..Every::default() };
    state.apply(vec![update]).unwrap();
    assert_eq!(state.total, 7);
}

#[test]
fn add_messages_field_merges_by_id_and_overwrite_replaces_the_list() {
    let mut state = Every::default();
    state.apply(vec![Every::update().messages(vec![Message::human("hi").with_id("1")])]).unwrap();
    state
        .apply(vec![Every::update().messages(vec![Message::human("hello").with_id("1"), Message::ai("yo")])])
        .unwrap();
    assert_eq!(state.messages.len(), 2);
    assert_eq!(state.messages[0].text(), "hello");
    state.apply(vec![Every::update().overwrite_messages(vec![Message::system("reset")])]).unwrap();
    assert_eq!(state.messages.len(), 1);
    assert!(state.messages[0].id().is_some(), "an overwrite gets ids too");
}

#[test]
fn ephemeral_lasts_one_step() {
    let mut state = Every::default();
    let flash = index("flash");
    let mut written = ChannelSet::new();
    state.written(&Every::update().flash("now"), &mut written);
    state.apply(vec![Every::update().flash("now")]).unwrap();
    assert!(state.end_step(&written).is_empty(), "written this step: kept");
    assert_eq!(state.flash.as_deref(), Some("now"));
    let cleared = state.end_step(&ChannelSet::new());
    assert_eq!(cleared.iter().collect::<Vec<_>>(), [flash]);
    assert_eq!(state.flash, None);
    assert!(state.end_step(&ChannelSet::new()).is_empty(), "already empty: no change");
}

#[test]
fn ephemeral_rejects_two_writes_in_one_step() {
    let mut state = Every::default();
    let err = state.apply(vec![Every::update().flash("a"), Every::update().flash("b")]).unwrap_err();
    assert_eq!(err, UpdateError::ConcurrentUpdate { key: "flash".to_owned(), writers: vec![] });
}

#[test]
fn topic_collects_the_writes_of_a_step_and_clears_after_a_quiet_step() {
    let mut state = Every::default();
    let events = index("events");
    state
        .apply(vec![
            Every::update().events(vec!["a".to_owned()]),
            Every::update().events(vec!["b".to_owned()]),
        ])
        .unwrap();
    assert_eq!(state.events, ["a", "b"]);
    // A new step's writes replace the old ones.
    state.apply(vec![Every::update().events(vec!["c".to_owned()])]).unwrap();
    assert_eq!(state.events, ["c"]);
    let cleared = state.end_step(&ChannelSet::new());
    assert!(cleared.contains(events));
    assert!(state.events.is_empty());
}

#[test]
fn accumulating_topic_keeps_everything() {
    let mut state = Every::default();
    state.apply(vec![Every::update().history(vec![1]), Every::update().history(vec![2, 3])]).unwrap();
    state.end_step(&ChannelSet::new());
    state.apply(vec![Every::update().history(vec![4])]).unwrap();
    assert_eq!(state.history, [1, 2, 3, 4]);
}

#[test]
fn untracked_is_never_serialized() {
    let mut state = Every::default();
    state.apply(vec![Every::update().scratch(7)]).unwrap();
    assert_eq!(state.scratch, 7);
    assert_eq!(state.channel_to_json(index("scratch")).unwrap(), None);
    let err = state.apply(vec![Every::update().scratch(1), Every::update().scratch(2)]).unwrap_err();
    assert_eq!(err, UpdateError::ConcurrentUpdate { key: "scratch".to_owned(), writers: vec![] });
}

#[test]
fn apply_reports_the_channels_written() {
    let mut state = Every::default();
    let changed = state.apply(vec![Every::update().total(0), Every::update().messages(vec![])]).unwrap();
    assert_eq!(changed.iter().collect::<Vec<_>>(), [index("total"), index("messages")]);
}

#[test]
fn channels_round_trip_through_json() {
    let mut state = Every::default();
    state
        .apply(vec![
            Every::update()
                .question("q")
                .items(vec![Item { name: "pen".to_owned(), qty: 2 }])
                .messages(vec![Message::human("hi").with_id("m1")])
                .flash("f")
                .events(vec!["e".to_owned()]),
        ])
        .unwrap();
    let mut restored = Every::default();
    for i in 0..state.channels().len() {
        if let Some(value) = state.channel_to_json(i).unwrap() {
            restored.channel_from_json(i, value).unwrap();
        }
    }
    assert_eq!(restored, Every { scratch: 0, ..state.clone() });
    assert_eq!(state.channel_to_json(index("items")).unwrap(), Some(json!([{"name": "pen", "qty": 2}])));
    assert_eq!(Every::default().channel_to_json(index("events")).unwrap(), None, "an empty topic is absent");
    assert_eq!(
        Every::default().channel_to_json(index("flash")).unwrap(),
        None,
        "an empty ephemeral is absent"
    );
}

#[test]
fn null_restores_a_channel_to_empty() {
    let mut state =
        Every { count: 4, flash: Some("x".to_owned()), log: vec!["a".to_owned()], ..Every::default() };
    for name in ["count", "flash", "log", "messages"] {
        state.channel_from_json(index(name), serde_json::Value::Null).unwrap();
    }
    assert_eq!(state, Every::default());
}

#[test]
fn channel_from_json_errors_name_the_key_and_the_path() {
    let mut state = Every::default();
    let err = state
        .channel_from_json(index("items"), json!([{"name": "pen", "qty": 1}, {"name": "ink", "qty": "lots"}]))
        .unwrap_err();
    let UpdateError::Serialization { key, message } = &err else { panic!("{err:?}") };
    assert_eq!(key, "items");
    assert!(message.contains("[1].qty"), "{message}");
    assert!(err.to_string().starts_with("at key 'items': invalid type: string \"lots\""), "{err}");
    assert!(matches!(state.channel_from_json(99, json!(1)), Err(UpdateError::UnknownChannel { .. })));
}

#[test]
fn updates_round_trip_through_json_with_overwrites() {
    let state = Every::default();
    let update = Every::update().count(2).overwrite_log(vec!["x".to_owned()]).total(3);
    let writes = state.update_to_json(&update).unwrap();
    assert_eq!(
        writes,
        [
            (index("count"), json!(2)),
            (index("total"), json!(3)),
            (index("log"), json!({"__overwrite__": ["x"]}))
        ]
    );
    let back = state.update_from_json(writes).unwrap();
    let mut a = Every { log: vec!["old".to_owned()], ..Every::default() };
    let mut b = a.clone();
    a.apply(vec![update]).unwrap();
    b.apply(vec![back]).unwrap();
    assert_eq!(a, b);
    assert_eq!(b.log, ["x"]);
}

#[test]
fn update_from_json_coerces_message_likes_and_topic_items() {
    let state = Every::default();
    let update = state
        .update_from_json(vec![
            (index("messages"), json!(["hello", ["assistant", "hi"], {"role": "user", "content": "ok"}])),
            (index("events"), json!("single")),
        ])
        .unwrap();
    let messages = update.messages.unwrap();
    assert_eq!(messages, [Message::human("hello"), Message::ai("hi"), Message::human("ok")]);
    assert_eq!(update.events.unwrap(), ["single"]);
}

#[test]
fn update_from_json_rejects_a_single_value_channel_written_twice() {
    let state = Every::default();
    let err = state.update_from_json(vec![(1, json!(1)), (1, json!(2))]).unwrap_err();
    assert_eq!(err, UpdateError::ConcurrentUpdate { key: "count".to_owned(), writers: vec![] });
    let err = state.update_from_json(vec![(index("count"), json!("three"))]).unwrap_err();
    assert!(err.to_string().starts_with("at key 'count': invalid type: string \"three\""), "{err}");
}

#[test]
fn update_serde_skips_absent_fields_and_keeps_overwrites() {
    let update = Every::update().question("q").overwrite_total(7);
    let json = serde_json::to_value(&update).unwrap();
    assert_eq!(json, json!({"question": "q", "total": {"__overwrite__": 7}}));
    let back: EveryUpdate =
        serde_json::from_value(json!({"question": "q", "total": {"__overwrite__": 7}, "zzz": 1})).unwrap();
    assert_eq!(back.question.as_deref(), Some("q"));
    assert_eq!(back.total, Some(7));
    assert!(back.__overwrite.contains(index("total")));
    let err = serde_json::from_value::<EveryUpdate>(json!({"count": "x"})).unwrap_err();
    assert!(err.to_string().contains("at key 'count'"), "{err}");
}

#[test]
fn debug_shows_the_written_fields_and_overwrites() {
    let update = Every::update().count(1).overwrite_total(2);
    assert_eq!(format!("{update:?}"), "EveryUpdate { count: 1, total: Overwrite(2) }");
}

#[test]
fn a_whole_state_converts_into_an_update_of_every_field() {
    let state = Every { count: 2, log: vec!["a".to_owned()], flash: None, ..Every::default() };
    let update = EveryUpdate::from(state);
    assert_eq!(update.count, Some(2));
    assert_eq!(update.log, Some(vec!["a".to_owned()]));
    assert_eq!(update.flash, None, "an empty ephemeral writes nothing");
    assert_eq!(update.events, None, "an empty topic writes nothing");
    assert_eq!(update.messages, Some(vec![]));
}

#[test]
fn updates_and_states_are_node_outputs() {
    let out = IntoNodeOutput::<Every>::into_node_output(Every::update().count(1)).unwrap();
    assert!(matches!(out, NodeOutput::Update(u) if u.count == Some(1)));
    let out = IntoNodeOutput::<Every>::into_node_output(Every { count: 5, ..Every::default() }).unwrap();
    assert!(matches!(out, NodeOutput::Update(u) if u.count == Some(5)));
}

#[test]
fn prepare_update_gives_messages_ids_at_write_time() {
    let state = Every::default();
    let mut update = Every::update().messages(vec![Message::ai("a"), Message::ai("b").with_id("keep")]);
    state.prepare_update(&mut update);
    let messages = update.messages.as_ref().unwrap();
    assert!(messages[0].id().is_some_and(|id| id.len() == 36));
    assert_eq!(messages[1].id(), Some("keep"));
    // The ids survive the JSON form, so a replayed write applies the same messages.
    let replayed = state.update_from_json(state.update_to_json(&update).unwrap()).unwrap();
    assert_eq!(replayed.messages, update.messages);
}

mod visibility {
    use weft_graph::State;

    #[derive(State, Debug, Clone, Default)]
    pub(crate) struct Inner {
        pub(crate) n: u8,
        r#type: String,
    }

    pub(crate) fn make() -> InnerUpdate {
        Inner::update().n(1).r#type("kind")
    }
}

#[test]
fn the_update_type_has_the_state_visibility_and_raw_names_lose_their_prefix() {
    let update = visibility::make();
    assert_eq!(update.n, Some(1));
    assert_eq!(serde_json::to_value(&update).unwrap(), json!({"n": 1, "type": "kind"}));
}

#[derive(State, Debug, Clone, Default, PartialEq)]
pub struct Flags {
    approved: Option<bool>,
    retries: Option<u32>,
    done: bool,
    level: u8,
    ratio: Option<f32>,
    note: Option<String>,
}

#[test]
fn setters_take_values_that_convert_into_the_field_option_bool_included() {
    // `Option` fields take the bare value, `None` or `Some(..)`; numbers take literals of their own type.
    let update =
        Flags::update().approved(true).retries(3).done(true).level(7).ratio(0.5).note("ok".to_owned());
    let mut state = Flags::default();
    state.apply(vec![update]).unwrap();
    assert_eq!(
        state,
        Flags {
            approved: Some(true),
            retries: Some(3),
            done: true,
            level: 7,
            ratio: Some(0.5),
            note: Some("ok".to_owned())
        }
    );
    state.apply(vec![Flags::update().approved(None).retries(Some(4))]).unwrap();
    assert_eq!((state.approved, state.retries), (None, Some(4)));
}
