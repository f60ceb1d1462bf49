#[derive(weft_graph::State, Clone, Debug, Default)]
struct S<T> {
    value: T,
}

fn main() {}
