//! `GET /openapi.json`: an OpenAPI 3.1 document of the routes the server serves, made from the same table
//! as its router ([`super::routes`]), so that the two cannot drift apart.

use axum::http::Method;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::reply::ok;

/// The path's parameters (`{thread_id}`), in order.
fn parameters(path: &str) -> Vec<Value> {
    path.split('/')
        .filter_map(|part| part.strip_prefix('{').and_then(|p| p.strip_suffix('}')))
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect()
}

/// The operation id LangGraph's clients see: the method and the path's words (`post_threads_runs`).
fn operation_id(method: &Method, path: &str) -> String {
    let mut id = method.as_str().to_ascii_lowercase();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        id.push('_');
        id.push_str(&part.replace(['{', '}'], "").replace(['.', '-'], "_"));
    }
    id
}

/// The document.
pub(crate) fn document() -> Value {
    let mut paths = Map::new();
    for route in super::routes() {
        let mut operations = Map::new();
        for endpoint in &route.endpoints {
            let mut operation = json!({
                "summary": endpoint.summary,
                "operationId": operation_id(&endpoint.method, route.path),
                "responses": {
                    "200": {"description": "Success"},
                    "404": {"description": "Not found", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                    "422": {"description": "Invalid request", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                },
            });
            let params = parameters(route.path);
            if !params.is_empty() {
                operation["parameters"] = Value::Array(params);
            }
            if matches!(endpoint.method, Method::POST | Method::PUT | Method::PATCH) {
                operation["requestBody"] = json!({"required": false, "content": {"application/json": {"schema": {"type": "object"}}}});
            }
            operations.insert(endpoint.method.as_str().to_ascii_lowercase(), operation);
        }
        paths.insert(route.path.to_owned(), Value::Object(operations));
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "weft-server",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "LangGraph's Agent Server API over weft graphs",
        },
        "paths": paths,
        "components": {"schemas": {"Error": {
            "type": "object",
            "properties": {"detail": {"type": "string"}},
            "required": ["detail"],
        }}},
    })
}

/// `GET /openapi.json`.
pub(crate) async fn serve() -> Response {
    ok(&document())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_and_method_of_the_table_is_documented_with_its_parameters() {
        let doc = document();
        let mut count = 0;
        for route in super::super::routes() {
            for endpoint in &route.endpoints {
                let op = &doc["paths"][route.path][endpoint.method.as_str().to_ascii_lowercase()];
                assert_eq!(op["summary"], endpoint.summary, "{} {}", endpoint.method, route.path);
                count += 1;
            }
        }
        let documented: usize =
            doc["paths"].as_object().unwrap().values().map(|ops| ops.as_object().unwrap().len()).sum();
        assert_eq!(documented, count);
        let op = &doc["paths"]["/threads/{thread_id}/runs/{run_id}"]["get"];
        assert_eq!(op["operationId"], "get_threads_thread_id_runs_run_id");
        let names: Vec<&str> =
            op["parameters"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["thread_id", "run_id"]);
        assert!(doc["paths"]["/runs/crons"]["post"]["requestBody"].is_object());
    }
}
