"""The results fields of one replay record, worked out the way ``cwmtui eval --replay`` does.

A replay file that is not a results file of ``cwmtui eval`` (a dump of recorded generations, an
ASSERT-KTH results file) says nothing of where the model went wrong. The triage list works it
out record by record, through the same path ``cwmtui eval --replay`` scores a whole file with:
the record's program (read as the debugger reads it, :func:`~cwmtui.model.replay.record_from`),
its ground truth (:func:`.batch.trace_suite`), the recorded generation replayed and compared
(:func:`.batch.evaluate_case` with the recording standing in for the model). The result is the
results-file line ``cwmtui eval --out`` would write for it (``class``, ``string_valued``,
``step``, ``status``, ``output``, ``first_divergence``, ...).

A program opened in the debugger is scored from its session instead
(:func:`session_summary`), with the same :func:`.record.condition_summary`.
"""

from __future__ import annotations

import os

from ..interpreter import Interpreter, Limits
from .batch import BatchOptions, RecordedGenerations, evaluate_case, trace_suite
from .record import condition_summary
from .suite import Case


class NotScored(Exception):
    """A record that cannot be scored (no usable program, the program never reaches its entry);
    one line for the user."""


class OneRecording(RecordedGenerations):
    """One record's generation standing in for the model, as :class:`.batch.RecordedGenerations`
    does for a whole file (without reading the file again)."""

    def __init__(self, ident: str, data: dict, source: str) -> None:
        self.path = source
        self.records = {ident: data}
        self.name = f"replay {os.path.basename(source)}"


def score_replay_record(data: dict, where: str, line: int, interpreter: Interpreter,
                        limits: Limits | None = None, source: str = "") -> dict:
    """The results-file line of one replay record (``where``: ``FILE:LINE`` for messages).
    Raises :class:`NotScored` with one line for a record that cannot be scored."""
    from ..model import ModelError
    from ..model.replay import record_from

    limits = limits or Limits()
    try:
        record = record_from(data, where, line)
    except ModelError as exc:  # said of the record, whose row is already named: without "where: "
        message = str(exc)
        raise NotScored(message[len(where) + 2:] if message.startswith(f"{where}: ") else message) from None
    case = Case(record.id, record.program)
    truths = trace_suite([case], limits, interpreter=interpreter)
    truth = truths[0]
    if not truth.usable:
        raise NotScored(f"no ground truth to compare with: {truth.trace.status.describe()}")
    return evaluate_case(OneRecording(record.id, data, source or where), "replay", truth,
                         BatchOptions(limits=limits))


def session_summary(truth, frames, status, comparison) -> dict:
    """What a rollout opened in the debugger did against the truth, in the fields of a results
    line: ``class``, ``string_valued``, ``step``, ``status``, ``output``, ``first_divergence``."""
    status_text = getattr(status, "value", status)
    summary = condition_summary(truth, list(frames), str(status_text), "", comparison)
    divergence = summary["first_divergence"]
    return {
        "class": summary["class"],
        "string_valued": bool(divergence and divergence.get("string_valued")),
        "step": divergence["step"] if divergence else None,
        "status": summary["status"],
        "output": summary["output"],
        "first_divergence": divergence,
    }
