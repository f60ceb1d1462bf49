"""Webhooks: a run made with `webhook` POSTs its outcome to a receiver in the test when it ends."""
import asyncio
import json

from kit import check, eq


class Receiver:
    """A bare HTTP server on a free loopback port that keeps the JSON body of every POST and answers 200."""

    def __init__(self):
        self.bodies = asyncio.Queue()
        self.server = None

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc):
        self.server.close()
        await self.server.wait_closed()

    @property
    def url(self):
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/hook"

    async def _serve(self, reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.decode("latin-1").split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            body = await reader.readexactly(length)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            await writer.drain()
            self.bodies.put_nowait((head.split(b" ")[0].decode(), json.loads(body)))
        finally:
            writer.close()

    async def next(self, timeout=30):
        return await asyncio.wait_for(self.bodies.get(), timeout)


# The payload: the run, with its final status, times and the thread's values (LangGraph's, key for key).
KEYS = sorted(["assistant_id", "created_at", "kwargs", "langsmith_session_name", "metadata", "multitask_strategy",
               "run_ended_at", "run_id", "run_started_at", "status", "thread_id", "updated_at", "values",
               "webhook_sent_at"])


async def test_webhook_of_a_run(c, env):
    async with Receiver() as hook:
        thread = await c.threads.create()
        tid = thread["thread_id"]
        out = await c.runs.wait(tid, "simple", input={"items": []}, webhook=hook.url, metadata={"hooked": 1})
        eq(out["items"], ["a", "b"], "the run")
        method, sent = await hook.next()
        eq(method, "POST", "the webhook's method")
        eq(sorted(sent), KEYS, "the payload's keys")
        run = (await c.runs.list(tid))[0]
        eq((sent["run_id"], sent["thread_id"], sent["status"]), (run["run_id"], tid, "success"), "the run's ids and status")
        eq(sent["values"]["items"], ["a", "b"], "the thread's values")
        eq(sent["metadata"]["hooked"], 1, "the run's metadata")
        eq(sent["kwargs"]["webhook"], hook.url, "the run's kwargs")
        check(sent["run_started_at"] <= sent["run_ended_at"] <= sent["webhook_sent_at"], sent)
        check("error" not in sent, sent)
        eq(hook.bodies.qsize(), 0, "one call")

        failed = await c.runs.wait(tid, "fail", input={"items": []}, webhook=hook.url, raise_error=False)
        _, sent = await hook.next()
        eq(sorted(sent), sorted(KEYS + ["error"]), "a failed run's payload keys")
        eq((sent["status"], sent["error"]), ("error", failed["__error__"]), "a failed run's status and error")

        # A stateless run that stops at an interrupt: the run succeeded (its thread is the one interrupted).
        await c.runs.wait(None, "hitl", input={"items": []}, webhook=hook.url)
        _, sent = await hook.next()
        eq((sorted(sent), sent["status"]), (KEYS, "success"), "a stateless run stopped at an interrupt")
        check(sent["thread_id"] != tid, sent["thread_id"])
