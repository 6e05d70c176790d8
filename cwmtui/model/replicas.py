"""Several replicas of one model server: ``--server`` given more than once (``vllm serve`` on
each GPU or node, the same model on every one).

A :class:`ReplicaBackend` speaks the backend protocol over one :class:`ServerBackend` per
replica. Every backend opened over the same replicas while another is open shares one
:class:`ReplicaSet` (the eval's worker threads each open a backend: their load is counted
together), which says, per replica, the calls in flight, the rollouts parked on it, the calls
and failures so far, and whether it is down (why, since when).

Where a ``complete()`` call goes:

- a call that continues this backend's rollout (its prompt starts with the prompt that began
  the rollout: the next frame, a rewind after an override, the teacher-forced condition of the
  same program) stays on the replica that served it while that one is up: vLLM's prefix cache
  lives on one server;
- any other call goes to the least-loaded replica that is up: the fewest rollouts parked on it
  (a rollout counts from its first call until the backend moves on, between two calls too), then
  the fewest calls in flight, then the fewest calls so far;
- a call that fails with a server error (:class:`ServerUnavailable`: unreachable, timed out,
  dropped, HTTP 408/429/5xx, after the server backend's own retries) marks that replica down
  and is made again on another. A refusal of the request (a bad API key, a prompt over the
  context) is the user's to see: it is raised, and the replica stays up;
- a replica down for :data:`RETRY_AFTER` seconds is tried again by one call (a node that
  restarts comes back): it answers, and it is up again; it fails, and it waits as long again;
- when every replica is down, :class:`ReplicasDown` names each one and why.

A call is made again from its start on the other replica, so nothing of it is counted twice:
the caller sees one completion, or one error.
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Sequence
from urllib.parse import urlsplit

from ..trace import tokens
from .backend import FGSERVE_NO_GRAMMAR, Backend, Completion, ModelError, nothing_to_complete
from .server import ServerBackend, ServerUnavailable, check_url

#: seconds before a replica marked down is tried again
RETRY_AFTER = 60.0


class ReplicasDown(ModelError):
    """Every replica is down: the message names each one and why."""


@dataclass
class _Replica:
    url: str  # without a user:password: for reports and messages
    in_flight: int = 0
    parked: int = 0  # rollouts whose next call goes here
    calls: int = 0
    failures: int = 0
    down_reason: str | None = None
    down_since: float | None = None  # time.time()
    down_at: float | None = None  # time.monotonic(): when it may be tried again
    last_failure: str | None = None


class ReplicaSet:
    """The state the backends over one list of replicas share; every method is thread-safe.

    ``urls`` as given (a user:password stays in them, for opening); the reports show each
    without it. ``retry_after``: seconds before a replica marked down is tried again."""

    def __init__(self, urls: Sequence[str], retry_after: float = RETRY_AFTER) -> None:
        self.urls = tuple(urls)
        self.retry_after = retry_after
        self._replicas = [_Replica(public_url(url)) for url in self.urls]
        self._lock = threading.Lock()
        self._open_backends = 0  # for shared_replicas

    def __len__(self) -> int:
        return len(self._replicas)

    def url(self, index: int) -> str:
        """Replica ``index`` as reports name it (no user:password)."""
        return self._replicas[index].url

    def is_up(self, index: int) -> bool:
        with self._lock:
            return self._replicas[index].down_reason is None

    def may_try(self, index: int) -> bool:
        """Up, or down long enough to be tried again."""
        with self._lock:
            return self._may_try(self._replicas[index], time.monotonic())

    def _may_try(self, replica: _Replica, now: float) -> bool:
        return replica.down_reason is None or now - (replica.down_at or 0.0) >= self.retry_after

    def take(self, home: int | None, stay: bool, tried: set[int]) -> int:
        """The replica for the next call of a backend whose rollout is parked on ``home``:
        ``home`` itself when ``stay`` (the call continues that rollout) and it is up, else the
        least-loaded replica not in ``tried`` that may be tried. The rollout is parked on the
        replica chosen and the call counted in flight there (:meth:`release` ends it).
        :class:`ReplicasDown` when there is none."""
        with self._lock:
            now = time.monotonic()
            replicas = self._replicas
            chosen = None
            if stay and home is not None and home not in tried and replicas[home].down_reason is None:
                chosen = home
            else:
                candidates = [i for i, r in enumerate(replicas) if i not in tried and self._may_try(r, now)]
                if candidates:
                    def load(i: int) -> tuple:
                        r = replicas[i]
                        parked = r.parked - (1 if i == home else 0)  # the rollout being moved is not load
                        return (parked, r.in_flight, r.calls, i)

                    chosen = min(candidates, key=load)
            if chosen is None:
                raise ReplicasDown(self._all_down())
            if replicas[chosen].down_reason is not None:
                replicas[chosen].down_at = now  # this call tries it again; the others wait for its answer
            if home != chosen:
                if home is not None:
                    replicas[home].parked -= 1
                replicas[chosen].parked += 1
            replicas[chosen].in_flight += 1
            replicas[chosen].calls += 1
            return chosen

    def release(self, index: int, began: float, failure: str | None = None) -> None:
        """The call on ``index`` that began at ``began`` (``time.monotonic()`` after
        :meth:`take`) is over. ``failure``: it failed with a server error, and the replica is
        marked down. A call that succeeded brings a replica marked down before it began back
        up (one marked down while the call was on its way stays down)."""
        with self._lock:
            replica = self._replicas[index]
            replica.in_flight -= 1
            if failure is not None:
                self._mark_down(replica, failure)
            elif replica.down_at is not None and replica.down_at <= began:
                replica.down_reason = replica.down_since = replica.down_at = None

    def mark_down(self, index: int, reason: str) -> None:
        """Replica ``index`` failed outside a call (opening it)."""
        with self._lock:
            self._mark_down(self._replicas[index], reason)

    def _mark_down(self, replica: _Replica, reason: str) -> None:
        reason = _reason(reason, replica.url)
        replica.failures += 1
        replica.last_failure = reason
        replica.down_reason = reason
        replica.down_at = time.monotonic()
        replica.down_since = time.time()

    def leave(self, home: int | None) -> None:
        """A backend whose rollout was parked on ``home`` closed."""
        if home is None:
            return
        with self._lock:
            self._replicas[home].parked -= 1

    def report(self) -> list[dict]:
        """One dict a replica, in ``--server`` order: ``url``, ``calls`` (completions sent to
        it), ``failures`` (calls or openings that failed with a server error), ``down_reason``
        (None while it is up), ``down_since`` (UTC ISO 8601 time it went down, or None) and
        ``last_failure`` (the latest failure's reason, kept after it came back up)."""
        with self._lock:
            return [
                {
                    "url": r.url,
                    "calls": r.calls,
                    "failures": r.failures,
                    "down_reason": r.down_reason,
                    "down_since": _iso(r.down_since),
                    "last_failure": r.last_failure,
                }
                for r in self._replicas
            ]

    def _all_down(self) -> str:
        named = "; ".join(f"{r.url} ({r.down_reason or 'failed in this call'})" for r in self._replicas)
        return (f"all {len(self._replicas)} --server replicas are down: {named}; each is tried again "
                f"{self.retry_after:g} s after it failed")


#: the ReplicaSet of each list of replicas that an open backend uses (weak: one never closed
#: does not keep it for ever)
_SHARED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()


def shared_replicas(urls: Sequence[str], kind: str = "vllm", served_model: str | None = None) -> ReplicaSet:
    """The ReplicaSet of these replicas: the one a backend still open uses, or a new one."""
    key = (kind, served_model, tuple(urls))
    with _SHARED_LOCK:
        replicas = _SHARED.get(key)
        if replicas is None:
            replicas = ReplicaSet(urls)
            _SHARED[key] = replicas
        return replicas


def _opened(replicas: ReplicaSet) -> None:
    with _SHARED_LOCK:
        replicas._open_backends += 1


def _closed(replicas: ReplicaSet) -> None:
    """The last backend over ``replicas`` closed: the next one opened starts afresh."""
    with _SHARED_LOCK:
        replicas._open_backends -= 1
        if replicas._open_backends <= 0:
            for key, value in list(_SHARED.items()):
                if value is replicas:
                    del _SHARED[key]


class ReplicaBackend(Backend):
    """Replicas of one model behind HTTP (``--server`` given several times), as one backend.

    The options are :class:`ServerBackend`'s, for every replica; ``replicas``: the shared state
    (default: :func:`shared_replicas`, so backends opened over the same URLs count their load
    together)."""

    def __init__(
        self,
        urls: Sequence[str],
        kind: str = "vllm",
        tokenizer: str | None = None,
        timeout: float = 300.0,
        retries: int = 2,
        backoff: float = 0.5,
        api_key: str | None = None,
        served_model: str | None = None,
        replicas: ReplicaSet | None = None,
    ) -> None:
        urls = list(urls)
        check_servers(urls, kind)
        if replicas is None:
            replicas = shared_replicas(urls, kind, served_model)
        elif len(replicas) != len(urls):
            raise ModelError(f"{len(urls)} replicas, but a ReplicaSet of {len(replicas)}")
        self.replicas = replicas
        self.kind = kind
        self.urls = [replicas.url(i) for i in range(len(urls))]
        self._options: dict[str, Any] = dict(kind=kind, timeout=timeout, retries=retries, backoff=backoff,
                                             api_key=api_key, served_model=served_model)
        if tokenizer:  # loaded once, shared by the replicas (a tokenizer file is the same for each)
            from .tokenizer import load_any_tokenizer

            self._options["tokenizer"] = load_any_tokenizer(tokenizer)
        self._servers: list[ServerBackend | None] = [None] * len(urls)
        self._first: ServerBackend | None = None  # the replica the others must agree with
        self._home: int | None = None  # where this backend's rollout is parked
        self._head: list[int] = []  # the prompt that began it
        self._lock = threading.RLock()  # the above, and opening a replica late, for calls from several threads
        self._interrupted = False
        self._closed = False
        _opened(replicas)
        try:
            # all at once (each opening is a few requests); one another backend found down is
            # opened when it is tried again
            opened = _at_once(self._connect, [i for i in range(len(urls)) if replicas.may_try(i)])
            failure: BaseException | None = None
            for index, result in opened.items():
                if isinstance(result, ServerBackend):
                    if failure is not None:
                        result.close()
                        continue
                    try:
                        self._adopt(index, result)  # (closes it when it is not the same model)
                    except ModelError as exc:
                        failure = exc
                elif isinstance(result, ServerUnavailable):
                    replicas.mark_down(index, str(result))
                elif failure is None and isinstance(result, BaseException):
                    failure = result
            if failure is not None:
                raise failure
            if self._first is None:
                raise ReplicasDown(replicas._all_down())
        except BaseException:
            self._close_servers()
            _closed(replicas)
            raise
        first = self._first
        self.model_name = first.model_name
        self.special_ids = first.special_ids
        lengths = [s.context_length for s in self._servers if s is not None and s.context_length]
        self.context_length = min(lengths) if lengths else None
        down = [i for i in range(len(urls)) if not replicas.is_up(i)]
        if down:
            report = replicas.report()
            named = "; ".join(f"{report[i]['url']} ({report[i]['down_reason']})" for i in down)
            self.warning = (f"{len(urls) - len(down)} of {len(urls)} --server replicas answer; down: {named} "
                            f"(each is tried again {replicas.retry_after:g} s after it failed)")
        served = f" ({self.model_name})" if self.model_name else ""
        self.name = f"{kind} · {len(urls)} replicas{served}"
        self.description = f"{kind} server · {len(urls)} replicas{served}: {', '.join(self.urls)}"
        if kind == "fgserve":
            self.description += " · greedy as temperature 1e-6"

    # -- the replicas ------------------------------------------------------------------------
    def _open(self, index: int) -> ServerBackend:
        """The server backend of replica ``index``, opened now if it was not: ServerUnavailable
        when it cannot be reached, ModelError when it is not a replica of the same model."""
        with self._lock:
            server = self._servers[index]
            if server is not None:
                return server
            server = self._connect(index)
            self._adopt(index, server)
            return server

    def _connect(self, index: int) -> ServerBackend:
        return ServerBackend(self.replicas.urls[index], **self._options)

    def _adopt(self, index: int, server: ServerBackend) -> None:
        """``server`` serves replica ``index`` from now on, if it serves the same model as the
        others (ModelError, and closed, if not)."""
        first = self._first
        if first is not None:
            problem = None
            if server.model_name != first.model_name:
                problem = f"it serves {server.model_name}, {first.url} serves {first.model_name}"
            elif server.special_ids != first.special_ids:
                problem = f"its tokenizer's special token ids differ from {first.url}'s"
            if problem is not None:
                server.close()
                raise ModelError(f"--server {server.url} is not a replica of the same model: {problem}")
            if server.context_length and self.context_length and server.context_length < self.context_length:
                self.context_length = server.context_length
        else:
            self._first = server
        if self._interrupted:
            server.interrupt()
        self._servers[index] = server

    def replica_report(self) -> list[dict]:
        """Per replica, in ``--server`` order (shared by every backend over these replicas):
        ``{"url", "calls", "failures", "down_reason", "down_since", "last_failure"}``; see
        :meth:`ReplicaSet.report`."""
        return self.replicas.report()

    # -- the protocol ------------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        return self._tokenizing(lambda server: server.encode(text))

    def decode(self, ids: Sequence[int]) -> str:
        return self._tokenizing(lambda server: server.decode(ids))

    def _tokenizing(self, work):
        """``work(server)`` on a replica that is up (this backend's rollout's, else the first:
        the same one each time, for its tokenizer's cache), on the next when that one fails
        with a server error; then on one down long enough to be tried again."""
        replicas = self.replicas
        order = list(dict.fromkeys(([] if self._home is None else [self._home]) + list(range(len(replicas)))))
        up = [i for i in order if replicas.is_up(i)]
        again = [i for i in order if not replicas.is_up(i) and replicas.may_try(i)]
        for index in up + again:
            try:
                return work(self._open(index))
            except ServerUnavailable as exc:
                if self._interrupted:
                    raise ModelError("cancelled") from None
                replicas.mark_down(index, str(exc))
        raise ReplicasDown(replicas._all_down())

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
        if self._closed:
            raise ModelError("the backend is closed")
        stops = list(stop_ids)
        head = self._head
        stay = bool(head) and len(prompt_ids) >= len(head) and list(prompt_ids[: len(head)]) == head
        tried: set[int] = set()
        while True:
            if self._interrupted:
                raise ModelError("cancelled")
            with self._lock:
                index = self.replicas.take(self._home, stay, tried)
                self._home = index
            began = time.monotonic()
            tried.add(index)
            try:
                server = self._open(index)
                extra = {"constraint": constraint} if constraint is not None else {}
                completion = server.complete(prompt_ids, stops, max_new_tokens, temperature, top_p, seed, cancel, **extra)
            except ServerUnavailable as exc:
                if self._interrupted:
                    self.replicas.release(index, began)
                    raise ModelError("cancelled") from None
                self.replicas.release(index, began, failure=str(exc))
                stay = False
                continue
            except BaseException:
                self.replicas.release(index, began)
                raise
            self.replicas.release(index, began)
            if not stay:
                # a new rollout begins here: its prompt up to the first frame (the source) is what
                # the calls that continue it start with
                with self._lock:
                    self._head = list(prompt_ids[: _head_length(prompt_ids, self.special_ids)])
            return completion

    def constraint_problem(self) -> str | None:
        return FGSERVE_NO_GRAMMAR if self.kind == "fgserve" else None

    def interrupt(self) -> None:
        """From another thread: end this backend's calls in flight now (not the other backends'
        over the same replicas)."""
        self._interrupted = True
        for server in list(self._servers):
            if server is not None:
                server.interrupt()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.replicas.leave(self._home)
            self._home = None
        self._close_servers()
        _closed(self.replicas)

    def _close_servers(self) -> None:
        for server in self._servers:
            if server is not None:
                server.close()


def _at_once(work, indexes: list[int]) -> dict[int, object]:
    """``work(index)`` for every index, each in a thread of its own: index -> its result or the
    exception it raised, in ``indexes`` order."""
    results: dict[int, object] = {}

    def one(index: int) -> None:
        try:
            results[index] = work(index)
        except Exception as exc:  # noqa: BLE001 - handed back to the caller, which raises it
            results[index] = exc

    threads = [threading.Thread(target=one, args=(i,), daemon=True, name="cwmtui-replica") for i in indexes[1:]]
    for thread in threads:
        thread.start()
    if indexes:
        one(indexes[0])
    for thread in threads:
        thread.join()
    return {i: results[i] for i in indexes}


def check_servers(urls: Sequence[str], kind: str = "vllm") -> None:
    """ModelError unless every ``--server`` URL is an http(s) URL (as one server's is) and no
    replica is given twice."""
    if not urls:
        raise ModelError("--server: no URL")
    for url in urls:
        check_url(url)
    keys = [_replica_key(url, kind) for url in urls]
    for position, key in enumerate(keys):
        if key in keys[:position]:
            raise ModelError(f"--server {public_url(urls[position])} is given twice: give each replica once")


def _head_length(prompt_ids: Sequence[int], special_ids: dict[str, int]) -> int:
    """How much of a rollout's first prompt every later call of it starts with: up to the first
    frame separator (the prompt is ``<|begin_of_text|><|trace_context_start|>SOURCE<|frame_sep|>``
    and the frames), or all of it."""
    sep = special_ids.get(tokens.FRAME_SEP)
    for position, token in enumerate(prompt_ids):
        if token == sep:
            return position + 1
    return len(prompt_ids)


def public_url(url: str) -> str:
    """``url`` without a user:password (what reports and messages show)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]).geturl()


def _replica_key(url: str, kind: str) -> str:
    base = public_url(url).rstrip("/")
    if kind == "vllm" and base.endswith("/v1"):
        base = base[:-3]
    return base.lower()


def _reason(message: str, url: str) -> str:
    """A server error's message without the URL it starts with (the report names the replica)."""
    base = url.rstrip("/")
    if base.endswith("/v1"):
        base = base[:-3]
    if message.startswith(base):
        rest = message[len(base):]
        path, sep, after = rest.partition(": ")
        if sep and (not path or path.startswith("/")):
            return after
    return message


def _iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
