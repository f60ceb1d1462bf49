"""The JS SDK check: `../js/check.mjs` run with node (LangGraph's JavaScript client, `@langchain/langgraph-sdk`)
against the server under test. `cargo xtask server-e2e` installs the pinned package into
`target/server-e2e/js` and names that folder in `WEFT_E2E_JS_DIR`; without it these tests are left out.
The script checks the v1 streams (`client.runs.stream`) and the v2 client (`client.threads.stream`, over SSE
and WebSocket); the `differs: REASON` lines it prints are the suite's known differences (`env.differs`).
"""
import asyncio
import os

JS_DIR = os.environ.get("WEFT_E2E_JS_DIR")


def available():
    """Whether the JS SDK is installed for these tests."""
    return bool(JS_DIR) and os.path.isdir(os.path.join(JS_DIR, "node_modules", "@langchain", "langgraph-sdk"))


async def test_js_sdk_v1_streams_and_v2_client(c, env):
    # Node 20 has a global WebSocket (which the v2 client's WebSocket transport uses) only behind this flag.
    process = await asyncio.create_subprocess_exec(
        "node", "--experimental-websocket", "check.mjs", env.url, env.name,
        cwd=JS_DIR, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    text = out.decode(errors="replace").strip()
    for line in text.splitlines():
        if line.startswith("differs: "):
            env.differs(line.removeprefix("differs: "))
    if process.returncode != 0:
        raise AssertionError(f"node check.mjs exited with {process.returncode}:\n{text}")
