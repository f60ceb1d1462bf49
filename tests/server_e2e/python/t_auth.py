"""Authentication and authorization, against the second server pair (run with auth: `auth.py` for
`langgraph dev`, `weft-server-e2e --auth`): two users with their own API keys, each blind to the other's
threads, runs, assistants and crons."""
import asyncio
import uuid


from kit import check, eq, status_of

ALICE, BOB = "key-alice", "key-bob"


def client(env, key):
    return env.client(api_key=key)


async def test_auth_missing_or_wrong_credentials_are_401(c, env):
    async with env.http() as http:
        eq((await http.get("/ok")).status_code, 200, "/ok needs no credentials")
        eq((await http.get("/info")).status_code, 200, "/info needs no credentials")
        missing = await http.post("/threads", json={})
        eq((missing.status_code, missing.json()), (401, {"detail": "Missing authentication: an x-api-key or a bearer token"}), "no key")
        wrong = await http.post("/threads/search", json={}, headers={"x-api-key": "key-mallory"})
        eq((wrong.status_code, wrong.json()), (401, {"detail": "Invalid API key or token"}), "a wrong key")
        unknown = await http.get("/nowhere")
        eq(unknown.status_code, 401, "an unknown route needs credentials too")
        bearer = await http.post("/threads/count", json={}, headers={"authorization": f"Bearer {BOB}"})
        eq(bearer.status_code, 200, "a bearer token")
    code, _ = await status_of(client(env, "key-mallory").threads.create())
    eq(code, 401, "the SDK with a wrong key")


async def test_auth_isolation_two_users(c, env):
    alice, bob = client(env, ALICE), client(env, BOB)
    t = await alice.threads.create(metadata={"suite": "auth", "owner": "bob"})
    tid = t["thread_id"]
    eq(t["metadata"], {"suite": "auth", "owner": "alice"}, "the owner is the caller, whatever the request says")
    out = await alice.runs.wait(tid, "simple", input={"items": []})
    eq(out["items"], ["a", "b"], "alice's run")
    run = (await alice.runs.list(tid))[0]
    eq(run["metadata"]["owner"], "alice", "the run's owner")
    rid = run["run_id"]

    gone = f"Thread with ID {tid} not found"
    for what, call in [
        ("get", lambda: bob.threads.get(tid)),
        ("delete", lambda: bob.threads.delete(tid)),
    ]:
        eq(await status_of(call()), (404, gone), f"bob's threads.{what} on alice's thread")
    for what, call in [
        ("threads.update", lambda: bob.threads.update(tid, metadata={"owner": "bob"})),
        ("get_state", lambda: bob.threads.get_state(tid)),
        ("get_history", lambda: bob.threads.get_history(tid)),
        ("update_state", lambda: bob.threads.update_state(tid, {"items": ["bob"]}, as_node="b")),
        ("runs.list", lambda: bob.runs.list(tid)),
        ("runs.get", lambda: bob.runs.get(tid, rid)),
        ("runs.join", lambda: bob.runs.join(tid, rid)),
        ("runs.delete", lambda: bob.runs.delete(tid, rid)),
        ("runs.create", lambda: bob.runs.create(tid, "simple", input={"items": []})),
        ("runs.wait", lambda: bob.runs.wait(tid, "simple", input={"items": []})),
    ]:
        code, _ = await status_of(call())
        eq(code, 404, f"bob's {what} on alice's thread")
    eq(await status_of(bob.threads.copy(tid)), (409, "Conflict"), "bob copying alice's thread")
    code, _ = await status_of(bob.threads.create(thread_id=tid, if_exists="do_nothing"))
    eq(code, 409, "bob making a thread with alice's id")

    mine = await bob.threads.create(metadata={"suite": "auth"})
    found = await bob.threads.search(metadata={"suite": "auth"})
    eq([x["thread_id"] for x in found], [mine["thread_id"]], "bob's search finds only his own")
    eq(await bob.threads.count(metadata={"suite": "auth"}), 1, "bob's count")
    eq(await alice.threads.count(metadata={"suite": "auth"}), 1, "alice's count")
    thread = await alice.threads.get(tid)
    eq((thread["metadata"]["owner"], thread["values"]["items"]), ("alice", ["a", "b"]), "alice's thread is untouched")
    eq((await alice.runs.get(tid, rid))["status"], "success", "alice's run is untouched")


async def test_auth_assistants_are_their_makers(c, env):
    alice, bob = client(env, ALICE), client(env, BOB)
    made = await alice.assistants.create("simple", name="alice-only", metadata={"suite": "auth"})
    aid = made["assistant_id"]
    eq(made["metadata"], {"suite": "auth", "owner": "alice"}, "the assistant's owner")
    code, _ = await status_of(bob.assistants.get(aid))
    eq(code, 404, "bob cannot see alice's assistant")
    code, _ = await status_of(bob.assistants.update(aid, name="bob's now"))
    eq(code, 404, "nor change it")
    code, _ = await status_of(bob.assistants.delete(aid))
    eq(code, 404, "nor delete it")
    code, _ = await status_of(bob.runs.wait(None, aid, input={"items": []}))
    eq(code, 404, "nor run it")
    names = [a["name"] for a in await bob.assistants.search(limit=100)]
    check("simple" in names and "alice-only" not in names, f"bob's search: {names}")
    names = [a["name"] for a in await alice.assistants.search(limit=100)]
    check("simple" in names and "alice-only" in names, f"alice's search: {names}")
    out = await bob.runs.wait(None, "simple", input={"items": []})
    eq(out["items"], ["a", "b"], "the server's own assistant runs for everyone")


async def test_auth_crons_are_their_makers_and_run_as_them(c, env):
    alice, bob = client(env, ALICE), client(env, BOB)
    tag = str(uuid.uuid4())
    cron = await alice.crons.create("simple", schedule="* * * * * *", input={"items": []},
                                    metadata={"tag": tag, "owner": "bob"}, on_run_completed="keep")
    cid = cron["cron_id"]
    try:
        eq((cron["user_id"], cron["metadata"]), ("alice", {"tag": tag, "owner": "alice"}), "the cron's user and owner")
        eq(cron["payload"]["metadata"], {"tag": tag, "owner": "alice"}, "the payload's metadata")
        code, _ = await status_of(bob.crons.update(cid, enabled=False))
        eq(code, 404, "bob cannot change alice's cron")
        code, _ = await status_of(bob.crons.delete(cid))
        eq(code, 404, "nor delete it")
        async with env.http() as http:
            got = await http.get(f"/runs/crons/{cid}", headers={"x-api-key": BOB})
            eq(got.status_code, 404, "nor read it")
            got = await http.get(f"/runs/crons/{cid}", headers={"x-api-key": ALICE})
            eq((got.status_code, got.json()["cron_id"]), (200, cid), "alice reads it")
        eq(await bob.crons.search(metadata={"tag": tag}), [], "bob's search")
        eq(await bob.crons.count(metadata={"tag": tag}), 0, "bob's count")
        eq([x["cron_id"] for x in await alice.crons.search(metadata={"tag": tag})], [cid], "alice's search")
        eq(await alice.crons.count(metadata={"tag": tag}), 1, "alice's count")

        # The cron's runs are alice's: the thread made for them, and the user in their configuration.
        loop = asyncio.get_running_loop()
        end = loop.time() + 30
        kept = []
        while not kept:
            kept = [t for t in await alice.threads.search(metadata={"tag": tag}) if t["status"] == "idle"]
            if loop.time() > end:
                raise AssertionError("no thread of alice's cron within 30 s")
            await asyncio.sleep(0.2)
        thread = kept[0]
        eq(thread["metadata"]["owner"], "alice", "the owner of the cron's thread")
        eq(thread["values"]["items"][:2], ["a", "b"], "the run's values")
        run = (await alice.runs.list(thread["thread_id"]))[-1]
        configurable = run["kwargs"]["config"]["configurable"]
        eq((configurable["langgraph_auth_user_id"], configurable["langgraph_auth_user"]["identity"]), ("alice", "alice"),
           "the run's user")
        eq((run["metadata"]["owner"], configurable["cron_id"]), ("alice", cid), "the run's owner and cron")
        eq(await bob.threads.search(metadata={"tag": tag}), [], "bob does not see the cron's threads")

        changed = await alice.crons.update(cid, enabled=False, metadata={"owner": "bob"})
        eq((changed["enabled"], changed["metadata"]["owner"]), (False, "alice"), "alice's change keeps her the owner")

        # Bob may not put a cron on alice's thread, nor on her assistant.
        status, detail = await status_of(bob.crons.create_for_thread(thread["thread_id"], "simple", schedule="0 9 * * *"))
        eq(status, 404, "bob's cron on alice's thread")
        check(detail.startswith(f"Thread with ID '{thread['thread_id']}' not found"), detail)
        assistant = await alice.assistants.create("simple", metadata={"suite": "auth"})
        status, detail = await status_of(bob.crons.create(assistant["assistant_id"], schedule="0 9 * * *"))
        eq((status, detail), (404, f"Assistant '{assistant['assistant_id']}' not found"), "bob's cron on alice's assistant")
    finally:
        await alice.crons.delete(cid)
    eq(await alice.crons.count(metadata={"tag": tag}), 0, "deleted")


async def test_auth_thread_stream_is_the_owners(c, env):
    alice = client(env, ALICE)
    tid = (await alice.threads.create())["thread_id"]
    async with env.http() as http:
        refused = await http.get(f"/threads/{tid}/stream", headers={"x-api-key": BOB})
        # LangGraph's refusal comes in the stream.
        eq((refused.status_code, refused.text),
           (200, 'event: error\r\ndata: {"error":"HTTPException","message":"404: Thread not found"}\r\n\r\n'),
           "bob joining alice's thread")
        parts = []

        async def listen():
            async with http.stream("GET", f"/threads/{tid}/stream", headers={"x-api-key": ALICE}) as r:
                eq(r.status_code, 200, "alice joining her thread")
                async for line in r.aiter_lines():
                    if line.startswith("event: "):
                        parts.append(line[7:])

        task = asyncio.create_task(listen())
        await asyncio.sleep(0.5)
        try:
            await alice.runs.wait(tid, "simple", input={"items": []})
            loop = asyncio.get_running_loop()
            end = loop.time() + 30
            while len(parts) < 5:
                check(loop.time() < end and not task.done(), f"alice's thread stream: {parts}")
                await asyncio.sleep(0.05)
            eq(parts, ["metadata", "values", "values", "values", "metadata"], "alice's thread stream")
        finally:
            task.cancel()
