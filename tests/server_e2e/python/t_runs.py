"""Runs: in the background then joined, joined as a stream (resumable), listed, got, deleted, cancelled;
human in the loop; breakpoints per run; a failing graph."""
import asyncio

from langgraph_sdk.errors import NotFoundError

from kit import check, collect, eq, events, status_of, thread_with_status, wait_status


async def test_background_run_join_get_list_delete(c, env):
    tid = (await c.threads.create(metadata={"suite": "bg"}))["thread_id"]
    run = await c.runs.create(tid, "simple", input={"items": ["bg"]}, metadata={"m": 1})
    eq(run["status"], "pending", "a new run")
    eq((run["thread_id"], run["metadata"]["m"], run["metadata"]["suite"]), (tid, 1, "bg"), "run fields")
    eq(run["kwargs"]["stream_mode"], ["values"], "stream mode")
    eq(run["multitask_strategy"], "enqueue", "default strategy")
    eq(await c.runs.join(tid, run["run_id"]), {"items": ["bg", "a", "b"], "count": 2}, "join")
    got = await c.runs.get(tid, run["run_id"])
    eq(got["status"], "success", "joined run")
    second = await c.runs.create(tid, "simple", input={"items": ["bg2"]})
    await c.runs.join(tid, second["run_id"])
    listed = await c.runs.list(tid, limit=5)
    eq([r["run_id"] for r in listed], [second["run_id"], run["run_id"]], "newest first")
    eq(len(await c.runs.list(tid, limit=1)), 1, "limit")
    await c.runs.delete(tid, run["run_id"])
    code, _ = await status_of(c.runs.get(tid, run["run_id"]))
    eq(code, 404, "a deleted run")


async def test_join_stream_replays_a_resumable_run(c, env):
    tid = (await c.threads.create())["thread_id"]
    run = await c.runs.create(tid, "simple", input={"items": ["r"]}, stream_mode=["values", "updates"], stream_resumable=True)
    await c.runs.join(tid, run["run_id"])
    parts = [(p.event, p.data, p.id) async for p in c.runs.join_stream(tid, run["run_id"], last_event_id="-1")]
    eq([p[0] for p in parts], ["metadata", "values", "updates", "values", "updates", "values"], "every event replayed")
    check(all(p[2] for p in parts), "replayed events carry their ids")
    after = [p.event async for p in c.runs.join_stream(tid, run["run_id"], last_event_id=parts[2][2])]
    if env.differs("event ids are unique: LangGraph's in-memory server numbers every event of one millisecond "
                   "`<ms>-0`, so replaying after an id also skips the events of that millisecond"):
        eq(after, ["values", "updates", "values"], "events after an id")
    else:
        eq(after, [p[0] for p in parts[3:]][len(parts[3:]) - len(after):], "events after an id: a suffix")
    only = [p.event async for p in c.runs.join_stream(tid, run["run_id"], last_event_id="-1", stream_mode="updates")]
    eq(only, ["updates", "updates"], "replay filtered by mode (the metadata event is not an `updates` event)")


async def test_join_stream_of_a_run_in_progress(c, env):
    tid = (await c.threads.create())["thread_id"]
    run = await c.runs.create(tid, "slow", input={"delay": 1.0}, stream_mode=["values"])
    await wait_status(c, tid, run["run_id"], ["running"])
    parts = await collect(c.runs.join_stream(tid, run["run_id"]))
    eq(events(parts, "values")[-1], {"items": ["slept", "b"], "delay": 1.0}, "the live run's last values")
    eq((await c.runs.get(tid, run["run_id"]))["status"], "success", "status")


async def test_human_in_the_loop(c, env):
    tid = (await c.threads.create())["thread_id"]
    parts = await collect(c.runs.stream(tid, "hitl", input={"items": []}, stream_mode=["values", "updates"]))
    eq([p[0] for p in parts], ["metadata", "values", "updates", "values"], "events up to the pause")
    interrupt = events(parts, "updates")[0]["__interrupt__"][0]
    eq(interrupt["value"], {"question": "approve?"}, "the question")
    eq(len(interrupt["id"]), 32, "an interrupt id")
    eq(interrupt.get("response_schema"), None, "response schema")
    eq(events(parts, "values")[-1], {"items": [], "__interrupt__": [interrupt]}, "values at the pause")
    thread = await c.threads.get(tid)
    eq(thread["status"], "interrupted", "thread status")
    (task_id, pending), = thread["interrupts"].items()
    eq(pending, [{"id": interrupt["id"], "value": {"question": "approve?"}}], "thread interrupts")
    state = await c.threads.get_state(tid)
    eq((state["next"], state["tasks"][0]["id"], state["tasks"][0]["name"]), (["ask"], task_id, "ask"), "state at the pause")
    eq(state["interrupts"], pending, "state interrupts")
    eq(state["tasks"][0]["interrupts"], pending, "task interrupts")
    resumed = await collect(c.runs.stream(tid, "hitl", command={"resume": "yes"}, stream_mode="values"))
    eq(events(resumed, "values"), [{"items": []}, {"items": ["answer:yes"]}, {"items": ["answer:yes", "b"], "count": 1}], "resumed")
    thread = await c.threads.get(tid)
    eq((thread["status"], thread["interrupts"]), ("idle", {}), "thread after the resume")


async def test_wait_returns_the_pause_and_resume_by_id(c, env):
    tid = (await c.threads.create())["thread_id"]
    out = await c.runs.wait(tid, "hitl", input={"items": ["w"]})
    eq(out["items"], ["w"], "values at the pause")
    (interrupt,) = out["__interrupt__"]
    eq(interrupt["value"], {"question": "approve?"}, "the question")
    done = await c.runs.wait(tid, "hitl", command={"resume": {interrupt["id"]: "by id"}})
    eq(done, {"items": ["w", "answer:by id", "b"], "count": 1}, "resumed by id")


async def test_breakpoints_per_run(c, env):
    tid = (await c.threads.create())["thread_id"]
    out = await c.runs.wait(tid, "simple", input={"items": ["x"]}, interrupt_before=["node_b"])
    eq(out, {"items": ["x", "a"], "count": 1}, "stopped before node_b")
    thread = await c.threads.get(tid)
    eq(thread["status"], "interrupted", "thread status at a breakpoint")
    eq((await c.threads.get_state(tid))["next"], ["node_b"], "next")
    done = await c.runs.wait(tid, "simple", input=None)
    eq(done, {"items": ["x", "a", "b"], "count": 2}, "continued")
    after = await c.runs.wait(tid, "simple", input={"items": ["y"]}, interrupt_after=["node_a"])
    eq(after["items"], ["x", "a", "b", "y", "a"], "stopped after node_a")
    eq((await c.threads.get_state(tid))["next"], ["node_b"], "next after node_a")


async def test_a_failing_run(c, env):
    tid = (await c.threads.create())["thread_id"]
    parts = await collect(c.runs.stream(tid, "fail", input={"items": []}, stream_mode="values"))
    eq([p[0] for p in parts], ["metadata", "values", "values", "error"], "events")
    error = parts[-1][1]
    eq(set(error), {"error", "message"}, "error data")
    eq(error["error"], "ValueError", "error kind")
    check("boom" in error["message"], error["message"])
    run_id = parts[0][1]["run_id"]
    eq((await c.runs.get(tid, run_id))["status"], "error", "run status")
    thread = await c.threads.get(tid)
    eq(thread["status"], "error", "thread status")
    eq(thread["error"]["error"], "ValueError", "thread error")
    eq(thread["values"], {"items": ["a"], "count": 1}, "values saved before the failure")
    async with env.http() as http:
        r = await http.post(f"/threads/{tid}/runs/wait", json={"assistant_id": "fail", "input": {"items": []}})
        eq(r.status_code, 200, "a failing /wait is still a 200")
        eq(r.json()["__error__"]["error"], "ValueError", "its body")
    parts = await collect(c.runs.stream(None, "simple", input={"items": [], "count": "notint"}, stream_mode="values"))
    eq([p[0] for p in parts], ["metadata", "values", "error"], "a node failing on its input")
    eq(parts[1][1], {"items": [], "count": "notint"}, "the input state")


async def test_a_bare_list_graph_takes_and_shows_bare_lists(c, env):
    tid = (await c.threads.create())["thread_id"]
    eq(await c.runs.wait(tid, "root", input=["x"]), ["x", "n"], "the run's result")
    parts = await collect(c.runs.stream(tid, "root", input=["y"], stream_mode="values"))
    eq([p[1] for p in parts if p[0] == "values"], [["x", "n", "y"], ["x", "n", "y", "n"]], "values events")
    eq((await c.threads.get_state(tid))["values"], ["x", "n", "y", "n"], "the thread's state")
    eq((await c.threads.get(tid))["values"], ["x", "n", "y", "n"], "the thread's values")


async def test_cancel_a_running_run(c, env):
    tid = (await c.threads.create())["thread_id"]
    run = await c.runs.create(tid, "slow", input={"delay": 5})
    await wait_status(c, tid, run["run_id"], ["running"])
    eq((await c.threads.get(tid))["status"], "busy", "a thread with a running run")
    # Cancel once the run is inside `wait` (its step's checkpoint saved), not while it is starting.
    for _ in range(600):
        if (await c.threads.get_state(tid))["next"] == ["wait"]:
            break
        await asyncio.sleep(0.05)
    await c.runs.cancel(tid, run["run_id"])
    done = await wait_status(c, tid, run["run_id"], ["interrupted"])
    eq(done["status"], "interrupted", "cancelled run")
    # The run stopped with `wait` still to run: the thread is paused there, as after a breakpoint.
    await thread_with_status(c, tid, "interrupted")
    code, _ = await status_of(c.runs.cancel(tid, run["run_id"]))
    eq(code, 404, "cancelling a finished run")


async def test_stateless_background_runs_and_batch(c, env):
    run = await c.runs.create(None, "simple", input={"items": ["bg"]}, on_completion="keep")
    eq(run["status"], "pending", "a stateless background run")
    out = await c.runs.join(run["thread_id"], run["run_id"])
    eq(out, {"items": ["bg", "a", "b"], "count": 2}, "joined on its own thread (kept)")
    runs = await c.runs.create_batch([
        {"assistant_id": "simple", "input": {"items": ["one"]}, "on_completion": "keep"},
        {"assistant_id": "simple", "input": {"items": ["two"]}, "on_completion": "keep"},
    ])
    eq(len(runs), 2, "a batch of runs")
    outs = [await c.runs.join(r["thread_id"], r["run_id"]) for r in runs]
    eq([o["items"][0] for o in outs], ["one", "two"], "each on its own thread")
    check(runs[0]["thread_id"] != runs[1]["thread_id"], "two threads")


async def collect_unless_gone(stream):
    """A listener that may connect only after the run it joins was rolled back (and so deleted): that is a 404,
    not a failure of the rollback."""
    try:
        return await collect(stream)
    except NotFoundError:
        return []


async def test_cancel_with_rollback(c, env):
    tid = (await c.threads.create())["thread_id"]
    await c.runs.wait(tid, "slow", input={"items": ["kept"], "delay": 0})
    run = await c.runs.create(tid, "slow", input={"items": ["gone"], "delay": 5})
    # A listener on the run's stream (LangGraph's server deletes a run nobody listens to at once, leaving its
    # worker going and the thread busy).
    listener = asyncio.create_task(collect_unless_gone(c.runs.join_stream(tid, run["run_id"])))
    for _ in range(200):
        if (await c.threads.get_state(tid))["next"] == ["wait"]:
            break
        await asyncio.sleep(0.05)
    await c.runs.cancel(tid, run["run_id"], action="rollback")
    await asyncio.wait_for(listener, 30)
    await thread_with_status(c, tid, "idle")
    code, _ = await status_of(c.runs.get(tid, run["run_id"]))
    eq(code, 404, "a rolled-back run is deleted")
    state = await c.threads.get_state(tid)
    eq(state["values"], {"items": ["kept", "slept", "b"], "delay": 0}, "the state before the run")
    eq(state["next"], [], "nothing left to run")
