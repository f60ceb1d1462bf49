//! [`RunControl`]: asks a running graph to stop at its next superstep boundary, resumably (a drain), as a
//! server does when it is told to shut down.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use weft_runnable_core::RunnableConfig;

/// A handle on runs: clone it, give it to runs through their config ([`RunControl::attach`]), and call
/// [`RunControl::request_drain`] from anywhere. A run that sees the request lets the superstep in flight
/// finish, saves its checkpoint (also in `exit` durability, and waits for `async` saves), and ends with
/// [`GraphError::Drained`](crate::GraphError::Drained) instead of starting the next step. Run again on
/// the same thread with no input (`GraphInput::Resume`, `invoke(None)` in LangGraph's terms), it continues
/// from that checkpoint: no finished step runs twice.
///
/// A run that has no step left ends as usual; a request made before a run starts drains it before its
/// first step (its input saved). One control may serve many runs: a request drains them all. Only the
/// root graph drains: subgraphs run inside the step in flight, which finishes.
///
/// ```
/// use std::sync::Arc;
/// use serde::{Deserialize, Serialize};
/// use weft_graph::{CompileConfig, END, GraphError, GraphInput, InMemorySaver, RunControl, START, State, StateGraph};
/// use weft_runnable_core::RunnableConfig;
/// # tokio_test::block_on(async {
/// #[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
/// struct Log {
///     #[state(append)]
///     steps: Vec<String>,
/// }
///
/// let control = RunControl::new();
/// let stop = control.clone();
/// let mut graph = StateGraph::<Log>::new();
/// graph.add_node("a", move |_: Log| {
///     stop.request_drain(); // as a shutdown would, while `a` runs
///     Log::update().steps(vec!["a".to_owned()])
/// });
/// graph.add_node("b", |_: Log| Log::update().steps(vec!["b".to_owned()]));
/// graph.add_edge(START, "a");
/// graph.add_edge("a", "b");
/// graph.add_edge("b", END);
/// let saver = Arc::new(InMemorySaver::new());
/// let graph = graph.compile_with(CompileConfig::new().checkpointer(saver)).unwrap();
///
/// let thread = RunnableConfig::default().with_configurable("thread_id", "t1");
/// let mut config = thread.clone();
/// control.attach(&mut config);
/// let drained = graph.invoke(Log::update(), &config).await;
/// assert!(matches!(drained, Err(GraphError::Drained { next_step: 2 })), "{drained:?}");
///
/// // Another process, say: the thread continues from the saved step, `a` not run again.
/// let done = graph.invoke(GraphInput::Resume, &thread).await.unwrap();
/// assert_eq!(done.value.steps, ["a", "b"]);
/// # });
/// ```
#[derive(Debug, Clone, Default)]
pub struct RunControl {
    drain: Arc<AtomicBool>,
}

impl RunControl {
    /// A control with nothing requested.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks every run holding this control to stop at its next superstep boundary (see the type's docs).
    /// Cannot be taken back.
    pub fn request_drain(&self) {
        self.drain.store(true, Ordering::SeqCst);
    }

    /// Whether a drain was requested.
    pub fn is_drain_requested(&self) -> bool {
        self.drain.load(Ordering::SeqCst)
    }

    /// Gives runs made with `config` this control.
    pub fn attach(&self, config: &mut RunnableConfig) {
        config.extensions.insert(self.clone());
    }

    /// The control runs made with `config` hold, if any.
    pub fn of(config: &RunnableConfig) -> Option<&RunControl> {
        config.extensions.get::<RunControl>()
    }
}

/// A run's sign of life: the engine notes it at each superstep and as each task ends (its writes saved),
/// in subgraphs too; anyone else may note it (a server notes each event it streams). Give it to a run
/// through its config ([`Progress::attach`]) and read [`Progress::idle`] from anywhere, as a watchdog
/// does to tell a run that is slow but moving from one that is stuck.
///
/// ```
/// use std::time::Duration;
/// use weft_graph::Progress;
///
/// let progress = Progress::new();
/// std::thread::sleep(Duration::from_millis(20));
/// assert!(progress.idle() >= Duration::from_millis(20));
/// progress.note();
/// assert!(progress.idle() < Duration::from_millis(20));
/// ```
#[derive(Debug, Clone)]
pub struct Progress {
    origin: Instant,
    /// Milliseconds from `origin` to the last note.
    last: Arc<AtomicU64>,
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

impl Progress {
    /// A progress noted now.
    pub fn new() -> Self {
        Self { origin: Instant::now(), last: Arc::new(AtomicU64::new(0)) }
    }

    /// Notes that the run moved now.
    pub fn note(&self) {
        let ms = u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.fetch_max(ms, Ordering::Relaxed);
    }

    /// How long since the run last moved.
    pub fn idle(&self) -> Duration {
        self.origin.elapsed().saturating_sub(Duration::from_millis(self.last.load(Ordering::Relaxed)))
    }

    /// Gives runs made with `config` this progress to note.
    pub fn attach(&self, config: &mut RunnableConfig) {
        config.extensions.insert(self.clone());
    }

    /// The progress runs made with `config` note, if any.
    pub fn of(config: &RunnableConfig) -> Option<&Progress> {
        config.extensions.get::<Progress>()
    }
}
