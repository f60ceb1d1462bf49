"""The studio in a real browser: headless Chromium driven over WebDriver against the example server
(`cargo run --example server --features server`). Runs the agent, answers its approval, forks from an earlier checkpoint with an
edited state, opens a failed run's thread, checks the page at a phone's width and with an API key; saves a
screenshot of each step and fails on any console error or a page that loads in 1 s or more.

    python3 run.py --server-bin target/debug/examples/server --chromedriver /usr/bin/chromedriver --out DIR
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

from webdriver import Driver, WebDriverError, free_port

STEPS = []


def step(name):
    def wrap(fn):
        STEPS.append((name, fn))
        return fn
    return wrap


class Server:
    """The example server on a free port, with its SQLite file in a folder of its own."""

    def __init__(self, binary, workdir, api_key=None):
        shutil.rmtree(workdir, ignore_errors=True)
        os.makedirs(workdir)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ)
        env.pop("WEFT_API_KEY", None)
        if api_key:
            env["WEFT_API_KEY"] = api_key
        self.log = open(os.path.join(workdir, "server.log"), "wb")
        self.process = subprocess.Popen([binary, "--addr", f"127.0.0.1:{self.port}"], cwd=workdir, env=env,
                                        stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while True:
            try:
                with urllib.request.urlopen(self.url + "/ok", timeout=2):
                    break
            except OSError:
                if self.process.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"the server did not start (see {workdir}/server.log)")
                time.sleep(0.1)

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


class Check:
    def __init__(self, driver, out):
        self.d, self.out, self.shots = driver, out, 0

    def shot(self, name):
        self.shots += 1
        path = os.path.join(self.out, f"{self.shots:02}-{name}.png")
        self.d.screenshot(path)
        print(f"    screenshot {path}")

    def console_clean(self, allow=()):
        entries = self.d.console()
        bad = [e for e in entries if e.get("level") == "SEVERE" and not any(a in e.get("message", "") for a in allow)]
        assert not bad, "console errors:\n" + "\n".join(e["message"] for e in bad)

    def text(self, css):
        return self.d.find(css).text

    def wait_text(self, css, *parts, timeout=15.0):
        def check():
            text = " ".join(e.text for e in self.d.find_all(css))
            return text if all(p in text for p in parts) else None
        return self.d.wait(f"{css} to show {parts}", check, timeout)


def open_studio(c, url):
    start = time.time()
    c.d.get(url + "/studio")
    c.d.wait("the studio to be ready", lambda: c.text("#status") == "Ready")
    timing = c.d.run("const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd - n.startTime;")
    print(f"    loaded in {timing:.0f} ms (ready after {1000 * (time.time() - start):.0f} ms)")
    assert 0 < timing < 1000, f"the page took {timing} ms to load"


@step("graph")
def graph(c, ctx):
    open_studio(c, ctx["url"])
    names = [e.prop("value") for e in c.d.find_all("#assistant option")]
    assert {"agent", "chat", "review"} <= {c.d.run("return arguments[0].textContent", e) for e in c.d.find_all("#assistant option")}, names
    nodes = c.d.run("return [...document.querySelectorAll('#graph [data-node]')].map(n => n.dataset.node)")
    assert set(nodes) == {"__start__", "agent", "human_approval", "tools", "__end__"}, nodes
    assert c.d.find_all("#graph path.edge.conditional"), "no conditional edge drawn"
    c.console_clean()
    c.shot("graph")


@step("run the agent")
def run_agent(c, ctx):
    c.d.find("#input-messages").type("Is it warm in Porto tonight? Then book a table.")
    # Count what the streaming message shows as tokens arrive.
    c.d.run("""window.__seen = new Set();
      new MutationObserver(() => document.querySelectorAll('#chat .streaming .msg-text')
        .forEach(el => window.__seen.add(el.textContent))).observe(document.getElementById('chat'),
        {childList: true, subtree: true, characterData: true});""")
    c.d.find("#run").click()
    c.d.wait_css('.approval[data-tool="book_table"]')
    c.wait_text("#chat", "Checking the weather in Porto.", "Porto tonight: 24°C, clear sky.", "Booking a table.")
    c.wait_text("#thread-meta", "interrupted")
    seen = c.d.run("return [...window.__seen]")
    assert len(seen) >= 3, f"the reply did not stream token by token: {seen}"
    path = c.d.run("return [...document.querySelectorAll('#graph .node.visited')].map(n => n.dataset.node)")
    assert {"agent", "tools"} <= set(path), path
    ctx["thread"] = c.d.run("return location.hash").split("/t/")[-1]
    c.console_clean()
    c.shot("approval")


@step("approve")
def approve(c, ctx):
    c.d.find('.approval[data-tool="book_table"] .approve').click()
    answer = c.wait_text("#chat .msg-ai:last-child", "Here is what I found", "Booked a table for 2 at Casa Azul at 20:00.")
    print(f"    answer: {answer}")
    c.wait_text("#thread-meta", "idle")
    assert not c.d.find_all("#interrupt .approval"), "the interrupt is still shown"
    c.console_clean()
    c.shot("answer")


@step("history and fork")
def fork(c, ctx):
    c.d.find("#tab-history").click()
    c.d.wait_css('#timeline [data-step="0"]')
    before = len(c.d.find_all("#timeline .checkpoint"))
    c.d.find('#timeline [data-step="0"]').click()
    c.wait_text("#checkpoint", "Next: agent")
    c.shot("history")
    area = c.d.find("#fork-values")
    edited = area.prop("value").replace("Is it warm in Porto tonight? Then book a table.", "Is it warm in Paris tonight?")
    assert "Paris" in edited, "the checkpoint's values do not hold the question"
    area.clear().type(edited)
    c.d.find("#fork-run").click()
    c.d.find("#tab-chat")  # the run shows on the Run tab
    c.wait_text("#chat .msg-ai:last-child", "Here is what I found: Paris tonight: 24°C, clear sky.")
    c.wait_text("#thread-meta", "idle")
    chat = c.text("#chat")
    assert "Porto" not in chat and "Booked" not in chat, f"the fork kept the old branch's messages: {chat}"
    c.d.find("#tab-history").click()
    c.d.wait("a longer history with a branch", lambda: len(c.d.find_all("#timeline .checkpoint")) > before
             and c.d.find_all("#timeline .badge.branch"))
    c.console_clean()
    c.shot("fork")


@step("a failed run")
def failed(c, ctx):
    c.d.run("const s = document.getElementById('assistant'); s.value = [...s.options].find(o => o.textContent === 'review').value;"
            "s.dispatchEvent(new Event('change'));")
    c.d.wait("the review graph", lambda: "review" in c.text("#graph-title") and c.d.find("#input-topic"))
    c.d.find("#input-topic").type("errors")
    c.d.find("#recursion-limit").type("1")
    c.d.find("#run").click()
    c.wait_text("#run-error", "GraphRecursionError", "Failed in review at step 2")
    c.d.find("#recursion-limit").clear()
    # Open the failed thread afresh from the list.
    c.d.find("#new-thread").click()
    c.d.find("#thread-status").click()
    c.d.run("const s = document.getElementById('thread-status'); s.value = 'error';")
    c.d.find('#thread-search button[type="submit"]').click()
    c.d.wait("the failed thread in the list", lambda: len(c.d.find_all("#thread-list .thread")) == 1)
    c.d.find("#thread-list .thread").click()
    c.wait_text("#run-error", "GraphRecursionError", "recursion limit of 1", "Failed in review at step 2")
    failed_nodes = c.d.run("return [...document.querySelectorAll('#graph .node.failed')].map(n => n.dataset.node)")
    assert failed_nodes == ["review"], failed_nodes
    c.d.find("#run-error button").click()
    c.wait_text("#trace", "next: review", "error")
    c.console_clean()
    c.shot("error")
    c.d.find("#tab-chat").click()


@step("breakpoint")
def breakpoint(c, ctx):
    c.d.run("const s = document.getElementById('assistant'); s.value = [...s.options].find(o => o.textContent === 'chat').value;"
            "s.dispatchEvent(new Event('change'));")
    c.d.wait("the chat graph", lambda: "chat" in c.text("#graph-title") and c.d.find("#input-messages"))
    c.d.find("#breakpoints summary").click()
    c.d.find("#bp-before-model").click()
    c.d.wait("the breakpoint drawn", lambda: c.d.find_all('#graph [data-node="model"] circle.bp'))
    c.d.find("#input-messages").type("hello studio")
    c.d.find("#run").click()
    c.wait_text("#interrupt", "Paused before model")
    c.wait_text("#thread-meta", "interrupted")
    assert "You said" not in c.text("#chat"), "the model ran past its breakpoint"
    c.d.find("#bp-before-model").click()  # off again: the next step runs through
    c.d.find("#continue").click()
    c.wait_text("#chat .msg-ai:last-child", "You said: hello studio")
    c.wait_text("#thread-meta", "idle")
    c.console_clean()


@step("phone width")
def phone(c, ctx):
    c.d.resize(390, 844)
    c.d.get(ctx["url"] + f"/studio/#/a/agent/t/{ctx['thread']}")
    c.d.wait("the thread", lambda: c.text("#status").startswith(f"Thread {ctx['thread'][-8:]}"))
    wide = c.d.run("return document.documentElement.scrollWidth - window.innerWidth")
    assert wide <= 1, f"the page is {wide} px wider than a phone"
    c.wait_text("#chat", "Paris tonight")
    c.console_clean()
    c.shot("phone")
    c.d.resize(1400, 1000)


@step("keyboard")
def keyboard(c, ctx):
    c.d.find("#tab-chat").click()
    c.d.run("document.getElementById('tab-chat').focus()")
    c.d.call("POST", "/actions", {"actions": [{"type": "key", "id": "k", "actions": [
        {"type": "keyDown", "value": "\ue014"}, {"type": "keyUp", "value": "\ue014"}]}]})
    focused = c.d.run("return document.activeElement.id")
    assert focused == "tab-state" and not c.d.run("return document.getElementById('panel-state').hidden"), focused
    unlabeled = c.d.run("""return [...document.querySelectorAll('input, select, textarea')]
        .filter(e => !e.hidden && e.type !== 'hidden' && !e.labels?.length && !e.getAttribute('aria-label')).map(e => e.id)""")
    assert not unlabeled, f"controls without a label: {unlabeled}"
    c.console_clean()


@step("subgraphs fold and expand")
def subgraphs(c, ctx):
    # weft's server does not draw subgraphs inline: LangGraph's x-ray drawing of a graph with a subgraph
    # `inner` (nodes `inner:a`, `inner:b`) is drawn in the page's own drawing code instead.
    drawing = {
        "nodes": [{"id": i, "data": {"name": i.split(":")[-1]}} for i in
                  ["__start__", "outer", "inner:a", "inner:b", "__end__"]],
        "edges": [{"source": "__start__", "target": "outer"}, {"source": "outer", "target": "inner:a"},
                  {"source": "inner:a", "target": "inner:b", "conditional": True},
                  {"source": "inner:b", "target": "__end__"}],
    }
    shown = c.d.call("POST", "/execute/async", {"script": """
        const [drawing, done] = arguments;
        import('./js/graph.js').then(({GraphView}) => {
          const box = document.createElement('div');
          document.body.append(box);
          const view = new GraphView(box);
          view.set(drawing);
          const nodes = () => [...box.querySelectorAll('[data-node]')].map(n => n.dataset.node).sort().join(' ');
          const folded = nodes();
          box.querySelector('[data-node="inner"]').dispatchEvent(new MouseEvent('click'));
          const expanded = nodes();
          box.querySelector('[data-node="inner:b"]').dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter'}));
          const again = nodes();
          box.remove();
          done([folded, expanded, again]);
        }, (e) => done(String(e)));""", "args": [drawing]})
    assert shown == ["__end__ __start__ inner outer", "__end__ __start__ inner:a inner:b outer",
                     "__end__ __start__ inner outer"], shown
    c.console_clean()


def api_key(binary, driver, out, workdir):
    """A server that wants a key: the studio says so, takes the key, keeps it, and works."""
    server = Server(binary, workdir, api_key="studio-secret")
    try:
        c = Check(driver, out)
        c.shots = 7
        driver.get(server.url + "/studio")
        c.wait_text("#error-box", "Missing authentication", "set the API key")
        assert driver.run("return document.getElementById('settings').open")
        c.console_clean(allow=("401",))
        driver.find("#api-key").type("studio-secret")
        driver.find('#key-form button[type="submit"]').click()
        driver.wait("the studio to be ready", lambda: c.text("#status") == "Ready")
        assert driver.run("return localStorage.getItem('weft-studio.api-key')") == "studio-secret"
        driver.get(server.url + "/studio")
        driver.wait("ready with the stored key", lambda: c.text("#status") == "Ready")
        c.console_clean()
        c.shot("api-key")
        driver.run("localStorage.clear()")
    finally:
        server.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server-bin", required=True)
    ap.add_argument("--chromedriver", required=True)
    ap.add_argument("--chromium")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    args.server_bin = os.path.abspath(args.server_bin)
    shots = os.path.join(args.out, "screenshots")
    shutil.rmtree(shots, ignore_errors=True)
    os.makedirs(shots)
    server = Server(args.server_bin, os.path.join(args.out, "server"))
    driver = Driver(args.chromedriver, args.chromium, log=open(os.path.join(args.out, "chromedriver.log"), "wb"))
    ctx = {"url": server.url}
    failures = 0
    try:
        check = Check(driver, shots)
        for name, fn in STEPS:
            began = time.time()
            try:
                fn(check, ctx)
                print(f"ok   {name} ({time.time() - began:.1f} s)")
            except (AssertionError, WebDriverError) as e:
                failures += 1
                print(f"FAIL {name}: {e}")
                try:
                    driver.screenshot(os.path.join(shots, f"failed-{name.replace(' ', '-')}.png"))
                except WebDriverError:
                    pass
                break
        server.stop()
        if not failures:
            began = time.time()
            try:
                api_key(args.server_bin, driver, shots, os.path.join(args.out, "server-key"))
                print(f"ok   api key ({time.time() - began:.1f} s)")
            except (AssertionError, WebDriverError) as e:
                failures += 1
                print(f"FAIL api key: {e}")
    finally:
        driver.quit()
        if server.process.poll() is None:
            server.stop()
    print(f"screenshots in {shots}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
