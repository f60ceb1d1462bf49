//! `cargo xtask studio-e2e`: weft Studio in a real browser. Builds the `server` example, then runs
//! `tests/studio_e2e/run.py` (Python's standard library only: a small WebDriver client) with Debian's
//! headless `chromium` and `chromedriver`: the agent run, its approval, a fork from the history, a failed
//! run's thread, a phone's width, an API key; a screenshot of each step under `target/studio-e2e/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::{bench, exec};

/// How long the browser test may run before it counts as hung.
const LIMIT: Duration = Duration::from_secs(300);

/// How the server example is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Build {
    /// Only the example.
    Alone,
    /// The debug build CI's later stages share ([`bench::DEV_BUILD`]), which makes the examples too.
    Shared,
}

/// The first of `names` found on `PATH`.
fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// `cargo xtask studio-e2e`.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    if let Some(arg) = args.first() {
        return Err(format!("unknown studio-e2e argument `{arg}`"));
    }
    run_with(Build::Alone)
}

/// Runs the browser test.
pub(crate) fn run_with(build: Build) -> Result<(), String> {
    let browser = on_path(&["chromium", "chromium-browser"]);
    let driver = on_path(&["chromedriver"]);
    let python = on_path(&["python3"]);
    let (Some(browser), Some(driver), Some(python)) = (browser, driver, python) else {
        let reason = "chromium, chromedriver (Debian: apt-get install chromium chromium-driver) and python3 are needed";
        weft_testenv::require("the studio-e2e browser test", reason, "install them")?;
        return Ok(());
    };
    let build_args: &[&str] = match build {
        Build::Alone => &["build", "-p", "weft-examples", "--features", "server", "--example", "server"],
        Build::Shared => bench::DEV_BUILD,
    };
    exec::run(&mut exec::cargo(build_args))?;
    let target = bench::target_dir(std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from), &exec::root());
    let server =
        target.join("debug").join("examples").join(format!("server{}", std::env::consts::EXE_SUFFIX));
    let out = target.join("studio-e2e");
    std::fs::create_dir_all(&out).map_err(|err| format!("cannot make {}: {err}", out.display()))?;
    let suite: &Path = &exec::root().join("tests").join("studio_e2e");
    let mut command = Command::new(python);
    command
        .current_dir(suite)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .arg("run.py")
        .arg("--server-bin")
        .arg(&server)
        .arg("--chromedriver")
        .arg(&driver)
        .arg("--chromium")
        .arg(&browser)
        .arg("--out")
        .arg(&out);
    exec::run_with_limit(&mut command, Some(LIMIT))
}
