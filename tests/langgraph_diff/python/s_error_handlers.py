"""Node error handlers: a handler told the failure that goes on with a Command, a handler run after the
node's retries and retried itself, a node's own handler beside the graph's default one, a subgraph that
does not inherit its parent's default handler, a Send task's handler given its packet, and a run stopped between the failure and the handler's
end (the handler fails once) that resumes into the handler without running the node again."""

import operator
from typing import Annotated, TypedDict

from langgraph.errors import NodeError
from langgraph.graph import START, StateGraph
from langgraph.types import Command, RetryPolicy, Send

from common import saver, scenario, thread


class Log(TypedDict, total=False):
    log: Annotated[list, operator.add]


class NodeFailure(Exception):
    pass


def quick_retry(max_attempts):
    return RetryPolicy(max_attempts=max_attempts, initial_interval=0.001, jitter=False, retry_on=NodeFailure)


def failing(name, calls):
    def node(state):
        calls.append(name)
        raise NodeFailure(f"{name} went wrong")

    return node


def told(error):
    """What a handler reports of the failure it handles: the node, and whether the node's message is in
    the error it was given."""
    return f"{error.node} ({'went wrong' in str(error.error)})"


def after(state):
    return {"log": [f"after saw {len(state['log'])}"]}


@scenario
def error_handler_gets_the_failure_and_goes_on_with_a_command(rec):
    calls = []

    def handler(state, error: NodeError):
        calls.append("handler")
        return Command(update={"log": [f"handled {told(error)}"]}, goto="after")

    g = StateGraph(Log)
    g.add_node("fetch", failing("fetch", calls), error_handler=handler)
    g.add_node("after", after)
    g.add_edge(START, "fetch")
    app = g.compile(checkpointer=saver())
    rec.stream(app, {"log": []}, thread(), ["updates", "values", "tasks"])
    rec.note(op="calls", calls=calls)
    rec.state(app, thread())
    rec.saved(app, thread())


@scenario
def error_handler_runs_after_the_retries_and_is_retried_itself(rec):
    calls = []

    def handler(state, error: NodeError):
        calls.append("handler")
        if calls.count("handler") == 1:
            raise NodeFailure("handler's first attempt")
        return {"log": [f"handled {told(error)} after {calls.count('flaky')} attempts"]}

    g = StateGraph(Log)
    g.set_node_defaults(retry_policy=quick_retry(2))
    g.add_node("flaky", failing("flaky", calls), retry_policy=quick_retry(3), error_handler=handler)
    g.add_edge(START, "flaky")
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread())
    rec.note(op="calls", calls=calls)


@scenario
def a_nodes_own_error_handler_overrides_the_default(rec):
    calls = []

    def own(state, error: NodeError):
        calls.append("own")
        return Command(update={"log": [f"own handler: {told(error)}"]}, goto="b")

    def default(state, error: NodeError):
        calls.append("default")
        return {"log": [f"default handler: {told(error)}"]}

    g = StateGraph(Log)
    g.set_node_defaults(error_handler=default)
    g.add_node("a", failing("a", calls), error_handler=own)
    g.add_node("b", failing("b", calls))
    g.add_edge(START, "a")
    app = g.compile(checkpointer=saver())
    rec.stream(app, {"log": []}, thread(), ["updates", "values"])
    rec.note(op="calls", calls=calls)
    rec.saved(app, thread())


@scenario
def subgraph_does_not_inherit_its_parents_error_handler(rec):
    calls = []

    def handler(state, error: NodeError):
        calls.append(f"handler for {error.node}")
        return {"log": [f"parent handled {told(error)}"]}

    sub = StateGraph(Log)
    sub.add_node("inner", failing("inner", calls))
    sub.add_edge(START, "inner")
    g = StateGraph(Log)
    g.set_node_defaults(error_handler=handler)
    g.add_node("sub", sub.compile())
    g.add_edge(START, "sub")
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread())
    rec.note(op="calls", calls=calls)


@scenario
def run_stopped_before_the_handler_ends_resumes_into_the_handler(rec):
    calls = []

    def handler(state, error: NodeError):
        calls.append("handler")
        if calls.count("handler") == 1:
            raise NodeFailure("handler stopped")
        return Command(update={"log": [f"recovered {told(error)}"]}, goto="after")

    g = StateGraph(Log)
    g.add_node("fetch", failing("fetch", calls), error_handler=handler)
    g.add_node("after", after)
    g.add_edge(START, "fetch")
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread())
    rec.state(app, thread())
    rec.saved(app, thread())
    rec.stream(app, None, thread(), ["updates", "values"])
    rec.note(op="calls", calls=calls)
    rec.state(app, thread())
    rec.saved(app, thread())


@scenario
def error_handler_of_a_send_task_gets_its_packet(rec):
    calls = []

    def worker(packet):
        calls.append(f"w {packet['topic']}")
        if packet["topic"] == "bad":
            raise NodeFailure("w went wrong")
        return {"log": [f"w {packet['topic']}"]}

    def handler(packet, error: NodeError):
        calls.append("handler")
        return {"log": [f"handled {packet['topic']}: {told(error)}"]}

    g = StateGraph(Log)
    g.add_node("w", worker, error_handler=handler)
    g.add_conditional_edges(START, lambda s: [Send("w", {"topic": t}) for t in ("ok", "bad")])
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread())
    rec.note(op="calls", calls=sorted(calls))
    rec.saved(app, thread())
