"""Runs the end-to-end suite with the official `langgraph-sdk` against weft-server and against LangGraph's
own server (`langgraph dev`), side by side, and prints one line per test and server.

    python run.py --weft-bin PATH [--langgraph-bin PATH] [--only NAME,...] [--servers weft,langgraph]

Each server is started on a free port and stopped at the end. The exit status is 0 when every test passes
against every server it ran on.
"""
import sys

sys.dont_write_bytecode = True

import argparse  # noqa: E402
import asyncio  # noqa: E402
import importlib
import inspect  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import urllib.request  # noqa: E402

from langgraph_sdk import get_client  # noqa: E402

from kit import Env  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MODULES = ["t_assistants", "t_threads", "t_streams", "t_runs", "t_multitask", "t_store", "t_errors", "t_js"]
TEST_TIMEOUT = 90


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url, process, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if process.poll() is not None:
            raise RuntimeError(f"the server at {url} exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/ok", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the server at {url} did not answer /ok within {timeout} s")


def start_weft(binary, log):
    port = free_port()
    process = subprocess.Popen([binary, "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    return f"http://127.0.0.1:{port}", process, 30


def start_langgraph(binary, log):
    port = free_port()
    project = tempfile.mkdtemp(prefix="weft-e2e-langgraph-")
    for name in ["graphs.py", "langgraph.json"]:
        shutil.copy(os.path.join(HERE, name), project)
    env = dict(os.environ, LANGGRAPH_CLI_NO_ANALYTICS="1", LANGSMITH_TRACING="false", PYTHONDONTWRITEBYTECODE="1")
    for key in ["LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGGRAPH_CLOUD_LICENSE_KEY", "LANGSMITH_CONTROL_PLANE_API_KEY"]:
        env.pop(key, None)
    command = [binary, "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port), "--server-log-level", "WARNING"]
    process = subprocess.Popen(command, cwd=project, env=env, stdout=log, stderr=subprocess.STDOUT)
    return f"http://127.0.0.1:{port}", process, 180


def tests(only):
    found = []
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        if module_name == "t_js" and not module.available():
            if not only or any(name.startswith("test_js") for name in only):
                print("the JS SDK check is left out: WEFT_E2E_JS_DIR names no installed @langchain/langgraph-sdk")
            continue
        for name, fn in inspect.getmembers(module, inspect.iscoroutinefunction):
            if name.startswith("test_") and (not only or name in only):
                found.append((module_name, name, fn))
    found.sort(key=lambda t: (MODULES.index(t[0]), inspect.getsourcelines(t[2])[1]))
    return found


async def run_suite(env, cases):
    results = {}
    client = get_client(url=env.url, timeout=60)
    for module_name, name, fn in cases:
        started = time.time()
        try:
            await asyncio.wait_for(fn(client, env), TEST_TIMEOUT)
            results[name] = (True, "", time.time() - started)
        except Exception as e:  # noqa: BLE001 - every failure is reported, not raised
            detail = "".join(traceback.format_exception_only(type(e), e)).strip()
            where = traceback.extract_tb(e.__traceback__)
            line = next((f"{f.filename.split('/')[-1]}:{f.lineno}" for f in reversed(where) if f.filename.startswith(HERE)), "")
            results[name] = (False, f"{line} {detail}", time.time() - started)
    return results


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--weft-bin", required=True)
    parser.add_argument("--langgraph-bin", default=os.path.join(os.path.dirname(sys.executable), "langgraph"))
    parser.add_argument("--only", default="")
    parser.add_argument("--servers", default="weft,langgraph")
    args = parser.parse_args()
    only = {n for n in args.only.split(",") if n}
    names = [s for s in args.servers.split(",") if s]
    cases = tests(only)
    if not cases:
        print("no tests selected")
        return 1
    logs, processes, envs = {}, [], []
    try:
        for name in names:
            logs[name] = tempfile.NamedTemporaryFile(prefix=f"weft-e2e-{name}-", suffix=".log", delete=False)
            start = start_weft if name == "weft" else start_langgraph
            url, process, timeout = start(args.weft_bin if name == "weft" else args.langgraph_bin, logs[name])
            processes.append((name, process, url, timeout))
            envs.append(Env(name, url))
        for name, process, url, timeout in processes:
            wait_ready(url, process, timeout)
        started = time.time()
        outcomes = await asyncio.gather(*(run_suite(env, cases) for env in envs))
    finally:
        for _, process, _, _ in processes:
            process.terminate()
        for _, process, _, _ in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
    failed = 0
    for _, name, _ in cases:
        cells = []
        for env, results in zip(envs, outcomes):
            ok, detail, took = results[name]
            cells.append(f"{env.name} {'ok' if ok else 'FAILED'} {took:5.2f}s")
            if not ok:
                failed += 1
        print(f"{'PASS' if all(r[name][0] for r in outcomes) else 'FAIL'}  {name:<60} {' | '.join(cells)}")
        for env, results in zip(envs, outcomes):
            ok, detail, _ = results[name]
            if not ok:
                print(f"        {env.name}: {detail}")
    notes = []
    for env in envs:
        notes.extend(n for n in env.notes if n not in notes)
    for note in notes:
        print(f"where weft differs: {note}")
    for name, log in logs.items():
        if failed:
            print(f"{name} server log: {log.name}")
    total = len(cases) * len(envs)
    print(f"server-e2e: {total - failed} passed, {failed} failed ({len(cases)} tests x {len(envs)} servers) in {time.time() - started:.1f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
