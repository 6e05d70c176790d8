"""Tracer overhead inside the child: the project's tracer against the floor and a naive tracer.

    python bench/tracer.py [--repeat N] [--crux-repeat N] [--crux-limit N] [--child PATH]
                           [--only s5,crux,grow,parent]

Workloads: (1) an S5 program (128 tuple swaps of a..e in a loop, > 5,000 line events),
(2) all 800 CRUXEval programs in Meta's ``main()`` wrapper, (3) a loop that grows a list
(every line event shows the whole list: the format's output is quadratic there).

Tracers, each timed the same way, inside a process forked from a worker that is set up like the
fork server (``PYTHONHASHSEED=0``, the fork server's preloaded modules):

* ``none``   the program untraced (for scale);
* ``floor``  a no-op ``sys.settrace`` callback that returns itself (it receives every call,
  line and return event): the floor for any settrace tracer;
* ``locals`` the floor plus reading ``frame.f_locals`` on every line event, which CPython 3.11
  pays for by copying every local into a dict and back: the floor for any tracer that shows
  locals;
* ``naive``  a tracer that reprs every local on every line event (and every return value) and
  keeps the reprs in a list;
* ``cwmtui`` the project's tracer: ``child.run_job`` as the fork server runs it, records
  streamed over a pipe that the worker drains.

The clock starts when the tracer is installed (``sys.settrace``) and stops when the run is over:
for ``cwmtui`` that is the ``os._exit`` after its last flush, so compiling the source, starting
the watchdog and the process itself are excluded for every tracer alike, and sending the
records is included. Before the clock starts, each fork runs the program once untraced, so
copy-on-write page faults and cold caches do not pad the floor. Each (program, tracer) pair runs
``--repeat`` times in fresh forks, the tracers interleaved; the minimum is kept. The CRUXEval
figure is the sum over the 800 programs. The ratios are on CPU time (user + system of the traced
process), which a machine shared with other jobs disturbs far less than wall time; wall-time
ratios are printed beside them in brackets.

``--child PATH`` times another version of ``child.py`` in the same run (e.g. the one before a
change: ``git show REV:cwmtui/interpreter/child.py > /tmp/child_before.py``).
"""

from __future__ import annotations

import argparse
import gc
import json
import marshal
import os
import random
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from cwmtui.evaluation.suite import CRUXEVAL_DATA as CRUXEVAL  # noqa: E402  (the copy the package ships)
TRACERS = ("none", "floor", "locals", "naive", "cwmtui")
REFERENCES = ("none", "floor", "locals", "naive")
_TIME = struct.Struct("<dd")  # CPU seconds, wall seconds


# ----------------------------------------------------------------------------- workloads


def s5_source(swaps: int = 128, rounds: int = 40, seed: int = 5) -> str:
    rng = random.Random(seed)
    names = "abcde"
    lines = ["def permute(rounds):  # << START_OF_TRACE", "    a, b, c, d, e = 'a', 'b', 'c', 'd', 'e'",
             "    for _ in range(rounds):"]
    for _ in range(swaps):
        x, y = rng.sample(names, 2)
        lines.append(f"        {x}, {y} = {y}, {x}")
    lines.append("    return a + b + c + d + e")
    lines.append(f"\npermute({rounds})")
    return "\n".join(lines) + "\n"


GROWING_LIST = """\
def grow(n):  # << START_OF_TRACE
    items = []
    for i in range(n):
        items.append(i * i)
    return len(items)

grow(2000)
"""


def workloads(crux_limit: int | None, only: set[str]) -> list[tuple[str, list[dict]]]:
    from cwmtui.interpreter import Limits, cruxeval_program, program_from_source
    from cwmtui.interpreter.runner import child_job

    limits = Limits(frames=1_000_000, seconds=120.0)
    s5 = child_job(program_from_source(s5_source(), "s5.py"), limits)
    grow = child_job(program_from_source(GROWING_LIST, "grow.py"), limits)
    crux = []
    if "crux" not in only:
        pass
    elif CRUXEVAL.is_file():
        with open(CRUXEVAL, encoding="utf-8") as handle:
            samples = [json.loads(line) for line in handle if line.strip()]
        for sample in samples[:crux_limit]:
            crux.append(child_job(cruxeval_program(sample["code"], sample["input"]), limits))
    else:
        print(f"note: {CRUXEVAL} not found: CRUXEval skipped", file=sys.stderr)
    return [("S5 (128 swaps x 40)", [s5] if "s5" in only else []),
            (f"CRUXEval ({len(crux)} programs)", crux),
            ("growing list (2,000 appends)", [grow] if "grow" in only else [])]


# ----------------------------------------------------------------------------- worker side


def _sink():
    class Sink:
        def write(self, text):
            return len(text)

        def flush(self):
            pass

    return Sink()


def _clock() -> tuple[float, float]:
    return time.process_time(), time.perf_counter()


def _since(began: tuple[float, float]) -> bytes:
    cpu, wall = _clock()
    return _TIME.pack(cpu - began[0], wall - began[1])


def _run_program(job: dict, tracer) -> bytes:
    """Run the job's module code and call under ``tracer`` in this process; time traced."""
    import types

    filename = job["filename"]
    module = types.ModuleType("__main__")
    module.__file__ = filename
    module.__builtins__ = __builtins__
    sys.modules["__main__"] = module
    code = compile(job["source"], filename, "exec", dont_inherit=True)
    call = compile(job["call"], "<call>", "eval", dont_inherit=True) if job.get("call") else None
    began = _clock()
    sys.settrace(tracer)
    try:
        exec(code, module.__dict__)
        if call is not None:
            eval(call, module.__dict__)
    except BaseException:  # noqa: BLE001 - the program's failure is not the tracer's
        pass
    sys.settrace(None)
    return _since(began)


def _warm_up(job: dict) -> None:
    """Run the program once untraced in the fresh fork, so that copy-on-write page faults and
    cold caches are paid before the clock starts, by every tracer alike."""
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = _sink()
    _run_program(job, None)
    sys.stdout, sys.stderr = stdout, stderr
    gc.collect()


def _reference_run(job: dict, kind: str) -> bytes:
    """Run the job under the floor or naive tracer (or none); time traced."""
    kept: list = []
    append = kept.append

    def floor(frame, event, arg):
        return floor

    def locals_only(frame, event, arg):
        if event == "line":
            frame.f_locals  # noqa: B018 (the read is the cost measured)
        return locals_only

    def naive(frame, event, arg):
        if event == "line":
            append((frame.f_lineno, {k: repr(v) for k, v in frame.f_locals.items()}))
        elif event == "return":
            append((frame.f_lineno, repr(arg)))
        return naive

    sys.stdout = sys.stderr = _sink()
    return _run_program(job, {"none": None, "floor": floor, "locals": locals_only, "naive": naive}[kind])


def _project_run(child, job: dict, rec_w: int, time_w: int) -> None:
    """Run child.run_job with the clock hooked on its sys.settrace and its final os._exit."""
    real_settrace, real_exit = sys.settrace, os._exit
    began = []

    def settrace(function):
        if function is not None and not began:
            began.append(_clock())
        real_settrace(function)

    def exit_(code):
        os.write(time_w, _since(began[0]) if began else _TIME.pack(0.0, 0.0))
        real_exit(code)

    sys.settrace = settrace
    os._exit = exit_
    child.run_job(job, rec_w)


def _measure(child, job: dict, kind: str) -> tuple[tuple[float, float], bytes]:
    """Fork, run the job under one tracer, return ((CPU s, wall s), the records sent)."""
    rec_r, rec_w = getattr(child, "record_pipe", os.pipe)()  # as the fork server makes it
    time_r, time_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(rec_r)
            os.close(time_r)
            _warm_up(job)
            if kind.startswith("cwmtui"):
                _project_run(child, job, rec_w, time_w)
            else:
                os.write(time_w, _reference_run(job, kind))
        finally:
            os._exit(0)
    os.close(rec_w)
    os.close(time_w)
    chunks = []
    while True:
        data = os.read(rec_r, 1 << 20)
        if not data:
            break
        chunks.append(data)
    os.close(rec_r)
    raw = os.read(time_r, _TIME.size)
    os.close(time_r)
    os.waitpid(pid, 0)
    seconds = _TIME.unpack(raw) if len(raw) == _TIME.size else (float("nan"), float("nan"))
    return seconds, b"".join(chunks)


def _batches(data: bytes) -> list[bytes]:
    """The marshalled batches of a record stream (each behind its 4-byte length)."""
    batches, view = [], memoryview(data)
    while len(view) >= 4:
        size = struct.unpack_from("<I", view)[0]
        batches.append(bytes(view[4 : 4 + size]))
        view = view[4 + size :]
    return batches


def _end_status(data: bytes) -> str:
    status = "no end record"
    for batch in _batches(data):
        for record in marshal.loads(batch):
            if record[0] == 5:
                status = record[1]
    return status


def _load_child(path: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"bench_child_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def worker() -> None:
    from cwmtui.interpreter import child

    for name in child._PRELOAD:  # as the fork server does
        __import__(name)
    request = json.load(sys.stdin)
    children = {"cwmtui": child}
    for label, path in request["children"].items():
        children[label] = _load_child(path)
    kinds = [k for k in TRACERS if k != "cwmtui"] + list(children)
    results = []
    for job in request["jobs"]:
        best: dict = {}
        for _ in range(request["repeat"]):
            for kind in kinds:  # interleaved, so drift in machine load hits all alike
                seconds, data = _measure(children.get(kind, child), job, kind)
                if kind in children and _end_status(data) != "complete":
                    raise SystemExit(f"{job['filename']}: {kind} ended with {_end_status(data)!r}")
                old = best.get(kind, (float("inf"), float("inf")))
                best[kind] = (min(old[0], seconds[0]), min(old[1], seconds[1]))
                if kind in children:
                    best["bytes " + kind] = len(data)
                    if request.get("keep_records"):
                        best["records " + kind] = data.hex()
        results.append(best)
    json.dump(results, sys.stdout)


# ----------------------------------------------------------------------------- driver


def run_worker(jobs: list[dict], repeat: int, children: dict[str, str], keep_records: bool = False) -> list[dict]:
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1")
    request = {"jobs": jobs, "repeat": repeat, "children": children, "keep_records": keep_records}
    done = subprocess.run(
        [sys.executable, __file__, "--worker"],
        input=json.dumps(request).encode(),
        stdout=subprocess.PIPE,
        env=env,
        check=True,
    )
    return json.loads(done.stdout)


def report(name: str, results: list[dict], kinds: list[str]) -> dict:
    """Print the totals; return {project tracer: (x floor, x naive)} on CPU time."""
    total = {k: [sum(r[k][0] for r in results), sum(r[k][1] for r in results)] for k in kinds}
    print(f"\n{name}  (CPU ms, wall ms; ratios on CPU time, wall in brackets)")
    for kind in kinds:
        cpu, wall = total[kind]
        line = f"  {kind:16s} {cpu * 1000:9.2f} {wall * 1000:9.2f}"
        if kind != "none":
            line += f"   {cpu / total['floor'][0]:7.2f}x floor [{wall / total['floor'][1]:.2f}x]"
        if kind not in REFERENCES:
            line += f"   {cpu / total['naive'][0]:5.2f}x naive [{wall / total['naive'][1]:.2f}x]"
            line += f"   {sum(r['bytes ' + kind] for r in results):,} record bytes"
        print(line)
    projects = [k for k in kinds if k not in REFERENCES]
    if len(results) > 1:
        for kind in projects:
            per = sorted(r[kind][0] / r["floor"][0] for r in results)
            print(f"  {kind}: per program x floor: median {statistics.median(per):.2f}, "
                  f"90th percentile {per[int(len(per) * 0.9)]:.2f}, max {per[-1]:.2f}")
    return {k: (total[k][0] / total["floor"][0], total[k][0] / total["naive"][0]) for k in projects}


def parent_side(repeat: int) -> None:
    """The parent's share of a 10,000-frame trace: the child's records turned into Frames
    (marshal.loads + TraceBuilder.add_records), against the child's tracing of the same run."""
    from cwmtui.interpreter import Limits, TraceBuilder, program_from_source
    from cwmtui.interpreter.runner import child_job

    program = program_from_source(s5_source(rounds=77), "s5.py")
    result = run_worker([child_job(program, Limits(frames=20_000))], repeat, {}, keep_records=True)[0]
    batches = _batches(bytes.fromhex(result["records cwmtui"]))
    loads = build = float("inf")
    frames = 0
    for _ in range(repeat):
        gc.collect()
        began = time.process_time()
        decoded = [marshal.loads(batch) for batch in batches]
        middle = time.process_time()
        builder = TraceBuilder(program)
        for records in decoded:
            builder.add_records(records)
        ended = time.process_time()
        loads, build = min(loads, middle - began), min(build, ended - middle)
        frames = len(builder.frames)
    child_cpu = result["cwmtui"][0]
    print(f"\nparent side: one {frames:,}-frame trace (S5, 77 rounds)  (CPU ms)")
    print(f"  child: tracer             {child_cpu * 1000:8.2f}   {child_cpu / frames * 1e6:.2f} us/frame")
    print(f"  parent: marshal.loads     {loads * 1000:8.2f}   {loads / frames * 1e6:.2f} us/frame")
    print(f"  parent: TraceBuilder      {build * 1000:8.2f}   {build / frames * 1e6:.2f} us/frame")
    print(f"  parent / child            {(loads + build) / child_cpu:8.2f}x")


E2E_SCRIPT = """
import sys, time
sys.path.insert(0, {bench!r})
import tracer as B
from cwmtui.interpreter import Interpreter, Limits, program_from_source
program = program_from_source(B.s5_source(rounds=150), "s5.py")
with Interpreter() as it:
    it.trace(program, Limits(frames=50_000))
    best = float("inf")
    for _ in range({repeat}):
        began = time.perf_counter()
        trace = it.trace(program, Limits(frames=50_000))
        best = min(best, time.perf_counter() - began)
print(len(trace.frames), best)
"""


def end_to_end(repeat: int, trees: list[str]) -> None:
    """What a caller waits for: Interpreter.trace() of a ~19,000-frame S5 run, records turned
    into Frames included (child and parent at work together), for this checkout and for each
    --tree (another checkout, e.g. a git worktree of an older commit), one after the other."""
    import subprocess

    print("\nend to end: Interpreter.trace() of S5 (128 swaps x 150), wall ms, best of", repeat)
    script = E2E_SCRIPT.format(bench=str(Path(__file__).resolve().parent), repeat=repeat)
    for tree in [str(Path(__file__).resolve().parent.parent), *trees]:
        env = dict(os.environ, PYTHONPATH=tree)
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, cwd=tree)
        if out.returncode != 0:
            print(f"  {tree}: failed ({out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode})")
            continue
        frames, best = out.stdout.split()
        print(f"  {tree:40s} {float(best) * 1000:8.1f} ms   {int(frames):,} frames")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="tracer overhead inside the child")
    parser.add_argument("--repeat", type=int, default=7, help="runs per tracer for S5 and the list")
    parser.add_argument("--crux-repeat", type=int, default=3, help="runs per tracer per CRUXEval program")
    parser.add_argument("--crux-limit", type=int, default=None, help="only the first N CRUXEval programs")
    parser.add_argument("--child", action="append", default=[], metavar="PATH",
                        help="also time another child.py (e.g. an older version), side by side")
    parser.add_argument("--only", default="s5,crux,grow,parent,e2e", help="workloads to run (default: all)")
    parser.add_argument("--tree", action="append", default=[], metavar="DIR",
                        help="another checkout (e.g. `git worktree add /tmp/old COMMIT`) for the end-to-end figure")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker()
        return 0
    began = time.perf_counter()
    children = {f"cwmtui@{Path(p).stem}": str(Path(p).resolve()) for p in args.child}
    kinds = list(TRACERS) + list(children)
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f}; each time is the minimum over repeated runs")
    figures = {}
    for name, jobs in workloads(args.crux_limit, set(args.only.split(","))):
        if not jobs:
            continue
        repeat = args.crux_repeat if len(jobs) > 1 else args.repeat
        figures[name] = report(name, run_worker(jobs, repeat, children), kinds)
    if "parent" in args.only.split(","):
        parent_side(args.repeat)
    if "e2e" in args.only.split(","):
        end_to_end(args.repeat, args.tree)
    print("\ntargets: <= 10x floor on S5 and CRUXEval; <= 1.2x naive on the growing list (CPU time)")
    for name, ratios in figures.items():
        for kind, (x_floor, x_naive) in ratios.items():
            if name.startswith("growing"):
                verdict = f"{x_naive:.2f}x naive {'met' if x_naive <= 1.2 else 'MISSED'}"
            else:
                verdict = f"{x_floor:.2f}x floor {'met' if x_floor <= 10 else 'MISSED'}"
            print(f"  {name:30s} {kind:16s} {verdict}")
    print(f"(bench wall time {time.perf_counter() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
