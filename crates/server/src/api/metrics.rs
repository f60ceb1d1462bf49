//! `GET /metrics`: the runs in Prometheus' text format.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse as _, Response};

use crate::app::App;
use crate::model::RunStatus;

/// `GET /metrics`.
pub(crate) async fn serve(State(app): State<Arc<App>>) -> Response {
    let (pending, running) = match app.records.read().await {
        Ok(records) => {
            let count = |status| records.live_runs().filter(|r| r.run.status == status).count();
            (count(RunStatus::Pending), count(RunStatus::Running))
        }
        Err(e) => return crate::error::ApiError::from(e).into_response(),
    };
    #[allow(unused_mut)]
    let mut text = app.metrics.render(pending, running);
    #[cfg(feature = "scale")]
    if let Some(scale) = &app.scale {
        match crate::scale::queue::depth(&scale.db).await {
            Ok((waiting, leased)) => {
                text.push_str(
                    "# HELP weft_queue_runs Runs in the shared run queue: waiting for a worker, or leased by one.\n\
                     # TYPE weft_queue_runs gauge\n",
                );
                text.push_str(&format!("weft_queue_runs{{state=\"waiting\"}} {waiting}\n"));
                text.push_str(&format!("weft_queue_runs{{state=\"leased\"}} {leased}\n"));
            }
            Err(e) => return crate::error::ApiError::internal(format!("postgres: {e}")).into_response(),
        }
    }
    let mut response = Response::new(Body::from(text));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    response
}
