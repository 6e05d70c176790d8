"""#27: `cwmtui serve`: the debugger in a browser. One test serves samples/strings.py on a free
loopback port, opens it in headless Chromium (the system's, through Playwright) and reads the
screen the page's terminal was sent; the others check the command line it serves, its refusals
and its warning, without a browser."""

from __future__ import annotations

import codecs
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

from cwmtui.cli import main
from cwmtui.cli.serve import tab_words

from ..terminal_screen import TerminalScreen
from .sessions import ROOT, SAMPLES

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Served:
    """`cwmtui serve ...` in a process of its own (its own process group: all of it is ended)."""

    def __init__(self, tmp_path, *argv: str) -> None:
        self.port = free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.stderr = open(tmp_path / "serve.stderr", "w+")
        self.process = subprocess.Popen([sys.executable, "-m", "cwmtui", "serve", *argv, "--port", str(self.port)],
                                        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=self.stderr, text=True,
                                        start_new_session=True)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        start = time.monotonic()
        while not any(line.startswith("cwmtui serve:") for line in self.lines):
            assert self.process.poll() is None, f"cwmtui serve ended: {self.errors()}"
            assert time.monotonic() - start < 60, "cwmtui serve did not start listening"
            time.sleep(0.1)
        self.base = f"http://127.0.0.1:{self.port}"
        printed = next(line for line in self.lines if line.startswith("cwmtui serve:"))
        self.url = printed.split(" at ", 1)[1].split(" ", 1)[0]  # with its token
        self.token = self.url.split("?token=", 1)[1]

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)

    def errors(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # as Ctrl+C
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # anything a tab left running
        except ProcessLookupError:
            pass
        self.process.wait(10)
        self.stderr.close()


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium): "
                                             "the browser test of cwmtui serve drives it")
def test_the_debugger_served_to_a_browser_shows_the_source_and_both_timelines(tmp_path):
    from playwright.sync_api import sync_playwright

    served = Served(tmp_path, str(SAMPLES / "strings.py"))
    try:
        assert served.lines[0].strip() == (
            f"cwmtui serve: the debugger on strings.py at {served.base}/?token={served.token} (each browser tab "
            "runs its own; add &fontsize=24 for a projector; Ctrl+C stops)")
        assert len(served.token) >= 24
        # what the page is, and what it refuses
        page = httpx.get(served.url)
        page_html = page.text
        assert "cwmtui · strings.py" in page_html and sys.executable not in page_html  # not the command line
        assert f"ws://127.0.0.1:{served.port}/ws" in page_html
        assert page.headers["X-Frame-Options"] == "DENY" and "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
        cookie = page.cookies.get(f"cwmtui-serve-{served.port}")
        assert cookie == served.token and "samesite=strict" in page.headers["set-cookie"].lower()
        # (review) without the token, neither the page (a frame of another site's page, another
        # user of the machine) nor a websocket
        handshake = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                     "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
        for path in ("/", "/?token=guess", "/ws"):
            refused = httpx.get(served.base + path, headers=handshake if path == "/ws" else {})
            assert refused.status_code == 403 and "the token" in refused.text, path
        assert httpx.get(served.url, headers={"Host": f"rebound.example:{served.port}"}).status_code == 403
        refused = httpx.get(served.base + f"/ws?token={served.token}", headers={**handshake, "Origin": "http://elsewhere.example"})
        assert refused.status_code == 403 and "another site" in refused.text

        screen = TerminalScreen()
        decoder = codecs.getincrementaldecoder("utf-8")("replace")

        def received(payload) -> None:
            if isinstance(payload, bytes):
                screen.feed(decoder.decode(payload))

        def ready(text: str) -> bool:
            return ("def scramble(text, shift):" in text and "model · main" in text and "writing…" not in text
                    and "ended: the program returned · model:" in text)

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
            try:
                page = browser.new_page(viewport={"width": 1500, "height": 900})
                page.on("websocket", lambda ws: ws.on("framereceived", received))
                page.goto(served.url)
                page.wait_for_selector("body.-first-byte", timeout=60_000)  # the app has started drawing
                page.focus(".xterm-helper-textarea")  # the terminal has the keyboard, as after a click on it
                start = time.monotonic()
                while not ready(screen.text()):
                    assert time.monotonic() - start < 240, f"the page never showed the finished debugger:\n{screen.text()}"
                    page.wait_for_timeout(250)  # (Playwright hands over the page's events while it waits)
                page.wait_for_timeout(1000)  # the last frames drawn
                shot = tmp_path / "cwmtui-serve.png"
                page.screenshot(path=str(shot))
            finally:
                browser.close()
        if os.environ.get("CWMTUI_ARTEFACTS"):
            os.makedirs(os.environ["CWMTUI_ARTEFACTS"], exist_ok=True)
            shutil.copy(shot, os.environ["CWMTUI_ARTEFACTS"])
        assert shot.stat().st_size > 10_000
        lines = screen.lines()
        text = "\n".join(lines)
        # the source, with the program's lines
        assert "source · strings.py" in text
        for line in ('def scramble(text, shift):  # << START_OF_TRACE', 'head, tail = word[0], word[1:]',
                     'scramble("world model", 3)'):
            assert line in text, line
        # both timelines, side by side, each with its rows from step 0
        titles = next(line for line in lines if "─ interpreter ─" in line)
        assert "─ model · main" in titles and titles.index("interpreter") < titles.index("model · main")
        first_rows = next(line for line in lines if "→def scramble(te" in line)
        assert first_rows.count("→def scramble(te") == 2 and first_rows.count("text='world model'") == 2
        assert "first divergence" in text
        assert "? Help q Quit" in lines[-1]  # the footer's keys (shown once the page has focus)
    finally:
        served.stop()
    assert served.process.returncode is not None


def test_a_tab_runs_the_debugger_with_the_same_words_quoted(monkeypatch, capsys):
    """The tabs' command line: the debugger's words as given (serve's own and the API key out),
    each one quoted for the shell textual-serve hands it to."""
    words, key = tab_words(["p; rm -rf ~.py", "--host", "0.0.0.0", "--port=9000", "--api-key", "s3cret",
                            "--server", "http://gpu:8000", "--theme", "light"])
    assert words == ["p; rm -rf ~.py", "--server", "http://gpu:8000", "--theme", "light"] and key == "s3cret"
    assert shlex.split(shlex.join(words)) == words
    served = {}

    def serve(self, debug=False):
        served.update(command=self.command, title=self.title, host=self.host, port=self.port)
        self.announce()

    monkeypatch.setattr("cwmtui.serving.DebuggerServer.serve", serve)
    monkeypatch.setattr("cwmtui.serving.check_port", lambda host, port: None)
    monkeypatch.setenv("VLLM_API_KEY", "")
    code = main(["serve", str(SAMPLES / "strings.py"), "--demo", "--theme", "light", "--port", "8123"])
    assert code == 0
    assert served["command"] == shlex.join(["env", "CWMTUI_SERVED=1", sys.executable, "-m", "cwmtui",
                                            str(SAMPLES / "strings.py"), "--demo", "--theme", "light"])
    assert "CWMTUI_SERVED" not in os.environ  # (review: set here, it hid export from every later test)
    assert served["title"] == "cwmtui · strings.py" and (served["host"], served["port"]) == ("127.0.0.1", 8123)
    out, err = capsys.readouterr()
    assert "at http://127.0.0.1:8123/?token=" in out and err == ""


def no_serving(monkeypatch) -> None:
    """The server announces itself and returns, listening on nothing."""
    monkeypatch.setattr("cwmtui.serving.DebuggerServer.serve", lambda self, debug=False: self.announce())
    monkeypatch.setattr("cwmtui.serving.check_port", lambda host, port: None)


def test_another_address_says_whoever_reaches_it_can_run_programs(monkeypatch, capsys):
    no_serving(monkeypatch)
    monkeypatch.setattr("cwmtui.interpreter.runner.sandbox_warning", lambda limits: None)  # a sandbox here
    code = main(["serve", str(SAMPLES / "strings.py"), "--host", "0.0.0.0", "--port", "8124"])
    out, err = capsys.readouterr()
    assert code == 0 and "at http://0.0.0.0:8124" in out
    assert err.startswith("warning: --host 0.0.0.0 is not a loopback address: whoever reaches port 8124 of "
                          "this machine can run programs on it")
    assert "runs strings.py and the model here" in err and err.count("\n") == 1
    # on a loopback address, no warning
    main(["serve", str(SAMPLES / "strings.py"), "--host", "localhost", "--port", "8124"])
    assert capsys.readouterr().err == ""


def test_another_address_without_a_sandbox_is_refused_unless_asked(monkeypatch, capsys):
    no_serving(monkeypatch)
    monkeypatch.setattr("cwmtui.interpreter.runner.sandbox_warning", lambda limits: "warning: no sandbox" if limits.sandbox else None)
    code = main(["serve", str(SAMPLES / "strings.py"), "--host", "0.0.0.0"])
    err = capsys.readouterr().err
    assert code == 2 and "the programs would run without a sandbox for whoever reaches it" in err
    assert err.count("\n") == 1
    code = main(["serve", str(SAMPLES / "strings.py"), "--host", "0.0.0.0", "--no-sandbox"])  # asked for
    assert code == 0 and "whoever reaches port 8000" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["serve", "missing.py"], "missing.py: no such file"),
        (["serve", str(SAMPLES / "strings.py"), "--theme", "neon"], "no theme named 'neon'"),
        (["serve", str(SAMPLES / "strings.py"), "--demo", "/no/such.toml"], "--demo /no/such.toml: no such file"),
        (["serve"], "no program"),
    ],
)
def test_serve_checks_its_input_before_it_listens(monkeypatch, capsys, argv, message):
    monkeypatch.setattr("cwmtui.serving.DebuggerServer.serve", lambda self, debug=False: pytest.fail("served"))
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err


def test_serve_without_its_extra_says_which_in_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "textual_serve.server", None)  # as if not installed
    code = main(["serve", str(SAMPLES / "strings.py")])
    err = capsys.readouterr().err
    assert code == 2 and "cwmtui serve needs textual_serve" in err and "pip install 'cwmtui[serve]'" in err
    assert err.count("\n") == 1


def test_a_port_in_use_is_one_line(capsys):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        code = main(["serve", str(SAMPLES / "strings.py"), "--port", str(port)])
    err = capsys.readouterr().err
    assert code == 2 and f"cannot listen on 127.0.0.1:{port}: address already in use" in err
    assert err.count("\n") == 1


async def test_a_served_tab_writes_no_export_on_the_serving_machine(monkeypatch, tmp_path, interpreter):
    """Review: x in a browser tab wrote a JSON and an SVG into the server's folder, as often as a
    visitor pressed it."""
    from cwmtui.ui.app import SERVED_ENV, CwmApp

    from .sessions import strings_view

    monkeypatch.setenv(SERVED_ENV, "1")
    app = CwmApp(strings_view(interpreter), export_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert not app.debugger.check_action("export", ())  # not offered
        app.export_session()  # (and refused where something asks for it anyway)
        await pilot.pause()
        assert list(tmp_path.iterdir()) == []
        assert any("it is off in cwmtui serve" in str(n.message) for n in app._notifications)


class RecordedTab:
    """Stands in for textual-serve's AppService: records the terminal sizes a tab is given."""

    sizes: list[tuple[int, int]] = []

    def __init__(self, *args, close, **kwargs) -> None:
        self.close = close

    async def start(self, width: int, height: int) -> None:
        RecordedTab.sizes.append((width, height))

    async def set_terminal_size(self, width: int, height: int) -> None:
        RecordedTab.sizes.append((width, height))

    async def stop(self) -> None:
        pass


@pytest.fixture
def debugger_server(monkeypatch):
    """A DebuggerServer's own aiohttp application on a loopback test server (no tab is run)."""
    import textual_serve.server
    from aiohttp.test_utils import TestClient, TestServer

    from cwmtui.serving import DebuggerServer

    monkeypatch.setattr(textual_serve.server, "AppService", RecordedTab)
    RecordedTab.sizes = []

    async def start(host: str = "127.0.0.1"):
        server = DebuggerServer("true", host=host, port=free_port(), title="cwmtui · t.py")
        test_server = TestServer(await server._make_app(), host="127.0.0.1", port=server.port)
        client = TestClient(test_server)
        await client.start_server()
        return server, client

    return start


async def test_a_tab_cannot_ask_for_a_screen_of_millions_of_cells(debugger_server):
    """Review of #27: the width and height a tab's websocket asked for (its URL, its resize
    messages) reached the debugger as they were: a visitor could make it draw 10^9 cells."""
    from cwmtui.serving import MAX_COLUMNS, MAX_ROWS

    server, client = await debugger_server()
    try:
        socket_ = await client.ws_connect(f"/ws?token={server.token}&width=100000000&height=99999999")
        for size in ({"width": 10**12, "height": 10**12}, {"width": -5, "height": "40"}, {"width": "wide", "height": None},
                     {"width": 132, "height": 43}):
            await socket_.send_json(["resize", size])
        await socket_.send_json(["ping", "x"])  # answered once the resizes before it are relayed
        assert (await socket_.receive_json()) == ["pong", "x"]
        await socket_.close()
    finally:
        await client.close()
    assert RecordedTab.sizes == [(MAX_COLUMNS, MAX_ROWS), (MAX_COLUMNS, MAX_ROWS), (1, 40), (80, 24), (132, 43)]
    assert (MAX_COLUMNS, MAX_ROWS) == (1000, 400)


async def test_the_page_asks_nothing_of_another_site(debugger_server):
    """Review of #27: textual-serve's page linked Google's fonts (offline, or where a network
    drops the request, the projector's page waited on it); the same font is served here."""
    server, client = await debugger_server()
    try:
        page = await client.get(f"/?token={server.token}")
        html = await page.text()
        font = await client.get("/static/fonts/RobotoMono-VariableFont_wght.ttf")
        assert font.status == 200 and len(await font.read()) > 10_000
    finally:
        await client.close()
    assert page.status == 200 and "googleapis" not in html
    import re

    hosts = set(re.findall(r"(?:https?|wss?)://([^/\"']+)", html)) - {"www.w3.org"}  # (an SVG's xmlns: a name, not fetched)
    assert hosts == {f"127.0.0.1:{server.port}"}  # its own static files and websocket only
    assert f'url("http://127.0.0.1:{server.port}/static/fonts/RobotoMono-VariableFont_wght.ttf")' in html


async def test_the_address_a_browser_used_is_escaped_in_the_page(debugger_server):
    """Review of #27: the font block was built from the Host header unescaped (and as a regex
    replacement: a backslash in it was a server error)."""
    server, client = await debugger_server(host="0.0.0.0")  # (any Host is answered off loopback)
    try:
        page = await client.get(f"/?token={server.token}", headers={"Host": 'x"y<b>\\1:80'})
        html = await page.text()
    finally:
        await client.close()
    assert page.status == 200 and "<b>" not in html and 'x&quot;y&lt;b&gt;\\1:80/static/fonts/' in html
