//! The MCP checks: the client's tests against the protocol's reference server
//! (`@modelcontextprotocol/server-everything`, pinned in `tests/mcp/node`, installed into
//! `target/mcp/node`), and weft's own MCP server (the `mcp_agent` example) checked with the official
//! Python client (`mcp`, pinned in `tests/mcp/python/requirements.txt`, installed into `target/mcp/venv`).
//! Outside CI, what cannot be installed is skipped with a loud message; in CI it is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::exec::{self, Tally};
use crate::{bench, nodeenv, pyenv};

/// The variable naming the reference server's entry script, read by the MCP tests.
pub(crate) const ENV: &str = "WEFT_MCP_EVERYTHING";

/// The npm package of the reference server.
const EVERYTHING: &str = "@modelcontextprotocol/server-everything";

/// The MCP tests: package, test binaries, and whether its `mcp::` unit tests run too.
const TESTS: &[(&str, &[&str], bool)] = &[
    ("weft-integrations", &["mcp_everything", "mcp_server", "mcp_connect"], true),
    ("weft-llm", &["mcp_agent"], false),
];

/// How long the Python check may run before it counts as hung.
const CHECK_LIMIT: Duration = Duration::from_secs(180);

fn target() -> PathBuf {
    bench::target_dir(std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from), &exec::root()).join("mcp")
}

/// The reference server's entry script under an install folder.
fn entry_script(node_dir: &Path) -> PathBuf {
    node_dir.join("node_modules").join(EVERYTHING).join("dist").join("index.js")
}

/// Where the reference server is once installed (whether or not it is).
fn installed_script() -> PathBuf {
    entry_script(&target().join("node"))
}

/// Installs the reference server when missing or out of date; its entry script, or why not.
fn install_everything() -> Result<PathBuf, String> {
    let source = exec::root().join("tests").join("mcp").join("node");
    let dir = nodeenv::install(
        &source,
        &target().join("node"),
        &["package.json", "package-lock.json"],
        EVERYTHING,
    )?;
    Ok(entry_script(&dir))
}

/// The official Python MCP client, in its own virtual environment; its Python, or why not.
fn install_python_client() -> Result<PathBuf, String> {
    let requirements = exec::root().join("tests").join("mcp").join("python").join("requirements.txt");
    let stamp = std::fs::read_to_string(&requirements)
        .map_err(|err| format!("cannot read {}: {err}", requirements.display()))?;
    let requirements = requirements.to_string_lossy().into_owned();
    pyenv::ensure(&pyenv::Venv {
        dir: target().join("venv"),
        install: &["-r", &requirements],
        probe: "from mcp import Client, StdioServerParameters",
        stamp: Some(stamp),
        what: "the Python MCP client",
    })
}

/// `Ok(Some(value))`, or in CI the failure, or elsewhere `Ok(None)` after a loud message.
fn required<T>(what: &str, outcome: Result<T, String>) -> Result<Option<T>, String> {
    match outcome {
        Ok(value) => Ok(Some(value)),
        Err(reason) => {
            weft_testenv::require(
                what,
                &format!("it cannot be installed ({reason})"),
                "see xtask/src/mcp.rs",
            )?;
            Ok(None)
        }
    }
}

/// Sets [`ENV`] for the tests when the reference server is installed and the caller did not set it.
pub(crate) fn with_test_env(command: &mut Command) -> &mut Command {
    let script = installed_script();
    if std::env::var_os(ENV).is_none() && script.is_file() {
        command.env(ENV, script);
    }
    command
}

/// `cargo xtask ci mcp`: installs what the checks need, runs the MCP tests of `weft-integrations` and
/// `weft` against the reference server, then the Python client's check of weft's MCP server.
pub(crate) fn ci_stage(tally: &mut Tally) -> Result<(), String> {
    if let Some(script) = required("the MCP reference server", install_everything())? {
        println!("{ENV}={}", script.display());
    }
    let python = required("the Python MCP client", install_python_client())?;

    // Only the MCP test binaries are built, not every test of the two crates.
    let has_nextest =
        exec::cargo(&["nextest", "--version"]).output().is_ok_and(|output| output.status.success());
    for (package, tests, lib) in TESTS {
        let runner = if has_nextest { vec!["nextest", "run"] } else { vec!["test"] };
        let mut args = runner.clone();
        args.extend(["-p", package, "--all-features"]);
        for test in *tests {
            args.extend(["--test", test]);
        }
        exec::run_counting(with_test_env(&mut exec::cargo(&args)), tally)?;
        // The unit tests of the `mcp` module, on their own: a name filter would also apply to the test
        // binaries above, whose test names do not carry the module path.
        if *lib {
            let mut args = runner;
            args.extend(["-p", package, "--all-features", "--lib", "--", "mcp::"]);
            exec::run_counting(&mut exec::cargo(&args), tally)?;
        }
    }

    let Some(python) = python else { return Ok(()) };
    exec::run(&mut exec::cargo(&[
        "build",
        "-p",
        "weft-examples",
        "--all-features",
        "--example",
        "mcp_agent",
    ]))?;
    let example = target()
        .parent()
        .map(|t| t.join("debug").join("examples").join("mcp_agent"))
        .ok_or("the target folder has no parent")?;
    let check = exec::root().join("tests").join("mcp").join("python").join("check.py");
    let mut command = Command::new(python);
    command.arg(check).arg(example);
    exec::run_with_limit(&mut command, Some(CHECK_LIMIT))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mcp_test_binary_is_run() {
        let dir = exec::root().join("crates/integrations/tests");
        let mut found: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|entry| entry.unwrap().file_name().into_string().ok())
            .filter_map(|name| {
                name.strip_prefix("mcp_").and_then(|n| n.strip_suffix(".rs")).map(|n| format!("mcp_{n}"))
            })
            .collect();
        found.sort();
        let mut listed: Vec<String> = TESTS[0].1.iter().map(|t| (*t).to_owned()).collect();
        listed.sort();
        assert_eq!(found, listed, "a test file of crates/integrations/tests is missing from TESTS");
        assert!(exec::root().join("crates/weft/tests/mcp_agent.rs").is_file());
    }

    #[test]
    fn the_reference_server_runs_from_its_dist_entry_script() {
        assert_eq!(
            entry_script(Path::new("/t/mcp/node")),
            Path::new("/t/mcp/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
        );
    }

    #[test]
    fn the_pinned_versions_are_exact() {
        let package = std::fs::read_to_string(exec::root().join("tests/mcp/node/package.json")).unwrap();
        assert!(package.contains(r#""@modelcontextprotocol/server-everything": "2026.8.31""#), "{package}");
        let lock = std::fs::read_to_string(exec::root().join("tests/mcp/node/package-lock.json")).unwrap();
        assert!(lock.contains("server-everything"), "the lock file pins the reference server");
        let requirements =
            std::fs::read_to_string(exec::root().join("tests/mcp/python/requirements.txt")).unwrap();
        assert!(requirements.lines().any(|line| line == "mcp==2.3.0"), "{requirements}");
    }

    #[test]
    fn the_test_env_names_the_installed_script_only() {
        let mut command = Command::new("true");
        with_test_env(&mut command);
        let set: Vec<_> = command.get_envs().filter(|(name, _)| *name == ENV).collect();
        if std::env::var_os(ENV).is_some() || !installed_script().is_file() {
            assert!(set.is_empty());
        } else {
            assert_eq!(set.len(), 1);
        }
    }
}
