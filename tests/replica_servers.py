"""Loopback vLLM-shaped servers for replica tests and benchmarks: a "model" that knows a whole
suite, writes one token at a time for all its requests together (a GPU's throughput, not a
thread per request), and can be killed in the middle of an answer.

Used by tests/test_replicas.py and bench/eval_scale.py.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import replace
from pathlib import Path

from .test_model_server import EOS, EOT, FakeServer, script_of

#: a generated suite: loops of a few lengths and bodies (ids p00, p01 ...)
LOOP = """def f(n):  # << START_OF_TRACE
    total = {start}
    for i in range(n):
        total = total {op} i
    return total
"""


def write_suite(path: Path, count: int, length: int = 3) -> Path:
    """A JSONL suite of ``count`` small loop programs (each about ``length`` iterations)."""
    lines = []
    for number in range(count):
        source = LOOP.format(start=number % 7, op="+-*"[number % 3])
        lines.append({"id": f"p{number:02d}", "program": source, "call": f"f({length + number % 3})"})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def suite_scripts(cases, interpreter, wrong_every: int = 0) -> list[list[int]]:
    """The token script of each case: its true trace, rendered as a model writes it. With
    ``wrong_every`` = k, every k-th program's "model" gets its return value wrong (so runs have
    failures to agree on, not only successes)."""
    scripts = []
    for number, case in enumerate(cases):
        frames = interpreter.trace(case.program).frames
        if wrong_every and number % wrong_every == 0:
            frames = frames[:-1] + [replace(frames[-1], arg="'wrong'")]
        scripts.append(script_of(case.program, frames))
    return scripts


class SuiteServer(FakeServer):
    """A vLLM-shaped server whose model continues any prompt that is a prefix of one of
    ``scripts``. ``token_seconds``: the time each token takes, one token at a time for all its
    requests together. ``die_after``: the server kills itself once it has begun that many
    completions (in the middle of the last one's answer when tokens take time)."""

    def __init__(self, scripts, token_seconds: float = 0.0, die_after: int | None = None) -> None:
        super().__init__("vllm")
        self.scripts = [list(s) for s in scripts]
        self.token_seconds = token_seconds
        self.die_after = die_after
        self.gpu = threading.Lock()
        self.count_lock = threading.Lock()
        self.completions = 0  # completions begun
        self.served: list[int] = []  # the script (program) of each completion begun
        self.dead = threading.Event()
        self._connections: list[socket.socket] = []
        httpd = self.httpd
        accept = httpd.process_request

        def process_request(request, address):
            if self.dead.is_set():
                httpd.shutdown_request(request)  # as a killed process would: nothing answers
                return
            # as uvicorn does: a small write goes out at once (Nagle's wait on the client's
            # delayed ACK would cost 40 ms a request)
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.count_lock:
                self._connections.append(request)
            accept(request, address)

        httpd.process_request = process_request  # type: ignore[method-assign]
        httpd.handle_error = lambda request, address: None  # type: ignore[method-assign]

    def continuation(self, prompt, stops, max_tokens):
        with self.count_lock:
            self.completions += 1
            begun = self.completions
        found = [number for number, s in enumerate(self.scripts) if s[: len(prompt)] == prompt]
        assert found, "the prompt is no prefix of any program's script"
        self.served.append(found[0])
        if self.die_after is not None and begun >= self.die_after and not self.dead.is_set():
            threading.Thread(target=self.kill, daemon=True).start()
        script = self.scripts[found[0]]
        out: list[int] = []
        for token in script[len(prompt) : len(prompt) + max_tokens]:
            out.append(token)
            if token in stops or token in (EOS, EOT):
                break
        return out

    def _token(self) -> None:
        if self.token_seconds:
            with self.gpu:
                time.sleep(self.token_seconds)

    def events(self, payload):
        for event in super().events(payload):
            if event.get("choices") and event["choices"][0].get("token_ids"):
                self._token()
            if self.dead.is_set():  # killed: the answer stops here, without its [DONE]
                raise ConnectionResetError
            yield event

    def answer(self, method, path, payload):
        code, data = super().answer(method, path, payload)
        if path == "/v1/completions" and code == 200:
            for _ in data["choices"][0].get("token_ids") or ():
                self._token()
        return code, data

    def kill(self) -> None:
        """Stop as a killed process does: every connection cut (answers in the middle
        included), nothing listening any more."""
        self.dead.set()
        with self.count_lock:
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.close()


def serve(argv: list[str] | None = None) -> int:
    """``python -m tests.replica_servers SUITE.jsonl [--token-seconds S]``: one SuiteServer in a
    process of its own (a benchmark's client then has its interpreter lock to itself); prints
    its URL on one line and serves until its standard input closes."""
    import argparse
    import sys

    from cwmtui.evaluation.suite import load_suite
    from cwmtui.interpreter import Interpreter

    parser = argparse.ArgumentParser(description=serve.__doc__.splitlines()[0] if serve.__doc__ else None)
    parser.add_argument("suite")
    parser.add_argument("--token-seconds", type=float, default=0.0)
    parser.add_argument("--wrong-every", type=int, default=0)
    args = parser.parse_args(argv)
    suite = load_suite(args.suite)
    with Interpreter() as interpreter:
        scripts = suite_scripts(suite.cases, interpreter, args.wrong_every)
    server = SuiteServer(scripts, args.token_seconds)
    print(server.url, flush=True)
    sys.stdin.read()
    server.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(serve())
