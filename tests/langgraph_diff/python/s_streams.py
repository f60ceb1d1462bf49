"""Streams: values (resume, pause), updates (parallel interrupts, cached writes on resume in subgraphs),
updates with tasks, tasks, checkpoints, debug, custom, messages, v2 parts."""

import operator
import time
from typing import Annotated, TypedDict

from langchain_core.messages import AIMessage
from langgraph.config import get_stream_writer
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import Command, interrupt

from common import ScriptedChatModel, saver, scenario, thread


class Log(TypedDict, total=False):
    log: Annotated[list, operator.add]


def ask(name, delay=0.0):
    def node(s):
        time.sleep(delay)  # order the parallel interrupts
        return {"log": [f"{name}:{interrupt(name + '?')}"]}
    return node


def chain(*names, asks=(), **kw):
    g = StateGraph(Log)
    prev = START
    for n in names:
        g.add_node(n, ask(n) if n in asks else (lambda s, n=n: {"log": [n]}))
        g.add_edge(prev, n)
        prev = n
    return g.compile(checkpointer=saver(), **kw)


@scenario
def values_stream_of_a_pause_and_a_resume(rec):
    app = chain("a", "b", "c", asks=("b",))
    rec.stream(app, {"log": []}, thread(), ["values"])
    rec.stream(app, Command(resume="yes"), thread(), ["values"])


@scenario
def updates_stream_of_a_pause_and_a_resume(rec):
    app = chain("a", "b", "c", asks=("b",))
    rec.stream(app, {"log": []}, thread(), ["updates"])
    rec.stream(app, Command(resume="yes"), thread(), ["updates"])


@scenario
def parallel_interrupts_stream_one_update_chunk_per_task(rec):
    g = StateGraph(Log)
    g.add_node("p", ask("p"))
    g.add_node("q", ask("q", delay=0.2))
    g.add_edge(START, "p")
    g.add_edge(START, "q")
    app = g.compile(checkpointer=saver())
    rec.stream(app, {"log": []}, thread(), ["updates"])


@scenario
def updates_come_before_task_results(rec):
    app = chain("a", "b")
    rec.stream(app, {"log": []}, thread(), ["updates", "tasks"])


@scenario
def task_events_carry_triggers(rec):
    app = chain("a", "b", asks=("b",))
    rec.stream(app, {"log": []}, thread(), ["tasks"])


@scenario
def checkpoint_events_carry_metadata_parent_and_tasks(rec):
    app = chain("a", "b")
    rec.stream(app, {"log": []}, thread(), ["checkpoints"], durability="sync")


@scenario
def debug_events_are_wrapped_with_step_and_type(rec):
    app = chain("a")
    rec.stream(app, {"log": []}, thread(), ["debug"], durability="sync")


@scenario
def custom_stream_carries_what_nodes_write(rec):
    def talk(s):
        writer = get_stream_writer()
        writer({"status": "thinking"})
        writer("done")
        return {"log": ["talk"]}

    g = StateGraph(Log)
    g.add_node("talk", talk)
    g.add_edge(START, "talk")
    rec.stream(g.compile(checkpointer=saver()), {"log": []}, thread(), ["custom", "updates"])


@scenario
def messages_stream_tokens_and_written_messages_with_metadata(rec):
    model = ScriptedChatModel(replies=["Hello there, friend"])

    def reply(s, config):
        return {"messages": [model.invoke(s["messages"], config)]}

    g = StateGraph(MessagesState)
    g.add_node("reply", reply)
    g.add_node("sign", lambda s: {"messages": [AIMessage(content="signed", id="sig-1")]})
    g.add_edge(START, "reply")
    g.add_edge("reply", "sign")
    app = g.compile(checkpointer=saver())
    rec.stream(app, {"messages": [{"role": "user", "content": "hi", "id": "h-1"}]}, thread(), ["messages"])


@scenario
def values_parts_v2_carry_interrupts(rec):
    app = chain("a", "b", asks=("b",))
    rec.stream_v2(app, {"log": []}, thread(), ["values"])


def cached_graph():
    sub = StateGraph(Log)
    sub.add_node("s", lambda s: time.sleep(0.02) or {"log": ["s"]})
    sub.add_edge(START, "s")
    g = StateGraph(Log)
    g.add_node("sub", sub.compile())
    g.add_node("plain", lambda s: {"log": ["plain"]})
    g.add_node("p", ask("p", delay=0.05))
    for n in ("sub", "plain", "p"):
        g.add_edge(START, n)
    return g.compile(checkpointer=saver())


@scenario
def resumed_subgraph_writes_are_reemitted_as_cached(rec):
    app = cached_graph()
    rec.invoke(app, {"log": []}, thread())
    rec.stream(app, Command(resume="P"), thread(), ["updates"])


@scenario
def resumed_subgraph_writes_are_reemitted_as_cached_with_subgraphs_streamed(rec):
    app = cached_graph()
    rec.invoke(app, {"log": []}, thread())
    rec.stream(app, Command(resume="P"), thread(), ["updates"], subgraphs=True)
