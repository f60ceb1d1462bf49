use weft_graph::func::task;

#[task]
async fn double(x: i64) -> i64 {
    x * 2
}

fn main() {}
