"""Demo scripts: the steps a demo that plays itself goes through, read as data (TOML).

``cwmtui PROGRAM --demo [FILE]`` plays one in the debugger (``ui/demo.py``); without FILE it is
the ``STEM.demo.toml`` beside the program (``samples/strings.demo.toml`` for
``samples/strings.py``). A script is a title, a default pause and a list of steps::

    title = "String-valued state"
    pause = 6                  # seconds a caption stays once its step is done (default 6)

    [[step]]
    do = "wait"                # what the debugger does (below)
    say = "The model writes its trace, one frame at a time."   # the caption while it does it

    [[step]]
    do = "override"
    line = "real"              # the interpreter's line at the selected step (or a line number)
    say = "We give the model the real line at step {step} and let it run on."
    expect = "not recovered"   # what the script claims; the caption says so if this run differs
    pause = 10                 # this step's own pause

What each ``do`` does (each is one of the debugger's own actions, as its key would):

``open``             wait for the program's run under the interpreter (the screen has a truth)
``wait``             wait until the model has stopped writing
``first-divergence`` select the first divergence of the branch on show (f)
``next-divergence``  select the next divergence (d)
``go-to``            select step ``step`` (a number; negative counts from the end) (:)
``state``            put the focus on the state panel (tab), to point at it
``play``             play the trace step by step, until it stops (p)
``override``         override the model's line at the selected step with ``line`` ("real", the
                     default, or a source line number) through the override dialog (o), and
                     wait for the new branch
``teacher-force``    the teacher-forced rollout (t; ``frames = true``: whole frames, T), and wait
``branch``           show another branch: ``to`` = "main", "next", "previous" or a branch's name
``say``              nothing: the caption alone

A caption may name what is on screen in braces: {program}, {model}, {step} (the selected
step), {branch}, {divergence} ("step 3 · action hallucination"), {regime}, {variables},
{truth_line} and {model_line} (the two sides' lines at the selected step), {badge} (how the
branch's intervention turned out: "recovered at step 7") and {ending} (how the model's trace
ended); ``{{`` and ``}}`` are braces. ``expect`` ("recovered", "not recovered", "diverges",
"agrees") is checked against the branch on show once the step is done.

Nothing in a script is run: it is parsed as data, and a bad one is refused in one line.
"""

from __future__ import annotations

import math
import os
import string
import tomllib
from dataclasses import dataclass, replace

#: what a step can do, and the keys each takes besides do, say, pause and expect
ACTIONS: dict[str, frozenset[str]] = {
    "open": frozenset(),
    "wait": frozenset(),
    "first-divergence": frozenset(),
    "next-divergence": frozenset(),
    "go-to": frozenset({"step"}),
    "state": frozenset(),
    "play": frozenset(),
    "override": frozenset({"line"}),
    "teacher-force": frozenset({"frames"}),
    "branch": frozenset({"to"}),
    "say": frozenset(),
}
#: what a caption may name in braces (the player fills them from the screen)
PLACEHOLDERS = frozenset({"program", "model", "step", "branch", "divergence", "regime", "variables",
                          "truth_line", "model_line", "badge", "ending"})
#: what ``expect`` may claim about the branch on show
EXPECTATIONS = frozenset({"recovered", "not recovered", "diverges", "agrees"})
DEFAULT_PAUSE = 6.0
SUFFIX = ".demo.toml"


class DemoScriptError(Exception):
    """A script that cannot be played, in one line (the file and the step named)."""


@dataclass(frozen=True)
class DemoStep:
    do: str
    say: str
    pause: float
    expect: str | None = None
    line: str | int = "real"  # override: "real" or a source line number
    step: int = 0  # go-to
    to: str = "next"  # branch
    frames: bool = False  # teacher-force: whole frames

    def caption(self, values: dict[str, str]) -> str:
        """The caption with the screen's values in its braces (checked when it was read)."""
        return self.say.format_map(values)


@dataclass(frozen=True)
class DemoScript:
    path: str
    title: str
    steps: tuple[DemoStep, ...]


def script_beside(program_path: str) -> str:
    """Where the demo of a program is looked for: ``STEM.demo.toml`` beside it."""
    folder, name = os.path.split(program_path)
    stem = name[:-3] if name.endswith(".py") else os.path.splitext(name)[0]
    return os.path.join(folder, stem + SUFFIX)


def read_demo(path: str) -> DemoScript:
    """Read and check a demo script; :class:`DemoScriptError` in one line if it is not one."""
    from .files import read_bytes

    raw = read_bytes(path, "demo script", DemoScriptError, limit=1 << 20)  # (a device, a pipe: refused)
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise DemoScriptError(f"{path}: not a demo script (TOML: {_one_line(exc)})") from None
    return script_from(data, path)


def script_from(data: dict, path: str = "<demo>") -> DemoScript:
    """The script in ``data`` (a parsed TOML document), checked."""
    unknown = sorted(set(data) - {"title", "pause", "step"})
    if unknown:
        raise DemoScriptError(f"{path}: unknown key {unknown[0]!r} (a script has title, pause and [[step]] tables)")
    title = data.get("title", "")
    if not isinstance(title, str):
        raise DemoScriptError(f"{path}: title must be a string")
    pause = _pause(data.get("pause", DEFAULT_PAUSE), f"{path}: pause")
    steps = data.get("step")
    if not isinstance(steps, list) or not steps or not all(isinstance(s, dict) for s in steps):
        raise DemoScriptError(f"{path}: no steps (write each as a [[step]] table with do and say)")
    return DemoScript(path, title, tuple(_step(s, f"{path}: step {n}", pause) for n, s in enumerate(steps, 1)))


def _step(data: dict, where: str, default_pause: float) -> DemoStep:
    do = data.get("do")
    if do is None:
        raise DemoScriptError(f"{where} has no do (one of: {', '.join(ACTIONS)})")
    if not isinstance(do, str) or do not in ACTIONS:
        raise DemoScriptError(f"{where}: do = {do!r} is not an action (one of: {', '.join(ACTIONS)})")
    allowed = {"do", "say", "pause", "expect"} | ACTIONS[do]
    unknown = sorted(set(data) - allowed)
    if unknown:
        takes = f" ({do} takes {', '.join(sorted(ACTIONS[do]))})" if ACTIONS[do] else ""
        raise DemoScriptError(f"{where}: unknown key {unknown[0]!r} for {do}{takes}")
    say = data.get("say")
    if not isinstance(say, str) or not say.strip():
        raise DemoScriptError(f"{where}: say must be the caption (a non-empty string)")
    _check_placeholders(say, where)
    expect = data.get("expect")
    if expect is not None and expect not in EXPECTATIONS:
        raise DemoScriptError(f"{where}: expect = {expect!r} (one of: {', '.join(sorted(EXPECTATIONS))})")
    step = DemoStep(do, say.strip(), _pause(data.get("pause", default_pause), f"{where}: pause"), expect)
    if "line" in data:
        line = data["line"]
        if not (line == "real" or type(line) is int and line >= 1):
            raise DemoScriptError(f"{where}: line must be \"real\" or a source line number (1 or more)")
        step = replace(step, line=line)
    if do == "go-to":
        if type(data.get("step")) is not int:
            raise DemoScriptError(f"{where}: go-to needs step = N (a number; negative counts from the end)")
        step = replace(step, step=data["step"])
    if "to" in data:
        if not isinstance(data["to"], str) or not data["to"]:
            raise DemoScriptError(f"{where}: to must be \"main\", \"next\", \"previous\" or a branch's name")
        step = replace(step, to=data["to"])
    if "frames" in data:
        if not isinstance(data["frames"], bool):
            raise DemoScriptError(f"{where}: frames must be true or false")
        step = replace(step, frames=data["frames"])
    return step


def check_lines(script: DemoScript, source: str, program: str) -> None:
    """The source lines the script's overrides name are lines of ``source`` the model can be
    given (what the override dialog offers: no blank, comment or docstring line); raises
    :class:`DemoScriptError` in one line, before the demo starts, if not."""
    from .trace.source import SourceMap

    runnable: list[int] | None = None
    count = len(source.splitlines())
    for number, step in enumerate(script.steps, 1):
        if type(step.line) is not int:
            continue
        if runnable is None:
            runnable = sorted(SourceMap(source).action_lines())
        where = f"{script.path}: step {number}"
        if step.line > count:
            raise DemoScriptError(f"{where}: line {step.line} is past the end of {program} ({count} lines)")
        if step.line not in runnable:
            raise DemoScriptError(f"{where}: line {step.line} of {program} is not a line the model can be given "
                                  f"(a blank, comment or docstring line; it can be given {_ranges(runnable)})")


def _ranges(numbers: list[int]) -> str:
    """``[1, 2, 3, 5]`` as ``"1-3, 5"``."""
    runs: list[str] = []
    start = previous = None
    for n in numbers + [None]:
        if n is not None and previous is not None and n == previous + 1:
            previous = n
            continue
        if start is not None:
            runs.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = n
    return ", ".join(runs) or "none"


def _pause(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 <= value < math.inf):
        raise DemoScriptError(f"{where} must be a number of seconds (0 or more)")
    return float(value)


def _check_placeholders(text: str, where: str) -> None:
    """Only the known names, in plain braces: no attribute, index, conversion or format."""
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise DemoScriptError(f"{where}: say: {exc} (write {{{{ and }}}} for braces)") from None
    for _literal, name, spec, conversion in fields:
        if name is None:
            continue
        if name not in PLACEHOLDERS or spec or conversion:
            shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            raise DemoScriptError(f"{where}: say names {shown}, which is not on screen "
                                  f"(one of: {', '.join('{' + p + '}' for p in sorted(PLACEHOLDERS))})")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
