//! One listener's view of a thread's runs as protocol events, as langgraph-api's `EventStreamingSession`
//! makes them: each run's events (weft's stream events, `values|ns` and the like) become protocol events
//! with a monotonic `seq` (carried from run to run), an `event_id` (the source event's id, `.n` for the
//! second and later events made of one source event, `synth:<run>:...` for the ones the session makes),
//! a `lifecycle` per run and subgraph, `input.requested` per interrupt, each checkpoint once as the
//! protocol's `Checkpoint` (`{id, parent_id, step, source}`), each tool call's `tools` events with its
//! finished output mirrored as a `tool` message on the `messages` channel; the last events (as many as
//! the session keeps, [`DEFAULT_BUFFER`] unless `LSD_PROTOCOL_V2_BUFFER_SIZE` says otherwise) are kept
//! for a `since` replay, and a `since` older than what is kept is a [`ResumeGap`].

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use super::filter::graph_name_of;
use super::messages::Messages;
use crate::runs::channel::Event;

/// How many events a session keeps for replay unless `LSD_PROTOCOL_V2_BUFFER_SIZE` says otherwise
/// (langgraph-api's default).
pub(crate) const DEFAULT_BUFFER: usize = 10_000;

/// One protocol event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProtocolEvent {
    pub(crate) seq: u64,
    /// `input.requested` for the `input` channel, else the channel.
    pub(crate) method: String,
    pub(crate) namespace: Vec<String>,
    pub(crate) data: Value,
    /// The whole envelope, as JSON text.
    pub(crate) json: String,
}

/// A `since` older than the oldest event kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ResumeGap {
    pub(crate) since: u64,
    pub(crate) min_available_seq: u64,
}

impl std::fmt::Display for ResumeGap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "resume gap: since={} is older than min_available_seq={}",
            self.since, self.min_available_seq
        )
    }
}

/// What the session knows of one namespace of the run.
#[derive(Debug, Clone)]
struct Space {
    status: &'static str,
    graph_name: String,
}

/// The run being read.
#[derive(Debug, Default)]
struct Run {
    run_id: String,
    graph_name: String,
    spaces: HashMap<Vec<String>, Space>,
    /// Namespaces whose `started` went out.
    started: HashSet<Vec<String>>,
    terminal: bool,
    /// Interrupts asked for, by id, with their namespace.
    interrupts: HashMap<String, Vec<String>>,
    messages: Messages,
    /// The checkpoints sent, by namespace key and id (each goes out once).
    checkpoints: HashSet<(String, String)>,
    /// The source event being read: its id and how many events were made of it.
    source: Option<(String, usize)>,
}

/// A listener's session.
#[derive(Debug, Default)]
pub(crate) struct Session {
    seq: u64,
    buffer: VecDeque<Arc<ProtocolEvent>>,
    capacity: usize,
    run: Run,
    out: Vec<Arc<ProtocolEvent>>,
    /// The time of the last source event read (its id's milliseconds): every event's `timestamp`, so
    /// that a replay of the same source is the same, byte for byte.
    clock: Option<u64>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The internal key of a namespace (its segments joined by NUL, as the reference joins them).
fn key_of(namespace: &[String]) -> String {
    namespace.join("\0")
}

/// The interrupts in a `__interrupt__` list (or a state holding one), as `input.requested` data.
fn interrupts_of(value: &Value) -> Vec<Value> {
    let list = value.as_array().or_else(|| value.get("__interrupt__")?.as_array());
    list.into_iter()
        .flatten()
        .filter_map(|entry| {
            let id = entry.get("id")?.as_str()?;
            let mut request = Map::from_iter([("interrupt_id".to_owned(), json!(id))]);
            if let Some(value) = entry.get("value") {
                request.insert("payload".to_owned(), value.clone());
            }
            Some(Value::Object(request))
        })
        .collect()
}

/// A checkpoint (as the `checkpoints` stream mode sends it) as the protocol's `Checkpoint`: its `id`,
/// its parent's (`parent_id`), its `step` and `source`; `None` without an id.
fn checkpoint_envelope(data: &Value) -> Option<Value> {
    let id = data.pointer("/config/configurable/checkpoint_id")?.as_str()?;
    let mut envelope = Map::from_iter([("id".to_owned(), json!(id))]);
    if let Some(parent) = data.pointer("/parent_config/configurable/checkpoint_id").and_then(Value::as_str) {
        envelope.insert("parent_id".to_owned(), json!(parent));
    }
    for key in ["step", "source"] {
        if let Some(value) = data.get("metadata").and_then(|m| m.get(key)).filter(|v| !v.is_null()) {
            envelope.insert(key.to_owned(), value.clone());
        }
    }
    Some(Value::Object(envelope))
}

/// A run's status as a lifecycle event (`success` is `completed`, `error` and `timeout` `failed`).
pub(crate) fn lifecycle_status(run_status: &str) -> &'static str {
    match run_status {
        "success" => "completed",
        "error" | "timeout" => "failed",
        "interrupted" => "interrupted",
        _ => "running",
    }
}

impl Session {
    /// A session keeping the last `capacity` events (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        Self { capacity: capacity.max(1), ..Self::default() }
    }

    /// The last `seq` given.
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// The events made since the last call.
    pub(crate) fn take(&mut self) -> Vec<Arc<ProtocolEvent>> {
        std::mem::take(&mut self.out)
    }

    /// The kept events after `since` (all of them without one), or a [`ResumeGap`] when events after
    /// `since` are no longer kept.
    pub(crate) fn replay(&self, since: Option<u64>) -> Result<Vec<Arc<ProtocolEvent>>, ResumeGap> {
        let Some(since) = since else { return Ok(self.buffer.iter().cloned().collect()) };
        if let Some(first) = self.buffer.front() {
            if since + 1 < first.seq {
                return Err(ResumeGap { since, min_available_seq: first.seq });
            }
        }
        Ok(self.buffer.iter().filter(|e| e.seq > since).cloned().collect())
    }

    fn push(
        &mut self,
        method: &str,
        namespace: &[String],
        data: Value,
        node: Option<&str>,
        id: Option<String>,
    ) {
        self.seq += 1;
        let event_id = id.unwrap_or_else(|| match &mut self.run.source {
            Some((source, n)) => {
                let id = if *n == 0 { source.clone() } else { format!("{source}.{n}") };
                *n += 1;
                id
            }
            None => format!("synth:{}:{}", self.run.run_id, self.seq),
        });
        let method = if method == "input" { "input.requested" } else { method };
        let timestamp = self.clock.unwrap_or_else(now_ms);
        let mut params = json!({"namespace": namespace, "timestamp": timestamp, "data": data});
        if let (Some(node), Some(p)) = (node, params.as_object_mut()) {
            p.insert("node".to_owned(), json!(node));
        }
        let envelope = json!({"type": "event", "event_id": event_id, "seq": self.seq, "method": method, "params": params});
        let event = Arc::new(ProtocolEvent {
            seq: self.seq,
            method: method.to_owned(),
            namespace: namespace.to_vec(),
            data: params["data"].clone(),
            json: envelope.to_string(),
        });
        self.buffer.push_back(Arc::clone(&event));
        while self.buffer.len() > self.capacity {
            self.buffer.pop_front();
        }
        self.out.push(event);
    }

    fn synth_id(&self, parts: &[&str]) -> String {
        format!("synth:{}:{}", self.run.run_id, parts.join("|"))
    }

    /// Sets the clock from a source event's id (`<ms>-<seq>`).
    pub(crate) fn tick(&mut self, event_id: &str) {
        if let Some(ms) = event_id.split('-').next().and_then(|ms| ms.parse().ok()) {
            self.clock = Some(ms);
        }
    }

    /// A new run starts (its `running` lifecycle); the seq goes on from the last run's.
    pub(crate) fn start_run(&mut self, run_id: &str, graph_name: &str) {
        self.run = Run { run_id: run_id.to_owned(), graph_name: graph_name.to_owned(), ..Run::default() };
        self.run.spaces.insert(Vec::new(), Space { status: "running", graph_name: graph_name.to_owned() });
        let id = self.synth_id(&["lc", "", "running"]);
        self.push("lifecycle", &[], json!({"event": "running", "graph_name": graph_name}), None, Some(id));
    }

    /// The namespace an interrupt the run asked for came from (`None` for one this session has not seen).
    pub(crate) fn interrupt_namespace(&self, interrupt_id: &str) -> Option<&[String]> {
        self.run.interrupts.get(interrupt_id).map(Vec::as_slice)
    }

    /// Whether a run has been read yet.
    pub(crate) fn has_run(&self) -> bool {
        !self.run.run_id.is_empty()
    }

    /// The tree of the run's namespaces from `namespace` down (`agent.getTree`): each with its status,
    /// graph name and children.
    pub(crate) fn tree(&self, namespace: &[String]) -> Value {
        let (status, graph_name) = match self.run.spaces.get(namespace) {
            Some(space) => (space.status, space.graph_name.clone()),
            None if namespace.is_empty() => ("started", self.run.graph_name.clone()),
            None => ("started", graph_name_of(namespace)),
        };
        let mut children: Vec<&Vec<String>> = self
            .run
            .spaces
            .keys()
            .filter(|ns| ns.len() == namespace.len() + 1 && ns.starts_with(namespace))
            .collect();
        children.sort();
        let mut node = json!({"namespace": namespace, "status": status, "graph_name": graph_name});
        if let (false, Some(n)) = (children.is_empty(), node.as_object_mut()) {
            n.insert("children".to_owned(), children.iter().map(|c| self.tree(c)).collect());
        }
        node
    }

    /// Whether the run with this id is the one being read.
    pub(crate) fn is_run(&self, run_id: &str) -> bool {
        self.run.run_id == run_id
    }

    /// Sends a namespace's lifecycle event unless it says what was said last.
    fn namespace_lifecycle(&mut self, namespace: &[String], status: &'static str, error: Option<&str>) {
        let graph_name =
            self.run.spaces.get(namespace).map_or_else(|| graph_name_of(namespace), |s| s.graph_name.clone());
        if self.run.spaces.get(namespace).is_some_and(|s| s.status == status) && error.is_none() {
            return;
        }
        self.run.spaces.insert(namespace.to_vec(), Space { status, graph_name: graph_name.clone() });
        let mut data = json!({"event": status, "graph_name": graph_name});
        if let (Some(error), Some(d)) = (error, data.as_object_mut()) {
            d.insert("error".to_owned(), json!(error));
        }
        let id = self.synth_id(&["lc", &key_of(namespace), status]);
        self.push("lifecycle", namespace, data, None, Some(id));
    }

    /// A subgraph's namespace seen for the first time: its `started`.
    fn enter(&mut self, namespace: &[String]) {
        for len in 1..=namespace.len() {
            let space = &namespace[..len];
            if !self.run.started.insert(space.to_vec()) {
                continue;
            }
            let graph_name = graph_name_of(space);
            let last = &space[len - 1];
            let mut data = json!({"event": "started", "namespace": space, "graph_name": graph_name});
            if let (Some((_, task)), Some(d)) = (last.split_once(':'), data.as_object_mut()) {
                d.insert("trigger_call_id".to_owned(), json!(task));
            }
            self.run.spaces.insert(space.to_vec(), Space { status: "started", graph_name });
            self.push("lifecycle", space, data, None, None);
        }
    }

    /// A node of `parent` finished: the child namespace it ran as (the oldest still going) completes.
    fn child_completed(&mut self, parent: &[String], node: &str) {
        if node.is_empty() || node.starts_with("__") {
            return;
        }
        let prefix = format!("{node}:");
        let mut open: Vec<Vec<String>> = self
            .run
            .spaces
            .iter()
            .filter(|(ns, s)| {
                s.status == "started"
                    && ns.len() == parent.len() + 1
                    && ns.starts_with(parent)
                    && ns.last().is_some_and(|l| l == node || l.starts_with(&prefix))
            })
            .map(|(ns, _)| ns.clone())
            .collect();
        open.sort();
        if let Some(ns) = open.first() {
            self.finish_messages(ns);
            self.namespace_lifecycle(ns, "completed", None);
        }
    }

    fn finish_messages(&mut self, namespace: &[String]) {
        for data in self.run.messages.finish(namespace) {
            self.push("messages", namespace, data, None, None);
        }
    }

    fn ask_input(&mut self, namespace: &[String], requests: Vec<Value>) {
        let mut asked = false;
        for request in requests {
            let Some(id) = request.get("interrupt_id").and_then(Value::as_str).map(str::to_owned) else {
                continue;
            };
            if id.is_empty() || self.run.interrupts.contains_key(&id) {
                continue;
            }
            self.run.interrupts.insert(id.clone(), namespace.to_vec());
            let synth = self.synth_id(&["input", &key_of(namespace), &id]);
            self.push("input", namespace, request, None, Some(synth));
            asked = true;
        }
        if asked {
            self.namespace_lifecycle(&[], "interrupted", None);
            self.run.terminal = true;
        }
    }

    /// Reads one event of the run's stream (`metadata` events are the caller's).
    pub(crate) fn ingest(&mut self, event: &Event) {
        let (method, namespace) = match event.name.split_once('|') {
            Some((method, rest)) => (method, rest.split('|').map(str::to_owned).collect::<Vec<_>>()),
            None => (event.name.as_str(), Vec::new()),
        };
        let Ok(data) = serde_json::from_str::<Value>(&event.data) else { return };
        self.tick(&event.id);
        if method == "checkpoints" {
            // Checkpoints neither open namespaces nor end messages.
            self.run.source = Some((event.id.clone(), 0));
            self.checkpoint(&namespace, &data);
            self.run.source = None;
            return;
        }
        if method == "error" {
            let message =
                data.get("message").and_then(Value::as_str).map_or_else(|| data.to_string(), str::to_owned);
            self.end_run_failed(&message);
            return;
        }
        self.run.source = Some((event.id.clone(), 0));
        if !namespace.is_empty() && self.run.started.len() < 1024 {
            self.enter(&namespace);
        }
        if method != "messages" {
            self.finish_messages(&namespace);
        }
        match method {
            "values" => {
                self.ask_input(&namespace, interrupts_of(&data));
                let values = super::state::normalize(&data);
                if values.as_object().is_none_or(|m| !m.is_empty()) {
                    self.push("values", &namespace, values, None, None);
                }
            }
            "updates" => self.update(&namespace, &data),
            "custom" => self.push("custom", &namespace, json!({"payload": data}), None, None),
            "tasks" => self.push("tasks", &namespace, data, None, None),
            "tools" => {
                self.push("tools", &namespace, data.clone(), None, None);
                self.tool_output_message(&namespace, &data);
            }
            "messages" => {
                for data in self.run.messages.chunk(&namespace, &data) {
                    self.push("messages", &namespace, data, None, None);
                }
            }
            _ => {}
        }
        self.run.source = None;
    }

    /// An `updates` event: one node's update (or the interrupts).
    fn update(&mut self, namespace: &[String], data: &Value) {
        let single = data.as_object().filter(|m| m.len() == 1).and_then(|m| m.iter().next());
        let (node, values) = match single {
            Some((node, values)) => (Some(node.as_str()), values.clone()),
            None => (None, data.clone()),
        };
        if node == Some("__interrupt__") {
            self.ask_input(namespace, interrupts_of(&values));
            return;
        }
        let values = if values.is_object() { values } else { json!({"value": values}) };
        self.ask_input(namespace, interrupts_of(&values));
        let values = super::state::normalize(&values);
        if values.as_object().is_none_or(|m| !m.is_empty()) {
            self.push("updates", namespace, values, node, None);
        }
        if let Some(node) = node {
            self.child_completed(namespace, node);
        }
    }

    /// A `checkpoints` event (the server's `checkpoints` stream mode: a checkpoint with its config, parent
    /// and metadata) as the protocol's `Checkpoint`, sent once per namespace and id.
    fn checkpoint(&mut self, namespace: &[String], data: &Value) {
        let Some(envelope) = checkpoint_envelope(data) else { return };
        let Some(id) = envelope.get("id").and_then(Value::as_str).map(str::to_owned) else { return };
        let key = key_of(namespace);
        if !self.run.checkpoints.insert((key.clone(), id.clone())) {
            return;
        }
        let synth = self.synth_id(&["checkpoint", &key, &id]);
        self.push("checkpoints", namespace, envelope, None, Some(synth));
    }

    /// A finished tool call's output mirrored on the `messages` channel as a `tool` message, in a
    /// namespace of its own (`tools:<tool_call_id>`), as langgraph-api's `_emit_tool_output_message` does.
    fn tool_output_message(&mut self, namespace: &[String], data: &Value) {
        if data.get("event").and_then(Value::as_str) != Some("tool-finished") {
            return;
        }
        let Some(output) = data.get("output").and_then(Value::as_object) else { return };
        let call = data.get("tool_call_id").or_else(|| output.get("tool_call_id")).and_then(Value::as_str);
        let own = output.get("id").and_then(Value::as_str).filter(|id| !id.is_empty());
        let Some(id) = own.map(str::to_owned).or_else(|| call.map(|c| format!("tool-{c}"))) else { return };
        let content = match output.get("content") {
            Some(Value::String(text)) => text.clone(),
            None | Some(Value::Null) => String::new(),
            Some(other) => other.to_string(),
        };
        let mut start = json!({"event": "message-start", "role": "tool", "id": id});
        let mut space = namespace.to_vec();
        if let (Some(call), Some(st)) = (call, start.as_object_mut()) {
            st.insert("tool_call_id".to_owned(), json!(call));
            space.push(format!("tools:{call}"));
        }
        let block = json!({"type": "text", "text": content});
        for data in [
            start,
            json!({"event": "content-block-start", "index": 0, "content": {"type": "text", "text": ""}}),
            json!({"event": "content-block-delta", "index": 0, "content": block}),
            json!({"event": "content-block-finish", "index": 0, "content": block}),
            json!({"event": "message-finish", "metadata": {}}),
        ] {
            self.push("messages", &space, data, None, None);
        }
    }

    /// Closes what is still open below the root, deepest first.
    fn close_spaces(&mut self) {
        for (namespace, data) in self.run.messages.finish_all() {
            self.push("messages", &namespace, data, None, None);
        }
        let mut open: Vec<Vec<String>> = self
            .run
            .spaces
            .iter()
            .filter(|(ns, s)| !ns.is_empty() && s.status == "started")
            .map(|(ns, _)| ns.clone())
            .collect();
        open.sort_by_key(|ns| std::cmp::Reverse(ns.len()));
        for ns in open {
            self.namespace_lifecycle(&ns, "completed", None);
        }
    }

    /// The run ended with `run_status` (`interrupted` when the thread has interrupts pending).
    pub(crate) fn end_run(&mut self, run_status: &str) {
        if self.run.terminal {
            return;
        }
        let status = lifecycle_status(run_status);
        if status == "running" {
            return;
        }
        self.run.terminal = true;
        self.close_spaces();
        self.namespace_lifecycle(&[], status, None);
    }

    /// The run failed with `message`.
    fn end_run_failed(&mut self, message: &str) {
        self.run.terminal = true;
        self.close_spaces();
        self.namespace_lifecycle(&[], "failed", Some(message));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: &str, name: &str, data: Value) -> Event {
        Event { id: id.to_owned(), name: name.to_owned(), data: data.to_string() }
    }

    fn methods(events: &[Arc<ProtocolEvent>]) -> Vec<&str> {
        events.iter().map(|e| e.method.as_str()).collect()
    }

    #[test]
    fn a_run_becomes_numbered_protocol_events() {
        let mut s = Session::new(DEFAULT_BUFFER);
        s.start_run("r", "g");
        s.ingest(&event("5-0", "values", json!({"items": []})));
        s.ingest(&event("6-0", "updates|inner:t1", json!({"x": {"items": ["x"]}})));
        s.ingest(&event("7-0", "updates", json!({"inner": {"items": ["x"]}})));
        s.ingest(&event("8-0", "custom", json!({"p": 1})));
        s.end_run("success");
        let out = s.take();
        assert_eq!(
            methods(&out),
            ["lifecycle", "values", "lifecycle", "updates", "updates", "lifecycle", "custom", "lifecycle"]
        );
        assert_eq!(out.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=8).collect::<Vec<_>>());
        assert_eq!(
            out[2].data,
            json!({"event": "started", "namespace": ["inner:t1"], "graph_name": "inner", "trigger_call_id": "t1"})
        );
        assert_eq!(out[5].data, json!({"event": "completed", "graph_name": "inner"}));
        assert_eq!(out[6].data, json!({"payload": {"p": 1}}));
        let envelope: Value = serde_json::from_str(&out[3].json).unwrap();
        assert_eq!(envelope["event_id"], "6-0.1", "the second event made of one source event");
        assert_eq!(envelope["params"]["node"], "x");
        assert_eq!(envelope["params"]["timestamp"], 6);
        let first: Value = serde_json::from_str(&out[0].json).unwrap();
        assert_eq!(first["event_id"], "synth:r:lc||running");
        // The next run goes on counting.
        s.start_run("r2", "g");
        assert_eq!(s.take()[0].seq, 9);
    }

    #[test]
    fn interrupts_are_input_requests_and_end_the_run_interrupted() {
        let mut s = Session::new(DEFAULT_BUFFER);
        s.start_run("r", "g");
        s.ingest(&event(
            "1-0",
            "values",
            json!({"items": [], "__interrupt__": [{"id": "i1", "value": "q?"}]}),
        ));
        s.ingest(&event("2-0", "updates", json!({"__interrupt__": [{"id": "i1", "value": "q?"}]})));
        s.end_run("success");
        let out = s.take();
        assert_eq!(methods(&out), ["lifecycle", "input.requested", "lifecycle", "values"]);
        assert_eq!(out[1].data, json!({"interrupt_id": "i1", "payload": "q?"}));
        assert_eq!(out[2].data, json!({"event": "interrupted", "graph_name": "g"}));
        assert_eq!(out[3].data, json!({"items": []}));
    }

    #[test]
    fn a_since_older_than_the_buffer_is_a_resume_gap() {
        let mut s = Session::new(3);
        s.start_run("r", "g");
        for i in 0..4 {
            s.ingest(&event(&format!("{i}-0"), "custom", json!(i)));
        }
        // Five events made, the last three kept (seq 3 to 5).
        assert_eq!(s.seq(), 5);
        assert_eq!(s.replay(Some(2)).unwrap().iter().map(|e| e.seq).collect::<Vec<_>>(), [3, 4, 5]);
        assert_eq!(s.replay(Some(4)).unwrap().len(), 1);
        assert!(s.replay(Some(5)).unwrap().is_empty());
        let gap = s.replay(Some(1)).unwrap_err();
        assert_eq!(s.replay(None).unwrap().len(), 3, "without a since, all that is kept");
        assert_eq!(gap, ResumeGap { since: 1, min_available_seq: 3 });
        assert_eq!(gap.to_string(), "resume gap: since=1 is older than min_available_seq=3");
    }

    #[test]
    fn checkpoints_are_sent_once_as_the_protocols_checkpoint() {
        let mut s = Session::new(DEFAULT_BUFFER);
        s.start_run("r", "g");
        let saved = json!({
            "config": {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c2"}},
            "parent_config": {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c1"}},
            "values": {}, "metadata": {"source": "loop", "step": 0}, "next": [], "tasks": [],
        });
        s.ingest(&event("1-0", "checkpoints", saved.clone()));
        s.ingest(&event("2-0", "checkpoints", saved));
        let first = json!({"config": {"configurable": {"checkpoint_id": "c0"}}, "parent_config": null,
                           "metadata": {"source": "input", "step": -1}});
        s.ingest(&event("3-0", "checkpoints|inner:1", first));
        s.ingest(&event("4-0", "checkpoints", json!({"config": {}})));
        let out = s.take();
        assert_eq!(methods(&out), ["lifecycle", "checkpoints", "checkpoints"], "once per id, no lifecycle");
        assert_eq!(out[1].data, json!({"id": "c2", "parent_id": "c1", "step": 0, "source": "loop"}));
        assert_eq!(out[2].data, json!({"id": "c0", "step": -1, "source": "input"}));
        assert_eq!(out[2].namespace, ["inner:1"]);
        let envelope: Value = serde_json::from_str(&out[1].json).unwrap();
        assert_eq!(envelope["event_id"], "synth:r:checkpoint||c2");
    }

    #[test]
    fn a_finished_tool_call_is_mirrored_as_a_tool_message() {
        let mut s = Session::new(DEFAULT_BUFFER);
        s.start_run("r", "g");
        let started =
            json!({"event": "tool-started", "tool_call_id": "c", "tool_name": "add", "input": {"a": 1}});
        s.ingest(&event("1-0", "tools", started.clone()));
        let output =
            json!({"content": "5", "type": "tool", "id": null, "tool_call_id": "c", "status": "success"});
        s.ingest(&event(
            "2-0",
            "tools",
            json!({"event": "tool-finished", "tool_call_id": "c", "output": output}),
        ));
        s.ingest(&event(
            "3-0",
            "tools",
            json!({"event": "tool-error", "tool_call_id": "d", "message": "no"}),
        ));
        let out = s.take();
        let mut expected = vec!["lifecycle", "tools", "tools"];
        expected.extend(["messages"; 5]);
        expected.push("tools");
        assert_eq!(methods(&out), expected);
        assert_eq!(out[1].data, started);
        assert_eq!(out[3].namespace, ["tools:c"]);
        assert_eq!(
            out[3].data,
            json!({"event": "message-start", "role": "tool", "id": "tool-c", "tool_call_id": "c"})
        );
        assert_eq!(
            out[5].data,
            json!({"event": "content-block-delta", "index": 0, "content": {"type": "text", "text": "5"}})
        );
        assert_eq!(out[7].data, json!({"event": "message-finish", "metadata": {}}));
        let ids: Vec<String> = out[2..8]
            .iter()
            .map(|e| serde_json::from_str::<Value>(&e.json).unwrap()["event_id"].to_string())
            .collect();
        assert_eq!(ids[0], "\"2-0\"");
        assert_eq!(ids[5], "\"2-0.5\"", "the mirror's events are made of the tool event's source");
    }

    #[test]
    fn an_error_fails_the_run_with_its_message() {
        let mut s = Session::new(DEFAULT_BUFFER);
        s.start_run("r", "g");
        s.ingest(&event("1-0", "error", json!({"error": "ValueError", "message": "boom"})));
        s.end_run("error");
        let out = s.take();
        assert_eq!(methods(&out), ["lifecycle", "lifecycle"]);
        assert_eq!(out[1].data, json!({"event": "failed", "graph_name": "g", "error": "boom"}));
    }
}
