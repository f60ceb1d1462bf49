#[derive(weft_graph::State, Clone)]
enum Mode {
    A,
    B,
}

fn main() {}
