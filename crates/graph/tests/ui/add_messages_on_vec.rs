use weft_graph::messages::Message;

#[derive(weft_graph::State, Clone, Debug, Default)]
struct S {
    #[state(add_messages)]
    messages: Vec<Message>,
}

fn main() {}
