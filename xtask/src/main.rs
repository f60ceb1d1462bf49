//! weft's task runner, started with `cargo xtask TASK` (an alias in `.cargo/config.toml`).
//!
//! - `cargo xtask ci [STAGE...]`: every check CI runs, in order (services when `CI` is set, fmt, clippy,
//!   test, doc, examples), each with a header and its duration, stopping at the first failure. Naming
//!   stages runs only those.
//! - `cargo xtask services`: makes sure PostgreSQL and Redis answer on their local ports, starting them if
//!   not. With `CI` set a backend that stays unreachable is a failure; elsewhere a loud warning.
//!
//! Standard library only, so that it builds in a second on a fresh clone.

mod ci;
mod exec;
mod services;

use std::process::ExitCode;

const USAGE: &str = "\
usage: cargo xtask TASK

tasks:
  ci [STAGE...]  run every check CI runs, in order, stopping at the first failure;
                 stages: services, fmt, clippy, test, doc, examples (services starts
                 PostgreSQL and Redis when CI is set, else only checks them)
  services       make sure PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379) are up
  help           print this text";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (task, rest) = match args.split_first() {
        Some((task, rest)) => (task.as_str(), rest),
        None => ("help", &[][..]),
    };
    let outcome = match task {
        "ci" => ci::run(rest),
        "services" if rest.is_empty() => services::ensure(services::Policy::from_env()),
        "help" | "-h" | "--help" => {
            println!("{USAGE}");
            Ok(())
        }
        _ => Err(format!("unknown task or argument: `{}`\n\n{USAGE}", args.join(" "))),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}
