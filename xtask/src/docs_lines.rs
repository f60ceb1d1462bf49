//! The `docs-lines` stage of `cargo xtask ci`: the install and run lines that README and the docs show
//! work as written. Each `cargo run --example NAME` line names an example that exists and the features it
//! requires; each `cargo xtask TASK` line names a task; and each TOML block that depends on the facade
//! compiles in a new crate of its own, with the facade taken from this checkout under its published name.

use std::path::{Path, PathBuf};

use crate::{bench, ci, exec};

/// The tasks `cargo xtask` knows (see `main.rs`).
const TASKS: [&str; 11] = [
    "ci",
    "bench",
    "langgraph-diff",
    "server-e2e",
    "server-chaos",
    "server-soak",
    "studio-e2e",
    "phoenix",
    "fakellm",
    "services",
    "llm-server",
];

/// The facade's package name on crates.io.
const FACADE: &str = "weft-llm";

/// The pages a user reads: README, every guide, every crate's and folder's README.
fn pages(root: &Path) -> Result<Vec<PathBuf>, String> {
    let mut pages = vec![root.join("README.md")];
    for dir in ["docs", "crates", "examples", "bench", "tests"] {
        collect(&root.join(dir), 0, &mut pages)?;
    }
    pages.sort();
    Ok(pages)
}

/// The Markdown files in `dir`: all of `docs/`, and READMEs one level down elsewhere.
fn collect(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|err| format!("cannot list {}: {err}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|err| format!("cannot list {}: {err}", dir.display()))?.path();
        if path.is_dir() && depth == 0 {
            collect(&path, 1, out)?;
        } else if path.extension().is_some_and(|ext| ext == "md")
            && (dir.ends_with("docs") || path.file_name().is_some_and(|name| name == "README.md"))
        {
            out.push(path);
        }
    }
    Ok(())
}

/// Runs both checks over every page.
pub(crate) fn check() -> Result<(), String> {
    let root = exec::root();
    let examples = ci::discover_examples(&root.join("examples").join("examples"))?;
    let manifest = std::fs::read_to_string(root.join("examples").join("Cargo.toml"))
        .map_err(|err| format!("cannot read examples/Cargo.toml: {err}"))?;
    let mut problems = Vec::new();
    let mut blocks = Vec::new();
    for page in pages(&root)? {
        let text =
            std::fs::read_to_string(&page).map_err(|err| format!("cannot read {}: {err}", page.display()))?;
        let name = page.strip_prefix(&root).unwrap_or(&page).display().to_string();
        for (line, problem) in run_line_problems(&text, &examples, &manifest) {
            problems.push(format!("{name}:{line}: {problem}"));
        }
        blocks
            .extend(install_blocks(&text).into_iter().map(|(line, block)| (format!("{name}:{line}"), block)));
    }
    if !problems.is_empty() {
        return Err(format!("run lines that do not work as written:\n  {}", problems.join("\n  ")));
    }
    println!("run lines: every `cargo run --example` and `cargo xtask` line names what exists");
    compile_install_blocks(&root, &blocks)
}

/// The problems of the `cargo run --example` and `cargo xtask` commands in `text`, with their line
/// numbers.
fn run_line_problems(text: &str, examples: &[String], manifest: &str) -> Vec<(usize, String)> {
    let mut problems = Vec::new();
    for (index, line) in text.lines().enumerate() {
        for command in line.split("cargo run --example ").skip(1) {
            let words: Vec<&str> = command.split(|c: char| c.is_whitespace() || c == '`').collect();
            let name = words.first().copied().unwrap_or_default();
            if name.chars().all(|c| c.is_ascii_uppercase()) {
                continue; // a placeholder such as NAME
            }
            if !examples.iter().any(|example| example == name) {
                problems.push((index + 1, format!("no example `{name}`")));
                continue;
            }
            let mut given = features_given(&words);
            let defaults = default_features(manifest);
            given.extend(defaults.iter().map(String::as_str));
            let mut needed = required_features(manifest, name);
            // The modes of every example: `--live` needs the OpenAI client, trace export the exporter.
            if words.contains(&"--live") {
                needed.push("live".to_owned());
            }
            if line.contains("WEFT_OTEL_ENDPOINT=") {
                needed.push("otel".to_owned());
            }
            for needed in needed {
                if !given.iter().any(|feature| *feature == needed) {
                    problems.push((index + 1, format!("`{name}` needs `--features {needed}`")));
                }
            }
        }
        for command in line.split("cargo xtask ").skip(1) {
            let task =
                command.split(|c: char| c.is_whitespace() || c == '`' || c == ')').next().unwrap_or_default();
            if !TASKS.contains(&task) && !task.starts_with('<') && task != "TASK" {
                problems.push((index + 1, format!("no xtask task `{task}`")));
            }
        }
    }
    problems
}

/// The features of a command's `--features a,b` or `--features "a b"` (up to its `--`).
fn features_given<'a>(words: &[&'a str]) -> Vec<&'a str> {
    let words: Vec<&str> = words.iter().copied().take_while(|word| *word != "--").collect();
    let mut given = Vec::new();
    for (index, word) in words.iter().enumerate() {
        let list = match word.strip_prefix("--features") {
            Some("") => words.get(index + 1).copied().unwrap_or_default(),
            Some(rest) => rest.trim_start_matches('='),
            None => continue,
        };
        given.extend(list.trim_matches(['"', '\'']).split([',', ' ']).filter(|f| !f.is_empty()));
    }
    given
}

/// The `default` features of the examples' manifest.
fn default_features(manifest: &str) -> Vec<String> {
    manifest
        .lines()
        .find_map(|line| line.trim().strip_prefix("default = "))
        .map(|list| {
            list.trim_matches(['[', ']'])
                .split(',')
                .map(|f| f.trim().trim_matches('"').to_owned())
                .filter(|f| !f.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// The `required-features` of example `name` in the examples' manifest.
fn required_features(manifest: &str, name: &str) -> Vec<String> {
    let mut in_it = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_it = false;
        } else if line == format!("name = \"{name}\"") {
            in_it = true;
        } else if let Some(list) = line.strip_prefix("required-features = ").filter(|_| in_it) {
            return list
                .trim_matches(['[', ']'])
                .split(',')
                .map(|f| f.trim().trim_matches('"').to_owned())
                .filter(|f| !f.is_empty())
                .collect();
        }
    }
    Vec::new()
}

/// The TOML blocks of `text` that depend on the facade, with the line each starts on.
fn install_blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (index, line) in text.lines().enumerate() {
        match &mut current {
            None if line.trim_start().starts_with("```toml") => current = Some((index + 1, String::new())),
            Some(_) if line.trim_start().starts_with("```") => {
                if let Some((start, block)) = current.take().filter(|(_, block)| facade_line(block).is_some())
                {
                    blocks.push((start, block));
                }
            }
            Some((_, block)) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    blocks
}

/// The line of `block` that declares the facade.
fn facade_line(block: &str) -> Option<&str> {
    block.lines().map(str::trim).find(|line| line.starts_with("weft =") || line.starts_with("weft-llm ="))
}

/// The facade's features named in its dependency line.
fn facade_features(line: &str) -> Vec<String> {
    let Some(list) = line.split("features").nth(1).and_then(|rest| rest.split(['[', ']']).nth(1)) else {
        return Vec::new();
    };
    list.split(',').map(|f| f.trim().trim_matches('"').to_owned()).filter(|f| !f.is_empty()).collect()
}

/// The package made for one install block: its manifest and a `main.rs` that reaches every feature's
/// module through `weft::`.
fn scratch_package(name: &str, block: &str) -> (String, String) {
    let dependencies: Vec<&str> = block
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#') && !line.starts_with('['))
        .collect();
    let manifest = format!(
        "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         [dependencies]\n{}\n",
        dependencies.join("\n")
    );
    let mut main = String::from(
        "// Made by `cargo xtask ci docs-lines` from an install line of the docs.\n#![allow(unused_imports)]\n",
    );
    for feature in facade_line(block).map(facade_features).unwrap_or_default() {
        main.push_str(&format!("use weft::{feature} as _;\n"));
    }
    main.push_str(
        "use weft::prelude::*;\n\nfn main() {\n    let _graph = StateGraph::<MessagesState>::new();\n}\n",
    );
    (manifest, main)
}

/// Builds a workspace of one package per install block under the target folder, the facade patched in
/// from this checkout under its published name, and checks that it compiles.
fn compile_install_blocks(root: &Path, blocks: &[(String, String)]) -> Result<(), String> {
    let target = bench::target_dir(std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from), root);
    let dir = target.join("install-lines");
    let _ = std::fs::remove_dir_all(dir.join("packages"));
    let mut members = Vec::new();
    for (index, (place, block)) in blocks.iter().enumerate() {
        let name = format!("install-line-{index}");
        let (manifest, main) = scratch_package(&name, block);
        let src = dir.join("packages").join(&name).join("src");
        write(&src.join("main.rs"), &format!("// {place}\n{main}"))?;
        write(&src.parent().unwrap_or(&src).join("Cargo.toml"), &manifest)?;
        println!("{place}: {}", facade_line(block).unwrap_or_default());
        members.push(format!("\"packages/{name}\""));
    }
    let workspace = format!(
        "[workspace]\nresolver = \"3\"\nmembers = [{}]\n\n[patch.crates-io]\n{FACADE} = {{ path = {:?} }}\n\n\
         [profile.dev]\ndebug = false\n",
        members.join(", "),
        root.join("crates").join("weft").display().to_string()
    );
    write(&dir.join("Cargo.toml"), &workspace)?;
    // The workspace's lock, so the versions are the ones CI tests; cargo trims what is unused.
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock"))
        .map_err(|err| format!("cannot copy Cargo.lock: {err}"))?;
    exec::run(
        exec::cargo(&["check", "--workspace", "--manifest-path"])
            .arg(dir.join("Cargo.toml"))
            .env("CARGO_TARGET_DIR", dir.join("target")),
    )
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|err| format!("cannot make {}: {err}", parent.display()))?;
    }
    std::fs::write(path, text).map_err(|err| format!("cannot write {}: {err}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = "[features]\ndefault = [\"sqlite\"]\nserver = []\n\n[[example]]\nname = \"server\"\n\
                            path = \"examples/server/main.rs\"\nrequired-features = [\"server\"]\n\n\
                            [[example]]\nname = \"quickstart\"\nrequired-features = [\"sqlite\"]\n";

    fn examples() -> Vec<String> {
        ["quickstart", "server", "lcel"].map(str::to_owned).to_vec()
    }

    #[test]
    fn a_run_line_must_name_an_example_and_its_features() {
        let text = "```sh\ncargo run --example server --features server -- --check\n\
                    cargo run --example server\ncargo run --example quikstart\n\
                    `cargo run --example lcel`, or cargo run --example quickstart --features=live, \
                    cargo run --example NAME\n```\n";
        let problems = run_line_problems(text, &examples(), MANIFEST);
        assert_eq!(
            problems,
            [(3, "`server` needs `--features server`".to_owned()), (4, "no example `quikstart`".to_owned())]
        );
    }

    #[test]
    fn default_features_count_as_given() {
        assert_eq!(required_features(MANIFEST, "quickstart"), ["sqlite"]);
        assert!(required_features(MANIFEST, "lcel").is_empty());
        assert_eq!(default_features(MANIFEST), ["sqlite"]);
        let problems = run_line_problems("cargo run --example quickstart\n", &examples(), MANIFEST);
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn live_and_traced_runs_need_their_features() {
        let text = "cargo run --example lcel -- --live\ncargo run --example lcel --features live -- --live\n\
                    WEFT_OTEL_ENDPOINT=http://127.0.0.1:6006 cargo run --example lcel\n";
        assert_eq!(
            run_line_problems(text, &examples(), MANIFEST),
            [
                (1, "`lcel` needs `--features live`".to_owned()),
                (3, "`lcel` needs `--features otel`".to_owned())
            ]
        );
    }

    #[test]
    fn an_xtask_line_must_name_a_task() {
        let text = "run `cargo xtask ci` or cargo xtask bench --compare; not cargo xtask deploy\n";
        assert_eq!(
            run_line_problems(text, &examples(), MANIFEST),
            [(1, "no xtask task `deploy`".to_owned())]
        );
    }

    #[test]
    fn install_blocks_are_toml_blocks_that_name_the_facade() {
        let text = "intro\n```toml\n[dependencies]\nweft = { package = \"weft-llm\", version = \"0.1\", \
                    features = [\"sqlite\", \"otel\"] }  # also: redis\ntokio = \"1\"\n```\n\
                    ```toml\ntikv-jemallocator = \"0.6\"\n```\n";
        let blocks = install_blocks(text);
        assert_eq!(blocks.len(), 1);
        assert_eq!(blocks[0].0, 2);
        let (manifest, main) = scratch_package("p", &blocks[0].1);
        assert!(manifest.contains("[dependencies]\nweft = { package = \"weft-llm\""), "{manifest}");
        assert!(manifest.contains("\ntokio = \"1\"\n"), "{manifest}");
        assert!(main.contains("use weft::sqlite as _;\nuse weft::otel as _;\n"), "{main}");
    }
}
