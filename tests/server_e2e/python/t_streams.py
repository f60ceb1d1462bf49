"""Streamed runs in every stream mode, on a thread and stateless, with subgraphs; wait; the stream's
HTTP framing; a thread's stream."""
import asyncio
import json

from kit import check, collect, eq, events, status_of


async def test_values_stream(c, env):
    tid = (await c.threads.create())["thread_id"]
    parts = await collect(c.runs.stream(tid, "simple", input={"items": ["start"], "count": 0}, stream_mode="values"))
    eq(parts[0][0], "metadata", "the first event")
    eq(set(parts[0][1]), {"run_id", "attempt"}, "metadata data")
    eq(parts[1:], [
        ("values", {"items": ["start"], "count": 0}),
        ("values", {"items": ["start", "a"], "count": 1}),
        ("values", {"items": ["start", "a", "b"], "count": 2}),
    ], "values")
    run = await c.runs.get(tid, parts[0][1]["run_id"])
    eq(run["status"], "success", "the run's status after its stream")


async def test_updates_and_custom_stream(c, env):
    parts = await collect(c.runs.stream(None, "simple", input={"items": []}, stream_mode=["updates", "custom"]))
    eq([p for p in parts if p[0] != "metadata"], [
        ("custom", {"progress": "in node_a"}),
        ("updates", {"node_a": {"items": ["a"], "count": 1}}),
        ("updates", {"node_b": {"items": ["b"], "count": 2}}),
    ], "updates and custom")


async def test_tasks_checkpoints_and_debug_streams(c, env):
    tid = (await c.threads.create())["thread_id"]
    parts = await collect(c.runs.stream(tid, "simple", input={"items": []}, stream_mode=["tasks", "checkpoints", "debug"]))
    tasks = events(parts, "tasks")
    eq([(t["name"], "result" in t) for t in tasks], [("node_a", False), ("node_a", True), ("node_b", False), ("node_b", True)], "tasks")
    eq(tasks[0]["triggers"], ["branch:to:node_a"], "triggers")
    eq(tasks[0]["input"], {"items": []}, "task input")
    eq((tasks[1]["result"], tasks[1]["error"], tasks[1]["interrupts"]), ({"items": ["a"], "count": 1}, None, []), "task result")
    eq(tasks[0]["id"], tasks[1]["id"], "a task's start and result share its id")
    checkpoints = events(parts, "checkpoints")
    eq([cp["metadata"]["step"] for cp in checkpoints], [-1, 0, 1, 2], "a checkpoint per step")
    eq([cp["next"] for cp in checkpoints], [["__start__"], ["node_a"], ["node_b"], []], "next of each")
    last = checkpoints[-1]
    eq(last["values"], {"items": ["a", "b"], "count": 2}, "last checkpoint's values")
    eq(last["config"]["configurable"]["thread_id"], tid, "checkpoint config")
    eq(last["parent_config"]["configurable"]["checkpoint_id"], checkpoints[-2]["config"]["configurable"]["checkpoint_id"], "parent")
    state = await c.threads.get_state(tid)
    eq(last["config"]["configurable"]["checkpoint_id"], state["checkpoint_id"], "the last checkpoint is the thread's")
    debug = events(parts, "debug")
    eq([d["type"] for d in debug].count("checkpoint"), 4, "debug checkpoints")
    eq([d["type"] for d in debug if d["type"] != "checkpoint"], ["task", "task_result", "task", "task_result"], "debug tasks")
    cp = next(d for d in debug if d["type"] == "checkpoint" and d["step"] == 2)
    eq(cp["payload"]["checkpoint"]["checkpoint_id"], state["checkpoint_id"], "debug checkpoint address")
    check(isinstance(debug[0]["timestamp"], str), "timestamp")


async def test_checkpoint_tasks_carry_state_and_results(c, env):
    tid = (await c.threads.create())["thread_id"]
    parts = await collect(c.runs.stream(tid, "nested", input={"items": []}, stream_mode=["checkpoints"]))
    checkpoints = events(parts, "checkpoints")
    before = next(cp for cp in checkpoints if cp["next"] == ["inner"])
    eq([sorted(t) for t in before["tasks"]], [["id", "interrupts", "name", "state"]], "a pending task's keys")
    state = before["tasks"][0]["state"]
    eq(state["configurable"]["thread_id"], tid, "a subgraph task's state names the thread")
    check(state["configurable"]["checkpoint_ns"].startswith("inner:"), f"the subgraph's namespace: {state}")
    hitl = (await c.threads.create())["thread_id"]
    await collect(c.runs.stream(hitl, "hitl", input={"items": []}))
    parts = await collect(c.runs.stream(hitl, "hitl", command={"resume": "yes"}, stream_mode=["checkpoints"]))
    first = events(parts, "checkpoints")[0]
    eq(first["next"], ["ask"], "a resumed run first streams the checkpoint it starts from")
    eq([(t["name"], t["state"], len(t["interrupts"])) for t in first["tasks"]], [("ask", None, 1)], "its paused task")


async def test_messages_tuple_stream(c, env):
    parts = await collect(c.runs.stream(None, "chat", input={"messages": [{"role": "human", "content": "hi"}]}, stream_mode="messages-tuple"))
    messages = events(parts, "messages")
    check(len(messages) >= 2, f"tokens: {messages}")
    eq("".join(m[0]["content"] for m in messages), "Hello there friend", "the tokens")
    chunk, metadata = messages[0]
    eq(chunk["type"], "AIMessageChunk", "a token's type")
    for key in ["additional_kwargs", "response_metadata", "tool_calls", "invalid_tool_calls", "usage_metadata", "tool_call_chunks", "chunk_position"]:
        check(key in chunk, f"{key} in {chunk}")
    eq((metadata["langgraph_node"], metadata["langgraph_step"]), ("model", 1), "token metadata")
    eq(metadata["langgraph_triggers"], ["branch:to:model"], "triggers")
    eq(messages[-1][0]["chunk_position"], "last", "the last token")
    eq(len({m[0]["id"] for m in messages}), 1, "one message id")


async def test_legacy_messages_stream(c, env):
    parts = await collect(c.runs.stream(None, "chat", input={"messages": [{"role": "human", "content": "hi"}]}, stream_mode="messages"))
    names = [p[0] for p in parts]
    eq(names[:2], ["metadata", "messages/metadata"], "the message's metadata first")
    partial = events(parts, "messages/partial")
    eq(partial[-1][0]["content"], "Hello there friend", "the message grows to the whole reply")
    eq(partial[-1][0]["type"], "ai", "accumulated as an AI message")
    meta = events(parts, "messages/metadata")[0]
    eq(list(meta), [partial[-1][0]["id"]], "metadata by message id")
    eq(meta[partial[-1][0]["id"]]["metadata"]["langgraph_node"], "model", "node")


async def test_wait_on_a_thread_and_stateless(c, env):
    tid = (await c.threads.create())["thread_id"]
    eq(await c.runs.wait(tid, "simple", input={"items": ["w"]}), {"items": ["w", "a", "b"], "count": 2}, "wait")
    eq(await c.runs.wait(None, "simple", input={"items": ["sw"]}), {"items": ["sw", "a", "b"], "count": 2}, "stateless wait")
    out = await c.runs.wait(None, "chat", input={"messages": [{"role": "user", "content": "hi"}]})
    eq([m["type"] for m in out["messages"]], ["human", "ai"], "messages")
    eq(out["messages"][1]["content"], "Hello there friend", "reply")
    for key in ["additional_kwargs", "response_metadata", "name", "tool_calls", "invalid_tool_calls", "usage_metadata"]:
        check(key in out["messages"][1], f"{key} in the AI message")
    check(isinstance(out["messages"][0]["id"], str), "the human message got an id")


async def test_subgraph_streams_carry_their_namespace(c, env):
    tid = (await c.threads.create())["thread_id"]
    parts = await collect(c.runs.stream(tid, "nested", input={"items": ["n"]}, stream_mode=["values", "updates", "custom"], stream_subgraphs=True))
    names = [p[0] for p in parts]
    sub = [n for n in names if "|" in n]
    check(any(n.startswith("updates|inner:") for n in sub), f"subgraph updates in {names}")
    check(any(n.startswith("custom|inner:") for n in sub), f"subgraph custom events in {names}")
    check(any(n.startswith("values|inner:") for n in sub), f"subgraph values in {names}")
    inner_custom = next(d for n, d in parts if n.startswith("custom|inner:"))
    eq(inner_custom, {"progress": "in inner_a"}, "custom event of the subgraph")
    # The subgraph's output is its whole state, which the parent's `items` reducer adds to its own.
    eq(events(parts, "values")[-1], {"items": ["n", "n", "inner", "after"]}, "final values")
    eq(events(parts, "updates")[0], {"inner": {"items": ["n", "inner"]}}, "the subgraph node's update in the parent")
    plain = await collect(c.runs.stream(tid, "nested", input={"items": []}, stream_mode=["updates"]))
    check(all("|" not in p[0] for p in plain), "no namespaced events without stream_subgraphs")
    state = await c.threads.get_state(tid, subgraphs=True)
    eq((state["next"], state["values"]["items"][-1]), ([], "after"), "state")


async def test_sse_framing_and_headers(c, env):
    body = {"assistant_id": "simple", "input": {"items": []}, "stream_mode": ["values"]}
    async with env.http() as http:
        async with http.stream("POST", "/runs/stream", json=body) as r:
            raw = b"".join([chunk async for chunk in r.aiter_raw()])
            eq(r.status_code, 200, "status")
            eq(r.headers["content-type"], "text/event-stream; charset=utf-8", "content type")
            eq(r.headers["cache-control"], "no-store", "cache control")
            eq(r.headers["x-accel-buffering"], "no", "buffering")
            run_id = r.headers["content-location"].split("/")[-1]
            eq(r.headers["location"], f"/runs/{run_id}/stream", "location")
    text = raw.decode()
    check(text.startswith(f'event: metadata\r\ndata: {{"run_id":"{run_id}","attempt":1}}\r\n\r\n'), text[:200])
    check(text.endswith('event: values\r\ndata: {"items":["a","b"],"count":2}\r\n\r\n'), text[-200:])
    check("event: end" not in text, "no end event")
    tid = (await c.threads.create())["thread_id"]
    async with env.http() as http:
        r = await http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "simple", "input": {"items": []}})
        eq(r.status_code, 200, "wait status")
        check(r.headers["location"].startswith(f"/threads/{tid}/runs/") and r.headers["location"].endswith("/join"), r.headers["location"])
        eq(r.json(), {"items": ["a", "b"], "count": 2}, "wait body")


async def test_events_stream(c, env):
    parts = await collect(c.runs.stream(None, "chat", input={"messages": [{"role": "human", "content": "hi"}]}, stream_mode="events"))
    run_id = parts[0][1]["run_id"]
    evs = events(parts, "events")
    eq((evs[0]["event"], evs[0]["name"], evs[0]["run_id"]), ("on_chain_start", "chat", run_id), "the graph's start first")
    eq((evs[-1]["event"], evs[-1]["name"], evs[-1]["run_id"]), ("on_chain_end", "chat", run_id), "the graph's end last")
    eq(evs[-1]["data"]["output"]["messages"][-1]["content"], "Hello there friend", "the graph's output")
    node = next(e for e in evs if e["event"] == "on_chain_start" and e["name"] == "model")
    eq(node["parent_ids"], [run_id], "a node's run is the graph's child")
    eq(node["metadata"]["langgraph_node"], "model", "node metadata")
    tokens = [e["data"]["chunk"] for e in evs if e["event"] == "on_chat_model_stream"]
    eq("".join(t["content"] for t in tokens), "Hello there friend", "the model's tokens")
    eq(tokens[0]["type"], "AIMessageChunk", "a token")
    kinds = {e["event"] for e in evs}
    check({"on_chain_start", "on_chain_end", "on_chat_model_start", "on_chat_model_end"} <= kinds, f"events: {kinds}")
    if env.differs("weft's run events have no `on_chain_stream` for graph nodes: a node's output is in its "
                   "`on_chain_end` (LangGraph also streams it once as `on_chain_stream`)"):
        check("on_chain_stream" not in kinds, f"events: {kinds}")
    else:
        check("on_chain_stream" in kinds, f"events: {kinds}")


class ThreadListener:
    """Reads a thread's stream (`GET /threads/{id}/stream`) in a task, until told to stop."""

    def __init__(self, env, tid, params=None, headers=None):
        self.env, self.tid, self.params, self.headers = env, tid, params or {}, headers or {}
        self.parts = []
        self.task = None

    async def _read(self):
        async with self.env.http() as http:
            async with http.stream("GET", f"/threads/{self.tid}/stream", params=self.params, headers=self.headers) as r:
                eq(r.status_code, 200, "the thread stream's status")
                event = None
                async for line in r.aiter_lines():
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: "):
                        self.parts.append((event, json.loads(line[6:])))

    async def __aenter__(self):
        self.task = asyncio.create_task(self._read())
        # Both servers are listening once the stream has answered; LangGraph's also looks for runs every 20 ms.
        await asyncio.sleep(0.5)
        return self

    async def __aexit__(self, *exc):
        self.task.cancel()
        try:
            await self.task
        except asyncio.CancelledError:
            pass

    async def until(self, done, timeout=30):
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while not done(self.parts):
            if self.task.done():
                self.task.result()
                raise AssertionError(f"the thread stream ended: {self.parts}")
            if loop.time() > end:
                raise AssertionError(f"the thread stream did not get there within {timeout} s: {self.parts}")
            await asyncio.sleep(0.05)
        return self.parts


def run_dones(parts):
    return [data["run_id"] for event, data in parts if event == "metadata" and data.get("status") == "run_done"]


async def test_thread_stream_joins_every_run_of_the_thread(c, env):
    tid = (await c.threads.create())["thread_id"]
    async with ThreadListener(env, tid) as everything, ThreadListener(env, tid, {"stream_modes": "lifecycle"}) as ends:
        for _ in range(2):
            run = await c.runs.create(tid, "simple", input={"items": []}, stream_mode=["values", "updates"])
            await c.runs.join(tid, run["run_id"])
        parts = await everything.until(lambda p: len(run_dones(p)) == 2)
        runs = [r["run_id"] for r in reversed(await c.runs.list(tid))]
        eq(run_dones(parts), runs, "each run's end, in order")
        one = ["metadata", "values", "updates", "values", "updates", "values", "metadata"]
        eq([event for event, _ in parts], one + one, "the events of both runs")
        eq(parts[0][1], {"run_id": runs[0], "attempt": 1}, "a run's first event")
        eq(parts[5][1]["items"], ["a", "b"], "the first run's last values")
        lifecycle = await ends.until(lambda p: len(run_dones(p)) == 2)
        eq(lifecycle, [("metadata", {"run_id": runs[0], "attempt": 1}), ("metadata", {"status": "run_done", "run_id": runs[0]}),
                       ("metadata", {"run_id": runs[1], "attempt": 1}), ("metadata", {"status": "run_done", "run_id": runs[1]})],
           "lifecycle: the runs' starts and ends")


async def test_thread_stream_through_the_sdk_and_its_refusals(c, env):
    tid = (await c.threads.create())["thread_id"]
    parts = []

    async def listen():
        async for part in await c.threads.join_stream(tid):
            parts.append((part.event, part.data))

    task = asyncio.create_task(listen())
    await asyncio.sleep(0.5)
    try:
        await c.runs.wait(tid, "simple", input={"items": []})
        loop = asyncio.get_running_loop()
        end = loop.time() + 30
        while not run_dones(parts):
            check(loop.time() < end, f"no run_done within 30 s: {parts}")
            await asyncio.sleep(0.05)
        eq([event for event, _ in parts], ["metadata", "values", "values", "values", "metadata"], "join_stream")
    finally:
        task.cancel()
    async with env.http() as http:
        bad = await http.get(f"/threads/{tid}/stream", params={"stream_modes": "values"})
        eq((bad.status_code, bad.json()), (422, {"detail": "Invalid stream mode: values"}), "a bad mode")
        bad = await http.get(f"/threads/{tid}/stream", headers={"last-event-id": "-1"})
        eq((bad.status_code, bad.json()), (422, {"detail": "Invalid last-event-id: must be a valid Redis stream ID"}),
           "a bad Last-Event-ID")
        bad = await http.get("/threads/nope/stream")
        eq((bad.status_code, bad.json()), (422, {"detail": "Invalid thread ID: must be a UUID"}), "a bad thread id")


async def test_thread_stream_replays_resumable_runs(c, env):
    tid = (await c.threads.create())["thread_id"]
    run = await c.runs.create(tid, "simple", input={"items": []}, stream_resumable=True)
    await c.runs.join(tid, run["run_id"])
    async with ThreadListener(env, tid, headers={"last-event-id": "-"}) as replay:
        await replay.until(lambda p: len(p) >= 5)
        await asyncio.sleep(0.3)
        eq([event for event, _ in replay.parts], ["metadata", "values", "values", "values", "metadata"],
           "the resumable run's events, replayed, and its end")
        eq(replay.parts[-1][1], {"status": "run_done", "run_id": run["run_id"]}, "the run's end")
