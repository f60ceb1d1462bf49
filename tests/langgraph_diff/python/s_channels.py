"""Reducers and channels: last value, reducers, Overwrite, ephemeral values, topics, undeclared keys,
waiting edges, routers."""

import operator
from typing import Annotated, TypedDict

from langgraph.channels import EphemeralValue, Topic
from langgraph.graph import END, START, StateGraph
from langgraph.types import Overwrite

from common import scenario, saver, thread


class Log(TypedDict, total=False):
    log: Annotated[list, operator.add]
    last: str


def fan(g, *names):
    for n in names:
        g.add_edge(START, n)


@scenario
def reducer_fan_out_appends_in_node_order(rec):
    g = StateGraph(Log)
    g.add_node("b", lambda s: {"log": ["b"]})
    g.add_node("a", lambda s: {"log": ["a"], "last": "a"})
    g.add_node("c", lambda s: {"log": [f"c saw {len(s['log'])}"]})
    fan(g, "a", "b")
    g.add_edge("a", "c")
    g.add_edge("b", "c")
    rec.invoke(g.compile(), {"log": ["in"]})


@scenario
def last_value_two_writes_in_a_step_is_an_error(rec):
    g = StateGraph(Log)
    g.add_node("a", lambda s: {"last": "a"})
    g.add_node("b", lambda s: {"last": "b"})
    fan(g, "a", "b")
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread())
    rec.state(app, thread())


@scenario
def overwrite_replaces_a_reducer_value(rec):
    g = StateGraph(Log)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b", lambda s: {"log": Overwrite(["fresh"])})
    g.add_node("c", lambda s: {"log": ["c"]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("a", "c")
    rec.invoke(g.compile(), {"log": ["in"]})


class Flash(TypedDict, total=False):
    flash: Annotated[str, EphemeralValue]
    events: Annotated[list, Topic(str)]
    kept: Annotated[list, Topic(str, accumulate=True)]
    seen: Annotated[list, operator.add]


def flash_graph(writers):
    g = StateGraph(Flash)
    for name in writers:
        g.add_node(name, lambda s, name=name: {"flash": name, "events": [name]} if name == "w1" else {"events": [name]})
        g.add_edge(START, name)
        g.add_edge(name, "read")
    g.add_node("read", lambda s: {"seen": [f"flash={s.get('flash')} events={s.get('events')}"]})
    g.add_node("later", lambda s: {"seen": [f"later flash={s.get('flash')} events={s.get('events')}"]})
    g.add_edge("read", "later")
    return g.compile(checkpointer=saver())


@scenario
def ephemeral_and_topic_written_by_one_task(rec):
    app = flash_graph(["w1"])
    rec.invoke(app, {"seen": []}, thread())


@scenario
def ephemeral_and_topic_written_in_a_step_of_two_tasks(rec):
    app = flash_graph(["w1", "w2"])
    rec.invoke(app, {"seen": []}, thread())
    rec.history(app, thread())


@scenario
def topic_accumulate_keeps_items_across_steps(rec):
    g = StateGraph(Flash)
    g.add_node("a", lambda s: {"kept": ["a1", "a2"]})
    g.add_node("b", lambda s: {"kept": "b", "seen": [str(s.get("kept"))]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    rec.invoke(g.compile(), {"kept": ["in"]})


@scenario
def undeclared_keys_in_input_and_updates_are_ignored(rec):
    g = StateGraph(Log)
    g.add_node("a", lambda s: {"log": ["a"], "nope": 1})
    g.add_edge(START, "a")
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": ["in"], "stranger": True}, thread())
    rec.state(app, thread())


@scenario
def waiting_edge_joins_branches_of_unequal_length(rec):
    g = StateGraph(Log)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b1", lambda s: {"log": ["b1"]})
    g.add_node("b2", lambda s: {"log": ["b2"]})
    g.add_node("join", lambda s: {"log": [f"join {len(s['log'])}"]})
    fan(g, "a", "b1")
    g.add_edge("b1", "b2")
    g.add_edge(["a", "b2"], "join")
    app = g.compile(checkpointer=saver())
    # Saved synchronously: with the default async durability LangGraph 1.2.24 serialises a step's
    # checkpoint after the next step has added to the barrier's live set of names, so the checkpoint
    # after `a` and `b1` already holds `b2` and its snapshot lists `join` among `next` (docs/graph.md,
    # "Differences from LangGraph").
    rec.invoke(app, {"log": []}, thread(), durability="sync")
    rec.history(app, thread())


@scenario
def router_loops_through_a_path_map(rec):
    g = StateGraph(Log)
    g.add_node("inc", lambda s: {"log": ["x"]})
    g.add_edge(START, "inc")
    g.add_conditional_edges("inc", lambda s: "again" if len(s["log"]) < 3 else "done", {"again": "inc", "done": END})
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread())
    rec.history(app, thread())


@scenario
def router_returning_none_is_an_error(rec):
    g = StateGraph(Log)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b", lambda s: {"log": ["b"]})
    g.add_edge(START, "a")
    g.add_conditional_edges("a", lambda s: None)
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread())
    rec.state(app, thread())


class RouterFailure(Exception):
    pass


def failing_router(s):
    raise RouterFailure("no way")


@scenario
def router_error_fails_the_step_of_its_node(rec):
    g = StateGraph(Log)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b", lambda s: {"log": ["b"]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_conditional_edges("b", failing_router, ["a", END])
    app = g.compile(checkpointer=saver())
    rec.stream(app, {"log": []}, thread(), ["tasks"])
    rec.state(app, thread())


@scenario
def router_error_under_exit_durability_saves_the_step_it_failed_in(rec):
    g = StateGraph(Log)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b", lambda s: {"log": ["b"]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_conditional_edges("b", failing_router, ["a", END])
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread(), durability="exit")
    rec.state(app, thread())
    rec.history(app, thread())


@scenario
def router_to_an_unknown_node(rec):
    g = StateGraph(Log)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_edge(START, "a")
    g.add_conditional_edges("a", lambda s: "nowhere")
    rec.invoke(g.compile(), {"log": []})


@scenario
def root_value_state_is_the_bare_value(rec):
    g = StateGraph(Annotated[list, operator.add])
    g.add_node("a", lambda s: [f"a saw {len(s)}"])
    g.add_node("b", lambda s: ["b"])
    g.add_node("c", lambda s: [f"c saw {len(s)}"])
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    g.add_edge("a", "c")
    g.add_edge("b", "c")
    app = g.compile(checkpointer=saver(), interrupt_before=["c"])
    rec.stream(app, ["0"], thread(), ["values", "updates"])
    rec.unorder_parallel_results()
    rec.state(app, thread())
    rec.invoke(app, None, thread())
    rec.state(app, thread())


@scenario
def waiting_edge_and_a_branch_both_trigger_the_join(rec):
    g = StateGraph(Log)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b", lambda s: {"log": ["b"]})
    g.add_node("join", lambda s: {"log": [f"join {len(s['log'])}"]})
    fan(g, "a", "b")
    g.add_conditional_edges("a", lambda s: "join", ["join"])
    g.add_edge(["a", "b"], "join")
    app = g.compile(checkpointer=saver())
    rec.stream(app, {"log": []}, thread(), ["tasks"])
    rec.unorder_parallel_results()
    rec.state(app, thread())


@scenario
def a_join_run_by_its_barrier_alone_lists_all_its_triggers(rec):
    g = StateGraph(Log)
    for n in ("a", "b1", "b2", "join"):
        g.add_node(n, lambda s, n=n: {"log": [n]})
    fan(g, "a", "b1")
    g.add_edge("b1", "b2")
    g.add_conditional_edges("b1", lambda s: "join", ["join"])
    g.add_edge(["a", "b2"], "join")
    app = g.compile(checkpointer=saver())
    rec.stream(app, {"log": []}, thread(), ["tasks"], durability="sync")
    rec.unorder_parallel_results()
    rec.history(app, thread())
