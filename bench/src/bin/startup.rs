//! A minimal binary that links weft's graph engine and builds nothing: the `startup` workload of
//! `weft-bench` times a fresh process of it (LangGraph's equivalent is `python -c "import langgraph.graph"`).
//!
//! With `--rss` it prints its peak resident set size (`VmHWM`, in KiB) before exiting.

fn main() {
    // Keep the graph crate linked in, as a program using it would be.
    std::hint::black_box(weft_graph::END);
    if std::env::args().nth(1).as_deref() == Some("--rss") {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let kib = status
            .lines()
            .find(|line| line.starts_with("VmHWM:"))
            .and_then(|line| line.split_whitespace().nth(1))
            .unwrap_or("0");
        println!("{kib}");
    }
}
