#[derive(weft_graph::State, Clone)]
struct Pair(u32, String);

fn main() {}
