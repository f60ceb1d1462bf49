"""Nodes: deferred nodes, retry policies, node caches, remaining steps, message-list merging (replace by
id, remove), Send'd plain nodes that interrupt."""

import operator
from typing import Annotated, TypedDict

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.cache.memory import InMemoryCache
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.managed import RemainingSteps
from langgraph.types import CachePolicy, Command, RetryPolicy, Send, interrupt

from common import saver, scenario, thread


class Log(TypedDict, total=False):
    log: Annotated[list, operator.add]


class Steps(TypedDict, total=False):
    log: Annotated[list, operator.add]
    remaining_steps: RemainingSteps


class NodeFailure(Exception):
    pass


@scenario
def deferred_node_runs_once_after_branches_of_unequal_length(rec):
    g = StateGraph(Log)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b1", lambda s: {"log": ["b1"]})
    g.add_node("b2", lambda s: {"log": ["b2"]})
    g.add_node("end", lambda s: {"log": [f"end saw {len(s['log'])}"]}, defer=True)
    g.add_edge(START, "a")
    g.add_edge(START, "b1")
    g.add_edge("b1", "b2")
    g.add_edge("a", "end")
    g.add_edge("b2", "end")
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread())
    rec.history(app, thread())


@scenario
def retry_policy_reruns_a_failing_node(rec):
    tries = []

    def shaky(s):
        tries.append(1)
        if len(tries) < 3:
            raise NodeFailure("not yet")
        return {"log": [f"shaky after {len(tries)} tries"]}

    g = StateGraph(Log)
    g.add_node("shaky", shaky, retry_policy=RetryPolicy(max_attempts=3, initial_interval=0.001, jitter=False,
                                                         retry_on=NodeFailure))
    g.add_edge(START, "shaky")
    app = g.compile(checkpointer=saver())
    rec.stream(app, {"log": []}, thread(), ["updates", "values"])
    rec.note(op="tries", tries=len(tries))


@scenario
def retry_policy_gives_up_after_max_attempts(rec):
    tries = []

    def broken(s):
        tries.append(1)
        raise NodeFailure("never")

    g = StateGraph(Log)
    g.add_node("broken", broken, retry_policy=RetryPolicy(max_attempts=2, initial_interval=0.001, jitter=False,
                                                           retry_on=NodeFailure))
    g.add_edge(START, "broken")
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread())
    rec.note(op="tries", tries=len(tries))
    rec.state(app, thread())


@scenario
def retry_policy_list_applies_the_first_matching_policy(rec):
    tries = []

    def shaky(s):
        tries.append(1)
        if len(tries) <= 2:
            raise TimeoutError("slow")
        if len(tries) == 3:
            raise NodeFailure("not yet")
        return {"log": [f"shaky after {len(tries)} tries"]}

    policies = [
        RetryPolicy(max_attempts=5, initial_interval=0.001, jitter=False, retry_on=TimeoutError),
        RetryPolicy(max_attempts=4, initial_interval=0.001, jitter=False, retry_on=NodeFailure),
    ]
    g = StateGraph(Log)
    g.add_node("shaky", shaky, retry_policy=policies)
    g.add_edge(START, "shaky")
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"log": []}, thread())
    rec.note(op="tries", tries=len(tries))


@scenario
def cached_node_reuses_its_writes(rec):
    calls = []

    def slow(s):
        calls.append(1)
        return {"log": [f"slow #{len(calls)}"]}

    g = StateGraph(Log)
    g.add_node("slow", slow, cache_policy=CachePolicy())
    g.add_edge(START, "slow")
    app = g.compile(checkpointer=saver(), cache=InMemoryCache())
    rec.stream(app, {"log": ["x"]}, thread("t1"), ["updates"])
    rec.stream(app, {"log": ["x"]}, thread("t2"), ["updates"])
    rec.stream(app, {"log": ["y"]}, thread("t3"), ["updates"])
    rec.note(op="calls", calls=len(calls))


@scenario
def remaining_steps_count_down_to_the_limit(rec):
    g = StateGraph(Steps)
    g.add_node("a", lambda s: {"log": [f"a has {s['remaining_steps']}"]})
    g.add_node("b", lambda s: {"log": [f"b has {s['remaining_steps']}"]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    rec.invoke(g.compile(), {"log": []}, {"recursion_limit": 5})


@scenario
def messages_are_replaced_by_id_and_removed(rec):
    g = StateGraph(MessagesState)
    g.add_node("edit", lambda s: {"messages": [HumanMessage(content="edited", id="m1"), RemoveMessage(id="m2"),
                                               AIMessage(content="new", id="m3")]})
    g.add_edge(START, "edit")
    app = g.compile(checkpointer=saver())
    msgs = [HumanMessage(content="first", id="m1"), AIMessage(content="second", id="m2")]
    rec.invoke(app, {"messages": msgs}, thread())
    rec.update(app, thread(), {"messages": [RemoveMessage(id="m3")]}, as_node="edit")
    rec.state(app, thread())


@scenario
def messages_remove_all_drops_what_came_before_it(rec):
    g = StateGraph(MessagesState)
    g.add_node("a", lambda s: {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), AIMessage(content="summary", id="s")]})
    g.add_node("b", lambda s: {"messages": [AIMessage(content="b", id="b")]})
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    app = g.compile(checkpointer=saver())
    msgs = [HumanMessage(content="first", id="m1"), AIMessage(content="second", id="m2")]
    rec.invoke(app, {"messages": msgs}, thread())
    fresh = [HumanMessage(content="old", id="o"), RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage(content="fresh", id="f")]
    rec.update(app, thread(), {"messages": fresh}, as_node="a")
    rec.state(app, thread())


@scenario
def sent_plain_nodes_interrupt_and_resume_together(rec):
    def w(p):
        return {"log": [f"{p['topic']}:{interrupt(p['topic'] + '?')}"]}

    g = StateGraph(Log)
    g.add_node("w", w)
    g.set_conditional_entry_point(lambda s: [Send("w", {"topic": t}) for t in ("x", "y")])
    app = g.compile(checkpointer=saver())
    out = rec.invoke(app, {"log": []}, thread())
    ids = {i.value: i.id for i in out["__interrupt__"]}
    rec.state(app, thread())
    rec.invoke(app, Command(resume={ids["x?"]: "X", ids["y?"]: "Y"}), thread())


@scenario
def a_node_returning_a_string_or_a_number_is_an_invalid_update(rec):
    for tid, value in (("s", "hello"), ("n", 5)):
        g = StateGraph(Log)
        g.add_node("a", lambda s, value=value: value)
        g.add_edge(START, "a")
        app = g.compile(checkpointer=saver())
        try:
            app.invoke({"log": []}, thread(tid))
            rec.note(op="invoke", ok=True)
        except Exception as e:  # noqa: BLE001
            # The message's first line (then a link to the docs), in weft's lower case.
            first = str(e).split("\n")[0]
            rec.note(op="invoke", error={"type": type(e).__name__}, message=first[:1].lower() + first[1:])
        rec.state(app, thread(tid))


def quota_spent(s):
    raise NodeFailure("quota spent")


@scenario
def a_nodes_own_error_reaches_the_caller_as_itself(rec):
    inner = StateGraph(Log)
    inner.add_node("call", quota_spent)
    inner.add_edge(START, "call")
    for tid, node in (("own", quota_spent), ("sub", inner.compile())):
        g = StateGraph(Log)
        g.add_node("a", node)
        g.add_edge(START, "a")
        app = g.compile(checkpointer=saver())
        try:
            app.invoke({"log": []}, thread(tid))
            rec.note(op="invoke", ok=True)
        except NodeFailure as e:
            rec.note(op="invoke", caught="NodeFailure", message=str(e))
        # The saved task error is the node's own (LangGraph saves its repr).
        own = repr(NodeFailure("quota spent"))
        rec.note(op="task_errors", own=[str(t.error) == own for t in app.get_state(thread(tid)).tasks])
