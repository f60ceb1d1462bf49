"""Prebuilt agents with scripted models: create_react_agent (a tool call then an answer, parallel calls,
streamed updates, history, a breakpoint before the tools) and ToolNode with tools_condition in a graph of
one's own."""

import warnings

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from common import ScriptedChatModel, saver, scenario, thread

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent


@tool
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


def calls(*specs):
    return AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": i} for n, a, i in specs])


def agent(replies, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(ScriptedChatModel(replies=replies), [add], checkpointer=saver(), **kw)


def ask(text):
    return {"messages": [{"role": "user", "content": text, "id": "h-1"}]}


@scenario
def react_agent_calls_a_tool_then_answers(rec):
    app = agent([calls(("add", {"a": 2, "b": 3}, "c1")), "5"])
    rec.invoke(app, ask("2 + 3?"), thread())


@scenario
def react_agent_runs_parallel_tool_calls(rec):
    app = agent([calls(("add", {"a": 1, "b": 2}, "c1"), ("add", {"a": 3, "b": 4}, "c2")), "3 and 7"])
    rec.invoke(app, ask("1+2, 3+4?"), thread())


@scenario
def react_agent_streams_updates(rec):
    app = agent([calls(("add", {"a": 2, "b": 3}, "c1")), "5"])
    rec.stream(app, ask("2 + 3?"), thread(), ["updates"])


@scenario
def react_agent_history(rec):
    app = agent([calls(("add", {"a": 2, "b": 3}, "c1")), "5"])
    rec.invoke(app, ask("2 + 3?"), thread())
    rec.history(app, thread())


@scenario
def react_agent_pauses_before_tools(rec):
    app = agent([calls(("add", {"a": 2, "b": 3}, "c1")), "5"], interrupt_before=["tools"])
    rec.invoke(app, ask("2 + 3?"), thread())
    rec.state(app, thread())
    rec.invoke(app, None, thread())


@scenario
def tool_node_with_tools_condition_in_a_graph(rec):
    model = ScriptedChatModel(replies=[calls(("add", {"a": 2, "b": 3}, "c1")), "5"])
    g = StateGraph(MessagesState)
    g.add_node("model", lambda s, config: {"messages": [model.invoke(s["messages"], config)]})
    g.add_node("tools", ToolNode([add]))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition)
    g.add_edge("tools", "model")
    app = g.compile(checkpointer=saver())
    rec.invoke(app, ask("2 + 3?"), thread())
    rec.state(app, thread())


@scenario
def tool_node_reports_an_unknown_tool(rec):
    model = ScriptedChatModel(replies=[calls(("nope", {}, "c1")), "sorry"])
    g = StateGraph(MessagesState)
    g.add_node("model", lambda s, config: {"messages": [model.invoke(s["messages"], config)]})
    g.add_node("tools", ToolNode([add]))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", tools_condition)
    g.add_edge("tools", "model")
    rec.invoke(g.compile(), ask("?"))
