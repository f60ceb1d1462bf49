//! A `tracing` layer that keeps weft's spans (target `weft`) with their fields and parents, for tests of
//! what a run traces.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Subscriber, subscriber::DefaultGuard};
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{Layer, Registry};

/// One span as recorded.
#[derive(Debug, Clone)]
pub struct SpanRecord {
    pub id: u64,
    pub name: &'static str,
    pub parent: Option<u64>,
    pub fields: BTreeMap<String, String>,
}

impl SpanRecord {
    /// A field's value, `""` when it was not recorded.
    pub fn get(&self, field: &str) -> &str {
        self.fields.get(field).map_or("", String::as_str)
    }
}

/// The spans recorded so far, in the order they opened (`id` is that order: the registry reuses the ids of
/// closed spans).
#[derive(Clone, Default)]
pub struct Spans(Arc<Mutex<Recorded>>);

#[derive(Default)]
pub struct Recorded {
    spans: Vec<SpanRecord>,
    /// Open spans: the registry's id to the index in `spans`.
    open: std::collections::HashMap<u64, usize>,
}

impl Spans {
    /// Records the spans of this thread until the guard drops.
    pub fn capture() -> (Self, DefaultGuard) {
        let spans = Spans::default();
        let subscriber = Registry::default().with(spans.clone());
        (spans.clone(), tracing::subscriber::set_default(subscriber))
    }

    /// Every span recorded.
    pub fn all(&self) -> Vec<SpanRecord> {
        self.0.lock().unwrap().spans.clone()
    }

    /// The spans named `otel_name` (the run's name).
    pub fn named(&self, otel_name: &str) -> Vec<SpanRecord> {
        self.all().into_iter().filter(|s| s.get("otel.name") == otel_name).collect()
    }

    /// The one span named `otel_name`.
    pub fn one(&self, otel_name: &str) -> SpanRecord {
        let found = self.named(otel_name);
        assert_eq!(found.len(), 1, "one span named {otel_name}: {:#?}", self.all());
        found.into_iter().next().unwrap()
    }

    /// The span with id `id`.
    pub fn by_id(&self, id: u64) -> Option<SpanRecord> {
        self.all().into_iter().find(|s| s.id == id)
    }

    /// The name of `span`'s parent, `""` for a root.
    pub fn parent_name(&self, span: &SpanRecord) -> String {
        span.parent.and_then(|p| self.by_id(p)).map(|p| p.get("otel.name").to_owned()).unwrap_or_default()
    }
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().target() != "weft" {
            return;
        }
        let parent = ctx.span(id).and_then(|s| s.parent()).map(|p| p.id().into_u64());
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let mut rec = self.0.lock().unwrap();
        let parent = parent.and_then(|p| rec.open.get(&p).copied()).map(|i| i as u64);
        let index = rec.spans.len();
        rec.spans.push(SpanRecord { id: index as u64, name: attrs.metadata().name(), parent, fields });
        rec.open.insert(id.into_u64(), index);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut rec = self.0.lock().unwrap();
        if let Some(index) = rec.open.get(&id.into_u64()).copied() {
            values.record(&mut Fields(&mut rec.spans[index].fields));
        }
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        self.0.lock().unwrap().open.remove(&id.into_u64());
    }
}
