#![allow(clippy::unwrap_used, missing_docs)]

use std::collections::HashSet;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use weft_graph::messages::{Message, MessagesState, REMOVE_ALL_MESSAGES};
use weft_graph::{Messages, State, UpdateError, add_messages};

/// LangGraph's `add_messages`, written the plain way (copy the list, rebuild the index): the model the
/// in-place version must match. Every message of `right` has an id already.
fn reference(left: &[Message], right: &[Message]) -> Result<Vec<Message>, String> {
    let is_remove_all = |m: &Message| matches!(m, Message::Remove(r) if r.id == REMOVE_ALL_MESSAGES);
    if let Some(last) = right.iter().rposition(is_remove_all) {
        return Ok(right[last + 1..].to_vec());
    }
    let mut merged = left.to_vec();
    let mut by_id: std::collections::HashMap<String, usize> =
        merged.iter().enumerate().map(|(i, m)| (m.id().unwrap().to_owned(), i)).collect();
    let mut to_remove = HashSet::new();
    for m in right {
        let id = m.id().unwrap().to_owned();
        match by_id.get(&id) {
            Some(&i) => {
                if matches!(m, Message::Remove(_)) {
                    to_remove.insert(id);
                } else {
                    to_remove.remove(&id);
                    merged[i] = m.clone();
                }
            }
            None => {
                if matches!(m, Message::Remove(_)) {
                    return Err(format!(
                        "attempting to delete a message with an id that doesn't exist ('{id}')"
                    ));
                }
                by_id.insert(id, merged.len());
                merged.push(m.clone());
            }
        }
    }
    Ok(merged.into_iter().filter(|m| !to_remove.contains(m.id().unwrap())).collect())
}

#[derive(Debug, Clone)]
enum Op {
    Add(Option<u8>, u8),
    Remove(u8),
    RemoveAll,
}

fn op(remove_all: bool) -> BoxedStrategy<Op> {
    let add = (proptest::option::of(0u8..8), any::<u8>()).prop_map(|(id, text)| Op::Add(id, text));
    let remove = (0u8..8).prop_map(Op::Remove);
    if remove_all {
        prop_oneof![6 => add, 2 => remove, 1 => Just(Op::RemoveAll)].boxed()
    } else {
        prop_oneof![3 => add, 1 => remove].boxed()
    }
}

fn message(op: &Op) -> Message {
    match op {
        Op::Add(id, text) => {
            let m =
                if text % 2 == 0 { Message::human(text.to_string()) } else { Message::ai(text.to_string()) };
            match id {
                Some(id) => m.with_id(id.to_string()),
                None => m,
            }
        }
        Op::Remove(id) => Message::remove(id.to_string()),
        Op::RemoveAll => Message::remove(REMOVE_ALL_MESSAGES),
    }
}

fn batch(ops: &[Op]) -> Vec<Message> {
    let mut messages: Vec<Message> = ops.iter().map(message).collect();
    Messages::assign_ids(&mut messages);
    messages
}

fn assert_index_consistent(list: &Messages) {
    for (i, m) in list.iter().enumerate() {
        let id = m.id().unwrap();
        let last = list.iter().rposition(|other| other.id() == Some(id)).unwrap();
        assert_eq!(list.position(id), Some(last), "index of {id} at {i}");
    }
}

proptest! {
    #[test]
    fn add_messages_matches_langgraph(batches in prop::collection::vec(prop::collection::vec(op(true), 0..6), 0..12)) {
        let mut list = Messages::new();
        let mut model: Vec<Message> = Vec::new();
        for ops in &batches {
            let right = batch(ops);
            let expected = reference(&model, &right);
            let before = list.clone();
            let got = add_messages(&mut list, right);
            match expected {
                Ok(next) => {
                    prop_assert_eq!(got, Ok(()));
                    model = next;
                }
                Err(message) => {
                    prop_assert_eq!(got, Err(message));
                    prop_assert_eq!(&list, &before, "a failed write changes nothing");
                }
            }
            prop_assert_eq!(list.as_slice(), model.as_slice());
            assert_index_consistent(&list);
        }
    }

    #[test]
    fn no_duplicate_ids_after_any_writes(batches in prop::collection::vec(prop::collection::vec(op(false), 0..6), 0..12)) {
        let mut list = Messages::new();
        for ops in &batches {
            let _ = add_messages(&mut list, batch(ops));
            let ids: HashSet<&str> = list.iter().map(|m| m.id().unwrap()).collect();
            prop_assert_eq!(ids.len(), list.len());
            prop_assert!(list.iter().all(|m| !matches!(m, Message::Remove(_))));
        }
    }

    #[test]
    fn a_batch_with_distinct_ids_equals_its_writes_one_by_one(
        start in prop::collection::vec(any::<u8>(), 0..6),
        writes in prop::collection::vec((0u8..12, any::<bool>(), any::<u8>()), 0..8),
    ) {
        let left: Vec<Message> = start.iter().enumerate().map(|(i, t)| Message::human(t.to_string()).with_id(i.to_string())).collect();
        let mut seen = HashSet::new();
        let right: Vec<Message> = writes
            .into_iter()
            .filter(|(id, _, _)| seen.insert(*id))
            .filter(|(id, remove, _)| !remove || usize::from(*id) < left.len())
            .map(|(id, remove, text)| if remove { Message::remove(id.to_string()) } else { Message::ai(text.to_string()).with_id(id.to_string()) })
            .collect();
        let mut whole = Messages::from(left.clone());
        add_messages(&mut whole, right.clone()).unwrap();
        let mut single = Messages::from(left);
        for m in right {
            add_messages(&mut single, vec![m]).unwrap();
        }
        prop_assert_eq!(whole, single);
    }

    #[test]
    fn remove_all_then_writes_leaves_only_those_writes(
        start in prop::collection::vec(any::<u8>(), 0..6),
        tail in prop::collection::vec(any::<u8>(), 0..6),
    ) {
        let mut list: Messages = start.iter().map(|t| Message::human(t.to_string())).collect();
        let tail: Vec<Message> = tail.iter().map(|t| Message::ai(t.to_string())).collect();
        let mut right = vec![Message::remove(REMOVE_ALL_MESSAGES)];
        right.extend(tail.iter().cloned());
        add_messages(&mut list, right).unwrap();
        prop_assert_eq!(list.len(), tail.len());
        prop_assert!(list.iter().zip(&tail).all(|(a, b)| a.text() == b.text() && a.id().is_some()));
    }
}

fn sum(total: &mut i64, value: i64) {
    *total += value;
}

#[derive(State, Debug, Clone, Default, PartialEq)]
struct Counter {
    last: i64,
    #[state(append)]
    log: Vec<i64>,
    #[state(reducer = sum)]
    total: i64,
}

fn write() -> impl Strategy<Value = CounterUpdate> {
    (
        proptest::option::of(any::<i32>()),
        proptest::option::of(prop::collection::vec(any::<i32>(), 0..3)),
        any::<i32>(),
    )
        .prop_map(|(last, log, total)| {
            let mut update = Counter::update().total(i64::from(total));
            update.last = last.map(i64::from);
            update.log = log.map(|l| l.into_iter().map(i64::from).collect());
            update
        })
}

proptest! {
    #[test]
    fn a_step_folds_its_updates_in_the_given_order(updates in prop::collection::vec(write(), 0..6)) {
        let mut state = Counter { last: 1, log: vec![7], total: 3 };
        let lasts: Vec<i64> = updates.iter().filter_map(|u| u.last).collect();
        let expected_log: Vec<i64> = std::iter::once(7).chain(updates.iter().flat_map(|u| u.log.clone().unwrap_or_default())).collect();
        let expected_total = 3 + updates.iter().map(|u| u.total.unwrap()).sum::<i64>();
        let mut again = state.clone();
        let result = state.apply(updates.clone());
        prop_assert_eq!(&result, &again.apply(updates), "same updates, same outcome");
        if lasts.len() > 1 {
            prop_assert_eq!(result, Err(UpdateError::ConcurrentUpdate { key: "last".to_owned(), writers: vec![] }));
        } else {
            result.unwrap();
            prop_assert_eq!(state.last, lasts.first().copied().unwrap_or(1));
            prop_assert_eq!(&state.log, &expected_log);
            prop_assert_eq!(state.total, expected_total);
        }
    }

    #[test]
    fn reducer_writes_give_the_same_result_in_one_step_or_many(updates in prop::collection::vec(write(), 0..6)) {
        let updates: Vec<CounterUpdate> = updates.into_iter().map(|mut u| { u.last = None; u }).collect();
        let mut one = Counter::default();
        one.apply(updates.clone()).unwrap();
        let mut many = Counter::default();
        for update in updates {
            many.apply(vec![update]).unwrap();
        }
        prop_assert_eq!(one, many);
    }
}

/// Runs `steps` supersteps of LangGraph's messages1000 workload: a node sees a clone of the state, returns
/// one id-less AI message, and the write is prepared then applied once the node's clone is gone.
fn run_steps(state: &mut MessagesState, steps: usize) -> Duration {
    let start = Instant::now();
    for _ in 0..steps {
        let seen = state.clone();
        let mut update =
            MessagesState::update().messages(vec![Message::ai(format!("m{}", seen.messages.len()))]);
        drop(seen);
        state.prepare_update(&mut update);
        state.apply(vec![update]).unwrap();
    }
    start.elapsed()
}

#[test]
fn a_step_costs_the_same_on_a_long_thread_as_on_a_short_one() {
    const STEPS: usize = 2_000;
    let mut short_best = Duration::MAX;
    let mut long_best = Duration::MAX;
    for _ in 0..3 {
        let mut state = MessagesState::default();
        short_best = short_best.min(run_steps(&mut state, STEPS));
        run_steps(&mut state, 8_000);
        long_best = long_best.min(run_steps(&mut state, STEPS));
        assert_eq!(state.messages.len(), 12_000);
        assert_eq!(state.messages[11_999].text(), "m11999");
    }
    if std::env::var_os("WEFT_PRINT_TIMINGS").is_some() {
        eprintln!("{STEPS} steps: {short_best:?} from empty, {long_best:?} at 10,000 messages");
    }
    // Copying the list per step would make the long run hundreds of times slower.
    assert!(
        long_best < short_best * 4,
        "{STEPS} steps took {long_best:?} at 10,000 messages against {short_best:?} from empty"
    );
}
