"""Where a source line sits in a program: line numbers and scopes for parsed frames.

A model writes actions as source text; this maps them back to line numbers by position (the
code object of the current scope, and the line reached before), not by the first text match.
"""

from __future__ import annotations

import io
import re
import types
from dataclasses import dataclass

from .tokens import strip_marker

# CO_GENERATOR | CO_COROUTINE | CO_ITERABLE_COROUTINE | CO_ASYNC_GENERATOR
_RESUMABLE = 0x20 | 0x80 | 0x100 | 0x200
_DEF_NAME = re.compile(r"^\s*(?:async\s+)?def\s+([A-Za-z_]\w*)|^\s*class\s+([A-Za-z_]\w*)")


def source_lines(source: str) -> list[str]:
    """The program's physical lines with their ends, numbered as Python numbers them: split at
    ``\n``, ``\r\n`` and ``\r`` only (``str.splitlines`` also splits at a form feed or a U+2028,
    which may sit inside a line or a string literal)."""
    return io.StringIO(source, newline="").readlines()


@dataclass(slots=True)
class Scope:
    """A code object of the program: a function, lambda, comprehension or class body."""

    name: str
    firstlineno: int
    lines: frozenset[int]
    varnames: tuple[str, ...]  # every local name: co_varnames, then cell and free variables
    generator: bool = False  # a generator (or coroutine): it is resumed by a CALL mid-body

    def fits(self, names) -> bool:
        """Could a frame of this code object show exactly these local names?"""
        return all(n in self.varnames for n in names)


class SourceMap:
    def __init__(self, source: str) -> None:
        self.lines = source_lines(source)
        self._by_text: dict[str, list[int]] = {}
        for number, line in enumerate(self.lines, start=1):
            self._by_text.setdefault(_key(line), []).append(number)
        self.scopes: list[Scope] = []
        try:
            code = compile(source, "<cwmtui>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            code = None
        if code is not None:
            self._collect(code)

    def _collect(self, code: types.CodeType) -> None:
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                lines = frozenset(n for _, _, n in const.co_lines() if n is not None)
                names = const.co_varnames + const.co_cellvars + const.co_freevars
                resumable = bool(const.co_flags & _RESUMABLE)
                self.scopes.append(
                    Scope(const.co_name, const.co_firstlineno, lines, names, resumable)
                )
                self._collect(const)

    def action_lines(self) -> list[int]:
        """The lines a trace can show as an action: those of the program's functions, lambdas,
        comprehensions and class bodies that hold code, and where each starts (its ``def``). A
        docstring, a comment or a line inside a multi-line string is none (all lines of a
        program that does not compile)."""
        if not self.scopes:
            return [n for n, line in enumerate(self.lines, start=1) if line.strip()]
        numbers: set[int] = set()
        for scope in self.scopes:
            numbers |= scope.lines
            numbers.add(scope.firstlineno)
        return sorted(n for n in numbers if 1 <= n <= len(self.lines) and self.lines[n - 1].strip())

    def line(self, lineno: int) -> str:
        """The physical source line ``lineno`` (1-based) with its newline, or ``""``."""
        if 1 <= lineno <= len(self.lines):
            return self.lines[lineno - 1]
        return ""

    def candidates(self, action: str) -> list[int]:
        return self._by_text.get(_key(action), [])

    def enter(self, action: str, names) -> tuple[int | None, Scope | None]:
        """The line and code object of a CALL frame whose action is ``action``.

        A call starts at a code object's first line (its ``def``, first decorator, or the line
        holding a lambda or comprehension); a generator's resumption is a CALL at the line it
        was suspended on. Among several candidates the one whose local names fit wins.
        """
        candidates = self.candidates(action)
        if not candidates:
            return None, None
        starts = [(n, s) for n in candidates for s in self.scopes if s.firstlineno == n]
        resumes = [(n, s) for n in candidates for s in self.scopes if s.generator and n in s.lines]
        for pool in (starts, resumes):
            for lineno, scope in pool:
                if scope.fits(names):
                    return lineno, scope
        for pool in (starts, resumes):
            if pool:
                return pool[0]
        return candidates[0], None

    def function_name(self, scope: Scope | None, action: str) -> str:
        if scope is not None:
            return scope.name
        match = _DEF_NAME.match(action)
        if match:
            return match.group(1) or match.group(2)
        return "?"

    def locate(
        self, action: str, scope: Scope | None, previous: int | None, call: bool, same: bool
    ) -> int | None:
        """The line number of ``action``, from the scope it runs in and the line before it.

        ``same`` says the action most likely repeats the previous line (a return or exception
        happens on the line that just ran).
        """
        candidates = self.candidates(action)
        if not candidates:
            return None
        if len(candidates) == 1:
            return candidates[0]
        if call:
            starts = {s.firstlineno for s in self.scopes}
            in_scope = [n for n in candidates if n in starts]
        elif scope is not None:
            in_scope = [n for n in candidates if n in scope.lines]
        else:
            in_scope = []
        pool = in_scope or candidates
        if previous is not None:
            if same and previous in pool:
                return previous
            after = [n for n in pool if n > previous]
            if after:
                return after[0]
        return pool[0]


def _key(line: str) -> str:
    return strip_marker(line).rstrip("\n")
