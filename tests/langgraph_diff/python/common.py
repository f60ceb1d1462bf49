"""What a LangGraph user observes, recorded as plain JSON: the Python half of the differential suite.

Every scenario builds a graph, drives it through a `Rec` (invoke, stream, get_state, history, saved
checkpoints) and returns the recorded observations. Values are turned into JSON here and only here; ids,
timestamps and versions are left as they are (the comparer in xtask normalises both sides alike).
"""

import asyncio
import dataclasses
import json

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import NodeTimeoutError
from langgraph.types import Command, Interrupt, Send

SCENARIOS = {}


def scenario(fn):
    """Registers a scenario under its function name."""
    SCENARIOS[fn.__name__] = fn
    return fn


def thread(tid="t", **extra):
    """A run config on thread `tid` (with extra configurable keys)."""
    return {"configurable": {"thread_id": tid, **extra}}


def saver():
    return InMemorySaver()


def message(m):
    """A message in the suite's compact form."""
    out = {"type": m.type, "content": m.content, "id": m.id}
    calls = getattr(m, "tool_calls", None)
    if calls:
        out["tool_calls"] = [{"name": c["name"], "args": c["args"], "id": c["id"]} for c in calls]
    if m.type == "tool":
        out["tool_call_id"] = m.tool_call_id
    if m.name:
        out["name"] = m.name
    return out


def js(v):
    """Any value LangGraph hands out, as JSON."""
    if isinstance(v, BaseMessage):
        return message(v)
    if isinstance(v, Interrupt):
        return {"value": js(v.value), "id": v.id}
    if isinstance(v, Send):
        return {"node": v.node, "arg": js(v.arg)}
    if isinstance(v, dict):
        return {str(k): js(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [js(x) for x in v]
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: js(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)


def error(e):
    """An exception as the suite's error record: its class name (the comparer maps it to the shared
    vocabulary); a node timeout adds its node, which timeout fired and that timeout."""
    if isinstance(e, NodeTimeoutError):
        return {"type": "NodeTimeoutError", "node": e.node, "kind": e.kind, "timeout": e.timeout}
    return {"type": type(e).__name__}


def config(c):
    if c is None:
        return None
    conf = c["configurable"]
    return {"checkpoint_ns": conf.get("checkpoint_ns", ""), "checkpoint_id": conf.get("checkpoint_id")}


def task(t):
    out = {"id": t.id, "name": t.name, "interrupts": js(t.interrupts)}
    if t.error is not None:
        out["error"] = True
    if t.result is not None:
        out["result"] = js(t.result)
    if t.state is not None:
        out["state"] = config(t.state) if isinstance(t.state, dict) else snapshot(t.state)
    return out


def snapshot(s):
    return {
        "values": js(s.values),
        "next": list(s.next),
        "tasks": [task(t) for t in s.tasks],
        "interrupts": js(s.interrupts),
        "metadata": None if s.metadata is None else {k: js(s.metadata.get(k)) for k in ("source", "step", "parents")},
        "config": snapshot_config(s.config),
        "parent_config": snapshot_config(s.parent_config),
    }


def snapshot_config(c):
    """A snapshot's config: `config`, with `checkpoint_map` when the snapshot is a subgraph's."""
    out = config(c)
    if out is not None and "checkpoint_map" in c["configurable"]:
        out["checkpoint_map"] = js(c["configurable"]["checkpoint_map"])
    return out


def chunk_payload(mode, payload):
    if mode in ("checkpoints",):
        return checkpoint_event(payload)
    if mode == "debug":
        out = {k: js(v) for k, v in payload.items() if k != "payload"}
        inner = payload["payload"]
        out["payload"] = checkpoint_event(inner) if payload["type"] == "checkpoint" else task_event(inner)
        return out
    if mode == "messages":
        msg, meta = payload
        keep = ("langgraph_node", "langgraph_step", "langgraph_triggers", "thread_id", "checkpoint_ns")
        return [message(msg), {k: js(meta[k]) for k in keep if k in meta}]
    return task_event(payload) if mode == "tasks" else js(payload)


def task_event(p):
    out = js(p)
    for i in out.get("interrupts") or []:
        if isinstance(i, dict) and i.get("response_schema") is None:
            i.pop("response_schema", None)
    if "error" in p:
        out["error"] = None if p["error"] is None else True
    return out


def checkpoint_event(p):
    out = {k: js(v) for k, v in p.items() if k not in ("config", "parent_config")}
    for k in ("config", "parent_config"):
        if k in p:
            out[k] = config(p[k])
    # Its tasks as task events are recorded: no empty `response_schema`, the error as a flag.
    for t in out.get("tasks") or []:
        for i in t.get("interrupts") or []:
            if isinstance(i, dict) and i.get("response_schema") is None:
                i.pop("response_schema", None)
        if "error" in t:
            t["error"] = True
    return out


def canonical(value):
    """`value` as JSON with sorted keys and no spaces (the Rust recorder's `canonical`)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Rec:
    """Records observations in order."""

    def __init__(self):
        self.obs = []

    def note(self, **fields):
        self.obs.append(fields)

    def invoke(self, app, inp, cfg=None, **kw):
        try:
            out = app.invoke(inp, cfg, **kw)
        except Exception as e:  # noqa: BLE001 - an error is an observation
            self.note(op="invoke", error=error(e))
            return None
        self.note(op="invoke", out=js(out))
        return out

    def ainvoke(self, app, inp, cfg=None, **kw):
        """`invoke` through `ainvoke`, for graphs with async-only nodes (a node timeout needs one)."""
        try:
            out = asyncio.run(app.ainvoke(inp, cfg, **kw))
        except Exception as e:  # noqa: BLE001
            self.note(op="invoke", error=error(e))
            return None
        self.note(op="invoke", out=js(out))
        return out

    def astream(self, app, inp, cfg, modes, **kw):
        """`stream` through `astream` (root chunks only), for graphs with async-only nodes."""
        chunks = []
        rec = {"op": "stream", "modes": list(modes), "chunks": chunks}

        async def run():
            async for ns, mode, payload in app.astream(inp, cfg, stream_mode=list(modes), subgraphs=True, **kw):
                if not ns:
                    chunks.append([mode, list(ns), chunk_payload(mode, payload)])

        try:
            asyncio.run(run())
        except Exception as e:  # noqa: BLE001
            rec["error"] = error(e)
        self.obs.append(rec)

    def stream(self, app, inp, cfg, modes, subgraphs=False, **kw):
        chunks = []
        rec = {"op": "stream", "modes": list(modes), "chunks": chunks}
        try:
            for part in app.stream(inp, cfg, stream_mode=list(modes), subgraphs=True, **kw):
                ns, mode, payload = part
                if ns and not subgraphs:
                    continue
                chunks.append([mode, list(ns), chunk_payload(mode, payload)])
        except Exception as e:  # noqa: BLE001
            rec["error"] = error(e)
        self.obs.append(rec)

    def unorder_parallel_results(self):
        """Sorts the last recorded stream's results of parallel tasks within each step by mode, then by
        canonical JSON: its `updates` chunks and its `tasks` result chunks, in each run of chunks between two
        step marks (a `values` chunk, or a `tasks` chunk that starts a task). Parallel tasks report in the
        order they finish, which neither side fixes (LangGraph runs sync nodes on a thread pool)."""
        chunks = self.obs[-1]["chunks"]
        out, step = [], []
        for c in chunks + [None]:
            if c is None or step_mark(c):
                step.sort(key=result_key)
                out += step
                step = []
                if c is not None:
                    out.append(c)
            else:
                step.append(c)
        self.obs[-1]["chunks"] = out

    def stream_v2(self, app, inp, cfg, modes):
        parts = []
        for part in app.stream(inp, cfg, stream_mode=list(modes), version="v2"):
            parts.append({"type": part["type"], "ns": list(part["ns"]), "data": js(part["data"]),
                          "interrupts": js(part.get("interrupts"))})
        self.note(op="stream_v2", parts=parts)

    def state(self, app, cfg, subgraphs=False):
        try:
            s = app.get_state(cfg, subgraphs=subgraphs)
        except Exception as e:  # noqa: BLE001
            self.note(op="state", error=error(e))
            return None
        self.note(op="state", snap=snapshot(s))
        return s

    def history(self, app, cfg):
        self.note(op="history", snaps=[snapshot(s) for s in app.get_state_history(cfg)])

    def update(self, app, cfg, values, as_node=None):
        try:
            c = app.update_state(cfg, values, as_node=as_node)
        except Exception as e:  # noqa: BLE001
            self.note(op="update_state", error=error(e))
            return None
        self.note(op="update_state", config=config(c))
        return c

    def saved(self, app, cfg, fields=("versions_seen", "updated_channels")):
        """The thread's saved root checkpoints, oldest first: step, source, pending writes and the checkpoint
        `fields` asked for."""
        rows = []
        root = {"configurable": {**cfg["configurable"], "checkpoint_ns": ""}}
        for t in reversed(list(app.checkpointer.list(root))):
            cp = t.checkpoint
            row = {f: js(cp.get(f)) for f in fields}
            row["step"] = t.metadata.get("step")
            row["source"] = t.metadata.get("source")
            row["pending_writes"] = [[w[1], js(w[2])] for w in t.pending_writes or []]
            rows.append(row)
        self.note(op="saved", checkpoints=rows)


from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, AIMessageChunk  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult  # noqa: E402


class ScriptedChatModel(BaseChatModel):
    """A chat model replying with scripted AI messages in order, streaming a text reply one word at a
    time (each word with the whitespace before it), as weft's `FakeChatModel` does."""

    replies: list
    index: int = 0

    @property
    def _llm_type(self):
        return "scripted"

    def bind_tools(self, tools, **kwargs):
        return self

    def _next(self):
        reply = self.replies[self.index]
        self.index += 1
        if isinstance(reply, BaseException):
            raise reply
        return AIMessage(content=reply) if isinstance(reply, str) else reply

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        return ChatResult(generations=[ChatGeneration(message=self._next())])

    def _stream(self, messages, stop=None, run_manager=None, **kwargs):
        reply = self._next()
        if reply.tool_calls or not reply.content:
            chunk = AIMessageChunk(content=reply.content, tool_call_chunks=[
                {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
                for i, c in enumerate(reply.tool_calls)])
            yield ChatGenerationChunk(message=chunk)
            return
        words = reply.content.split(" ")
        for i, word in enumerate(words):
            token = word if i == 0 else " " + word
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=token))
            if run_manager:
                run_manager.on_llm_new_token(token, chunk=chunk)
            yield chunk


def step_mark(chunk):
    """A chunk that opens a step's results: a `values` chunk or a task's start in the tasks stream."""
    return chunk[0] == "values" or (chunk[0] == "tasks" and "input" in chunk[2])


def result_key(chunk):
    """How `unorder_parallel_results` orders a step's chunks: results by mode and canonical JSON (a task
    result's without its id), any other chunk first, in its place among the others (the sort is stable)."""
    if chunk[0] == "updates":
        return (chunk[0], canonical(chunk[2]))
    if chunk[0] == "tasks" and "input" not in chunk[2]:
        # Without the task's id: the two sides' ids differ (the comparer matches them by place).
        return (chunk[0], canonical({k: v for k, v in chunk[2].items() if k != "id"}))
    return ("", "")
