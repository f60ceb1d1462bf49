//! Python virtual environments under the target folder, made and filled on first use: LangGraph for the
//! benchmarks and the differential suite, the SDK and the reference server for the server suite.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::exec;

/// How long installing packages may take before it counts as hung.
const PIP_LIMIT: Duration = Duration::from_secs(600);

/// A virtual environment to make.
pub(crate) struct Venv<'a> {
    /// Its folder.
    pub(crate) dir: PathBuf,
    /// What `pip install` is given.
    pub(crate) install: &'a [&'a str],
    /// Python code that runs without error once the environment is ready.
    pub(crate) probe: &'a str,
    /// Text the environment was filled from (a requirements file): a change makes `pip` run again.
    pub(crate) stamp: Option<String>,
    /// What it holds, for messages.
    pub(crate) what: &'a str,
}

fn passes(python: &Path, probe: &str) -> bool {
    Command::new(python).args(["-c", probe]).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// The environment's Python, made and filled when missing or out of date, or why there is none.
pub(crate) fn ensure(venv: &Venv<'_>) -> Result<PathBuf, String> {
    let python = venv.dir.join("bin").join("python");
    let stamp_file = venv.dir.join("weft-stamp.txt");
    let fresh = match &venv.stamp {
        None => true,
        Some(stamp) => std::fs::read_to_string(&stamp_file).is_ok_and(|old| old == *stamp),
    };
    if python.is_file() && fresh && passes(&python, venv.probe) {
        return Ok(python);
    }
    if !python.is_file() {
        let created = Command::new("python3").arg("-m").arg("venv").arg(&venv.dir).status();
        if !created.is_ok_and(|s| s.success()) {
            return Err("python3 with the venv module is not available".to_owned());
        }
    }
    let mut pip = Command::new(&python);
    pip.args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"]).args(venv.install);
    exec::run_with_limit(&mut pip, Some(PIP_LIMIT)).map_err(|err| {
        format!("cannot install {} into {} (no network?): {err}", venv.what, venv.dir.display())
    })?;
    if !passes(&python, venv.probe) {
        return Err(format!("{} does not import after installing it", venv.what));
    }
    if let Some(stamp) = &venv.stamp {
        std::fs::write(&stamp_file, stamp)
            .map_err(|err| format!("cannot write {}: {err}", stamp_file.display()))?;
    }
    Ok(python)
}
