//! Authentication and authorization, on LangGraph's `Auth` model: [`Auth::authenticate`] turns a request
//! into a [`User`] (or a `401`), and [`Auth::authorize`] sees every action on a resource before it
//! happens: it may refuse it (`403`), change the request's value (owner metadata on what is created, a
//! store namespace), and answer a [`Filter`] on metadata that the server applies to every read, search,
//! update and delete, so that what another user owns is not found.

mod filter;
mod keys;

use std::fmt;

use async_trait::async_trait;
use serde_json::{Map, Value};

pub use self::filter::Filter;
pub(crate) use self::keys::StaticCredentials;

/// Who is calling: LangGraph's `MinimalUserDict` (`identity`, `display_name`, `permissions` and any other
/// fields).
#[derive(Debug, Clone, PartialEq)]
pub struct User {
    identity: String,
    display_name: Option<String>,
    permissions: Vec<String>,
    fields: Map<String, Value>,
}

impl User {
    /// A user known by `identity` (a user id, an email: what owner metadata records).
    pub fn new(identity: impl Into<String>) -> Self {
        Self { identity: identity.into(), display_name: None, permissions: Vec::new(), fields: Map::new() }
    }

    /// Sets the name to show (the identity by default).
    #[must_use]
    pub fn with_display_name(mut self, name: impl Into<String>) -> Self {
        self.display_name = Some(name.into());
        self
    }

    /// Sets the user's permissions (LangGraph's `permissions`, free-form strings such as `threads:write`).
    #[must_use]
    pub fn with_permissions<I, P>(mut self, permissions: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<String>,
    {
        self.permissions = permissions.into_iter().map(Into::into).collect();
        self
    }

    /// Adds a field of your own (an organisation id, a role).
    #[must_use]
    pub fn with_field(mut self, key: impl Into<String>, value: Value) -> Self {
        self.fields.insert(key.into(), value);
        self
    }

    /// The user's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The name to show: the display name, else the identity.
    pub fn display_name(&self) -> &str {
        self.display_name.as_deref().unwrap_or(&self.identity)
    }

    /// The user's permissions.
    pub fn permissions(&self) -> &[String] {
        &self.permissions
    }

    /// A field set with [`User::with_field`].
    pub fn field(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }
}

/// What an action is on (LangGraph's resources).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Resource {
    /// Threads, and the runs and state of a thread.
    Threads,
    /// Assistants.
    Assistants,
    /// The store.
    Store,
    /// Crons, and the runs they make (made as the cron's owner, each authorized as a thread's run).
    Crons,
}

impl Resource {
    /// LangGraph's name: `threads`, `assistants`, `store`, `crons`.
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Threads => "threads",
            Resource::Assistants => "assistants",
            Resource::Store => "store",
            Resource::Crons => "crons",
        }
    }
}

/// What is done (LangGraph's actions). Threads, assistants and crons see `Create`, `Read`, `Update`,
/// `Delete`, `Search` (threads also `CreateRun`); the store sees `Put`, `Get`, `Delete`, `Search`, `ListNamespaces`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Action {
    /// A thread, an assistant or a cron is made (the value has its `metadata`, which may be changed).
    Create,
    /// A run is made on a thread (the value has the run's `metadata`, also the new thread's).
    CreateRun,
    /// One is read: got, its state, history, runs, streams, schemas.
    Read,
    /// One is changed: patched, its state written, a run cancelled, an assistant's version chosen.
    Update,
    /// One is deleted (a thread, a run, an assistant, a store item).
    Delete,
    /// Many are listed: searched, counted, a thread's runs listed.
    Search,
    /// A store item is written.
    Put,
    /// A store item is read.
    Get,
    /// The store's namespaces are listed.
    ListNamespaces,
}

impl Action {
    /// LangGraph's name: `create`, `create_run`, `read`, `update`, `delete`, `search`, `put`, `get`,
    /// `list_namespaces`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::CreateRun => "create_run",
            Action::Read => "read",
            Action::Update => "update",
            Action::Delete => "delete",
            Action::Search => "search",
            Action::Put => "put",
            Action::Get => "get",
            Action::ListNamespaces => "list_namespaces",
        }
    }
}

/// An action to authorize: who does what to which resource.
#[derive(Debug, Clone, Copy)]
pub struct AuthContext<'a> {
    /// The caller.
    pub user: &'a User,
    /// The resource.
    pub resource: Resource,
    /// The action.
    pub action: Action,
}

/// A request as [`Auth::authenticate`] sees it: its method, path and headers.
#[derive(Debug, Clone, Copy)]
pub struct AuthRequest<'a> {
    parts: &'a axum::http::request::Parts,
}

impl<'a> AuthRequest<'a> {
    pub(crate) fn new(parts: &'a axum::http::request::Parts) -> Self {
        Self { parts }
    }

    /// The method (`GET`, `POST`, ...).
    pub fn method(&self) -> &str {
        self.parts.method.as_str()
    }

    /// The path (`/threads/…`), without the query.
    pub fn path(&self) -> &str {
        self.parts.uri.path()
    }

    /// A header's value (the name in any case); `None` when missing or not text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.parts.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The token of an `Authorization: Bearer <token>` header (the scheme in any case).
    pub fn bearer_token(&self) -> Option<&str> {
        let value = self.header("authorization")?.trim();
        let (scheme, token) = value.split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
    }

    /// The `x-api-key` header (what LangGraph's SDKs send their `api_key` as).
    pub fn api_key(&self) -> Option<&str> {
        self.header("x-api-key").map(str::trim).filter(|k| !k.is_empty())
    }
}

/// Why a request is refused: a status (`401`, `403`, or another 4xx) and the `detail` of its
/// `{"detail": ...}` body.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status} {detail}")]
pub struct AuthError {
    status: u16,
    detail: String,
}

impl fmt::Debug for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthError").field("status", &self.status).field("detail", &self.detail).finish()
    }
}

impl AuthError {
    /// `401`: no credentials, or wrong ones.
    pub fn unauthorized(detail: impl Into<String>) -> Self {
        Self { status: 401, detail: detail.into() }
    }

    /// `403`: the user may not do this (LangGraph's answer when a handler returns `False`: `Forbidden`).
    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self { status: 403, detail: detail.into() }
    }

    /// Another status; one that is not a 4xx or 5xx status becomes `403`.
    pub fn with_status(status: u16, detail: impl Into<String>) -> Self {
        let status = if (400..600).contains(&status) { status } else { 403 };
        Self { status, detail: detail.into() }
    }

    /// The HTTP status.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The `detail` text.
    pub fn detail(&self) -> &str {
        &self.detail
    }
}

/// Authentication and authorization for a server ([`crate::ServerBuilder::auth`]), as LangGraph's `Auth`
/// with its `@auth.authenticate` and `@auth.on` handlers.
///
/// ```
/// use async_trait::async_trait;
/// use serde_json::{Value, json};
/// use weft_server::{Action, Auth, AuthContext, AuthError, AuthRequest, Filter, User};
///
/// /// Users by token; each sees only the threads and assistants it made.
/// #[derive(Debug)]
/// struct Owners;
///
/// #[async_trait]
/// impl Auth for Owners {
///     async fn authenticate(&self, request: &AuthRequest<'_>) -> Result<User, AuthError> {
///         match request.bearer_token() {
///             Some("token-alice") => Ok(User::new("alice")),
///             Some(_) => Err(AuthError::unauthorized("Invalid token")),
///             None => Err(AuthError::unauthorized("Missing token")),
///         }
///     }
///
///     async fn authorize(&self, ctx: &AuthContext<'_>, value: &mut Value) -> Result<Option<Filter>, AuthError> {
///         let owner = json!(ctx.user.identity());
///         if let Some(value) = value.as_object_mut() {
///             let metadata = value.entry("metadata").or_insert_with(|| json!({}));
///             if let Some(metadata) = metadata.as_object_mut() {
///                 metadata.insert("owner".into(), owner.clone());
///             }
///         }
///         Ok(Some(Filter::from_json(json!({"owner": owner}))?))
///     }
/// }
/// ```
#[async_trait]
pub trait Auth: fmt::Debug + Send + Sync + 'static {
    /// Who sends `request`, or why it is refused ([`AuthError::unauthorized`]). Called for every route
    /// but `/ok` and `/info`.
    async fn authenticate(&self, request: &AuthRequest<'_>) -> Result<User, AuthError>;

    /// Whether `ctx.user` may do `ctx.action` on `ctx.resource`, before it is done. `value` is the
    /// request as LangGraph's handlers get it (`thread_id`, `assistant_id`, `metadata`, the store's
    /// `namespace`, ...); changes to its `metadata` (creates, updates, new runs) and to a store request's
    /// `namespace` are kept. A [`Filter`] limits the action to records whose metadata match it: the others
    /// answer as if they did not exist. Allows everything by default.
    async fn authorize(&self, ctx: &AuthContext<'_>, value: &mut Value) -> Result<Option<Filter>, AuthError> {
        let _ = (ctx, value);
        Ok(None)
    }
}
