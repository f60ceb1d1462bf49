"""The LangGraph versions of the end-to-end suite's graphs (the weft versions are in ../src/graphs.rs).

No LLM: `chat` streams a scripted reply from langchain-core's fake chat model.
"""
import asyncio
import operator
from typing import Annotated, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt


class State(TypedDict, total=False):
    items: Annotated[list[str], operator.add]
    count: int


def node_a(state: State):
    get_stream_writer()({"progress": "in node_a"})
    return {"items": ["a"], "count": state.get("count", 0) + 1}


def node_b(state: State):
    return {"items": ["b"], "count": state.get("count", 0) + 1}


def _simple():
    builder = StateGraph(State)
    builder.add_node("node_a", node_a)
    builder.add_node("node_b", node_b)
    builder.add_edge(START, "node_a")
    builder.add_edge("node_a", "node_b")
    builder.add_edge("node_b", END)
    return builder


simple = _simple().compile()


def ask(state: State):
    answer = interrupt({"question": "approve?"})
    return {"items": [f"answer:{answer}"]}


def _hitl():
    builder = StateGraph(State)
    builder.add_node("ask", ask)
    builder.add_node("node_b", node_b)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", "node_b")
    builder.add_edge("node_b", END)
    return builder


hitl = _hitl().compile()


def call_model(state: MessagesState):
    model = GenericFakeChatModel(messages=iter([AIMessage(content="Hello there friend")]))
    return {"messages": [model.invoke(state["messages"])]}


def _chat():
    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_edge(START, "model")
    builder.add_edge("model", END)
    return builder


chat = _chat().compile()


def inner_a(state: State):
    get_stream_writer()({"progress": "in inner_a"})
    return {"items": ["inner"]}


def _inner():
    builder = StateGraph(State)
    builder.add_node("inner_a", inner_a)
    builder.add_edge(START, "inner_a")
    builder.add_edge("inner_a", END)
    return builder.compile()


def after(state: State):
    return {"items": ["after"]}


def _nested():
    builder = StateGraph(State)
    builder.add_node("inner", _inner())
    builder.add_node("after", after)
    builder.add_edge(START, "inner")
    builder.add_edge("inner", "after")
    builder.add_edge("after", END)
    return builder


nested = _nested().compile()


class SlowState(TypedDict, total=False):
    items: Annotated[list[str], operator.add]
    delay: float


async def wait(state: SlowState):
    await asyncio.sleep(state.get("delay", 1.0))
    return {"items": ["slept"]}


def slow_b(state: SlowState):
    return {"items": ["b"]}


def _slow():
    builder = StateGraph(SlowState)
    builder.add_node("wait", wait)
    builder.add_node("node_b", slow_b)
    builder.add_edge(START, "wait")
    builder.add_edge("wait", "node_b")
    builder.add_edge("node_b", END)
    return builder


slow = _slow().compile()


def explode(state: State):
    raise ValueError("boom")


def _fail():
    builder = StateGraph(State)
    builder.add_node("node_a", node_a)
    builder.add_node("explode", explode)
    builder.add_edge(START, "node_a")
    builder.add_edge("node_a", "explode")
    builder.add_edge("explode", END)
    return builder


fail = _fail().compile()


def count_up(state: State):
    return {"count": state.get("count", 0) + 1}


def _three():
    builder = StateGraph(State)
    builder.add_node("one", count_up)
    builder.add_node("two", count_up)
    builder.add_node("three", count_up)
    builder.add_edge(START, "one")
    builder.add_edge("one", "two")
    builder.add_edge("two", "three")
    builder.add_edge("three", END)
    return builder


three = _three().compile()


def add_n(items: list):
    return ["n"]


def _root():
    # The whole state is one list (a bare `__root__` schema): input, node returns and values are lists.
    builder = StateGraph(Annotated[list, operator.add])
    builder.add_node("n", add_n)
    builder.add_edge(START, "n")
    builder.add_edge("n", END)
    return builder


root = _root().compile()
