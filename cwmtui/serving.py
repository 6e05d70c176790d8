"""The debugger served to browsers (``cwmtui serve``): textual-serve's web server, which runs
the command line it is given once per browser tab (a new debugger, its own program run and
model) and relays its terminal to the page, with what keeps it to the people it is meant for:

- the command line is made of quoted words (textual-serve hands it to a shell: a file name
  with a ``;`` in it is a file name);
- only who has the URL it printed can open a debugger: the URL carries a random token (as
  Jupyter's does), the page and its websocket are refused without it, so neither a page of
  another web site (browsers let any page open 127.0.0.1, in a frame or a pop-up, and a
  rebound domain name reaches 0.0.0.0) nor another user of the machine can start one;
- a websocket whose Origin is not this server's is refused, on a loopback address a request
  must name the loopback host, and the page may not be framed by another;
- textual-serve's debug mode (Textual's devtools) is never switched on, and the page's title
  is the program's name, not the command line (which may hold an API key);
- the page's links follow the address the browser used, so a server bound to 0.0.0.0 works
  from another machine;
- the page asks nothing of another site (textual-serve's template links Google's fonts: the
  same font is served from its own static files instead, so a room without a network, or one
  that drops the request silently, shows the page at once);
- the terminal size a tab asks for (its websocket's query, its resize messages) is kept to
  what a screen can show (``MAX_COLUMNS`` × ``MAX_ROWS``): a visitor cannot make the server's
  debugger draw a screen of millions of cells.

Needs the ``serve`` extra (``pip install 'cwmtui[serve]'``): textual-serve and aiohttp.
"""

from __future__ import annotations

import html
import ipaddress
import logging
import re
import secrets
import socket
from typing import Callable
from urllib.parse import urlsplit

import aiohttp_jinja2
from aiohttp import web
from textual_serve.server import Server, to_int

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
#: the largest terminal a tab may ask for, in cells (a 4K screen at an 8-pixel font is ~480 × 135)
MAX_COLUMNS, MAX_ROWS = 1000, 400
#: textual-serve's page links Google's fonts; the same font is among its static files
REMOTE_FONT = re.compile(r'<link[^>]*href="https://fonts\.googleapis\.com/[^"]*"[^>]*>\s*')
LOCAL_FONT = """<style>
      @font-face { font-family: "Roboto Mono"; font-style: normal;
                   src: url("{static}fonts/RobotoMono-VariableFont_wght.ttf") format("truetype"); }
      @font-face { font-family: "Roboto Mono"; font-style: italic;
                   src: url("{static}fonts/RobotoMono-Italic-VariableFont_wght.ttf") format("truetype"); }
    </style>
"""


def cells(value: object, default: int, most: int) -> int:
    """A terminal dimension a browser asked for, as a number of cells from 1 to ``most``."""
    try:
        number = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        number = default
    return min(max(number, 1), most)


def terminal_size(width: object, height: object) -> tuple[int, int]:
    """The size a tab's terminal is given for the one it asked for."""
    return cells(width, 80, MAX_COLUMNS), cells(height, 24, MAX_ROWS)


def local_fonts(page: str, static: str) -> str:
    """The page without its link to Google's fonts, with the same font from ``static`` (the
    address the browser used: escaped, as the template escapes it)."""
    block = LOCAL_FONT.replace("{static}", html.escape(static, quote=True))
    return REMOTE_FONT.sub(lambda _match: block, page, count=1)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reached from this machine only (a name counts when every address it
    has is a loopback one)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    addresses = {info[4][0].split("%")[0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


def check_port(host: str, port: int) -> None:
    """Raise OSError (with its errno) if ``host:port`` cannot be listened on, before the server
    sets up its loop and signal handlers (bound as aiohttp binds it: reusing a closed one's)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)


def url_of(host: str, port: int) -> str:
    if ":" in host and not host.startswith("["):  # an IPv6 address
        host = f"[{host}]"
    return f"http://{host}:{port}"


class DebuggerServer(Server):
    """textual-serve's server with the checks above; ``announce`` prints its lines once it
    listens."""

    def __init__(self, command: str, *, host: str, port: int, title: str,
                 announce: Callable[[], None] = lambda: None) -> None:
        super().__init__(command, host=host, port=port, title=title)
        self.token = secrets.token_urlsafe(18)  # in the printed URL: who has it may open a tab
        self.cookie = f"cwmtui-serve-{port}"  # the page's websocket shows it as a same-site cookie
        self.loopback = is_loopback(host)
        self.announce = announce
        bound = urlsplit(url_of(host, port)).netloc.lower()
        self.loopback_hosts = {bound, *(f"{name}:{port}" for name in LOOPBACK_NAMES)}
        if port == 80:
            self.loopback_hosts |= set(LOOPBACK_NAMES)

    def serve(self, debug: bool = False) -> None:
        super().serve(debug=False)  # devtools would let whoever reaches them into the app

    def initialize_logging(self) -> None:
        super().initialize_logging()
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)  # not a line per request

    async def on_startup(self, app: web.Application) -> None:
        self.announce()

    def refusal(self, request: web.Request) -> str | None:
        """Why a request is refused (None: it is not)."""
        given = request.query.get("token") or request.cookies.get(self.cookie) or ""
        if not secrets.compare_digest(given, self.token):
            return "open the URL cwmtui serve printed: it carries the token that lets a browser in"
        host = (request.host or "").lower()
        if self.loopback and host not in self.loopback_hosts:
            return f"this server answers at {sorted(self.loopback_hosts)[0]} only"
        origin = request.headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc.lower() != host:
            return "a page of another site cannot open the debugger"
        return None

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        why = self.refusal(request)
        if why:
            raise web.HTTPForbidden(text=why)
        base = f"{request.scheme}://{request.host}"
        websocket = ("wss" if request.scheme == "https" else "ws") + base[len(request.scheme):] + "/ws"
        context = {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": websocket,
            "config": {"static": {"url": f"{base}/static/"}},
            "application": {"name": self.title},
        }
        page = aiohttp_jinja2.render_template("app_index.html", request, context)
        page.text = local_fonts(page.text, context["config"]["static"]["url"])
        page.headers["X-Frame-Options"] = "DENY"  # no page of another site frames it (clickjacking)
        page.headers["Content-Security-Policy"] = "frame-ancestors 'none'"
        page.headers["Referrer-Policy"] = "no-referrer"  # the token stays off other sites' logs
        # the page's websocket (whose URL textual-serve's script makes) carries the token as a
        # cookie that no other site's page sends
        page.set_cookie(self.cookie, self.token, httponly=True, samesite="Strict", path="/")
        return page

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
        why = self.refusal(request)
        if why:
            raise web.HTTPForbidden(text=why)
        width, height = terminal_size(request.query.get("width", "80"), request.query.get("height", "24"))
        query = {**request.query, "width": str(width), "height": str(height)}
        return await super().handle_websocket(request.clone(rel_url=request.rel_url.with_query(query)))

    async def _process_messages(self, websocket, app_service) -> None:
        """textual-serve's relay of a tab's messages, with each resize kept to a screen's size."""
        resize = app_service.set_terminal_size

        async def set_terminal_size(width: object, height: object) -> None:
            await resize(*terminal_size(width, height))

        app_service.set_terminal_size = set_terminal_size
        await super()._process_messages(websocket, app_service)
