"""Interrupts and resumes: interrupt(), Command(resume=..., update=...), resume by id, static
breakpoints, recursion limits on resumed runs, commands as root input."""

import operator
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from common import Rec, saver, scenario, thread


class Log(TypedDict, total=False):
    log: Annotated[list, operator.add]
    last: str


def ask(name, times=1):
    def node(s):
        answers = [interrupt(f"{name}{i}?") for i in range(times)]
        return {"log": [f"{name}:{'+'.join(answers)} saw {len(s['log'])}"]}
    return node


def note(name):
    return lambda s: {"log": [name]}


def chain(*nodes, **compile_kw):
    g = StateGraph(Log)
    prev = START
    for name, fn in nodes:
        g.add_node(name, fn)
        g.add_edge(prev, name)
        prev = name
    return g.compile(checkpointer=saver(), **compile_kw)


def pair(a, b, after=None):
    """Two nodes in one step (and `after` when given, after both)."""
    g = StateGraph(Log)
    for name, fn in (a, b):
        g.add_node(name, fn)
        g.add_edge(START, name)
    if after:
        g.add_node("after", note("after"))
        g.add_edge([a[0], b[0]], "after")
    return g.compile(checkpointer=saver())


def ids_by_value(out):
    return {i.value: i.id for i in out["__interrupt__"]}


@scenario
def interrupt_pauses_and_resume_reruns_the_node(rec):
    app = chain(("a", note("a")), ("b", ask("b")), ("c", note("c")))
    rec.invoke(app, {"log": []}, thread())
    rec.state(app, thread())
    rec.invoke(app, Command(resume="yes"), thread())
    rec.state(app, thread())
    rec.history(app, thread())


@scenario
def two_interrupts_in_one_node_take_two_resumes(rec):
    app = chain(("a", ask("a", 2)))
    rec.invoke(app, {"log": []}, thread())
    rec.invoke(app, Command(resume="x"), thread())
    rec.state(app, thread())
    rec.invoke(app, Command(resume="y"), thread())


@scenario
def resume_with_update_when_the_node_interrupts_again(rec):
    app = chain(("a", ask("a", 2)), ("b", note("b")))
    rec.invoke(app, {"log": []}, thread())
    rec.invoke(app, Command(resume="x", update={"log": ["upd"]}), thread())
    rec.state(app, thread())
    rec.invoke(app, Command(resume="y"), thread())
    rec.history(app, thread())


@scenario
def resume_with_update_when_the_node_finishes(rec):
    app = chain(("a", ask("a")), ("b", note("b")))
    rec.invoke(app, {"log": []}, thread())
    rec.invoke(app, Command(resume="x", update={"log": ["upd"]}), thread())
    rec.state(app, thread())


@scenario
def parallel_interrupts_resumed_one_at_a_time_by_id(rec):
    app = pair(("p", ask("p")), ("q", ask("q")), after=True)
    out = rec.invoke(app, {"log": []}, thread())
    ids = ids_by_value(out)
    rec.invoke(app, Command(resume={ids["p0?"]: "P"}), thread())
    rec.state(app, thread())
    rec.invoke(app, Command(resume={ids["q0?"]: "Q"}), thread())
    rec.state(app, thread())


@scenario
def parallel_interrupts_resumed_together_by_id(rec):
    app = pair(("p", ask("p")), ("q", ask("q")), after=True)
    out = rec.invoke(app, {"log": []}, thread())
    ids = ids_by_value(out)
    rec.invoke(app, Command(resume={ids["p0?"]: "P", ids["q0?"]: "Q"}), thread())
    rec.history(app, thread())


@scenario
def interrupt_beside_a_finished_task(rec):
    app = pair(("p", ask("p")), ("q", note("q")))
    rec.invoke(app, {"log": []}, thread())
    rec.state(app, thread())
    rec.invoke(app, Command(resume="P"), thread())
    rec.state(app, thread())


@scenario
def one_resume_value_for_two_pending_interrupts_is_an_error(rec):
    app = pair(("p", ask("p")), ("q", ask("q")))
    rec.invoke(app, {"log": []}, thread())
    rec.invoke(app, Command(resume="x"), thread())
    rec.state(app, thread())


@scenario
def resume_by_an_unknown_id_returns_the_pending_interrupt_again(rec):
    app = chain(("a", ask("a")))
    rec.invoke(app, {"log": []}, thread())
    rec.invoke(app, Command(resume={"0123456789abcdef0123456789abcdef": "x"}), thread())
    rec.state(app, thread())


@scenario
def resume_without_a_checkpointer_is_an_error(rec):
    g = StateGraph(Log)
    g.add_node("a", ask("a"))
    g.add_edge(START, "a")
    app = g.compile()
    rec.invoke(app, {"log": []})
    rec.invoke(app, Command(resume="x"))


@scenario
def static_breakpoints_before_and_after(rec):
    app = chain(("a", note("a")), ("b", note("b")), ("c", note("c")), interrupt_before=["b"], interrupt_after=["c"])
    rec.invoke(app, {"log": []}, thread())
    rec.state(app, thread())
    rec.invoke(app, None, thread())
    rec.state(app, thread())
    rec.invoke(app, None, thread())
    rec.state(app, thread())


@scenario
def command_update_at_a_static_breakpoint_continues(rec):
    app = chain(("a", note("a")), ("b", note("b")), ("c", note("c")), interrupt_before=["b"])
    rec.invoke(app, {"log": []}, thread())
    rec.invoke(app, Command(update={"log": ["upd"]}), thread())
    rec.state(app, thread())


@scenario
def recursion_limit_two_suffices_for_a_resumed_chain(rec):
    app = chain(("a", note("a")), ("b", note("b")), ("c", note("c")), interrupt_after=["a"])
    rec.invoke(app, {"log": []}, thread())
    rec.invoke(app, None, {**thread(), "recursion_limit": 2})
    rec.state(app, thread())


@scenario
def recursion_limit_one_on_a_resumed_chain(rec):
    app = chain(("a", note("a")), ("b", note("b")), ("c", note("c")), interrupt_after=["a"])
    rec.invoke(app, {"log": []}, thread())
    rec.invoke(app, None, {**thread(), "recursion_limit": 1})
    rec.state(app, thread())


@scenario
def recursion_limit_stops_a_loop(rec):
    g = StateGraph(Log)
    g.add_node("spin", note("x"))
    g.add_edge(START, "spin")
    g.add_edge("spin", "spin")
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, {**thread(), "recursion_limit": 4})
    rec.state(app, thread())


@scenario
def command_to_parent_as_root_input_is_an_error(rec):
    app = chain(("a", note("a")))
    rec.invoke(app, Command(graph=Command.PARENT, goto="a"), thread())


@scenario
def empty_command_input_is_an_error(rec):
    app = chain(("a", note("a")))
    rec.invoke(app, Command(), thread())


@scenario
def recursion_limit_two_after_an_interrupt_in_the_first_node(rec):
    app = chain(("a", ask("a")), ("b", note("b")), ("c", note("c")))
    rec.invoke(app, {"log": []}, thread())
    rec.invoke(app, Command(resume="x"), {**thread(), "recursion_limit": 2})
    rec.state(app, thread())
