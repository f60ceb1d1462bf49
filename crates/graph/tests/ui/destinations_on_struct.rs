use weft_graph::Destinations;

#[derive(Destinations)]
struct Next {
    agent: bool,
}

fn main() {}
