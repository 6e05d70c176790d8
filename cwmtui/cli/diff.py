"""``cwmtui diff``: the interpreter's trace and the model's side by side, headless.

Prints both timelines (step, action, interpreter state, model state, status), the first
divergence with a paragraph that explains it, and with ``--override STEP[:LINE]`` the recovery
after one intervention. ``--json`` prints one object instead. Exit 0 when the traces agree, 1
when they diverge, 2 on errors.
"""

from __future__ import annotations

import json
import sys

from ..interpreter import Interpreter
from ..terminal import printable, printable_block
from ..trace import Event, Status, tokens
from . import UsageError
from .options import Parser, add_limit_options, check_called, check_output, limits_from, program_from, warn, warn_sandbox

SHOWN_ROWS = 60  # rows of the table without --all


def build_parser() -> Parser:
    from .model_options import add_model_options

    parser = Parser(
        prog="cwmtui diff",
        description="Compare the real interpreter's trace of a program with a world model's, step by step.",
    )
    parser.add_argument("program", nargs="?", help="the Python file (optional with --replay: the record holds its program)")
    parser.add_argument("--entry", metavar="NAME", help="the function to trace (default: the one marked '# << START_OF_TRACE')")
    parser.add_argument("--call", metavar="EXPR", help="expression to evaluate after the module ran, e.g. \"f('r')\"")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--save", metavar="SESSION.json", help="save the session (program, truth, rollouts) to reopen it later")
    parser.add_argument("--teacher-force", action="store_true", help="force every action from the truth: the model predicts states only")
    parser.add_argument("--override", metavar="STEP[:LINE]", help="replace the model's action at STEP with source line LINE (default: the real next line) and report the recovery")
    parser.add_argument("--all", action="store_true", help=f"show every step (default: at most {SHOWN_ROWS} rows around the first divergence)")
    add_model_options(parser)
    add_limit_options(parser)
    return parser


def parse_override(text: str) -> tuple[int, int | None]:
    step_text, _, line_text = text.partition(":")
    try:
        step = int(step_text)
        line = int(line_text) if line_text else None
    except ValueError:
        raise UsageError(f"--override {text!r}: expected STEP or STEP:LINE (numbers), e.g. --override 12 or 12:5") from None
    if step < 1:
        raise UsageError("--override: step 0 is the entry call, forced from the truth; pick a later step")
    return step, line


def run(args) -> int:
    from ..model.backend import ModelError
    from .model_options import backend_from_args, rollout_options_from_args
    from ..session import DebugSession, SessionError

    if args.program is None and not args.replay:
        raise UsageError("give a PROGRAM to compare (or --replay FILE.jsonl --id ID)")
    override = parse_override(args.override) if args.override else None
    if args.teacher_force and override:
        raise UsageError("--teacher-force and --override are separate experiments: pick one")
    limits = limits_from(args)
    if args.save is not None:
        check_output(args.save, "--save", (args.program, args.replay))
    try:
        backend = backend_from_args(args)
        warn(backend.warning)
    except ModelError as exc:
        raise UsageError(str(exc)) from None
    with backend:
        if args.program is not None:
            program = program_from(args)
        else:
            program = backend.program
        if (args.teacher_force or override) and not backend.can_generate:
            what = "--teacher-force" if args.teacher_force else "--override"
            raise UsageError(f"{what} needs a live model: this is a replay of a recorded generation")
        with Interpreter() as interpreter:
            warn(interpreter.warning)
            warn_sandbox(limits)
            session = DebugSession(program, backend, rollout_options_from_args(args), limits, interpreter=interpreter)
            truth = session.run_truth()
            check_called(truth, program)
            if not truth.frames:  # the entry ran, but no step of it was recorded: the run's fault, not the input's
                print(printable(
                    f"cwmtui: {program.path}: the interpreter recorded no step of {program.entry}() "
                    f"({truth.status.describe()}): nothing to compare"
                ), file=sys.stderr)
                return 1
            try:
                if args.teacher_force:
                    branch = session.teacher_forced()
                else:
                    branch = session.run_main()
                extra = None
                if override is not None:
                    extra = _override(session, branch, *override)
            except (ModelError, SessionError) as exc:
                raise UsageError(str(exc)) from None
        if args.save is not None:
            try:
                session.save(args.save)
            except SessionError as exc:
                raise UsageError(str(exc)) from None
        if args.json:
            _print_json(session, branch, extra, args)
        else:
            _print_rich(session, branch, extra, args)
    if truth.status.kind not in (Status.COMPLETE, Status.RAISED):
        print(printable(f"cwmtui: the interpreter's trace is partial: {truth.status.describe()}"), file=sys.stderr)
    return 0 if branch.comparison.verdict == "agree" else 1


def _override(session, branch, step: int, line: int | None):
    if step > len(branch.frames):
        raise UsageError(f"--override {step}: the model's trace has only {len(branch.frames)} steps")
    if line is None:
        if step >= len(session.truth.frames):
            raise UsageError(f"--override {step}: the interpreter's trace has only {len(session.truth.frames)} steps; give a LINE")
        return session.override_with_truth(branch, step)
    lines = session.program.lines
    if not 1 <= line <= len(lines):
        raise UsageError(f"--override {step}:{line}: the program has lines 1..{len(lines)}")
    action = tokens.strip_marker(lines[line - 1])
    if not action.strip():
        raise UsageError(f"--override {step}:{line}: line {line} is blank")
    return session.override(branch, step, action=action)


# -- output ---------------------------------------------------------------------------------------


def _print_json(session, branch, extra, args) -> None:
    comparison = branch.comparison
    data = comparison.to_json()
    data["condition"] = "teacher-forced" if args.teacher_force else "free"
    data["tokens"] = dict(branch.tokens)
    data["model"] = {"name": session.model_name, "description": session.model_description}
    data["program"] = {"path": session.program.path, "entry": session.program.entry}
    data["truth"] = {"status": session.truth.status.kind.value, "frames": len(session.truth.frames)}
    if args.teacher_force:
        data["forced_steps"] = branch.forced_steps
    if extra is not None:
        data["recovery"] = extra.recovery.to_json() if extra.recovery else None
        data["branch"] = {
            "name": extra.name,
            "intervention": extra.intervention.to_json() if extra.intervention is not None else None,
            "verdict": extra.comparison.verdict,
            "first_divergence": extra.comparison.first_divergence.to_json() if extra.comparison.first_divergence else None,
            "tokens": dict(extra.tokens),
        }
    sys.stdout.write(json.dumps(data) + "\n")


_KIND_STYLE = {
    "match": ("✓", "green"),
    "state": ("state", "bold red"),
    "action": ("action", "bold magenta"),
    "event": ("event", "bold magenta"),
    "value": ("value", "bold red"),
    "format": ("format", "bold red"),
    "missing": ("missing", "yellow"),
    "extra": ("extra", "yellow"),
    "pending": ("…", "dim"),
    "unchecked": ("?", "dim"),
}


def _print_rich(session, branch, extra, args) -> None:
    from rich.text import Text

    from .console import TerminalConsole

    console = TerminalConsole()
    comparison = branch.comparison
    condition = "teacher-forced" if args.teacher_force else "free-running"
    console.print(
        Text.assemble(
            ("program ", "dim"), (printable(session.program.path), "bold"), ("  model ", "dim"),
            (printable(session.model_description or session.model_name or "?"), "bold"),
            ("  rollout ", "dim"), (condition, "bold"),
        )
    )
    console.print(diff_table(comparison, show_all=args.all))
    _print_summary(console, session, branch)
    if extra is not None:
        console.print()
        what = extra.intervention
        action = (what.action or "").rstrip("\n") if what is not None else ""
        console.print(Text.assemble(("override ", "bold"), (f"at step {extra.at_step}: ", ""), (repr(action), "cyan"), (f" ({what.source if what else None})", "dim")))
        if extra.recovery is not None:
            console.print(Text("recovery: " + extra.recovery.describe(), style="bold green" if extra.recovery.recovered_at is not None else "bold red"))
            if extra.recovery.first_divergence is not None:
                console.print(Text(printable_block(extra.recovery.first_divergence.explanation)))


def _print_summary(console, session, branch) -> None:
    from rich.text import Text

    comparison = branch.comparison
    tokens_line = f"tokens: {branch.tokens.get('trace', 0)} in the trace, {branch.tokens.get('processed', 0)} processed"
    if comparison.verdict == "agree":
        console.print(Text(f"The model's trace agrees with the interpreter's ({len(session.truth.frames)} steps). ", style="bold green") + Text(tokens_line, style="dim"))
        return
    first = comparison.first_divergence
    console.print(Text.assemble(("first divergence: ", "bold"), (f"step {first.step}", "bold red"), (f" · {first.kind} · {first.regime}", "bold"), ("   " + tokens_line, "dim")))
    console.print(Text(printable_block(first.explanation)))
    if first.string_valued:
        lens = session.lens(branch) if _lens_is_meaningful(session) else None
        if lens is not None:
            console.print(lens_text(lens, getattr(session.backend, "lens_label", None) or session.model_name))


def _lens_is_meaningful(session) -> bool:
    """A replay without --tokenizer counts bytes, not the recorded model's tokens: no lens
    (unless --lens-tokenizer names the tokens to show)."""
    if getattr(session.backend, "lens_tokenizer", None) is not None:
        return True
    return "byte counts" not in (session.model_description or "")


def lens_text(lens, model: str):
    from rich.text import Text

    text = Text(f"token lens ({model or 'tokenizer'}):\n", style="dim")
    for label, pieces in (("  expected  ", lens.expected), ("  predicted ", lens.predicted)):
        text.append(label, style="dim")
        for piece in pieces:
            text.append(printable(piece.text), style="bold white on red" if piece.differs else "reverse dim")
            text.append("│", style="dim")
        text.append("\n")
    return text


def _state_text(frame, marked: set[str], style: str, width: int = 48):
    from rich.text import Text

    if frame is None:
        return Text("—", style="dim")
    if frame.event is None or frame.error is not None:
        return Text(f"✗ {frame.error}: {printable((frame.raw or '')[:width])}", style="bold red")
    if frame.event in (Event.RETURN, Event.EXCEPTION):
        arrow = "→ " if frame.event is Event.RETURN else "raises "
        return Text(arrow + printable(frame.arg or ""), style=style if marked else "")
    text = Text()
    for i, (key, value) in enumerate((frame.locals or {}).items()):
        if i:
            text.append(", ")
        shown = printable(value if len(value) <= width else value[: width - 1] + "…")
        hit = key in marked
        text.append(f"{printable(key)}=", style=style if hit else "dim")
        text.append(shown, style=style if hit else "")
    return text


def diff_table(comparison, show_all: bool = False):
    """The side-by-side rich table of a comparison."""
    from rich.table import Table
    from rich.text import Text

    steps = comparison.steps
    table = Table(expand=True, title=f"{comparison.verdict}: interpreter vs model", title_justify="left")
    table.add_column("step", justify="right", no_wrap=True)
    table.add_column("line", justify="right", no_wrap=True)
    table.add_column("action", overflow="fold", ratio=3)
    table.add_column("interpreter", overflow="fold", ratio=4)
    table.add_column("model", overflow="fold", ratio=4)
    table.add_column("status", no_wrap=True)
    rows = list(range(len(steps)))
    if not show_all and len(rows) > SHOWN_ROWS:
        first = comparison.first_divergence.step if comparison.first_divergence else 0
        start = max(0, min(first - 20, len(rows) - SHOWN_ROWS))
        rows = rows[start : start + SHOWN_ROWS]
    previous = None
    for index in rows:
        if previous is not None and index != previous + 1 or previous is None and index > 0:
            table.add_row("…", "", Text(f"{index - (previous + 1 if previous is not None else 0)} steps not shown (--all shows them)", style="dim"), "", "", "")
        previous = index
        row = steps[index]
        truth, model = row.truth, row.model
        label, style = _KIND_STYLE[row.kind.value]
        step = str(row.step)
        if row.truth_index != row.step or row.model_index != row.step:
            step += f" ({_idx(row.truth_index)}/{_idx(row.model_index)})"
        lineno = (truth.lineno if truth is not None else None) or (model.lineno if model is not None else None)
        action = Text()
        reference = truth or model
        indent = "  " * (reference.depth if reference is not None else 0)
        if truth is not None and model is not None and row.kind.value in ("action", "event", "format"):
            action.append(indent + _action(truth) + "\n", style="")
            action.append(indent + "model: " + _action(model), style="bold magenta")
        elif reference is not None:
            action.append(indent + _action(reference), style="" if truth is not None else "dim")
        wrong = {v.name for v in row.variables}
        changed_truth = row.changed if truth is not None and truth.event is Event.LINE else set()
        if truth is not None and truth.event in (Event.RETURN, Event.EXCEPTION) and wrong:
            changed_truth = {"return"}
        table.add_row(
            step,
            str(lineno or ""),
            action,
            _state_text(truth, changed_truth, "bold yellow"),
            _state_text(model, wrong, "bold red"),
            Text(label, style=style),
        )
    remaining = len(steps) - 1 - (previous if previous is not None else -1)
    if remaining > 0:
        table.add_row("…", "", Text(f"{remaining} more steps (--all shows them)", style="dim"), "", "", "")
    return table


def _idx(value) -> str:
    return "—" if value is None else str(value)


def _action(frame) -> str:
    if frame.event is None:
        return "(malformed frame)"
    event = frame.event.value
    text = printable(frame.action.rstrip("\n")) if frame.action else ""
    if frame.event is Event.CALL:
        return f"call {text.strip()}"
    if frame.event is Event.RETURN:
        return f"return · {text.strip()}"
    if frame.event is Event.EXCEPTION:
        return f"exception · {text.strip()}"
    return text.strip() if event == "line" else f"{event} {text.strip()}"
