//! Finds the edges to draw the way LangGraph's `draw_graph` does: a dry run of the Pregel loop in which no
//! node runs, only the writers attached to nodes (static edges, waiting edges, and the declared targets of
//! conditional edges), over the same channels (`__start__`, `branch:to:<node>`, `join:<sources>:<node>`).
//!
//! Edges come from which task's writes triggered which task; a task triggered without any write of the
//! step just run gets dotted edges from every task of that step. Plain edges to `END` are not written by
//! anyone, so ends are inferred: nodes that are targets but never sources get a solid edge to `END`; when
//! there are none, no edge reaches `END` yet and the dry run stopped with a single task, that task gets a
//! dotted edge to `END`.
//! A router without a path map declares no targets, so it contributes no edges (LangGraph learns them
//! from a `Literal` return annotation, which Rust closures do not have).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::channel::{Channel, Kind};
use crate::types::END;

/// LangGraph's step limit for the dry run.
const LIMIT: usize = 250;

/// One process of the dry run: `START` (index 0) or a node.
#[derive(Debug, Default)]
pub(super) struct Proc {
    pub(super) name: String,
    /// Its `branch:to:` channel is only available after the run finishes (`defer`).
    pub(super) defer: bool,
    /// Targets (process indexes) of plain edges.
    pub(super) edges: Vec<usize>,
    /// Waiting edges this process is a source of (indexes into `Plan::joins`).
    pub(super) joins: Vec<usize>,
    /// Declared targets of each conditional edge with a path map: `(label, target)`, `None` for `END`.
    pub(super) branches: Vec<Vec<(String, Option<usize>)>>,
}

/// A waiting edge: its sources (process indexes) and its target (`None` for `END`).
#[derive(Debug)]
pub(super) struct Join {
    pub(super) sources: Vec<usize>,
    pub(super) target: Option<usize>,
}

/// What the dry run needs to know of a graph. `procs[0]` is `START`.
#[derive(Debug, Default)]
pub(super) struct Plan {
    pub(super) procs: Vec<Proc>,
    pub(super) joins: Vec<Join>,
    /// Node process indexes in the order the nodes were added.
    pub(super) insertion_order: Vec<usize>,
}

/// A discovered edge: source, target, conditional, label (sorted as LangGraph sorts its edge tuples).
type Found = (String, String, bool, Option<String>);

/// An edge of the drawing: source, target, label, conditional.
pub(super) type DrawnEdge = (String, String, Option<String>, bool);

/// The edges LangGraph would add to its drawable graph, in order.
pub(super) fn discover(plan: &Plan) -> Vec<DrawnEdge> {
    let mut sim = Sim::new(plan);
    let found = sim.run();
    let mut out: Vec<DrawnEdge> = Vec::new();
    let mut push = |source: &str, target: &str, label: Option<String>, conditional: bool| {
        if !out.iter().any(|(s, t, _, _)| s == source && t == target) {
            out.push((source.to_owned(), target.to_owned(), label, conditional));
        }
    };
    for (source, target, conditional, label) in &found.edges {
        let label = label.clone().filter(|l| l != target);
        push(source, target, label, *conditional);
    }
    let sources: HashSet<&str> = found.edges.iter().map(|e| e.0.as_str()).collect();
    let termini: BTreeSet<&str> =
        found.edges.iter().map(|e| e.1.as_str()).filter(|t| *t != END && !sources.contains(t)).collect();
    // Nodes that are targets but never sources end the graph; failing those, and with no edge to `END`
    // yet, the single node the dry run stopped on does.
    if !termini.is_empty() {
        for t in termini {
            push(t, END, None, false);
        }
    } else if let ([(last, _)], false) = (found.last_step.as_slice(), found.edges.iter().any(|e| e.1 == END))
    {
        push(&plan.procs[*last].name, END, None, true);
    }
    out
}

/// A write: the channel and, for a waiting edge's barrier, the writing process.
type Write = (usize, Option<usize>);

/// `(channel, conditional, label)` written by a task.
type Source = (usize, bool, Option<String>);

struct DryRun {
    edges: BTreeSet<Found>,
    /// The tasks of the last step run, with what they wrote.
    last_step: Vec<(usize, HashSet<Source>)>,
}

struct Sim<'a> {
    plan: &'a Plan,
    channels: Vec<Channel>,
    /// Channel of each join (`None` for a waiting edge to `END`, which has none).
    join_channel: Vec<Option<usize>>,
    /// Trigger channels of each process.
    triggers: Vec<Vec<usize>>,
    versions: Vec<u64>,
    versions_seen: HashMap<usize, HashMap<usize, u64>>,
}

impl<'a> Sim<'a> {
    fn new(plan: &'a Plan) -> Self {
        // Channel 0 is `__start__`; channel p is `branch:to:` of node process p; joins follow.
        let mut channels = vec![Channel::new(Kind::Ephemeral)];
        let mut triggers: Vec<Vec<usize>> = vec![vec![0]];
        for (p, proc) in plan.procs.iter().enumerate().skip(1) {
            channels.push(Channel::new(if proc.defer { Kind::AfterFinish } else { Kind::Ephemeral }));
            triggers.push(vec![p]);
        }
        let mut join_channel = Vec::new();
        for join in &plan.joins {
            let Some(target) = join.target else {
                join_channel.push(None);
                continue;
            };
            let names: BTreeSet<usize> = join.sources.iter().copied().collect();
            let deferred = plan.procs.get(target).is_some_and(|p| p.defer);
            channels.push(Channel::new(if deferred {
                Kind::BarrierAfterFinish(names)
            } else {
                Kind::Barrier(names)
            }));
            let chan = channels.len() - 1;
            if let Some(t) = triggers.get_mut(target) {
                t.push(chan);
            }
            join_channel.push(Some(chan));
        }
        let versions = vec![0; channels.len()];
        Self { plan, channels, join_channel, triggers, versions, versions_seen: HashMap::new() }
    }

    fn name(&self, proc: usize) -> String {
        self.plan.procs[proc].name.clone()
    }

    fn run(&mut self) -> DryRun {
        let mut edges: BTreeSet<Found> = BTreeSet::new();
        let mut static_seen: HashSet<(usize, usize)> = HashSet::new();
        // Declared branch targets count among a task's writes every time it runs, not only the first.
        let mut static_declared: HashMap<usize, HashSet<Source>> = HashMap::new();
        let mut sources: HashMap<usize, HashSet<Source>> = HashMap::new();
        let mut step_sources: Vec<(usize, HashSet<Source>)> = Vec::new();

        // The input writes `__start__`.
        let updated = self.apply_writes(&[], &[vec![(0, None)]]);
        let mut tasks = self.prepare(&updated);
        for _step in 0..=LIMIT {
            if tasks.is_empty() {
                break;
            }
            // Run each task's writers: plain edges, waiting edges, and (once) declared branch targets.
            let mut task_writes: Vec<Vec<Write>> = Vec::new();
            step_sources = Vec::new();
            for &task in &tasks {
                let proc = &self.plan.procs[task];
                let mut writes: Vec<Write> = proc.edges.iter().map(|t| (*t, None)).collect();
                writes.extend(
                    proc.joins
                        .iter()
                        .filter_map(|j| self.join_channel.get(*j).copied().flatten())
                        .map(|c| (c, Some(task))),
                );
                let mut conditionals: BTreeMap<usize, Option<String>> = BTreeMap::new();
                for (b, targets) in proc.branches.iter().enumerate() {
                    if !static_seen.insert((task, b)) {
                        continue;
                    }
                    for (label, target) in targets {
                        match target {
                            None => {
                                edges.insert((proc.name.clone(), END.to_owned(), true, Some(label.clone())));
                            }
                            Some(t) => {
                                conditionals.insert(*t, Some(label.clone()));
                                static_declared.entry(task).or_default().insert((
                                    *t,
                                    true,
                                    Some(label.clone()),
                                ));
                                writes.push((*t, None));
                            }
                        }
                    }
                }
                let mut written: HashSet<Source> = writes
                    .iter()
                    .map(|(chan, value)| match conditionals.get(chan) {
                        Some(label) if value.is_none() => (*chan, true, label.clone()),
                        _ => (*chan, false, None),
                    })
                    .collect();
                if let Some(declared) = static_declared.get(&task) {
                    written.extend(declared.iter().cloned());
                }
                step_sources.push((task, written));
                task_writes.push(writes);
            }
            for (task, written) in &step_sources {
                sources.insert(*task, written.clone());
            }
            let mut trigger_to_sources: HashMap<usize, BTreeSet<(usize, bool, Option<String>)>> =
                HashMap::new();
            for (src, written) in &sources {
                for (chan, cond, label) in written {
                    trigger_to_sources.entry(*chan).or_default().insert((*src, *cond, label.clone()));
                }
            }
            let updated = self.apply_writes(&tasks, &task_writes);
            tasks = self.prepare(&updated);
            // Edges into the next tasks.
            for &task in &tasks {
                let mut added = false;
                for trigger in &self.triggers[task] {
                    let Some(writers) = trigger_to_sources.get(trigger) else { continue };
                    for (src, cond, label) in writers {
                        edges.insert((self.name(*src), self.name(task), *cond, label.clone()));
                        let key = (*trigger, *cond, label.clone());
                        let this_step = step_sources.iter().any(|(s, w)| s == src && w.contains(&key));
                        if this_step {
                            added = true;
                        } else if let Some(set) = sources.get_mut(src) {
                            set.remove(&key);
                        }
                    }
                }
                if !added {
                    for (src, _) in &step_sources {
                        edges.insert((self.name(*src), self.name(task), true, None));
                    }
                }
            }
        }
        DryRun { edges, last_step: step_sources }
    }

    /// LangGraph's `apply_writes`: consume triggers, apply writes, clear what was not written, and
    /// `finish` every channel when nothing new can trigger a node. Returns the updated channels.
    fn apply_writes(&mut self, tasks: &[usize], writes: &[Vec<Write>]) -> BTreeSet<usize> {
        let bump_step = !tasks.is_empty();
        for &task in tasks {
            let seen = self.versions_seen.entry(task).or_default();
            for &chan in &self.triggers[task] {
                if self.versions[chan] > 0 {
                    seen.insert(chan, self.versions[chan]);
                }
            }
        }
        let next = self.versions.iter().copied().max().unwrap_or(0) + 1;
        let consumed: BTreeSet<usize> =
            tasks.iter().flat_map(|t| self.triggers[*t].iter().copied()).collect();
        for chan in consumed {
            if self.channels[chan].consume() {
                self.versions[chan] = next;
            }
        }
        let mut by_channel: BTreeMap<usize, Vec<Option<usize>>> = BTreeMap::new();
        for task_writes in writes {
            for (chan, value) in task_writes {
                by_channel.entry(*chan).or_default().push(*value);
            }
        }
        let mut updated = BTreeSet::new();
        for (chan, values) in by_channel {
            if self.channels[chan].update(&values) {
                self.versions[chan] = next;
                if self.channels[chan].is_available() {
                    updated.insert(chan);
                }
            }
        }
        if bump_step {
            for chan in 0..self.channels.len() {
                if self.channels[chan].is_available()
                    && !updated.contains(&chan)
                    && self.channels[chan].update(&[])
                {
                    self.versions[chan] = next;
                    if self.channels[chan].is_available() {
                        updated.insert(chan);
                    }
                }
            }
        }
        // Every channel of the dry run triggers some process, so "no trigger updated" means none updated.
        if bump_step && updated.is_empty() {
            for chan in 0..self.channels.len() {
                if self.channels[chan].finish() {
                    self.versions[chan] = next;
                    if self.channels[chan].is_available() {
                        updated.insert(chan);
                    }
                }
            }
        }
        updated
    }

    /// LangGraph's `prepare_next_tasks` for pull tasks: candidates are the processes triggered by the
    /// updated channels (by name), or all of them; a candidate runs if a trigger is available and newer
    /// than what it last saw.
    fn prepare(&self, updated: &BTreeSet<usize>) -> Vec<usize> {
        let candidates: Vec<usize> = if !updated.is_empty() {
            let mut c: Vec<usize> = (0..self.plan.procs.len())
                .filter(|p| self.triggers[*p].iter().any(|t| updated.contains(t)))
                .collect();
            c.sort_by(|a, b| self.plan.procs[*a].name.cmp(&self.plan.procs[*b].name));
            c
        } else if self.versions.iter().all(|v| *v == 0) {
            Vec::new()
        } else {
            std::iter::once(0).chain(self.plan.insertion_order.iter().copied()).collect()
        };
        candidates
            .into_iter()
            .filter(|p| {
                let available = |c: &usize| self.channels[*c].is_available();
                match self.versions_seen.get(p) {
                    None => self.triggers[*p].iter().any(available),
                    Some(seen) => self.triggers[*p]
                        .iter()
                        .any(|c| available(c) && self.versions[*c] > seen.get(c).copied().unwrap_or(0)),
                }
            })
            .collect()
    }
}
