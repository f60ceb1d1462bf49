//! The local backends that weft's backend tests talk to: PostgreSQL and Redis.
//!
//! The rule: in CI (the `CI` environment variable set) a backend that cannot be reached is a failure;
//! elsewhere it is a loud warning, and the tests that need it skip themselves just as loudly.

use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::exec;

/// One backend: where it listens and how to start it on the project's machines.
#[derive(Debug)]
pub(crate) struct Service {
    /// What a person calls it.
    pub(crate) name: &'static str,
    /// Where it listens.
    pub(crate) addr: &'static str,
    /// A shell command that starts it (the machine's own start command; a no-op when already running).
    pub(crate) start: &'static str,
}

/// The backends, in the order they are checked.
pub(crate) const SERVICES: [Service; 2] = [
    Service {
        name: "PostgreSQL",
        addr: "127.0.0.1:5432",
        start: "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
    },
    Service {
        name: "Redis",
        addr: "127.0.0.1:6379",
        start: "redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save \"\" --appendonly no \
                --dir /var/lib/redis --logfile /var/log/redis/ci.log",
    },
];

/// How long a freshly started backend gets to accept connections.
const START_GRACE: Duration = Duration::from_secs(30);

/// What an unreachable backend means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Policy {
    /// In CI: a failure.
    Required,
    /// Elsewhere: a loud warning.
    Optional,
}

impl Policy {
    /// `Required` when the `CI` environment variable is set (to anything but empty, `0` or `false`).
    pub(crate) fn from_env() -> Self {
        if is_ci() { Policy::Required } else { Policy::Optional }
    }
}

/// Whether this is a CI run.
pub(crate) fn is_ci() -> bool {
    weft_testenv::is_ci()
}

/// Makes sure every backend is reachable, starting the ones that are not.
pub(crate) fn ensure(policy: Policy) -> Result<(), String> {
    ensure_all(&SERVICES, policy, START_GRACE)
}

fn ensure_all(services: &[Service], policy: Policy, grace: Duration) -> Result<(), String> {
    let mut missing = Vec::new();
    for service in services {
        if reachable(service.addr) {
            println!("{}: reachable at {}", service.name, service.addr);
            continue;
        }
        println!("{}: not reachable at {}, starting it", service.name, service.addr);
        let started = exec::run(Command::new("sh").arg("-c").arg(service.start));
        if let Err(err) = &started {
            println!("{}: {err}", service.name);
        }
        if started.is_ok() && wait_until_reachable(service.addr, grace) {
            println!("{}: reachable at {}", service.name, service.addr);
        } else {
            missing.push(format!("{} at {} (start command: {})", service.name, service.addr, service.start));
        }
    }
    judge(&missing, policy)
}

/// Reports, without starting anything, the backends that cannot be reached (a warning, never a failure).
pub(crate) fn warn_if_unreachable() {
    let missing: Vec<String> = SERVICES
        .iter()
        .filter(|service| !reachable(service.addr))
        .map(|service| format!("{} at {} (`cargo xtask services` starts it)", service.name, service.addr))
        .collect();
    if missing.is_empty() {
        println!("backends reachable: {}", SERVICES.map(|s| s.name).join(", "));
    }
    // Optional never fails.
    let _ = judge(&missing, Policy::Optional);
}

fn judge(missing: &[String], policy: Policy) -> Result<(), String> {
    if missing.is_empty() {
        return Ok(());
    }
    match policy {
        Policy::Required => Err(format!("backends unreachable in CI: {}", missing.join("; "))),
        Policy::Optional => {
            let rule = "!".repeat(78);
            eprintln!("{rule}");
            eprintln!("WARNING: backends unreachable; the tests that need them will be skipped:");
            for line in missing {
                eprintln!("  - {line}");
            }
            eprintln!("In CI (CI set) this is a failure.");
            eprintln!("{rule}");
            Ok(())
        }
    }
}

/// Whether something accepts TCP connections at `addr`.
fn reachable(addr: &str) -> bool {
    addr.parse::<SocketAddr>()
        .is_ok_and(|addr| TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok())
}

fn wait_until_reachable(addr: &str, grace: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < grace {
        if reachable(addr) {
            return true;
        }
        thread::sleep(Duration::from_millis(250));
    }
    reachable(addr)
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    #[test]
    fn a_listening_port_is_reachable_and_a_closed_one_is_not() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        assert!(reachable(&addr));
        drop(listener);
        assert!(!reachable(&addr));
    }

    #[test]
    fn a_reachable_backend_is_not_started_again() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr: &'static str = listener.local_addr().unwrap().to_string().leak();
        // The start command would fail if it ran.
        let services = [Service { name: "up", addr, start: "exit 1" }];
        assert_eq!(ensure_all(&services, Policy::Required, Duration::ZERO), Ok(()));
    }

    #[test]
    fn a_backend_that_does_not_come_up_fails_in_ci_naming_it() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr: &'static str = listener.local_addr().unwrap().to_string().leak();
        drop(listener);
        let services = [Service { name: "Down", addr, start: "true" }];
        let err = ensure_all(&services, Policy::Required, Duration::from_millis(100)).unwrap_err();
        assert!(err.contains(&format!("Down at {addr}")), "{err}");
        assert_eq!(ensure_all(&services, Policy::Optional, Duration::from_millis(100)), Ok(()));
    }

    #[test]
    fn an_unreachable_backend_fails_in_ci_and_only_warns_elsewhere() {
        let missing = vec!["Redis at 127.0.0.1:6379".to_owned()];
        let err = judge(&missing, Policy::Required).unwrap_err();
        assert!(err.contains("Redis at 127.0.0.1:6379"), "{err}");
        assert_eq!(judge(&missing, Policy::Optional), Ok(()));
        assert_eq!(judge(&[], Policy::Required), Ok(()));
    }
}
