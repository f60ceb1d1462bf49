//! The channels of the drawing dry run, with LangGraph's semantics: `EphemeralValue` (a `branch:to:`
//! channel), `LastValueAfterFinish` (the same for a deferred node), `NamedBarrierValue` (a waiting edge) and
//! `NamedBarrierValueAfterFinish` (a waiting edge into a deferred node). Values do not matter, only
//! presence and which sources a barrier has seen.

use std::collections::BTreeSet;

#[derive(Debug, Clone)]
pub(super) enum Kind {
    Ephemeral,
    AfterFinish,
    Barrier(BTreeSet<usize>),
    BarrierAfterFinish(BTreeSet<usize>),
}

/// A channel of the dry run; values do not matter, only presence (and a barrier's sources seen).
#[derive(Debug, Clone)]
pub(super) struct Channel {
    kind: Kind,
    has_value: bool,
    finished: bool,
    seen: BTreeSet<usize>,
}

impl Channel {
    pub(super) fn new(kind: Kind) -> Self {
        Self { kind, has_value: false, finished: false, seen: BTreeSet::new() }
    }

    /// `values` are the writers a barrier records (`None` for other writes).
    pub(super) fn update(&mut self, values: &[Option<usize>]) -> bool {
        match &self.kind {
            Kind::Ephemeral => {
                let had = self.has_value;
                self.has_value = !values.is_empty();
                had || self.has_value
            }
            Kind::AfterFinish => {
                if values.is_empty() {
                    return false;
                }
                self.finished = false;
                self.has_value = true;
                true
            }
            Kind::Barrier(names) | Kind::BarrierAfterFinish(names) => {
                let mut updated = false;
                for v in values.iter().flatten() {
                    if names.contains(v) {
                        updated |= self.seen.insert(*v);
                    }
                }
                updated
            }
        }
    }

    fn complete(&self) -> bool {
        match &self.kind {
            Kind::Barrier(names) | Kind::BarrierAfterFinish(names) => self.seen == *names,
            Kind::Ephemeral | Kind::AfterFinish => self.has_value,
        }
    }

    pub(super) fn is_available(&self) -> bool {
        match self.kind {
            Kind::Ephemeral | Kind::Barrier(_) => self.complete(),
            Kind::AfterFinish | Kind::BarrierAfterFinish(_) => self.complete() && self.finished,
        }
    }

    pub(super) fn consume(&mut self) -> bool {
        match self.kind {
            Kind::Ephemeral => false,
            Kind::Barrier(_) if self.complete() => {
                self.seen.clear();
                true
            }
            Kind::AfterFinish | Kind::BarrierAfterFinish(_) if self.finished && self.complete() => {
                self.finished = false;
                self.has_value = false;
                self.seen.clear();
                true
            }
            _ => false,
        }
    }

    pub(super) fn finish(&mut self) -> bool {
        match self.kind {
            Kind::AfterFinish | Kind::BarrierAfterFinish(_) if !self.finished && self.complete() => {
                self.finished = true;
                true
            }
            _ => false,
        }
    }
}
