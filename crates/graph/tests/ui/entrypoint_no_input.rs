use weft_graph::func::entrypoint;

#[entrypoint]
async fn workflow() -> weft_runnable_core::Result<i64> {
    Ok(1)
}

fn main() {}
