//! Pinned npm packages installed under the target folder with `npm ci`, again only when their lock file
//! changed, so that CI can cache the folder: the server suite's JS SDK check (`tests/server_e2e/js`, a
//! pinned `@langchain/langgraph-sdk` and the node script that drives it) and the MCP reference server
//! (`tests/mcp/node`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::exec;

/// How long `npm ci` may take before it counts as hung.
const NPM_LIMIT: Duration = Duration::from_secs(600);

/// The files the JS SDK check copies from its source folder to its install folder.
const FILES: [&str; 3] = ["package.json", "package-lock.json", "check.mjs"];

/// The package whose `package.json` shows the JS SDK check installed.
const SDK: &str = "@langchain/langgraph-sdk";

/// The file that records the lock file of the last successful install.
const STAMP: &str = "weft-stamp.txt";

/// Whether the install in `dir` was finished from the lock file `lock` and still holds `package`.
fn is_current(dir: &Path, lock: &str, package: &str) -> bool {
    let installed = dir.join("node_modules").join(package).join("package.json");
    installed.is_file() && std::fs::read_to_string(dir.join(STAMP)).is_ok_and(|old| old == lock)
}

/// Installs the JS SDK check from `source` into `dir` when missing or out of date (the script itself is
/// copied every time) and returns `dir`, or why it cannot be installed here.
pub(crate) fn ensure(source: &Path, dir: &Path) -> Result<PathBuf, String> {
    install(source, dir, &FILES, SDK)
}

/// Copies `files` (a `package.json` and its `package-lock.json` among them) from `source` to `dir` and
/// runs `npm ci` there unless the install is current and holds `package`; returns `dir`, or why it cannot
/// be installed here.
pub(crate) fn install(source: &Path, dir: &Path, files: &[&str], package: &str) -> Result<PathBuf, String> {
    let lock_path = source.join("package-lock.json");
    let lock = std::fs::read_to_string(&lock_path)
        .map_err(|err| format!("cannot read {}: {err}", lock_path.display()))?;
    std::fs::create_dir_all(dir).map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    let current = is_current(dir, &lock, package);
    for name in files {
        let (from, to) = (source.join(name), dir.join(name));
        std::fs::copy(&from, &to)
            .map_err(|err| format!("cannot copy {} to {}: {err}", from.display(), to.display()))?;
    }
    if current {
        return Ok(dir.to_owned());
    }
    let node = Command::new("node").arg("--version").output();
    if !node.is_ok_and(|out| out.status.success()) {
        return Err("node is not installed".to_owned());
    }
    let mut npm = Command::new("npm");
    npm.current_dir(dir).args(["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]);
    let stamp = dir.join(STAMP);
    // A half-made install must not pass for a current one: the stamp is written once `npm ci` succeeded.
    let _ = std::fs::remove_file(&stamp);
    exec::run_with_limit(&mut npm, Some(NPM_LIMIT))
        .map_err(|err| format!("cannot install {package} into {} (no network?): {err}", dir.display()))?;
    std::fs::write(&stamp, &lock).map_err(|err| format!("cannot write {}: {err}", stamp.display()))?;
    if is_current(dir, &lock, package) {
        Ok(dir.to_owned())
    } else {
        Err(format!("`npm ci` left no {package} in {}", dir.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_install_is_current_only_with_the_same_lock_and_the_sdk_present() {
        let dir = std::env::temp_dir().join(format!("weft-nodeenv-{}", std::process::id()));
        let sdk = dir.join("node_modules").join("@langchain").join("langgraph-sdk");
        std::fs::create_dir_all(&sdk).unwrap();
        std::fs::write(dir.join(STAMP), "lock v1").unwrap();
        assert!(!is_current(&dir, "lock v1", SDK), "no SDK package.json yet");
        std::fs::write(sdk.join("package.json"), "{}").unwrap();
        assert!(is_current(&dir, "lock v1", SDK));
        assert!(!is_current(&dir, "lock v2", SDK), "a changed lock file installs again");
        assert!(!is_current(&dir, "lock v1", "@modelcontextprotocol/server-everything"), "another package");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
