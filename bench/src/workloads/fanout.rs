//! Fan-out workloads: 1000 `Send`s reduced into a list (fanout1000), and ten parallel branches joined by
//! a waiting edge, 100 rounds (parallel_join).

use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::runtime::Runtime;
use weft_graph::{CompiledGraph, END, GraphOutput, START, Send, State, StateGraph};
use weft_runnable_core::RunnableConfig;

use crate::measure::{Info, Line, Options, Threads, Workload, ensure, err, measure};

/// `results` (list concatenation) and `total` (no reducer).
#[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
struct FanState {
    #[state(append)]
    results: Vec<i64>,
    total: i64,
}

/// The payload of one `Send`: `{i: integer}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct WorkItem {
    i: i64,
}

struct Fanout {
    graph: CompiledGraph<FanState>,
}

impl Workload for Fanout {
    type Ctx = ();
    type Out = GraphOutput<FanState>;

    fn prepare(&mut self, _: &Runtime) -> Result<(), String> {
        Ok(())
    }

    async fn op(&self, _: &mut ()) -> Result<Self::Out, String> {
        let input = FanState::update().results(Vec::<i64>::new()).total(0);
        self.graph.invoke(input, &RunnableConfig::default()).await.map_err(err)
    }

    fn check(&self, out: &Self::Out, _: &()) -> Result<(), String> {
        let state = &out.value;
        ensure(state.total == 999_000, || format!("total is {}, expected 999000", state.total))?;
        ensure(state.results.len() == 1000, || format!("{} results, expected 1000", state.results.len()))?;
        let mut sorted = state.results.clone();
        sorted.sort_unstable();
        ensure(sorted.iter().copied().eq((0..1000).map(|i| 2 * i)), || {
            "results are not a permutation of [0, 2, ..., 1998]".to_owned()
        })
    }

    fn extra(&mut self, rt: &Runtime, _: &Options) -> Result<Line, String> {
        let out = rt.block_on(self.op(&mut ()))?;
        let in_order = out.value.results.iter().copied().eq((0..1000).map(|i| 2 * i));
        Ok(Line::from_iter([("results_in_send_order".to_owned(), json!(in_order))]))
    }
}

/// `fanout1000`: `split`, then 1000 `work` tasks from `Send`s in one superstep, then one `join`.
pub(crate) fn fanout1000(opts: &Options) -> Result<Line, String> {
    let info = Info::steps("fanout1000", 1000).unit("Send task");
    measure(
        opts,
        info,
        Threads::One,
        |_| Ok(()),
        |()| {
            let mut graph = StateGraph::<FanState>::new();
            graph.add_node("split", |_: &FanState| ());
            graph.add_node("work", |item: WorkItem| FanState::update().results(vec![2 * item.i]));
            graph.add_node("join", |s: &FanState| FanState::update().total(s.results.iter().sum::<i64>()));
            graph.add_edge(START, "split");
            graph.add_conditional_edges(
                "split",
                |_: &FanState| (0..1000).map(|i| Send::new("work", WorkItem { i })).collect::<Vec<_>>(),
                ["work"],
            );
            graph.add_edge("work", "join");
            graph.add_edge("join", END);
            Ok(Fanout { graph: graph.compile().map_err(err)? })
        },
    )
}

/// `names` (list concatenation) and `rounds` (no reducer).
#[derive(State, Debug, Clone, Default, Serialize, Deserialize)]
struct JoinState {
    #[state(append)]
    names: Vec<String>,
    rounds: i64,
}

struct ParallelJoin {
    graph: CompiledGraph<JoinState>,
    config: RunnableConfig,
}

impl Workload for ParallelJoin {
    type Ctx = ();
    type Out = GraphOutput<JoinState>;

    fn prepare(&mut self, _: &Runtime) -> Result<(), String> {
        Ok(())
    }

    async fn op(&self, _: &mut ()) -> Result<Self::Out, String> {
        let input = JoinState::update().names(Vec::<String>::new()).rounds(0);
        self.graph.invoke(input, &self.config).await.map_err(err)
    }

    fn check(&self, out: &Self::Out, _: &()) -> Result<(), String> {
        let state = &out.value;
        ensure(state.rounds == 100, || format!("rounds is {}, expected 100", state.rounds))?;
        ensure(state.names.len() == 1000, || format!("{} names, expected 1000", state.names.len()))?;
        let expected: Vec<String> = (0..10).map(|k| format!("b{k}")).collect();
        for (round, block) in state.names.chunks(10).enumerate() {
            let mut sorted = block.to_vec();
            sorted.sort_unstable();
            ensure(sorted == expected, || {
                format!("round {round} wrote {block:?}, expected b0..b9 once each")
            })?;
        }
        Ok(())
    }
}

/// `parallel_join`: `fan`, then `b0..b9` in one superstep, then `join` behind a waiting edge; 100 rounds.
pub(crate) fn parallel_join(opts: &Options) -> Result<Line, String> {
    let info = Info::steps("parallel_join", 100).unit("round (3 supersteps, 12 node runs)");
    measure(
        opts,
        info,
        Threads::One,
        |_| Ok(()),
        |()| {
            let branches: Vec<String> = (0..10).map(|k| format!("b{k}")).collect();
            let mut graph = StateGraph::<JoinState>::new();
            graph.add_node("fan", |_: &JoinState| ());
            for name in &branches {
                let own = name.clone();
                graph.add_node(name.as_str(), move |_: &JoinState| {
                    JoinState::update().names(vec![own.clone()])
                });
                graph.add_edge("fan", name.as_str());
            }
            graph.add_node("join", |s: &JoinState| JoinState::update().rounds(s.rounds + 1));
            graph.add_waiting_edge(branches.iter().map(String::as_str), "join");
            graph.add_edge(START, "fan");
            graph.add_conditional_edges(
                "join",
                |s: &JoinState| if s.rounds < 100 { "fan" } else { END },
                ["fan", END],
            );
            let config = RunnableConfig::default().with_recursion_limit(1000);
            Ok(ParallelJoin { graph: graph.compile().map_err(err)?, config })
        },
    )
}
