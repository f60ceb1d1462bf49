"""Bad requests get the reference server's status codes and `{"detail": ...}` texts, and save nothing."""
from kit import check, eq, status_of

MISSING_ASSISTANT = '"assistant_id" is a required property\n\nFailed validating "required" in schema["components"]["schemas"]["RunCreateStateless"]\n\nOn instance:\n    {"input":{}}'


async def post(env, path, body=None, raw=None):
    async with env.http() as http:
        if raw is not None:
            r = await http.post(path, content=raw, headers={"content-type": "application/json"})
        else:
            r = await http.post(path, json=body)
        return r.status_code, r.json()


async def test_schema_failures_are_422_with_the_validators_text(c, env):
    eq(await post(env, "/runs/wait", {"input": {}}), (422, {"detail": MISSING_ASSISTANT}), "missing assistant_id")
    eq(await post(env, "/runs/wait", raw=b"not json"), (422, {"detail": "Invalid JSON in request body"}), "malformed JSON")
    code, body = await post(env, "/runs/wait", {"assistant_id": "simple", "stream_mode": "bogus"})
    eq(code, 422, "unknown stream mode")
    check(body["detail"].startswith('"bogus" is not valid under any of the schemas listed in the \'anyOf\' keyword'), body)
    code, body = await post(env, "/runs/wait", {"assistant_id": "simple", "metadata": "x"})
    eq(code, 422, "metadata of the wrong type")
    check(body["detail"].startswith('"x" is not of type "object"\n\nFailed validating "type" in schema["components"]["schemas"]["RunCreateStateless"]["properties"]["metadata"]'), body)
    code, body = await post(env, "/threads", {"metadata": "x"})
    eq((code, body["detail"].split("\n")[0]), (422, '"x" is not of type "object"'), "thread metadata of the wrong type")
    code, body = await post(env, "/threads/search", {"status": "nope"})
    eq((code, body["detail"].split("\n")[0]), (422, '"nope" is not one of "idle", "busy" or 2 other candidates'), "bad status")
    code, body = await post(env, "/runs/wait", [1, 2])
    eq((code, body["detail"].split("\n")[0]), (422, '[1,2] is not of type "object"'), "a body that is not an object")


async def test_unknown_assistants_threads_and_runs(c, env):
    code, detail = await status_of(c.runs.wait(None, "nope", input={}))
    eq(code, 422, "unknown assistant")
    check(detail.startswith("Invalid assistant: 'nope'. Must be either:\n- A valid assistant UUID, or\n- One of the registered graphs: simple, hitl, chat, nested, slow, fail"), detail)
    code, detail = await status_of(c.runs.wait("00000000-0000-0000-0000-000000000000", "simple", input={}))
    eq((code, detail), (404, "Thread or assistant not found."), "unknown thread")
    code, detail = await status_of(c.runs.wait(None, "00000000-0000-0000-0000-000000000000", input={}))
    eq((code, detail), (404, "Thread or assistant not found."), "unknown assistant id")
    created = await c.runs.wait("00000000-0000-0000-0000-0000000000aa", "simple", input={"items": []}, if_not_exists="create")
    eq(created, {"items": ["a", "b"], "count": 2}, "if_not_exists create")
    tid = (await c.threads.create())["thread_id"]
    code, _ = await status_of(c.runs.get(tid, "00000000-0000-0000-0000-000000000000"))
    eq(code, 404, "unknown run")
    code, detail = await status_of(c.runs.get(tid, "nope"))
    eq((code, detail), (422, "Invalid run ID: must be a UUID"), "a bad run id")
    code, detail = await status_of(c.threads.get("00000000-0000-0000-0000-000000000000"))
    eq((code, detail), (404, "Thread with ID 00000000-0000-0000-0000-000000000000 not found"), "unknown thread get")


async def test_resume_rules(c, env):
    code, detail = await status_of(c.runs.wait(None, "hitl", command={"resume": 1}))
    eq((code, detail), (400, "You must provide a thread_id when resuming."), "a stateless resume")
    tid = (await c.threads.create())["thread_id"]
    out = await c.runs.wait(tid, "simple", input=None, raise_error=False)
    eq(out["__error__"]["error"], "EmptyInputError", "a run with no input on a new thread")
    check("no input for __start__" in out["__error__"]["message"], out)
    tid = (await c.threads.create())["thread_id"]
    await c.runs.wait(tid, "hitl", input={"items": []})
    done = await c.runs.wait(tid, "hitl", command={"resume": "a"})
    eq(done, {"items": ["answer:a", "b"], "count": 1}, "resumed")
    again = await c.runs.wait(tid, "hitl", command={"resume": "again"})
    eq(again, done, "a resume of a thread that is not paused runs nothing and answers its state")
    eq((await c.threads.get(tid))["status"], "idle", "the thread stays idle")


async def test_context_and_configurable_together(c, env):
    code, detail = await status_of(c.runs.wait(None, "simple", input={}, config={"configurable": {"a": 1}}, context={"b": 2}))
    eq(code, 400, "configurable and context together")
    check(detail.startswith("Cannot specify both configurable and context."), detail)


async def test_unknown_routes(c, env):
    async with env.http() as http:
        r = await http.get("/no/such/route")
        eq((r.status_code, r.json()), (404, {"detail": "Not Found"}), "unknown route")
