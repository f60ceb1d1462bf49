//! The `msrv` stage of `cargo xtask ci`: the declared minimum Rust version is true of what we publish.
//! Clippy's `msrv` (clippy.toml) must equal the workspace's `rust-version` (so the clippy stage flags a
//! standard-library item newer than it), and no dependency of a published crate, with every feature on,
//! may declare a newer `rust-version` (cargo would refuse to build it on our minimum).

use crate::exec;

/// Runs the checks.
pub(crate) fn check(published: &[&str]) -> Result<(), String> {
    let root = exec::root();
    let read = |name: &str| {
        std::fs::read_to_string(root.join(name)).map_err(|err| format!("cannot read {name}: {err}"))
    };
    let ours = toml_value(&read("Cargo.toml")?, "rust-version").ok_or("Cargo.toml has no rust-version")?;
    let clippy = toml_value(&read("clippy.toml")?, "msrv").ok_or("clippy.toml has no msrv")?;
    if clippy != ours {
        return Err(format!(
            "clippy.toml's msrv is {clippy}, Cargo.toml's rust-version {ours}: make them one"
        ));
    }
    let mut args = vec!["tree", "--locked", "--all-features", "--edges", "normal,build", "--prefix", "none"];
    args.extend(["--format", "{p}"]);
    for name in published {
        args.extend(["-p", name]);
    }
    let tree = stdout(&args)?;
    let metadata = stdout(&["metadata", "--locked", "--all-features", "--format-version", "1"])?;
    let needs = rust_versions(&metadata);
    let newer = newer_than(&tree, &needs, &ours);
    if !newer.is_empty() {
        return Err(format!(
            "dependencies need a newer rustc than rust-version {ours}: {}",
            newer.join(", ")
        ));
    }
    println!(
        "rust-version {ours}: clippy's msrv agrees, and no dependency of {} needs more",
        published.join(", ")
    );
    Ok(())
}

/// What `cargo ARGS` prints, or why it failed.
fn stdout(args: &[&str]) -> Result<String, String> {
    let mut command = exec::cargo(args);
    println!("$ {}", exec::describe(&command));
    let output = command.output().map_err(|err| format!("cannot run cargo: {err}"))?;
    if !output.status.success() {
        return Err(format!(
            "`{}` failed: {}",
            exec::describe(&command),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// `name@version` → declared rust-version, for every package of `cargo metadata`'s JSON that declares
/// one. A plain scan (xtask has no JSON parser): a package's `"rust_version"` comes after its `"id"` and
/// before the next package's.
fn rust_versions(metadata: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut id: Option<String> = None;
    let mut rest = metadata;
    while let Some(at) = rest.find("\"id\":\"").into_iter().chain(rest.find("\"rust_version\":\"")).min() {
        rest = &rest[at..];
        let (key, value_start) = if rest.starts_with("\"id\"") { ("id", 6) } else { ("rust_version", 16) };
        let value = &rest[value_start..];
        let Some(end) = value.find('"') else { break };
        match key {
            "id" => id = value[..end].rsplit_once('#').map(|(_, spec)| spec.to_owned()),
            _ => {
                if let Some(spec) = id.take().filter(|spec| spec.contains('@')) {
                    found.push((spec, value[..end].to_owned()));
                }
            }
        }
        rest = &value[end..];
    }
    found
}

/// The value of `key = "..."` in a TOML text (the first such line).
fn toml_value(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let rest = line.trim().strip_prefix(key)?.trim_start().strip_prefix('=')?;
        Some(rest.trim().trim_matches('"').to_owned())
    })
}

/// The packages of `cargo tree --format "{p}"` output (`name vX.Y.Z ...`) whose declared rust-version
/// (`needs`, from [`rust_versions`]) is above `ours`.
fn newer_than(tree: &str, needs: &[(String, String)], ours: &str) -> Vec<String> {
    let ours = version(ours);
    let mut newer: Vec<String> = tree
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let spec = format!("{}@{}", words.next()?, words.next()?.strip_prefix('v')?);
            let (_, need) = needs.iter().find(|(package, _)| *package == spec)?;
            (version(need) > ours).then(|| format!("{spec} (rust-version {need})"))
        })
        .collect();
    newer.sort();
    newer.dedup();
    newer
}

/// A `1.94` or `1.94.0` version as numbers; anything else as zero (no requirement).
fn version(text: &str) -> (u32, u32, u32) {
    let mut parts = text.split('.').map(|part| part.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor), patch) => (major, minor, patch.unwrap_or(0)),
        _ => (0, 0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_read_from_their_line() {
        assert_eq!(toml_value("# x\nrust-version = \"1.94\"\n", "rust-version").as_deref(), Some("1.94"));
        assert_eq!(toml_value("msrv = \"1.94\"\n", "msrv").as_deref(), Some("1.94"));
        assert_eq!(toml_value("name = \"x\"\n", "msrv"), None);
    }

    #[test]
    fn rust_versions_are_read_per_package() {
        let metadata = r#"{"packages":[{"name":"sqlx","version":"0.9.0","id":"registry+https://github.com/rust-lang/crates.io-index#sqlx@0.9.0","dependencies":[{"name":"x"}],"rust_version":"1.94.0"},{"name":"rmcp","version":"3.11.0","id":"registry+https://github.com/rust-lang/crates.io-index#rmcp@3.11.0","rust_version":null},{"name":"serde","id":"registry+https://x#serde@1.0.0","rust_version":"1.61"}],"resolve":{"nodes":[{"id":"registry+https://x#serde@1.0.0"}]}}"#;
        assert_eq!(
            rust_versions(metadata),
            [("sqlx@0.9.0".to_owned(), "1.94.0".to_owned()), ("serde@1.0.0".to_owned(), "1.61".to_owned())]
        );
    }

    #[test]
    fn only_dependencies_above_ours_are_reported() {
        let needs = [("sqlx@0.9.0", "1.94.0"), ("serde@1.0.0", "1.61"), ("future@1.0.0", "1.96")]
            .map(|(p, v)| (p.to_owned(), v.to_owned()));
        let tree = "weft-graph v0.1.0 (/w/crates/graph)\nsqlx v0.9.0\nserde v1.0.0\nrmcp v3.11.0\n\
                    future v1.0.0 (proc-macro)\nfuture v1.0.0 (proc-macro) (*)\n";
        assert_eq!(newer_than(tree, &needs, "1.94"), ["future@1.0.0 (rust-version 1.96)"]);
        assert_eq!(
            newer_than(tree, &needs, "1.88"),
            ["future@1.0.0 (rust-version 1.96)", "sqlx@0.9.0 (rust-version 1.94.0)"]
        );
    }
}
