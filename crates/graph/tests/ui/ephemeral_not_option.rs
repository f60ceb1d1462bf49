#[derive(weft_graph::State, Clone, Debug, Default)]
struct S {
    #[state(ephemeral)]
    flash: String,
}

fn main() {}
