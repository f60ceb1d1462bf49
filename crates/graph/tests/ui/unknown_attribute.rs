#[derive(weft_graph::State, Clone, Debug, Default)]
struct S {
    #[state(apend)]
    log: Vec<String>,
}

fn main() {}
