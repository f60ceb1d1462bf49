//! `weft-bench-engine`: the workloads of the `ENGINE` group alone, each run as `weft-bench` runs it.

use std::process::ExitCode;

fn main() -> ExitCode {
    weft_bench::main(&[&weft_bench::ENGINE])
}
