//! The live values of a run: state channels plus the engine's own channels (input, node triggers,
//! waiting-edge barriers, pending `Send`s), with their versions.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::checkpoint::{ChannelVersions, Checkpoint, special};
use crate::error::{GraphError, GraphResult};
use crate::pregel::spec::{GraphSpec, Layout};
use crate::state::{ChannelSet, State};
use crate::types::Send;

/// Versions are counters; the checkpoint form adds a random tag per step (see `format_version`).
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
    pub(crate) tags: Vec<u64>,
    /// Per node (and START at index `n_nodes`), the trigger versions it has seen.
    pub(crate) seen: Vec<BTreeMap<usize, u64>>,
    /// Versions at the last static breakpoint.
    pub(crate) interrupt_seen: BTreeMap<usize, u64>,
    pub(crate) layout: Layout,
    /// The highest version of any channel (versions only grow).
    max: u64,
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
            tags: vec![0; layout.len()],
            seen: vec![BTreeMap::new(); layout.n_nodes + 1],
            interrupt_seen: BTreeMap::new(),
            layout,
            max: 0,
        }
    }

    pub(crate) fn max_version(&self) -> u64 {
        self.max
    }

    /// Bumps every channel of `changed` to one new version (LangGraph: one version per step).
    pub(crate) fn bump(&mut self, changed: &ChannelSet) {
        if changed.is_empty() {
            return;
        }
        let next = self.max + 1;
        self.max = next;
        let tag = rand::random::<u64>() >> 12;
        for i in changed.iter() {
            if let Some(v) = self.versions.get_mut(i) {
                *v = next;
                self.tags[i] = tag;
            }
        }
    }

    pub(crate) fn join_complete(&self, join: usize) -> bool {
        self.joins.get(join).is_some_and(|seen| !seen.is_empty() && seen.iter().all(|s| *s))
    }

    pub(crate) fn format_version(&self, index: usize) -> String {
        format!("{:032}.{:016}", self.versions[index], self.tags[index] % 10_000_000_000_000_000)
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
            let packets = self.sends.iter().map(send_to_json).collect::<GraphResult<Vec<_>>>()?;
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

    /// Builds the checkpoint of the current channels; values only for `changed` channels (or all when
    /// `None`).
    pub(crate) fn to_checkpoint(
        &self,
        spec: &GraphSpec<S>,
        names: &[String],
        id: String,
        values_of: Option<&ChannelSet>,
        updated: &ChannelSet,
    ) -> GraphResult<(Checkpoint, ChannelVersions)> {
        let mut channel_values = Map::new();
        let mut channel_versions = ChannelVersions::new();
        let mut new_versions = ChannelVersions::new();
        let state_specs = self.state.channels();
        for (i, name) in names.iter().enumerate() {
            if self.versions[i] == 0 {
                continue;
            }
            if i < self.layout.n_state && !state_specs[i].kind.is_tracked() {
                continue;
            }
            let version = self.format_version(i);
            channel_versions.insert(name.clone(), version.clone());
            if values_of.is_none_or(|set| set.contains(i)) {
                new_versions.insert(name.clone(), version);
                if let Some(v) = self.channel_json(spec, i)? {
                    channel_values.insert(name.clone(), v);
                }
            }
        }
        let mut versions_seen = BTreeMap::new();
        for (node, seen) in self.seen.iter().enumerate() {
            if seen.is_empty() {
                continue;
            }
            let key = if node == self.layout.n_nodes {
                special::START.to_owned()
            } else {
                spec.nodes[node].name.clone()
            };
            versions_seen
                .insert(key, seen.iter().map(|(ch, v)| (names[*ch].clone(), format!("{v:032}"))).collect());
        }
        if !self.interrupt_seen.is_empty() {
            versions_seen.insert(
                special::INTERRUPT.to_owned(),
                self.interrupt_seen.iter().map(|(ch, v)| (names[*ch].clone(), format!("{v:032}"))).collect(),
            );
        }
        let checkpoint = Checkpoint {
            v: crate::checkpoint::CHECKPOINT_VERSION,
            id,
            ts: now_rfc3339(),
            channel_values,
            channel_versions,
            versions_seen,
            updated_channels: updated.iter().filter_map(|i| names.get(i).cloned()).collect(),
        };
        Ok((checkpoint, new_versions))
    }

    /// Restores channels from a whole checkpoint.
    pub(crate) fn from_checkpoint(
        spec: &GraphSpec<S>,
        names: &[String],
        cp: &Checkpoint,
    ) -> GraphResult<Self> {
        let mut ch = Self::new(spec);
        let index: BTreeMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (n.as_str(), i)).collect();
        for (name, version) in &cp.channel_versions {
            if let Some(&i) = index.get(name.as_str()) {
                let (n, tag) = parse_version(version)
                    .ok_or_else(|| corrupt(cp, format!("bad version '{version}' of '{name}'")))?;
                ch.versions[i] = n;
                ch.tags[i] = tag;
                ch.max = ch.max.max(n);
            }
        }
        let layout = ch.layout;
        for (name, value) in &cp.channel_values {
            let Some(&i) = index.get(name.as_str()) else { continue };
            if i < layout.n_state {
                ch.state.channel_from_json(i, value.clone()).map_err(invalid(-1))?;
            } else if i == layout.start() {
                let Value::Object(map) = value else {
                    return Err(corrupt(cp, "input is not an object".to_owned()));
                };
                let mut writes = Vec::new();
                for (k, v) in map {
                    let c = ch
                        .state
                        .channel_index(k)
                        .ok_or_else(|| corrupt(cp, format!("unknown channel '{k}' in input")))?;
                    writes.push((c, v.clone()));
                }
                ch.start = Some(vec![ch.state.update_from_json(writes).map_err(invalid(-1))?]);
            } else if i == layout.tasks() {
                let Value::Array(items) = value else {
                    return Err(corrupt(cp, "sends are not a list".to_owned()));
                };
                for item in items {
                    ch.sends.push(send_from_json(spec, item).map_err(|e| corrupt(cp, e))?);
                }
            } else if i < layout.join(0) {
                ch.triggered[i - layout.branch(0)] = true;
            } else {
                let join = i - layout.join(0);
                let Value::Array(seen) = value else {
                    return Err(corrupt(cp, format!("barrier '{name}' is not a list")));
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
            let slot = if node == special::INTERRUPT {
                None
            } else if node == special::START {
                Some(layout.n_nodes)
            } else {
                match spec.node_names.get(node) {
                    Some(&i) => Some(i),
                    None => continue,
                }
            };
            let parsed: BTreeMap<usize, u64> = seen
                .iter()
                .filter_map(|(c, v)| Some((*index.get(c.as_str())?, parse_version(v)?.0)))
                .collect();
            match slot {
                Some(i) => ch.seen[i] = parsed,
                None => ch.interrupt_seen = parsed,
            }
        }
        Ok(ch)
    }
}

pub(crate) fn source_name<S: State>(spec: &GraphSpec<S>, source: Option<usize>) -> String {
    match source {
        Some(i) => spec.nodes[i].name.clone(),
        None => crate::types::START.to_owned(),
    }
}

pub(crate) fn send_to_json(send: &Send) -> GraphResult<Value> {
    let arg = send
        .payload
        .to_json()
        .map_err(|e| GraphError::Serialization(format!("send to '{}': {e}", send.node)))?;
    Ok(json!({"node": send.node, "arg": arg}))
}

pub(crate) fn send_from_json<S: State>(spec: &GraphSpec<S>, value: &Value) -> Result<Send, String> {
    let node = value.get("node").and_then(Value::as_str).ok_or("send without a node")?;
    let &i = spec.node_names.get(node).ok_or_else(|| format!("send to unknown node '{node}'"))?;
    let func = spec.nodes[i].func.as_ref().ok_or("send to a node without a function")?;
    let payload = func
        .payload_from_json(value.get("arg").cloned().unwrap_or(Value::Null))
        .map_err(|e| format!("send to '{node}': {e}"))?;
    Ok(Send { node: node.to_owned(), payload })
}

pub(crate) fn parse_version(v: &str) -> Option<(u64, u64)> {
    let mut parts = v.splitn(2, '.');
    let n = parts.next()?.parse().ok()?;
    let tag = parts.next().and_then(|t| t.parse().ok()).unwrap_or(0);
    Some((n, tag))
}

fn corrupt(cp: &Checkpoint, message: String) -> GraphError {
    GraphError::Checkpoint(format!("corrupt checkpoint '{}': {message}", cp.id))
}

fn invalid(step: i64) -> impl Fn(crate::state::UpdateError) -> GraphError {
    move |error| GraphError::InvalidUpdate { error, step, nodes: Vec::new() }
}

pub(crate) fn now_rfc3339() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = now.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:06}+00:00",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        now.subsec_micros()
    )
}

/// Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}
