"""Threads over several runs: new input after a finished run, history filters (limit, before, metadata,
a config naming a checkpoint), update_state through a router, object interrupts, a subgraph's own
checkpoints and custom chunks from inside subgraphs."""

import operator
from typing import Annotated, TypedDict

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from common import saver, scenario, snapshot, thread


class Log(TypedDict, total=False):
    log: Annotated[list, operator.add]
    last: str


def ab():
    g = StateGraph(Log)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b", lambda s: {"log": [f"b saw {len(s['log'])}"]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    return g.compile(checkpointer=saver())


@scenario
def a_second_input_continues_the_thread(rec):
    app = ab()
    rec.invoke(app, {"log": ["one"]}, thread())
    rec.invoke(app, {"log": ["two"]}, thread())
    rec.history(app, thread())


@scenario
def history_filters_by_limit_before_and_metadata(rec):
    app = ab()
    rec.invoke(app, {"log": []}, thread())
    full = list(app.get_state_history(thread()))
    rec.note(op="limit", snaps=[snapshot(s) for s in app.get_state_history(thread(), limit=2)])
    rec.note(op="before", snaps=[snapshot(s) for s in app.get_state_history(thread(), before=full[1].config)])
    rec.note(op="filter", snaps=[snapshot(s) for s in app.get_state_history(thread(), filter={"source": "input"})])
    rec.history(app, full[2].config)


@scenario
def update_state_runs_the_router_of_its_node(rec):
    g = StateGraph(Log)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("yes", lambda s: {"log": ["yes"]})
    g.add_node("no", lambda s: {"log": ["no"]})
    g.add_edge(START, "a")
    g.add_conditional_edges("a", lambda s: "yes" if s.get("last") == "ok" else "no", ["yes", "no"])
    app = g.compile(checkpointer=saver(), interrupt_before=["yes", "no"])
    rec.invoke(app, {"log": []}, thread())
    rec.state(app, thread())
    rec.update(app, thread(), {"last": "ok"}, as_node="a")
    rec.state(app, thread())
    rec.invoke(app, None, thread())


@scenario
def interrupt_values_and_answers_are_any_json(rec):
    def form(s):
        answer = interrupt({"question": "size?", "options": [1, 2, 3], "nested": {"ok": True}})
        return {"log": [f"picked {answer['size']} ({answer['why']})"]}

    g = StateGraph(Log)
    g.add_node("form", form)
    g.add_edge(START, "form")
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread())
    rec.invoke(app, Command(resume={"size": 2, "why": "fits"}), thread())


@scenario
def a_subgraph_keeps_checkpoints_in_its_namespace(rec):
    sg = StateGraph(Log)
    sg.add_node("x", lambda s: {"log": ["x"]})
    sg.add_node("y", lambda s: {"log": [f"y:{interrupt('y?')}"]})
    sg.add_edge(START, "x")
    sg.add_edge("x", "y")
    g = StateGraph(Log)
    g.add_node("sub", sg.compile())
    g.add_edge(START, "sub")
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread())
    parent = app.get_state(thread())
    sub_config = parent.tasks[0].state
    rec.state(app, sub_config)
    rec.history(app, sub_config)


@scenario
def custom_chunks_from_inside_a_subgraph_carry_its_namespace(rec):
    def talk(s):
        get_stream_writer()({"from": "inside"})
        return {"log": ["talk"]}

    sg = StateGraph(Log)
    sg.add_node("talk", talk)
    sg.add_edge(START, "talk")
    g = StateGraph(Log)
    g.add_node("sub", sg.compile())
    g.add_node("out", lambda s: get_stream_writer()("outside") or {"log": ["out"]})
    g.add_edge(START, "sub")
    g.add_edge("sub", "out")
    app = g.compile(checkpointer=saver())
    rec.stream(app, {"log": []}, thread(), ["custom"], subgraphs=True)
    rec.stream(app, {"log": []}, thread("t2"), ["custom"])


@scenario
def command_goto_end_stops_the_run(rec):
    g = StateGraph(Log)
    g.add_node("a", lambda s: Command(update={"log": ["a"]}, goto=END))
    g.add_node("b", lambda s: {"log": ["b"]})
    g.add_edge(START, "a")
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread())
    rec.state(app, thread())
