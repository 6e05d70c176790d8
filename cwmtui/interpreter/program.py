"""A program to trace: its source (what the model sees and what runs) and its entry function."""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass

from ..files import read_text

#: a program far larger than any model's context (CWM reads 131,072 tokens)
MAX_PROGRAM_BYTES = 16 << 20
from ..trace import tokens
from ..trace.source import source_lines

NO_ENTRY_HELP = (
    "no entry function: add '# << START_OF_TRACE' to the def line of the function to trace, "
    "or pass --entry NAME (and --call EXPR if the file does not call it)"
)


class ProgramError(Exception):
    """Bad input, explained in one line for the user."""


@dataclass(frozen=True)
class Program:
    path: str  # file name the code is compiled under (shown to the user)
    source: str  # the context the model sees; it is also what runs (the marker is a comment)
    entry: str  # the entry function's name (its code object's co_name)
    entry_line: int  # 1-based line of the entry's def (it carries the marker)
    entry_firstlineno: int  # co_firstlineno: the first decorator line, else the def line
    call: str | None = None  # evaluated in the program's globals after its module code ran

    @property
    def lines(self) -> list[str]:
        return source_lines(self.source)

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "source": self.source,
            "entry": self.entry,
            "entry_line": self.entry_line,
            "entry_firstlineno": self.entry_firstlineno,
            "call": self.call,
        }

    @classmethod
    def from_json(cls, data: dict) -> "Program":
        """The program of :meth:`to_json`; TypeError for a field of the wrong type (a damaged file)."""
        program = cls(**data)
        for name, kind in (("path", str), ("source", str), ("entry", str), ("entry_line", int),
                           ("entry_firstlineno", int), ("call", (str, type(None)))):
            value = getattr(program, name)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise TypeError(f"the program's {name} is {type(value).__name__}")
        return program


def read_source(path: str) -> str:
    """The file's text, or a ProgramError that says what is wrong with it."""
    return read_text(path, "Python file", ProgramError, MAX_PROGRAM_BYTES)


def load_program(path: str, entry: str | None = None, call: str | None = None) -> Program:
    return program_from_source(read_source(path), path, entry=entry, call=call)


def cruxeval_program(code: str, call_input: str, path: str = "<cruxeval>") -> Program:
    """The CRUXEval wrapper of Meta's harness (spec §8): ``"\\n" + code + "\\n" + main``."""
    source = "\n" + code + "\ndef main():" + tokens.START_MARKER + "\n    return f(" + call_input + ")\n"
    return program_from_source(source, path, call="main()")


def program_from_source(
    source: str, path: str = "<program>", entry: str | None = None, call: str | None = None
) -> Program:
    source = source.replace("\r\n", "\n").replace("\r", "\n")
    if source and not source.endswith("\n"):
        source += "\n"
    tree = _parse(source, path)
    functions = _functions(tree)
    lines = source_lines(source)
    marked = [f for f in functions if tokens.has_marker(lines[f[1].lineno - 1])]
    if entry is not None:
        # the qualified name first (``f``, ``Class.method``), then the bare name if unique
        chosen = [f for f in functions if f[0] == entry] or [f for f in functions if f[1].name == entry]
        if not chosen:
            names = ", ".join(sorted({f[0] for f in functions})) or "none"
            raise ProgramError(f"{path}: no function named {entry!r} (functions: {names})")
        if len(chosen) > 1:
            names = ", ".join(f"{f[0]} (line {f[1].lineno})" for f in chosen)
            raise ProgramError(f"{path}: --entry {entry} is ambiguous: {names}; pass the qualified name")
        node = chosen[0][1]
        lines = [tokens.strip_marker(line) for line in lines]
        lines[node.lineno - 1] = _mark(lines[node.lineno - 1])
        source = "".join(lines)
    elif marked:
        if len(marked) > 1:
            where = ", ".join(str(f[1].lineno) for f in marked)
            raise ProgramError(f"{path}: START_OF_TRACE marks more than one function (lines {where})")
        node = marked[0][1]
    elif call is not None:
        _check_expression(call)
        taken = {f[1].name for f in functions}
        name = "main" if "main" not in taken else "_cwmtui_main"
        source += f"\ndef {name}():{tokens.START_MARKER}\n    return {call}\n"
        return program_from_source(source, path, call=f"{name}()")
    else:
        raise ProgramError(f"{path}: {NO_ENTRY_HELP}")
    if call is not None:
        _check_expression(call)
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    return Program(path, source, node.name, node.lineno, first, call)


def _mark(line: str) -> str:
    return line.rstrip("\n").rstrip() + tokens.START_MARKER + "\n"


def _parse(source: str, path: str) -> ast.Module:
    try:
        return ast.parse(source, filename=path)
    except SyntaxError as exc:
        where = f" on line {exc.lineno}" if exc.lineno else ""  # null bytes have no line
        raise ProgramError(f"{path}: syntax error{where}: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ProgramError(f"{path}: cannot parse it ({_parse_failure(exc)})") from None


def _parse_failure(exc: Exception) -> str:
    # absurd nesting overflows the parser's stack: a RecursionError, or a MemoryError with no text
    return "nested too deeply" if isinstance(exc, (RecursionError, MemoryError)) else str(exc)


def _walk_own_scope(tree: ast.AST):
    """The nodes of *tree* evaluated in its own function: a lambda's defaults but not its body, a
    generator expression's first iterable but not the rest (they run in scopes of their own)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.Lambda):
            stack.extend(node.args.defaults)
            stack.extend(default for default in node.args.kw_defaults if default is not None)
        elif isinstance(node, ast.GeneratorExp):
            stack.append(node.generators[0].iter)
        else:
            stack.extend(ast.iter_child_nodes(node))


def _check_expression(call: str) -> None:
    shown = call if len(call) <= 80 else call[:77] + "..."
    try:
        tree = ast.parse(call, mode="eval")
    except SyntaxError as exc:
        raise ProgramError(f"--call {shown!r} is not a Python expression: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ProgramError(f"--call {shown!r}: cannot parse it ({_parse_failure(exc)})") from None
    # the call runs as ``return CALL`` in a function of its own, which a yield or an await would
    # turn into a generator or a coroutine that never runs the entry
    if any(isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await)) or getattr(node, "is_async", False)
           for node in _walk_own_scope(tree)):
        raise ProgramError(f"--call {shown!r}: a call cannot yield or await; call the entry directly")


def _functions(tree: ast.AST) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function in the file with its qualified name (``Class.method``), in line order."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((prefix + child.name, child))
                walk(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")
            elif not isinstance(child, ast.expr):  # a def is a statement: expressions, however
                walk(child, prefix)  # deeply nested, hold none (and would exhaust the stack)

    walk(tree, "")
    found.sort(key=lambda f: f[1].lineno)
    return found


def display_name(path: str) -> str:
    return os.path.basename(path) if path and not path.startswith("<") else path
