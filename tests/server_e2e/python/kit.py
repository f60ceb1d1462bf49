"""What the suite's tests share: the server under test, assertions, and helpers for the SDK's calls.

Every test is `async def test_*(c, env)`, where `c` is a `langgraph_sdk` client and `env` says which
server runs (`env.weft` or `env.langgraph`). A test that expects a different answer from weft says so
with `env.differs("why")` next to the branch, so the reasons are printed with the results.
"""
import asyncio
import itertools
import uuid

import httpx
from langgraph_sdk import get_client
from langgraph_sdk.errors import APIError

NAMESPACE_GRAPH = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")


def default_assistant_id(graph_id):
    """LangGraph's id of the assistant made for a graph at start-up."""
    return str(uuid.uuid5(NAMESPACE_GRAPH, graph_id))


class Spread(httpx.AsyncBaseTransport):
    """Sends each request to the next of several instances of one server, in turn (a round-robin load
    balancer in the client)."""

    def __init__(self, urls):
        self.targets = [httpx.URL(u) for u in urls]
        self.inner = httpx.AsyncHTTPTransport(retries=5)
        self.turn = itertools.count()

    async def handle_async_request(self, request):
        target = self.targets[next(self.turn) % len(self.targets)]
        request.url = request.url.copy_with(scheme=target.scheme, host=target.host, port=target.port)
        return await self.inner.handle_async_request(request)

    async def aclose(self):
        await self.inner.aclose()


class Env:
    def __init__(self, name, url, urls=None):
        self.name = name
        self.url = url
        # Several instances of one server: every client spreads its requests over them.
        self.urls = urls or [url]
        self.notes = []

    def client(self, **kwargs):
        """A `langgraph_sdk` client of the server (of all its instances, in turn)."""
        client = get_client(url=self.url, timeout=60, **kwargs)
        if len(self.urls) > 1:
            client.http.client._transport = Spread(self.urls)
        return client

    @property
    def weft(self):
        return self.name == "weft"

    @property
    def langgraph(self):
        return self.name == "langgraph"

    def differs(self, reason):
        """Records why weft's answer differs here; returns whether this is the weft server."""
        if reason not in self.notes:
            self.notes.append(reason)
        return self.weft

    def http(self):
        """A raw HTTP client on the server (for what the SDK does not expose: headers, bad bodies)."""
        transport = Spread(self.urls) if len(self.urls) > 1 else None
        return httpx.AsyncClient(base_url=self.url, timeout=60, transport=transport)


def check(condition, message="check failed"):
    if not condition:
        raise AssertionError(message)


def eq(actual, expected, what="value"):
    if actual != expected:
        raise AssertionError(f"{what}: expected {expected!r}, got {actual!r}")


async def status_of(awaitable):
    """The HTTP status and `detail` of a call that must fail."""
    try:
        await awaitable
    except APIError as e:
        body = e.body if isinstance(e.body, dict) else {}
        return e.response.status_code, body.get("detail")
    except httpx.HTTPStatusError as e:
        detail = None
        try:
            detail = e.response.json().get("detail")
        except Exception:  # noqa: BLE001 - a body that is not JSON has no detail
            pass
        return e.response.status_code, detail
    raise AssertionError("the call succeeded; an HTTP error was expected")


async def collect(stream):
    """Every (event, data) of an SDK stream."""
    return [(part.event, part.data) async for part in stream]


def events(parts, name):
    return [data for event, data in parts if event == name]


async def wait_status(c, thread_id, run_id, statuses, timeout=30):
    """Polls a run until its status is one of `statuses`."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        run = await c.runs.get(thread_id, run_id)
        if run["status"] in statuses:
            return run
        if loop.time() > end:
            raise AssertionError(f"run {run_id} stayed {run['status']}, expected one of {statuses}")
        await asyncio.sleep(0.05)


async def thread_with_status(c, thread_id, status, timeout=30):
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        thread = await c.threads.get(thread_id)
        if thread["status"] == status:
            return thread
        if loop.time() > end:
            raise AssertionError(f"thread {thread_id} stayed {thread['status']}, expected {status}")
        await asyncio.sleep(0.05)
