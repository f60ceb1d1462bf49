//! `weft-langgraph-diff`: runs the differential scenarios against weft and prints one JSON line per
//! scenario, `{"scenario": NAME, "observations": [...]}` (or `"crash"` when the scenario itself broke),
//! the shape `python/run.py` prints for LangGraph. `cargo xtask langgraph-diff` compares the two.
//!
//! usage: weft-langgraph-diff [--list] [SCENARIO...]

mod agents;
mod channels;
mod create_agent;
mod durability;
mod error_handlers;
mod functional;
mod interrupts;
mod kit;
mod middleware;
mod nodes;
mod observe;
mod rec;
mod send_command;
mod streams;
mod subgraphs;
mod threads;
mod time_travel;
mod timeouts;

use std::process::ExitCode;

use futures::future::BoxFuture;
use serde_json::json;

use crate::rec::Rec;

/// What a scenario body returns: `Err` when the scenario could not be set up (a weft error there is an
/// observation, recorded through [`Rec`], not a crash).
pub(crate) type Outcome = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// A scenario: records what a user observes into the [`Rec`].
pub(crate) type Scenario = for<'a> fn(&'a mut Rec) -> BoxFuture<'a, Outcome>;

/// Every scenario, by theme.
fn all() -> Vec<(&'static str, Scenario)> {
    [
        channels::SCENARIOS,
        send_command::SCENARIOS,
        interrupts::SCENARIOS,
        subgraphs::SCENARIOS,
        durability::SCENARIOS,
        time_travel::SCENARIOS,
        streams::SCENARIOS,
        agents::SCENARIOS,
        nodes::SCENARIOS,
        threads::SCENARIOS,
        functional::SCENARIOS,
        create_agent::SCENARIOS,
        middleware::SCENARIOS,
        timeouts::SCENARIOS,
        error_handlers::SCENARIOS,
    ]
    .concat()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let scenarios = all();
    if args.first().map(String::as_str) == Some("--list") {
        for (name, _) in &scenarios {
            println!("{name}");
        }
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("cannot start a tokio runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let wanted: Vec<&str> = if args.is_empty() {
        scenarios.iter().map(|(name, _)| *name).collect()
    } else {
        args.iter().map(String::as_str).collect()
    };
    for name in wanted {
        let line = match scenarios.iter().find(|(n, _)| *n == name) {
            None => json!({"scenario": name, "crash": "no such scenario"}),
            Some((_, scenario)) => {
                let mut rec = Rec::default();
                match runtime.block_on(scenario(&mut rec)) {
                    Ok(()) => json!({"scenario": name, "observations": rec.obs}),
                    Err(err) => json!({"scenario": name, "crash": err.to_string()}),
                }
            }
        };
        println!("{line}");
    }
    ExitCode::SUCCESS
}

/// Declares a module's scenarios: `scenarios![a, b]` makes `SCENARIOS`, each entry named after its
/// function.
#[macro_export]
macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        /// This theme's scenarios.
        pub(crate) const SCENARIOS: &[(&str, $crate::Scenario)] = &[$((stringify!($name), $name)),*];
    };
}
