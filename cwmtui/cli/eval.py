"""``cwmtui eval``: run a model over a benchmark suite and print the paper's tables."""

from __future__ import annotations

import argparse
import json
import sys
import threading

from . import UsageError
from ..terminal import printable
from .console import TerminalConsole
from .options import Parser, add_sandbox_option, check_output, warn, warn_sandbox

SUITE_HELP = "cruxeval, s5, zoo, a directory of .py files, or a JSONL of {id, program | code+input}"


def _numbers(option: str, text: str) -> list[int]:
    try:
        values = [int(part) for part in text.replace(",", " ").split()]
    except ValueError:
        raise UsageError(f"{option}: expected whole numbers, got {text!r}") from None
    if not values or min(values) < 1:
        raise UsageError(f"{option}: expected positive whole numbers, got {text!r}")
    return values


def build_parser() -> Parser:
    from .model_options import add_model_options

    parser = Parser(
        prog="cwmtui eval",
        description="Run a model over a suite of programs, compare every trace with the interpreter's, print the tables.",
    )
    parser.add_argument("suite", nargs="?", help=SUITE_HELP)
    parser.add_argument("--n", nargs="+", metavar="N", help="s5: numbers of swaps (default 8 16 32 64 128)")
    parser.add_argument("--depth", nargs="+", metavar="D", help="zoo: composition depths (default 1 2 3 4 5)")
    parser.add_argument("--type", nargs="+", dest="types", metavar="T", help="zoo: value types (default all: boolean bitwise math character list set dictionary string)")
    parser.add_argument("--data", metavar="PATH", help="cruxeval: another copy of CRUXEval's cruxeval.jsonl (default: the copy shipped with cwmtui)")
    parser.add_argument("--count", type=int, metavar="K", help="programs per cell (s5: per N; zoo: per type, depth and form); for files and cruxeval: the first K")
    parser.add_argument("--teacher-force", action="store_true", help="also run the teacher-forced condition (every event and action forced from the truth; the model writes the states from its own earlier ones)")
    parser.add_argument("--recovery", action="store_true", help="also intervene at each program's first divergence: force the real line, then (apart) the real frame, let the model run on, and record whether its state agrees again (with --replay FILE: on --model/--server if given, else replayed from FILE's recorded interventions)")
    parser.add_argument("--conditions", metavar="LIST", help="the conditions to run, of free (without the frame grammar), constrained (under it) and teacher (teacher-forced), e.g. free,constrained,teacher: the first decoding listed is the free-running condition, the other runs beside it (default: the model's own decoding, the bundled model's constrained; with --teacher-force also teacher)")
    parser.add_argument("--samples", type=int, default=1, metavar="N", help="free-running samples per program, with --temperature above 0: pass@k of output accuracy (unbiased estimator, as CRUXEval reports it) and each sample's first divergence (default 1)")
    parser.add_argument("--concurrency", type=int, default=1, metavar="C", help="programs in flight at once (server backends; a local model runs one at a time)")
    parser.add_argument("--truth-workers", type=int, metavar="W", help="fork servers tracing the ground truth at once (default: one per core; 1: one interpreter); the traces are the same")
    parser.add_argument("--out", metavar="RESULTS.jsonl", help="write one result per program (a replay file: reopen with cwmtui --replay)")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object instead of tables")
    parser.add_argument("--plot", metavar="FILE.png", help="draw the report's curves into a PNG")
    parser.add_argument("--report", metavar="RESULTS.jsonl", help="print the tables of an earlier run's results file (no model)")
    add_model_options(parser)
    add_sandbox_option(parser)
    parser.epilog = (
        "--seed also picks the programs of s5 and zoo. With --replay FILE (no --id) the recorded "
        "generation of each program (matched by id) is scored instead of running a model."
    )
    return parser


def run(args) -> int:
    from ..analysis.report import aggregate
    from ..evaluation.record import ResultsError, read_results
    from ..json_lines import DAMAGED_DATA

    if args.plot and not args.plot.lower().endswith(".png"):
        raise UsageError(f"--plot {args.plot}: give a .png file name")
    if args.plot:
        from ..extras import require

        require("matplotlib", "plot", "--plot", UsageError)  # before a run of hours, not after
    if args.report:
        if args.suite:
            raise UsageError("give either a SUITE to run or --report RESULTS.jsonl, not both")
        if args.plot is not None:
            check_output(args.plot, "--plot", (args.report,))
        try:
            records = read_results(args.report)
            report = aggregate(records)
        except ResultsError as exc:
            raise UsageError(str(exc)) from None
        except DAMAGED_DATA as exc:
            raise UsageError(f"{args.report}: the results file is damaged ({exc.__class__.__name__}: {exc})") from None
        show(report, args)
        return 0
    if not args.suite:
        raise UsageError(f"name a suite: {SUITE_HELP}")
    return run_suite(args)


def run_suite(args) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from ..analysis.report import aggregate
    from ..evaluation.batch import BatchOptions, BatchRun, trace_suite
    from ..evaluation.suite import SuiteError, load_suite
    from ..interpreter import Interpreter
    from ..model.backend import ModelError
    from ..evaluation.batch import RecordedGenerations
    from .model_options import backend_from_args, rollout_options_from_args

    if args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    if args.samples < 1:
        raise UsageError("--samples must be at least 1")
    if args.samples > 1 and not args.replay and not args.temperature > 0:
        raise UsageError(f"--samples {args.samples} needs --temperature above 0: greedy decoding writes the same trace every time")
    if args.truth_workers is not None and args.truth_workers < 1:
        raise UsageError("--truth-workers must be at least 1")
    beside = args.beside = _conditions(args)
    if args.n and args.suite != "s5":
        raise UsageError("--n (numbers of swaps) is for the s5 suite")
    if (args.depth or args.types) and args.suite != "zoo":
        raise UsageError(f"{'--depth' if args.depth else '--type'} is for the zoo suite")
    try:
        suite = load_suite(
            args.suite,
            n=_numbers("--n", " ".join(args.n)) if args.n else None,
            depth=_numbers("--depth", " ".join(args.depth)) if args.depth else None,
            types=[t for part in args.types for t in part.replace(",", " ").split()] if args.types else None,
            count=args.count,
            seed=args.seed,
            data=args.data,
        )
    except SuiteError as exc:
        raise UsageError(str(exc)) from None
    inputs = [args.suite, args.replay, *(case.program.path for case in suite.cases)]
    for option, path in (("--out", args.out), ("--plot", args.plot)):
        if path is not None:
            check_output(path, option, inputs)
    rollout = rollout_options_from_args(args)
    if args.replay:
        if args.replay_id is not None:
            raise UsageError("--id opens one program of a replay; cwmtui eval --replay scores every program of the file")
        live_model = getattr(args, "model", None) or getattr(args, "server", None)
        if live_model and not args.recovery:
            raise UsageError("--replay FILE and --model/--server cannot be used together: pick one world model "
                             "(with --recovery, the model given runs the interventions on the recorded generations)")
        try:
            recorded = RecordedGenerations(args.replay)
            if live_model:
                recorded.live = backend_from_args(argparse.Namespace(**{**vars(args), "replay": None}))
                warn(recorded.live.warning)
        except ModelError as exc:
            raise UsageError(str(exc)) from None
        if recorded.live is not None:  # the interventions go on from the recorded generations as their run did
            rollout, said = _as_recorded(rollout, recorded)
            warn(said)
        missing = [c.id for c in suite.cases if not recorded.has(c.id, args.teacher_force, args.recovery, args.samples, beside)]
        for ident in missing[:5]:
            warn(f"cwmtui eval: skipped {ident}: no {_not_recorded(recorded, ident, args, beside)} for it in {args.replay}")
        if len(missing) > 5:
            warn(f"cwmtui eval: skipped {len(missing) - 5} more programs without a generation")
        suite.cases = [c for c in suite.cases if c.id not in set(missing)]
        if not suite.cases:
            raise UsageError(f"{args.replay}: no generation for any program of {args.suite}")
        opened = [recorded]
        concurrency = 1
    else:
        try:
            first = backend_from_args(args)
        except ModelError as exc:
            raise UsageError(str(exc)) from None
        warn(first.warning)
        problem = first.constraint_problem() if beside == "constrained" or args.constrain else None
        if problem:
            first.close()
            raise UsageError(problem)
        concurrency = args.concurrency
        if concurrency > 1 and not getattr(args, "server", None):
            warn(f"cwmtui eval: --concurrency {concurrency} needs a server backend; a local model runs one program at a time")
            concurrency = 1
        opened = [first]

    def open_backend():
        if opened:
            return opened.pop()
        return backend_from_args(args)

    from ..evaluation.record import ResultsError
    from ..evaluation.run_config import earlier_records, run_config

    reporter = opened[0]  # (the first backend: its replica report covers every worker's)
    config = run_config(args, suite, rollout, opened[0])
    previous: list[dict] = []
    if args.out is not None:
        try:
            previous = earlier_records(args.out, config)  # --out of an earlier run of this configuration
        except ResultsError as exc:
            for backend in opened:
                backend.close()
            raise UsageError(str(exc)) from None
        if previous:
            done = {str(r.get("id")) for r in previous}
            suite.cases = [c for c in suite.cases if str(c.id) not in done]
            warn(f"cwmtui eval: {args.out}: {len(previous)} programs already done, {len(suite.cases)} to go")
    try:
        if previous:  # the file again, less the programs whose model calls failed (they run again)
            _rewrite(args.out, previous)
        out = open(args.out, "a" if previous else "w", encoding="utf-8") if args.out is not None else None
    except OSError as exc:
        raise UsageError(f"--out {args.out}: cannot write it ({exc.strerror or exc})") from None
    console = TerminalConsole(stderr=True)
    columns = [
        TextColumn("{task.description:<13}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    ]
    from ..interpreter import Limits

    options = BatchOptions(rollout=rollout, teacher_force=args.teacher_force, recovery=args.recovery, samples=args.samples, beside=beside, concurrency=concurrency,
                           limits=Limits(sandbox=args.sandbox))
    lock = threading.Lock()
    interrupted = False
    records: list[dict] = []
    finished: list[dict] = []  # as they arrive: what an interrupted run still reports
    batch = None
    try:
        with Progress(*columns, console=console, transient=False, disable=args.json and not console.is_terminal) as progress:
            truth_task = progress.add_task("ground truth", total=len(suite.cases), rate="")
            with Interpreter() as interpreter:
                warn(interpreter.warning)
                warn_sandbox(options.limits)
                truths = trace_suite(
                    suite.cases,
                    options.limits,
                    on_truth=lambda t: progress.update(truth_task, advance=1, rate=_rate(progress, truth_task, "programs")),
                    interpreter=interpreter,
                    workers=args.truth_workers,
                )
            usable = [t for t in truths if t.usable]
            for truth in truths:
                if not truth.usable:
                    warn(f"cwmtui eval: skipped {truth.problem()}")
            model_task = progress.add_task("model", total=len(usable), rate="")

            def on_result(record: dict) -> None:
                record["config"] = config  # what produced it, in every record
                with lock:
                    finished.append(record)
                    if out is not None:
                        out.write(json.dumps(record, ensure_ascii=False) + "\n")
                        out.flush()
                    progress.update(model_task, advance=1, rate=_rate(progress, model_task, "programs"))

            batch = BatchRun(suite, open_backend, options, on_result)
            try:
                records = batch.run(usable) if usable else []
            except KeyboardInterrupt:
                interrupted = True
                records = []
    except ModelError as exc:
        raise UsageError(str(exc)) from None
    finally:
        if out is not None:
            out.close()
        for backend in opened:
            backend.close()
    replicas = reporter.replica_report() if hasattr(reporter, "replica_report") else None
    for replica in replicas or []:
        if replica.get("failures"):
            warn(f"cwmtui eval: --server {replica['url']} failed {replica['failures']} time(s)"
                 f" ({replica.get('last_failure') or replica.get('down_reason')}); its calls went to the other replicas")

    def report_of(done: list[dict]) -> dict:
        report = aggregate(previous + done, suite.name)
        report["config"] = config
        if replicas is not None:
            report["replicas"] = replicas
        return report

    failed = batch.failed if batch is not None else []
    for line in failed[:5]:
        print(printable(f"cwmtui eval: failed {line}"), file=sys.stderr)
    if len(failed) > 5:
        print(printable(f"cwmtui eval: {len(failed) - 5} more programs failed" + (f" (all are in {args.out})" if args.out else "")), file=sys.stderr)
    if batch is not None and batch.errors:
        for error in batch.errors[:5]:
            print(printable(f"cwmtui: error: {error}"), file=sys.stderr)
        if finished:
            print(f"cwmtui: the report below covers the {len(previous) + len(finished)} programs done before it stopped", file=sys.stderr)
            show(report_of(finished), args)
        return 2
    if interrupted:
        print("cwmtui: interrupted" + (f"; finished programs are in {args.out} (the same command goes on from there)"
                                        if args.out else ""), file=sys.stderr)
        if finished or previous:
            print(f"cwmtui: the report below covers the {len(previous) + len(finished)} programs that finished", file=sys.stderr)
            show(report_of(finished), args)
        return 130
    if not records and not previous:
        raise UsageError(f"{args.suite}: no program could be evaluated")
    show(report_of(records), args)
    return 1 if failed else 0


def _as_recorded(rollout, recorded) -> tuple:
    """The rollout options of the run that wrote a replay file (its records' ``config``: budgets,
    decoding, the frame grammar), for interventions that go on from its generations; and a line
    that says so (or that the file does not say, so the command's own options apply)."""
    from dataclasses import replace

    config = next((r["config"] for r in recorded.records.values() if isinstance(r.get("config"), dict)), None)
    if config is None:
        return rollout, (f"cwmtui eval: {recorded.path} does not say how it was run: the interventions decode "
                         "with this command's options")
    budgets, decoding = config.get("budgets") or {}, config.get("decoding") or {}
    changes = {key: budgets[key] for key in ("token_budget", "frame_tokens", "max_frames") if isinstance(budgets.get(key), int)}
    changes.update({key: decoding[key] for key in ("temperature", "top_p", "seed") if isinstance(decoding.get(key), (int, float))})
    constrain = decoding.get("constrain")
    changes["constrain"] = constrain if isinstance(constrain, bool) else False  # (before the grammar: free)
    rollout = replace(rollout, **changes)
    return rollout, (f"cwmtui eval: the interventions decode as {recorded.path} was run: token budget "
                     f"{rollout.token_budget}, frame tokens {rollout.frame_tokens}, "
                     f"{'constrained' if rollout.constrain else 'without the frame grammar'}, temperature {rollout.temperature:g}")


def _not_recorded(recorded, ident: str, args, beside: str | None) -> str:
    """What a replay file lacks for a program that the run asks of it."""
    if not recorded.has(ident):
        return "generation"
    if beside and not recorded.has(ident, beside=beside):
        return f"{beside} generation"
    if args.samples > 1 and not recorded.has(ident, samples=args.samples):
        return f"{args.samples} samples"
    if args.teacher_force and not recorded.has(ident, teacher_forced=True):
        return "teacher-forced generation"
    return "recorded intervention (give --model or --server to run them)"


#: the names --conditions takes
CONDITIONS = ("free", "constrained", "teacher")


def _conditions(args) -> str | None:
    """Apply --conditions to ``args`` (the free-running condition's decoding, --teacher-force);
    the decoding to run beside it, or None."""
    if not args.conditions:
        return None
    names = [name for part in args.conditions.split(",") for name in part.split()]
    unknown = [name for name in names if name not in CONDITIONS]
    if unknown or not names:
        raise UsageError(f"--conditions {args.conditions}: give some of {', '.join(CONDITIONS)} (comma-separated)")
    decodings = [name for name in names if name != "teacher"]
    if decodings and getattr(args, "constrain", None) is not None:
        raise UsageError("--conditions names the decodings: drop --free/--constrain")
    if "teacher" in names:
        args.teacher_force = True
    if decodings and not args.replay:
        args.constrain = decodings[0] == "constrained"
    others = [name for name in dict.fromkeys(decodings) if name != decodings[0]] if decodings else []
    return others[0] if others else None


def _rewrite(path: str, records: list[dict]) -> None:
    """Write ``records`` to ``path`` whole or not at all (a file beside it, then renamed)."""
    import os

    folder = os.path.dirname(os.path.abspath(path))
    temporary = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(temporary, "w", encoding="utf-8") as file:
            for record in records:
                file.write(json.dumps(record, ensure_ascii=False) + "\n")
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def _rate(progress, task_id, unit: str) -> str:
    task = progress.tasks[task_id] if isinstance(task_id, int) and task_id < len(progress.tasks) else None
    task = next((t for t in progress.tasks if t.id == task_id), task)
    speed = task.speed if task is not None else None
    if not speed:
        return ""
    return f"{speed:.1f} {unit}/s" if speed >= 1 else f"{1 / speed:.1f} s/program"


def show(report: dict, args) -> None:
    if args.plot:
        from ..evaluation.figures import save_figure

        try:
            save_figure(report, args.plot)
        except OSError as exc:
            raise UsageError(f"--plot {args.plot}: cannot write it ({exc.strerror or exc})") from None
    if args.json:
        print(json.dumps(report, sort_keys=False))
        return
    from ..evaluation.tables import report_renderables

    TerminalConsole().print(report_renderables(report))
    if args.plot:
        print(f"plot: {args.plot}", file=sys.stderr)
