//! The one rule for tests that need something outside the process (a database, a server, a model, a
//! binary): where `CI` is set (to anything but `""`, `0` or `false`, as `cargo xtask ci` sets it) its
//! absence fails the test; elsewhere the test is skipped with a banner that shows even when the test
//! harness captures the output of passing tests.

use std::io::Write;

/// Whether `CI` is set to anything but `""`, `0` or `false`.
pub fn is_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| !matches!(value.trim(), "" | "0" | "false"))
}

/// The Redis the tests use (`host:port`): `WEFT_TEST_REDIS_ADDR`, by default the local one.
pub fn redis_addr() -> String {
    std::env::var("WEFT_TEST_REDIS_ADDR").unwrap_or_else(|_| "127.0.0.1:6379".to_owned())
}

/// The rule for a missing `what` (`why`: what was found instead; `hint`: how to get it) as a value: in
/// CI an error saying so; elsewhere the skip banner goes to stderr and the caller skips (`Ok`).
///
/// # Errors
/// Where [`is_ci`] is true.
pub fn require(what: &str, why: &str, hint: &str) -> Result<(), String> {
    if is_ci() {
        return Err(format!("{what} is needed in CI: {why}; {hint}"));
    }
    eprint_banner(&banner(what, why, hint));
    Ok(())
}

/// [`require`] for a test: panics in CI, otherwise prints the skip banner and returns, for the caller to
/// skip its test.
///
/// # Panics
/// Where [`is_ci`] is true.
#[allow(clippy::panic)]
pub fn skip_or_fail(what: &str, why: &str, hint: &str) {
    if let Err(message) = require(what, why, hint) {
        panic!("{message}");
    }
}

/// The banner of a skipped test.
fn banner(what: &str, why: &str, hint: &str) -> String {
    let rule = "!".repeat(78);
    format!(
        "{rule}\nSKIPPED: {what}: {why}.\nThis test did not run; {hint}. In CI this is a failure.\n{rule}"
    )
}

/// Straight to the process's stderr: the harness captures `eprintln!` of passing tests, and a skip must
/// show.
fn eprint_banner(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_banner_names_what_why_and_how() {
        let text =
            banner("PostgreSQL at 127.0.0.1:5432", "connection refused", "`cargo xtask services` starts it");
        assert!(text.contains("SKIPPED: PostgreSQL at 127.0.0.1:5432: connection refused."), "{text}");
        assert!(text.contains("`cargo xtask services` starts it. In CI this is a failure."), "{text}");
    }
}
