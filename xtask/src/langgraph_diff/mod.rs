//! `cargo xtask langgraph-diff [SCENARIO...]`: the differential suite of `tests/langgraph_diff/`. Runs
//! every scenario (or the named ones) against LangGraph 1.2.24 (the pinned venv of `cargo xtask bench`,
//! made when missing) and against weft, normalises both documents alike ([`normalize`]), compares them
//! and prints one line per scenario, the differences, and `langgraph-diff: N passed, N failed`.
//!
//! A scenario passes when both halves print the same document, or when it differs and is listed in
//! `known_bugs.txt` (an open engine bug) or `documented_differences.txt` (weft differs on purpose). A
//! listed scenario that now compares equal fails, so that the lists only shrink.

mod diff;
mod normalize;

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use self::normalize::Side;
use crate::json::{self, Json};
use crate::{bench, exec};

/// How long either half may take for the whole suite.
const LIMIT: Duration = Duration::from_secs(300);

/// The most difference lines printed per scenario.
const SHOWN_DIFFERENCES: usize = 25;

/// The suite's folder.
fn suite_dir() -> PathBuf {
    exec::root().join("tests").join("langgraph_diff")
}

/// How the Rust half is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Build {
    /// Only the suite's package: the quickest build on its own.
    Alone,
    /// The debug build CI's later stages share ([`bench::DEV_BUILD`]), so that CI compiles the engine once.
    Shared,
}

/// `cargo xtask langgraph-diff [SCENARIO...]`.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    if let Some(flag) = args.iter().find(|a| a.starts_with('-')) {
        return Err(format!("unknown langgraph-diff argument `{flag}`"));
    }
    run_with(args, Build::Alone)
}

/// Runs the suite; `args` are scenario names (all when empty).
pub(crate) fn run_with(args: &[String], build: Build) -> Result<(), String> {
    let build_args: &[&str] = match build {
        Build::Alone => &["build", "-p", "weft-langgraph-diff"],
        Build::Shared => bench::DEV_BUILD,
    };
    exec::run(&mut exec::cargo(build_args))?;
    let binary = bench::target_dir(std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from), &exec::root())
        .join("debug")
        .join(format!("weft-langgraph-diff{}", std::env::consts::EXE_SUFFIX));
    let python = match bench::python_env() {
        Ok(python) => python,
        Err(reason) => {
            let why = format!("it cannot be run here ({reason})");
            weft_testenv::require("LangGraph for langgraph-diff", &why, "see xtask/src/pyenv.rs")?;
            return Ok(());
        }
    };
    let started = Instant::now();
    let mut weft = Command::new(&binary);
    weft.args(args);
    let weft = documents(&capture(&mut weft)?)?;
    let mut langgraph = Command::new(&python);
    langgraph.arg(suite_dir().join("python").join("run.py")).args(args);
    let python_docs = documents(&capture(&mut langgraph)?)?;
    let lists = Lists::read(&suite_dir())?;
    let mut names: Vec<String> =
        if args.is_empty() { python_docs.keys().cloned().collect() } else { args.to_vec() };
    names.extend(weft.keys().filter(|k| !python_docs.contains_key(*k)).cloned());
    let (passed, failed) = report(&names, &python_docs, &weft, &lists, args.is_empty());
    println!("(both halves ran in {})", exec::format_duration(started.elapsed()));
    println!("langgraph-diff: {passed} passed, {failed} failed");
    if failed == 0 { Ok(()) } else { Err(format!("{failed} langgraph-diff scenarios failed")) }
}

/// Judges and prints each scenario of `names`, with its differences; on a run of the whole suite, list
/// entries naming no scenario fail too. Returns how many passed and how many failed.
fn report(
    names: &[String],
    python: &BTreeMap<String, Json>,
    weft: &BTreeMap<String, Json>,
    lists: &Lists,
    whole_suite: bool,
) -> (usize, usize) {
    let (mut passed, mut failed) = (0, 0);
    for name in names {
        let verdict = judge(name, python.get(name), weft.get(name), lists);
        println!("{}", verdict.line(name));
        for line in verdict.details.iter().take(SHOWN_DIFFERENCES) {
            println!("      {line}");
        }
        if verdict.details.len() > SHOWN_DIFFERENCES {
            println!("      … and {} more", verdict.details.len() - SHOWN_DIFFERENCES);
        }
        if verdict.passed() {
            passed += 1;
        } else {
            failed += 1;
        }
    }
    if whole_suite {
        for name in lists.known.keys().chain(lists.documented.keys()) {
            if !names.contains(name) {
                println!("FAILED     {name}: listed but no such scenario: remove it from the lists");
                failed += 1;
            }
        }
    }
    (passed, failed)
}

/// Runs `command` to its end (killed after [`LIMIT`]) and returns its standard output.
fn capture(command: &mut Command) -> Result<String, String> {
    let what = exec::describe(command);
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|err| format!("cannot start `{what}`: {err}"))?;
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).map(|_| text)
    });
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().map_err(|err| err.to_string())? {
            if !status.success() {
                // What it printed before it stopped still counts; the scenarios it did not reach fail as
                // missing.
                println!("`{what}` exited with {status}");
            }
            break;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "`{what}` took longer than {} and was stopped",
                exec::format_duration(LIMIT)
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let text = reader.join().map_err(|_| "the output reader failed".to_owned())?;
    text.map_err(|err| format!("cannot read the output of `{what}`: {err}"))
}

/// The documents of one half, by scenario name.
fn documents(text: &str) -> Result<BTreeMap<String, Json>, String> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let doc = json::parse(line).map_err(|err| format!("unreadable line ({err}): {line}"))?;
        let name =
            doc.get("scenario").and_then(Json::as_str).ok_or_else(|| format!("no scenario in {line}"))?;
        out.insert(name.to_owned(), doc);
    }
    Ok(out)
}

/// The two lists, scenario name to reason.
#[derive(Debug, Default)]
pub(crate) struct Lists {
    /// Differences caused by open engine bugs.
    pub(crate) known: BTreeMap<String, String>,
    /// Deliberate differences.
    pub(crate) documented: BTreeMap<String, String>,
}

impl Lists {
    fn read(dir: &Path) -> Result<Self, String> {
        let read = |name: &str| -> Result<BTreeMap<String, String>, String> {
            let path = dir.join(name);
            let text = std::fs::read_to_string(&path)
                .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
            parse_list(&text).map_err(|err| format!("{}: {err}", path.display()))
        };
        Ok(Lists { known: read("known_bugs.txt")?, documented: read("documented_differences.txt")? })
    }
}

/// `NAME: reason` lines; `#` starts a comment line. Every entry needs a reason.
pub(crate) fn parse_list(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, reason) =
            line.split_once(':').ok_or_else(|| format!("line {}: expected `NAME: reason`", n + 1))?;
        let (name, reason) = (name.trim(), reason.trim());
        if name.is_empty() || reason.is_empty() {
            return Err(format!("line {}: expected `NAME: reason`", n + 1));
        }
        if out.insert(name.to_owned(), reason.to_owned()).is_some() {
            return Err(format!("line {}: `{name}` is listed twice", n + 1));
        }
    }
    Ok(out)
}

/// What became of one scenario.
#[derive(Debug, PartialEq)]
pub(crate) struct Verdict {
    /// The word in the scenario's line.
    pub(crate) kind: Kind,
    /// The reason from a list, or what went wrong.
    pub(crate) note: String,
    /// The differences, one line each.
    pub(crate) details: Vec<String>,
}

/// The outcome of a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Same document on both sides.
    Equal,
    /// Different, listed as a known bug.
    KnownBug,
    /// Different, listed as a documented difference.
    Documented,
    /// Different and not listed.
    Different,
    /// Listed but equal, missing on a side, or crashed.
    Failed,
}

impl Verdict {
    fn passed(&self) -> bool {
        matches!(self.kind, Kind::Equal | Kind::KnownBug | Kind::Documented)
    }

    fn line(&self, name: &str) -> String {
        let word = match self.kind {
            Kind::Equal => "equal     ",
            Kind::KnownBug => "known bug ",
            Kind::Documented => "documented",
            Kind::Different => "DIFFERENT ",
            Kind::Failed => "FAILED    ",
        };
        if self.note.is_empty() { format!("{word} {name}") } else { format!("{word} {name}: {}", self.note) }
    }
}

/// Compares one scenario's documents and applies the lists.
pub(crate) fn judge(name: &str, python: Option<&Json>, weft: Option<&Json>, lists: &Lists) -> Verdict {
    let failed = |note: String| Verdict { kind: Kind::Failed, note, details: Vec::new() };
    let (Some(python), Some(weft)) = (python, weft) else {
        let side = if python.is_none() { "the Python half" } else { "the weft half" };
        return failed(format!("missing from {side}"));
    };
    if python.get("crash").and_then(Json::as_str) == Some("no such scenario") {
        return failed("no such scenario".to_owned());
    }
    if let Some(crash) = python.get("crash") {
        return failed(format!("the Python half crashed: {}", crash.as_str().unwrap_or_default()));
    }
    if let Some(crash) = weft.get("crash") {
        return failed(format!("the weft half crashed: {}", crash.as_str().unwrap_or_default()));
    }
    let empty = Json::Arr(Vec::new());
    let python = normalize::normalize(python.get("observations").unwrap_or(&empty), Side::Python);
    let weft = normalize::normalize(weft.get("observations").unwrap_or(&empty), Side::Weft);
    let details: Vec<String> = diff::diff(&python, &weft).iter().map(ToString::to_string).collect();
    let known = lists.known.get(name);
    let documented = lists.documented.get(name);
    match (details.is_empty(), known, documented) {
        (true, Some(_), _) => failed("fixed: remove from known bugs".to_owned()),
        (true, None, Some(_)) => failed("no longer differs: remove from documented differences".to_owned()),
        (true, None, None) => Verdict { kind: Kind::Equal, note: String::new(), details },
        (false, Some(reason), _) => Verdict { kind: Kind::KnownBug, note: reason.clone(), details },
        (false, None, Some(reason)) => Verdict { kind: Kind::Documented, note: reason.clone(), details },
        (false, None, None) => Verdict { kind: Kind::Different, note: String::new(), details },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Json {
        json::parse(text).unwrap()
    }

    fn lists(known: &str, documented: &str) -> Lists {
        Lists { known: parse_list(known).unwrap(), documented: parse_list(documented).unwrap() }
    }

    const PY: &str =
        r#"{"scenario": "s", "observations": [{"op": "invoke", "error": {"type": "GraphRecursionError"}}]}"#;
    const SAME: &str =
        r#"{"scenario":"s","observations":[{"op":"invoke","error":{"type":"RecursionLimit"}}]}"#;
    const OTHER: &str = r#"{"scenario":"s","observations":[{"op":"invoke","out":{"n":1}}]}"#;

    #[test]
    fn equal_documents_pass_and_listed_equal_ones_fail() {
        let verdict = judge("s", Some(&doc(PY)), Some(&doc(SAME)), &lists("", ""));
        assert_eq!(verdict.kind, Kind::Equal);
        let verdict = judge("s", Some(&doc(PY)), Some(&doc(SAME)), &lists("s: bug 1", ""));
        assert_eq!((verdict.kind, verdict.note.as_str()), (Kind::Failed, "fixed: remove from known bugs"));
        let verdict = judge("s", Some(&doc(PY)), Some(&doc(SAME)), &lists("", "s: typed"));
        assert_eq!(verdict.kind, Kind::Failed);
    }

    #[test]
    fn differences_fail_unless_listed() {
        let verdict = judge("s", Some(&doc(PY)), Some(&doc(OTHER)), &lists("", ""));
        assert_eq!(verdict.kind, Kind::Different);
        assert_eq!(verdict.details.len(), 2, "{:?}", verdict.details);
        assert!(
            verdict.details[0]
                .starts_with("[0].error: python {\"type\":\"GraphRecursionError\"} vs weft (absent)")
        );
        let verdict = judge("s", Some(&doc(PY)), Some(&doc(OTHER)), &lists("s: resume bug", ""));
        assert_eq!((verdict.kind, verdict.passed()), (Kind::KnownBug, true));
        assert_eq!(verdict.line("s"), "known bug  s: resume bug");
        let verdict = judge("s", Some(&doc(PY)), Some(&doc(OTHER)), &lists("", "s: typed result"));
        assert_eq!(verdict.kind, Kind::Documented);
    }

    #[test]
    fn crashes_and_missing_halves_fail() {
        let crash = doc(r#"{"scenario": "s", "crash": "boom"}"#);
        assert_eq!(judge("s", Some(&crash), Some(&doc(SAME)), &lists("s: x", "")).kind, Kind::Failed);
        assert_eq!(judge("s", None, Some(&doc(SAME)), &lists("", "")).kind, Kind::Failed);
    }

    #[test]
    fn list_lines_need_a_name_and_a_reason() {
        let parsed = parse_list("# comment\n\nresume_update: update lost (issue 17)\n").unwrap();
        assert_eq!(parsed.get("resume_update").map(String::as_str), Some("update lost (issue 17)"));
        assert!(parse_list("just_a_name\n").is_err());
        assert!(parse_list("a: x\na: y\n").is_err());
        assert!(parse_list("a:\n").is_err());
    }

    #[test]
    fn the_lists_of_the_repository_parse() {
        let lists = Lists::read(&suite_dir()).unwrap();
        for name in lists.known.keys() {
            assert!(!lists.documented.contains_key(name), "{name} is in both lists");
        }
    }
}
