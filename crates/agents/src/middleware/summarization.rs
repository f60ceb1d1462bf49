//! [`Summarization`]: LangChain's `SummarizationMiddleware`, the older part of a long conversation
//! replaced by a summary, never separating a tool call from its result.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use weft_runnable_core::{
    ApproximateTokens, ChatModel, HumanMessage, Message, PromptValue, REMOVE_ALL_MESSAGES, RemoveMessage,
    Result, Runnable, RunnableConfig, buffer_string_xml,
};

use crate::agent::{AgentError, AgentRuntime, AgentState, AgentUpdate, HookResult, Hooks, Middleware};

/// LangChain's default summary prompt; `{messages}` is replaced by the messages to summarize.
pub const DEFAULT_SUMMARY_PROMPT: &str = include_str!("summary_prompt.txt");

const DEFAULT_KEEP: usize = 20;
const TRIM_FALLBACK: usize = 15;

/// An amount of context: tokens, messages, or a fraction of the model's input window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ContextSize {
    /// A number of tokens.
    Tokens(usize),
    /// A number of messages.
    Messages(usize),
    /// A fraction (above 0, at most 1) of the model's maximum input tokens.
    Fraction(f64),
}

type CountFn = dyn Fn(&[Message]) -> usize + Send + Sync;

/// Replaces the older part of the conversation with a summary written by `model` once a trigger is
/// reached (LangChain's `SummarizationMiddleware`): before a model call, when any trigger clause holds
/// (every size in a clause reached), the messages before the last `keep` are summarized and the state's
/// conversation becomes the summary (a user message) followed by the kept messages. The cut never falls
/// between an AI message's tool calls and their results: it moves back to that AI message.
#[derive(Clone)]
pub struct Summarization {
    model: Arc<dyn ChatModel>,
    triggers: Vec<Vec<ContextSize>>,
    keep: ContextSize,
    counter: Option<Arc<CountFn>>,
    summary_prompt: String,
    trim_tokens: Option<usize>,
    max_input_tokens: Option<usize>,
}

impl fmt::Debug for Summarization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Summarization")
            .field("model", &self.model.model_name())
            .field("triggers", &self.triggers)
            .field("keep", &self.keep)
            .finish_non_exhaustive()
    }
}

impl Summarization {
    /// Summarizes with `model`, keeping the last 20 messages; no trigger yet (add one with
    /// [`trigger`](Self::trigger)).
    pub fn new<M: ChatModel + 'static>(model: M) -> Self {
        Self {
            model: Arc::new(model),
            triggers: Vec::new(),
            keep: ContextSize::Messages(DEFAULT_KEEP),
            counter: None,
            summary_prompt: DEFAULT_SUMMARY_PROMPT.to_owned(),
            trim_tokens: Some(4000),
            max_input_tokens: None,
        }
    }

    /// Adds a trigger clause: summarize once every size in it is reached (one size: that size alone).
    pub fn trigger(mut self, clause: impl IntoIterator<Item = ContextSize>) -> Result<Self, AgentError> {
        let clause: Vec<ContextSize> = clause.into_iter().collect();
        if clause.is_empty() {
            return Err(invalid(
                "trigger clause must specify at least one of 'tokens', 'messages', 'fraction'",
            ));
        }
        for size in &clause {
            self.check(*size, "trigger")?;
        }
        self.triggers.push(clause);
        Ok(self)
    }

    /// How much recent context is kept whole.
    pub fn keep(mut self, keep: ContextSize) -> Result<Self, AgentError> {
        self.check(keep, "keep")?;
        self.keep = keep;
        Ok(self)
    }

    /// The model's maximum input tokens, for fractional sizes (LangChain reads it from the model's profile).
    #[must_use]
    pub fn max_input_tokens(mut self, tokens: usize) -> Self {
        self.max_input_tokens = Some(tokens);
        self
    }

    /// Counts tokens with `counter` (default: langchain-core's approximation, scaled by the usage the
    /// provider reported).
    #[must_use]
    pub fn token_counter(mut self, counter: impl Fn(&[Message]) -> usize + Send + Sync + 'static) -> Self {
        self.counter = Some(Arc::new(counter));
        self
    }

    /// Sets the summary prompt (`{messages}` marks where the messages go).
    #[must_use]
    pub fn summary_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.summary_prompt = prompt.into();
        self
    }

    /// Trims the messages sent to the summary model to this many tokens (`None`: all of them).
    #[must_use]
    pub fn trim_tokens_to_summarize(mut self, tokens: Option<usize>) -> Self {
        self.trim_tokens = tokens;
        self
    }

    fn check(&self, size: ContextSize, what: &str) -> Result<(), AgentError> {
        match size {
            ContextSize::Fraction(f) if !(f > 0.0 && f <= 1.0) => {
                Err(invalid(&format!("Fractional {what} values must be between 0 and 1, got {f}.")))
            }
            ContextSize::Tokens(0) | ContextSize::Messages(0) => {
                Err(invalid(&format!("{what} thresholds must be greater than 0, got 0.")))
            }
            _ => Ok(()),
        }
    }

    fn count(&self, messages: &[Message], scaled: bool) -> usize {
        match &self.counter {
            Some(counter) => counter(messages),
            None => ApproximateTokens { usage_metadata_scaling: scaled, ..ApproximateTokens::default() }
                .count(messages),
        }
    }

    fn fraction_tokens(&self, fraction: f64) -> Option<usize> {
        self.max_input_tokens.map(|max| ((max as f64 * fraction) as usize).max(1))
    }

    /// Whether the provider's own count, reported on the last AI message, reaches `threshold`.
    fn reported(&self, messages: &[Message], threshold: usize) -> bool {
        let Some(ai) = messages.iter().rev().find_map(Message::as_ai) else { return false };
        let same_provider =
            ai.response_metadata.get("model_provider").and_then(Value::as_str) == Some(self.model.provider());
        same_provider && ai.usage_metadata.as_ref().is_some_and(|u| u.total_tokens as usize >= threshold)
    }

    fn should_summarize(&self, messages: &[Message], total: usize) -> bool {
        self.triggers.iter().any(|clause| {
            clause.iter().all(|size| match *size {
                ContextSize::Messages(n) => messages.len() >= n,
                ContextSize::Tokens(n) => total >= n || self.reported(messages, n),
                ContextSize::Fraction(f) => {
                    self.fraction_tokens(f).is_some_and(|n| total >= n || self.reported(messages, n))
                }
            })
        })
    }

    /// Where the kept part starts.
    fn cutoff(&self, messages: &[Message]) -> usize {
        let target = match self.keep {
            ContextSize::Messages(n) => return safe_cutoff(messages, n),
            ContextSize::Tokens(n) => Some(n),
            ContextSize::Fraction(f) => self.fraction_tokens(f),
        };
        match target {
            Some(target) => self.token_cutoff(messages, target.max(1)),
            None => safe_cutoff(messages, DEFAULT_KEEP),
        }
    }

    /// The earliest cut that keeps at most `target` tokens (binary search), moved to a safe point.
    fn token_cutoff(&self, messages: &[Message], target: usize) -> usize {
        if messages.is_empty() || self.count(messages, true) <= target {
            return 0;
        }
        let (mut left, mut right) = (0, messages.len());
        let mut candidate = messages.len();
        while left < right {
            let mid = (left + right) / 2;
            if self.count(&messages[mid..], false) <= target {
                candidate = mid;
                right = mid;
            } else {
                left = mid + 1;
            }
        }
        if candidate == messages.len() {
            candidate = left;
        }
        if candidate >= messages.len() {
            if messages.len() == 1 {
                return 0;
            }
            candidate = messages.len() - 1;
        }
        safe_point(messages, candidate)
    }

    async fn summary(&self, older: &[Message], config: &RunnableConfig) -> Result<String> {
        if older.is_empty() {
            return Ok("No previous conversation history.".to_owned());
        }
        let trimmed = self.trim(older);
        if trimmed.is_empty() {
            return Ok("Previous conversation was too long to summarize.".to_owned());
        }
        let prompt = self.summary_prompt.replace("{messages}", &buffer_string_xml(&trimmed));
        let config = config.merge(
            &RunnableConfig::default().with_metadata("lc_source", "summarization").with_tag("nostream"),
        );
        let reply = self.model.invoke(PromptValue::from(prompt.trim_end().to_owned()), &config).await?;
        Ok(reply.text().trim().to_owned())
    }

    /// The last messages that fit the summary model's budget, starting on a user message (LangChain's
    /// `trim_messages(strategy="last", start_on="human", include_system=True)`, whole messages only).
    fn trim(&self, messages: &[Message]) -> Vec<Message> {
        let Some(budget) = self.trim_tokens else { return messages.to_vec() };
        let system = messages.first().filter(|m| matches!(m, Message::System(_)));
        let body = &messages[usize::from(system.is_some())..];
        let mut start = body.len();
        while start > 0 {
            let mut candidate: Vec<Message> = system.into_iter().cloned().collect();
            candidate.extend_from_slice(&body[start - 1..]);
            if self.count(&candidate, true) > budget {
                break;
            }
            start -= 1;
        }
        let kept = &body[start..];
        let Some(first_human) = kept.iter().position(|m| matches!(m, Message::Human(_))) else {
            return if kept.is_empty() {
                Vec::new()
            } else {
                messages[messages.len().saturating_sub(TRIM_FALLBACK)..].to_vec()
            };
        };
        let mut out: Vec<Message> = system.into_iter().cloned().collect();
        out.extend_from_slice(&kept[first_human..]);
        out
    }
}

fn invalid(message: &str) -> AgentError {
    AgentError::InvalidMiddleware {
        middleware: "SummarizationMiddleware".to_owned(),
        message: message.to_owned(),
    }
}

/// The cut keeping the last `keep` messages, moved to a safe point.
fn safe_cutoff(messages: &[Message], keep: usize) -> usize {
    if messages.len() <= keep {
        return 0;
    }
    safe_point(messages, messages.len() - keep)
}

/// `cutoff`, or, when it falls on tool results, the AI message that called them (so a call and its
/// result stay together); past the results when no such AI message is found.
fn safe_point(messages: &[Message], cutoff: usize) -> usize {
    if cutoff >= messages.len() || !matches!(messages[cutoff], Message::Tool(_)) {
        return cutoff;
    }
    let mut ids = Vec::new();
    let mut end = cutoff;
    while let Some(Message::Tool(tool)) = messages.get(end) {
        if !tool.tool_call_id.is_empty() {
            ids.push(tool.tool_call_id.as_str());
        }
        end += 1;
    }
    for i in (0..cutoff).rev() {
        if let Some(ai) = messages[i].as_ai() {
            if ai.tool_calls.iter().any(|c| c.id.as_deref().is_some_and(|id| ids.contains(&id))) {
                return i;
            }
        }
    }
    end
}

#[async_trait]
impl<C: Send + Sync + 'static> Middleware<C> for Summarization {
    fn name(&self) -> Cow<'_, str> {
        Cow::Borrowed("SummarizationMiddleware")
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().before_model()
    }

    async fn before_model(&self, state: &AgentState, runtime: &AgentRuntime<C>) -> HookResult {
        let messages = state.messages();
        if self.triggers.is_empty() || !self.should_summarize(messages, self.count(messages, true)) {
            return Ok(None);
        }
        let cutoff = self.cutoff(messages);
        if cutoff == 0 {
            return Ok(None);
        }
        let summary = self.summary(&messages[..cutoff], runtime.config()).await?;
        let mut kwargs = Map::new();
        kwargs.insert("lc_source".to_owned(), json!("summarization"));
        let summary = HumanMessage {
            content: format!("Here is a summary of the conversation to date:\n\n{summary}").into(),
            additional_kwargs: kwargs,
            ..HumanMessage::default()
        };
        let mut out = Vec::with_capacity(messages.len() - cutoff + 2);
        out.push(Message::Remove(RemoveMessage { id: REMOVE_ALL_MESSAGES.to_owned() }));
        out.push(Message::Human(summary));
        out.extend_from_slice(&messages[cutoff..]);
        Ok(Some(AgentUpdate::new().messages(out)))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use weft_runnable_core::{AiMessage, ToolCall, ToolMessage};

    use super::*;

    fn call(id: &str) -> Message {
        let c = ToolCall { name: "add".into(), args: json!({}), id: Some(id.into()) };
        Message::Ai(AiMessage { tool_calls: vec![c], ..AiMessage::default() })
    }

    fn result(id: &str) -> Message {
        Message::Tool(ToolMessage { content: "5".into(), tool_call_id: id.into(), ..ToolMessage::default() })
    }

    #[test]
    fn the_cut_never_separates_a_call_from_its_result() {
        let messages = vec![Message::human("a"), call("c1"), result("c1"), call("c2"), result("c2")];
        // Keeping one message would keep c2's result without its call: the cut moves back to the call.
        assert_eq!(safe_cutoff(&messages, 1), 3);
        assert_eq!(safe_cutoff(&messages, 2), 3);
        assert_eq!(safe_cutoff(&messages, 9), 0);
        // Results whose call is gone: the cut moves past them.
        let orphan = vec![Message::human("a"), result("x"), Message::ai("b")];
        assert_eq!(safe_point(&orphan, 1), 2);
    }

    #[test]
    fn sizes_out_of_range_are_refused() {
        let model = weft_runnable_core::fakes::FakeChatModel::new(Vec::<&str>::new());
        assert!(Summarization::new(model.clone()).trigger([ContextSize::Fraction(1.5)]).is_err());
        assert!(Summarization::new(model.clone()).trigger([]).is_err());
        assert!(Summarization::new(model).keep(ContextSize::Messages(0)).is_err());
    }
}
