"""Program generators with ground truth from the project's tracer.

The evaluation suites (``s5``, ``zoo``) and the training families (``families``) share these
generators; training draws them with other seeds. Every generator is deterministic per seed and
returns :class:`SuiteProgram` objects: ordinary :class:`~cwmtui.interpreter.Program` objects that
also carry an ``id`` and ``meta`` (suite, family, n / depth / type / form, seed) for breakdowns.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ..interpreter import Program, program_from_source


@dataclass(frozen=True)
class SuiteProgram(Program):
    id: str = ""
    meta: dict = field(default_factory=dict, hash=False, compare=False)

    def to_json(self) -> dict:
        data = super().to_json()
        data["id"] = self.id
        data["meta"] = dict(self.meta)
        return data

    @classmethod
    def from_json(cls, data: dict) -> "SuiteProgram":
        return cls(**data)


def make_program(source: str, call: str, id: str, meta: dict, path: str | None = None) -> SuiteProgram:
    """A SuiteProgram from a source whose entry carries the START_OF_TRACE marker."""
    base = program_from_source(source, path or f"<{id}>", call=call)
    return SuiteProgram(
        base.path, base.source, base.entry, base.entry_line, base.entry_firstlineno, base.call,
        id=id, meta=dict(meta),
    )


def rng_for(*parts) -> random.Random:
    """A generator seeded by a readable key, stable across runs and PYTHONHASHSEED."""
    return random.Random(":".join(str(p) for p in parts))
