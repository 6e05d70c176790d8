"""Where a source line sits in a program: line numbers and scopes for parsed frames.

A model writes actions as source text; this maps them back to line numbers by position (the
code object of the current scope, and the line reached before), not by the first text match.
"""

from __future__ import annotations

import re
import types
from dataclasses import dataclass

from .tokens import strip_marker

_DEF_NAME = re.compile(r"^\s*(?:async\s+)?def\s+([A-Za-z_]\w*)|^\s*class\s+([A-Za-z_]\w*)")


@dataclass(slots=True)
class Scope:
    """A code object of the program: a function, lambda, comprehension or class body."""

    name: str
    firstlineno: int
    lines: frozenset[int]
    varnames: tuple[str, ...]


class SourceMap:
    def __init__(self, source: str) -> None:
        self.lines = source.splitlines(keepends=True)
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
                self.scopes.append(
                    Scope(const.co_name, const.co_firstlineno, lines, const.co_varnames)
                )
                self._collect(const)

    def line(self, lineno: int) -> str:
        """The physical source line ``lineno`` (1-based) with its newline, or ``""``."""
        if 1 <= lineno <= len(self.lines):
            return self.lines[lineno - 1]
        return ""

    def candidates(self, action: str) -> list[int]:
        return self._by_text.get(_key(action), [])

    def scope_at_call(self, lineno: int | None, action: str, names: list[str]) -> Scope | None:
        """The code object a CALL frame at ``lineno`` enters (by first line, then by locals)."""
        if lineno is None:
            return None
        found = [s for s in self.scopes if s.firstlineno == lineno]
        if len(found) > 1:
            # A lambda and a comprehension on one line: prefer the one whose names fit.
            fitting = [s for s in found if all(n in s.varnames for n in names)]
            found = fitting or found
        if found:
            return found[0]
        return None

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
