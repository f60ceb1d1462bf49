use weft_runnable_core::RunnableLambda;

fn main() {
    let _ = RunnableLambda::new(|x: i64| async move { x + 1 });
}
