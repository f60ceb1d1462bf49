//! Assistant routes: create, get, patch, delete, search, count, graph, subgraphs, schemas, versions,
//! latest.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};
use weft_graph::Xray;
use weft_graph::erased::ErasedGraph;

use super::body::read;
use super::guard::{Access, Caller};
use super::reply::{empty, ok, selected_page};
use super::requests::{
    ASSISTANT_CREATE, ASSISTANT_PATCH, ASSISTANT_SEARCH, AssistantCreate, AssistantPatch, AssistantSearch,
    LATEST, Latest, VERSIONS, Versions,
};
use crate::app::{App, contains, now, object, require_uuid};
use crate::auth::{Action, Resource};
use crate::error::{ApiError, ApiResult};
use crate::graphs::channels_schema;
use crate::model::Assistant;
use crate::storage::{Change, Key};

type AppState = State<Arc<App>>;

const BOTH: &str = "Cannot specify both configurable and context. Prefer setting context alone. Context was introduced \
                    in LangGraph 0.6.0 and is the long term planned replacement for configurable.";

type Object = Map<String, Value>;

/// Keeps `config.configurable` and `context` the same, as LangGraph does; giving both is an error.
/// Returns the config and the context (none when neither was given).
fn config_and_context(
    config: Option<Object>,
    context: Option<Object>,
) -> ApiResult<(Object, Option<Object>)> {
    let mut config = config.unwrap_or_default();
    let configurable = object(config.get("configurable"));
    let context = context.filter(|c| !c.is_empty());
    match (configurable.is_empty(), context) {
        (false, Some(_)) => Err(ApiError::bad_request(BOTH)),
        (false, None) => Ok((config, Some(configurable))),
        (true, Some(context)) => {
            config.insert("configurable".into(), Value::Object(context.clone()));
            Ok((config, Some(context)))
        }
        (true, None) => Ok((config, None)),
    }
}

fn graph_not_found(app: &App, graph_id: &str) -> ApiError {
    ApiError::not_found(format!(
        "Graph '{graph_id}' not found. Expected one of: {}",
        app.graphs.sorted_ids_repr()
    ))
}

/// `POST /assistants`.
pub(crate) async fn create(State(app): AppState, caller: Caller, body: Body) -> ApiResult<Response> {
    let (mut body, _) = read::<AssistantCreate>(body, app.limits.body_bytes, &ASSISTANT_CREATE).await?;
    if let Some(id) = &body.assistant_id {
        require_uuid(id, "assistant")?;
    }
    let (config, context) = config_and_context(body.config, body.context)?;
    if app.graphs.get(&body.graph_id).is_none() {
        return Err(graph_not_found(&app, &body.graph_id));
    }
    let assistant_id = body
        .assistant_id
        .as_deref()
        .map_or_else(|| uuid::Uuid::new_v4().to_string(), crate::app::canonical_id);
    let mut value = json!({
        "assistant_id": assistant_id, "graph_id": body.graph_id, "config": config, "context": context,
        "metadata": body.metadata, "if_exists": body.if_exists, "name": body.name,
    });
    let access = assistant_access(&app, &caller, Action::Create, &mut value).await?;
    body.metadata = value.get("metadata").and_then(Value::as_object).cloned();
    let mut records = app.records.lock(Key::Assistant(&assistant_id)).await?;
    if let Some(existing) = records.assistants.get(&assistant_id) {
        if !access.allows(&existing.metadata) {
            return Err(ApiError::conflict(format!("Assistant {assistant_id} already exists")));
        }
        if body.if_exists.as_deref() == Some("do_nothing") {
            return Ok(ok(existing));
        }
        return Err(ApiError::conflict(format!("Assistant {assistant_id} already exists")));
    }
    let stamp = now();
    let assistant = Assistant {
        assistant_id,
        graph_id: body.graph_id,
        config: Value::Object(config),
        context: Value::Object(context.unwrap_or_default()),
        metadata: body.metadata.unwrap_or_default(),
        name: body.name.unwrap_or_else(|| "Untitled".to_owned()),
        created_at: stamp.clone(),
        updated_at: stamp,
        version: 1,
        description: body.description,
    };
    records
        .commit(vec![Change::Assistant(assistant.clone()), Change::Version(assistant.version_record())])
        .await?;
    Ok(ok(&assistant))
}

/// What the caller may touch among assistants for `action`; `value` is the request as the hook sees it.
async fn assistant_access(
    app: &App,
    caller: &Caller,
    action: Action,
    value: &mut Value,
) -> ApiResult<Access> {
    app.authorize(caller, Resource::Assistants, action, value).await
}

/// The assistant of a path id (a UUID) that the caller may read, or LangGraph's errors (a 404 for one it
/// may not, as for one that does not exist).
async fn existing(app: &App, caller: &Caller, id: &str) -> ApiResult<Assistant> {
    require_uuid(id, "assistant")?;
    let access = assistant_access(app, caller, Action::Read, &mut json!({"assistant_id": id})).await?;
    let assistant = app.assistant(id).await?;
    if access.allows(&assistant.metadata) { Ok(assistant) } else { Err(ApiError::not_found("Not Found")) }
}

/// `GET /assistants/{assistant_id}`.
pub(crate) async fn get(State(app): AppState, caller: Caller, Path(id): Path<String>) -> ApiResult<Response> {
    Ok(ok(&existing(&app, &caller, &id).await?))
}

/// `PATCH /assistants/{assistant_id}`: a new version, made the latest.
pub(crate) async fn patch(
    State(app): AppState,
    caller: Caller,
    Path(id): Path<String>,
    body: Body,
) -> ApiResult<Response> {
    require_uuid(&id, "assistant")?;
    let (mut body, _) = read::<AssistantPatch>(body, app.limits.body_bytes, &ASSISTANT_PATCH).await?;
    let mut value =
        json!({"assistant_id": id, "graph_id": body.graph_id, "metadata": body.metadata, "name": body.name});
    let access = assistant_access(&app, &caller, Action::Update, &mut value).await?;
    body.metadata = value.get("metadata").and_then(Value::as_object).cloned();
    let (config, context) = config_and_context(body.config, body.context)?;
    if let Some(graph_id) = &body.graph_id {
        if app.graphs.get(graph_id).is_none() {
            return Err(graph_not_found(&app, graph_id));
        }
    }
    let mut records = app.records.lock(Key::Assistant(&id)).await?;
    let Some(mut assistant) = records.assistants.get(&id).filter(|a| access.allows(&a.metadata)).cloned()
    else {
        return Err(ApiError::not_found(format!("Assistant {id} not found")));
    };
    let latest = records.versions.keys().filter(|(a, _)| *a == id).map(|(_, v)| *v).max().unwrap_or(0);
    if let Some(graph_id) = body.graph_id {
        assistant.graph_id = graph_id;
    }
    if !config.is_empty() {
        assistant.config = Value::Object(config);
    }
    if let Some(context) = context {
        assistant.context = Value::Object(context);
    }
    if let Some(metadata) = body.metadata {
        assistant.metadata.extend(metadata);
    }
    if let Some(name) = body.name {
        assistant.name = name;
    }
    if body.description.is_some() {
        assistant.description = body.description;
    }
    assistant.version = latest + 1;
    assistant.updated_at = now();
    records
        .commit(vec![Change::Version(assistant.version_record()), Change::Assistant(assistant.clone())])
        .await?;
    Ok(ok(&assistant))
}

/// `DELETE /assistants/{assistant_id}`: `204`; its versions go too, and its running runs are interrupted.
pub(crate) async fn delete(
    State(app): AppState,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    require_uuid(&id, "assistant")?;
    let access = assistant_access(&app, &caller, Action::Delete, &mut json!({"assistant_id": id})).await?;
    let mut records = app.records.lock(Key::Assistant(&id)).await?;
    if !records.assistants.get(&id).is_some_and(|a| access.allows(&a.metadata)) {
        return Err(ApiError::not_found(format!("Assistant with ID {id} not found")));
    }
    let mut changes = vec![Change::DeleteAssistant(id.clone())];
    changes.extend(
        records.versions.keys().filter(|(a, _)| *a == id).map(|(a, v)| Change::DeleteVersion(a.clone(), *v)),
    );
    let running: Vec<(String, String)> = records
        .live_runs()
        .filter(|r| r.run.assistant_id == id)
        .map(|r| (r.run.thread_id.clone(), r.run.run_id.clone()))
        .collect();
    records.commit(changes).await?;
    drop(records);
    let mut failed = None;
    for (thread_id, run_id) in running {
        let action = crate::runs::CancelAction::Interrupt;
        match crate::runs::cancel(&app, &thread_id, std::slice::from_ref(&run_id), action).await {
            // A run that ended meanwhile has nothing left to cancel.
            Ok(()) | Err(crate::runs::CancelError::NotFound | crate::runs::CancelError::NotActive) => {}
            // The assistant is gone and its other runs cancelled; the caller gets the first failure.
            Err(e) => {
                tracing::error!(thread_id, run_id, error = %e, "cannot cancel a run of a deleted assistant");
                failed.get_or_insert(e);
            }
        }
    }
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(empty(StatusCode::NO_CONTENT)),
    }
}

fn matching<'a>(
    app: &'a [Assistant],
    search: &'a AssistantSearch,
) -> impl Iterator<Item = &'a Assistant> + 'a {
    let metadata = search.metadata.clone().map(Value::Object);
    app.iter().filter(move |a| {
        search.graph_id.as_ref().is_none_or(|g| g.is_empty() || *g == a.graph_id)
            && search.name.as_ref().is_none_or(|n| a.name.to_lowercase().contains(&n.to_lowercase()))
            && metadata.as_ref().is_none_or(|m| contains(&Value::Object(a.metadata.clone()), m))
    })
}

async fn searched(app: &App, caller: &Caller, body: Body) -> ApiResult<(Vec<Assistant>, AssistantSearch)> {
    let (search, mut value) = read::<AssistantSearch>(body, app.limits.body_bytes, &ASSISTANT_SEARCH).await?;
    let access = assistant_access(app, caller, Action::Search, &mut value).await?;
    if let Some(graph_id) = search.graph_id.as_deref().filter(|g| !g.is_empty()) {
        if app.graphs.get(graph_id).is_none() {
            return Err(graph_not_found(app, graph_id));
        }
    }
    let all: Vec<Assistant> = app.records.read().await?.assistants.values().cloned().collect();
    let found: Vec<Assistant> =
        matching(&all, &search).filter(|a| access.allows(&a.metadata)).cloned().collect();
    Ok((found, search))
}

/// `POST /assistants/search`.
pub(crate) async fn search(State(app): AppState, caller: Caller, body: Body) -> ApiResult<Response> {
    let (mut found, search) = searched(&app, &caller, body).await?;
    let ascending = search.sort_order.as_deref().is_some_and(|o| o.eq_ignore_ascii_case("asc"));
    let key = |a: &Assistant| -> String {
        match search.sort_by.as_deref().map(str::to_lowercase).as_deref() {
            Some("assistant_id") => a.assistant_id.clone(),
            Some("graph_id") => a.graph_id.to_lowercase(),
            Some("name") => a.name.to_lowercase(),
            Some("updated_at") => a.updated_at.clone(),
            _ => a.created_at.clone(),
        }
    };
    let explicit = search.sort_by.is_some();
    found.sort_by(|a, b| {
        let order = key(a).cmp(&key(b));
        if explicit && ascending { order } else { order.reverse() }
    });
    let offset = usize::try_from(search.offset.unwrap_or(0)).unwrap_or(0);
    let limit = usize::try_from(search.limit.unwrap_or(10)).unwrap_or(0);
    let total = found.len();
    let items: Vec<Assistant> = found.into_iter().skip(offset).take(limit).collect();
    Ok(selected_page(&items, search.select.as_deref(), total, offset))
}

/// `POST /assistants/count`.
pub(crate) async fn count(State(app): AppState, caller: Caller, body: Body) -> ApiResult<Response> {
    let (found, _) = searched(&app, &caller, body).await?;
    Ok(ok(&found.len()))
}

fn graph_of(app: &App, assistant: &Assistant) -> ApiResult<Arc<dyn ErasedGraph>> {
    app.graphs
        .get(&assistant.graph_id)
        .map(|g| Arc::clone(&g.stateful))
        .ok_or_else(|| graph_not_found(app, &assistant.graph_id))
}

/// `GET /assistants/{assistant_id}/graph[?xray=]`: nodes and edges in LangGraph's JSON form.
pub(crate) async fn graph(
    State(app): AppState,
    caller: Caller,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let xray = match query.get("xray").map(String::as_str) {
        None | Some("" | "false" | "False") => Xray::Off,
        Some("true" | "True") => Xray::All,
        Some(depth) => match depth.parse::<u32>() {
            Ok(n) if n > 0 => Xray::Depth(n),
            _ => return Err(ApiError::unprocessable("Invalid xray value")),
        },
    };
    let assistant = existing(&app, &caller, &id).await?;
    let drawn = graph_of(&app, &assistant)?.get_graph_xray(xray);
    // LangGraph's JSON form names a node by its id (`parent:child` inside a subgraph drawn inline).
    let nodes: Vec<Value> = drawn
        .nodes()
        .map(|n| {
            if n.name == weft_graph::END {
                return json!({"id": n.id});
            }
            let mut node = json!({"id": n.id, "type": "runnable", "data": {"name": n.id}});
            if let (Some(metadata), Value::Object(map)) = (&n.metadata, &mut node) {
                map.insert("metadata".into(), Value::Object(metadata.clone()));
            }
            node
        })
        .collect();
    let edges: Vec<Value> = drawn
        .edges()
        .map(|e| {
            let mut edge = json!({"source": e.source, "target": e.target});
            if let Value::Object(map) = &mut edge {
                if let Some(label) = e.label {
                    map.insert("data".into(), json!(label));
                }
                if e.conditional {
                    map.insert("conditional".into(), json!(true));
                }
            }
            edge
        })
        .collect();
    Ok(ok(&json!({"nodes": nodes, "edges": edges})))
}

fn schemas_of(
    graph: &dyn ErasedGraph,
    graph_id: &str,
    title: &str,
    spec: Option<&crate::graphs::ServerGraph>,
) -> Value {
    let state = match spec {
        Some(spec) => spec.state_schema_or_default(graph_id),
        None => channels_schema(graph, title),
    };
    json!({
        "graph_id": graph_id,
        "input_schema": spec.and_then(|s| s.input_schema.clone()),
        "output_schema": spec.and_then(|s| s.output_schema.clone()),
        "state_schema": state,
        "config_schema": {},
        "context_schema": spec.and_then(|s| s.context_schema.clone()),
    })
}

/// `GET /assistants/{assistant_id}/schemas`.
pub(crate) async fn schemas(
    State(app): AppState,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let assistant = existing(&app, &caller, &id).await?;
    let registered =
        app.graphs.get(&assistant.graph_id).ok_or_else(|| graph_not_found(&app, &assistant.graph_id))?;
    Ok(ok(&schemas_of(registered.stateful.as_ref(), &assistant.graph_id, "", Some(&registered.spec))))
}

fn collect_subgraphs(
    graph: &dyn ErasedGraph,
    graph_id: &str,
    prefix: &str,
    recurse: bool,
    out: &mut Map<String, Value>,
) {
    for (name, sub) in graph.subgraphs() {
        let ns = if prefix.is_empty() { name.clone() } else { format!("{prefix}|{name}") };
        out.insert(ns.clone(), schemas_of(sub.as_ref(), graph_id, &format!("{name}_state"), None));
        if recurse {
            collect_subgraphs(sub.as_ref(), graph_id, &ns, recurse, out);
        }
    }
}

/// `GET /assistants/{assistant_id}/subgraphs[/{namespace}][?recurse=]`: the schemas of the graph's
/// subgraphs, by namespace.
pub(crate) async fn subgraphs(
    State(app): AppState,
    caller: Caller,
    Path(params): Path<Vec<(String, String)>>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let get = |key: &str| params.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let id = get("assistant_id").unwrap_or_default();
    let namespace = get("namespace");
    let assistant = existing(&app, &caller, &id).await?;
    let graph = graph_of(&app, &assistant)?;
    let recurse = query.get("recurse").is_some_and(|r| r == "true" || r == "True");
    let mut all = Map::new();
    collect_subgraphs(graph.as_ref(), &assistant.graph_id, "", recurse || namespace.is_some(), &mut all);
    if let Some(namespace) = namespace {
        all.retain(|ns, _| *ns == namespace);
    }
    Ok(ok(&all))
}

/// `POST /assistants/{assistant_id}/versions`: newest first.
pub(crate) async fn versions(
    State(app): AppState,
    caller: Caller,
    Path(id): Path<String>,
    body: Body,
) -> ApiResult<Response> {
    require_uuid(&id, "assistant")?;
    let (query, _) = read::<Versions>(body, app.limits.body_bytes, &VERSIONS).await?;
    let access = assistant_access(&app, &caller, Action::Read, &mut json!({"assistant_id": id})).await?;
    let records = app.records.read().await?;
    if !records.assistants.get(&id).is_some_and(|a| access.allows(&a.metadata)) {
        return Err(ApiError::not_found(format!("Assistant {id} not found")));
    }
    let filter = query.metadata.map(Value::Object);
    let mut found: Vec<_> = records
        .versions
        .values()
        .filter(|v| v.assistant_id == id)
        .filter(|v| filter.as_ref().is_none_or(|f| contains(&Value::Object(v.metadata.clone()), f)))
        .cloned()
        .collect();
    found.sort_by_key(|v| std::cmp::Reverse(v.version));
    let offset = usize::try_from(query.offset.unwrap_or(0)).unwrap_or(0);
    let limit = usize::try_from(query.limit.unwrap_or(10)).unwrap_or(0);
    let found: Vec<_> = found.into_iter().skip(offset).take(limit).collect();
    Ok(ok(&found))
}

/// `POST /assistants/{assistant_id}/latest`: makes a saved version the current one.
pub(crate) async fn latest(
    State(app): AppState,
    caller: Caller,
    Path(id): Path<String>,
    body: Body,
) -> ApiResult<Response> {
    require_uuid(&id, "assistant")?;
    let (Latest { version }, _) = read::<Latest>(body, app.limits.body_bytes, &LATEST).await?;
    let mut value = json!({"assistant_id": id, "version": version});
    let access = assistant_access(&app, &caller, Action::Update, &mut value).await?;
    let mut records = app.records.lock(Key::Assistant(&id)).await?;
    let Some(mut assistant) = records.assistants.get(&id).filter(|a| access.allows(&a.metadata)).cloned()
    else {
        return Err(ApiError::not_found(format!("Assistant {id} not found")));
    };
    let Some(saved) = records.versions.get(&(id.clone(), version)).cloned() else {
        return Err(ApiError::not_found(format!("Assistant {id} has no version {version}")));
    };
    assistant.graph_id = saved.graph_id;
    assistant.config = saved.config;
    assistant.context = saved.context;
    assistant.metadata = saved.metadata;
    assistant.name = saved.name;
    assistant.description = saved.description;
    assistant.version = saved.version;
    assistant.updated_at = now();
    records.commit(vec![Change::Assistant(assistant.clone())]).await?;
    Ok(ok(&assistant))
}
