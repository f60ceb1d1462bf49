//! Authentication on every route but `/ok` and `/info`, and the caller each route authorizes its actions
//! for.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use serde_json::{Map, Value};

use crate::app::App;
use crate::auth::{Action, AuthContext, AuthRequest, Filter, Resource, User};
use crate::error::{ApiError, ApiResult};

/// Who sends a request: the authenticated user, or nobody when the server has no authentication.
#[derive(Debug, Clone, Default)]
pub(crate) struct Caller(Option<Arc<User>>);

impl Caller {
    /// A caller authenticated as `user` (a cron's owner, when the cron makes its runs).
    pub(crate) fn new(user: User) -> Self {
        Self(Some(Arc::new(user)))
    }

    /// The user, when the server authenticates.
    pub(crate) fn user(&self) -> Option<&User> {
        self.0.as_deref()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(parts.extensions.get::<Caller>().cloned().unwrap_or_default())
    }
}

/// Authenticates the request when the server has an [`crate::Auth`]: a `401` (or the status the hook
/// gives) with `{"detail": ...}` when it is refused.
pub(crate) async fn authenticate(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let open = matches!(request.uri().path(), "/ok" | "/info");
    let Some(auth) = app.auth.as_ref().filter(|_| !open) else { return next.run(request).await };
    let (mut parts, body) = request.into_parts();
    match auth.authenticate(&AuthRequest::new(&parts)).await {
        Ok(user) => {
            parts.extensions.insert(Caller(Some(Arc::new(user))));
            next.run(Request::from_parts(parts, body)).await
        }
        Err(e) => {
            // A small body that has come or is coming at once is read to its end, so that the connection
            // stays open for the client's next request, as an authenticated one's would. Any other is
            // left (a large one, one sent slowly, one only sent after `100 Continue`, which reading it
            // would ask for), and the connection closes after the answer.
            let declared = parts
                .headers
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<usize>().ok());
            if declared.is_some_and(|n| n <= REFUSED_BODY_BYTES)
                && !parts.headers.contains_key(header::EXPECT)
            {
                let read = axum::body::to_bytes(body, REFUSED_BODY_BYTES);
                let _ = tokio::time::timeout(REFUSED_BODY_WAIT, read).await;
            }
            ApiError::from(e).into_response()
        }
    }
}

/// The largest refused request's body that is read so that its connection stays open.
const REFUSED_BODY_BYTES: usize = 64 * 1024;

/// How long a refused request's body is waited for (see [`REFUSED_BODY_BYTES`]).
const REFUSED_BODY_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// What an authorized action may touch: everything, or the records whose metadata match a filter.
#[derive(Debug, Clone, Default)]
pub(crate) struct Access(Option<Filter>);

impl Access {
    /// Whether a record with this metadata may be touched.
    pub(crate) fn allows(&self, metadata: &Map<String, Value>) -> bool {
        self.0.as_ref().is_none_or(|f| f.matches(metadata))
    }

    /// The filter, when there is one.
    pub(crate) fn filter(&self) -> Option<&Filter> {
        self.0.as_ref()
    }
}

impl App {
    /// Whether [`App::authorize`] asks anything for this caller: a server with [`crate::Auth`] and a
    /// caller it authenticated. Otherwise everything is allowed and the request it would see need not be
    /// built.
    pub(crate) fn authorizes(&self, caller: &Caller) -> bool {
        self.auth.is_some() && caller.user().is_some()
    }

    /// Asks the server's [`crate::Auth`] whether the caller may do `action` on `resource`; `value` is the
    /// request as the hook sees it, and may come back changed. Everything is allowed without auth.
    pub(crate) async fn authorize(
        &self,
        caller: &Caller,
        resource: Resource,
        action: Action,
        value: &mut Value,
    ) -> ApiResult<Access> {
        let (Some(auth), Some(user)) = (&self.auth, caller.user()) else { return Ok(Access::default()) };
        let ctx = AuthContext { user, resource, action };
        Ok(Access(auth.authorize(&ctx, value).await?))
    }
}
