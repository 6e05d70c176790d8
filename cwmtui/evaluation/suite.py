"""The programs of an evaluation run: a named benchmark, a directory of ``.py`` files or a JSONL.

A :class:`Case` is one program with its id and metadata (``n`` for S5, ``depth``/``type``/``form``
for the composition zoo). The ``s5`` and ``zoo`` generators live in :mod:`cwmtui.suites`; this
module only turns their programs into cases and reads the file-based suites.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from ..interpreter import Program, ProgramError, cruxeval_program, load_program, program_from_source
from ..json_lines import iter_json_lines

#: the CRUXEval data shipped inside the package (MIT, its LICENSE and README beside it)
CRUXEVAL_DATA = Path(__file__).resolve().parent.parent / "data" / "cruxeval" / "cruxeval.jsonl"
NAMED = ("cruxeval", "s5", "zoo")
S5_LENGTHS = (8, 16, 32, 64, 128)
ZOO_DEPTHS = (1, 2, 3, 4, 5)


class SuiteError(Exception):
    """The suite cannot be read; one line for the user."""


@dataclass(frozen=True)
class Case:
    id: str
    program: Program
    metadata: dict = field(default_factory=dict)
    #: how the program was given, kept in the results so they stay a replay file:
    #: ``{"code", "input"}`` for CRUXEval, else ``{}`` (the program source is always kept)
    given: dict = field(default_factory=dict)


@dataclass
class Suite:
    name: str
    cases: list[Case]


def load_suite(
    spec: str,
    *,
    n: list[int] | None = None,
    depth: list[int] | None = None,
    types: list[str] | None = None,
    count: int | None = None,
    seed: int = 0,
    data: str | None = None,
) -> Suite:
    """``spec``: ``cruxeval``, ``s5``, ``zoo``, a directory of ``.py`` files or a ``.jsonl`` file.

    ``data``: another copy of CRUXEval's ``cruxeval.jsonl`` (default: the one shipped with
    cwmtui), for ``cruxeval`` only.

    ``count`` is the number of programs per cell for the generated suites (per N for ``s5``,
    per type, depth and form for ``zoo``) and the number of programs taken from the start of
    a file-based suite.
    """
    if count is not None and count < 1:
        raise SuiteError("--count must be at least 1")
    if count is not None and count > MAX_COUNT and spec in ("s5", "zoo"):
        raise SuiteError(f"--count: at most {MAX_COUNT} programs per cell for the generated suites")
    if data is not None and spec != "cruxeval":
        raise SuiteError("--data points at a copy of CRUXEval; it is for the cruxeval suite")
    if spec == "cruxeval":
        path = Path(data) if data is not None else CRUXEVAL_DATA
        if path.is_dir():
            path = path / "cruxeval.jsonl"
        if not path.is_file():
            where = f"--data {data}" if data is not None else f"the copy shipped with cwmtui ({path})"
            raise SuiteError(f"CRUXEval data not found: {where}: no such file")
        return Suite("cruxeval", cruxeval_cases(path, count))
    if spec == "s5":
        return Suite("s5", s5_cases(n or list(S5_LENGTHS), count or 10, seed))
    if spec == "zoo":
        return Suite("zoo", zoo_cases(depth or list(ZOO_DEPTHS), count or 5, seed, types))
    path = Path(spec)
    if path.is_dir():
        return Suite(path.name or spec, directory_cases(path, count))
    if path.is_file():
        cases = jsonl_cases(path, count)
        names = {case.metadata.get("suite") for case in cases}
        # a results file of cwmtui eval keeps the suite's name (cruxeval, s5, zoo)
        return Suite(str(names.pop()) if len(names) == 1 and None not in names else path.stem, cases)
    if not path.exists() and os.sep not in spec and not spec.endswith((".jsonl", ".py")):
        raise SuiteError(f"unknown suite {spec!r}: use cruxeval, s5, zoo, a directory of .py files or a .jsonl file")
    raise SuiteError(f"{spec}: no such file or directory")


def cruxeval_cases(path: Path, count: int | None = None) -> list[Case]:
    cases = []
    for _, record in islice(iter_json_lines(path, "suite file", SuiteError), count):  # the rest unread
        try:
            program = cruxeval_program(record["code"], record["input"], path=f"<{record['id']}>")
        except (KeyError, TypeError):
            raise SuiteError(f"{path}: a record lacks code, input or id") from None
        except ProgramError as exc:
            raise SuiteError(f"{record['id']}: {exc}") from None
        cases.append(Case(record["id"], program, {}, {"code": record["code"], "input": record["input"]}))
    return cases


def directory_cases(path: Path, count: int | None = None) -> list[Case]:
    files = sorted(p for p in path.rglob("*.py") if p.is_file())
    if not files:
        raise SuiteError(f"{path}: no .py files in it")
    cases = []
    for file in files[: count or len(files)]:
        try:
            program = load_program(str(file))
        except ProgramError as exc:
            raise SuiteError(str(exc)) from None
        cases.append(Case(str(file.relative_to(path).with_suffix("")), program, {}))
    return cases


def jsonl_cases(path: Path, count: int | None = None) -> list[Case]:
    """``{id, program}`` (the source text) or ``{id, code, input}`` (CRUXEval style) per line.

    Optional keys: ``entry``, ``call`` (as for ``cwmtui trace``) and ``metadata``. A results file
    of ``cwmtui eval`` is such a file, so a run can be repeated on its own programs.
    """
    cases = []
    seen: set[str] = set()
    for number, record in islice(iter_json_lines(path, "suite file", SuiteError), count):
        ident = str(record.get("id", number))
        if ident in seen:
            raise SuiteError(f"{path}:{number}: id {ident!r} appears twice")
        seen.add(ident)
        metadata = dict(record["metadata"]) if isinstance(record.get("metadata"), dict) else {}
        if isinstance(record.get("suite"), str) and isinstance(record.get("generation"), str):
            metadata.setdefault("suite", record["suite"])  # a results file's line
        try:
            if isinstance(record.get("code"), str) and isinstance(record.get("input"), str):
                program = cruxeval_program(record["code"], record["input"], path=f"<{ident}>")
                given = {"code": record["code"], "input": record["input"]}
            elif isinstance(record.get("program"), str):
                program = program_from_source(
                    record["program"], f"<{ident}>", entry=record.get("entry"), call=record.get("call")
                )
                given = {}
            else:
                raise SuiteError(f"{path}:{number}: needs 'program' (source text) or 'code' and 'input'")
        except ProgramError as exc:
            raise SuiteError(f"{path}:{number}: {exc}") from None
        cases.append(Case(ident, program, metadata, given))
    if not cases:
        raise SuiteError(f"{path}: no programs in it")
    return cases


MAX_COUNT = 10_000  # --count for s5 and zoo (programs per cell)
MAX_SWAPS = 4096  # s5 --n: Meta's figures stop at 128
MAX_DEPTH = 64  # zoo --depth


def s5_cases(lengths: list[int], count: int, seed: int) -> list[Case]:
    from ..suites import s5  # the generator shared with the bundled model's training data

    if min(lengths) < 1:
        raise SuiteError("--n must be at least 1")
    if max(lengths) > MAX_SWAPS:
        raise SuiteError(f"--n: at most {MAX_SWAPS} swaps (a trace of {MAX_SWAPS} is already far longer than any model's context)")
    return [_generated_case(p) for p in s5.generate(lengths, count, seed)]


def zoo_cases(depths: list[int], count: int, seed: int, types: list[str] | None = None) -> list[Case]:
    from ..suites import zoo

    if min(depths) < 1:
        raise SuiteError("--depth must be at least 1")
    if max(depths) > MAX_DEPTH:
        raise SuiteError(f"--depth: at most {MAX_DEPTH} (Meta's figures stop at 5)")
    unknown = [t for t in types or () if t not in zoo.TYPES]
    if unknown:
        raise SuiteError(f"unknown zoo type {unknown[0]!r} (types: {', '.join(zoo.TYPES)})")
    chosen = tuple(types) if types else zoo.TYPES
    return [_generated_case(p) for p in zoo.generate(types=chosen, depths=depths, count=count, seed=seed)]


def _generated_case(program) -> Case:
    """A case from a :class:`cwmtui.suites.SuiteProgram` (a Program with ``id`` and ``meta``)."""
    return Case(program.id, program, dict(program.meta))
