"""The server backend against real HTTP servers on 127.0.0.1 that speak the vLLM and fgserve
wire formats with scripted token ids: whole rollouts, errors, timeouts, dropped connections."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cwmtui.interpreter import program_from_source
from cwmtui.model import ModelError, Rollout, RolloutStatus, open_backend
from cwmtui.model.byte_tokenizer import build_byte_tokenizer
from cwmtui.model.server import ServerBackend
from cwmtui.trace import tokens
from cwmtui.trace.render import frames_segments, prompt_segments

SOURCE = "def f(n):  # << START_OF_TRACE\n    s = n * 2\n    return s\n"
TOKENIZER = build_byte_tokenizer()
FRAME_SEP = TOKENIZER.convert_tokens_to_ids(tokens.FRAME_SEP)
EOS = TOKENIZER.eos_token_id
EOT = 300  # the fake server's <|eot_id|>, one of its model's end-of-text ids (as in CWM's generation config)


def text_of(ids) -> str:
    return TOKENIZER.decode([t for t in ids if t != EOT]) + ("<|eot_id|>" if EOT in ids else "")


class FakeServer:
    """A scripted model behind HTTP. ``script`` is the whole token sequence the "model" knows;
    it continues any prompt that is a prefix of it. ``actions`` (per path) override answers:
    ``("status", code, body)``, ``("drop",)``, ``("sleep", seconds)``."""

    def __init__(self, kind: str = "vllm", ids_in: str = "token_ids", include_stop: bool = False) -> None:
        self.kind = kind
        self.ids_in = ids_in
        self.include_stop = include_stop
        self.script: list[int] = []
        self.requests: list[tuple[str, dict | None]] = []
        self.headers: list[dict] = []
        self.actions: dict[str, list[tuple]] = {}
        self.cached_tokens: int | None = None
        self.streams = True  # False: ignore "stream" and answer at once, as some servers do
        self.token_delay = 0.0  # seconds before each streamed event
        self.streamed = 0  # events streamed
        self.hung_up = threading.Event()  # a client closed a stream before its end
        self.models = [{"id": "facebook/cwm", "object": "model", "owned_by": "vllm", "root": "facebook/cwm", "parent": None, "max_model_len": 131072}]
        self.api_key: str | None = None  # as vllm serve --api-key: every /v1 request needs it
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _body(self):
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length)) if length else None

            def _send(self, code: int, data) -> None:
                body = json.dumps(data).encode() if not isinstance(data, bytes) else data
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self, method: str) -> None:
                payload = self._body() if method == "POST" else None
                fake.requests.append((self.path, payload))
                fake.headers.append(dict(self.headers))
                if fake.api_key and self.path.startswith("/v1") and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
                    self._send(401, {"error": "Unauthorized"})
                    return
                queue = fake.actions.get(self.path)
                if queue:
                    action = queue.pop(0)
                    if action[0] == "status":
                        self._send(action[1], action[2])
                        return
                    if action[0] == "drop":
                        self.close_connection = True
                        self.request.shutdown(socket.SHUT_RDWR)
                        return
                    if action[0] == "sleep":
                        time.sleep(action[1])
                if self.path == "/v1/completions":
                    limit = fake.models[0].get("max_model_len") or 1 << 30
                    if len(payload["prompt"]) + payload["max_tokens"] > limit:  # as vLLM refuses it
                        message = f"This model's maximum context length is {limit} tokens. However, you requested {len(payload['prompt']) + payload['max_tokens']} tokens."
                        self._send(400, {"object": "error", "message": message, "type": "BadRequestError", "code": 400})
                        return
                if self.path == "/v1/completions" and payload.get("stream") and fake.streams:
                    self._stream(fake.events(payload))
                    return
                code, data = fake.answer(method, self.path, payload)
                self._send(code, data)

            def _stream(self, events) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    for event in events:
                        time.sleep(fake.token_delay)
                        self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                        self.wfile.flush()
                        fake.streamed += 1
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    fake.hung_up.set()

            def do_GET(self):
                self._handle("GET")

            def do_POST(self):
                self._handle("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def continuation(self, prompt: list[int], stops: set[int], max_tokens: int) -> list[int]:
        assert prompt == self.script[: len(prompt)], "the prompt is not a prefix of the script"
        out: list[int] = []
        for token in self.script[len(prompt) : len(prompt) + max_tokens]:
            out.append(token)
            if token in stops or token in (EOS, EOT):
                break
        return out

    def completion(self, payload) -> tuple[list[int], str, int | None, dict]:
        """vLLM's answer: the ids, finish_reason, stop_reason and usage."""
        out = self.continuation(payload["prompt"], set(payload["stop_token_ids"]), payload["max_tokens"])
        stop_reason = None
        finish = "length"
        if out and (out[-1] in payload["stop_token_ids"] or out[-1] in (EOS, EOT)):
            finish = "stop"
            if out[-1] not in (EOS, EOT):
                stop_reason = out[-1]
            if not self.include_stop:
                out = out[:-1]  # as vLLM does with special stop tokens
        usage = {"prompt_tokens": len(payload["prompt"]), "completion_tokens": len(out)}
        if self.cached_tokens is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        return out, finish, stop_reason, usage

    def ids(self, out: list[int]) -> dict:
        if self.ids_in == "token_ids":
            return {"token_ids": out}
        return {"logprobs": {"tokens": [f"token_id:{i}" for i in out], "token_logprobs": [0.0] * len(out)}}

    def events(self, payload):
        """A streamed answer as vLLM sends it: one event a token, the finish in the last one,
        then the usage (``stream_options.include_usage``) and ``[DONE]``."""
        out, finish, stop_reason, usage = self.completion(payload)
        for position, token in enumerate(out):
            last = position == len(out) - 1
            yield {"id": "cmpl-1", "object": "text_completion", "choices": [
                {"index": 0, "text": text_of([token]), "finish_reason": finish if last else None,
                 "stop_reason": stop_reason if last else None} | self.ids([token])]}
        if not out:
            yield {"id": "cmpl-1", "choices": [{"index": 0, "text": "", "finish_reason": finish, "stop_reason": stop_reason}]}
        if (payload.get("stream_options") or {}).get("include_usage"):
            yield {"id": "cmpl-1", "object": "text_completion", "choices": [], "usage": usage}

    def answer(self, method: str, path: str, payload):
        if self.kind == "vllm":
            if path == "/v1/models":
                return 200, {"object": "list", "data": self.models}
            if path == "/tokenize":  # vLLM parses special-token strings in the text
                if payload["prompt"] == "<|eot_id|>":
                    return 200, {"tokens": [EOT], "count": 1, "max_model_len": 131072}
                ids = TOKENIZER.encode(payload["prompt"], add_special_tokens=False)
                return 200, {"tokens": ids, "count": len(ids), "max_model_len": 131072}
            if path == "/detokenize":
                return 200, {"prompt": text_of(payload["tokens"])}
            if path == "/v1/completions":
                out, finish, stop_reason, usage = self.completion(payload)
                choice = {"index": 0, "text": text_of(out), "finish_reason": finish, "stop_reason": stop_reason} | self.ids(out)
                return 200, {"id": "cmpl-1", "object": "text_completion", "choices": [choice], "usage": usage}
        if self.kind == "fgserve" and path == "/completions" and payload.get("temperature") == 0.0:
            # fgserve samples: logits / 0 is NaN and torch.multinomial raises in its main loop
            return 500, b"<!doctype html><title>500 Internal Server Error</title>RuntimeError: probability tensor contains either inf, nan or element < 0"
        if self.kind == "fgserve" and path == "/completions":
            stop = TOKENIZER.convert_tokens_to_ids(payload["stop"]) if payload.get("stop") else None
            out = self.continuation(payload["prompt"], {stop} if stop is not None else set(), payload["max_tokens"])
            out = out + self.script[len(payload["prompt"]) + len(out) :][:2]  # fgserve's text match stops late
            return 200, {"id": "x", "object": "text_completion", "choices": [{"index": 0, "text": "", "tokens": out, "logprobs": None, "finish_reason": "length"}]}
        return 404, {"detail": "Not Found"}


@pytest.fixture
def program():
    return program_from_source(SOURCE, "<f>", call="f(4)")


@pytest.fixture(scope="module")
def truth(interpreter):
    trace = interpreter.trace(program_from_source(SOURCE, "<f>", call="f(4)"))
    assert trace.status.ok
    return trace


def script_of(program, frames) -> list[int]:
    ids = []
    for segment in prompt_segments(program.source) + frames_segments(frames, end=True):
        if segment in tokens.SPECIAL_TOKENS:
            ids.append(TOKENIZER.convert_tokens_to_ids(segment))
        else:
            ids += TOKENIZER.encode(segment, add_special_tokens=False, split_special_tokens=True)
    return ids


@pytest.fixture
def vllm():
    server = FakeServer("vllm")
    yield server
    server.close()


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("tokenizer")
    TOKENIZER.save_pretrained(path)
    return str(path)


def quick(url: str, **kwargs) -> ServerBackend:
    return ServerBackend(url, timeout=kwargs.pop("timeout", 2.0), retries=kwargs.pop("retries", 2), backoff=0.01, **kwargs)


# -- vLLM ------------------------------------------------------------------------------------


def test_a_rollout_over_vllm_reproduces_the_model_frames(vllm, program, truth):
    vllm.script = script_of(program, truth.frames)
    with quick(vllm.url) as backend:
        assert backend.special_ids[tokens.FRAME_SEP] == FRAME_SEP  # looked up through /tokenize
        assert backend.name == f"vllm {vllm.url} (facebook/cwm)"
        rollout = Rollout(backend, program, truth.frames[0])
        assert rollout.run() is RolloutStatus.ENDED
    assert rollout.frames == truth.frames
    completions = [p for path, p in vllm.requests if path == "/v1/completions"]
    assert len(completions) == len(truth.frames)
    first = completions[0]
    assert first["prompt"] == rollout.ids[: len(first["prompt"])] and all(isinstance(i, int) for i in first["prompt"])
    assert first["stop_token_ids"] == [FRAME_SEP] and first["skip_special_tokens"] is False
    assert first["return_token_ids"] is True
    assert "logprobs" not in first and "return_tokens_as_token_ids" not in first  # only ids are used: no logprobs asked
    assert first["model"] == "facebook/cwm" and first["temperature"] == 0.0


def test_ids_from_logprobs_tokens_and_a_stop_token_left_in(program, truth):
    server = FakeServer("vllm", ids_in="logprobs", include_stop=True)
    try:
        server.script = script_of(program, truth.frames)
        with quick(server.url) as backend:
            rollout = Rollout(backend, program, truth.frames[0])
            rollout.run()
        assert rollout.frames == truth.frames and rollout.status is RolloutStatus.ENDED
    finally:
        server.close()


@pytest.mark.parametrize("ids_in, include_stop", [("token_ids", False), ("logprobs", True)])
def test_a_cancellable_rollout_streams_and_reproduces_the_model_frames(program, truth, ids_in, include_stop):
    server = FakeServer("vllm", ids_in=ids_in, include_stop=include_stop)
    try:
        server.script = script_of(program, truth.frames)
        server.cached_tokens = 5
        with quick(server.url) as backend:
            rollout = Rollout(backend, program, truth.frames[0])
            assert rollout.run(cancel=threading.Event()) is RolloutStatus.ENDED
            assert backend.complete(server.script[:40], [FRAME_SEP], 10, cancel=threading.Event()).processed == 35
        assert rollout.frames == truth.frames
        completions = [p for path, p in server.requests if path == "/v1/completions"]
        assert all(p["stream"] is True and p["stream_options"] == {"include_usage": True} for p in completions)
    finally:
        server.close()


def test_a_server_that_ignores_stream_still_serves_a_cancellable_rollout(vllm, program, truth):
    vllm.script = script_of(program, truth.frames)
    vllm.streams = False
    with quick(vllm.url) as backend:
        rollout = Rollout(backend, program, truth.frames[0])
        assert rollout.run(cancel=threading.Event()) is RolloutStatus.ENDED
    assert rollout.frames == truth.frames


def test_a_cancel_stops_a_streamed_frame_midway_and_the_rollout_resumes(vllm, program, truth):
    # a 32B model writes a long frame for seconds: the user's cancel must not wait for its end
    vllm.script = script_of(program, truth.frames)
    vllm.token_delay = 0.05
    cancel = threading.Event()
    with quick(vllm.url) as backend:
        rollout = Rollout(backend, program, truth.frames[0])
        threading.Timer(0.3, cancel.set).start()
        assert rollout.step(cancel=cancel) is None
        assert rollout.status is RolloutStatus.CANCELLED and rollout.frames == truth.frames[:1]
        assert vllm.hung_up.wait(5)  # the connection was closed: vLLM aborts the request
        frame_tokens = vllm.script.index(FRAME_SEP, len(rollout.ids) + 1) - len(rollout.ids)
        assert vllm.streamed < frame_tokens
        vllm.token_delay = 0.0
        assert rollout.run(cancel=threading.Event()) is RolloutStatus.ENDED
    assert rollout.frames == truth.frames


def test_a_streamed_request_is_retried_and_a_failure_midway_is_one_line(vllm, program, truth):
    vllm.script = script_of(program, truth.frames)
    with quick(vllm.url) as backend:
        vllm.actions["/v1/completions"] = [("status", 503, {"error": {"message": "overloaded"}})]
        assert backend.complete(vllm.script[:30], [FRAME_SEP], 5, cancel=threading.Event()).ids == vllm.script[30:35]
        vllm.events = lambda payload: iter([{"object": "error", "error": {"message": "CUDA out of memory\nmore"}}])
        with pytest.raises(ModelError) as caught:
            backend.complete(vllm.script[:30], [FRAME_SEP], 5, cancel=threading.Event())
    message = str(caught.value)
    assert "failed in the middle of the answer: CUDA out of memory" in message and "\n" not in message


def test_a_forced_action_over_vllm_stops_at_action_sep(vllm, program, truth):
    vllm.script = script_of(program, truth.frames)
    with quick(vllm.url) as backend:
        rollout = Rollout(backend, program, truth.frames[0])
        frame = rollout.step(force_action=truth.frames[1].action)
    assert frame == truth.frames[1]
    completions = [p for path, p in vllm.requests if path == "/v1/completions"]
    assert completions[0]["stop_token_ids"] == [backend.special_ids[tokens.ACTION_SEP], FRAME_SEP]


def test_processed_tokens_come_from_the_server_prefix_cache_report(vllm, program, truth):
    vllm.script = script_of(program, truth.frames)
    vllm.cached_tokens = 5
    with quick(vllm.url) as backend:
        prompt = vllm.script[:40]
        completion = backend.complete(prompt, [FRAME_SEP], 10)
    assert completion.processed == 35


def test_remote_tokenizer_keeps_a_literal_special_token_as_text(vllm):
    with quick(vllm.url) as backend:
        ids = backend.encode("s = '<|frame_sep|>'")
        assert FRAME_SEP not in ids
        assert backend.decode(ids) == "s = '<|frame_sep|>'"


def test_an_error_answer_is_one_line_and_not_retried(vllm):
    with quick(vllm.url) as backend:
        vllm.actions["/v1/completions"] = [("status", 400, {"object": "error", "message": "This model's maximum context length is 131072 tokens.\nmore", "code": 400})]
        with pytest.raises(ModelError) as caught:
            backend.complete([1, 2, 3], [FRAME_SEP], 5)
    message = str(caught.value)
    assert "HTTP 400" in message and "maximum context length" in message and "\n" not in message
    assert [p for p, _ in vllm.requests].count("/v1/completions") == 1


def test_server_errors_are_retried_a_bounded_number_of_times(vllm, program, truth):
    vllm.script = script_of(program, truth.frames)
    with quick(vllm.url) as backend:
        vllm.actions["/v1/completions"] = [("status", 503, {"error": {"message": "overloaded"}})]
        assert backend.complete(vllm.script[:30], [FRAME_SEP], 5).ids == vllm.script[30:35]
        vllm.actions["/v1/completions"] = [("status", 500, b"boom")] * 3
        with pytest.raises(ModelError, match=r"HTTP 500: boom; gave up after 3 tries"):
            backend.complete(vllm.script[:30], [FRAME_SEP], 5)


def test_a_timeout_says_so(vllm):
    with quick(vllm.url, timeout=0.3, retries=1) as backend:
        vllm.actions["/v1/completions"] = [("sleep", 1.0), ("sleep", 1.0)]
        started = time.monotonic()
        with pytest.raises(ModelError, match=r"timed out: no whole answer within 0.3 s \(--server-timeout\)$"):
            backend.complete([1, 2, 3], [FRAME_SEP], 5)
        assert time.monotonic() - started < 0.6  # the deadline holds for the whole call, retries included


def test_a_dropped_connection_is_retried(vllm, program, truth):
    vllm.script = script_of(program, truth.frames)
    with quick(vllm.url) as backend:
        vllm.actions["/v1/completions"] = [("drop",)]
        assert backend.complete(vllm.script[:30], [FRAME_SEP], 5).ids == vllm.script[30:35]
        vllm.actions["/v1/completions"] = [("drop",)] * 3
        with pytest.raises(ModelError, match="dropped the connection"):
            backend.complete(vllm.script[:30], [FRAME_SEP], 5)
    assert [p for p, _ in vllm.requests].count("/v1/completions") == 5


def test_an_unreachable_server_is_one_clear_line():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ModelError) as caught:
        quick(f"http://127.0.0.1:{port}", retries=0)
    assert str(caught.value) == f"http://127.0.0.1:{port}/v1/models: unreachable (is the server running? is the URL right?)"


def test_not_a_url():
    with pytest.raises(ModelError, match="not an http"):
        ServerBackend("localhost:8000")


def test_a_server_without_models_is_not_mistaken_for_vllm():
    server = FakeServer("fgserve")
    try:
        with pytest.raises(ModelError, match="HTTP 404"):
            quick(server.url)
    finally:
        server.close()


# -- fgserve ---------------------------------------------------------------------------------


def test_a_rollout_over_fgserve(program, truth, tokenizer_dir):
    server = FakeServer("fgserve")
    try:
        server.script = script_of(program, truth.frames)
        with open_backend(server=server.url, server_kind="fgserve", tokenizer=tokenizer_dir) as backend:
            rollout = Rollout(backend, program, truth.frames[0])
            assert rollout.run() is RolloutStatus.ENDED
        assert rollout.frames == truth.frames
        payload = [p for path, p in server.requests if path == "/completions"][0]
        assert payload["stop"] == tokens.FRAME_SEP and isinstance(payload["prompt"], list)
        # fgserve has no per-request greedy and dies on temperature 0 (the fake does as it does)
        assert 0.0 < payload["temperature"] <= 1e-6 and payload["top_p"] == 1.0 and payload["n"] == 1
    finally:
        server.close()


def test_fgserve_needs_a_tokenizer():
    server = FakeServer("fgserve")
    try:
        with pytest.raises(ModelError, match="fgserve has no tokenize endpoint: pass --tokenizer PATH"):
            quick(server.url, kind="fgserve")
    finally:
        server.close()


# -- real vLLM deployments -------------------------------------------------------------------


def test_the_api_key_is_sent_from_the_option_or_the_environment(vllm, program, truth, monkeypatch):
    vllm.api_key = "s3cret"
    vllm.script = script_of(program, truth.frames)
    with quick(vllm.url, api_key="s3cret") as backend:
        assert Rollout(backend, program, truth.frames[0]).run() is RolloutStatus.ENDED
    assert all(h.get("Authorization") == "Bearer s3cret" for h in vllm.headers)
    monkeypatch.setenv("VLLM_API_KEY", "s3cret")
    with open_backend(server=vllm.url) as backend:
        assert backend.model_name == "facebook/cwm"


def test_a_server_that_wants_a_key_says_so_in_one_line(vllm, monkeypatch):
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-another-service")  # never sent to a --server
    vllm.api_key = "s3cret"
    with pytest.raises(ModelError, match=r"wants an API key \(HTTP 401\): pass --api-key KEY or set VLLM_API_KEY$"):
        quick(vllm.url)
    assert all("Authorization" not in h for h in vllm.headers)
    with pytest.raises(ModelError, match=r"refused the API key \(HTTP 401\)"):
        quick(vllm.url, api_key="wrong")
    assert len(vllm.requests) == 2  # a refused key is not retried


def test_a_server_with_several_models_needs_served_model(vllm, program, truth):
    vllm.models = [
        {"id": "facebook/cwm", "object": "model", "parent": None, "max_model_len": 131072},
        {"id": "cwm-lora-traces", "object": "model", "parent": "facebook/cwm", "max_model_len": 131072},
    ]
    with pytest.raises(ModelError, match=r"serves 2 models \(facebook/cwm, cwm-lora-traces\): pick one with --served-model NAME"):
        quick(vllm.url)
    with pytest.raises(ModelError, match=r"--served-model nope: the server serves facebook/cwm, cwm-lora-traces"):
        quick(vllm.url, served_model="nope")
    vllm.script = script_of(program, truth.frames)
    with open_backend(server=vllm.url, served_model="cwm-lora-traces") as backend:
        assert backend.name.endswith("(cwm-lora-traces)")
        assert Rollout(backend, program, truth.frames[0]).run() is RolloutStatus.ENDED
    assert {p["model"] for path, p in vllm.requests if path in ("/v1/completions", "/tokenize")} == {"cwm-lora-traces"}


def test_served_model_and_api_key_need_a_server():
    with pytest.raises(ModelError, match="--served-model is for --server URL"):
        open_backend(served_model="x")


def test_the_servers_context_length_ends_a_long_trace_as_context_full(vllm, program, truth):
    vllm.script = script_of(program, truth.frames)
    prompt = len(script_of(program, [])) - 1  # the script holds the end of text after no frame
    vllm.models[0]["max_model_len"] = prompt + 30  # room for about two frames
    with quick(vllm.url) as backend:
        assert backend.context_length == prompt + 30
        rollout = Rollout(backend, program, truth.frames[0])
        assert rollout.run() is RolloutStatus.CONTEXT  # not an HTTP 400
    assert "context of" in rollout.message and "is full" in rollout.message
    assert all(len(p["prompt"]) + p["max_tokens"] <= prompt + 30 for path, p in vllm.requests if path == "/v1/completions")


@pytest.mark.parametrize("stream", [False, True])
def test_an_eot_stop_is_kept_as_the_model_wrote_it(vllm, program, truth, stream):
    """CWM's generation config ends a turn on <|eot_id|> as well as <|end_of_text|>; vLLM stops
    there with no stop_reason. The model wrote <|eot_id|>: no <|end_of_text|> is added."""
    vllm.include_stop = True  # vLLM keeps an end token in token_ids
    vllm.script = script_of(program, truth.frames)[:-1] + [EOT]
    cancel = threading.Event() if stream else None
    with quick(vllm.url) as backend:
        rollout = Rollout(backend, program, truth.frames[0])
        assert rollout.run(cancel=cancel) is RolloutStatus.ENDED
        last = backend.complete(vllm.script[:-1], [FRAME_SEP], 16, cancel=cancel)
    assert rollout.frames == truth.frames
    assert last.ids == [EOT] and last.stopped == "eos"


@pytest.mark.parametrize("key", ["abc\r", " abc\n"])
def test_a_key_with_a_line_end_is_sent_without_it(vllm, key):
    vllm.api_key = "abc"
    with quick(vllm.url, api_key=key) as backend:
        assert backend.model_name == "facebook/cwm"


@pytest.mark.parametrize("key", ["clé-secrète", "ab\x00cd"])
def test_a_key_no_header_can_carry_is_one_line_that_does_not_repeat_it(vllm, key):
    with pytest.raises(ModelError) as caught:
        quick(vllm.url, api_key=key)
    assert "cannot carry" in str(caught.value) and key not in str(caught.value)


def test_fgserve_takes_no_key_and_none_is_sent_to_it(monkeypatch, tokenizer_dir):
    server = FakeServer("fgserve")
    monkeypatch.setenv("VLLM_API_KEY", "s3cret")
    try:
        with pytest.raises(ModelError, match="--api-key is for a vLLM server; fgserve takes no key"):
            quick(server.url, kind="fgserve", tokenizer=tokenizer_dir, api_key="k")
        server.script = [1, 2, 3, FRAME_SEP]
        with quick(server.url, kind="fgserve", tokenizer=tokenizer_dir) as backend:
            assert backend.complete([1, 2, 3], [FRAME_SEP], 1).ids == [FRAME_SEP]
    finally:
        server.close()
    assert all("Authorization" not in h for h in server.headers)


def test_credentials_in_the_url_are_sent_as_basic_auth_and_shown_nowhere(vllm):
    url = vllm.url.replace("http://", "http://ann:pa%40ss@")
    with quick(url) as backend:
        assert "pa%40ss" not in backend.name + backend.description + backend.url
        assert backend.url == vllm.url
    import base64

    assert vllm.headers[0]["Authorization"] == "Basic " + base64.b64encode(b"ann:pa@ss").decode()
    vllm.close()
    with pytest.raises(ModelError) as caught:
        quick(url, retries=0)
    assert "pa%40ss" not in str(caught.value) and "ann" not in str(caught.value)


# -- a server that misbehaves: every call is bounded -----------------------------------------


class RawServer:
    """A TCP server on 127.0.0.1 that answers every connection with ``behave(socket)``."""

    def __init__(self, behave) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = threading.Event()
        self.behave = behave
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn) -> None:
        try:
            conn.recv(65536)
            self.behave(conn, self.stop)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


def never_answers(conn, stop) -> None:
    stop.wait(60)


def drips(conn, stop) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
    while not stop.wait(0.2):
        conn.sendall(b" ")  # one byte at a time: every read returns, the answer never ends


@pytest.mark.parametrize("behave", [never_answers, drips])
def test_a_server_that_never_finishes_an_answer_is_given_up_on_at_the_deadline(behave):
    server = RawServer(behave)
    try:
        began = time.monotonic()
        with pytest.raises(ModelError, match=r"timed out"):
            ServerBackend(server.url, timeout=1.5, retries=2, backoff=0.01)
        assert time.monotonic() - began < 4  # the deadline covers the retries too
    finally:
        server.close()


def test_an_answer_over_the_size_cap_is_refused_without_reading_it_all(monkeypatch):
    from cwmtui.model import server as server_module

    monkeypatch.setattr(server_module, "MAX_ANSWER_BYTES", 1 << 20)

    def huge(conn, stop) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n")
        chunk = b"x" * 65536
        for _ in range(16384):  # 1 GiB, if anyone read it
            if stop.is_set():
                return
            conn.sendall(chunk)

    server = RawServer(huge)
    try:
        with pytest.raises(ModelError, match=r"over 1 MiB; stopped reading it"):
            ServerBackend(server.url, timeout=10, retries=0)
    finally:
        server.close()


def test_an_endless_stream_is_cut_after_what_was_asked(vllm, program, truth):
    """A server that streams past max_tokens and never sends [DONE] is read no further."""
    endless = [{"choices": [{"index": 0, "text": "x", "token_ids": [TOKENIZER.encode("x", add_special_tokens=False)[0]]}]}] * 10_000
    vllm.script = script_of(program, truth.frames)
    vllm.events = lambda payload: iter(endless)
    with quick(vllm.url) as backend:
        prompt = vllm.script[:20]
        completion = backend.complete(prompt, [FRAME_SEP], 5, cancel=threading.Event())
    assert len(completion.ids) == 5 and completion.stopped == "length"
    assert vllm.hung_up.wait(5) and vllm.streamed < len(endless)  # the server was hung up on


def test_interrupt_ends_a_call_blocked_on_the_network_at_once():
    server = RawServer(never_answers)
    try:
        backend_ready = threading.Event()
        result: dict = {}

        from cwmtui.model.server import _Http

        http = _Http(server.url, timeout=60, retries=2, backoff=0.01)

        def call() -> None:
            backend_ready.set()
            try:
                http.get("/v1/models")
            except ModelError as exc:
                result["error"] = str(exc)

        worker = threading.Thread(target=call)
        worker.start()
        backend_ready.wait()
        time.sleep(0.3)
        began = time.monotonic()
        http.abort()
        worker.join(5)
        assert not worker.is_alive() and time.monotonic() - began < 2
        assert result["error"].endswith("cancelled")
    finally:
        server.close()


def test_quitting_the_debugger_never_waits_on_a_hung_server(tmp_path, tokenizer_dir):
    """The model's call hangs (a server that accepted the request and never answers): q ends
    the cwmtui process at once; the worker thread blocked on the network does not hold it."""
    import os

    from .test_hostile_programs import run_in_a_terminal

    program = tmp_path / "p.py"
    program.write_text(SOURCE + "\nf(4)\n")
    server = FakeServer("vllm")
    server.actions["/v1/completions"] = [("sleep", 60)] * 4
    pressed: list[float] = []

    def quit_now(pid: int) -> None:
        assert any(path == "/v1/completions" for path, _ in server.requests), "the debugger never called the server"
        time.sleep(0.3)
        pressed.append(time.monotonic())
        os.write(terminal[0], b"q")

    terminal: list[int] = []
    try:
        code, _ = run_in_a_terminal(
            [str(program), "--server", server.url, "--tokenizer", tokenizer_dir, "--no-sandbox"],
            until=lambda screen: any(path == "/v1/completions" for path, _ in server.requests),
            then=quit_now, terminal=terminal,
        )
        assert code == 0 and time.monotonic() - pressed[0] < 5
    finally:
        server.close()
