"""langchain 1.x's create_agent with a scripted model: the loop, streams and history, structured output in
both strategies, middleware hooks and their order, jumps, wrap_model_call and wrap_tool_call."""

from typing_extensions import TypedDict

from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    after_agent,
    after_model,
    before_agent,
    before_model,
    hook_config,
    wrap_model_call,
    wrap_tool_call,
)
from langchain.agents.structured_output import ProviderStrategy, ToolStrategy
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from common import ScriptedChatModel, saver, scenario, thread


@tool
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@tool(return_direct=True)
def lookup(key: str) -> str:
    """Looks a key up."""
    return f"value of {key}"


def calls(*specs):
    return AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": i} for n, a, i in specs])


def ask(text):
    return {"messages": [HumanMessage(content=text, id="h-1")]}


def agent(replies, tools=(add,), **kw):
    return create_agent(ScriptedChatModel(replies=replies), list(tools), checkpointer=saver(), **kw)


def add_2_3():
    return calls(("add", {"a": 2, "b": 3}, "c1"))


@scenario
def create_agent_calls_a_tool_then_answers(rec):
    app = agent([add_2_3(), "5"], system_prompt="You add numbers.")
    rec.invoke(app, ask("2 + 3?"), thread())
    rec.state(app, thread())


@scenario
def create_agent_streams_updates_and_values(rec):
    app = agent([calls(("add", {"a": 1, "b": 2}, "c1"), ("add", {"a": 3, "b": 4}, "c2")), "3 and 7"])
    rec.stream(app, ask("1+2, 3+4?"), thread(), ["updates", "values"])
    rec.unorder_parallel_results()


@scenario
def create_agent_history(rec):
    app = agent([add_2_3(), "5"])
    rec.invoke(app, ask("2 + 3?"), thread())
    rec.history(app, thread())


@scenario
def create_agent_without_tools_answers_once(rec):
    app = agent(["hello"], tools=())
    rec.invoke(app, ask("hi"), thread())


@scenario
def create_agent_reports_an_unknown_tool(rec):
    app = agent([calls(("nope", {}, "c1")), "sorry"])
    rec.invoke(app, ask("?"), thread())


@scenario
def create_agent_return_direct_ends_after_the_tool(rec):
    app = agent([calls(("lookup", {"key": "k"}, "c1")), "never"], tools=(add, lookup))
    rec.invoke(app, ask("k?"), thread())


class Weather(TypedDict):
    """The weather in a city."""

    city: str
    temp: int


@scenario
def structured_output_by_tool_strategy(rec):
    reply = calls(("Weather", {"city": "Paris", "temp": 21}, "s1"))
    app = agent([add_2_3(), reply], response_format=ToolStrategy(Weather))
    rec.invoke(app, ask("weather in Paris after 2+3?"), thread())


@scenario
def structured_output_tool_strategy_retries_a_bad_reply(rec):
    bad = calls(("Weather", {"city": "Paris"}, "s1"))
    good = calls(("Weather", {"city": "Paris", "temp": 21}, "s2"))
    app = agent([bad, good], response_format=ToolStrategy(Weather, handle_errors="Give both fields."))
    rec.invoke(app, ask("weather?"), thread())


@scenario
def structured_output_tool_strategy_refuses_two_replies(rec):
    two = calls(("Weather", {"city": "A", "temp": 1}, "s1"), ("Weather", {"city": "B", "temp": 2}, "s2"))
    good = calls(("Weather", {"city": "A", "temp": 1}, "s3"))
    app = agent([two, good], response_format=ToolStrategy(Weather, handle_errors="Only one."))
    rec.invoke(app, ask("weather?"), thread())


@scenario
def structured_output_by_provider_strategy(rec):
    app = agent(['{"city": "Oslo", "temp": 3}'], tools=(), response_format=ProviderStrategy(Weather))
    rec.invoke(app, ask("weather in Oslo?"), thread())


ROUTE_SCHEMA = {
    "title": "Route",
    "type": "object",
    "properties": {"next": {"enum": ["researcher", "coder", "FINISH"]}},
    "required": ["next"],
}


@scenario
def structured_output_from_a_schema_built_at_run_time(rec):
    reply = calls(("Route", {"next": "coder"}, "r1"))
    app = agent([reply], tools=(), response_format=ToolStrategy(ROUTE_SCHEMA))
    rec.invoke(app, ask("who next?"), thread())


class Tracer(AgentMiddleware):
    """Notes each hook it runs as a message-free state key write, so the order shows in `updates`."""

    def __init__(self, label):
        super().__init__()
        self.label = label

    @property
    def name(self):
        return self.label

    def before_agent(self, state, runtime):
        return None

    def before_model(self, state, runtime):
        return None

    def after_model(self, state, runtime):
        return None

    def after_agent(self, state, runtime):
        return None


@scenario
def middleware_hooks_run_in_langchain_order(rec):
    app = agent([add_2_3(), "5"], middleware=[Tracer("A"), Tracer("B")])
    rec.stream(app, ask("2 + 3?"), thread(), ["updates"])


@before_model(can_jump_to=["end"])
def stop_early(state, runtime):
    if len(state["messages"]) >= 3:
        return {"messages": [AIMessage(content="stopping", id="stop-1")], "jump_to": "end"}
    return None


@scenario
def before_model_jumps_to_the_end(rec):
    app = agent([add_2_3(), "never"], middleware=[stop_early])
    rec.stream(app, ask("2 + 3?"), thread(), ["updates"])
    rec.state(app, thread())


@after_model(can_jump_to=["model"])
def retry_empty(state, runtime):
    last = state["messages"][-1]
    if isinstance(last, AIMessage) and last.content == "":
        return {"messages": [{"role": "user", "content": "say something", "id": "nudge"}], "jump_to": "model"}
    return None


@scenario
def after_model_jumps_back_to_the_model(rec):
    app = agent(["", "something"], tools=(), middleware=[retry_empty])
    rec.invoke(app, ask("hi"), thread())


@before_agent(can_jump_to=["tools"])
def replay_calls(state, runtime):
    return {"messages": [add_2_3()], "jump_to": "tools"}


@scenario
def before_agent_jumps_to_the_tools(rec):
    app = agent(["5"], middleware=[replay_calls])
    rec.stream(app, ask("2 + 3?"), thread(), ["updates"])


def bracket(label):
    def wrap(request, handler):
        response = handler(request)
        msg = response.result[0]
        return AIMessage(content=f"{label}[{msg.content}]", id=msg.id, tool_calls=msg.tool_calls)

    wrap.__name__ = f"bracket_{label}"
    return wrap_model_call(wrap)


@scenario
def wrap_model_call_composes_outermost_first(rec):
    app = agent(["hi"], tools=(), middleware=[bracket("outer"), bracket("inner")])
    rec.invoke(app, ask("hi"), thread())


def tag_tool(label):
    def wrap(request, handler):
        result = handler(request)
        return ToolMessage(content=f"{label}({result.content})", tool_call_id=result.tool_call_id, name=result.name)

    wrap.__name__ = f"tag_{label}"
    return wrap_tool_call(wrap)


@scenario
def wrap_tool_call_composes_outermost_first(rec):
    app = agent([add_2_3(), "done"], middleware=[tag_tool("outer"), tag_tool("inner")])
    rec.invoke(app, ask("2 + 3?"), thread())


@after_agent
def sign(state, runtime):
    return {"messages": [AIMessage(content="-- signed", id="sig")]}


@scenario
def after_agent_runs_once_at_the_end(rec):
    app = agent([add_2_3(), "5"], middleware=[sign])
    rec.stream(app, ask("2 + 3?"), thread(), ["updates"])
