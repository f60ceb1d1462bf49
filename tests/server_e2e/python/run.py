"""Runs the end-to-end suite with the official `langgraph-sdk` against weft-server and against LangGraph's
own server (`langgraph dev`), side by side, and prints one line per test and server.

    python run.py --weft-bin PATH [--langgraph-bin PATH] [--only NAME,...] [--servers weft,langgraph]
                  [--weft-instances N]

`--only` names tests or modules (`t_js`). Each server is started on a free port and stopped at the end. The
tests of `AUTH_MODULES` run against a second pair started with authentication (`auth.py` for `langgraph dev`, `--auth` for weft), beside the
first. With `--weft-instances N` (N > 1), weft runs as N instances of one scaled-out server (on the
PostgreSQL and Redis that `DATABASE_URI` and `REDIS_URI` name, `DATABASE_URI_AUTH` for the pair with
authentication, each pair under a Redis key prefix of its own) and every client spreads its requests over them in turn. A test `langgraph dev` fails is run against it once
more (weft's are not). The exit status is 0 when every test passes against every server it ran on.
"""
import sys

sys.dont_write_bytecode = True

import argparse  # noqa: E402
import asyncio  # noqa: E402
import importlib
import inspect  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import urllib.request  # noqa: E402

from kit import Env  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MODULES = ["t_assistants", "t_threads", "t_streams", "t_runs", "t_multitask", "t_store", "t_errors", "t_bad_input", "t_crons", "t_webhooks",
           "t_js", "t_auth", "t_mcp_a2a", "t_v2_streams"]
AUTH_MODULES = {"t_auth"}
TEST_TIMEOUT = 90


# Ports handed out so far: the servers start side by side, so a port picked and let go before the
# previous server bound its own could be picked again.
HANDED_OUT = set()


def free_port():
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in HANDED_OUT:
            HANDED_OUT.add(port)
            return port


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


WEFT_ARGS = []  # `--in-memory` with `--weft-in-memory`


def start_weft(binary, log, auth, env=None):
    port = free_port()
    command = [binary, "--port", str(port)] + (["--auth"] if auth else []) + WEFT_ARGS
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    return f"http://127.0.0.1:{port}", process, 30


def start_langgraph(binary, log, auth):
    port = free_port()
    project = tempfile.mkdtemp(prefix="weft-e2e-langgraph-")
    for name in ["graphs.py", "langgraph.json"] + (["auth.py"] if auth else []):
        shutil.copy(os.path.join(HERE, name), project)
    if auth:
        config_path = os.path.join(project, "langgraph.json")
        with open(config_path) as f:
            config = json.load(f)
        config["auth"] = {"path": "./auth.py:auth"}
        with open(config_path, "w") as f:
            json.dump(config, f)
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
            if not only or module_name in only or any(name.startswith("test_js") for name in only):
                print("the JS SDK check is left out: WEFT_E2E_JS_DIR names no installed @langchain/langgraph-sdk")
            continue
        for name, fn in inspect.getmembers(module, inspect.iscoroutinefunction):
            if name.startswith("test_") and (not only or name in only or module_name in only):
                found.append((module_name, name, fn))
    found.sort(key=lambda t: (MODULES.index(t[0]), inspect.getsourcelines(t[2])[1]))
    return found


async def run_suite(env, cases):
    results = {}
    client = env.client()
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


async def retry_reference(runs, results):
    """Runs each test that `langgraph dev` failed once more against it alone, and keeps the second outcome.

    The reference sometimes drops a stream when both servers share two busy cores; weft's failures are never
    retried. Returns `(test, first failure)` for each test the reference passed on its second try.
    """
    retried = []
    for (env, group), result in zip(runs, results):
        if env.name != "langgraph":
            continue
        for case in [case for case in group if not result[case[1]][0]]:
            first = result[case[1]][1]
            result.update(await run_suite(env, [case]))
            if result[case[1]][0]:
                retried.append((case[1], first))
    return retried


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--weft-bin", required=True)
    parser.add_argument("--langgraph-bin", default=os.path.join(os.path.dirname(sys.executable), "langgraph"))
    parser.add_argument("--only", default="")
    parser.add_argument("--servers", default="weft,langgraph")
    parser.add_argument("--weft-instances", type=int, default=1)
    parser.add_argument("--weft-in-memory", action="store_true", help="weft without a database, as langgraph dev runs")
    args = parser.parse_args()
    if args.weft_in_memory:
        WEFT_ARGS.append("--in-memory")
    only = {n for n in args.only.split(",") if n}
    names = [s for s in args.servers.split(",") if s]
    cases = tests(only)
    if not cases:
        print("no tests selected")
        return 1
    # One pair of servers without auth, one with, each only when some selected test needs it.
    groups = [(auth, [case for case in cases if (case[0] in AUTH_MODULES) == auth]) for auth in (False, True)]
    groups = [(auth, group) for auth, group in groups if group]
    logs, processes, envs, runs = {}, [], [], []
    try:
        for auth, group in groups:
            for name in names:
                label = f"{name}-auth" if auth else name
                logs[label] = tempfile.NamedTemporaryFile(prefix=f"weft-e2e-{label}-", suffix=".log", delete=False)
                urls = []
                if name == "weft" and args.weft_instances > 1:
                    if not (os.environ.get("DATABASE_URI") and os.environ.get("REDIS_URI")):
                        raise RuntimeError("--weft-instances needs DATABASE_URI and REDIS_URI")
                    # One deployment per pair: the auth pair's records share the database, not the keys.
                    instance_env = dict(os.environ, REDIS_KEY_PREFIX=f"{os.environ.get('REDIS_KEY_PREFIX', 'weft:')}{label}:")
                    if auth and os.environ.get("DATABASE_URI_AUTH"):
                        instance_env["DATABASE_URI"] = os.environ["DATABASE_URI_AUTH"]
                    for i in range(args.weft_instances):
                        url, process, timeout = start_weft(args.weft_bin, logs[label], auth, instance_env)
                        processes.append((f"{label}-{i}", process, url, timeout))
                        urls.append(url)
                        if i == 0:
                            # The first instance makes the tables before the others start.
                            wait_ready(url, process, timeout)
                    url = urls[0]
                else:
                    start = start_weft if name == "weft" else start_langgraph
                    binary = args.weft_bin if name == "weft" else args.langgraph_bin
                    url, process, timeout = start(binary, logs[label], auth)
                    processes.append((label, process, url, timeout))
                env = Env(name, url, urls)
                envs.append(env)
                runs.append((env, group))
        for name, process, url, timeout in processes:
            wait_ready(url, process, timeout)
        started = time.time()
        results = await asyncio.gather(*(run_suite(env, group) for env, group in runs))
        retried = await retry_reference(runs, results)
        # Each server's results, both pairs together, in the order of `names`.
        merged = {name: {} for name in names}
        for (env, _), result in zip(runs, results):
            merged[env.name].update(result)
        outcomes = [merged[name] for name in names]
        notes_from = envs
        envs = [Env(name, "") for name in names]
        for env in envs:
            env.notes = [n for e in notes_from if e.name == env.name for n in e.notes]
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
    for name, detail in retried:
        print(f"the reference failed {name} once and passed it on a second try: {detail}")
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
