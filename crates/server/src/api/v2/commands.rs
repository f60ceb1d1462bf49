//! `POST /threads/{thread_id}/commands`: one protocol command, answered at once. Each request stands alone
//! (no session is kept between requests, as in langgraph-api): `run.start` and `input.respond` make runs;
//! `subscription.subscribe` checks its filter and names a subscription that nothing follows over HTTP (the
//! event stream carries its own filter); the commands that need a bound run (`agent.getTree`,
//! `subscription.reconnect`, `subscription.unsubscribe` of an unknown id) answer as the reference's
//! stateless transport does. Any other method is `unknown_command`, as in langgraph-api 0.16.7, which no
//! longer serves `state.get`, `state.listCheckpoints`, `state.fork` or `input.inject`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::filter::Filter;
use crate::api::guard::Caller;
use crate::api::requests::RunCreate;
use crate::app::{App, is_uuid, new_id};
use crate::auth::Action;
use crate::error::ApiError;
use crate::model::ThreadStatus;

/// The protocol's error answer.
pub(crate) fn error(id: &Value, code: &str, message: impl Into<String>) -> Value {
    json!({"type": "error", "id": id, "error": code, "message": message.into()})
}

/// The protocol's success answer (`applied_through_seq` is `seq`).
pub(crate) fn success(id: &Value, result: Value, seq: u64) -> Value {
    json!({"type": "success", "id": id, "result": result, "meta": {"applied_through_seq": seq}})
}

/// An API error as the reference's command errors quote one (`422: Invalid thread ID`).
fn quoted(e: &ApiError) -> String {
    format!("{}: {}", e.status.as_u16(), e.detail)
}

/// The concurrency strategies `run.start` takes (`enqueue` otherwise).
const STRATEGIES: [&str; 4] = ["reject", "rollback", "interrupt", "enqueue"];

/// Python's `repr` of a string, as the reference quotes a bad checkpoint id.
fn repr(s: &str) -> String {
    if s.contains('\'') && !s.contains('"') {
        format!("\"{s}\"")
    } else {
        format!("'{}'", s.replace('\'', "\\'"))
    }
}

/// The fork target in `config.configurable.checkpoint_id`, checked.
fn checkpoint_id(params: &Value) -> Result<Option<String>, String> {
    let Some(id) = params.pointer("/config/configurable/checkpoint_id").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let Some(id) = id.as_str().filter(|s| !s.trim().is_empty()) else {
        return Err("config.configurable.checkpoint_id must be a non-empty string.".to_owned());
    };
    if !is_uuid(id) {
        return Err(format!("Invalid config.configurable.checkpoint_id: {}.", repr(id)));
    }
    Ok(Some(id.to_owned()))
}

/// Checks `langsmith_tracer` (an object of `project_name` and `example_id` strings).
fn check_tracer(params: &Value) -> Result<(), String> {
    let Some(tracer) = params.get("langsmith_tracer").filter(|v| !v.is_null()) else { return Ok(()) };
    let Some(tracer) = tracer.as_object() else {
        return Err("langsmith_tracer must be an object.".to_owned());
    };
    let mut unknown: Vec<&str> =
        tracer.keys().map(String::as_str).filter(|k| *k != "project_name" && *k != "example_id").collect();
    if !unknown.is_empty() {
        unknown.sort_unstable();
        let listed: Vec<String> = unknown.iter().map(|k| repr(k)).collect();
        return Err(format!("langsmith_tracer has unsupported fields: [{}].", listed.join(", ")));
    }
    match tracer.iter().find(|(_, v)| !v.is_string()) {
        Some((key, _)) => Err(format!("langsmith_tracer.{key} must be a string.")),
        None => Ok(()),
    }
}

/// The interrupts pending on the thread (by id), waiting up to 5 s for a busy thread to settle; `None`
/// when the thread cannot be read.
async fn pending_interrupts(app: &App, caller: &Caller, thread_id: &str) -> Option<Vec<String>> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let thread = app.thread_for(caller, Action::Read, thread_id).await.ok()?;
        let ids: Vec<String> = thread
            .interrupts
            .values()
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(|i| i.get("id").and_then(Value::as_str).map(str::to_owned))
            .collect();
        if !ids.is_empty() || thread.status != ThreadStatus::Busy || Instant::now() >= deadline {
            return Some(ids);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Makes the run of a `run.start` (or of an `input.respond`, with `resume` set): resumable, streaming
/// every mode the protocol reads, with subgraphs.
async fn make_run(
    app: &Arc<App>,
    caller: &Caller,
    thread_id: &str,
    assistant_id: &str,
    params: &Value,
    resume: Option<Value>,
) -> Result<String, ApiError> {
    let checkpoint = checkpoint_id(params).map_err(ApiError::unprocessable)?;
    let strategy = params
        .get("multitaskStrategy")
        .and_then(Value::as_str)
        .filter(|s| STRATEGIES.contains(s))
        .unwrap_or("enqueue");
    let input = params.get("input").cloned().unwrap_or(Value::Null);
    let resume = match resume {
        Some(resume) => Some(resume),
        None if !input.is_null() => {
            let pending = pending_interrupts(app, caller, thread_id).await.unwrap_or_default();
            (!pending.is_empty()).then(|| input.clone())
        }
        None => None,
    };
    let mut body = json!({
        "assistant_id": assistant_id,
        "input": if resume.is_some() { Value::Null } else { input },
        "config": params.get("config").filter(|c| c.is_object()).cloned().unwrap_or_else(|| json!({})),
        "metadata": params.get("metadata").filter(|m| m.is_object()).cloned(),
        "checkpoint_id": checkpoint,
        "stream_mode": ["values", "updates", "messages-tuple", "custom", "tasks", "checkpoints", "tools"],
        "stream_subgraphs": true,
        "stream_resumable": true,
        "on_completion": "keep",
        "if_not_exists": "create",
        "multitask_strategy": strategy,
    });
    if let (Some(resume), Some(b)) = (resume, body.as_object_mut()) {
        let mut command = Map::from_iter([("resume".to_owned(), resume)]);
        for key in ["update", "goto"] {
            if let Some(v) = params.get(key).filter(|v| !v.is_null()) {
                command.insert(key.to_owned(), v.clone());
            }
        }
        b.insert("command".to_owned(), Value::Object(command));
    }
    let body: RunCreate = serde_json::from_value(body).map_err(|e| ApiError::unprocessable(e.to_string()))?;
    let mut created = crate::runs::create(app, caller, Some(thread_id), body, false, false).await?;
    created.schedule(app);
    Ok(created.record.run.run_id.clone())
}

async fn run_start(
    app: &Arc<App>,
    caller: &Caller,
    thread_id: &str,
    id: &Value,
    params: &Value,
    seq: u64,
) -> Value {
    let Some(assistant_id) = params.get("assistant_id").and_then(Value::as_str).filter(|s| !s.is_empty())
    else {
        return error(id, "invalid_argument", "run.start requires an assistant_id.");
    };
    if let Err(message) = checkpoint_id(params).and_then(|_| check_tracer(params)) {
        return error(id, "invalid_argument", message);
    }
    match make_run(app, caller, thread_id, assistant_id, params, None).await {
        Ok(run_id) => success(id, json!({"run_id": run_id}), seq),
        Err(e) => error(id, "unknown_error", quoted(&e)),
    }
}

/// The `(interrupt_id, response)` pairs of an `input.respond` (one, or a `responses` batch).
fn respond_entries(params: &Value) -> Result<Vec<(String, Value)>, &'static str> {
    let namespace_ok = |v: Option<&Value>| {
        v.is_none_or(|ns| ns.as_array().is_some_and(|segments| segments.iter().all(Value::is_string)))
    };
    if let Some(list) = params.get("responses").and_then(Value::as_array) {
        if list.is_empty() {
            return Err("input.respond requires at least one response.");
        }
        let mut entries = Vec::new();
        for entry in list {
            let Some(entry) = entry.as_object() else {
                return Err("input.respond responses entries must be objects.");
            };
            let Some(interrupt) = entry.get("interrupt_id").and_then(Value::as_str) else {
                return Err("input.respond responses entries require an interrupt_id.");
            };
            if !namespace_ok(entry.get("namespace")) {
                return Err("input.respond requires namespace to be a list of strings.");
            }
            entries.push((interrupt.to_owned(), entry.get("response").cloned().unwrap_or(Value::Null)));
        }
        return Ok(entries);
    }
    let Some(interrupt) = params.get("interrupt_id").and_then(Value::as_str) else {
        return Err("input.respond requires an interrupt_id.");
    };
    if !namespace_ok(params.get("namespace")) {
        return Err("input.respond requires namespace to be a list of strings.");
    }
    Ok(vec![(interrupt.to_owned(), params.get("response").cloned().unwrap_or(Value::Null))])
}

async fn input_respond(
    app: &Arc<App>,
    caller: &Caller,
    thread_id: &str,
    id: &Value,
    params: &Value,
    seq: u64,
) -> Value {
    let entries = match respond_entries(params) {
        Ok(entries) => entries,
        Err(message) => return error(id, "invalid_argument", message),
    };
    if let Some(pending) = pending_interrupts(app, caller, thread_id).await {
        if let Some((missing, _)) = entries.iter().find(|(i, _)| !pending.contains(i)) {
            return error(
                id,
                "no_such_interrupt",
                format!("Unknown or already-consumed interrupt: {missing}"),
            );
        }
    }
    let thread = app.thread_for(caller, Action::Read, thread_id).await.ok();
    let assistant = thread.as_ref().and_then(|t| t.metadata.get("assistant_id")).and_then(Value::as_str);
    let Some(assistant_id) = assistant.map(str::to_owned) else {
        return error(id, "no_such_run", "No interrupted run is bound to this thread.");
    };
    let resume: Map<String, Value> = entries.into_iter().collect();
    match make_run(app, caller, thread_id, &assistant_id, params, Some(Value::Object(resume))).await {
        Ok(_) => success(id, json!({}), seq),
        Err(e) => error(id, "unknown_error", quoted(&e)),
    }
}

/// Answers one command (its `id` an integer and its `method` a string, checked by the caller).
pub(crate) async fn handle(app: &Arc<App>, caller: &Caller, thread_id: &str, command: &Value) -> Value {
    handle_at(app, caller, thread_id, command, 0).await
}

/// [`handle`], for a connection whose events have reached `seq` (the answer's `applied_through_seq`).
pub(crate) async fn handle_at(
    app: &Arc<App>,
    caller: &Caller,
    thread_id: &str,
    command: &Value,
    seq: u64,
) -> Value {
    let id = command.get("id").cloned().unwrap_or(Value::Null);
    let method = command.get("method").and_then(Value::as_str).unwrap_or_default();
    let empty = json!({});
    let params = command.get("params").filter(|p| p.is_object()).unwrap_or(&empty);
    match method {
        "run.start" => run_start(app, caller, thread_id, &id, params, seq).await,
        "input.respond" => input_respond(app, caller, thread_id, &id, params, seq).await,
        "subscription.subscribe" => match Filter::from_params(params) {
            Some(_) => success(&id, json!({"subscription_id": new_id(), "replayed_events": 0}), 0),
            None if params.get("channels").and_then(Value::as_array).is_some_and(|c| !c.is_empty()) => {
                error(&id, "invalid_argument", "subscription.subscribe received an unsupported channel.")
            }
            None => {
                error(&id, "invalid_argument", "subscription.subscribe requires a non-empty channels array.")
            }
        },
        "subscription.unsubscribe" => match params.get("subscription_id").and_then(Value::as_str) {
            Some(sub) => error(&id, "no_such_subscription", format!("Unknown subscription: {sub}")),
            None => error(&id, "invalid_argument", "subscription.unsubscribe requires a subscription_id."),
        },
        "agent.getTree" | "subscription.reconnect" => {
            error(&id, "no_such_run", "No active run is bound to this thread.")
        }
        other => error(&id, "unknown_command", format!("Unknown protocol command: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_start_params_are_checked_as_the_reference_checks_them() {
        assert_eq!(checkpoint_id(&json!({})), Ok(None));
        let bad = json!({"config": {"configurable": {"checkpoint_id": "x"}}});
        assert_eq!(checkpoint_id(&bad), Err("Invalid config.configurable.checkpoint_id: 'x'.".to_owned()));
        let empty = json!({"config": {"configurable": {"checkpoint_id": " "}}});
        assert!(checkpoint_id(&empty).is_err());
        assert!(check_tracer(&json!({"langsmith_tracer": {"project_name": "p"}})).is_ok());
        assert_eq!(
            check_tracer(&json!({"langsmith_tracer": {"b": 1, "a": 2}})),
            Err("langsmith_tracer has unsupported fields: ['a', 'b'].".to_owned())
        );
    }

    #[test]
    fn respond_takes_one_or_a_batch() {
        let one = respond_entries(&json!({"interrupt_id": "i", "response": 1})).unwrap();
        assert_eq!(one, vec![("i".to_owned(), json!(1))]);
        let many = respond_entries(
            &json!({"responses": [{"interrupt_id": "a"}, {"interrupt_id": "b", "response": 2}]}),
        );
        assert_eq!(many.unwrap().len(), 2);
        assert!(respond_entries(&json!({"responses": []})).is_err());
        assert!(respond_entries(&json!({"interrupt_id": "i", "namespace": "x"})).is_err());
        assert!(respond_entries(&json!({})).is_err());
    }
}
