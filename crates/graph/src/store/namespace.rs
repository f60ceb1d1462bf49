//! Namespaces: validation (LangGraph's rules) and prefix/suffix matching with `*` wildcards.

use super::StoreError;

/// A namespace from labels: `namespace(["users", "42"])`.
pub fn namespace<I, S>(labels: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    labels.into_iter().map(Into::into).collect()
}

/// Checks a namespace as LangGraph does before a put: at least one label; no label empty or containing a
/// period or a NUL; the root label is not `"langgraph"` (reserved).
pub fn validate_namespace(namespace: &[String]) -> Result<(), StoreError> {
    let invalid = |reason: String| StoreError::InvalidNamespace { namespace: namespace.to_vec(), reason };
    if namespace.is_empty() {
        return Err(invalid("namespace cannot be empty".into()));
    }
    for (i, label) in namespace.iter().enumerate() {
        if label.is_empty() {
            return Err(invalid(format!("label {i} is empty")));
        }
        if label.contains('.') {
            return Err(invalid(format!("label '{label}' contains a period ('.')")));
        }
        if label.contains('\0') {
            return Err(invalid(format!("label {i} contains a NUL character")));
        }
    }
    if namespace[0] == "langgraph" {
        return Err(invalid("the root label \"langgraph\" is reserved".into()));
    }
    Ok(())
}

/// Whether `namespace` starts with `prefix`, label by label (`"*"` in `prefix` matches any label).
pub(crate) fn matches_prefix(namespace: &[String], prefix: &[String]) -> bool {
    namespace.len() >= prefix.len() && prefix.iter().zip(namespace).all(|(p, n)| p == "*" || p == n)
}

/// Whether `namespace` ends with `suffix`, label by label (`"*"` in `suffix` matches any label).
pub(crate) fn matches_suffix(namespace: &[String], suffix: &[String]) -> bool {
    namespace.len() >= suffix.len()
        && suffix.iter().rev().zip(namespace.iter().rev()).all(|(s, n)| s == "*" || s == n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_namespaces_pass() {
        assert!(validate_namespace(&namespace(["users", "42", "prefs"])).is_ok());
        assert!(validate_namespace(&namespace(["a", "langgraph"])).is_ok());
    }

    #[test]
    fn each_rule_names_the_namespace() {
        for (ns, needle) in [
            (namespace(Vec::<String>::new()), "cannot be empty"),
            (namespace(["a", ""]), "label 1 is empty"),
            (namespace(["a", "b.c"]), "'b.c' contains a period"),
            (namespace(["a\0"]), "NUL"),
            (namespace(["langgraph", "x"]), "reserved"),
        ] {
            let err = validate_namespace(&ns).unwrap_err().to_string();
            assert!(err.contains(needle) && err.contains(&format!("{ns:?}")), "{err}");
        }
    }

    #[test]
    fn wildcards_match_any_one_label() {
        let ns = namespace(["a", "b", "c"]);
        assert!(matches_prefix(&ns, &namespace(["a", "*"])));
        assert!(!matches_prefix(&ns, &namespace(["a", "c"])));
        assert!(matches_suffix(&ns, &namespace(["*", "c"])));
        assert!(!matches_suffix(&ns, &namespace(["a", "b", "c", "d"])));
    }
}
