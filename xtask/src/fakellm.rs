//! fakellm, a scripted OpenAI-compatible server from PyPI, for the `openai` integration's tests: installed
//! into a virtual environment under the target directory (`target/fakellm-venv`) when missing. The tests
//! start it themselves, on a free port, from the path in `WEFT_FAKELLM_BIN`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::bench::target_dir;
use crate::exec;

/// The fakellm release the tests are written against.
const VERSION: &str = "0.3.5";

/// How long creating the environment and installing fakellm may take.
const INSTALL_LIMIT: Duration = Duration::from_secs(600);

/// The environment variable that tells the tests where fakellm is.
pub(crate) const ENV: &str = "WEFT_FAKELLM_BIN";

/// Where the virtual environment lives.
fn venv_dir() -> PathBuf {
    target_dir(std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from), &exec::root()).join("fakellm-venv")
}

/// The fakellm executable, installed first when missing or of another version.
pub(crate) fn ensure() -> Result<PathBuf, String> {
    let venv = venv_dir();
    let python = venv.join("bin").join("python");
    let executable = venv.join("bin").join("fakellm");
    if executable.is_file() && installed_version(&python).as_deref() == Some(VERSION) {
        return Ok(executable);
    }
    println!("installing fakellm {VERSION} into {}", venv.display());
    if !python.is_file() {
        let mut create = Command::new("python3");
        create.arg("-m").arg("venv").arg(&venv);
        exec::run_with_limit(&mut create, Some(INSTALL_LIMIT)).map_err(|err| {
            format!(
                "cannot create a virtual environment for fakellm (python3 with the venv module needed): {err}"
            )
        })?;
    }
    let mut pip = Command::new(&python);
    pip.args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
        .arg(format!("fakellm=={VERSION}"));
    exec::run_with_limit(&mut pip, Some(INSTALL_LIMIT))
        .map_err(|err| format!("cannot install fakellm {VERSION} into {}: {err}", venv.display()))?;
    match installed_version(&python) {
        Some(version) if version == VERSION && executable.is_file() => Ok(executable),
        other => Err(format!("fakellm {VERSION} is not usable after installing it (found {other:?})")),
    }
}

/// The fakellm version installed for `python`, if any.
fn installed_version(python: &Path) -> Option<String> {
    let output = Command::new(python)
        .args(["-c", "import importlib.metadata as m; print(m.version('fakellm'))"])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// `cargo xtask fakellm`: installs fakellm when missing and prints the line to export for the tests.
pub(crate) fn run() -> Result<(), String> {
    let executable = ensure()?;
    println!("export {ENV}={}", executable.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_lives_under_the_target_directory() {
        let dir = venv_dir();
        assert!(dir.ends_with("fakellm-venv"), "{}", dir.display());
        assert!(dir.parent().is_some_and(|p| p.file_name().is_some()));
    }

    #[test]
    fn a_python_without_fakellm_reports_no_version() {
        assert_eq!(installed_version(Path::new("/nonexistent/python")), None);
    }
}
