fn concat(left: &mut String, right: String) {
    left.push_str(&right);
}

#[derive(weft_graph::State, Clone, Debug, Default)]
struct S {
    #[state(reducer = concat)]
    total: u64,
}

fn main() {}
