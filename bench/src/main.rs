//! `weft-bench`: every workload (see the library's documentation and `cli.rs` for the command line).

use std::process::ExitCode;

fn main() -> ExitCode {
    weft_bench::main(weft_bench::PROGRAMS)
}
