"""A small W3C WebDriver client over the standard library, enough for the studio's browser test: start
chromedriver, open a headless Chromium session, find elements, click, type, run scripts, take screenshots
and read the browser's console log."""

import base64
import json
import socket
import subprocess
import time
import urllib.error
import urllib.request

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


class WebDriverError(Exception):
    """An error answer of the driver (its `error` and `message`)."""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Element:
    def __init__(self, driver, ref, css):
        self.driver, self.ref, self.css = driver, ref, css

    def _call(self, method, path, body=None):
        return self.driver.call(method, f"/element/{self.ref}{path}", body)

    def click(self):
        self._call("POST", "/click", {})
        return self

    def clear(self):
        self._call("POST", "/clear", {})
        return self

    def type(self, text):
        self._call("POST", "/value", {"text": text})
        return self

    @property
    def text(self):
        return self._call("GET", "/text")

    def prop(self, name):
        return self._call("GET", f"/property/{name}")

    def find(self, css):
        found = self._call("POST", "/element", {"using": "css selector", "value": css})
        return Element(self.driver, found[ELEMENT], css)


class Driver:
    """One chromedriver process and one browser session."""

    def __init__(self, chromedriver, chromium=None, size=(1400, 1000), log=None):
        self.port = free_port()
        self.process = subprocess.Popen(
            [chromedriver, f"--port={self.port}"], stdout=log or subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 20
        while True:
            try:
                if self._http("GET", "/status").get("ready"):
                    break
            except (OSError, WebDriverError):
                pass
            if time.time() > deadline:
                self.process.kill()
                raise WebDriverError("chromedriver did not start")
            time.sleep(0.1)
        options = {
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={size[0]},{size[1]}", "--force-prefers-reduced-motion"],
        }
        if chromium:
            options["binary"] = chromium
        caps = {"browserName": "chrome", "goog:chromeOptions": options, "goog:loggingPrefs": {"browser": "ALL"}}
        session = self._http("POST", "/session", {"capabilities": {"alwaysMatch": caps}})
        self.session = session["sessionId"]

    def _http(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                answer = json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as e:
            answer = json.loads(e.read() or b"{}")
            value = answer.get("value", {})
            raise WebDriverError(f"{value.get('error')}: {value.get('message', '')[:300]}") from None
        return answer.get("value", answer)

    def call(self, method, path, body=None):
        return self._http(method, f"/session/{self.session}{path}", body)

    def get(self, url):
        self.call("POST", "/url", {"url": url})

    def find(self, css):
        found = self.call("POST", "/element", {"using": "css selector", "value": css})
        return Element(self, found[ELEMENT], css)

    def find_all(self, css):
        found = self.call("POST", "/elements", {"using": "css selector", "value": css})
        return [Element(self, f[ELEMENT], css) for f in found]

    def run(self, script, *args):
        args = [{ELEMENT: a.ref} if isinstance(a, Element) else a for a in args]
        return self.call("POST", "/execute/sync", {"script": script, "args": args})

    def wait(self, what, check, timeout=15.0):
        """Waits until `check()` returns something truthy (errors count as not yet) and returns it."""
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            try:
                value = check()
                if value:
                    return value
            except WebDriverError as e:
                last = e
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}" + (f" (last error: {last})" if last else ""))

    def wait_css(self, css, timeout=15.0):
        return self.wait(css, lambda: self.find(css), timeout)

    def resize(self, width, height):
        self.call("POST", "/window/rect", {"width": width, "height": height})

    def screenshot(self, path):
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.call("GET", "/screenshot")))

    def console(self):
        """The browser's console entries since the last call (chromedriver's log endpoint)."""
        return self.call("POST", "/se/log", {"type": "browser"})

    def quit(self):
        try:
            self.call("DELETE", "")
        except (OSError, WebDriverError):
            pass
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
