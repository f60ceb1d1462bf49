use weft_graph::Destinations;

#[derive(Destinations)]
enum Next {
    Agent,
    Tools(String),
}

fn main() {}
