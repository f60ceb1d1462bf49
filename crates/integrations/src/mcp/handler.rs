//! The client side of a session as rmcp sees it: who we are, and where progress notifications go.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, NumberOrString, ProgressNotificationParam,
    ProgressToken,
};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient};
use serde::Serialize;
use tokio::sync::mpsc::UnboundedSender;

/// A progress notification of a running request (MCP's `notifications/progress`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Progress {
    /// The progress so far.
    pub progress: f64,
    /// The total, when the server knows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// What the server is doing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Progress subscribers by progress token.
pub(crate) type ProgressRoutes = Arc<Mutex<HashMap<String, UnboundedSender<Progress>>>>;

/// The key of a progress token in [`ProgressRoutes`].
pub(crate) fn token_key(token: &ProgressToken) -> String {
    match &token.0 {
        NumberOrString::Number(n) => n.to_string(),
        NumberOrString::String(s) => s.to_string(),
    }
}

/// How many notifications for tokens nobody listens to (yet) are kept.
const UNROUTED_LIMIT: usize = 64;

/// The rmcp client handler of one session.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClientState {
    pub(crate) progress: ProgressRoutes,
    /// Notifications that came before their call registered its route (the token is known only once
    /// the request is sent), oldest first.
    unrouted: Arc<Mutex<VecDeque<(String, Progress)>>>,
}

impl ClientState {
    /// Sends the progress of token `key` to `sender`, starting with what already came.
    pub(crate) fn route(&self, key: String, sender: UnboundedSender<Progress>) {
        let mut routes = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        let mut unrouted = self.unrouted.lock().unwrap_or_else(PoisonError::into_inner);
        unrouted.retain(|(token, progress)| {
            if *token == key {
                let _ = sender.send(progress.clone());
                false
            } else {
                true
            }
        });
        routes.insert(key, sender);
    }
}

impl ClientHandler for ClientState {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("weft", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _: NotificationContext<RoleClient>) {
        let key = token_key(&params.progress_token);
        let progress = Progress { progress: params.progress, total: params.total, message: params.message };
        let routes = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        match routes.get(&key) {
            // A closed receiver means the call already ended: the late notification is dropped.
            Some(sender) => {
                let _ = sender.send(progress);
            }
            None => {
                let mut unrouted = self.unrouted.lock().unwrap_or_else(PoisonError::into_inner);
                if unrouted.len() == UNROUTED_LIMIT {
                    unrouted.pop_front();
                }
                unrouted.push_back((key, progress));
            }
        }
    }
}
