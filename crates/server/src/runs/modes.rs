//! Stream modes as the API names them (`values`, `messages-tuple`, `events`, ...), and the graph modes a
//! run streams to serve them.

use weft_graph::StreamMode;

/// The modes a run was asked to stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Modes {
    pub(crate) values: bool,
    pub(crate) updates: bool,
    pub(crate) messages_tuple: bool,
    pub(crate) messages: bool,
    pub(crate) custom: bool,
    pub(crate) tasks: bool,
    pub(crate) checkpoints: bool,
    pub(crate) debug: bool,
    pub(crate) events: bool,
    /// Tool calls' starts, ends and errors: asked for by the v2 protocol's runs alone (as in langgraph-api,
    /// whose run schema lists no `tools` mode).
    pub(crate) tools: bool,
}

/// Every mode the API accepts, in the order its schema lists them.
pub(crate) const API_MODES: [&str; 9] =
    ["values", "messages", "messages-tuple", "tasks", "checkpoints", "updates", "events", "debug", "custom"];

impl Modes {
    /// The modes of a run's `stream_mode` list (already validated).
    pub(crate) fn from_names(names: &[String]) -> Self {
        let mut modes = Modes::default();
        for name in names {
            match name.as_str() {
                "values" => modes.values = true,
                "updates" => modes.updates = true,
                "messages-tuple" => modes.messages_tuple = true,
                "messages" => modes.messages = true,
                "custom" => modes.custom = true,
                "tasks" => modes.tasks = true,
                "checkpoints" => modes.checkpoints = true,
                "debug" => modes.debug = true,
                "events" => modes.events = true,
                "tools" => modes.tools = true,
                _ => {}
            }
        }
        modes
    }

    /// The graph modes that serve them.
    pub(crate) fn graph_modes(&self) -> Vec<StreamMode> {
        let mut out = Vec::new();
        let mut add = |on: bool, mode: StreamMode| {
            if on && !out.contains(&mode) {
                out.push(mode);
            }
        };
        add(self.values, StreamMode::Values);
        add(self.updates, StreamMode::Updates);
        add(self.messages || self.messages_tuple, StreamMode::Messages);
        add(self.custom, StreamMode::Custom);
        add(self.tasks, StreamMode::Tasks);
        add(self.checkpoints, StreamMode::Checkpoints);
        add(self.debug, StreamMode::Debug);
        add(self.tools, StreamMode::Tools);
        out
    }
}

/// Whether a listener who asked for `modes` (a `join_stream` filter) gets an event named `event`: its
/// mode is among them (`mode|ns` by its mode), and any `messages…` event when `messages` or
/// `messages-tuple` is; every event when no mode was asked for (LangGraph's `_run_stream_mode_matches`).
pub(crate) fn event_matches(event: &str, modes: &[String]) -> bool {
    if modes.is_empty() || modes.iter().any(|m| m == event) {
        return true;
    }
    if event.starts_with("messages") && modes.iter().any(|m| m == "messages" || m == "messages-tuple") {
        return true;
    }
    event.split_once('|').is_some_and(|(mode, _)| modes.iter().any(|m| m == mode))
}
