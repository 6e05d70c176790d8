"""The server backend: a model behind HTTP, prompted with token ids.

Two wire formats:

- ``vllm``: the OpenAI-compatible ``/v1/completions`` of ``vllm serve`` (the way CWM runs across
  several GPUs). The prompt is a list of ids; ``stop_token_ids`` stop a frame;
  ``skip_special_tokens=false``; the generated ids come back in ``choices[0].token_ids``
  (``return_token_ids``) or as ``"token_id:N"`` strings in ``logprobs.tokens``
  (``return_tokens_as_token_ids``). A stop id the server left out of the ids is put back from
  ``stop_reason``. The tokenizer is ``--tokenizer PATH`` or the server's ``/tokenize`` and
  ``/detokenize``. A call that can be cancelled (the debugger's, ``cwmtui eval``'s) streams the
  answer (``stream``, server-sent events) and closes the connection on a cancel, which makes
  vLLM abort the request: a cancel takes effect within a token, not at the end of the frame.
  A constrained rollout (``--constrain``) puts the frame grammar in the request, so the
  constraint runs where the logits are: Lark text (special tokens by name) in
  ``structured_outputs.grammar`` (vLLM 0.11 on) and in ``guided_grammar`` (0.10, removed in
  0.12; a server ignores the field it does not know). The server's ``guidance`` backend
  (llguidance) reads it; ``vllm serve --structured-outputs-config.backend guidance`` picks it.
- ``fgserve``: the ``/completions`` endpoint of Meta's fgserve (the protocol of the cwmdbg demo):
  prompt ids in, ``choices[0].tokens`` out, one ``stop`` string. Needs ``--tokenizer PATH``.
  It has no structured output, so no ``--constrain``.

Prefix reuse is the server's (vLLM's automatic prefix caching); ``processed`` is what the server
reports it did not serve from its cache, or the whole prompt when it does not say.
"""

from __future__ import annotations

import functools
import json
import os
import queue
import threading
import time
from typing import Sequence
from urllib.parse import unquote, urlsplit

from ..trace import tokens
from .backend import (FGSERVE_NO_GRAMMAR, Backend, Completion, ModelError, check_special_ids, is_cancelled,
                      nothing_to_complete)
from .tokenizer import load_any_tokenizer

_RETRY_STATUS = {408, 429, 500, 502, 503, 504}
#: the largest answer read from a server (a frame's answer is a few kilobytes)
MAX_ANSWER_BYTES = 16 << 20
#: the longest one read waits for a byte; the call's deadline is checked between reads
_READ_WAIT = 30.0
#: where the API key comes from when --api-key is not given (what ``vllm serve`` reads). Not
#: OPENAI_API_KEY: that secret belongs to another service and must not go to any --server.
API_KEY_VARIABLE = "VLLM_API_KEY"
#: fgserve samples unless it was started with gen_args.use_sampling=false, and divides the logits
#: by the request's temperature: 0 gives NaN and kills its generation loop. This temperature
#: makes its sampling pick the largest logit (the softmax is one-hot in float32), i.e. greedy
#: up to exact ties.
FGSERVE_GREEDY_TEMPERATURE = 1e-6
#: a model's own end-of-turn tokens, which vLLM stops on besides <|end_of_text|> (CWM's
#: generation config lists all three)
END_TOKENS = ("<|end_of_text|>", "<|eot_id|>", "<|eom_id|>")


class _Http:
    """JSON over HTTP with bounded retries and one-line errors, bounded in every way a server can
    misbehave: a whole-call deadline (``timeout``: retries, a server that never answers, one that
    drips a byte at a time), a cap on an answer's size, and :meth:`abort` from another thread
    (quitting never waits on the network)."""

    def __init__(self, base: str, timeout: float, retries: int, backoff: float, api_key: str | None = None) -> None:
        import httpx

        self._httpx = httpx
        # a user:password in the URL is sent as basic auth, and kept out of every message
        parts = urlsplit(base)
        auth = None
        if "@" in parts.netloc:
            userinfo, host = parts.netloc.rsplit("@", 1)
            user, _, password = userinfo.partition(":")
            auth = (unquote(user), unquote(password))
            base = parts._replace(netloc=host).geturl()
        self.base = base
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.api_key = api_key
        self._aborted = False
        # identity: the body is read raw (iter_raw), under the size cap, so it must not be gzipped
        headers = {"Accept-Encoding": "identity"} | ({"Authorization": f"Bearer {api_key}"} if api_key else {})
        # each read waits at most this long; the deadline is checked between reads
        wait = httpx.Timeout(min(timeout, _READ_WAIT), connect=min(timeout, 10.0))
        self.client = httpx.Client(timeout=wait, headers=headers, auth=auth)

    def post(self, path: str, payload: dict) -> dict:
        return self.request("POST", path, payload)

    def get(self, path: str) -> dict:
        return self.request("GET", path, None)

    def request(self, method: str, path: str, payload: dict | None) -> dict:
        url = self.base + path
        return self._with_retries(url, lambda deadline: self._once(method, url, payload, deadline))

    def stream(self, path: str, payload: dict, cancel, max_events: int) -> tuple[list[dict], bool]:
        """POST a streamed request: the JSON objects of the server-sent events, read until
        ``[DONE]`` or ``max_events`` (a server that goes on past what was asked is cut), and
        whether ``cancel`` stopped the reading first (the connection is then closed, which makes
        vLLM abort the request). Retried as :meth:`request` is."""
        url = self.base + path
        return self._with_retries(url, lambda deadline: self._once_streamed(url, payload, cancel, max_events, deadline))

    def abort(self) -> None:
        """From another thread: end every request in flight now and refuse new ones (for
        quitting: the calls return at once, their transfers are dropped)."""
        self._aborted = True

    def _with_retries(self, url: str, once):
        attempts = self.retries + 1
        deadline = time.monotonic() + self.timeout
        problem = ""
        tried = 0
        while tried < attempts:
            if tried:
                pause = self.backoff * (2 ** (tried - 1))
                if time.monotonic() + pause >= deadline:
                    break  # no time left for another try
                time.sleep(pause)
            tried += 1
            try:
                return once(deadline)
            except _Retry as exc:
                problem = str(exc)
            if self._aborted:
                break
        tries = f"; gave up after {tried} tries" if tried > 1 else ""
        if self._aborted:
            raise ModelError(f"{url}: cancelled")
        raise ServerUnavailable(f"{url}: {problem}{tries}")

    def _transfer(self, method: str, url: str, payload: dict | None, deadline: float, cancel=None):
        """The answer as it arrives: ``("head", status, content_type)``, then ``("data",
        chunk)`` items. The transfer runs in a thread of its own, so nothing here ever blocks
        on the network for long: the deadline, the size cap, ``cancel`` and :meth:`abort` are
        checked every few milliseconds, and a transfer given up on is simply dropped (its thread
        ends at its next read)."""
        if self._aborted:
            raise ModelError(f"{url}: cancelled")
        items: queue.Queue = queue.Queue(maxsize=256)
        stop = threading.Event()
        threading.Thread(target=self._pump, args=(method, url, payload, items, stop), daemon=True,
                         name="cwmtui-http").start()
        size = 0
        try:
            while True:
                try:
                    item = items.get(timeout=0.02)
                except queue.Empty:
                    item = None
                if self._aborted:
                    raise ModelError(f"{url}: cancelled")
                if cancel is not None and is_cancelled(cancel):
                    yield ("cancelled",)
                    return
                if time.monotonic() > deadline:
                    raise _Retry(f"timed out: no whole answer within {self.timeout:g} s (--server-timeout)")
                if item is None:
                    continue
                if item[0] == "end":
                    return
                if item[0] == "error":
                    raise self._failure(item[1])
                if item[0] == "data":
                    size += len(item[1])
                    if size > MAX_ANSWER_BYTES:
                        raise ModelError(f"{url}: the server's answer is over {MAX_ANSWER_BYTES >> 20} MiB; stopped reading it")
                yield item
        finally:
            stop.set()

    def _pump(self, method: str, url: str, payload, items: queue.Queue, stop: threading.Event) -> None:
        """The transfer's thread: the answer's head and chunks into ``items`` until ``stop``."""

        def put(item) -> bool:
            while not stop.is_set():
                try:
                    items.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        try:
            with self.client.stream(method, url, json=payload) as response:
                if not put(("head", response.status_code, response.headers.get("content-type", ""))):
                    return
                for chunk in response.iter_raw():
                    if not put(("data", chunk)):
                        return
            put(("end",))
        except Exception as exc:  # noqa: BLE001 - handed to the caller, which says it in one line
            put(("error", exc))

    def _failure(self, exc: Exception) -> Exception:
        """The transport's failure as :class:`_Retry` with a message for people."""
        httpx = self._httpx
        if isinstance(exc, httpx.TimeoutException):
            return _Retry(f"timed out: no answer within {min(self.timeout, _READ_WAIT):g} s")
        if isinstance(exc, httpx.ConnectError):
            return _Retry("unreachable (is the server running? is the URL right?)")
        if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
            return _Retry("the server dropped the connection")
        text = str(exc).replace(self.api_key, "***") if self.api_key else str(exc)
        return _Retry(f"request failed ({type(exc).__name__}: {text})")

    def _once(self, method: str, url: str, payload: dict | None, deadline: float) -> dict:
        status, body = 0, []
        for item in self._transfer(method, url, payload, deadline):
            if item[0] == "head":
                status = item[1]
            else:
                body.append(item[1])
        data = b"".join(body)
        _check_status(url, status, data, self.api_key)
        return _json_answer(url, data)

    def _once_streamed(self, url: str, payload: dict, cancel, max_events: int, deadline: float) -> tuple[list[dict], bool]:
        events: list[dict] = []
        status, kind, body, pending = 0, "", [], b""
        for item in self._transfer("POST", url, payload, deadline, cancel):
            if item[0] == "cancelled":
                return events, True
            if item[0] == "head":
                status, kind = item[1], item[2]
                continue
            if status >= 400 or "text/event-stream" not in kind:
                body.append(item[1])  # an error, or a server that ignores "stream": one answer
                continue
            pending += item[1]
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                line = raw.decode("utf-8", "replace").rstrip("\r")
                if not line.startswith("data:"):
                    continue  # a comment, an event name or the blank line between events
                data = line[5:].strip()
                if data == "[DONE]":
                    return events, False
                try:
                    event = _json_object(url, json.loads(data))
                except ValueError:
                    raise ModelError(f"{url}: a streamed event is not JSON: {data[:120]!r}") from None
                if "choices" not in event and event.get("error"):
                    raise ModelError(f"{url}: the server failed in the middle of the answer: {_error_message(event)}")
                events.append(event)
                if len(events) >= max_events:  # more than was asked for: the rest is not read
                    return events, False
        if status >= 400 or "text/event-stream" not in kind:
            data = b"".join(body)
            _check_status(url, status, data, self.api_key)
            return [_json_answer(url, data)], False
        # a stream always ends with [DONE]: without it the server went away in the middle (a
        # connection closed by a killed server reads as a clean end), and the tokens are not all
        raise _Retry("the server closed the connection before the end of its answer")

    def close(self) -> None:
        self.client.close()


def _names(ids: list[str]) -> str:
    shown = ", ".join(ids[:6])
    return shown + (f" and {len(ids) - 6} more" if len(ids) > 6 else "")


class _Retry(Exception):
    """A failure that another try may not meet; the message says what went wrong."""


class ServerUnavailable(ModelError):
    """The server could not serve a call, however often it was tried: unreachable, timed out,
    the connection dropped, or HTTP 408/429/5xx. Not the request's fault: another replica of the
    same model may serve it (:mod:`cwmtui.model.replicas`). A refusal of the request itself
    (a bad API key, a prompt over the context, an answer cwmtui cannot read) is a plain
    :class:`ModelError`."""


def _check_status(url: str, status: int, body: bytes, api_key: str | None = None) -> None:
    if status in (401, 403):
        if api_key:
            raise ModelError(f"{url}: the server refused the API key (HTTP {status}): check --api-key or ${API_KEY_VARIABLE}")
        raise ModelError(f"{url}: the server wants an API key (HTTP {status}): pass --api-key KEY or set {API_KEY_VARIABLE}")
    if status in _RETRY_STATUS:
        raise _Retry(f"the server answered HTTP {status}: {_error_text(body, status)}")
    if status >= 400:
        raise ModelError(f"{url}: the server refused the request (HTTP {status}): {_error_text(body, status)}")


def _json_answer(url: str, body: bytes) -> dict:
    try:
        data = json.loads(body)
    except ValueError:
        raise ModelError(f"{url}: the server's answer is not JSON: {body[:120].decode('utf-8', 'replace')!r}") from None
    return _json_object(url, data)


def _json_object(url: str, data) -> dict:
    if not isinstance(data, dict):
        raise ModelError(f"{url}: the server's answer is not a JSON object")
    return data


def _error_text(body: bytes, status: int) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        text = body.decode("utf-8", "replace").strip()
        return (text.splitlines()[0] if text else f"HTTP {status}")[:200]
    return _error_message(data)


def _error_message(data) -> str:
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"]).splitlines()[0][:200]
        for key in ("message", "detail", "error"):
            if data.get(key):
                return str(data[key]).splitlines()[0][:200]
    return str(data)[:200]


class RemoteTokenizer:
    """vLLM's ``/tokenize`` and ``/detokenize``. A literal special-token string inside text is
    split at its ``<|`` so the server cannot read it as the special token."""

    def __init__(self, http: _Http, model: str) -> None:
        self.http = http
        self.model = model
        found: dict[str, int | None] = {}
        # each tokenizer's own caches (a cache on the class would keep every instance alive)
        self._encode_cached = functools.lru_cache(maxsize=4096)(self._encode_uncached)
        self._decode_cached = functools.lru_cache(maxsize=4096)(self._decode_uncached)
        for token in tokens.SPECIAL_TOKENS:
            found[token] = self.find_special(token)
        self.special_ids = check_special_ids(found, f"{http.base}/tokenize")

    def find_special(self, token: str) -> int | None:
        """The id of a special token's string, when the server's tokenizer has it as one token."""
        ids = self._tokenize(token, special=True)
        return ids[0] if len(ids) == 1 else None

    def _tokenize(self, text: str, special: bool = False) -> list[int]:
        payload = {"model": self.model, "prompt": text, "add_special_tokens": False}
        data = self.http.post("/tokenize", payload)
        ids = data.get("tokens")
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            raise ModelError(f"{self.http.base}/tokenize: the answer has no token list")
        return ids

    def _encode_uncached(self, text: str) -> tuple[int, ...]:
        if "<|" not in text:
            return tuple(self._tokenize(text)) if text else ()
        head, *rest = text.split("<|")
        ids = list(self._tokenize(head)) if head else []
        for part in rest:
            ids += self._tokenize("<")
            ids += self._tokenize("|" + part)
        return tuple(ids)

    def encode(self, text: str) -> list[int]:
        return list(self._encode_cached(text))

    def _decode_uncached(self, ids: tuple[int, ...]) -> str:
        data = self.http.post("/detokenize", {"model": self.model, "tokens": list(ids)})
        text = data.get("prompt")
        if not isinstance(text, str):
            raise ModelError(f"{self.http.base}/detokenize: the answer has no text")
        return text

    def decode(self, ids: Sequence[int]) -> str:
        return self._decode_cached(tuple(ids)) if ids else ""


def check_api_key(key: str | None) -> str | None:
    """The key as sent (surrounding blanks dropped; an empty key is no key), or ModelError for
    one no HTTP header can carry. The message never repeats the key."""
    if key is None:
        return None
    key = key.strip()
    if not key:
        return None
    if not key.isascii() or not key.isprintable():
        raise ModelError("the API key holds characters an HTTP header cannot carry (non-ASCII or control characters): check --api-key or $VLLM_API_KEY")
    return key


def check_url(url: str) -> None:
    """ModelError unless ``url`` is an http(s) URL with a host (and a numeric port, if any)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a port that is no number (or out of range)
    except ValueError:  # also an unclosed IPv6 bracket
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise ModelError(f"--server {url!r}: not an http(s) URL, e.g. http://localhost:8000")


class ServerBackend(Backend):
    """A model behind an HTTP server (vLLM or fgserve), prompted with token ids."""

    def __init__(
        self,
        url: str,
        kind: str = "vllm",
        tokenizer=None,
        timeout: float = 300.0,
        retries: int = 2,
        backoff: float = 0.5,
        api_key: str | None = None,
        served_model: str | None = None,
    ) -> None:
        """``tokenizer``: ``--tokenizer PATH|cwm``, or one already loaded (replicas of one
        model share it); None: the server's ``/tokenize``. ``api_key``: sent as a bearer token
        to a vLLM server (default: $VLLM_API_KEY). ``served_model``: which of the server's
        models (or LoRA adapters) to prompt; needed when it serves several."""
        if kind not in ("vllm", "fgserve"):
            raise ModelError(f"--server-kind {kind!r}: choose vllm or fgserve")
        check_url(url)
        if served_model is not None and kind != "vllm":
            raise ModelError("--served-model picks one of a vLLM server's models; fgserve serves one")
        if api_key is not None and kind != "vllm":
            raise ModelError("--api-key is for a vLLM server; fgserve takes no key")
        base = url.rstrip("/")
        if kind == "vllm" and base.endswith("/v1"):
            base = base[:-3]
        self.kind = kind
        if kind == "vllm":
            api_key = check_api_key(api_key if api_key is not None else os.environ.get(API_KEY_VARIABLE))
        self.http = _Http(base, timeout, retries, backoff, api_key=api_key)
        base = self.url = self.http.base  # without a user:password, for names, records and messages
        self.model_name: str | None = None
        try:
            if kind == "vllm":
                self.model_name, self.context_length = self._served_model(served_model)
            if isinstance(tokenizer, str) and tokenizer:
                self._tokens = load_any_tokenizer(tokenizer)
            elif tokenizer is not None and not isinstance(tokenizer, str):
                self._tokens = tokenizer
            elif kind == "vllm":
                self._tokens = RemoteTokenizer(self.http, self.model_name or "")
            else:
                raise ModelError(
                    "fgserve has no tokenize endpoint: pass --tokenizer PATH (the checkpoint's "
                    "tokenizer.model, 'cwm', or a Hugging Face tokenizer directory)"
                )
            self.special_ids = self._tokens.special_ids
            self._eos_ids = {self.special_ids[tokens.END_OF_TEXT]} | self._end_ids()
        except ModelError:
            self.http.close()
            raise
        served = f" ({self.model_name})" if self.model_name else ""
        self.name = f"{kind} {base}{served}"
        self.description = f"{kind} server {base}{served}"
        if kind == "fgserve":
            self.description += " · greedy as temperature 1e-6"

    def _end_ids(self) -> set[int]:
        """The ids of the model's own end tokens its tokenizer has (vLLM stops on them)."""
        find = getattr(self._tokens, "find_special", None)
        if find is None:
            return set()
        return {i for i in (find(token) for token in END_TOKENS) if i is not None}

    def _served_model(self, wanted: str | None) -> tuple[str, int | None]:
        """The model to prompt (``wanted``, or the only one served) and its context length
        (vLLM's ``max_model_len``)."""
        data = self.http.get("/v1/models")
        models = data.get("data")
        if not isinstance(models, list):
            models = []
        listed = [m for m in models if isinstance(m, dict) and isinstance(m.get("id"), str)]
        if not listed:
            raise ModelError(f"{self.url}/v1/models: the server lists no model (is it an OpenAI-compatible server?)")
        ids = [m["id"] for m in listed]
        if wanted is not None:
            if wanted not in ids:
                raise ModelError(f"--served-model {wanted}: the server serves {_names(ids)}")
            chosen = listed[ids.index(wanted)]
        elif len(listed) == 1:
            chosen = listed[0]
        else:
            raise ModelError(f"{self.url} serves {len(ids)} models ({_names(ids)}): pick one with --served-model NAME")
        length = chosen.get("max_model_len")
        return chosen["id"], length if isinstance(length, int) and length > 0 else None

    def encode(self, text: str) -> list[int]:
        return self._tokens.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self._tokens.decode(ids)

    def complete(
        self,
        prompt_ids: Sequence[int],
        stop_ids,
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        cancel=None,
        constraint=None,
    ) -> Completion:
        trivial = nothing_to_complete(max_new_tokens, cancel)
        if trivial is not None:
            return trivial
        stops = list(dict.fromkeys(stop_ids))
        prompt = list(prompt_ids)
        cancelled = False
        if self.kind == "vllm":
            grammar = constraint.grammar.lark(constraint) if constraint is not None else None
            ids, processed, cancelled = self._vllm(prompt, stops, max_new_tokens, temperature, top_p, seed, cancel, grammar)
        elif constraint is not None:
            raise ModelError(FGSERVE_NO_GRAMMAR)
        else:
            ids, processed = self._fgserve(prompt, stops, max_new_tokens, temperature, top_p)
        ids = ids[:max_new_tokens]
        stopped = "cancelled" if cancelled else "length"
        ends = set(stops) | self._eos_ids
        for position, token in enumerate(ids):
            if token in ends:
                ids = ids[: position + 1]
                stopped = "eos" if token in self._eos_ids else "stop"
                break
        return Completion(ids, processed, stopped, max(len(ids) - 1, 0))

    def constraint_problem(self) -> str | None:
        return FGSERVE_NO_GRAMMAR if self.kind == "fgserve" else None

    # -- vLLM --------------------------------------------------------------------------------
    def _vllm(self, prompt, stops, max_new_tokens, temperature, top_p, seed, cancel, grammar=None):
        """The generated ids, the prompt tokens the server ran, and whether ``cancel`` cut the
        answer short. With a ``cancel`` the answer is streamed, so a cancel takes effect
        between tokens, not only between frames. ``grammar``: the frame grammar (Lark) the
        server decodes under."""
        payload = {
            "model": self.model_name,
            "prompt": prompt,
            "max_tokens": max_new_tokens,
            "temperature": temperature,
            "top_p": top_p,
            "stop_token_ids": stops,
            "skip_special_tokens": False,
            "spaces_between_special_tokens": False,
            "include_stop_str_in_output": True,
            "return_token_ids": True,
        }
        if seed is not None:
            payload["seed"] = seed
        if grammar is not None:
            payload["structured_outputs"] = {"grammar": grammar}
            payload["guided_grammar"] = grammar
        where = self.url + "/v1/completions"
        if cancel is None:
            data = self.http.post("/v1/completions", payload)
            choice = _first_choice(data, where)
            ids = _choice_ids(choice, where)
            if ids is None:
                raise ModelError(f"{where}: the answer has no token ids ({NEEDS_IDS})")
            return self._with_stop(ids, choice, stops), _processed(data, len(prompt)), False
        payload |= {"stream": True, "stream_options": {"include_usage": True}}
        # one event a token, and a few more (the finish, the usage): a server that goes on is cut
        events, cancelled = self.http.stream("/v1/completions", payload, cancel, max_new_tokens + 8)
        ids, last, usage = [], {}, {}
        for event in events:
            usage = event.get("usage") or usage
            if not event.get("choices"):
                continue  # the usage report after the last token
            choice = _first_choice(event, where)
            piece = _choice_ids(choice, where)
            if piece is None and choice.get("text"):
                raise ModelError(f"{where}: a streamed answer has no token ids ({NEEDS_IDS})")
            ids += piece or []
            last = choice
        return self._with_stop(ids, last, stops), _processed({"usage": usage}, len(prompt)), cancelled

    def _with_stop(self, ids: list[int], choice: dict, stops) -> list[int]:
        """``ids`` with the stop token vLLM leaves out of its output put back. An end token the
        model wrote (``<|eot_id|>`` as much as ``<|end_of_text|>``) is kept as written; only a
        stop on an end of text the answer does not show gets ``<|end_of_text|>``."""
        ids = list(ids)
        if choice.get("finish_reason") == "stop" and not (ids and (ids[-1] in stops or ids[-1] in self._eos_ids)):
            reason = choice.get("stop_reason")
            if isinstance(reason, int):
                ids.append(reason)
            elif reason is None:
                ids.append(self.eos_id)  # stopped on the model's end of text, left out of the ids
        return ids

    # -- fgserve -----------------------------------------------------------------------------
    def _fgserve(self, prompt, stops, max_new_tokens, temperature, top_p):
        if temperature <= 0.0:
            temperature = FGSERVE_GREEDY_TEMPERATURE  # fgserve has no per-request greedy; 0 breaks it
        payload = {"prompt": prompt, "max_tokens": max_new_tokens, "temperature": temperature, "top_p": top_p, "n": 1}
        by_id = {i: t for t, i in self.special_ids.items()}
        texts = [by_id[i] for i in stops if i in by_id]
        if texts:
            payload["stop"] = texts[0]  # fgserve takes one stop string; the rest are cut here
        data = self.http.post("/completions", payload)
        choice = _first_choice(data, self.url + "/completions")
        ids = choice.get("tokens")
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            raise ModelError(f"{self.url}/completions: the answer has no 'tokens' list (is it fgserve?)")
        return list(ids), len(prompt)

    def interrupt(self) -> None:
        """End the calls in flight at once (the app is quitting): never wait on the network."""
        self.http.abort()

    def close(self) -> None:
        self.http.close()


def _first_choice(data: dict, where: str) -> dict:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ModelError(f"{where}: the answer has no choices")
    return choices[0]


NEEDS_IDS = "cwmtui needs the generated token ids: a vLLM that takes return_token_ids (0.10.2 or newer)"


def _choice_ids(choice: dict, where: str) -> list[int] | None:
    """The token ids of a choice: ``token_ids``, or ``"token_id:N"`` strings in ``logprobs.tokens``."""
    ids = choice.get("token_ids")
    if ids is None:
        logprobs = choice.get("logprobs")
        listed = logprobs.get("tokens") if isinstance(logprobs, dict) else None
        if isinstance(listed, list):
            ids = [_token_id(t, where) for t in listed]
    if ids is None:
        return None
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        raise ModelError(f"{where}: the answer's token ids are not a list of numbers")
    return ids


def _token_id(text, where: str) -> int:
    if isinstance(text, str) and text.startswith("token_id:"):
        try:
            return int(text[9:])
        except ValueError:
            pass
    raise ModelError(f"{where}: the server returned token text, not ids (needs return_tokens_as_token_ids)")


def _processed(data: dict, sent: int) -> int:
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return sent
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    prompt_tokens = usage.get("prompt_tokens")
    if isinstance(cached, int) and isinstance(prompt_tokens, int):
        return max(prompt_tokens - cached, 0)
    return sent
