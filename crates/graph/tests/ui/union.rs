#[derive(weft_graph::State, Clone, Copy)]
union Bits {
    a: u32,
    b: f32,
}

fn main() {}
