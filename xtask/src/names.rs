//! The `names` stage of `cargo xtask ci`: every crate the project publishes must have a name that is free
//! on crates.io or already the project's own, so that an install line never pulls someone else's crate.

use std::process::Command;

/// Names the project has published on crates.io (none yet): a name on this list may hold versions there.
/// Add a crate here when its first version is published.
const OURS: [&str; 0] = [];

/// What crates.io says about one name.
#[derive(Debug, PartialEq, Eq)]
enum Registry {
    /// No crate of that name (crates.io treats `-` and `_` alike; cargo looks up both).
    Free,
    /// A crate of that name exists: its first lines as `cargo info` prints them.
    Taken(String),
    /// The registry could not be asked (no network, an offline cargo): why.
    Unknown(String),
}

/// Checks every name in `published`: one taken by someone else fails; a registry that cannot be reached
/// fails in CI (which has the registries) and is a loud warning elsewhere.
pub(crate) fn check(published: &[&str]) -> Result<(), String> {
    let mut taken = Vec::new();
    for name in published {
        match ask(name) {
            Registry::Free => println!("{name}: free on crates.io"),
            Registry::Taken(_) if OURS.contains(name) => println!("{name}: published by this project"),
            Registry::Taken(info) => {
                println!("{name}: TAKEN on crates.io by another crate:\n{info}");
                taken.push(*name);
            }
            Registry::Unknown(why) => {
                let why = format!("cannot ask crates.io about `{name}` ({why})");
                weft_testenv::require("the names check", &why, "it needs crates.io")?;
                return Ok(());
            }
        }
    }
    if taken.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} belong to someone else on crates.io: rename the package (keep the Rust name with `[lib] name`)",
            taken.join(", ")
        ))
    }
}

/// Asks crates.io about `name` with `cargo info`, from outside the workspace (inside, cargo would
/// describe the workspace's own package of that name).
fn ask(name: &str) -> Registry {
    if std::env::var("CARGO_NET_OFFLINE").is_ok_and(|v| v == "true") {
        return Registry::Unknown("CARGO_NET_OFFLINE is set".to_owned());
    }
    let output = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["info", "--registry", "crates-io", name])
        .current_dir(std::env::temp_dir())
        .output();
    match output {
        Ok(output) => classify(
            name,
            output.status.success(),
            &String::from_utf8_lossy(&output.stdout),
            &String::from_utf8_lossy(&output.stderr),
        ),
        Err(err) => Registry::Unknown(format!("cannot run cargo info: {err}")),
    }
}

/// Reads `cargo info`'s answer: a description on success, "could not find" for a free name, anything
/// else a failure to ask.
fn classify(name: &str, success: bool, stdout: &str, stderr: &str) -> Registry {
    if success {
        let head: Vec<&str> = stdout.lines().take(8).collect();
        return Registry::Taken(head.join("\n"));
    }
    if stderr.contains(&format!("could not find `{name}` in registry")) {
        return Registry::Free;
    }
    let why = stderr.lines().rfind(|line| !line.trim().is_empty()).unwrap_or("cargo info failed");
    Registry::Unknown(why.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_cargo_cannot_find_is_free() {
        let stderr = "    Updating crates.io index\nerror: could not find `weft-llm` in registry `https://github.com/rust-lang/crates.io-index`\n";
        assert_eq!(classify("weft-llm", false, "", stderr), Registry::Free);
    }

    #[test]
    fn a_name_cargo_describes_is_taken() {
        let stdout = "weft\nHTML templating with composability in mind\nversion: 0.1.2\nrepository: https://github.com/cstorey/weft\n";
        let Registry::Taken(info) = classify("weft", true, stdout, "") else { panic!("not taken") };
        assert!(info.contains("HTML templating"), "{info}");
    }

    #[test]
    fn a_network_failure_is_not_taken_for_a_free_name() {
        let stderr = "error: failed to query replaced source registry `crates-io`\n\nCaused by:\n  download of config.json failed\n";
        assert_eq!(
            classify("weft-llm", false, "", stderr),
            Registry::Unknown("download of config.json failed".to_owned())
        );
        // Another crate's "could not find" is not this one's.
        let stderr = "error: could not find `weft` in registry `crates-io`\n";
        assert!(matches!(classify("weft-llm", false, "", stderr), Registry::Unknown(_)));
    }
}
