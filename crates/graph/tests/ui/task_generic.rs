use weft_graph::func::task;

#[task]
async fn echo<T: Clone>(x: T) -> weft_runnable_core::Result<T> {
    Ok(x)
}

fn main() {}
