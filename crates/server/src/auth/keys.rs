//! Static credentials ([`crate::ServerBuilder::api_keys`], [`crate::ServerBuilder::bearer_tokens`]): API keys
//! and bearer tokens that stand for users, each user seeing only the threads (with their runs), the
//! assistants and the crons it made.

use std::collections::HashMap;
use std::fmt;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Action, Auth, AuthContext, AuthError, AuthRequest, Filter, Resource, User};

/// The metadata key that records who made a thread or an assistant.
pub(crate) const OWNER: &str = "owner";

/// API keys (`x-api-key`) and bearer tokens (`Authorization: Bearer`), each standing for a user identity.
/// Secrets stay out of `Debug`.
#[derive(Default, Clone)]
pub(crate) struct StaticCredentials {
    api_keys: HashMap<String, String>,
    bearer_tokens: HashMap<String, String>,
}

impl fmt::Debug for StaticCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticCredentials")
            .field("api_keys", &self.api_keys.len())
            .field("bearer_tokens", &self.bearer_tokens.len())
            .finish()
    }
}

impl StaticCredentials {
    pub(crate) fn is_empty(&self) -> bool {
        self.api_keys.is_empty() && self.bearer_tokens.is_empty()
    }

    pub(crate) fn add_api_key(&mut self, key: String, identity: String) {
        self.api_keys.insert(key, identity);
    }

    pub(crate) fn add_bearer_token(&mut self, token: String, identity: String) {
        self.bearer_tokens.insert(token, identity);
    }
}

/// Writes `owner` into the value's `metadata` (made when missing).
fn stamp_owner(value: &mut Value, owner: &str) {
    if let Some(value) = value.as_object_mut() {
        let metadata = value.entry("metadata").or_insert_with(|| json!({}));
        if !metadata.is_object() {
            *metadata = json!({});
        }
        if let Some(metadata) = metadata.as_object_mut() {
            metadata.insert(OWNER.into(), json!(owner));
        }
    }
}

#[async_trait]
impl Auth for StaticCredentials {
    async fn authenticate(&self, request: &AuthRequest<'_>) -> Result<User, AuthError> {
        let (found, given) = match (request.api_key(), request.bearer_token()) {
            (Some(key), _) => (self.api_keys.get(key), true),
            (None, Some(token)) => (self.bearer_tokens.get(token), true),
            (None, None) => (None, false),
        };
        match (found, given) {
            (Some(identity), _) => Ok(User::new(identity.clone())),
            (None, true) => Err(AuthError::unauthorized("Invalid API key or token")),
            (None, false) => {
                Err(AuthError::unauthorized("Missing authentication: an x-api-key or a bearer token"))
            }
        }
    }

    async fn authorize(&self, ctx: &AuthContext<'_>, value: &mut Value) -> Result<Option<Filter>, AuthError> {
        let owner = ctx.user.identity();
        match ctx.resource {
            // The store is shared by every user (LangGraph's servers share it too unless a handler
            // rewrites namespaces).
            Resource::Store => Ok(None),
            Resource::Threads | Resource::Crons => {
                if matches!(ctx.action, Action::Create | Action::CreateRun | Action::Update) {
                    stamp_owner(value, owner);
                }
                Ok(Some(Filter::eq(OWNER, owner)))
            }
            Resource::Assistants => {
                if matches!(ctx.action, Action::Create | Action::Update) {
                    stamp_owner(value, owner);
                }
                // The assistants the server made for its graphs are everyone's.
                Filter::from_json(json!({"$or": [{OWNER: owner}, {"created_by": "system"}]})).map(Some)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn owners_are_stamped_and_filtered() {
        let keys = StaticCredentials::default();
        let alice = User::new("alice");
        let ctx = AuthContext { user: &alice, resource: Resource::Threads, action: Action::Create };
        let mut value = json!({"metadata": {"owner": "bob", "x": 1}});
        let filter = keys.authorize(&ctx, &mut value).await.unwrap().unwrap();
        assert_eq!(value, json!({"metadata": {"owner": "alice", "x": 1}}));
        assert!(filter.matches(value["metadata"].as_object().unwrap()));
        let ctx = AuthContext { user: &alice, resource: Resource::Assistants, action: Action::Read };
        let filter = keys.authorize(&ctx, &mut json!({})).await.unwrap().unwrap();
        assert!(filter.matches(json!({"created_by": "system"}).as_object().unwrap()));
        assert!(!filter.matches(json!({"owner": "bob"}).as_object().unwrap()));
        let ctx = AuthContext { user: &alice, resource: Resource::Crons, action: Action::Create };
        let mut value = json!({"schedule": "* * * * *"});
        let filter = keys.authorize(&ctx, &mut value).await.unwrap().unwrap();
        assert_eq!(value["metadata"], json!({"owner": "alice"}));
        assert!(!filter.matches(json!({"owner": "bob"}).as_object().unwrap()));
        let ctx = AuthContext { user: &alice, resource: Resource::Store, action: Action::Put };
        assert!(keys.authorize(&ctx, &mut json!({})).await.unwrap().is_none());
    }

    #[test]
    fn secrets_stay_out_of_debug() {
        let mut keys = StaticCredentials::default();
        keys.add_api_key("sekrit-key".into(), "alice".into());
        keys.add_bearer_token("sekrit-token".into(), "bob".into());
        let shown = format!("{keys:?}");
        assert!(!shown.contains("sekrit"), "{shown}");
    }
}
