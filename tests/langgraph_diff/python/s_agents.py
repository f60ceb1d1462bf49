"""Prebuilt agents with scripted models: create_react_agent (a tool call then an answer, parallel calls,
streamed updates, history, a breakpoint before the tools) and ToolNode with tools_condition in a graph of
one's own, and the state a `Send` to a ToolNode reads (LangGraph 1.2.23's rule: the state the node would
get from an edge, and a graph inside a Send task reading its own state, never its parent's)."""

import warnings
from typing import Annotated

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState, ToolNode, tools_condition
from langgraph.types import Send

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


class TopicState(MessagesState):
    topic: str


@tool
def tell(label: str, state: Annotated[dict, InjectedState]) -> str:
    """Tells the topic and the size of the state it is given."""
    return f"{label}:{state['topic']}:{len(state['messages'])}:{','.join(sorted(state))}"


def tell_calls(*ids):
    return calls(*[("tell", {"label": i}, i) for i in ids])


def sends_to_tools(state):
    return [Send("tools", [call]) for call in state["messages"][-1].tool_calls]


def tools_by_send(topic):
    """plan (sets the topic, asks for two calls) -> a Send per call to the tool node -> END."""
    g = StateGraph(TopicState)
    g.add_node("plan", lambda s: {"topic": topic, "messages": [tell_calls("c1", "c2")]})
    g.add_node("tools", ToolNode([tell]))
    g.add_edge(START, "plan")
    g.add_conditional_edges("plan", sends_to_tools, ["tools"])
    g.add_edge("tools", END)
    return g


@scenario
def send_to_a_tool_node_reads_the_state_an_edge_gives(rec):
    app = tools_by_send("rust").compile(checkpointer=saver())
    rec.invoke(app, {"messages": [{"role": "user", "content": "tell", "id": "h-1"}], "topic": "x"}, thread())


@scenario
def graph_inside_a_send_task_reads_its_own_state(rec):
    inner = tools_by_send("inner").compile()
    g = StateGraph(TopicState)
    g.add_node("outer", lambda s: {"topic": "outer", "messages": [AIMessage(content="go", id="a-0")]})
    g.add_node("sub", inner)
    g.add_edge(START, "outer")
    g.add_conditional_edges(
        "outer",
        lambda s: [Send("sub", {"messages": [{"role": "user", "content": "in", "id": "h-2"}], "topic": "sent"})],
        ["sub"],
    )
    g.add_edge("sub", END)
    app = g.compile(checkpointer=saver())
    rec.invoke(app, {"messages": [{"role": "user", "content": "tell", "id": "h-1"}], "topic": "x"}, thread())
