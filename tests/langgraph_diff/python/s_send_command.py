"""Send (map-reduce, push tasks beside pull tasks, untracked values in packets) and Command (goto with
static edges, goto Send, Command as input)."""

import operator
from typing import Annotated, TypedDict

from langgraph.channels import UntrackedValue
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send

from common import saver, scenario, thread


class Jobs(TypedDict, total=False):
    topics: list
    log: Annotated[list, operator.add]
    secret: Annotated[str, UntrackedValue]


def worker(p):
    return {"log": [f"w:{p['topic']}"]}


@scenario
def send_fans_out_one_task_per_packet_in_send_order(rec):
    g = StateGraph(Jobs)
    g.add_node("w", worker)
    g.set_conditional_entry_point(lambda s: [Send("w", {"topic": t}) for t in s["topics"]])
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"topics": ["c", "a", "b"]}, thread())
    rec.history(app, thread())


@scenario
def send_tasks_run_beside_pull_tasks_and_come_first_in_next(rec):
    g = StateGraph(Jobs)
    g.add_node("fan", lambda s: {"log": ["fan"]})
    g.add_node("pull", lambda s: {"log": ["pull"]})
    g.add_node("w", worker)
    g.add_edge(START, "fan")
    g.add_edge("fan", "pull")
    g.add_conditional_edges("fan", lambda s: [Send("w", {"topic": t}) for t in s["topics"]])
    app = g.compile(checkpointer=saver(), interrupt_before=["pull"])
    rec.invoke(app, {"topics": ["x", "y"]}, thread())
    rec.state(app, thread())
    rec.invoke(app, None, thread())
    rec.history(app, thread())


@scenario
def untracked_values_never_reach_a_checkpoint_even_inside_sends(rec):
    g = StateGraph(Jobs)
    g.add_node("prep", lambda s: {"secret": "s3cr3t", "log": ["prep"]})
    g.add_node("w", lambda p: {"log": [f"w:{p['topic']}:{p.get('secret')}"]})
    g.add_edge(START, "prep")
    g.add_conditional_edges("prep", lambda s: [Send("w", {"topic": "t", "secret": s["secret"]})])
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"topics": []}, thread())
    rec.state(app, thread())
    rec.saved(app, thread(), fields=())


@scenario
def send_to_end_is_an_error(rec):
    g = StateGraph(Jobs)
    g.add_node("w", worker)
    g.set_conditional_entry_point(lambda s: [Send(END, {"topic": "x"})])
    rec.invoke(g.compile(), {"topics": []})


@scenario
def command_goto_and_static_edges_both_fire(rec):
    g = StateGraph(Jobs)
    g.add_node("a", lambda s: Command(update={"log": ["a"]}, goto="c"))
    g.add_node("b", lambda s: {"log": ["b"]})
    g.add_node("c", lambda s: {"log": ["c"]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread())
    rec.history(app, thread())


@scenario
def command_goto_send_packets(rec):
    g = StateGraph(Jobs)
    g.add_node("a", lambda s: Command(update={"log": ["a"]}, goto=[Send("w", {"topic": t}) for t in ("1", "2")]))
    g.add_node("w", worker)
    g.add_edge(START, "a")
    app = g.compile(checkpointer=saver())
    rec.stream(app, {"log": []}, thread(), ["values"])


@scenario
def command_as_input_updates_and_goes_to_a_node(rec):
    g = StateGraph(Jobs)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b", lambda s: {"log": [f"b saw {len(s['log'])}"]})
    g.add_edge(START, "a")
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread())
    rec.invoke(app, Command(update={"log": ["cmd"]}, goto="b"), thread())
    rec.state(app, thread())
    rec.history(app, thread())


@scenario
def node_returning_several_commands_and_updates(rec):
    g = StateGraph(Jobs)
    g.add_node("a", lambda s: [Command(update={"log": ["a1"]}, goto="b"), {"log": ["a2"]}])
    g.add_node("b", lambda s: {"log": ["b"]})
    g.add_edge(START, "a")
    rec.invoke(g.compile(), {"log": []})


def relay(cmd):
    return [cmd, Command(update={"log": ["2"]})]


def relay_sends(s):
    return [
        Send("2", Command(goto=Send("w", {"topic": "x"}))),
        Send("2", Command(update={"log": ["cmd"]}, goto=Send("w", {"topic": "y"}))),
        "3",
    ]


@scenario
def send_carrying_a_command_runs_its_reemitted_goto(rec):
    g = StateGraph(Jobs)
    g.add_node("1", lambda s: {"log": ["1"]})
    g.add_node("2", relay)
    g.add_node("w", worker)
    g.add_node("3", lambda s: {"log": ["3"]})
    g.add_edge(START, "1")
    g.add_conditional_edges("1", relay_sends)
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread())
    rec.state(app, thread())


@scenario
def send_carrying_a_command_resumes_from_a_breakpoint(rec):
    g = StateGraph(Jobs)
    g.add_node("1", lambda s: {"log": ["1"]})
    g.add_node("2", relay)
    g.add_node("w", worker)
    g.add_node("3", lambda s: {"log": ["3"]})
    g.add_edge(START, "1")
    g.add_conditional_edges("1", relay_sends)
    app = g.compile(checkpointer=saver(), interrupt_before=["2"])
    rec.invoke(app, {"log": []}, thread())
    rec.state(app, thread())
    rec.invoke(app, None, thread())
    rec.state(app, thread())
