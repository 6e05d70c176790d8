"""What produced a results file: the run's configuration, in every ``--out`` record and every
``--json`` report, and the check that lets ``--out`` on an earlier file of the same run go on
where it stopped (a different configuration is refused, the difference named)."""

from __future__ import annotations

import datetime
from pathlib import Path

from .. import __version__
from .record import ResultsError, read_results

#: the version of the results records' layout (with "config"); files without one are version 0
RESULTS_FORMAT = 1

#: what may differ between the runs of one results file: when and with which cwmtui it ran, how
#: many programs ran at once, and on which servers (a lost node is left out of the next run)
NOT_COMPARED = ("date", "cwmtui", "concurrency", "servers")


def run_config(args, suite, rollout, backend) -> dict:
    """The configuration of a ``cwmtui eval`` run (plain JSON)."""
    replay = getattr(args, "replay", None)
    if replay:
        kind = "replay"
    elif getattr(args, "server", None):
        kind = getattr(args, "server_kind", "vllm")
    else:
        kind = "local"
    servers = getattr(args, "server", None)
    return {
        "format": RESULTS_FORMAT,
        "cwmtui": __version__,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "suite": suite.name,
        "programs": {"count": getattr(args, "count", None), "n": getattr(args, "n", None),
                     "depth": getattr(args, "depth", None), "types": getattr(args, "types", None),
                     "data": getattr(args, "data", None)},
        "backend": kind,
        # the model a server serves (not the server's address or the number of replicas)
        "model": _served(backend) or str(getattr(backend, "name", "") or getattr(args, "model", None) or ""),
        "model_path": getattr(args, "model", None),
        "servers": [servers] if isinstance(servers, str) else servers,
        "served_model": getattr(args, "served_model", None),
        "replay": replay,
        "tokenizer": getattr(args, "tokenizer", None),
        "decoding": {"temperature": rollout.temperature, "top_p": rollout.top_p, "seed": rollout.seed,
                     # under the frame grammar (None: a replay, decoded as it was recorded)
                     "constrain": _constrained(rollout, backend)},
        "beside": getattr(args, "beside", None),
        "budgets": {"token_budget": rollout.token_budget, "frame_tokens": rollout.frame_tokens,
                    "max_frames": rollout.max_frames},
        "teacher_force": bool(getattr(args, "teacher_force", False)),
        "recovery": bool(getattr(args, "recovery", False)),
        "samples": getattr(args, "samples", 1) if (getattr(args, "samples", 1) or 1) > 1 else None,
        "concurrency": getattr(args, "concurrency", 1),
    }


def _constrained(rollout, backend) -> bool | None:
    """Whether the free-running condition decodes under the frame grammar: as asked, else the
    model's default (None for a replay: it reproduces what was recorded)."""
    backend = getattr(backend, "live", None) or backend  # a replay's model for --recovery
    if not getattr(backend, "can_generate", True):
        return None
    if rollout.constrain is not None:
        return bool(rollout.constrain)
    return bool(getattr(backend, "constrained_by_default", False))


def _served(backend) -> str | None:
    """The name of the model a server backend serves (its ``model_name``), if it is one."""
    served = getattr(backend, "model_name", None)
    return served if isinstance(served, str) and served else None


def difference(earlier: dict, now: dict) -> str | None:
    """The first way ``now`` differs from ``earlier`` (what resuming would mix), or None."""
    for key in sorted(set(earlier) | set(now)):
        if key in NOT_COMPARED:
            continue
        if not _same(earlier.get(key, _ABSENT), now.get(key)):
            return f"{key}: {earlier.get(key)!r} in the file, {now.get(key)!r} now"
    return None


_ABSENT = object()


def _same(earlier, now) -> bool:
    """Equal, where an option an earlier version did not record (at any depth) counts as left
    off: absent in the file and None or False now."""
    if earlier is _ABSENT:
        return now is None or now is False
    if isinstance(earlier, dict) and isinstance(now, dict):
        return all(_same(earlier.get(key, _ABSENT), now.get(key)) for key in set(earlier) | set(now))
    return bool(earlier == now)


def earlier_records(path: str, config: dict) -> list[dict]:
    """The records an earlier run of this configuration wrote to ``path`` (none: no file, or an
    empty one), less those whose model calls failed (they run again). A file of another
    configuration, or of none, is refused: resuming would mix two runs in one file."""
    file = Path(path)
    if not file.exists() or file.stat().st_size == 0:
        return []
    try:
        records = read_results(path)
    except ResultsError as exc:
        raise ResultsError(f"--out {path}: an earlier results file, but not one to go on with ({exc})") from None
    for record in records:
        earlier = record.get("config")
        if not isinstance(earlier, dict):
            raise ResultsError(f"--out {path}: its records do not say what run wrote them; "
                               "give another file (or remove this one) to start a new run")
        problem = difference(earlier, config)
        if problem:
            raise ResultsError(f"--out {path}: written by another configuration ({problem}); "
                               "give another file to start a new run")
    return [r for r in records if r.get("status") != "error"]
