"""Crons: made, found, counted, changed and deleted; refused with a clear reason; firing on schedule."""
import asyncio
import uuid

from kit import check, default_assistant_id, eq, status_of


async def test_crons_create_search_count_update_delete(c, env):
    tag = str(uuid.uuid4())
    cron = await c.crons.create("simple", schedule="0 9 * * *", input={"items": []}, metadata={"tag": tag})
    cron_id = cron["cron_id"]
    eq(cron["assistant_id"], default_assistant_id("simple"), "assistant")
    eq((cron["thread_id"], cron["user_id"], cron["enabled"]), (None, "", True), "thread, user (anonymous), enabled")
    eq((cron["schedule"], cron["on_run_completed"], cron["metadata"]), ("0 9 * * *", "delete", {"tag": tag}), "cron")
    check(cron["next_run_date"].endswith("T09:00:00+00:00"), cron["next_run_date"])
    eq(cron["payload"]["config"]["configurable"]["cron_id"], cron_id, "the cron's id in its payload")
    eq(cron["payload"]["input"], {"items": []}, "payload input")
    thread = await c.threads.create()
    on_thread = await c.crons.create_for_thread(
        thread["thread_id"], "simple", schedule="*/5 * * * *", enabled=False, metadata={"tag": tag, "kind": "thread"})
    eq((on_thread["thread_id"], on_thread["enabled"], on_thread["on_run_completed"]), (thread["thread_id"], False, None), "thread cron")

    found = await c.crons.search(metadata={"tag": tag})
    eq([x["cron_id"] for x in found], [on_thread["cron_id"], cron_id], "newest first")
    eq([x["cron_id"] for x in await c.crons.search(thread_id=thread["thread_id"])], [on_thread["cron_id"]], "by thread")
    eq([x["cron_id"] for x in await c.crons.search(metadata={"tag": tag}, enabled=True)], [cron_id], "enabled only")
    picked = await c.crons.search(metadata={"tag": tag}, select=["cron_id", "schedule"], sort_by="created_at", sort_order="asc")
    eq(picked[0], {"cron_id": cron_id, "schedule": "0 9 * * *"}, "selected fields")
    eq(await c.crons.count(metadata={"tag": tag}), 2, "count")
    eq(await c.crons.count(metadata={"tag": tag, "kind": "thread"}), 1, "count by metadata")

    changed = await c.crons.update(cron_id, schedule="30 10 * * *", metadata={"more": 1})
    check(changed["next_run_date"].endswith("T10:30:00+00:00"), changed["next_run_date"])
    eq(changed["metadata"], {"tag": tag, "more": 1}, "merged metadata")
    eq(changed["payload"]["config"]["configurable"]["cron_id"], cron_id, "cron id kept")

    await c.crons.delete(cron_id)
    eq(await c.crons.count(metadata={"tag": tag}), 1, "after delete")
    eq((await status_of(c.crons.delete(cron_id)))[0], 404, "deleted twice")
    await c.crons.delete(on_thread["cron_id"])


async def test_crons_bad_requests(c, env):
    status, detail = await status_of(c.crons.create("simple", schedule="61 * * * *"))
    eq(status, 422, "bad schedule")
    check(detail.startswith("Invalid cron schedule: '61 * * * *'. Reason: "), detail)
    status, detail = await status_of(c.crons.create("simple", schedule="* * * * *", timezone="Mars/Base"))
    eq((status, detail), (422, "Invalid timezone: 'Mars/Base'. Use IANA timezone format (e.g. 'America/New_York')."), "bad timezone")
    missing = str(uuid.uuid4())
    eq((await status_of(c.crons.create_for_thread(missing, "simple", schedule="* * * * *")))[0], 404, "missing thread")
    eq((await status_of(c.crons.create(missing, schedule="* * * * *")))[0], 404, "missing assistant")
    eq((await status_of(c.crons.search(assistant_id="simple")))[0], 422, "search by a graph id")
    eq((await status_of(c.crons.update(missing, enabled=False)))[0], 404, "update a missing cron")


async def test_cron_fires(c, env):
    thread = await c.threads.create()
    # Every second (croniter's sixth field); LangGraph's scheduler looks every 5 s.
    cron = await c.crons.create_for_thread(thread["thread_id"], "simple", schedule="* * * * * *", input={"items": []})
    try:
        loop = asyncio.get_running_loop()
        end = loop.time() + 30
        done = []
        while not done:
            runs = await c.runs.list(thread["thread_id"])
            done = [r for r in runs if r["status"] == "success"]
            if loop.time() > end:
                raise AssertionError(f"no run of the cron within 30 s: {runs}")
            await asyncio.sleep(0.2)
        eq(done[0]["kwargs"]["config"]["configurable"]["cron_id"], cron["cron_id"], "the run names its cron")
        state = await c.threads.get_state(thread["thread_id"])
        check(state["values"]["items"][:2] == ["a", "b"], state["values"])
    finally:
        await c.crons.delete(cron["cron_id"])


async def test_stateless_cron_keeps_its_threads(c, env):
    tag = str(uuid.uuid4())
    cron = await c.crons.create("simple", schedule="* * * * * *", input={"items": []}, metadata={"tag": tag},
                                on_run_completed="keep")
    eq(cron["on_run_completed"], "keep", "on_run_completed")
    try:
        loop = asyncio.get_running_loop()
        end = loop.time() + 30
        kept = []
        while not kept:
            kept = [t for t in await c.threads.search(metadata={"tag": tag}) if t["status"] == "idle"]
            if loop.time() > end:
                raise AssertionError("no thread of the cron's runs within 30 s")
            await asyncio.sleep(0.2)
        eq(kept[0]["values"]["items"][:2], ["a", "b"], "the run's thread, kept")
        runs = await c.runs.list(kept[0]["thread_id"])
        eq(runs[0]["metadata"]["tag"], tag, "the cron's metadata on its run")
    finally:
        await c.crons.delete(cron["cron_id"])


async def test_openapi_lists_the_cron_routes(c, env):
    async with env.http() as http:
        doc = (await http.get("/openapi.json")).json()
    check(doc["openapi"].startswith("3."), doc.get("openapi"))
    for path, method in [("/runs/crons", "post"), ("/runs/crons/search", "post"), ("/runs/crons/count", "post"),
                         ("/runs/crons/{cron_id}", "delete"), ("/runs/crons/{cron_id}", "patch"),
                         ("/threads/{thread_id}/runs/crons", "post")]:
        check(method in doc["paths"].get(path, {}), f"{method} {path} in /openapi.json")
