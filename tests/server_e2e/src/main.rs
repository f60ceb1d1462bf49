//! Serves the end-to-end suite's graphs with weft-server: `weft-server-e2e --port N [--db PATH]` (an
//! in-memory database without `--db`). `python/run.py` starts it beside `langgraph dev` and runs the same
//! suite against both.

mod graphs;

use std::process::ExitCode;

use weft_server::Server;

fn usage() -> ExitCode {
    eprintln!("usage: weft-server-e2e --port PORT [--db PATH]");
    ExitCode::FAILURE
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut port = None;
    let mut db = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--port" => port = rest.next().and_then(|p| p.parse::<u16>().ok()),
            "--db" => db = rest.next().cloned(),
            _ => return usage(),
        }
    }
    let Some(port) = port else { return usage() };
    let built = async {
        let builder = Server::builder()
            .graph("simple", graphs::simple()?)
            .graph("hitl", graphs::hitl()?)
            .graph("chat", graphs::chat()?)
            .graph("nested", graphs::nested()?)
            .graph("slow", graphs::slow()?)
            .graph("fail", graphs::fail()?)
            .graph("three", graphs::three()?);
        let builder = match db {
            Some(path) => builder.sqlite(path),
            None => builder.in_memory(),
        };
        Ok::<_, Box<dyn std::error::Error>>(builder.build().await?)
    };
    let server = match built.await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("weft-server-e2e: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("weft-server-e2e listening on http://127.0.0.1:{port}");
    match server.serve(format!("127.0.0.1:{port}")).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weft-server-e2e: {e}");
            ExitCode::FAILURE
        }
    }
}
