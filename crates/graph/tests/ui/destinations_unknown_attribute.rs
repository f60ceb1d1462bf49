use weft_graph::Destinations;

#[derive(Destinations)]
enum Next {
    #[route(start)]
    Agent,
}

fn main() {}
