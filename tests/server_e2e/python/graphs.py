"""The LangGraph versions of the end-to-end suite's graphs (the weft versions are in ../src/graphs.rs).

No LLM: `chat` streams a scripted reply from langchain-core's fake chat model, `usage` one that reports
token usage and response metadata, `tool_calls` runs scripted tool calls through a `ToolNode`.
"""
import asyncio
import operator
from typing import Annotated, TypedDict

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolCallTransformer, ToolNode
from langgraph.stream import CheckpointsTransformer
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


def _model_graph(call):
    """`model`: `call` answering the messages."""
    builder = StateGraph(MessagesState)
    builder.add_node("model", call)
    builder.add_edge(START, "model")
    builder.add_edge("model", END)
    return builder


chat = _model_graph(call_model).compile()


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


@tool
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


@tool
def boom(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"boom: {reason}")


def plan(state: MessagesState):
    calls = [{"name": "add", "args": {"a": 2, "b": 3}, "id": "call_add"},
             {"name": "boom", "args": {"reason": "no"}, "id": "call_boom"}]
    return {"messages": [AIMessage(content="", id="plan-1", tool_calls=calls)]}


def _tool_calls():
    builder = StateGraph(MessagesState)
    builder.add_node("plan", plan)
    builder.add_node("tools", ToolNode([add, boom], handle_tool_errors=True))
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "tools")
    builder.add_edge("tools", END)
    return builder


# The v2 protocol's `tools` and `checkpoints` channels carry what these transformers ask LangGraph to
# stream (langgraph-api 0.16.7 streams v2 runs through `astream_events(version="v3")`, whose default
# transformers ask for neither).
tool_calls = _tool_calls().compile(transformers=[ToolCallTransformer, CheckpointsTransformer])


class UsageModel(BaseChatModel):
    """Streams "Hi there" in two chunks, the last one with token usage and response metadata."""

    @property
    def _llm_type(self):
        return "usage-fake"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="Hi there"))])

    def _stream(self, messages, stop=None, run_manager=None, **kwargs):
        parts = ["Hi", " there"]
        for i, text in enumerate(parts):
            chunk = AIMessageChunk(content=text, id="usage-1")
            if i == len(parts) - 1:
                chunk = AIMessageChunk(content=text, id="usage-1", chunk_position="last",
                                       usage_metadata={"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
                                       response_metadata={"finish_reason": "stop", "model_name": "fake-1"})
            generation = ChatGenerationChunk(message=chunk)
            if run_manager:
                run_manager.on_llm_new_token(text, chunk=generation)
            yield generation


def call_usage(state: MessagesState):
    return {"messages": [UsageModel().invoke(state["messages"])]}


usage = _model_graph(call_usage).compile()
