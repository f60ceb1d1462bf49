//! PgBouncer in transaction mode in front of the local PostgreSQL (127.0.0.1:5432, trust auth), for the
//! scaled-out server's checks through a pooler: `cargo xtask server-e2e --instances N --pgbouncer` and
//! `cargo xtask server-chaos --pgbouncer`. It runs on a free port with its configuration and log under
//! `target/pgbouncer/`, as long as the [`Pooler`] lives. PgBouncer refuses to run as root: started by
//! root, it runs as `postgres`. From PgBouncer 1.21 on, `max_prepared_statements` lets it carry
//! protocol-level prepared statements; older versions (Debian 12 ships 1.18) get none.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{bench, exec};

/// The variable that gives the tests which go through a pooler its address (`postgres://…:PORT/`; each
/// test adds its database's name).
pub(crate) const TEST_ENV: &str = "WEFT_TEST_PGBOUNCER_URL";

/// A PgBouncer process, stopped when this goes.
#[derive(Debug)]
pub(crate) struct Pooler {
    child: Child,
    /// The port it listens on (127.0.0.1).
    pub(crate) port: u16,
}

impl Drop for Pooler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Pooler {
    /// A connection string to `database` through the pooler.
    pub(crate) fn uri(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }
}

/// The `pgbouncer` executable: on the `PATH`, or where Debian's package puts it.
fn binary() -> Result<PathBuf, String> {
    let on_path =
        Command::new("pgbouncer").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    if on_path.is_ok() {
        return Ok(PathBuf::from("pgbouncer"));
    }
    let debian = PathBuf::from("/usr/sbin/pgbouncer");
    if debian.exists() {
        return Ok(debian);
    }
    Err("PgBouncer is not installed (Debian: `apt-get install pgbouncer`; .ci/run installs it)".to_owned())
}

/// `(major, minor)` from `pgbouncer --version` (`PgBouncer 1.18.0`).
fn parse_version(text: &str) -> Option<(u32, u32)> {
    let number = text.lines().next()?.split_whitespace().nth(1)?;
    let mut parts = number.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// The configuration: every database of the local PostgreSQL, transaction pooling, trust auth.
fn config(port: u16, auth_file: &Path, version: (u32, u32)) -> String {
    let prepared = if version >= (1, 21) { "max_prepared_statements = 200\n" } else { "" };
    format!(
        "[databases]\n* = host=127.0.0.1 port=5432\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\n\
         unix_socket_dir =\nauth_type = trust\nauth_file = {}\npool_mode = transaction\n\
         max_client_conn = 2000\ndefault_pool_size = 40\n\
         ignore_startup_parameters = extra_float_digits,options\n{prepared}",
        auth_file.display()
    )
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// Starts PgBouncer and waits until it answers a query through it.
pub(crate) fn start() -> Result<Pooler, String> {
    let exe = binary()?;
    let out =
        Command::new(&exe).arg("--version").output().map_err(|e| format!("cannot run pgbouncer: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version =
        parse_version(&text).ok_or_else(|| format!("an unexpected `pgbouncer --version`: {text}"))?;
    let dir = bench::target_dir(std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from), &exec::root())
        .join("pgbouncer");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let port = crate::llm::server::free_port()?;
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok::<PathBuf, String>(path)
    };
    let auth = write("users.txt", "\"postgres\" \"\"\n")?;
    let ini = write("pgbouncer.ini", &config(port, &auth, version))?;
    let log = std::fs::File::create(dir.join("pgbouncer.log"))
        .map_err(|e| format!("cannot create the log: {e}"))?;
    let err = log.try_clone().map_err(|e| format!("cannot open the log: {e}"))?;
    let mut command = Command::new(&exe);
    if is_root() {
        command.args(["-u", "postgres"]);
    }
    let child = command
        .arg(&ini)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot start pgbouncer: {e}"))?;
    let mut pooler = Pooler { child, port };
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(status)) = pooler.child.try_wait() {
            return Err(format!(
                "pgbouncer exited at start-up ({status}); see {}",
                dir.join("pgbouncer.log").display()
            ));
        }
        let probe = Command::new("psql")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-qtc",
                "SELECT 1",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if probe.is_ok_and(|s| s.success()) {
            eprintln!("PgBouncer {}.{}: transaction pooling on 127.0.0.1:{port}", version.0, version.1);
            return Ok(pooler);
        }
        if Instant::now() > end {
            pooler.child.kill().ok();
            return Err(format!(
                "pgbouncer did not answer within 10 s; see {}",
                dir.join("pgbouncer.log").display()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_come_from_the_first_line_and_decide_prepared_statements() {
        assert_eq!(parse_version("PgBouncer 1.18.0\nlibevent 2.1.12-stable"), Some((1, 18)));
        assert_eq!(parse_version("PgBouncer 1.23.1"), Some((1, 23)));
        assert_eq!(parse_version("pgbouncer"), None);
        let path = Path::new("/t/users.txt");
        assert!(!config(6432, path, (1, 18)).contains("max_prepared_statements"));
        assert!(config(6432, path, (1, 21)).contains("max_prepared_statements = 200"));
        assert!(config(6432, path, (1, 18)).contains("pool_mode = transaction"));
    }
}
