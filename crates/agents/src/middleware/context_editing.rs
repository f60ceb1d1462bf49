//! [`ContextEditing`]: LangChain's `ContextEditingMiddleware` with `ClearToolUsesEdit`, old tool results
//! cleared from what the model is sent once the conversation grows past a token budget.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use weft_runnable_core::{Message, Result, count_tokens_approximately};

use crate::agent::{Hooks, Middleware, ModelHandler, ModelRequest, ModelResponse};

type CountFn = dyn Fn(&[Message]) -> usize + Send + Sync;

/// Clears the results of old tool calls (LangChain's `ClearToolUsesEdit`): when the messages count more
/// than `trigger` tokens, every tool result but the last `keep` becomes `placeholder` (tools in
/// `exclude_tools` are left alone), stopping once `clear_at_least` tokens are reclaimed (0: no stop);
/// with `clear_tool_inputs` the call's arguments are emptied too.
#[derive(Debug, Clone)]
pub struct ClearToolUses {
    /// The token count above which the edit runs.
    pub trigger: usize,
    /// Tokens to reclaim before stopping (0: clear every candidate).
    pub clear_at_least: usize,
    /// The most recent tool results kept.
    pub keep: usize,
    /// Whether the calls' arguments are cleared too.
    pub clear_tool_inputs: bool,
    /// Tools whose results are never cleared.
    pub exclude_tools: Vec<String>,
    /// What a cleared result says.
    pub placeholder: String,
}

impl Default for ClearToolUses {
    fn default() -> Self {
        Self {
            trigger: 100_000,
            clear_at_least: 0,
            keep: 3,
            clear_tool_inputs: false,
            exclude_tools: Vec::new(),
            placeholder: "[cleared]".to_owned(),
        }
    }
}

impl ClearToolUses {
    /// Applies the edit to `messages` in place.
    pub fn apply(&self, messages: &mut [Message], count: &dyn Fn(&[Message]) -> usize) {
        let tokens = count(messages);
        if tokens <= self.trigger {
            return;
        }
        let candidates: Vec<usize> = messages
            .iter()
            .enumerate()
            .filter(|(_, m)| matches!(m, Message::Tool(_)))
            .map(|(i, _)| i)
            .collect();
        let candidates =
            if self.keep >= candidates.len() { &[][..] } else { &candidates[..candidates.len() - self.keep] };
        for &i in candidates {
            let Some(tool) = messages[i].as_tool() else { continue };
            let cleared = tool.response_metadata.get("context_editing").and_then(|c| c.get("cleared"));
            if cleared.and_then(Value::as_bool) == Some(true) {
                continue;
            }
            let Some(ai_at) = messages[..i].iter().rposition(|m| matches!(m, Message::Ai(_))) else {
                continue;
            };
            let id = tool.tool_call_id.clone();
            let Some(call_name) = messages[ai_at]
                .as_ai()
                .and_then(|ai| ai.tool_calls.iter().find(|c| c.id.as_deref() == Some(id.as_str())))
                .map(|c| c.name.clone())
            else {
                continue;
            };
            let name = tool.name.clone().unwrap_or(call_name);
            if self.exclude_tools.contains(&name) {
                continue;
            }
            if let Message::Tool(tool) = &mut messages[i] {
                tool.artifact = None;
                tool.content = self.placeholder.clone().into();
                tool.response_metadata.insert(
                    "context_editing".to_owned(),
                    json!({"cleared": true, "strategy": "clear_tool_uses"}),
                );
            }
            if self.clear_tool_inputs {
                clear_inputs(&mut messages[ai_at], &id);
            }
            if self.clear_at_least > 0 && tokens.saturating_sub(count(messages)) >= self.clear_at_least {
                break;
            }
        }
    }
}

fn clear_inputs(message: &mut Message, id: &str) {
    let Message::Ai(ai) = message else { return };
    let mut cleared = false;
    for call in &mut ai.tool_calls {
        if call.id.as_deref() == Some(id) {
            call.args = json!({});
            cleared = true;
        }
    }
    if !cleared {
        return;
    }
    let entry = ai.response_metadata.entry("context_editing").or_insert_with(|| json!({}));
    let mut ids: BTreeSet<String> = entry
        .get("cleared_tool_inputs")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    ids.insert(id.to_owned());
    entry["cleared_tool_inputs"] = json!(ids);
}

/// Edits what the model is sent, not the conversation (LangChain's `ContextEditingMiddleware`): each
/// edit ([`ClearToolUses`] by default) runs on a copy of the messages before every model call. Tokens
/// are counted approximately (langchain-core's `count_tokens_approximately`) unless a counter is given.
#[derive(Clone)]
pub struct ContextEditing {
    edits: Vec<ClearToolUses>,
    counter: Option<Arc<CountFn>>,
}

impl fmt::Debug for ContextEditing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContextEditing").field("edits", &self.edits).finish_non_exhaustive()
    }
}

impl Default for ContextEditing {
    fn default() -> Self {
        Self { edits: vec![ClearToolUses::default()], counter: None }
    }
}

impl ContextEditing {
    /// These edits, in order.
    pub fn new(edits: impl IntoIterator<Item = ClearToolUses>) -> Self {
        Self { edits: edits.into_iter().collect(), counter: None }
    }

    /// Counts tokens with `counter`.
    #[must_use]
    pub fn token_counter(mut self, counter: impl Fn(&[Message]) -> usize + Send + Sync + 'static) -> Self {
        self.counter = Some(Arc::new(counter));
        self
    }
}

#[async_trait]
impl<C: Send + Sync + 'static> Middleware<C> for ContextEditing {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed("ContextEditingMiddleware")
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().wrap_model_call()
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest<C>,
        next: ModelHandler<'_, C>,
    ) -> Result<ModelResponse> {
        if request.messages.is_empty() {
            return next.call(request).await;
        }
        let approximate = |m: &[Message]| count_tokens_approximately(m);
        let count: &dyn Fn(&[Message]) -> usize = match &self.counter {
            Some(counter) => counter.as_ref(),
            None => &approximate,
        };
        for edit in &self.edits {
            edit.apply(&mut request.messages, count);
        }
        next.call(request).await
    }
}
