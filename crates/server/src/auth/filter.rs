//! [`Filter`]: LangGraph's auth filter on metadata (`{"owner": "alice"}`, `{"owner": {"$eq": "alice"}}`,
//! `{"tags": {"$contains": "x"}}`, `$or` and `$and` of such, nested twice at most).

use serde_json::{Map, Value};

use super::AuthError;

/// How deep `$or` and `$and` may nest, as in LangGraph.
const MAX_NESTING: usize = 2;

/// A filter on metadata that an authorized action is limited to, as LangGraph's `FilterType`: every key
/// must match (a value by equality, `{"$eq": v}`, or `{"$contains": v}` for a list that holds `v`, or every
/// element of a list `v`), and `$or` / `$and` combine two filters or more.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter(Map<String, Value>);

fn invalid(detail: impl Into<String>) -> AuthError {
    AuthError::with_status(500, detail)
}

fn validate(filter: &Map<String, Value>, nesting: usize) -> Result<(), AuthError> {
    if nesting > MAX_NESTING {
        return Err(invalid(
            "Your auth handler returned a filter with too many nested operators. The maximum depth for nested \
             operators is 2. Please simplify your filter.",
        ));
    }
    for (key, value) in filter {
        match key.as_str() {
            "$or" | "$and" => {
                let groups = value.as_array().filter(|g| g.len() >= 2).ok_or_else(|| {
                    invalid(format!(
                        "Your auth handler returned a filter with an invalid {key} operator. The {key} operator must \
                         be a list of at least 2 filter objects. Check the filter returned by your auth handler."
                    ))
                })?;
                for group in groups {
                    let group = group.as_object().ok_or_else(|| {
                        invalid(format!("each group of a filter's {key} must be an object"))
                    })?;
                    validate(group, nesting + 1)?;
                }
            }
            _ => {
                if let Value::Object(op) = value {
                    let mut ops = op.keys();
                    match (ops.next().map(String::as_str), ops.next()) {
                        (Some("$eq" | "$contains"), None) => {}
                        _ => {
                            return Err(invalid(format!(
                                "the filter on '{key}' must be a value, {{\"$eq\": value}} or {{\"$contains\": value}}"
                            )));
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

fn matches(metadata: &Map<String, Value>, filter: &Map<String, Value>) -> bool {
    filter.iter().all(|(key, expected)| match key.as_str() {
        "$or" => expected.as_array().is_some_and(|groups| {
            groups.iter().filter_map(Value::as_object).any(|group| matches(metadata, group))
        }),
        "$and" => expected.as_array().is_some_and(|groups| {
            groups.iter().filter_map(Value::as_object).all(|group| matches(metadata, group))
        }),
        _ => {
            let found = metadata.get(key);
            match expected {
                Value::Object(op) => match op.iter().next() {
                    Some((name, wanted)) if name == "$contains" => match (found, wanted) {
                        (Some(Value::Array(items)), Value::Array(wanted)) => {
                            wanted.iter().all(|w| items.contains(w))
                        }
                        (Some(Value::Array(items)), wanted) => items.contains(wanted),
                        _ => false,
                    },
                    Some((_, wanted)) => found == Some(wanted),
                    None => found == Some(expected),
                },
                _ => found == Some(expected),
            }
        }
    })
}

impl Filter {
    /// A filter from its JSON form; an object, whose operators LangGraph knows (else a `500`, as LangGraph
    /// answers a handler's invalid filter).
    pub fn from_json(filter: Value) -> Result<Self, AuthError> {
        let Value::Object(filter) = filter else {
            return Err(invalid(
                "Auth handler returned invalid result. Expected filter dict, None, or boolean.",
            ));
        };
        validate(&filter, 0)?;
        Ok(Self(filter))
    }

    /// `{key: value}`: the metadata's `key` equals `value` (the usual owner filter).
    pub fn eq(key: impl Into<String>, value: impl Into<Value>) -> Self {
        let mut filter = Map::new();
        filter.insert(key.into(), value.into());
        Self(filter)
    }

    /// Whether `metadata` matches.
    pub fn matches(&self, metadata: &Map<String, Value>) -> bool {
        matches(metadata, &self.0)
    }

    /// The filter as JSON.
    pub fn as_json(&self) -> &Map<String, Value> {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn meta(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    fn filter(value: Value) -> Filter {
        Filter::from_json(value).unwrap()
    }

    #[test]
    fn equality_and_eq_need_the_key() {
        let owned = meta(json!({"owner": "alice", "n": 1}));
        assert!(filter(json!({"owner": "alice"})).matches(&owned));
        assert!(filter(json!({"owner": {"$eq": "alice"}})).matches(&owned));
        assert!(!filter(json!({"owner": "bob"})).matches(&owned));
        assert!(!filter(json!({"team": null})).matches(&owned));
        assert!(Filter::eq("n", 1).matches(&owned));
    }

    #[test]
    fn contains_looks_in_lists() {
        let tagged = meta(json!({"users": ["alice", "bob"], "owner": "alice"}));
        assert!(filter(json!({"users": {"$contains": "bob"}})).matches(&tagged));
        assert!(filter(json!({"users": {"$contains": ["bob", "alice"]}})).matches(&tagged));
        assert!(!filter(json!({"users": {"$contains": ["bob", "carol"]}})).matches(&tagged));
        assert!(!filter(json!({"owner": {"$contains": "alice"}})).matches(&tagged));
    }

    #[test]
    fn or_and_and_combine() {
        let system = meta(json!({"created_by": "system"}));
        let either = filter(json!({"$or": [{"owner": "alice"}, {"created_by": "system"}]}));
        assert!(either.matches(&system));
        assert!(either.matches(&meta(json!({"owner": "alice"}))));
        assert!(!either.matches(&meta(json!({"owner": "bob"}))));
        let both = filter(json!({"$and": [{"owner": "alice"}, {"team": "a"}]}));
        assert!(both.matches(&meta(json!({"owner": "alice", "team": "a"}))));
        assert!(!both.matches(&meta(json!({"owner": "alice"}))));
    }

    #[test]
    fn invalid_filters_are_refused() {
        for bad in [
            json!("alice"),
            json!({"$or": [{"a": 1}]}),
            json!({"$or": "x"}),
            json!({"a": {"$gt": 1}}),
            json!({"$or": [{"$or": [{"$or": [{"a": 1}, {"b": 1}]}, {"c": 1}]}, {"d": 1}]}),
        ] {
            let e = Filter::from_json(bad.clone()).unwrap_err();
            assert_eq!(e.status(), 500, "{bad}");
        }
    }
}
