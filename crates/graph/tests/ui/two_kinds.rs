#[derive(weft_graph::State, Clone, Debug, Default)]
struct S {
    #[state(append, untracked)]
    log: Vec<String>,
}

fn main() {}
