"""Durability modes and what checkpoints hold: exit/sync/async, interrupted steps under `exit`, saved
versions_seen and updated_channels, failures that keep the finished tasks' writes."""

import operator
import time
from typing import Annotated, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command, interrupt

from common import saver, scenario, thread


class Log(TypedDict, total=False):
    log: Annotated[list, operator.add]
    last: str


class NodeFailure(Exception):
    pass


def chain3():
    g = StateGraph(Log)
    for n in ("a", "b", "c"):
        g.add_node(n, lambda s, n=n: {"log": [n]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    return g.compile(checkpointer=saver())


@scenario
def durability_exit_saves_only_the_last_checkpoint(rec):
    app = chain3()
    rec.invoke(app, {"log": []}, thread(), durability="exit")
    rec.history(app, thread())


@scenario
def durability_sync_saves_every_step(rec):
    app = chain3()
    rec.invoke(app, {"log": []}, thread(), durability="sync")
    rec.history(app, thread())
    rec.saved(app, thread(), fields=("updated_channels",))


def pq(runs):
    g = StateGraph(Log)

    def p(s):
        runs.append("p")
        return {"log": [f"p:{interrupt('p?')}"]}

    def q(s):
        runs.append("q")
        return {"log": ["q"]}

    g.add_node("p", p)
    g.add_node("q", q)
    g.add_edge(START, "p")
    g.add_edge(START, "q")
    return g.compile(checkpointer=saver())


@scenario
def durability_exit_keeps_the_finished_tasks_of_an_interrupted_step(rec):
    runs = []
    app = pq(runs)
    rec.invoke(app, {"log": []}, thread(), durability="exit")
    rec.state(app, thread())
    rec.invoke(app, Command(resume="P"), thread(), durability="exit")
    rec.note(op="runs", runs=sorted(runs))


@scenario
def durability_async_keeps_the_finished_tasks_of_an_interrupted_step(rec):
    runs = []
    app = pq(runs)
    rec.invoke(app, {"log": []}, thread())
    rec.state(app, thread())
    rec.invoke(app, Command(resume="P"), thread())
    rec.note(op="runs", runs=sorted(runs))


@scenario
def saved_checkpoints_record_versions_seen_and_updated_channels(rec):
    g = StateGraph(Log)
    g.add_node("a", lambda s: {"log": ["a"], "last": "a"})
    g.add_node("b", lambda s: {"log": ["b"]})
    g.add_node("c", lambda s: {"last": "c"})
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    g.add_edge("a", "c")
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread(), durability="sync")
    rec.saved(app, thread(), fields=("versions_seen", "updated_channels", "channel_versions"))


@scenario
def a_failed_task_reruns_alone_and_finished_writes_are_kept(rec):
    runs = []

    def flaky(s):
        runs.append("flaky")
        time.sleep(0.2)  # fail after `steady` has finished and saved its writes
        if runs.count("flaky") == 1:
            raise NodeFailure("first try")
        return {"log": ["flaky"]}

    def steady(s):
        runs.append("steady")
        return {"log": ["steady"]}

    g = StateGraph(Log)
    g.add_node("flaky", flaky)
    g.add_node("steady", steady)
    g.add_edge(START, "flaky")
    g.add_edge(START, "steady")
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread(), durability="sync")
    rec.state(app, thread())
    rec.invoke(app, None, thread(), durability="sync")
    rec.note(op="runs", runs=sorted(runs))
    rec.history(app, thread())


class SaverFailure(Exception):
    pass


class NoVersions(InMemorySaver):
    """A saver whose version counter is out of reach: `get_next_version` raises."""

    def get_next_version(self, current, channel):
        raise SaverFailure("version counter offline")


@scenario
def a_saver_failing_to_give_a_version_fails_the_run(rec):
    g = StateGraph(Log)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_edge(START, "a")
    saver = NoVersions()
    app = g.compile(checkpointer=saver)
    rec.invoke(app, {"log": []}, thread())
    rec.note(op="saved", checkpoint=saver.get_tuple(thread()) is not None)
