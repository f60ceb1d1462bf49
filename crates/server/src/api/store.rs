//! Store routes: put, get, delete and search items; list namespaces.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};
use weft_graph::store::{ListNamespacesOptions, PutOptions, SearchOptions, StoreError, Ttl};

use super::body::read;
use super::guard::Caller;
use super::reply::{empty, ok};
use super::requests::{
    STORE_DELETE, STORE_NAMESPACES, STORE_PUT, STORE_SEARCH, StoreDelete, StoreNamespaces, StorePut,
    StoreSearch,
};
use crate::app::App;
use crate::auth::{Action, Resource};
use crate::error::{ApiError, ApiResult};

type AppState = State<Arc<App>>;

fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::Backend(_) | StoreError::Embedding(_) => ApiError::internal(e.to_string()),
        other => ApiError::unprocessable(other.to_string()),
    }
}

/// Refuses LangGraph's reserved root label, as its server does for client calls.
fn check_namespace(namespace: &[String]) -> ApiResult<()> {
    if namespace.first().is_some_and(|label| label == "langgraph") {
        return Err(ApiError::unprocessable("Invalid namespace: the root label 'langgraph' is reserved"));
    }
    Ok(())
}

/// Authorizes a store action; the hook may rewrite the request's `namespace` (LangGraph's per-user
/// namespaces), which is read back, checked again, and used.
async fn authorize(
    app: &App,
    caller: &Caller,
    action: Action,
    namespace: Option<Vec<String>>,
    mut value: Value,
) -> ApiResult<(Option<Vec<String>>, Option<crate::auth::Filter>)> {
    if let Some(object) = value.as_object_mut() {
        object.insert("namespace".into(), json!(namespace));
    }
    let access = app.authorize(caller, Resource::Store, action, &mut value).await?;
    let namespace = match value.get("namespace") {
        None | Some(Value::Null) => None,
        Some(ns) => Some(serde_json::from_value::<Vec<String>>(ns.clone()).map_err(|_| {
            ApiError::internal("the auth hook left a store namespace that is not a list of strings")
        })?),
    };
    if let Some(namespace) = &namespace {
        check_namespace(namespace)?;
    }
    Ok((namespace, access.filter().cloned()))
}

/// `PUT /store/items`: `204`. `ttl` (minutes, zero or more; absent or null: the store's default TTL)
/// sets how long the item lives.
pub(crate) async fn put(State(app): AppState, caller: Caller, body: Body) -> ApiResult<Response> {
    let (body, _) = read::<StorePut>(body, app.limits.body_bytes, &STORE_PUT).await?;
    check_namespace(&body.namespace)?;
    let ttl = match body.ttl {
        None => Ttl::Default,
        Some(minutes) => Ttl::try_minutes(minutes).map_err(store_error)?,
    };
    let value = json!({"key": body.key, "value": body.value, "ttl": body.ttl});
    let (namespace, _) = authorize(&app, &caller, Action::Put, Some(body.namespace), value).await?;
    let namespace = namespace.unwrap_or_default();
    let options = PutOptions { ttl, ..PutOptions::default() };
    app.store
        .put_with(&namespace, &body.key, Value::Object(body.value), options)
        .await
        .map_err(store_error)?;
    Ok(empty(StatusCode::NO_CONTENT))
}

/// A `refresh_ttl` query parameter as LangGraph's server reads it: `true`, `1` or `yes` (any case) mean
/// true, anything else false; absent: the store's setting.
fn refresh_param(query: &HashMap<String, String>) -> Option<bool> {
    query.get("refresh_ttl").map(|r| matches!(r.to_ascii_lowercase().as_str(), "true" | "1" | "yes"))
}

/// `GET /store/items?namespace=a.b&key=k[&refresh_ttl=true]`: the item, or `null`.
pub(crate) async fn get(
    State(app): AppState,
    caller: Caller,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let namespace: Vec<String> = match query.get("namespace") {
        Some(ns) if !ns.is_empty() => ns.split('.').map(str::to_owned).collect(),
        _ => Vec::new(),
    };
    let Some(key) = query.get("key") else {
        return Err(ApiError::unprocessable("Missing required query parameter 'key'"));
    };
    if namespace.is_empty() || namespace.iter().any(String::is_empty) {
        return Err(ApiError::unprocessable("Namespace label '' must be a non-empty string without periods"));
    }
    let refresh = refresh_param(&query);
    let (namespace, _) =
        authorize(&app, &caller, Action::Get, Some(namespace), json!({"key": key, "refresh_ttl": refresh}))
            .await?;
    let namespace = namespace.unwrap_or_default();
    let item = app.store.get_with(&namespace, key, refresh).await.map_err(store_error)?;
    Ok(ok(&item))
}

/// `DELETE /store/items`: `204`, present or not.
pub(crate) async fn delete(State(app): AppState, caller: Caller, body: Body) -> ApiResult<Response> {
    let (body, _) = read::<StoreDelete>(body, app.limits.body_bytes, &STORE_DELETE).await?;
    let value = json!({"key": body.key});
    let (namespace, _) = authorize(&app, &caller, Action::Delete, Some(body.namespace), value).await?;
    let namespace = namespace.unwrap_or_default();
    app.store.delete(&namespace, &body.key).await.map_err(store_error)?;
    Ok(empty(StatusCode::NO_CONTENT))
}

/// `POST /store/items/search`: `{"items": [...]}` with each item's `score`; `refresh_ttl` (a boolean or
/// null) restarts the found items' TTLs.
pub(crate) async fn search(State(app): AppState, caller: Caller, body: Body) -> ApiResult<Response> {
    let (body, _) = read::<StoreSearch>(body, app.limits.body_bytes, &STORE_SEARCH).await?;
    let value =
        json!({"filter": body.filter, "limit": body.limit, "offset": body.offset, "query": body.query});
    let prefix = body.namespace_prefix.unwrap_or_default();
    let (prefix, auth_filter) = authorize(&app, &caller, Action::Search, Some(prefix), value).await?;
    let mut filter = body.filter.unwrap_or_default();
    if let Some(auth_filter) = auth_filter {
        // Both must hold: keys the request filters too must ask for the same value, else nothing matches.
        for (key, wanted) in auth_filter.as_json() {
            match filter.get(key) {
                Some(asked) if asked != wanted => return Ok(ok(&json!({"items": []}))),
                _ => {
                    filter.insert(key.clone(), wanted.clone());
                }
            }
        }
    }
    let options = SearchOptions {
        query: body.query,
        filter,
        limit: usize::try_from(body.limit.unwrap_or(10)).unwrap_or(0),
        offset: usize::try_from(body.offset.unwrap_or(0)).unwrap_or(0),
        refresh_ttl: body.refresh_ttl,
    };
    let items = app.store.search(&prefix.unwrap_or_default(), options).await.map_err(store_error)?;
    Ok(ok(&json!({"items": items})))
}

/// `POST /store/namespaces`: `{"namespaces": [[...], ...]}`.
pub(crate) async fn namespaces(State(app): AppState, caller: Caller, body: Body) -> ApiResult<Response> {
    let (body, _) = read::<StoreNamespaces>(body, app.limits.body_bytes, &STORE_NAMESPACES).await?;
    let value = json!({"suffix": body.suffix, "max_depth": body.max_depth, "limit": body.limit, "offset": body.offset});
    let (prefix, _) = authorize(&app, &caller, Action::ListNamespaces, body.prefix, value).await?;
    let options = ListNamespacesOptions {
        prefix,
        suffix: body.suffix,
        max_depth: body.max_depth,
        limit: usize::try_from(body.limit.unwrap_or(100)).unwrap_or(0),
        offset: usize::try_from(body.offset.unwrap_or(0)).unwrap_or(0),
    };
    let namespaces = app.store.list_namespaces(options).await.map_err(store_error)?;
    Ok(ok(&json!({"namespaces": namespaces})))
}
