//! The Agent Streaming Protocol's channels and filters: which channels a subscription names (the nine
//! fixed ones and `custom:<name>`), and which events it takes (by channel, namespace prefix and depth), as
//! langgraph-api's `EventStreamingSession` matches them.

use std::collections::BTreeSet;

use serde_json::Value;

/// The fixed channels of the protocol.
pub(crate) const CHANNELS: [&str; 9] =
    ["values", "updates", "checkpoints", "messages", "tools", "custom", "lifecycle", "input", "tasks"];

/// Whether `channel` is a channel of the protocol (`custom:<name>` included).
pub(crate) fn is_channel(channel: &str) -> bool {
    CHANNELS.contains(&channel) || channel.strip_prefix("custom:").is_some_and(|name| !name.is_empty())
}

/// A namespace segment without its task id (`inner:1f3...` is `inner`).
fn segment_name(segment: &str) -> &str {
    segment.split(':').next().unwrap_or(segment)
}

/// Whether `namespace` starts with `prefix`; a prefix segment without `:` also matches a segment of that
/// name with any task id.
pub(crate) fn is_prefix(namespace: &[String], prefix: &[String]) -> bool {
    prefix.len() <= namespace.len()
        && prefix
            .iter()
            .zip(namespace)
            .all(|(want, own)| want == own || (!want.contains(':') && segment_name(own) == want.as_str()))
}

/// The graph name a namespace stands for (its last segment's name; `root` at the top).
pub(crate) fn graph_name_of(namespace: &[String]) -> String {
    namespace.last().map_or_else(|| "root".to_owned(), |last| segment_name(last).to_owned())
}

/// What one subscription takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Filter {
    pub(crate) channels: BTreeSet<String>,
    /// Namespace prefixes; `None` takes every namespace (and then `depth` is not looked at).
    pub(crate) namespaces: Option<Vec<Vec<String>>>,
    /// How far below a prefix an event may be.
    pub(crate) depth: Option<usize>,
}

/// A list of lists of strings, or `None` for anything else.
fn namespaces_of(value: Option<&Value>) -> Option<Vec<Vec<String>>> {
    let list = value?.as_array()?;
    list.iter()
        .map(|ns| ns.as_array()?.iter().map(|s| s.as_str().map(str::to_owned)).collect::<Option<Vec<_>>>())
        .collect()
}

/// A non-negative integer (never a boolean), or `None`.
pub(crate) fn count_of(value: Option<&Value>) -> Option<u64> {
    value.and_then(Value::as_u64)
}

impl Filter {
    /// The filter of a `stream/events` body, with the reference's texts for what it refuses: channels
    /// must be a non-empty list of known channels; namespaces that are not lists of strings are dropped,
    /// a depth that is not a non-negative integer means none.
    pub(crate) fn from_stream_body(body: &Value) -> Result<Self, String> {
        let Some(channels) = body.get("channels").and_then(Value::as_array).filter(|c| !c.is_empty()) else {
            return Err("channels is required and must be a non-empty array".to_owned());
        };
        let mut bad = Vec::new();
        let mut good = BTreeSet::new();
        for channel in channels {
            match channel.as_str() {
                Some(c) if is_channel(c) => {
                    good.insert(c.to_owned());
                }
                Some(c) => bad.push(c.to_owned()),
                None => bad.push(channel.to_string()),
            }
        }
        if !bad.is_empty() {
            bad.truncate(5);
            return Err(format!(
                "channels contains unsupported entries: {}. Allowed: values, updates, messages, tools, \
                 custom, lifecycle, input, tasks, or any `custom:<name>`.",
                bad.join(", ")
            ));
        }
        let namespaces = body.get("namespaces").and_then(Value::as_array).map(|list| {
            list.iter()
                .filter_map(|ns| namespaces_of(Some(&Value::Array(vec![ns.clone()]))))
                .flatten()
                .collect::<Vec<_>>()
        });
        let namespaces = namespaces.filter(|n| !n.is_empty());
        let depth = count_of(body.get("depth")).and_then(|d| usize::try_from(d).ok());
        Ok(Self { channels: good, namespaces, depth })
    }

    /// The filter of a `subscription.subscribe` (or `reconnect`) command's params; `None` when its
    /// channels are missing, empty or not all known.
    pub(crate) fn from_params(params: &Value) -> Option<Self> {
        let channels = params.get("channels")?.as_array().filter(|c| !c.is_empty())?;
        let channels: BTreeSet<String> = channels
            .iter()
            .map(|c| c.as_str().filter(|c| is_channel(c)).map(str::to_owned))
            .collect::<Option<_>>()?;
        let namespaces = namespaces_of(params.get("namespaces"));
        let depth = count_of(params.get("depth")).and_then(|d| usize::try_from(d).ok());
        Some(Self { channels, namespaces, depth })
    }

    /// Whether an event of `method` (`input.requested` is the `input` channel) in `namespace`, with
    /// `data`, passes.
    pub(crate) fn takes(&self, method: &str, namespace: &[String], data: &Value) -> bool {
        let channel = if method == "input.requested" { "input" } else { method };
        if channel == "custom" {
            let name = data.get("name").and_then(Value::as_str);
            let named = name.is_some_and(|n| self.channels.contains(&format!("custom:{n}")));
            if !self.channels.contains("custom") && !named {
                return false;
            }
        } else if !self.channels.contains(channel) {
            return false;
        }
        let Some(prefixes) = &self.namespaces else { return true };
        prefixes.iter().any(|prefix| {
            is_prefix(namespace, prefix) && self.depth.is_none_or(|d| namespace.len() - prefix.len() <= d)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ns(segments: &[&str]) -> Vec<String> {
        segments.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn stream_bodies_are_checked_as_the_reference_checks_them() {
        let e = Filter::from_stream_body(&json!({})).unwrap_err();
        assert_eq!(e, "channels is required and must be a non-empty array");
        let e = Filter::from_stream_body(&json!({"channels": ["values", "debug", 3]})).unwrap_err();
        assert!(e.starts_with("channels contains unsupported entries: debug, 3."), "{e}");
        let f =
            Filter::from_stream_body(&json!({"channels": ["values", "custom:x"], "depth": true})).unwrap();
        assert_eq!((f.depth, f.namespaces), (None, None));
        let f = Filter::from_stream_body(
            &json!({"channels": ["values"], "namespaces": [["a"], [1]], "depth": 0}),
        )
        .unwrap();
        assert_eq!((f.depth, f.namespaces), (Some(0), Some(vec![ns(&["a"])])));
    }

    #[test]
    fn events_pass_by_channel_custom_name_namespace_and_depth() {
        let f = Filter::from_params(&json!({"channels": ["input", "custom:p"]})).unwrap();
        assert!(f.takes("input.requested", &[], &json!({})));
        assert!(f.takes("custom", &[], &json!({"name": "p"})));
        assert!(!f.takes("custom", &[], &json!({"payload": 1})));
        assert!(!f.takes("values", &[], &json!({})));
        let f = Filter::from_params(&json!({"channels": ["values"], "namespaces": [["inner"]], "depth": 0}))
            .unwrap();
        assert!(f.takes("values", &ns(&["inner:1"]), &json!({})));
        assert!(!f.takes("values", &ns(&["inner:1", "deeper:2"]), &json!({})));
        assert!(!f.takes("values", &[], &json!({})));
        assert!(Filter::from_params(&json!({"channels": ["nope"]})).is_none());
        assert_eq!(graph_name_of(&ns(&["a:1", "inner:2"])), "inner");
    }
}
