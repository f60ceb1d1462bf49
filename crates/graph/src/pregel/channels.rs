//! The live values of a run: state channels plus the engine's own channels (input, node triggers,
//! waiting-edge barriers, pending `Send`s), with their versions.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::checkpoint::stamp::{counter_shared, version_shared};
use crate::checkpoint::{
    AppendDelta, ChannelAppends, ChannelValues, ChannelVersion, ChannelVersions, Checkpoint, Checkpointer,
    FlatMap, special,
};
use crate::error::{GraphError, GraphResult};
use crate::pregel::spec::{CheckpointNames, GraphSpec, Layout};
use crate::state::{AppendLog, ChannelSet, State, UpdateError};
use crate::types::Send;

/// A channel version's checkpoint string, or what it is made of: a version in the engine's own form (no
/// checkpointer decides them) is written out only when something reads it, which a run without a
/// checkpointer rarely does.
#[derive(Clone)]
enum VersionText {
    /// The string, made by the checkpointer or read from a checkpoint.
    Made(ChannelVersion),
    /// The engine's form, `"{counter:032}.{tag:016}"`, not written yet.
    Engine { counter: u64, tag: u64 },
}

impl VersionText {
    /// The string.
    fn text(&self) -> ChannelVersion {
        match self {
            VersionText::Made(text) => Arc::clone(text),
            VersionText::Engine { counter, tag } => version_shared(*counter, *tag),
        }
    }
}

/// The random part of the engine's version string for `counter` (52 bits, as a random `u64 >> 12`):
/// splitmix64's finalizer of `seed` and the counter, so each run's versions differ from another's.
fn version_tag(seed: u64, counter: u64) -> u64 {
    let mut z = seed.wrapping_add(counter.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) >> 12
}

/// Versions are counters; each version also has the string checkpoints carry, made by the checkpointer's
/// [`get_next_version`](crate::checkpoint::Checkpointer::get_next_version) once per step and shared by
/// the channels that step changed.
pub(crate) struct Channels<S: State> {
    pub(crate) state: S,
    /// `__start__`: input waiting for the START task.
    pub(crate) start: Option<Vec<S::Update>>,
    /// `branch:to:<node>`: the node is triggered.
    pub(crate) triggered: Vec<bool>,
    /// Waiting-edge barriers: which sources have finished.
    pub(crate) joins: Vec<Vec<bool>>,
    /// `__pregel_tasks`: Sends for the next step.
    pub(crate) sends: Vec<Send>,
    pub(crate) versions: Vec<u64>,
    /// Per channel, the string of its current version (`None` at version 0).
    texts: Vec<Option<VersionText>>,
    /// Per node (and START at index `n_nodes`), the trigger versions it has seen.
    pub(crate) seen: Vec<BTreeMap<usize, u64>>,
    /// Per node (and START), whether it has run: a node that ran from `Send`s only has an entry in
    /// `versions_seen` with no versions, as in LangGraph.
    pub(crate) ran: Vec<bool>,
    /// Whether input was written to the thread (`versions_seen` then has an empty `__input__` entry).
    pub(crate) input_seen: bool,
    /// Functional-API tasks called on the thread: each has an empty `versions_seen` entry, as in LangGraph.
    pub(crate) called: std::collections::BTreeSet<Arc<str>>,
    /// Versions at the last static breakpoint.
    pub(crate) interrupt_seen: BTreeMap<usize, u64>,
    pub(crate) layout: Layout,
    /// The highest version of any channel (versions only grow), and its string.
    max: u64,
    max_text: Option<VersionText>,
    /// The checkpointer that decides the next version's string (`None`: the engine's default form).
    versioner: Option<Arc<dyn Checkpointer>>,
    /// Drawn once at random: the engine's version strings take their random part from it and the counter
    /// ([`version_tag`]), so that a step draws no random number.
    tag_seed: u64,
    /// Per state channel, the version whose value the saver holds: the channel's version at the last
    /// checkpoint saved or loaded, and its string; `(0, None)` when none.
    saved_at: Vec<(u64, Option<VersionText>)>,
    /// Per state channel, how many items were only appended to it since then (`None`: changed otherwise,
    /// or unknown).
    appended: Vec<Option<usize>>,
    /// Per channel, the counter string last made for `versions_seen` (for versions whose string is not
    /// known, as in checkpoints of older weft versions).
    counters: Vec<Option<(u64, ChannelVersion)>>,
    /// Per node (and START), the strings of the versions in `seen`, as `channel_versions` had them: what
    /// `versions_seen` stores, as in LangGraph.
    seen_texts: Vec<BTreeMap<usize, VersionText>>,
    /// The strings of the versions in `interrupt_seen`.
    interrupt_texts: BTreeMap<usize, VersionText>,
    /// Per channel, its value at a version when that value is an inline scalar
    /// ([`is_inline_scalar`](crate::checkpoint::is_inline_scalar)), as last made for a checkpoint or
    /// loaded from one: a checkpoint carries it while the channel stays at that version.
    inline: Vec<Option<(u64, Value)>>,
    /// Scratch log of one `apply`.
    log: AppendLog,
}

impl<S: State> Channels<S> {
    pub(crate) fn new(spec: &GraphSpec<S>) -> Self {
        let layout = spec.layout();
        Self {
            state: spec.initial.clone(),
            start: None,
            triggered: vec![false; layout.n_nodes],
            joins: spec.joins.iter().map(|j| vec![false; j.sources.len()]).collect(),
            sends: Vec::new(),
            versions: vec![0; layout.len()],
            texts: vec![None; layout.len()],
            seen: vec![BTreeMap::new(); layout.n_nodes + 1],
            ran: vec![false; layout.n_nodes + 1],
            input_seen: false,
            called: std::collections::BTreeSet::new(),
            interrupt_seen: BTreeMap::new(),
            layout,
            max: 0,
            max_text: None,
            versioner: None,
            tag_seed: rand::random(),
            saved_at: vec![(0, None); layout.n_state],
            appended: vec![None; layout.n_state],
            counters: vec![None; layout.len()],
            seen_texts: vec![BTreeMap::new(); layout.n_nodes + 1],
            interrupt_texts: BTreeMap::new(),
            inline: vec![None; layout.len()],
            log: AppendLog::new(),
        }
    }

    /// Records that node `slot` (START at `n_nodes`) has seen channel `channel` at its current version.
    pub(crate) fn see(&mut self, slot: usize, channel: usize) {
        let text = match &self.texts[channel] {
            Some(text) => text.clone(),
            None => VersionText::Made(counter_shared(self.versions[channel])),
        };
        self.seen[slot].insert(channel, self.versions[channel]);
        self.seen_texts[slot].insert(channel, text);
    }

    /// Records that node `slot` has seen channel `channel` at `version`.
    pub(crate) fn see_version(
        &mut self,
        slot: usize,
        channel: usize,
        (version, text): (u64, ChannelVersion),
    ) {
        self.seen[slot].insert(channel, version);
        self.seen_texts[slot].insert(channel, VersionText::Made(text));
    }

    /// Records the current versions as those the static breakpoints have seen.
    pub(crate) fn see_for_interrupts(&mut self) {
        let current: Vec<usize> = (0..self.versions.len()).filter(|&i| self.versions[i] > 0).collect();
        self.interrupt_texts =
            current.iter().map(|&i| (i, VersionText::Made(self.version_text(i)))).collect();
        self.interrupt_seen = current.into_iter().map(|i| (i, self.versions[i])).collect();
    }

    /// Folds `updates` into the state (see [`State::apply`]), keeping track of the list channels that
    /// were only appended to.
    pub(crate) fn apply_updates(&mut self, updates: Vec<S::Update>) -> Result<ChannelSet, UpdateError> {
        self.log.clear();
        let result = self.state.apply_logged(updates, &mut self.log);
        match &result {
            Ok(changed) => {
                for i in changed.iter() {
                    if let Some(slot) = self.appended.get_mut(i) {
                        *slot = slot.zip(self.log.appended_count(i)).map(|(a, b)| a.saturating_add(b));
                    }
                }
            }
            // The step is not committed; nothing is known about what the state now holds.
            Err(_) => self.appended.iter_mut().for_each(|a| *a = None),
        }
        result
    }

    /// Ends a step (see [`State::end_step`]); the channels it clears count as replaced.
    pub(crate) fn end_step(&mut self, written: &ChannelSet) -> ChannelSet {
        let ended = self.state.end_step(written);
        for i in ended.iter() {
            if let Some(slot) = self.appended.get_mut(i) {
                *slot = None;
            }
        }
        ended
    }

    /// Records that the saver now holds every channel's current value (a checkpoint was saved).
    pub(crate) fn mark_saved(&mut self) {
        for i in 0..self.layout.n_state {
            self.saved_at[i] = (self.versions[i], self.texts[i].clone());
            self.appended[i] = Some(0);
        }
    }

    /// Lets `checkpointer` decide the strings of the versions made from now on.
    pub(crate) fn set_versioner(&mut self, checkpointer: Arc<dyn Checkpointer>) {
        self.versioner = Some(checkpointer);
    }

    /// The version that follows the highest one: from the checkpointer's
    /// [`get_next_version`](Checkpointer::get_next_version) when there is one (once per step, given the
    /// highest version, as LangGraph calls it), else the engine's default form. An error when it fails or
    /// when its counter does not grow.
    pub(crate) fn next_version(&self) -> GraphResult<(u64, ChannelVersion)> {
        self.next_text().map(|(next, text)| (next, text.text()))
    }

    /// [`next_version`](Self::next_version), with the engine's default form left unwritten.
    fn next_text(&self) -> GraphResult<(u64, VersionText)> {
        let Some(saver) = &self.versioner else {
            let next = self.max + 1;
            return Ok((next, VersionText::Engine { counter: next, tag: version_tag(self.tag_seed, next) }));
        };
        let max_text = self.max_text.as_ref().map(VersionText::text);
        let text = saver.get_next_version(max_text.as_deref())?;
        match crate::checkpoint::version_counter(&text) {
            Some(next) if next > self.max => Ok((next, VersionText::Made(text))),
            _ => Err(GraphError::Storage(crate::checkpoint::CheckpointError::Invalid(format!(
                "the checkpointer's next version '{text}' has no counter above the current version '{}'",
                max_text.as_deref().unwrap_or("none")
            )))),
        }
    }

    /// Bumps every channel of `changed` to one new version (LangGraph: one version per step).
    pub(crate) fn bump(&mut self, changed: &ChannelSet) -> GraphResult<()> {
        if changed.is_empty() {
            return Ok(());
        }
        let next = self.next_text()?;
        self.bump_to_text(changed, next);
        Ok(())
    }

    /// Bumps every channel of `changed` to `version`, made by [`next_version`](Self::next_version).
    pub(crate) fn bump_to(&mut self, changed: &ChannelSet, (next, text): (u64, ChannelVersion)) {
        self.bump_to_text(changed, (next, VersionText::Made(text)));
    }

    fn bump_to_text(&mut self, changed: &ChannelSet, (next, text): (u64, VersionText)) {
        if changed.is_empty() {
            return;
        }
        for i in changed.iter() {
            if let Some(v) = self.versions.get_mut(i) {
                *v = next;
                self.texts[i] = Some(text.clone());
            }
        }
        self.max = next;
        self.max_text = Some(text);
    }

    pub(crate) fn join_complete(&self, join: usize) -> bool {
        self.joins.get(join).is_some_and(|seen| !seen.is_empty() && seen.iter().all(|s| *s))
    }

    /// The checkpoint string of channel `index`'s current version.
    fn version_text(&self, index: usize) -> ChannelVersion {
        match &self.texts[index] {
            Some(text) => text.text(),
            None => counter_shared(self.versions[index]),
        }
    }

    /// What was appended to state channel `index` since the saver last got its value, as a delta on
    /// that value; `None` when the channel must be saved whole.
    fn append_delta(&mut self, index: usize) -> GraphResult<Option<AppendDelta>> {
        let (Some(&Some(count)), Some((base, Some(base_text)))) =
            (self.appended.get(index), self.saved_at.get(index))
        else {
            return Ok(None);
        };
        if *base == 0 || *base == self.versions[index] {
            return Ok(None);
        }
        let base_version = base_text.text();
        match self.state.channel_tail_to_json(index, count).map_err(invalid(-1))? {
            Some(Value::Array(items)) => Ok(Some(AppendDelta { base_version, items })),
            _ => Ok(None),
        }
    }

    /// The JSON value of a channel, `None` when empty.
    pub(crate) fn channel_json(&self, spec: &GraphSpec<S>, index: usize) -> GraphResult<Option<Value>> {
        let layout = self.layout;
        if index < layout.n_state {
            return self.state.channel_to_json(index).map_err(invalid(-1));
        }
        if index == layout.start() {
            return match &self.start {
                None => Ok(None),
                Some(updates) => {
                    let mut writes = Map::new();
                    let names = self.state.channels();
                    for u in updates {
                        for (i, v) in self.state.update_to_json(u).map_err(invalid(-1))? {
                            writes.insert(names[i].name.to_string(), v);
                        }
                    }
                    Ok(Some(Value::Object(writes)))
                }
            };
        }
        if index == layout.tasks() {
            if self.sends.is_empty() {
                return Ok(None);
            }
            let packets =
                self.sends.iter().map(|s| send_to_json(&self.state, s)).collect::<GraphResult<Vec<_>>>()?;
            return Ok(Some(Value::Array(packets)));
        }
        if index < layout.join(0) {
            let node = index - layout.branch(0);
            return Ok(self.triggered[node].then_some(Value::Null));
        }
        let join = index - layout.join(0);
        if self.joins[join].iter().any(|s| *s) {
            let seen: Vec<Value> = spec.joins[join]
                .sources
                .iter()
                .zip(&self.joins[join])
                .filter(|(_, s)| **s)
                .map(|(src, _)| Value::String(source_name(spec, *src)))
                .collect();
            return Ok(Some(Value::Array(seen)));
        }
        Ok(None)
    }

    /// Builds the checkpoint of the current channels, with id and time `stamps`; values only for
    /// `changed` channels (or all when `None`). With `appends`, a list channel that was only appended to
    /// since the last checkpoint goes there, as its new items, instead of into the checkpoint's values.
    pub(crate) fn build_checkpoint(
        &mut self,
        spec: &GraphSpec<S>,
        names: &CheckpointNames,
        (id, ts): (String, String),
        values_of: Option<&ChannelSet>,
        updated: &ChannelSet,
        mut appends: Option<&mut ChannelAppends>,
    ) -> GraphResult<(Checkpoint, ChannelVersions)> {
        let mut channel_values = ChannelValues::new();
        let mut channel_versions = ChannelVersions::new();
        let mut new_versions = ChannelVersions::new();
        // In name order, so that every map is built by appending.
        for &i in &names.channel_order {
            let name = &names.channels[i];
            if self.versions[i] == 0 {
                continue;
            }
            if i < self.layout.n_state && !self.state.channels()[i].kind.is_tracked() {
                continue;
            }
            let version = self.version_text(i);
            channel_versions.insert(Arc::clone(name), Arc::clone(&version));
            if values_of.is_none_or(|set| set.contains(i)) {
                new_versions.insert(Arc::clone(name), version);
                self.inline[i] = None;
                if let Some(appends) = appends.as_deref_mut().filter(|_| i < self.layout.n_state) {
                    if let Some(delta) = self.append_delta(i)? {
                        appends.insert(Arc::clone(name), delta);
                        continue;
                    }
                }
                if let Some(v) = self.channel_json(spec, i)? {
                    if crate::checkpoint::is_inline_scalar(&v) {
                        self.inline[i] = Some((self.versions[i], v.clone()));
                    }
                    channel_values.insert(Arc::clone(name), v);
                }
            } else if let Some((_, v)) = self.inline[i].as_ref().filter(|(at, _)| *at == self.versions[i]) {
                // Unchanged, and small enough for the saver to keep in the checkpoint's record.
                channel_values.insert(Arc::clone(name), v.clone());
            }
        }
        let mut versions_seen = FlatMap::new();
        if self.input_seen {
            versions_seen.insert(Arc::clone(&names.input), ChannelVersions::new());
        }
        for &node in &names.node_order {
            if self.seen[node].is_empty() && !self.ran[node] {
                continue;
            }
            let seen = self.seen_strings(names, Some(node));
            versions_seen.insert(Arc::clone(&names.nodes[node]), seen);
        }
        if !self.interrupt_seen.is_empty() {
            let seen = self.seen_strings(names, None);
            versions_seen.insert(Arc::clone(&names.interrupt), seen);
        }
        for name in &self.called {
            versions_seen.insert(Arc::clone(name), ChannelVersions::new());
        }
        let checkpoint = Checkpoint {
            v: crate::checkpoint::CHECKPOINT_VERSION,
            id,
            ts,
            channel_values,
            channel_versions,
            versions_seen,
            updated_channels: {
                let mut names: Vec<crate::checkpoint::ChannelName> =
                    updated.iter().filter_map(|i| names.channels.get(i).cloned()).collect();
                names.sort();
                names
            },
        };
        Ok((checkpoint, new_versions))
    }

    /// The versions node `node` (START at `n_nodes`; the static breakpoint's when `None`) has seen, as a
    /// checkpoint stores them.
    fn seen_strings(&mut self, names: &CheckpointNames, node: Option<usize>) -> ChannelVersions {
        let (seen, texts) = match node {
            Some(node) => (&self.seen[node], &self.seen_texts[node]),
            None => (&self.interrupt_seen, &self.interrupt_texts),
        };
        let counters = &mut self.counters;
        seen.iter()
            .map(|(&ch, &v)| {
                // `seen` and `seen_texts` are written together (`see_version`, `from_checkpoint`).
                let known = texts.get(&ch);
                let text = match (known, &counters[ch]) {
                    (Some(text), _) => text.text(),
                    (None, Some((k, text))) if *k == v => Arc::clone(text),
                    (None, _) => {
                        let text = counter_shared(v);
                        counters[ch] = Some((v, Arc::clone(&text)));
                        text
                    }
                };
                (Arc::clone(&names.channels[ch]), text)
            })
            .collect()
    }

    /// Restores channels from a whole checkpoint of `thread`.
    pub(crate) fn from_checkpoint(
        spec: &GraphSpec<S>,
        names: &CheckpointNames,
        cp: &Checkpoint,
        thread: &str,
    ) -> GraphResult<Self> {
        let corrupt = |message: String| {
            GraphError::Storage(crate::checkpoint::CheckpointError::corrupt(thread, cp.id.as_str(), message))
        };
        let mut ch = Self::new(spec);
        let index: BTreeMap<&str, usize> =
            names.channels.iter().enumerate().map(|(i, n)| (&**n, i)).collect();
        for (name, version) in &cp.channel_versions {
            if let Some(&i) = index.get(&**name) {
                let n = crate::checkpoint::version_counter(version)
                    .ok_or_else(|| corrupt(format!("bad version '{version}' of '{name}'")))?;
                ch.versions[i] = n;
                ch.texts[i] = Some(VersionText::Made(Arc::clone(version)));
                if n > ch.max || ch.max_text.is_none() {
                    ch.max = n;
                    ch.max_text = Some(VersionText::Made(Arc::clone(version)));
                }
            }
        }
        let layout = ch.layout;
        for (name, value) in &cp.channel_values {
            let Some(&i) = index.get(&**name) else { continue };
            if crate::checkpoint::is_inline_scalar(value) {
                ch.inline[i] = Some((ch.versions[i], value.clone()));
            }
            if i < layout.n_state {
                ch.state.channel_from_json(i, value.clone()).map_err(invalid(-1))?;
            } else if i == layout.start() {
                let Value::Object(map) = value else {
                    return Err(corrupt("input is not an object".to_owned()));
                };
                let mut writes = Vec::new();
                for (k, v) in map {
                    let c = ch
                        .state
                        .channel_index(k)
                        .ok_or_else(|| corrupt(format!("unknown channel '{k}' in input")))?;
                    writes.push((c, v.clone()));
                }
                ch.start = Some(vec![ch.state.update_from_json(writes).map_err(invalid(-1))?]);
            } else if i == layout.tasks() {
                let Value::Array(items) = value else {
                    return Err(corrupt("sends are not a list".to_owned()));
                };
                for item in items {
                    ch.sends.push(send_from_json(spec, item).map_err(corrupt)?);
                }
            } else if i < layout.join(0) {
                ch.triggered[i - layout.branch(0)] = true;
            } else {
                let join = i - layout.join(0);
                let Value::Array(seen) = value else {
                    return Err(corrupt(format!("barrier '{name}' is not a list")));
                };
                for s in seen {
                    let s = s.as_str().unwrap_or_default();
                    if let Some(pos) =
                        spec.joins[join].sources.iter().position(|src| source_name(spec, *src) == s)
                    {
                        ch.joins[join][pos] = true;
                    }
                }
            }
        }
        for (node, seen) in &cp.versions_seen {
            if &**node == special::INPUT {
                ch.input_seen = true;
                continue;
            }
            let slot = if &**node == special::INTERRUPT {
                None
            } else if &**node == special::START {
                Some(layout.n_nodes)
            } else {
                match spec.node_names.get(&**node) {
                    Some(&i) => Some(i),
                    None => {
                        if spec.functional {
                            ch.called.insert(Arc::clone(node));
                        }
                        continue;
                    }
                }
            };
            let mut parsed = BTreeMap::new();
            let mut texts = BTreeMap::new();
            for (c, v) in seen {
                let (Some(&c), Some(counter)) = (index.get(&**c), crate::checkpoint::version_counter(v))
                else {
                    continue;
                };
                parsed.insert(c, counter);
                texts.insert(c, VersionText::Made(Arc::clone(v)));
            }
            match slot {
                Some(i) => {
                    ch.seen[i] = parsed;
                    ch.seen_texts[i] = texts;
                    ch.ran[i] = true;
                }
                None => {
                    ch.interrupt_seen = parsed;
                    ch.interrupt_texts = texts;
                }
            }
        }
        // The saver holds the value of every channel at the version just read.
        ch.mark_saved();
        Ok(ch)
    }
}

pub(crate) fn source_name<S: State>(spec: &GraphSpec<S>, source: Option<usize>) -> String {
    match source {
        Some(i) => spec.nodes[i].name.to_string(),
        None => crate::types::START.to_owned(),
    }
}

/// The key of a saved `Send` argument that is a [`Command`](crate::Command) (`Send::command`).
const COMMAND_KEY: &str = "__command__";

/// A `Send` packet as saved: an argument's keys that name untracked channels are left out (as LangGraph
/// does), so an untracked value never reaches a checkpoint.
pub(crate) fn send_to_json<S: State>(state: &S, send: &Send) -> GraphResult<Value> {
    let mut arg = payload_to_json(state, &send.payload)
        .map_err(|e| GraphError::Serialization(format!("send to '{}': {e}", send.node)))?;
    if let Value::Object(fields) = &mut arg {
        for channel in state.channels().iter().filter(|c| !c.kind.is_tracked()) {
            fields.remove(&*channel.name);
        }
    }
    Ok(json!({"node": send.node, "arg": arg}))
}

/// A payload as JSON; a command of the graph (`Send::command`) is written as
/// `{"__command__": {"update": [[[channel, value], ...], ...], "goto": [node or send, ...], "graph": ...}}`.
pub(crate) fn payload_to_json<S: State>(state: &S, payload: &crate::types::Payload) -> Result<Value, String> {
    let Some(cmd) = payload.as_command::<S>() else { return payload.to_json() };
    let names = state.channels();
    let mut updates = Vec::with_capacity(cmd.update.len());
    for u in &cmd.update {
        let writes = state.update_to_json(u).map_err(|e| e.to_string())?;
        // Untracked channels never reach a checkpoint, as in `send_to_json` and the tasks' writes.
        updates.push(Value::Array(
            writes
                .into_iter()
                .filter(|(i, _)| names[*i].kind.is_tracked())
                .map(|(i, v)| json!([names[i].name.as_ref(), v]))
                .collect(),
        ));
    }
    let mut goto = Vec::with_capacity(cmd.goto.len());
    for g in &cmd.goto {
        goto.push(match g {
            crate::types::Goto::Node(n) => Value::String(n.clone()),
            crate::types::Goto::Send(send) => send_to_json(state, send).map_err(|e| e.to_string())?,
        });
    }
    let graph = match cmd.graph {
        crate::types::CommandGraph::Current => Value::Null,
        crate::types::CommandGraph::Parent => Value::String("__parent__".to_owned()),
    };
    Ok(json!({COMMAND_KEY: {"update": updates, "goto": goto, "graph": graph}}))
}

/// A payload as JSON for what the user reads (task events, traces, cache keys): `null` where it has none.
pub(crate) fn payload_json<S: State>(state: &S, payload: &crate::types::Payload) -> Value {
    payload_to_json(state, payload).unwrap_or(Value::Null)
}

pub(crate) fn send_from_json<S: State>(spec: &GraphSpec<S>, value: &Value) -> Result<Send, String> {
    let node = value.get("node").and_then(Value::as_str).ok_or("send without a node")?;
    let &i = spec.node_names.get(node).ok_or_else(|| format!("send to unknown node '{node}'"))?;
    let func = spec.nodes[i].func.as_ref().ok_or("send to a node without a function")?;
    let arg = value.get("arg").cloned().unwrap_or(Value::Null);
    let payload = match arg.get(COMMAND_KEY) {
        Some(cmd) if arg.as_object().is_some_and(|o| o.len() == 1) => crate::types::Payload::command(
            command_from_json(spec, cmd).map_err(|e| format!("send to '{node}': {e}"))?,
        ),
        _ => func.payload_from_json(arg).map_err(|e| format!("send to '{node}': {e}"))?,
    };
    Ok(Send { node: node.to_owned(), payload })
}

/// Reads back a command written by [`payload_to_json`].
fn command_from_json<S: State>(
    spec: &GraphSpec<S>,
    value: &Value,
) -> Result<crate::types::Command<S>, String> {
    let state = &spec.initial;
    let mut cmd = crate::types::Command::new();
    for update in value.get("update").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
        let mut writes = Vec::new();
        for pair in update.as_array().ok_or("a saved command update is not a list")? {
            let (Some(name), Some(v)) = (pair.get(0).and_then(Value::as_str), pair.get(1)) else {
                return Err(format!("a saved command write is not a [channel, value] pair: {pair}"));
            };
            let i = state
                .channel_index(name)
                .ok_or_else(|| format!("a saved command writes unknown channel '{name}'"))?;
            writes.push((i, v.clone()));
        }
        cmd.update.push(state.update_from_json(writes).map_err(|e| e.to_string())?);
    }
    for g in value.get("goto").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
        cmd.goto.push(match g {
            Value::String(n) => crate::types::Goto::Node(n.clone()),
            send => crate::types::Goto::Send(send_from_json(spec, send)?),
        });
    }
    if value.get("graph").and_then(Value::as_str) == Some("__parent__") {
        cmd.graph = crate::types::CommandGraph::Parent;
    }
    Ok(cmd)
}

fn invalid(step: i64) -> impl Fn(crate::state::UpdateError) -> GraphError {
    move |error| GraphError::InvalidUpdate { error, step, nodes: Vec::new() }
}
