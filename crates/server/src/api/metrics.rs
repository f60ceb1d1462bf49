//! `GET /metrics`: the runs in Prometheus' text format.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::Response;

use crate::app::App;
use crate::model::RunStatus;

/// `GET /metrics`.
pub(crate) async fn serve(State(app): State<Arc<App>>) -> Response {
    let (pending, running) = {
        let records = app.records.lock().await;
        let count = |status| records.runs.values().filter(|r| r.run.status == status).count();
        (count(RunStatus::Pending), count(RunStatus::Running))
    };
    let text = app.metrics.render(pending, running);
    let mut response = Response::new(Body::from(text));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    response
}
