"""Node timeouts and node defaults: a run timeout without retry, an idle timeout kept alive by heartbeats
and one that fires, a timed-out attempt retried, defaults applied graph-wide and overridden per node, a
subgraph not inheriting its parent's defaults. Nodes are async (LangGraph refuses a timeout on a sync
node), so the graphs run through `ainvoke`/`astream`; the sleeps are real and short."""

import asyncio
import operator
from typing import Annotated, TypedDict

from langgraph.graph import START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import RetryPolicy, TimeoutPolicy

from common import saver, scenario, thread


class Log(TypedDict, total=False):
    log: Annotated[list, operator.add]


class NodeFailure(Exception):
    pass


def quick_retry(max_attempts, **kw):
    return RetryPolicy(max_attempts=max_attempts, initial_interval=0.001, jitter=False, **kw)


def sleeper(name, tries, slow_tries, seconds):
    """An async node that sleeps `seconds` in its first `slow_tries` attempts, counting attempts."""

    async def node(state):
        tries.append(name)
        if tries.count(name) <= slow_tries:
            await asyncio.sleep(seconds)
        return {"log": [f"{name} after {tries.count(name)} tries"]}

    return node


@scenario
def run_timeout_without_retry_fails_the_run(rec):
    tries = []
    g = StateGraph(Log)
    g.add_node("slow", sleeper("slow", tries, 1, 0.5), timeout=0.05)
    g.add_edge(START, "slow")
    app = g.compile(checkpointer=saver())
    rec.ainvoke(app, {"log": []}, thread())
    rec.note(op="tries", tries=len(tries))
    rec.state(app, thread())


@scenario
def idle_timeout_is_kept_alive_by_heartbeats(rec):
    async def work(state, runtime: Runtime):
        for _ in range(4):
            await asyncio.sleep(0.05)
            runtime.heartbeat()
        return {"log": ["worked 4 beats"]}

    g = StateGraph(Log)
    g.add_node("work", work, timeout=TimeoutPolicy(idle_timeout=0.15, refresh_on="heartbeat"))
    g.add_edge(START, "work")
    app = g.compile(checkpointer=saver())
    rec.ainvoke(app, {"log": []}, thread())


@scenario
def idle_timeout_fires_without_progress(rec):
    async def work(state, runtime: Runtime):
        runtime.heartbeat()
        await asyncio.sleep(0.5)
        return {"log": ["never"]}

    g = StateGraph(Log)
    g.add_node("work", work, timeout=TimeoutPolicy(idle_timeout=0.05, refresh_on="heartbeat"))
    g.add_edge(START, "work")
    app = g.compile(checkpointer=saver())
    rec.ainvoke(app, {"log": []}, thread())
    rec.state(app, thread())


@scenario
def timed_out_attempt_is_retried_then_succeeds(rec):
    tries = []
    g = StateGraph(Log)
    g.add_node("slow", sleeper("slow", tries, 1, 0.5), timeout=0.05, retry_policy=quick_retry(3))
    g.add_edge(START, "slow")
    app = g.compile(checkpointer=saver())
    rec.astream(app, {"log": []}, thread(), ["updates", "values"])
    rec.note(op="tries", tries=len(tries))


@scenario
def node_defaults_apply_to_every_node_without_its_own(rec):
    tries = []
    g = StateGraph(Log)
    g.set_node_defaults(retry_policy=quick_retry(3), timeout=0.05)
    g.add_node("a", sleeper("a", tries, 1, 0.5))
    g.add_node("b", sleeper("b", tries, 1, 0.15), timeout=0.5)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    app = g.compile(checkpointer=saver())
    rec.astream(app, {"log": []}, thread(), ["updates", "values"])
    rec.note(op="tries", tries=tries)


@scenario
def a_nodes_own_retry_policy_overrides_the_default(rec):
    tries = []
    g = StateGraph(Log)
    g.set_node_defaults(retry_policy=quick_retry(3), timeout=0.05)
    g.add_node("once", sleeper("once", tries, 9, 0.5), retry_policy=quick_retry(1))
    g.add_edge(START, "once")
    app = g.compile(checkpointer=saver())
    rec.ainvoke(app, {"log": []}, thread())
    rec.note(op="tries", tries=tries)


@scenario
def subgraph_does_not_inherit_its_parents_node_defaults(rec):
    calls = []

    async def enter(state):
        calls.append("enter")
        return {"log": ["enter"]}

    async def flaky(state):
        calls.append("flaky")
        if calls.count("flaky") == 1:
            raise NodeFailure("first call")
        return {"log": ["flaky"]}

    sub = StateGraph(Log)
    sub.add_node("enter", enter)
    sub.add_node("flaky", flaky)
    sub.add_edge(START, "enter")
    sub.add_edge("enter", "flaky")
    g = StateGraph(Log)
    g.set_node_defaults(retry_policy=quick_retry(3, retry_on=NodeFailure))
    g.add_node("sub", sub.compile())
    g.add_edge(START, "sub")
    app = g.compile(checkpointer=saver())
    rec.ainvoke(app, {"log": []}, thread())
    rec.note(op="calls", calls=calls)
