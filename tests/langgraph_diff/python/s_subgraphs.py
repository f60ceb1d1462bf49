"""Subgraphs: compiled graphs as nodes, interrupts inside them (one, two in a step, Send'd), Command to
the parent, subgraphs invoked inside function nodes, per-node checkpointed subgraphs, namespaces."""

import operator
import time
from typing import Annotated, TypedDict

from langgraph.graph import START, StateGraph
from langgraph.types import Command, Send, interrupt

from common import saver, scenario, thread


class Log(TypedDict, total=False):
    log: Annotated[list, operator.add]
    topic: str


class Inner(TypedDict, total=False):
    log: Annotated[list, operator.add]
    topic: str
    notes: Annotated[list, operator.add]


def child(label, asks=False, **compile_kw):
    """START -> one -> two; `one` asks a question when `asks`."""
    name = label
    g = StateGraph(Inner)

    def one(s):
        answer = interrupt(f"{name}?") if asks else "-"
        return {"notes": [f"{name}.one:{answer}"]}

    g.add_node("one", one)
    g.add_node("two", lambda s: {"log": [f"{name}.two saw {len(s['notes'])} notes"]})
    g.add_edge(START, "one")
    g.add_edge("one", "two")
    return g.compile(**compile_kw)


def parent(*children, after=True):
    g = StateGraph(Log)
    for name, sub in children:
        g.add_node(name, sub)
        g.add_edge(START, name)
    if after:
        g.add_node("after", lambda s: {"log": ["after"]})
        g.add_edge([n for n, _ in children], "after")
    return g.compile(checkpointer=saver())


@scenario
def subgraph_node_reads_and_writes_shared_keys(rec):
    app = parent(("sub", child("sub")))
    rec.invoke(app, {"log": ["in"]}, thread())
    rec.stream(app, {"log": ["in"]}, thread("t2"), ["updates"], subgraphs=True)
    rec.history(app, thread())


@scenario
def interrupt_inside_a_subgraph_and_resume(rec):
    app = parent(("sub", child("sub", asks=True)))
    rec.invoke(app, {"log": []}, thread())
    rec.state(app, thread(), subgraphs=True)
    rec.invoke(app, Command(resume="yes"), thread())
    rec.state(app, thread())


@scenario
def two_subgraphs_interrupting_in_one_step_resumed_one_at_a_time(rec):
    app = parent(("s1", child("s1", asks=True)), ("s2", child("s2", asks=True)))
    out = rec.invoke(app, {"log": []}, thread())
    ids = {i.value: i.id for i in out["__interrupt__"]}
    rec.invoke(app, Command(resume={ids["s1?"]: "A"}), thread())
    rec.state(app, thread())
    rec.invoke(app, Command(resume={ids["s2?"]: "B"}), thread())
    rec.state(app, thread())


@scenario
def sent_subgraphs_interrupting_resumed_one_at_a_time(rec):
    sg = StateGraph(Inner)
    # Each packet's subgraph asks its own question.
    sg.add_node("one", lambda s: {"notes": [f"{s['log'][0]}:{interrupt(s['log'][0] + '?')}"]})
    sg.add_edge(START, "one")
    g = StateGraph(Log)
    g.add_node("sub", sg.compile())
    g.set_conditional_entry_point(lambda s: [Send("sub", {"log": [t]}) for t in ("x", "y")])
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread())
    # Each packet's interrupt, in send order (the run lists them in the order its threads finish).
    ids = [t.interrupts[0].id for t in app.get_state(thread()).tasks]
    rec.invoke(app, Command(resume={ids[0]: "A"}), thread())
    rec.state(app, thread())
    rec.invoke(app, Command(resume={ids[1]: "B"}), thread())


def sent_asking_subgraphs():
    """Two `Send`s to one subgraph whose node asks `{first log entry}?`; `y`'s asks 50 ms later, so the
    packets finish in send order on both sides."""
    sg = StateGraph(Inner)

    def one(s):
        first = s["log"][0]
        if first == "y":
            time.sleep(0.05)
        return {"notes": [f"{first}:{interrupt(first + '?')}"]}

    sg.add_node("one", one)
    sg.add_edge(START, "one")
    g = StateGraph(Log)
    g.add_node("sub", sg.compile())
    g.set_conditional_entry_point(lambda s: [Send("sub", {"log": [t]}) for t in ("x", "y")])
    return g.compile(checkpointer=saver())


@scenario
def sent_subgraphs_resumed_one_at_a_time_stream_each_step_as_one_group(rec):
    app = sent_asking_subgraphs()
    modes = ["updates", "tasks", "checkpoints", "debug"]
    # Both packets' subgraphs run at once here, so their own chunks interleave as threads go: the first two
    # streams keep the parent's chunks only.
    rec.stream(app, {"log": []}, thread(), modes, durability="sync")
    ids = [t.interrupts[0].id for t in app.get_state(thread()).tasks]
    rec.stream(app, Command(resume={ids[0]: "A"}), thread(), modes, durability="sync")
    # `x`'s packet finished: its saved result is reused, `y`'s subgraph runs again.
    rec.stream(app, Command(resume={ids[1]: "B"}), thread(), modes, subgraphs=True, durability="sync")
    rec.state(app, thread())


@scenario
def sent_subgraphs_resumed_one_at_a_time_stream_values(rec):
    app = sent_asking_subgraphs()
    rec.invoke(app, {"log": []}, thread())
    ids = [t.interrupts[0].id for t in app.get_state(thread()).tasks]
    rec.stream(app, Command(resume={ids[0]: "A"}), thread(), ["values", "updates"])
    rec.stream(app, Command(resume={ids[1]: "B"}), thread(), ["values", "updates"], subgraphs=True)


@scenario
def command_to_parent_from_a_subgraph(rec):
    sg = StateGraph(Inner)
    sg.add_node("hop", lambda s: Command(graph=Command.PARENT, goto="other", update={"log": ["hop"]}))
    sg.add_edge(START, "hop")
    g = StateGraph(Log)
    g.add_node("sub", sg.compile())
    g.add_node("other", lambda s: {"log": ["other"]})
    g.add_edge(START, "sub")
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread())
    rec.history(app, thread())


@scenario
def subgraph_invoked_inside_a_function_node_shows_in_get_state(rec):
    sub = child("inner", asks=True)

    def call(s, config):
        out = sub.invoke({"log": [], "notes": []}, config)
        return {"log": out["log"]}

    g = StateGraph(Log)
    g.add_node("call", call)
    g.add_edge(START, "call")
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread())
    rec.state(app, thread(), subgraphs=True)
    rec.invoke(app, Command(resume="yes"), thread())


@scenario
def two_checkpointed_subgraphs_in_one_node_keep_their_own_state(rec):
    one = child("one", checkpointer=True, name="one")
    two = child("two", checkpointer=True, name="two")

    def call(s, config):
        a = one.invoke({"notes": []}, config)
        b = two.invoke({"notes": []}, config)
        return {"log": [f"one has {a['notes']}", f"two has {b['notes']}"]}

    g = StateGraph(Log)
    g.add_node("call", call)
    g.add_edge(START, "call")
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread())
    rec.invoke(app, {"log": []}, thread())


@scenario
def nested_subgraphs_stream_with_namespaces(rec):
    inner = child("inner")
    mid = StateGraph(Inner)
    mid.add_node("inner", inner)
    mid.add_node("m", lambda s: {"log": ["m"]})
    mid.add_edge(START, "inner")
    mid.add_edge("inner", "m")
    app = parent(("mid", mid.compile()), after=False)
    rec.stream(app, {"log": []}, thread(), ["updates", "values"], subgraphs=True)


@scenario
def finished_subgraph_is_reemitted_as_cached_when_its_sibling_resumes(rec):
    app = parent(("s1", child("s1")), ("s2", child("s2", asks=True)))
    rec.invoke(app, {"log": []}, thread())
    rec.stream(app, Command(resume="B"), thread(), ["updates"])


@scenario
def inner_writes_of_a_resumed_subgraph_are_reemitted_as_cached(rec):
    sg = StateGraph(Inner)
    sg.add_node("x", lambda s: {"notes": ["x"]})
    sg.add_node("y", lambda s: time.sleep(0.05) or {"notes": [f"y:{interrupt('y?')}"]})
    sg.add_edge(START, "x")
    sg.add_edge(START, "y")
    app = parent(("sub", sg.compile()), after=False)
    rec.invoke(app, {"log": []}, thread())
    rec.stream(app, Command(resume="Y"), thread(), ["updates"], subgraphs=True)


@scenario
def finished_subgraph_is_reemitted_as_cached_with_subgraphs_streamed(rec):
    app = parent(("s1", child("s1")), ("s2", child("s2", asks=True)))
    rec.invoke(app, {"log": []}, thread())
    rec.stream(app, Command(resume="B"), thread(), ["updates"], subgraphs=True)


@scenario
def function_node_calling_a_subgraph_is_reemitted_as_cached(rec):
    sub = child("inner")

    def call(s, config):
        return {"log": sub.invoke({"log": [], "notes": []}, config)["log"]}

    def p(s):
        time.sleep(0.1)
        return {"log": [f"p:{interrupt('p?')}"]}

    g = StateGraph(Log)
    g.add_node("call", call)
    g.add_node("p", p)
    g.add_edge(START, "call")
    g.add_edge(START, "p")
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread())
    rec.stream(app, Command(resume="P"), thread(), ["updates"], subgraphs=True)
