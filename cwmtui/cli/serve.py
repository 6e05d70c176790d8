"""``cwmtui serve PROGRAM [options]`` (and ``cwmtui serve --replay FILE [--id ID]``): the
debugger in a browser tab, through textual-serve (the ``serve`` extra).

Every option of ``cwmtui PROGRAM`` works, and is checked here before anything listens (bad input
is one line, exit 2); each browser tab then runs ``cwmtui`` with those options, as the terminal
would. The server listens on 127.0.0.1 unless ``--host`` says otherwise, and says plainly what
another address means: whoever reaches it runs the program, and the model, on this machine.
"""

from __future__ import annotations

import os
import shlex
import sys

from . import UsageError
from .app import build_parser as debugger_parser
from .app import prepare
from .options import Parser, limits_from

#: the options of serve itself, not passed on to the debugger each tab runs
SERVE_OPTIONS = ("--host", "--port")
DEFAULT_PORT = 8000


class ServeParser(Parser):
    """The debugger's parser, plus --host and --port; it keeps the words it parsed (the tabs'
    command line is made of them). No abbreviated options: each word is passed on as written."""

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        words = list(sys.argv[1:] if args is None else args)
        parsed = super().parse_args(words, namespace)
        parsed.words = words
        return parsed


def _port(value: str) -> int:
    import argparse

    if not value.isdigit() or not 1 <= int(value) <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number (1 to 65535): {value!r}")
    return int(value)


def build_parser() -> Parser:
    parser = ServeParser(prog="cwmtui serve", allow_abbrev=False,
                         description="Serve the trace debugger to a browser (textual-serve): every browser tab "
                                     "opens its own debugger on PROGRAM, with the options of 'cwmtui PROGRAM'.")
    debugger_parser(parser)
    group = parser.add_argument_group("serving")
    group.add_argument("--host", default="127.0.0.1",
                       help="the address to listen on (default 127.0.0.1: this machine only; any other lets "
                            "whoever reaches it run the program and the model here)")
    group.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"the port to listen on (default {DEFAULT_PORT})")
    return parser


def tab_words(words: list[str]) -> tuple[list[str], str | None]:
    """The debugger's words of a serve command line (serve's own options taken out), and the
    --api-key's value, taken out too (passed in the environment: not on a command line)."""
    out: list[str] = []
    api_key = None
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            out.extend(words[i:])
            break
        name, eq, value = word.partition("=")
        if name in (*SERVE_OPTIONS, "--api-key"):
            if not eq:
                i += 1
                value = words[i] if i < len(words) else ""
            if name == "--api-key":
                api_key = value
            i += 1
            continue
        out.append(word)
        i += 1
    return out, api_key


def non_loopback_warning(host: str, port: int, what: str) -> str:
    return (f"warning: --host {host} is not a loopback address: whoever reaches port {port} of this machine "
            f"can run programs on it: each browser tab that opens the page runs {what} and the model here, "
            "with your permissions (in the sandbox, where there is one). Serve on 127.0.0.1 (the default) "
            "to keep it to this machine.")


def run(args) -> int:
    from ..extras import require

    require("textual_serve.server", "serve", "cwmtui serve", UsageError)
    prepare(args)  # every check of `cwmtui PROGRAM`: bad input fails here, not in each tab
    from ..serving import DebuggerServer, check_port, is_loopback, url_of

    limits = limits_from(args)
    what = os.path.basename(args.program) if args.program else f"the programs of {os.path.basename(args.replay)}"
    loopback = is_loopback(args.host)
    if not loopback:
        from ..interpreter.runner import sandbox_warning

        if sandbox_warning(limits):  # no sandbox to be had, and none refused knowingly
            raise UsageError(f"--host {args.host}: the programs would run without a sandbox for whoever reaches it "
                             "(bubblewrap is missing or cannot make one here); install bubblewrap, or pass "
                             "--no-sandbox to serve them so knowingly")
    words, api_key = tab_words(args.words)
    if api_key is not None:
        os.environ["VLLM_API_KEY"] = api_key  # each tab's debugger reads it there (--api-key's default)
    package_home = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.basename(package_home) not in ("site-packages", "dist-packages"):  # a checkout: the tabs import it too
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (package_home, os.environ.get("PYTHONPATH", "")) if p)
    # each tab's debugger knows it is served (ui.app.SERVED_ENV: no export onto this machine)
    command = shlex.join(["env", "CWMTUI_SERVED=1", sys.executable, "-m", "cwmtui", *words])
    url = url_of(args.host, args.port)

    if not loopback:
        print(non_loopback_warning(args.host, args.port, what), file=sys.stderr, flush=True)

    def announce() -> None:
        print(f"cwmtui serve: the debugger on {what} at {url} (each browser tab runs its own; "
              "add &fontsize=24 for a projector; Ctrl+C stops)", flush=True)

    server = DebuggerServer(command, host=args.host, port=args.port, title=f"cwmtui · {what}", announce=announce)
    url = f"{url}/?token={server.token}"
    try:
        check_port(args.host, args.port)
        server.serve()
    except OSError as exc:
        why = os.strerror(exc.errno) if isinstance(exc.errno, int) and exc.errno > 0 else (exc.strerror or str(exc))
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {why[:1].lower()}{why[1:]} (--port and --host pick another)") from None
    return 0
