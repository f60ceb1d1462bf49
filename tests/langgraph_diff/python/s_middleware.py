"""langchain 1.5's built-in middleware on create_agent with scripted models: human review (batched and per
call), summarization, call limits, fallbacks, retries, tool errors, PII, the todo list, tool selection,
context editing, dynamic prompts."""

from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    HumanInTheLoopMiddleware,
    LLMToolSelectorMiddleware,
    ModelCallLimitMiddleware,
    ModelFallbackMiddleware,
    ModelRetryMiddleware,
    PIIMiddleware,
    SummarizationMiddleware,
    TodoListMiddleware,
    ToolCallLimitMiddleware,
    ToolErrorMiddleware,
    ToolRetryMiddleware,
    dynamic_prompt,
    wrap_model_call,
)
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import ToolException, tool
from langgraph.types import Command

from common import ScriptedChatModel, saver, scenario, thread


@tool
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@tool
def send_email(to: str, body: str) -> str:
    """Sends an email."""
    return f"sent to {to}"


class RateLimitError(Exception):
    """A provider's 429, as the scripted model raises it."""


def calls(*specs):
    return AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": i} for n, a, i in specs])


def ask(text):
    return {"messages": [HumanMessage(content=text, id="h-1")]}


def agent(replies, tools=(add,), middleware=(), **kw):
    return create_agent(
        ScriptedChatModel(replies=replies), list(tools), middleware=list(middleware), checkpointer=saver(), **kw
    )


def add_call(i, a=2, b=3):
    return calls(("add", {"a": a, "b": b}, i))


def email_and_add():
    return calls(("send_email", {"to": "bob", "body": "hi"}, "e1"), ("add", {"a": 2, "b": 3}, "c1"))


def review(**kw):
    return HumanInTheLoopMiddleware(interrupt_on={"send_email": True, "add": False}, **kw)


@scenario
def hitl_batched_approve_runs_the_call(rec):
    app = agent([email_and_add(), "done"], tools=(add, send_email), middleware=[review()])
    rec.invoke(app, ask("mail bob"), thread())
    rec.state(app, thread())
    rec.invoke(app, Command(resume={"decisions": [{"type": "approve"}]}), thread())


@scenario
def hitl_batched_edit_runs_the_reviewers_call(rec):
    app = agent([email_and_add(), "done"], tools=(add, send_email), middleware=[review()])
    rec.invoke(app, ask("mail bob"), thread())
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "alice", "body": "hello"}}}
    rec.invoke(app, Command(resume={"decisions": [edit]}), thread())
    rec.state(app, thread())


@scenario
def hitl_batched_reject_and_respond(rec):
    two = calls(("send_email", {"to": "bob", "body": "hi"}, "e1"), ("send_email", {"to": "eve", "body": "yo"}, "e2"))
    app = agent([two, "done"], tools=(add, send_email), middleware=[review()])
    rec.invoke(app, ask("mail bob and eve"), thread())
    decisions = [{"type": "reject", "message": "not bob"}, {"type": "respond", "message": "eve is away"}]
    rec.invoke(app, Command(resume={"decisions": decisions}), thread())


@scenario
def hitl_batched_refuses_a_decision_not_allowed(rec):
    middleware = HumanInTheLoopMiddleware(interrupt_on={"send_email": {"allowed_decisions": ["approve"]}})
    app = agent([email_and_add(), "done"], tools=(add, send_email), middleware=[middleware])
    rec.invoke(app, ask("mail bob"), thread())
    rec.invoke(app, Command(resume={"decisions": [{"type": "reject"}]}), thread())


@scenario
def hitl_per_call_pauses_each_call(rec):
    two = calls(("send_email", {"to": "bob", "body": "hi"}, "e1"), ("send_email", {"to": "eve", "body": "yo"}, "e2"))
    app = agent([two, "done"], tools=(add, send_email), middleware=[review(interrupt_mode="per_call")])
    out = rec.invoke(app, ask("mail bob and eve"), thread())
    answers = {}
    for i in out["__interrupt__"]:
        if i.value["args"]["to"] == "bob":
            answers[i.id] = {"type": "approve"}
        else:
            answers[i.id] = {"type": "reject", "message": "not eve"}
    rec.invoke(app, Command(resume=answers), thread())


@scenario
def summarization_keeps_a_tool_call_with_its_result(rec):
    summarizer = ScriptedChatModel(replies=["the summary"])
    middleware = SummarizationMiddleware(model=summarizer, trigger=("messages", 7), keep=("messages", 1))
    app = agent([add_call("c1"), add_call("c2"), add_call("c3"), "all done"], middleware=[middleware])
    rec.invoke(app, ask("add thrice"), thread())


@scenario
def model_call_limit_ends_the_run(rec):
    middleware = ModelCallLimitMiddleware(run_limit=2, exit_behavior="end")
    app = agent([add_call("c1"), add_call("c2"), "never"], middleware=[middleware])
    rec.invoke(app, ask("add"), thread())
    rec.state(app, thread())


@scenario
def model_call_limit_per_thread_raises(rec):
    middleware = ModelCallLimitMiddleware(thread_limit=1, exit_behavior="error")
    app = agent(["one", "two"], tools=(), middleware=[middleware])
    rec.invoke(app, ask("first"), thread())
    rec.invoke(app, {"messages": [HumanMessage(content="second", id="h-2")]}, thread())


@scenario
def tool_call_limit_blocks_the_extra_calls(rec):
    middleware = ToolCallLimitMiddleware(tool_name="add", run_limit=1)
    app = agent([calls(("add", {"a": 1, "b": 2}, "c1"), ("add", {"a": 3, "b": 4}, "c2")), "ok"], middleware=[middleware])
    rec.invoke(app, ask("add twice"), thread())


@scenario
def tool_call_limit_ends_the_run(rec):
    middleware = ToolCallLimitMiddleware(run_limit=1, exit_behavior="end")
    app = agent([add_call("c1"), add_call("c2"), "never"], middleware=[middleware])
    rec.invoke(app, ask("add"), thread())


@scenario
def model_fallback_answers_when_the_model_fails(rec):
    backup = ScriptedChatModel(replies=["from the backup"])
    app = agent([RateLimitError("rate limit reached")], tools=(), middleware=[ModelFallbackMiddleware(backup)])
    rec.invoke(app, ask("hi"), thread())


@scenario
def model_retry_tries_again_then_gives_up(rec):
    middleware = ModelRetryMiddleware(max_retries=1, initial_delay=0, jitter=False)
    app = agent([RateLimitError("rate limit reached"), "recovered"], tools=(), middleware=[middleware])
    rec.invoke(app, ask("one"), thread("a"))
    app = agent([RateLimitError("rate limit reached")] * 2, tools=(), middleware=[middleware])
    rec.invoke(app, ask("two"), thread("b"))


def flaky_tool(failures):
    left = [failures]

    @tool
    def flaky(x: int) -> str:
        """Fails the first few times."""
        if left[0] > 0:
            left[0] -= 1
            raise ToolException("flaky")
        return f"ok {x}"

    return flaky


@scenario
def tool_retry_tries_again_then_reports(rec):
    middleware = ToolRetryMiddleware(max_retries=1, initial_delay=0, jitter=False)
    app = agent([calls(("flaky", {"x": 1}, "f1")), "fine"], tools=(flaky_tool(1),), middleware=[middleware])
    rec.invoke(app, ask("try"), thread("a"))
    app = agent([calls(("flaky", {"x": 2}, "f1")), "gave up"], tools=(flaky_tool(5),), middleware=[middleware])
    rec.invoke(app, ask("try"), thread("b"))


@scenario
def tool_error_middleware_answers_the_model(rec):
    middleware = ToolErrorMiddleware(lambda e, request: f"{request.tool_call['name']} failed: {e}")
    app = agent([calls(("flaky", {"x": 1}, "f1")), "noted"], tools=(flaky_tool(9),), middleware=[middleware])
    rec.invoke(app, ask("try"), thread())


@scenario
def pii_redacts_masks_and_hashes_the_input(rec):
    for strategy in ("redact", "mask", "hash"):
        app = agent(["noted"], tools=(), middleware=[PIIMiddleware("email", strategy=strategy)])
        rec.invoke(app, ask("mail me at ada@example.com or card 4111 1111 1111 1111"), thread(strategy))
    app = agent(["noted"], tools=(), middleware=[PIIMiddleware("credit_card", strategy="mask")])
    rec.invoke(app, ask("card 4111-1111-1111-1111 please"), thread("card"))


@scenario
def pii_custom_pattern_and_block(rec):
    custom = PIIMiddleware("api_key", detector=r"sk-[a-z0-9]{8}", strategy="redact", apply_to_output=True)
    app = agent(["your key sk-abcd1234 is set"], tools=(), middleware=[custom])
    rec.invoke(app, ask("use sk-zzzz9999"), thread("a"))
    app = agent(["never"], tools=(), middleware=[PIIMiddleware("ip", strategy="block")])
    rec.invoke(app, ask("host 10.0.0.1"), thread("b"))


@scenario
def todo_list_writes_the_todos(rec):
    todos = [{"content": "plan", "status": "in_progress"}, {"content": "ship", "status": "pending"}]
    app = agent([calls(("write_todos", {"todos": todos}, "t1")), "planned"], tools=(), middleware=[TodoListMiddleware()])
    rec.invoke(app, ask("plan it"), thread())


@scenario
def todo_list_refuses_parallel_writes(rec):
    todos = [{"content": "a", "status": "pending"}]
    twice = calls(("write_todos", {"todos": todos}, "t1"), ("write_todos", {"todos": todos}, "t2"))
    app = agent([twice, "ok"], tools=(), middleware=[TodoListMiddleware()])
    rec.invoke(app, ask("plan"), thread())


@wrap_model_call
def show_request(request, handler):
    """Answers with what the model would have been sent: the tools, the system prompt, the tool results."""
    tools = ",".join(sorted(t.name for t in request.tools))
    results = "|".join(m.content for m in request.messages if m.type == "tool")
    return AIMessage(content=f"tools={tools} system={request.system_prompt} results={results}", id="shown")


@tool
def multiply(a: int, b: int) -> int:
    """Multiplies two integers."""
    return a * b


@scenario
def llm_tool_selector_narrows_the_tools(rec):
    selector = ScriptedChatModel(replies=[calls(("ToolSelectionResponse", {"tools": ["multiply", "add"]}, "s1"))])
    middleware = LLMToolSelectorMiddleware(model=selector, max_tools=1)
    app = agent([], tools=(add, multiply, send_email), middleware=[middleware, show_request])
    rec.invoke(app, ask("times?"), thread())


@scenario
def context_editing_clears_old_tool_results(rec):
    edit = ClearToolUsesEdit(trigger=0, keep=1, placeholder="[gone]")
    middleware = ContextEditingMiddleware(edits=[edit])
    model_calls = [add_call("c1"), add_call("c2", 5, 6)]
    app = create_agent(
        ScriptedChatModel(replies=model_calls),
        [add],
        middleware=[middleware, ShowAfter(2)],
        checkpointer=saver(),
    )
    rec.invoke(app, ask("add twice"), thread())


class ShowAfter(AgentMiddleware):
    """Lets the first `n` model calls through, then answers with what the model would have been sent."""

    def __init__(self, n):
        super().__init__()
        self.left = n

    def wrap_model_call(self, request, handler):
        if self.left > 0:
            self.left -= 1
            return handler(request)
        return show_request.wrap_model_call(request, handler)


@dynamic_prompt
def count_prompt(request):
    return f"You have {len(request.messages)} messages."


@scenario
def dynamic_prompt_sets_the_system_prompt(rec):
    app = agent([], tools=(add,), middleware=[count_prompt, show_request], system_prompt="static")
    rec.invoke(app, ask("hi"), thread())
