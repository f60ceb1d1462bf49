//! `weft-bench-run-wait`: the workloads of the `RUN_WAIT` group alone, each run as `weft-bench` runs it.

use std::process::ExitCode;

fn main() -> ExitCode {
    weft_bench::main(&[&weft_bench::RUN_WAIT])
}
