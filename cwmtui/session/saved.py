"""The session file: a session as one JSON object, and back (format version 2; version 1 files
still open). See the package docstring for what it keeps and why."""

from __future__ import annotations

import codecs
import math
import os
from dataclasses import asdict, fields
from typing import Sequence

import orjson

from ..analysis.compare import Comparison
from ..analysis.lens import Lens
from ..analysis.recovery import Recovery
from ..files import read_bytes
from ..interpreter import Limits, Program
from ..json_lines import DAMAGED_DATA
from ..trace import Frame, OutputChunk, RolloutStatus, Trace, TraceStatus
from ..trace.collector import collector_paused
from ..trace.frame import frames_from_json
from ..trace.stored import StoredFrames, frame_row, stored_frames
from .branch import Branch
from .errors import SessionError
from .intervention import Intervention

FORMAT = "cwmtui-session"
FORMAT_VERSION = 2  # 2: frames as rows (trace/stored.py), comparisons saved; version 1 files still open


def branch_to_json(self: Branch, truth: Sequence[Frame]) -> dict:
    """The branch as JSON; its comparison's ``truth_changed`` is left in for the session
    to keep once (every branch is compared with the same truth)."""
    comparison = self.comparison
    data = {
        "name": self.name,
        "parent": self.parent,
        "at_step": self.at_step,
        "intervention": self.intervention.to_json() if self.intervention is not None else None,
        "status": self.status.value,
        "tokens": self.tokens,
        "forced_steps": self.forced_steps,
        "frames": _frames_json(self.frames, truth, comparison),
        "verdict": comparison.verdict if comparison else None,
        "first_divergence": comparison.first_divergence.to_json()
        if comparison and comparison.first_divergence
        else None,
    }
    if comparison is not None and self.status is not RolloutStatus.RUNNING:  # a running branch is compared again on load
        saved = comparison.to_saved()
        data["comparison"] = {key: saved[key] for key in ("status", "agreed_steps", "rows", "truth_changed", "model_changed")}
    if self.recovery is not None:
        data["recovery"] = self.recovery.to_json()
    if self.lens is not None:
        data["lens"] = {**self.lens, "lens": self.lens["lens"].to_json()}
    if self.settings is not None:
        data["settings"] = self.settings
    if self.message:
        data["message"] = self.message
    if self.token_limit is not None:
        data["token_limit"] = self.token_limit
    if self.partial:
        data["partial"] = self.partial
    return data

def branch_from_json(data: dict, truth: Sequence[Frame], truth_changed: list | None = None, version: int = FORMAT_VERSION) -> Branch:
    """A branch from :meth:`to_json`, with its saved comparison when the file has one (and
    the truth's changed names, kept once per session, are given)."""
    frames = data.get("frames", [])
    if not isinstance(data["name"], str) or not isinstance(data.get("parent"), (str, type(None))):
        raise TypeError("a branch's name and parent must be text")
    lens = data.get("lens")
    if lens is not None:
        lens = {**lens, "lens": Lens.from_json(lens["lens"])}
    branch = Branch(
        name=data["name"],
        parent=data.get("parent"),
        at_step=data.get("at_step"),
        intervention=Intervention.from_json(data["intervention"]) if data.get("intervention") is not None else None,
        frames=StoredFrames(frames, base=truth) if version >= 2 else frames_from_json(frames),
        status=RolloutStatus.read(data.get("status", "ended")),
        tokens=dict(data.get("tokens") or {"trace": 0, "processed": 0}),
        forced_steps=list(data.get("forced_steps") or []),
        lens=lens,
        settings=_settings(data.get("settings")),
        message=_text(data.get("message")),
        token_limit=_count(data.get("token_limit")),
        partial=_text(data.get("partial")),
    )
    saved = data.get("comparison")
    if saved is not None and truth_changed is not None and version >= 2:
        # the saved comparison spares recomputing it; one that does not fit the frames (a
        # stale or edited file) is dropped, and the session compares the branch again
        try:
            saved = {**saved, "verdict": data["verdict"], "first_divergence": data["first_divergence"],
                     "truth_changed": truth_changed}
            branch.comparison = Comparison.from_saved(saved, truth, branch.frames)
            if data.get("recovery") is not None:
                branch.recovery = Recovery.from_json(data["recovery"], branch.comparison)
        except DAMAGED_DATA:
            branch.comparison = branch.recovery = None
    return branch


def _frames_json(frames: Sequence[Frame], truth: Sequence[Frame], comparison: Comparison | None) -> list:
    """A branch's frames as rows; those equal to the interpreter's frames on their rows as runs
    (see cwmtui/trace/stored.py)."""
    partner: dict[int, int] = {}
    if comparison is not None:
        partner = {mi: ti for ti, mi in comparison.alignment if ti is not None and mi is not None}
    return stored_frames(frames, truth, partner)


def _truth_json(truth: Trace) -> dict:
    return {
        "frames": [frame_row(f) for f in truth.frames],
        "status": truth.status.to_json(),
        "output": [[c.step, c.stream, c.text] for c in truth.output],
    }


def _truth_from_json(data: dict, version: int) -> Trace:
    if version < 2:
        return Trace.from_json(data)
    return Trace(
        frames=StoredFrames(data["frames"]),
        status=TraceStatus.from_json(data["status"]),
        output=[OutputChunk.from_json(c) for c in data.get("output", [])],
    )


def session_to_json(self) -> dict:
    """The session (a DebugSession) as the file keeps it."""
    truth = self.truth
    branches = [branch_to_json(b, truth.frames) for b in self.branches]
    truth_changed = None
    for data in branches:
        saved = data.get("comparison")
        if saved is not None:
            changed = saved.pop("truth_changed")
            truth_changed = changed if truth_changed is None else truth_changed
    data = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "program": self.program.to_json(),
        "truth": _truth_json(truth),
        "settings": {"rollout": options_json(self.options), "limits": asdict(self.limits)},
        "model": {"name": self.model_name, "description": self.model_description},
        "branches": branches,
    }
    if truth_changed is not None:
        data["truth_changed"] = truth_changed  # the names each truth frame changed (saved comparisons)
    return data

def save_session(self, path: str) -> None:
    """Write the session to ``path`` atomically: a file that was there stays whole until the
    new one is complete."""
    try:
        payload = orjson.dumps(session_to_json(self), option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError as exc:
        raise SessionError(f"{path}: cannot write the session ({exc})") from None
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise SessionError(f"{path}: cannot write the session ({exc.strerror or exc})") from None

def session_from_json(cls, data: dict, backend=None):
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SessionError("not a cwmtui session file")
    version = data.get("version")
    if type(version) is not int or version < 1:
        raise SessionError(f"the session file is damaged: its format version {version!r} is not understood")
    if version > FORMAT_VERSION:
        raise SessionError(f"session format version {version} is newer than this cwmtui reads ({FORMAT_VERSION})")
    try:
        program = Program.from_json(data["program"])
        truth = _truth_from_json(data["truth"], version)
        settings = data.get("settings") or {}
        saved_rollout = settings.get("rollout") or {}
        options = _options_from_json(saved_rollout)
        # the numbers only: whether programs run in the sandbox is the user's choice now,
        # never a file's
        saved = settings.get("limits") or {}
        # (a limit of 0 or less, or not a number, would switch it off: the default stands)
        limits = Limits(**{k: saved[k] for k in ("frames", "seconds", "memory", "output", "processes")
                           if type(saved.get(k)) in (int, float) and saved[k] > 0})
        branches = data.get("branches", [])
        if not isinstance(branches, list):
            raise TypeError("the branches must be a list")
        truth_changed = data.get("truth_changed")
        branches = [branch_from_json(b, truth.frames, truth_changed, version) for b in branches]
        for branch in branches:  # a file from before branches kept their own: the session's
            if branch.settings is None and saved_rollout:
                branch.settings = dict(saved_rollout)
        model = data.get("model") or {}
        model_name, model_description = model.get("name", ""), model.get("description", "")
        if not isinstance(model_name, str) or not isinstance(model_description, str):
            raise TypeError("the model's name and description must be text")
    except DAMAGED_DATA as exc:
        raise SessionError(f"the session file is damaged ({exc.__class__.__name__}: {exc})") from None
    session = cls(program, backend, options, limits, truth=truth)
    if backend is None:
        session.model_name, session.model_description = model_name, model_description
    session.branches = branches
    for branch in branches:
        if branch.comparison is None:  # a version 1 file, or a branch saved while it ran
            session.compare_branch(branch)
    return session

def load_session(cls, path: str, backend=None):
    """Reopen a saved session; without ``backend`` it is read-only (no new branches)."""
    raw = read_bytes(path, "session file (.json)", SessionError).removeprefix(codecs.BOM_UTF8)
    with collector_paused():
        try:
            data = orjson.loads(raw)
        except ValueError:
            raise SessionError(f"{path}: not a cwmtui session file (not JSON)") from None
        try:
            return cls.from_json(data, backend)
        except SessionError as exc:
            raise SessionError(f"{path}: {exc}") from None


def options_json(options) -> dict:
    if options is None:
        return {}
    try:
        return asdict(options)
    except TypeError:
        return dict(vars(options))


def _settings(data) -> dict | None:
    """A branch's saved rollout settings, checked: a damaged value is refused at load, not
    when the status bar draws it. Its limits may be null (a replay has none)."""
    if data is not None:
        _check_rollout_values(data, limits_may_be_null=True)
    return data


def _check_rollout_values(data, limits_may_be_null: bool = False) -> None:
    if not isinstance(data, dict):
        raise TypeError("rollout settings must be an object")
    from ..model.rollout import RolloutOptions

    for f in fields(RolloutOptions):
        if f.name not in data:
            continue
        value, kind = data[f.name], type(f.default)
        if f.default is None or kind is bool:  # a switch (constrain): true, false or unset
            if value is not None and not isinstance(value, bool):
                raise ValueError(f"the rollout setting {f.name} is {value!r}, not true or false")
            continue
        if value is None and limits_may_be_null and f.name in ("token_budget", "frame_tokens", "max_frames"):
            continue
        number = isinstance(value, (int, float) if kind is float else int) and not isinstance(value, bool)
        if not number or (kind is float and not math.isfinite(value)):
            raise ValueError(f"the rollout setting {f.name} is {value!r}, not a number")


def _options_from_json(data: dict):
    from ..model.rollout import RolloutOptions

    _check_rollout_values(data)
    known = {f.name for f in fields(RolloutOptions)}
    # a session saved before the frame grammar existed decoded without it
    return RolloutOptions(**({"constrain": False} | {k: v for k, v in data.items() if k in known}))


def _text(value) -> str:
    """A saved piece of text (why a rollout stopped): text or nothing; anything else is damage."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError("a branch's message and cut-off text must be text")
    return value


def _count(value) -> int | None:
    """A saved count (a token limit): a whole number ≥ 0, or nothing."""
    if value is None:
        return None
    if type(value) is not int or value < 0:
        raise TypeError("a branch's token limit must be a whole number")
    return value
