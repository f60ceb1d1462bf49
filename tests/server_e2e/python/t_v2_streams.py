"""The Agent Streaming Protocol (v2) through the SDK's v2 client (`client.threads.stream`, SSE transport):
the same events per channel from both servers (task ids, message ids and timestamps aside), `seq`
climbing by one, a reconnect with `since` replaying exactly what came after, interrupts answered with
`input.respond`, the tools channel (a finished and a failed tool call, the finished one's tool message
mirrored on messages), the checkpoints channel, message-finish's usage and metadata, and the commands'
typed errors."""
import asyncio
import json
import uuid

import websockets

from kit import check, eq

TERMINAL = ("completed", "failed", "interrupted")
CHANNELS = ["values", "updates", "messages", "tools", "custom", "lifecycle", "input", "tasks", "checkpoints"]


def names(namespace):
    """A namespace without its task ids (they differ from run to run)."""
    return [segment.split(":")[0] for segment in namespace]


def text_of(content):
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))


def plain(method, data):
    """An event's data without what differs between runs and servers: ids, and message content's form
    (LangGraph 1.2.22's v3 stream stores an AI message's content as content blocks)."""
    if method == "lifecycle":
        data = {k: v for k, v in data.items() if k != "trigger_call_id"}
        if "namespace" in data:
            data["namespace"] = names(data["namespace"])
        return data
    if method == "messages":
        return {k: v for k, v in data.items() if k != "id"}
    if method == "values" and isinstance(data.get("messages"), list):
        return {**data, "messages": [(m["type"], text_of(m["content"])) for m in data["messages"]]}
    return data


def by_channel(events, channels):
    out = {channel: [] for channel in channels}
    for e in events:
        if e["method"] in out:
            out[e["method"]].append((names(e["params"]["namespace"]), plain(e["method"], e["params"]["data"])))
    return out


def is_end(event):
    p = event.get("params", {})
    return event.get("method") == "lifecycle" and p["namespace"] == [] and p["data"]["event"] in TERMINAL


async def until_end(events, timeout=30):
    """The events of a stream up to the root's terminal lifecycle event."""
    seen = []

    async def read():
        async for event in events:
            seen.append(event)
            if is_end(event):
                return

    await asyncio.wait_for(read(), timeout)
    return seen


def check_seq(events):
    eq([e["seq"] for e in events], list(range(1, len(events) + 1)), "seq")
    check(all(e["type"] == "event" and e["event_id"] for e in events), "every event has an event_id")


async def run_to_end(c, graph, run_input):
    async with c.threads.stream(assistant_id=graph) as thread:
        started = await thread.run.start(input=run_input)
        check(isinstance(started["run_id"], str), "run.start answers the run id")
        events = await until_end(thread.events)
    check_seq(events)
    return thread.thread_id, events


async def test_v2_values_and_lifecycle(c, env):
    _, events = await run_to_end(c, "simple", {"items": []})
    got = by_channel(events, ["values", "lifecycle", "messages", "input"])
    eq(got["lifecycle"], [([], {"event": "running", "graph_name": "simple"}), ([], {"event": "completed", "graph_name": "simple"})], "lifecycle")
    eq(got["values"], [([], {"items": []}), ([], {"items": ["a"], "count": 1}), ([], {"items": ["a", "b"], "count": 2})], "values")
    eq((got["messages"], got["input"]), ([], []), "messages and input")
    extra = by_channel(events, ["updates", "custom"])
    if env.differs("v2 streams carry the updates and custom channels; langgraph dev 0.16.7 on LangGraph 1.2.22 sends neither"):
        eq(extra["updates"], [([], {"items": ["a"], "count": 1}), ([], {"items": ["b"], "count": 2})], "updates")
        eq(extra["custom"], [([], {"payload": {"progress": "in node_a"}})], "custom")
        eq([e["params"]["node"] for e in events if e["method"] == "updates"], ["node_a", "node_b"], "updates' nodes")
    else:
        eq(extra, {"updates": [], "custom": []}, "updates and custom")


async def test_v2_subgraph_lifecycle(c, env):
    _, events = await run_to_end(c, "nested", {"items": []})
    got = by_channel(events, ["values", "lifecycle"])
    eq(got["lifecycle"], [
        ([], {"event": "running", "graph_name": "nested"}),
        (["inner"], {"event": "started", "namespace": ["inner"], "graph_name": "inner"}),
        (["inner"], {"event": "completed", "graph_name": "inner"}),
        ([], {"event": "completed", "graph_name": "nested"}),
    ], "lifecycle")
    eq(got["values"], [
        ([], {"items": []}),
        (["inner"], {"items": []}),
        (["inner"], {"items": ["inner"]}),
        ([], {"items": ["inner"]}),
        ([], {"items": ["inner", "after"]}),
    ], "values")


async def test_v2_messages_as_content_blocks(c, env):
    _, events = await run_to_end(c, "chat", {"messages": [{"role": "user", "content": "hi"}]})
    messages = [data for _, data in by_channel(events, ["messages"])["messages"]]
    kinds = [m["event"] for m in messages]
    eq(kinds[:2], ["message-start", "content-block-start"], "a message's start")
    eq(kinds[-2:], ["content-block-finish", "message-finish"], "a message's end")
    eq(set(kinds[2:-2]), {"content-block-delta"}, "deltas between")
    eq(messages[0], {"event": "message-start", "role": "ai"}, "message-start")
    eq(messages[1], {"event": "content-block-start", "index": 0, "content": {"type": "text", "text": ""}}, "block start")
    eq("".join(m["delta"]["text"] for m in messages[2:-2]), "Hello there friend", "the deltas' text")
    eq(messages[-2], {"event": "content-block-finish", "index": 0, "content": {"type": "text", "text": "Hello there friend"}}, "block finish")
    eq(messages[-1], {"event": "message-finish"}, "a finish without usage nor metadata")
    values = by_channel(events, ["values"])["values"]
    eq(values[-1], ([], {"messages": [("human", "hi"), ("ai", "Hello there friend")]}), "the last values")


async def test_v2_respond_resumes_the_run(c, env):
    tid, first = await run_to_end(c, "hitl", {"items": []})
    asked = [e for e in first if e["method"] == "input.requested"]
    eq([e["params"]["data"]["payload"] for e in asked], [{"question": "approve?"}], "the input requested")
    eq(first[-1]["params"]["data"]["event"], "interrupted", "the first run's end")
    interrupt_id = next(e for e in first if e["method"] == "input.requested")["params"]["data"]["interrupt_id"]
    async with env.http() as http:
        r = await http.post(f"/threads/{tid}/commands", json={"id": 7, "method": "input.respond",
                                                               "params": {"interrupt_id": interrupt_id, "namespace": [], "response": "yes"}})
        eq((r.status_code, r.json()["type"], r.json()["id"]), (200, "success", 7), "input.respond")
        bad = (await http.post(f"/threads/{tid}/commands", json={"id": 8, "method": "input.respond",
                                                                 "params": {"interrupt_id": "nope", "response": 1}})).json()
        eq((bad["type"], bad["error"]), ("error", "no_such_interrupt"), "an unknown interrupt")
    async with c.threads.stream(tid, assistant_id="hitl") as thread:
        events = []

        async def read():
            async for e in thread.events:
                events.append(e)
                if is_end(e) and e["params"]["data"]["event"] == "completed":
                    return

        await asyncio.wait_for(read(), 30)
    check_seq(events)
    ends = [e["params"]["data"]["event"] for e in events if is_end(e)]
    eq(ends, ["interrupted", "completed"], "both runs' ends, seq going on across runs")
    eq(events[-2]["params"]["data"], {"items": ["answer:yes", "b"], "count": 1}, "the resumed run's last values")


async def test_v2_reconnect_replays_after_since(c, env):
    tid, events = await run_to_end(c, "simple", {"items": []})
    since = 2
    async with c.threads.stream(tid, assistant_id="simple") as thread:
        handle = thread._transport.open_event_stream({"channels": CHANNELS, "since": since})
        replayed = await until_end(handle.events)
        await handle.close()
        only_values = thread._transport.open_event_stream({"channels": ["values", "lifecycle"], "since": 0})
        filtered = await until_end(only_values.events)
        await only_values.close()
    key = lambda e: (e["seq"], e["event_id"], e["method"], e["params"]["namespace"], e["params"]["data"])  # noqa: E731
    eq([key(e) for e in replayed], [key(e) for e in events if e["seq"] > since], "the replay after since")
    eq([key(e) for e in filtered], [key(e) for e in events if e["method"] in ("values", "lifecycle")], "a filtered replay keeps seq")


async def test_v2_command_errors(c, env):
    tid = str(uuid.uuid4())
    async with env.http() as http:
        async def command(body):
            r = await http.post(f"/threads/{tid}/commands", content=body if isinstance(body, bytes) else None,
                                json=None if isinstance(body, bytes) else body)
            return r.status_code, r.json()

        eq(await command(b"nope"), (400, {"detail": "Invalid JSON body"}), "not JSON")
        eq(await command({"id": "x", "method": "run.start"}), (400, {
            "type": "error", "id": "x", "error": "invalid_argument",
            "message": "Protocol commands must include an integer id and string method."}), "a string id")
        eq(await command({"id": 1, "method": "state.get"}), (200, {
            "type": "error", "id": 1, "error": "unknown_command", "message": "Unknown protocol command: state.get"}), "state.get")
        eq(await command({"id": 2, "method": "run.start", "params": {}}), (200, {
            "type": "error", "id": 2, "error": "invalid_argument", "message": "run.start requires an assistant_id."}), "no assistant")
        status, body = await command({"id": 3, "method": "run.start", "params": {"assistant_id": "zzz"}})
        eq((status, body["error"]), (200, "unknown_error"), "an unknown assistant")
        check(body["message"].startswith("422: Invalid assistant: 'zzz'."), body["message"])
        eq(await command({"id": 4, "method": "agent.getTree"}), (200, {
            "type": "error", "id": 4, "error": "no_such_run", "message": "No active run is bound to this thread."}), "agent.getTree")
        status, body = await command({"id": 5, "method": "subscription.subscribe", "params": {"channels": ["values"]}})
        eq((status, body["type"], body["result"]["replayed_events"], body["meta"]), (200, "success", 0, {"applied_through_seq": 0}), "subscribe")
        status, body = await command({"id": 6, "method": "subscription.subscribe", "params": {"channels": ["debug"]}})
        eq(body["error"], "invalid_argument", "an unknown channel")
        eq(await command({"id": 7, "method": "input.respond", "params": {"interrupt_id": "i", "response": 1}}), (200, {
            "type": "error", "id": 7, "error": "no_such_run", "message": "No interrupted run is bound to this thread."}), "respond")
        r = await http.post(f"/threads/{tid}/stream/events", json={"channels": ["values", "debug"]})
        eq(r.status_code, 400, "an unknown channel's status")
        check(r.json()["detail"].startswith("channels contains unsupported entries: debug."), r.json()["detail"])
        r = await http.post(f"/threads/{tid}/stream/events", json={"channels": []})
        eq((r.status_code, r.json()), (400, {"detail": "channels is required and must be a non-empty array"}), "no channels")


async def test_v2_websocket_transport(c, env):
    async with c.threads.stream(assistant_id="simple", transport="websocket") as thread:
        await thread.run.start(input={"items": []})
        frames = await until_end(thread.events)
    # The socket carries the subscription's answer too.
    events = [f for f in frames if f.get("type") == "event"]
    check_seq(events)
    got = by_channel(events, ["values", "lifecycle"])
    eq(got["lifecycle"], [([], {"event": "running", "graph_name": "simple"}), ([], {"event": "completed", "graph_name": "simple"})], "lifecycle")
    eq([data for _, data in got["values"]], [{"items": []}, {"items": ["a"], "count": 1}, {"items": ["a", "b"], "count": 2}], "values")


async def read_until(ws, done, timeout=30):
    """The frames of a socket until `done(frames)` holds."""
    frames = []

    async def read():
        while not done(frames):
            frames.append(json.loads(await ws.recv()))

    await asyncio.wait_for(read(), timeout)
    return frames


def answer(frames, command_id):
    return next((f for f in frames if f.get("type") != "event" and f.get("id") == command_id), None)


async def test_v2_websocket_commands_and_reconnect(c, env):
    tid, sse_events = await run_to_end(c, "simple", {"items": []})
    url = env.url.replace("http", "ws", 1) + f"/threads/{tid}/stream/events"
    async with websockets.connect(url) as ws:
        await ws.send("not json")
        frames = await read_until(ws, lambda f: len(f) == 1)
        eq(frames[0], {"type": "error", "id": None, "error": "invalid_argument", "message": "Protocol commands must be valid JSON."}, "not JSON")
        await ws.send(json.dumps({"id": 1, "method": "subscription.subscribe", "params": {"channels": ["lifecycle"]}}))
        frames = await read_until(ws, lambda f: answer(f, 1) is not None and any(is_end(e) for e in f))
        eq(answer(frames, 1)["type"], "success", "subscribe")
        eq([e["params"]["data"]["event"] for e in frames if e.get("type") == "event"], ["running", "completed"], "lifecycle events")
        await ws.send(json.dumps({"id": 2, "method": "subscription.reconnect", "params": {"channels": CHANNELS, "since": 2}}))
        frames = await read_until(ws, lambda f: answer(f, 2) is not None)
        key = lambda e: (e["seq"], e["method"], e["params"]["data"])  # noqa: E731
        replayed = [e for e in frames if e.get("type") == "event"]
        eq([key(e) for e in replayed], [key(e) for e in sse_events if e["seq"] > 2], "the replay after since")
        eq(answer(frames, 2)["result"]["replayed_events"], len(replayed), "replayed_events")
        await ws.send(json.dumps({"id": 3, "method": "agent.getTree"}))
        frames = await read_until(ws, lambda f: answer(f, 3) is not None)
        eq(answer(frames, 3)["result"]["tree"], {"namespace": [], "status": "completed", "graph_name": "simple"}, "the tree")
        await ws.send(json.dumps({"id": 4, "method": "state.get"}))
        frames = await read_until(ws, lambda f: answer(f, 4) is not None)
        eq(answer(frames, 4)["error"], "unknown_command", "state.get")
        await ws.send(json.dumps({"id": 5, "method": "subscription.reconnect", "params": {"channels": ["values"]}}))
        frames = await read_until(ws, lambda f: answer(f, 5) is not None)
        eq(answer(frames, 5)["message"], "subscription.reconnect requires a non-negative integer since.", "no since")


async def test_v2_failed_run(c, env):
    _, events = await run_to_end(c, "fail", {"items": []})
    got = by_channel(events, ["values", "lifecycle"])
    eq([data for _, data in got["values"]], [{"items": []}, {"items": ["a"], "count": 1}], "values")
    end = events[-1]["params"]["data"]
    eq((end["event"], end["graph_name"]), ("failed", "fail"), "the run's end")
    eq(end["error"], "boom", "the error: the node's own")


async def test_v2_tools_channel(c, env):
    _, events = await run_to_end(c, "tool_calls", {"messages": [{"role": "user", "content": "go"}]})
    tools = [e for e in events if e["method"] == "tools"]
    eq({(tuple(e["params"]["namespace"]), e["params"].get("node")) for e in tools}, {((), None)}, "tools of the root graph")
    calls = {}
    for e in tools:
        calls.setdefault(e["params"]["data"]["tool_call_id"], []).append(e["params"]["data"])
    eq(calls["call_add"], [
        {"event": "tool-started", "tool_call_id": "call_add", "tool_name": "add", "input": {"a": 2, "b": 3}},
        {"event": "tool-finished", "tool_call_id": "call_add", "output": {
            "content": "5", "additional_kwargs": {}, "response_metadata": {}, "type": "tool", "name": "add", "id": None,
            "tool_call_id": "call_add", "artifact": None, "status": "success"}},
    ], "a finished call")
    eq(calls["call_boom"], [
        {"event": "tool-started", "tool_call_id": "call_boom", "tool_name": "boom", "input": {"reason": "no"}},
        {"event": "tool-error", "tool_call_id": "call_boom", "message": "boom: no"},
    ], "a failed call")
    # A finished call's output follows it on the messages channel as a tool message of its own namespace.
    at = next(i for i, e in enumerate(events) if e["method"] == "tools" and e["params"]["data"]["event"] == "tool-finished")
    mirror = events[at + 1:at + 6]
    eq([(e["method"], e["params"]["namespace"]) for e in mirror], [("messages", ["tools:call_add"])] * 5, "the mirror")
    eq([e["params"]["data"] for e in mirror], [
        {"event": "message-start", "role": "tool", "id": "tool-call_add", "tool_call_id": "call_add"},
        {"event": "content-block-start", "index": 0, "content": {"type": "text", "text": ""}},
        {"event": "content-block-delta", "index": 0, "content": {"type": "text", "text": "5"}},
        {"event": "content-block-finish", "index": 0, "content": {"type": "text", "text": "5"}},
        {"event": "message-finish", "metadata": {}},
    ], "the tool message's events")
    eq([e["method"] for e in events if e["method"] == "messages"], ["messages"] * 5, "no other messages")
    last = by_channel(events, ["values"])["values"][-1][1]["messages"]
    eq([(kind, text if kind != "tool" or "Error" not in text else "error") for kind, text in last],
       [("human", "go"), ("ai", ""), ("tool", "5"), ("tool", "error")], "the last values")


async def test_v2_checkpoints_channel(c, env):
    _, events = await run_to_end(c, "simple", {"items": []})
    checkpoints = [e for e in events if e["method"] == "checkpoints"]
    if env.differs("v2 streams carry the checkpoints channel (each checkpoint once, as the protocol's Checkpoint); "
                   "langgraph dev 0.16.7 on LangGraph 1.2.22 sends none: the checkpoints LangGraph streams have no `id`, "
                   "which its session requires"):
        data = [e["params"]["data"] for e in checkpoints]
        eq([(d["step"], d["source"]) for d in data], [(-1, "input"), (0, "loop"), (1, "loop"), (2, "loop")], "steps")
        check("parent_id" not in data[0], "the thread's first checkpoint has no parent")
        eq([d["parent_id"] for d in data[1:]], [d["id"] for d in data[:-1]], "each checkpoint's parent")
        eq([e["params"]["namespace"] for e in checkpoints], [[]] * 4, "namespaces")
        run_id = events[0]["event_id"].split(":")[1]
        eq([e["event_id"] for e in checkpoints], [f"synth:{run_id}:checkpoint||{d['id']}" for d in data], "event ids")
    else:
        eq(checkpoints, [], "no checkpoints")


async def test_v2_message_finish_usage(c, env):
    _, events = await run_to_end(c, "usage", {"messages": [{"role": "user", "content": "hi"}]})
    messages = [data for _, data in by_channel(events, ["messages"])["messages"]]
    eq(messages[0], {"event": "message-start", "role": "ai"}, "message-start")
    eq("".join(m["delta"]["text"] for m in messages if m["event"] == "content-block-delta"), "Hi there", "the text")
    eq(messages[-1], {"event": "message-finish", "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
                      "metadata": {"finish_reason": "stop", "model_name": "fake-1"}}, "message-finish")
