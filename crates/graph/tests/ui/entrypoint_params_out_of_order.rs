use weft_graph::func::entrypoint;

#[entrypoint]
async fn workflow(x: i64, _rt: weft_graph::Runtime, previous: Option<i64>) -> weft_runnable_core::Result<i64> {
    Ok(previous.unwrap_or(x))
}

fn main() {}
