use weft_graph::func::task;

#[task(retries = 3)]
async fn double(x: i64) -> weft_runnable_core::Result<i64> {
    Ok(x * 2)
}

fn main() {}
