#!/usr/bin/env python3
"""A tiny headless-Chromium driver for the HTML export tests (standard library only).

Starts `chromium --headless --remote-debugging-pipe` (the DevTools protocol over fds 3/4,
NUL-framed JSON), attaches to its page, and then answers one JSON command per stdin line
with one JSON line on stdout, so the Rust test decides and asserts everything:

  {"cmd": "open", "url": "file:///…"}     navigate, wait for the load event
  {"cmd": "eval", "expr": "…"}            Runtime.evaluate (awaitPromise, returnByValue)
  {"cmd": "key", "key": "t"}              a real key press (keyDown/char/keyUp)
  {"cmd": "click", "selector": "…"}       a real mouse click at the element's centre
  {"cmd": "type", "text": "…"}            Input.insertText into the focused element
  {"cmd": "shot", "path": "…png"}         a screenshot of the viewport
  {"cmd": "downloads", "dir": "…"}        allow downloads into dir
  {"cmd": "events"}                       console errors, exceptions, log errors, dialogs so far
  {"cmd": "quit"}

Before every page's own scripts run, a probe (injected through the protocol, so the page's
policy does not apply to it) records `securitypolicyviolation` events and any call of
alert/confirm/prompt/print in `window.__probe`.
"""
import base64, json, os, select, shutil, sys, tempfile, time

PROBE = r"""
window.__probe = { violations: [], calls: [] };
document.addEventListener('securitypolicyviolation', function (e) {
  window.__probe.violations.push({ directive: e.violatedDirective, blocked: e.blockedURI, sample: e.sample });
}, true);
['alert', 'confirm', 'prompt', 'print'].forEach(function (name) {
  var original = window[name];
  window[name] = function () { window.__probe.calls.push(name + ':' + Array.prototype.join.call(arguments, ' ')); };
});
"""


class Browser:
    def __init__(self, binary):
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()
        self.profile = tempfile.mkdtemp(prefix="pi-cdp-")
        args = [binary, "--headless", "--remote-debugging-pipe", "--no-sandbox",
                "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking",
                "--user-data-dir=" + self.profile, "--window-size=1280,900", "about:blank"]
        self.pid = os.fork()
        if self.pid == 0:
            try:
                # Via high numbers, so neither pipe end is overwritten before it is moved.
                os.dup2(to_r, 100)
                os.dup2(from_w, 101)
                os.dup2(100, 3)
                os.dup2(101, 4)
                os.set_inheritable(3, True)
                os.set_inheritable(4, True)
                null = os.open(os.devnull, os.O_RDWR)
                os.dup2(null, 0)
                os.dup2(null, 1)
                os.dup2(null, 2)
                os.closerange(5, 4096)
                os.execv(binary, args)
            finally:
                os._exit(127)
        os.close(to_r)
        os.close(from_w)
        self.buf = b""
        self.next_id = 0
        self.session = None
        self.loads = 0
        self.events = {"console": [], "exceptions": [], "log": [], "dialogs": []}

    def send(self, method, params=None, session=True):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            data = data[os.write(self.to_w, data):]
        return self.wait_for(lambda m: m.get("id") == self.next_id)

    def read_one(self, timeout):
        while b"\0" not in self.buf:
            ready, _, _ = select.select([self.from_r], [], [], timeout)
            if not ready:
                raise TimeoutError("no answer from chromium")
            chunk = os.read(self.from_r, 1 << 20)
            if not chunk:
                raise EOFError("chromium closed the pipe")
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        return json.loads(raw)

    def wait_for(self, pred, timeout=30):
        end = time.time() + timeout
        while True:
            msg = self.read_one(max(0.1, end - time.time()))
            self.observe(msg)
            if pred(msg):
                if "error" in msg:
                    raise RuntimeError(json.dumps(msg["error"]))
                return msg

    def observe(self, msg):
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            self.events["console"].append(p["type"] + ": " + text)
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            self.events["exceptions"].append(d.get("exception", {}).get("description") or d.get("text"))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
            e = p["entry"]
            self.events["log"].append(e.get("source", "") + ": " + e.get("text", ""))
        elif method == "Page.loadEventFired":
            self.loads += 1
        elif method == "Page.javascriptDialogOpening":
            self.events["dialogs"].append(p.get("message"))
            self.send("Page.handleJavaScriptDialog", {"accept": False})

    def attach(self):
        targets = self.send("Target.getTargets", session=False)["result"]["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.send("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True},
                                 session=False)["result"]["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.send(domain + ".enable")
        self.send("Page.addScriptToEvaluateOnNewDocument", {"source": PROBE})

    def evaluate(self, expr):
        r = self.send("Runtime.evaluate", {"expression": expr, "awaitPromise": True, "returnByValue": True})
        res = r["result"]
        if "exceptionDetails" in res:
            d = res["exceptionDetails"]
            raise RuntimeError(d.get("exception", {}).get("description") or d.get("text"))
        return res["result"].get("value")

    def key(self, key):
        code = "Key" + key.upper() if len(key) == 1 and key.isalpha() else key
        vk = ord(key.upper()) if len(key) == 1 else {"Escape": 27, "Enter": 13}.get(key, 0)
        base = {"key": key, "code": code, "windowsVirtualKeyCode": vk}
        self.send("Input.dispatchKeyEvent", dict(base, type="keyDown"))
        if len(key) == 1:
            self.send("Input.dispatchKeyEvent", dict(base, type="char", text=key))
        self.send("Input.dispatchKeyEvent", dict(base, type="keyUp"))

    def click(self, selector):
        box = self.evaluate(
            "(function(){var e=document.querySelector(%s); if(!e) return null; e.scrollIntoView({block:'center'});"
            "var r=e.getBoundingClientRect(); return [r.left+r.width/2, r.top+r.height/2];})()" % json.dumps(selector))
        if box is None:
            raise RuntimeError("no element " + selector)
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1})

    def close(self):
        try:
            self.send("Browser.close", session=False)
        except Exception:
            pass
        try:
            os.waitpid(self.pid, 0)
        except Exception:
            pass
        shutil.rmtree(self.profile, ignore_errors=True)


def main():
    browser = Browser(sys.argv[1] if len(sys.argv) > 1 else "/usr/bin/chromium")
    out = sys.stdout
    try:
        browser.attach()
        out.write(json.dumps({"ok": True, "ready": True}) + "\n")
        out.flush()
        for line in sys.stdin:
            if not line.strip():
                continue
            c = json.loads(line)
            try:
                cmd = c["cmd"]
                if cmd == "open":
                    before = browser.loads
                    browser.send("Page.navigate", {"url": c["url"]})
                    while browser.loads <= before:
                        browser.observe(browser.read_one(30))
                    value = None
                elif cmd == "eval":
                    value = browser.evaluate(c["expr"])
                elif cmd == "key":
                    browser.key(c["key"])
                    value = None
                elif cmd == "click":
                    browser.click(c["selector"])
                    value = None
                elif cmd == "type":
                    browser.send("Input.insertText", {"text": c["text"]})
                    value = None
                elif cmd == "shot":
                    data = browser.send("Page.captureScreenshot", {"format": "png"})["result"]["data"]
                    with open(c["path"], "wb") as f:
                        f.write(base64.b64decode(data))
                    value = c["path"]
                elif cmd == "downloads":
                    browser.send("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": c["dir"]},
                                 session=False)
                    value = None
                elif cmd == "events":
                    value = browser.events
                elif cmd == "quit":
                    break
                else:
                    raise ValueError("unknown command " + cmd)
                out.write(json.dumps({"ok": True, "value": value}) + "\n")
            except Exception as e:  # the test reports it with the command
                out.write(json.dumps({"ok": False, "error": "%s: %s" % (type(e).__name__, e)}) + "\n")
            out.flush()
    finally:
        browser.close()


if __name__ == "__main__":
    main()
