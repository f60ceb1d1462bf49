//! The workloads of the Agent Streaming Protocol (v2): a thread's event stream
//! (`POST /threads/{id}/stream/events`, channels `values` and `lifecycle`) held open on one connection, runs
//! of the three-node graph started by `run.start` through `POST /threads/{id}/commands` on another. Every
//! run is checked: its events are the `lifecycle` `running`, four `values` (the input, then one per node,
//! ending with `count` 3) and the `lifecycle` `completed`, their `seq` rising.

use std::time::{Duration, Instant};

use hyper::Method;
use serde_json::{Value, json};

use crate::http::{Conn, Follow};
use crate::servers::Server;
use crate::stats::round;
use crate::workloads::{Figures, RUN_LIMIT, create_thread, duration_figures, load_figures, timed_runs};

/// The events one run of the three-node graph gives on the stream.
const EVENTS_PER_RUN: usize = 6;

/// One run read from the stream.
struct V2Run {
    /// From sending `run.start` to reading the run's first event.
    first_event: Duration,
    /// From sending `run.start` to reading its `lifecycle` end.
    total: Duration,
}

/// Opens the v2 stream of `thread` on a new connection to `addr`; it is followed once its headers came.
async fn open_stream(addr: &str, thread: &str) -> Result<Follow, String> {
    let body = json!({"channels": ["values", "lifecycle"]});
    Conn::open(addr).await?.follow(&format!("/threads/{thread}/stream/events"), &body).await
}

/// Starts a run of the three-node graph on `thread` with command `id` (queued behind any run still
/// ending); when the command was sent.
async fn start_three(conn: &mut Conn, thread: &str, id: u64) -> Result<Instant, String> {
    let params = json!({"assistant_id": "three", "input": {"count": 0}, "multitaskStrategy": "enqueue"});
    let command = json!({"id": id, "method": "run.start", "params": params});
    let sent = Instant::now();
    let answer = conn.json(Method::POST, &format!("/threads/{thread}/commands"), Some(&command)).await?;
    if answer["type"] != json!("success") || !answer["result"]["run_id"].is_string() {
        return Err(format!("run.start on thread {thread} answered {answer}"));
    }
    Ok(sent)
}

/// Reads one run's events from `stream` up to its `lifecycle` end, and checks them.
async fn read_run(stream: &mut Follow, sent: Instant) -> Result<V2Run, String> {
    let mut events = Vec::with_capacity(EVENTS_PER_RUN);
    let mut first_event = None;
    let reading = async {
        loop {
            let (read, event) = stream.next().await?;
            first_event.get_or_insert(read.duration_since(sent));
            let envelope: Value = serde_json::from_str(&event.data)
                .map_err(|e| format!("a v2 event is not JSON ({e}): {}", event.data))?;
            let ended = envelope["method"] == json!("lifecycle")
                && envelope["params"]["data"]["event"] != json!("running");
            events.push(envelope);
            if ended {
                return Ok::<_, String>(read.duration_since(sent));
            }
        }
    };
    let total = tokio::time::timeout(RUN_LIMIT, reading)
        .await
        .map_err(|_| format!("no lifecycle end after {} s", RUN_LIMIT.as_secs()))??;
    check_run(&events)?;
    let first_event = first_event.ok_or("no event")?;
    Ok(V2Run { first_event, total })
}

/// The checks of [`read_run`]: six events with a rising `seq`, the `lifecycle` `running` and
/// `completed` around four `values`, the last with `count` 3.
fn check_run(events: &[Value]) -> Result<(), String> {
    let methods: Vec<&str> = events.iter().map(|e| e["method"].as_str().unwrap_or("?")).collect();
    let lifecycle: Vec<&Value> = events
        .iter()
        .filter(|e| e["method"] == json!("lifecycle"))
        .map(|e| &e["params"]["data"]["event"])
        .collect();
    if lifecycle != [&json!("running"), &json!("completed")] {
        return Err(format!("the run's lifecycle was {lifecycle:?}, expected running then completed"));
    }
    let values: Vec<&Value> =
        events.iter().filter(|e| e["method"] == json!("values")).map(|e| &e["params"]["data"]).collect();
    if events.len() != EVENTS_PER_RUN || values.len() != EVENTS_PER_RUN - 2 {
        return Err(format!("the run gave {methods:?}, expected running, four values and completed"));
    }
    if values.last().map(|v| &v["count"]) != Some(&json!(3)) {
        return Err(format!("the run's last values were {:?}, expected count 3", values.last()));
    }
    let seqs: Vec<Option<u64>> = events.iter().map(|e| e["seq"].as_u64()).collect();
    // The thread numbers the events of every channel, so the ones the filter leaves out are gaps.
    let rising = seqs.windows(2).all(|w| matches!(w, [Some(a), Some(b)] if b > a));
    if !rising {
        return Err(format!("the run's events are numbered {seqs:?}"));
    }
    Ok(())
}

/// Time to the first v2 event: for each run a new thread (made untimed) and its stream opened (untimed),
/// then `run.start`; from sending it to reading the run's first event on the stream. One run at a time.
pub(crate) async fn ttfe(server: &Server, samples: usize) -> Result<Figures, String> {
    let mut conn = Conn::open(&server.addr).await?;
    let (mut firsts, mut totals) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
    for n in 0..3 + samples {
        let thread = create_thread(&mut conn).await?;
        let mut stream = open_stream(&server.addr, &thread).await?;
        let sent = start_three(&mut conn, &thread, 1).await?;
        let run = read_run(&mut stream, sent).await?;
        // The first three warm the server up.
        if n >= 3 {
            firsts.push(run.first_event);
            totals.push(run.total);
        }
    }
    let mut figures = Figures::new();
    duration_figures(&mut figures, "", &firsts);
    duration_figures(&mut figures, "run_", &totals);
    figures.insert("samples".into(), json!(samples));
    Ok(figures)
}

/// v2 events per second: `connections` workers, each with its own thread, its stream held open on one
/// connection and runs started one after another on another for `time`; every event of every run read.
pub(crate) async fn events_per_s(
    server: &Server,
    connections: usize,
    time: Duration,
) -> Result<Figures, String> {
    let prepare = |addr: String| async move {
        let mut conn = Conn::open(&addr).await?;
        let thread = create_thread(&mut conn).await?;
        let mut stream = open_stream(&addr, &thread).await?;
        for id in 1..=2 {
            let sent = start_three(&mut conn, &thread, id).await?;
            read_run(&mut stream, sent).await?;
        }
        Ok::<_, String>(Worker { conn, thread, stream, next_id: 3 })
    };
    let step = |mut w: Worker| async move {
        let sent = start_three(&mut w.conn, &w.thread, w.next_id).await?;
        let total = read_run(&mut w.stream, sent).await?.total;
        w.next_id += 1;
        Ok::<_, String>((w, total))
    };
    let (latencies, elapsed) = timed_runs(server, connections, time, prepare, step).await?;
    let events = latencies.len() * EVENTS_PER_RUN;
    let mut figures = load_figures(&latencies, elapsed, connections);
    figures.insert("events_per_s".into(), json!(round(events as f64 / elapsed.as_secs_f64(), 1)));
    figures.insert("events".into(), json!(events));
    figures.insert("events_per_run".into(), json!(EVENTS_PER_RUN));
    Ok(figures)
}

/// One [`events_per_s`] worker: its command connection, its thread, the thread's stream, and the id of
/// its next command.
struct Worker {
    conn: Conn,
    thread: String,
    stream: Follow,
    next_id: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64, method: &str, data: Value) -> Value {
        json!({"type": "event", "seq": seq, "method": method, "params": {"namespace": [], "data": data}})
    }

    fn run(first_seq: u64, last_count: u64) -> Vec<Value> {
        let mut events = vec![event(first_seq, "lifecycle", json!({"event": "running"}))];
        for (i, count) in [json!(null), json!(1), json!(2), json!(last_count)].into_iter().enumerate() {
            events.push(event(first_seq + 1 + i as u64, "values", json!({"count": count})));
        }
        events.push(event(first_seq + 5, "lifecycle", json!({"event": "completed"})));
        events
    }

    #[test]
    fn a_v2_run_passes_only_whole_ended_and_in_order() {
        assert_eq!(check_run(&run(1, 3)), Ok(()));
        assert_eq!(check_run(&run(13, 3)), Ok(()), "a later run on the same thread");
        assert!(check_run(&run(1, 2)).unwrap_err().contains("expected count 3"));
        let mut failed = run(1, 3);
        failed[5] = event(6, "lifecycle", json!({"event": "failed", "error": "X"}));
        assert!(check_run(&failed).unwrap_err().contains("lifecycle"));
        let mut short = run(1, 3);
        short.remove(2);
        assert!(check_run(&short).unwrap_err().contains("four values"));
        let mut gap = run(1, 3);
        for (n, seq) in [1, 4, 9, 12, 13, 20].into_iter().enumerate() {
            gap[n]["seq"] = json!(seq);
        }
        assert_eq!(check_run(&gap), Ok(()), "the channels left out are gaps");
        gap[4]["seq"] = json!(9);
        assert!(check_run(&gap).unwrap_err().contains("numbered"));
    }
}
