"""A second run on a busy thread: reject, enqueue, interrupt, rollback."""
import asyncio

from kit import eq, status_of, thread_with_status, wait_status


async def inside_wait(c, tid):
    """Waits until the thread's run has saved its input and is inside the slow node."""
    for _ in range(600):
        if (await c.threads.get_state(tid))["next"] == ["wait"]:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the run never reached the slow node")


async def busy_thread(c):
    tid = (await c.threads.create())["thread_id"]
    first = await c.runs.create(tid, "slow", input={"items": ["first"], "delay": 1.5})
    await wait_status(c, tid, first["run_id"], ["running"])
    await inside_wait(c, tid)
    return tid, first


async def test_reject(c, env):
    tid, first = await busy_thread(c)
    code, detail = await status_of(c.runs.create(tid, "slow", input={"delay": 0}, multitask_strategy="reject"))
    eq(code, 409, "a second run is rejected")
    eq(detail, "Thread is already running a task. Wait for it to finish or choose a different multitask strategy.", "detail")
    await c.runs.join(tid, first["run_id"])
    eq(len(await c.runs.list(tid)), 1, "nothing was saved for the rejected run")


async def test_enqueue(c, env):
    tid, first = await busy_thread(c)
    second = await c.runs.create(tid, "slow", input={"items": ["second"], "delay": 0}, multitask_strategy="enqueue")
    eq((await c.runs.get(tid, second["run_id"]))["status"], "pending", "the second run waits")
    out = await c.runs.join(tid, second["run_id"])
    eq(out["items"], ["first", "slept", "b", "second", "slept", "b"], "both ran, in order")
    eq((await c.runs.get(tid, first["run_id"]))["status"], "success", "the first run")
    await thread_with_status(c, tid, "idle")


async def test_interrupt(c, env):
    tid, first = await busy_thread(c)
    second = await c.runs.create(tid, "slow", input={"items": ["second"], "delay": 0}, multitask_strategy="interrupt")
    out = await c.runs.join(tid, second["run_id"])
    eq((await wait_status(c, tid, first["run_id"], ["interrupted"]))["status"], "interrupted", "the first run")
    eq(out["items"], ["first", "second", "slept", "b"], "the first run's input stays, its unfinished node does not")
    eq((await c.runs.get(tid, second["run_id"]))["status"], "success", "the second run")


async def test_rollback(c, env):
    tid = (await c.threads.create())["thread_id"]
    await c.runs.wait(tid, "slow", input={"items": ["before"], "delay": 0})
    first = await c.runs.create(tid, "slow", input={"items": ["first"], "delay": 1.5})
    await wait_status(c, tid, first["run_id"], ["running"])
    await inside_wait(c, tid)
    second = await c.runs.create(tid, "slow", input={"items": ["second"], "delay": 0}, multitask_strategy="rollback")
    out = await c.runs.join(tid, second["run_id"])
    eq(out["items"], ["before", "slept", "b", "second", "slept", "b"], "the first run left nothing in the state")
    code, _ = await status_of(c.runs.get(tid, first["run_id"]))
    eq(code, 404, "a rolled-back run is deleted")
