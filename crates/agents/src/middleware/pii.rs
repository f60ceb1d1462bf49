//! [`Pii`]: LangChain's `PIIMiddleware`, personal data found in messages and redacted, masked, hashed
//! or refused.

use std::borrow::Cow;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use async_trait::async_trait;
use regex::Regex;
use serde_json::Value;
use sha2::{Digest, Sha256};
use weft_runnable_core::{Content, Error, Message, Result};

use crate::agent::{
    AgentError, AgentRuntime, AgentState, AgentUpdate, HookResult, Hooks, JumpTo, Middleware,
};

/// One piece of personal data found in a text (byte offsets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PiiMatch {
    /// The kind (`email`, `credit_card`, or a custom name).
    pub kind: String,
    /// The text found.
    pub value: String,
    /// Where it starts.
    pub start: usize,
    /// Where it ends.
    pub end: usize,
}

/// What is done with what is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// `[REDACTED_EMAIL]` in its place (the default).
    #[default]
    Redact,
    /// Most of it starred out (`ada@****.com`, `****-****-****-1111`).
    Mask,
    /// `<email_hash:1a2b3c4d>`: the first 8 hex digits of its SHA-256.
    Hash,
    /// The run fails with [`PiiDetected`].
    Block,
}

/// Personal data was found and the strategy is [`Strategy::Block`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Detected {} instance(s) of {kind} in text content", .matches.len())]
pub struct PiiDetected {
    /// The kind.
    pub kind: String,
    /// What was found.
    pub matches: Vec<PiiMatch>,
}

type DetectFn = dyn Fn(&str) -> Vec<PiiMatch> + Send + Sync;

/// Finds one kind of personal data.
#[derive(Clone)]
pub struct Detector {
    detect: Arc<DetectFn>,
}

impl fmt::Debug for Detector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Detector(..)")
    }
}

fn regex_matches(re: &Option<Regex>, kind: &str, text: &str) -> Vec<PiiMatch> {
    let Some(re) = re else { return Vec::new() };
    re.find_iter(text)
        .map(|m| PiiMatch {
            kind: kind.to_owned(),
            value: m.as_str().to_owned(),
            start: m.start(),
            end: m.end(),
        })
        .collect()
}

type Pattern = std::sync::LazyLock<Option<Regex>>;

// LangChain's patterns; they compile, so `None` (no match ever) cannot happen.
static EMAIL: Pattern =
    Pattern::new(|| Regex::new(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Z|a-z]{2,}\b").ok());
static CARD: Pattern = Pattern::new(|| Regex::new(r"\b\d{4}[\s-]?\d{4}[\s-]?\d{4}[\s-]?\d{4}\b").ok());
static IPV4: Pattern = Pattern::new(|| Regex::new(r"\b(?:[0-9]{1,3}\.){3}[0-9]{1,3}\b").ok());
static MAC: Pattern = Pattern::new(|| Regex::new(r"\b([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}\b").ok());
static URL: Pattern = Pattern::new(|| Regex::new(r#"https?://[^\s<>"{}|\\^`\[\]]+"#).ok());
static BARE_URL: Pattern = Pattern::new(|| {
    Regex::new(r"\b(?:www\.)?[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)+(?:/[^\s]*)?").ok()
});

/// Whether a card number passes the Luhn check (13 to 19 digits).
fn luhn(number: &str) -> bool {
    let digits: Vec<u32> = number.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&digits.len()) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, d)| if i % 2 == 1 { if d * 2 > 9 { d * 2 - 9 } else { d * 2 } } else { *d })
        .sum();
    sum.is_multiple_of(10)
}

/// The host of `http(s)://host/...`.
fn netloc(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split(['/', '?', '#']).next().unwrap_or_default()
}

fn detect_url(text: &str) -> Vec<PiiMatch> {
    let mut found: Vec<PiiMatch> =
        regex_matches(&URL, "url", text).into_iter().filter(|m| !netloc(&m.value).is_empty()).collect();
    let Some(bare) = BARE_URL.as_ref() else { return found };
    for m in bare.find_iter(text) {
        let (start, end) = (m.start(), m.end());
        if found.iter().any(|f| (f.start <= start && start < f.end) || (f.start < end && end <= f.end)) {
            continue;
        }
        let url = m.as_str();
        if (url.contains('/') || url.starts_with("www.")) && netloc(url).contains('.') {
            found.push(PiiMatch { kind: "url".to_owned(), value: url.to_owned(), start, end });
        }
    }
    found
}

impl Detector {
    /// A detector of its own.
    pub fn new(detect: impl Fn(&str) -> Vec<PiiMatch> + Send + Sync + 'static) -> Self {
        Self { detect: Arc::new(detect) }
    }

    /// Matches of `pattern`, of kind `kind`.
    pub fn regex(kind: &str, pattern: &str) -> std::result::Result<Self, regex::Error> {
        let re = Some(Regex::new(pattern)?);
        let kind = kind.to_owned();
        Ok(Self::new(move |text| regex_matches(&re, &kind, text)))
    }

    /// The built-in detector of `kind`: `email`, `credit_card` (Luhn-checked), `ip` (valid addresses),
    /// `mac_address`, `url`.
    pub fn builtin(kind: &str) -> Option<Self> {
        Some(match kind {
            "email" => Self::new(|t| regex_matches(&EMAIL, "email", t)),
            "credit_card" => Self::new(|t| {
                regex_matches(&CARD, "credit_card", t).into_iter().filter(|m| luhn(&m.value)).collect()
            }),
            "ip" => Self::new(|t| {
                regex_matches(&IPV4, "ip", t)
                    .into_iter()
                    .filter(|m| m.value.parse::<IpAddr>().is_ok())
                    .collect()
            }),
            "mac_address" => Self::new(|t| regex_matches(&MAC, "mac_address", t)),
            "url" => Self::new(detect_url),
            _ => return None,
        })
    }

    /// What it finds in `text`.
    pub fn detect(&self, text: &str) -> Vec<PiiMatch> {
        (self.detect)(text)
    }
}

/// `count` last characters of `value`.
fn last_chars(value: &str, count: usize) -> String {
    let chars: Vec<char> = value.chars().collect();
    chars[chars.len().saturating_sub(count)..].iter().collect()
}

fn mask(m: &PiiMatch) -> String {
    let value = &m.value;
    match m.kind.as_str() {
        "email" => match value.split_once('@') {
            Some((user, domain)) if !domain.contains('@') => match domain.rsplit_once('.') {
                Some((_, tld)) => format!("{user}@****.{tld}"),
                None => format!("{user}@****"),
            },
            _ => "****".to_owned(),
        },
        "credit_card" => {
            let digits: String = value.chars().filter(char::is_ascii_digit).collect();
            let sep = if value.contains('-') {
                "-"
            } else if value.contains(' ') {
                " "
            } else {
                ""
            };
            let tail = last_chars(&digits, 4);
            if sep.is_empty() {
                format!("************{tail}")
            } else {
                format!("****{sep}****{sep}****{sep}{tail}")
            }
        }
        "ip" => match value.rsplit_once('.') {
            Some((_, last)) if value.split('.').count() == 4 => format!("*.*.*.{last}"),
            _ => "****".to_owned(),
        },
        "mac_address" => {
            let sep = if value.contains(':') { ":" } else { "-" };
            format!("**{sep}**{sep}**{sep}**{sep}**{sep}{}", last_chars(value, 2))
        }
        "url" => "[MASKED_URL]".to_owned(),
        _ if value.chars().count() > 4 => format!("****{}", last_chars(value, 4)),
        _ => "****".to_owned(),
    }
}

/// `text` with `matches` handled by `strategy` (LangChain's `apply_strategy`).
pub fn apply_strategy(
    text: &str,
    matches: &[PiiMatch],
    strategy: Strategy,
) -> std::result::Result<String, PiiDetected> {
    if matches.is_empty() {
        return Ok(text.to_owned());
    }
    if strategy == Strategy::Block {
        return Err(PiiDetected { kind: matches[0].kind.clone(), matches: matches.to_vec() });
    }
    let mut sorted: Vec<&PiiMatch> = matches.iter().collect();
    sorted.sort_by_key(|m| std::cmp::Reverse(m.start));
    let mut out = text.to_owned();
    for m in sorted {
        let replacement = match strategy {
            Strategy::Mask => mask(m),
            Strategy::Hash => {
                let digest = Sha256::digest(m.value.as_bytes());
                let hex: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
                format!("<{}_hash:{hex}>", m.kind)
            }
            // `Block` returned above.
            Strategy::Redact | Strategy::Block => format!("[REDACTED_{}]", m.kind.to_uppercase()),
        };
        if out.is_char_boundary(m.start) && out.is_char_boundary(m.end) && m.end <= out.len() {
            out.replace_range(m.start..m.end, &replacement);
        }
    }
    Ok(out)
}

/// Finds one kind of personal data in the conversation and redacts, masks, hashes or refuses it
/// (LangChain's `PIIMiddleware`): in the last user message before each model call (by default), in the
/// tool results of the last turn, in the model's reply. The conversation itself is rewritten (the
/// messages keep their ids); tokens streamed while the model answers are not.
#[derive(Debug, Clone)]
pub struct Pii {
    kind: String,
    strategy: Strategy,
    detector: Detector,
    input: bool,
    output: bool,
    tool_results: bool,
}

impl Pii {
    /// A built-in kind (`email`, `credit_card`, `ip`, `mac_address`, `url`) handled by `strategy`, in the
    /// user's input.
    pub fn new(kind: &str, strategy: Strategy) -> Result<Self, AgentError> {
        let detector = Detector::builtin(kind).ok_or_else(|| AgentError::InvalidMiddleware {
            middleware: "PIIMiddleware".to_owned(),
            message: format!(
                "Unknown PII type: {kind}. Must be one of ['email', 'credit_card', 'ip', 'mac_address', 'url'] or \
                 provide a custom detector."
            ),
        })?;
        Ok(Self::with_detector(kind, strategy, detector))
    }

    /// A kind of its own, found by `detector` (a custom regex: [`Detector::regex`]).
    pub fn with_detector(kind: &str, strategy: Strategy, detector: Detector) -> Self {
        Self { kind: kind.to_owned(), strategy, detector, input: true, output: false, tool_results: false }
    }

    /// Where to look: the last user message, the model's replies, the last turn's tool results.
    #[must_use]
    pub fn apply_to(mut self, input: bool, output: bool, tool_results: bool) -> Self {
        self.input = input;
        self.output = output;
        self.tool_results = tool_results;
        self
    }

    /// `content` handled, or `None` when nothing was found.
    fn process(&self, content: &Content) -> Result<Option<Content>> {
        let handle = |text: &str| -> Result<Option<String>> {
            let found = self.detector.detect(text);
            if found.is_empty() {
                return Ok(None);
            }
            apply_strategy(text, &found, self.strategy).map(Some).map_err(Error::custom)
        };
        match content {
            Content::Text(text) => Ok(handle(text)?.map(Content::Text)),
            Content::Blocks(blocks) => {
                let mut changed = false;
                let mut out = Vec::with_capacity(blocks.len());
                for block in blocks {
                    let text = block.as_str().or_else(|| block.get("text").and_then(Value::as_str));
                    match text.map(handle).transpose()?.flatten() {
                        Some(new) if block.is_string() => out.push(Value::String(new)),
                        Some(new) => {
                            let mut block = block.clone();
                            block["text"] = Value::String(new);
                            out.push(block);
                        }
                        None => {
                            out.push(block.clone());
                            continue;
                        }
                    }
                    changed = true;
                }
                Ok(changed.then_some(Content::Blocks(out)))
            }
        }
    }

    /// `message` with its content handled, or `None` when nothing was found.
    fn rewrite(&self, message: &Message) -> Result<Option<Message>> {
        let mut message = message.clone();
        let content = match &mut message {
            Message::Human(m) => &mut m.content,
            Message::Ai(m) => &mut m.content,
            Message::Tool(m) => &mut m.content,
            _ => return Ok(None),
        };
        match self.process(content)? {
            Some(new) => {
                *content = new;
                Ok(Some(message))
            }
            None => Ok(None),
        }
    }
}

#[async_trait]
impl<C: Send + Sync + 'static> Middleware<C> for Pii {
    fn name(&self) -> Cow<'_, str> {
        Cow::Owned(format!("PIIMiddleware[{}]", self.kind))
    }

    fn hooks(&self) -> Hooks {
        Hooks::new().before_model().can_jump_to([JumpTo::End]).after_model()
    }

    async fn before_model(&self, state: &AgentState, _runtime: &AgentRuntime<C>) -> HookResult {
        let messages = state.messages();
        let mut changed: Vec<(usize, Message)> = Vec::new();
        if self.input {
            if let Some(i) = messages.iter().rposition(|m| matches!(m, Message::Human(_))) {
                if let Some(new) = self.rewrite(&messages[i])? {
                    changed.push((i, new));
                }
            }
        }
        if self.tool_results {
            if let Some(last_ai) = messages.iter().rposition(|m| matches!(m, Message::Ai(_))) {
                for (i, m) in messages.iter().enumerate().skip(last_ai + 1) {
                    if matches!(m, Message::Tool(_)) {
                        if let Some(new) = self.rewrite(m)? {
                            changed.push((i, new));
                        }
                    }
                }
            }
        }
        if changed.is_empty() {
            return Ok(None);
        }
        let mut all = messages.to_vec();
        for (i, new) in changed {
            all[i] = new;
        }
        Ok(Some(AgentUpdate::new().messages(all)))
    }

    async fn after_model(&self, state: &AgentState, _runtime: &AgentRuntime<C>) -> HookResult {
        if !self.output {
            return Ok(None);
        }
        let messages = state.messages();
        let Some(i) = messages.iter().rposition(|m| matches!(m, Message::Ai(_))) else { return Ok(None) };
        let Some(new) = self.rewrite(&messages[i])? else { return Ok(None) };
        let mut all = messages.to_vec();
        all[i] = new;
        Ok(Some(AgentUpdate::new().messages(all)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(kind: &str, strategy: Strategy, text: &str) -> String {
        let detector = Detector::builtin(kind).unwrap();
        apply_strategy(text, &detector.detect(text), strategy).unwrap()
    }

    #[test]
    fn the_built_in_detectors_find_what_langchain_finds() {
        assert_eq!(run("email", Strategy::Redact, "write ada@example.com now"), "write [REDACTED_EMAIL] now");
        assert_eq!(run("email", Strategy::Mask, "ada@example.com"), "ada@****.com");
        assert_eq!(run("credit_card", Strategy::Mask, "4111-1111-1111-1111"), "****-****-****-1111");
        assert_eq!(run("credit_card", Strategy::Mask, "4111111111111111"), "************1111");
        // Fails the Luhn check: left alone.
        assert_eq!(run("credit_card", Strategy::Redact, "1234 5678 9012 3456"), "1234 5678 9012 3456");
        assert_eq!(run("ip", Strategy::Mask, "at 10.0.0.12"), "at *.*.*.12");
        assert_eq!(run("ip", Strategy::Redact, "999.1.1.1"), "999.1.1.1");
        assert_eq!(run("mac_address", Strategy::Mask, "aa:bb:cc:dd:ee:ff"), "**:**:**:**:**:ff");
        assert_eq!(
            run("url", Strategy::Redact, "see https://x.io/a and www.y.org"),
            "see [REDACTED_URL] and [REDACTED_URL]"
        );
        assert_eq!(run("email", Strategy::Hash, "ada@example.com"), "<email_hash:b5fc85e5>");
    }

    #[test]
    fn block_refuses_and_a_custom_regex_names_its_kind() {
        let detector = Detector::regex("api_key", r"sk-[a-z0-9]{8}").unwrap();
        let found = detector.detect("key sk-abcd1234");
        assert_eq!(
            apply_strategy("key sk-abcd1234", &found, Strategy::Redact).unwrap(),
            "key [REDACTED_API_KEY]"
        );
        let err = apply_strategy("key sk-abcd1234", &found, Strategy::Block).unwrap_err();
        assert_eq!(err.to_string(), "Detected 1 instance(s) of api_key in text content");
        assert!(Pii::new("passport", Strategy::Redact).is_err());
    }
}
