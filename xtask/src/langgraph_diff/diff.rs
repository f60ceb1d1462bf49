//! Where two normalised documents differ: one line per difference, `path: python value vs weft value`.

use crate::json::Json;

/// The longest value printed in a difference line.
const SHOWN: usize = 240;

/// One difference: where, and each side's value there (`None`: absent on that side).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Difference {
    /// `[2].snap.tasks[0].result`.
    pub(crate) path: String,
    /// LangGraph's value.
    pub(crate) python: Option<Json>,
    /// weft's value.
    pub(crate) weft: Option<Json>,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<Json>| match v {
            None => "(absent)".to_owned(),
            Some(v) => {
                let text = v.to_text();
                if text.chars().count() > SHOWN {
                    format!("{}…", text.chars().take(SHOWN).collect::<String>())
                } else {
                    text
                }
            }
        };
        let path = if self.path.is_empty() { "(root)" } else { &self.path };
        write!(f, "{path}: python {} vs weft {}", show(&self.python), show(&self.weft))
    }
}

/// Every difference between `python` and `weft`, in document order.
pub(crate) fn diff(python: &Json, weft: &Json) -> Vec<Difference> {
    let mut out = Vec::new();
    walk(python, weft, String::new(), &mut out);
    out
}

fn walk(python: &Json, weft: &Json, path: String, out: &mut Vec<Difference>) {
    match (python, weft) {
        (Json::Arr(a), Json::Arr(b)) => {
            for i in 0..a.len().max(b.len()) {
                let here = format!("{path}[{i}]");
                match (a.get(i), b.get(i)) {
                    (Some(x), Some(y)) => walk(x, y, here, out),
                    (x, y) => out.push(Difference { path: here, python: x.cloned(), weft: y.cloned() }),
                }
            }
        }
        (Json::Obj(a), Json::Obj(b)) => {
            let mut keys: Vec<&String> = a.iter().map(|(k, _)| k).collect();
            keys.extend(b.iter().map(|(k, _)| k).filter(|k| !a.iter().any(|(ka, _)| ka == *k)));
            for key in keys {
                let here = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                match (python.get(key), weft.get(key)) {
                    (Some(x), Some(y)) => walk(x, y, here, out),
                    (x, y) => out.push(Difference { path: here, python: x.cloned(), weft: y.cloned() }),
                }
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(Difference { path, python: Some(a.clone()), weft: Some(b.clone()) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    fn lines(python: &str, weft: &str) -> Vec<String> {
        diff(&parse(python).unwrap(), &parse(weft).unwrap()).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn equal_documents_have_no_difference() {
        assert!(lines(r#"[{"a": [1, {"b": null}]}]"#, r#"[{"a": [1, {"b": null}]}]"#).is_empty());
    }

    #[test]
    fn each_difference_names_its_path_and_both_values() {
        let found = lines(
            r#"[{"op": "state", "snap": {"next": ["b"], "tasks": [{"result": {"log": ["a"]}}]}}, 1]"#,
            r#"[{"op": "state", "snap": {"next": ["a", "b"], "tasks": [{}], "extra": true}}]"#,
        );
        assert_eq!(
            found,
            [
                r#"[0].snap.next[0]: python "b" vs weft "a""#,
                r#"[0].snap.next[1]: python (absent) vs weft "b""#,
                r#"[0].snap.tasks[0].result: python {"log":["a"]} vs weft (absent)"#,
                r#"[0].snap.extra: python (absent) vs weft true"#,
                r#"[1]: python 1 vs weft (absent)"#,
            ]
        );
    }

    #[test]
    fn long_values_are_cut() {
        let long = format!("\"{}\"", "x".repeat(500));
        let found = lines(&long, "1");
        assert!(found[0].ends_with("… vs weft 1"), "{}", found[0]);
    }
}
