//! `server_run_wait`: one run of the three-node chain through weft-server in this process, as a client
//! makes it: `POST /threads/{id}/runs/wait` over a keep-alive HTTP/1.1 connection to a server (in memory,
//! no database) listening on a loopback port. The instruction-count gate counts it, so that a change to
//! the server's request path (routing, body parsing, the run queue, the executor hand-off, the answer)
//! moves a count. weft only: `langgraph dev` has no in-process counterpart, and the server workloads
//! proper (`bench/server`) compare the two servers.

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::sync::{Mutex, oneshot};
use weft_server::Server;

use crate::graphs;
use crate::measure::{Info, Line, Options, Threads, Workload, ensure, err, measure};

/// The graph's id on the server, and the assistant made for it.
const GRAPH: &str = "three";

/// A server on a loopback port and one client connection to it.
struct ServerRun {
    /// The client's side of the connection (one request at a time).
    sender: Mutex<SendRequest<Full<Bytes>>>,
    /// `127.0.0.1:PORT`, for the `Host` header.
    addr: String,
    /// Dropped with the workload: the server then stops.
    _stop: oneshot::Sender<()>,
}

impl ServerRun {
    /// `method path` with a JSON body; the answer's JSON. A status other than 2xx is an error.
    async fn call(&self, method: Method, path: &str, body: &Value) -> Result<Value, String> {
        let mut sender = self.sender.lock().await;
        sender.ready().await.map_err(|e| format!("the connection is gone: {e}"))?;
        let request = Request::builder()
            .method(method.clone())
            .uri(path)
            .header("host", &self.addr)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(err)?;
        let response = sender.send_request(request).await.map_err(|e| format!("{method} {path}: {e}"))?;
        let status = response.status();
        let bytes = response.into_body().collect().await.map_err(err)?.to_bytes();
        ensure(status.is_success(), || {
            format!("{method} {path}: {status}: {}", String::from_utf8_lossy(&bytes))
        })?;
        serde_json::from_slice(&bytes).map_err(|e| format!("{method} {path}: the answer is not JSON: {e}"))
    }
}

impl Workload for ServerRun {
    /// The thread the run goes on, made before the op.
    type Ctx = String;
    type Out = Value;

    fn prepare(&mut self, rt: &Runtime) -> Result<String, String> {
        let thread = rt.block_on(self.call(Method::POST, "/threads", &json!({})))?;
        thread["thread_id"].as_str().map(str::to_owned).ok_or_else(|| format!("no thread_id in {thread}"))
    }

    async fn op(&self, thread: &mut String) -> Result<Value, String> {
        let body = json!({"assistant_id": GRAPH, "input": {"count": 0}});
        self.call(Method::POST, &format!("/threads/{thread}/runs/wait"), &body).await
    }

    fn check(&self, out: &Value, thread: &String) -> Result<(), String> {
        ensure(out["count"] == json!(3), || {
            format!("the run on thread {thread} ended with {out}, expected count 3")
        })
    }
}

/// Builds the server (in memory) with the three-node chain, serves it on a loopback port on `rt` and
/// opens one client connection to it.
fn start(rt: &Runtime) -> Result<ServerRun, String> {
    rt.block_on(async {
        let graph = graphs::chain(3, false).compile().map_err(err)?;
        let server = Server::builder().in_memory().graph(GRAPH, graph).build().await.map_err(err)?;
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(err)?;
        let addr = listener.local_addr().map_err(err)?.to_string();
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let shutdown = async move {
                // Either a message or the sender dropped: both mean stop.
                let _ = stopped.await;
            };
            if let Err(error) = server.serve_with_shutdown(listener, shutdown).await {
                eprintln!("[weft-bench] server_run_wait: the server stopped: {error}");
            }
        });
        let stream = TcpStream::connect(&addr).await.map_err(err)?;
        stream.set_nodelay(true).map_err(err)?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(err)?;
        tokio::spawn(async move {
            // Ends when the sender is dropped or the server closes the connection; either is the end.
            let _ = connection.await;
        });
        Ok(ServerRun { sender: Mutex::new(sender), addr, _stop: stop })
    })
}

/// `server_run_wait`: one `/runs/wait` run of the three-node chain per op, on a fresh thread made
/// before it, through weft-server on a current-thread runtime (client and server on one thread).
pub(crate) fn server_run_wait(opts: &Options) -> Result<Line, String> {
    let info = Info::steps("server_run_wait", 3).unit("superstep").supplementary();
    measure(opts, info, Threads::One, start, Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_goes_through_the_server_and_a_failed_request_is_an_error() {
        let line = server_run_wait(&Options { quick: true, ..Options::default() }).unwrap();
        assert_eq!(line["workload"], "server_run_wait");
        assert_eq!(line["repeats"], 1);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut server = start(&rt).unwrap();
        let missing = rt.block_on(server.call(Method::POST, "/threads/nope/runs/wait", &json!({})));
        assert!(missing.unwrap_err().contains("/threads/nope/runs/wait: 4"), "a 4xx status is an error");
        let thread = server.prepare(&rt).unwrap();
        assert!(server.check(&json!({"count": 2}), &thread).unwrap_err().contains("expected count 3"));
    }
}
