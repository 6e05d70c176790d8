"""``cwmtui eval`` over replicas of a model server: programs/s with 1 and 2 loopback fake vLLM
servers, and ground-truth programs/s with 1 and 2 fork-server workers, side by side in one run.

    python bench/eval_scale.py [--programs 24] [--token-ms 1.0] [--concurrency 4] [--model-phase-only]
                               [--generated 20000] [--truth-rounds 1] [--truth-only]

The servers (``tests/replica_servers.py``, each in a process of its own, started once) know the
true trace of every program of a generated suite of small loops and write it as vLLM streams
it, one token at a time for all their requests together, ``--token-ms`` a token: a GPU's
throughput, which more requests in flight do not raise. One server writes 1000/token-ms
tokens a second however many programs are in flight; two write twice that, if the requests
are spread over them.

Two measures, each with 1 and with 2 servers and the same ``--concurrency``:

* ``BatchRun``: the model phase of ``cwmtui eval`` (what its worker threads do), the ground
  truth traced before the clock starts; the backends opened as ``cwmtui eval`` opens them
  (``open_backend(server=URLS)``, one per worker);
* ``cwmtui eval``: the whole command in a process of its own, wall time (start-up and ground
  truth included), ``cwmtui eval SUITE --server URL [--server URL] --concurrency C --json``
  (left out with ``--model-phase-only``).

The last programs of a run leave a server idle while the other finishes (the tail), so the
ratio nears 2 as the suite grows against ``--concurrency``.

Both check that every program was run once and the results are the same with 1 and 2 servers.

The ground-truth half (after the servers are gone): ``trace_suite`` (what ``cwmtui eval`` does
before the model runs, ``--truth-workers W``) on CRUXEval-800 and on a generated suite of
``--generated`` programs (the composition zoo: ``--generated`` / 80 programs per type, depth 1..5
and form), with 1 and with 2 workers (fork servers), wall time from the first program to the
last, the servers' start included. ``--truth-rounds K`` alternates 1 and 2 workers K times and
keeps each one's fastest (the machine is shared). It checks that the traces (frames, status,
output) are the same with 1 and 2 workers, and prints the load average beside the figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cwmtui.evaluation.batch import BatchOptions, BatchRun, trace_suite  # noqa: E402
from cwmtui.evaluation.suite import load_suite  # noqa: E402
from cwmtui.evaluation.truth_pool import default_workers  # noqa: E402
from cwmtui.model import open_backend  # noqa: E402
from tests.replica_servers import write_suite  # noqa: E402


def start_servers(suite: Path, count: int, token_seconds: float) -> tuple[list[subprocess.Popen], list[str]]:
    processes = [
        subprocess.Popen([sys.executable, "-m", "tests.replica_servers", str(suite), "--token-seconds", str(token_seconds)],
                         cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(count)
    ]
    urls = []
    for process in processes:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        if not line.startswith("http://"):
            sys.exit(f"a fake server did not start: {line!r}")
        urls.append(line)
    return processes, urls


def batch_run(suite, truths, urls: list[str], concurrency: int) -> tuple[float, list[dict]]:
    server = urls if len(urls) > 1 else urls[0]
    began = time.perf_counter()
    run = BatchRun(suite, lambda: open_backend(server=server), BatchOptions(concurrency=concurrency))
    records = run.run(truths)
    seconds = time.perf_counter() - began
    if run.errors or run.failed:
        sys.exit(f"the run over {len(urls)} server(s) failed: {(run.errors + run.failed)[:3]}")
    return seconds, records


def eval_command(suite: Path, urls: list[str], concurrency: int) -> list[str]:
    command = ["cwmtui", "eval", str(suite), "--concurrency", str(concurrency), "--json"]
    for url in urls:
        command += ["--server", url]
    return command


def whole_command(command: list[str]) -> tuple[float, dict]:
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return seconds, json.loads(done.stdout)


def outcome(records: list[dict]) -> list[tuple]:
    return sorted((r["id"], r["status"], r["generation"]) for r in records)


def fingerprints(truths) -> list[str]:
    """One digest per program of what its trace is: frames, status, output (in the suite's order)."""
    return [hashlib.sha1(repr((t.case.id, t.trace.frames, t.trace.status, t.trace.output)).encode()).hexdigest()
            for t in truths]


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def truth_half(generated: int, rounds: int) -> bool:
    """Ground-truth programs/s with 1 and 2 workers on CRUXEval-800 and a generated suite."""
    per_cell = max(1, round(generated / 80))
    suites = [("CRUXEval", load_suite("cruxeval").cases),
              (f"zoo, {per_cell} per cell", load_suite("zoo", count=per_cell).cases)]
    print(f"\nground truth (trace_suite, cwmtui eval --truth-workers W): {default_workers()} cores for this "
          f"process, load average {load()} before")
    print("\n| suite | programs | frames | 1 worker | programs/s | 2 workers | programs/s | speed-up | same traces | load average after |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    all_same = True
    for name, cases in suites:
        best: dict[int, float] = {}
        seen: dict[int, list[str]] = {}
        frames = 0
        for _ in range(rounds):
            for workers in (1, 2):
                began = time.perf_counter()
                truths = trace_suite(cases, workers=workers)
                seconds = time.perf_counter() - began
                best[workers] = min(seconds, best.get(workers, seconds))
                digests = fingerprints(truths)
                if seen.setdefault(workers, digests) != digests or len(truths) != len(cases):
                    seen[workers] = []  # not even the same as itself: marked as different
                frames = sum(len(t.trace.frames) for t in truths)
                del truths
        same = bool(seen[1]) and seen[1] == seen[2]
        all_same = all_same and same
        one, two = best[1], best[2]
        print(f"| {name} | {len(cases)} | {frames} | {one:.2f} s | **{len(cases) / one:.0f}** | {two:.2f} s | "
              f"**{len(cases) / two:.0f}** | {one / two:.2f}x | {'yes' if same else 'NO'} | {load()} |")
    return all_same


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=24, help="programs in the generated suite (default 24)")
    parser.add_argument("--token-ms", type=float, default=1.0, help="milliseconds a fake server takes a token (default 1)")
    parser.add_argument("--concurrency", type=int, default=4, help="programs in flight (default 4)")
    parser.add_argument("--model-phase-only", action="store_true", help="measure BatchRun only, not the whole cwmtui eval command")
    parser.add_argument("--generated", type=int, default=20_000, help="programs of the generated suite for the ground truth (default 20000)")
    parser.add_argument("--truth-rounds", type=int, default=1, help="ground truth: alternate 1 and 2 workers this many times, keep the fastest (default 1)")
    parser.add_argument("--truth-only", action="store_true", help="measure the ground truth only, not the servers")
    args = parser.parse_args()
    this_run = (f"python bench/eval_scale.py --programs {args.programs} --token-ms {args.token_ms:g} "
                f"--concurrency {args.concurrency}" + (" --model-phase-only" if args.model_phase_only else "")
                + f" --generated {args.generated} --truth-rounds {args.truth_rounds}"
                + (" --truth-only" if args.truth_only else ""))
    if args.truth_only:
        same = truth_half(args.generated, args.truth_rounds)
        print(f"\nthis run: {this_run}")
        return 0 if same else 1

    with tempfile.TemporaryDirectory(prefix="eval-scale-") as folder:
        suite_path = write_suite(Path(folder) / "loops.jsonl", args.programs, length=1)
        suite = load_suite(str(suite_path))
        truths = trace_suite(suite.cases)
        processes, urls = start_servers(suite_path, 2, args.token_ms / 1000)
        try:
            rows = []
            runs = {}
            for count in (1, 2):
                seconds, records = batch_run(suite, truths, urls[:count], args.concurrency)
                runs[count] = records
                tokens = sum(r["tokens"]["trace"] for r in records)
                command = eval_command(suite_path, urls[:count], args.concurrency)
                wall = None
                if not args.model_phase_only:
                    wall, report = whole_command(command)
                    if report["count"] != len(truths):
                        sys.exit(f"{' '.join(command)}: {report['count']} programs of {len(truths)}")
                rows.append((count, seconds, tokens, wall, command))
        finally:
            for process in processes:
                if process.stdin is not None:
                    process.stdin.close()
                process.wait(10)
        same = outcome(runs[1]) == outcome(runs[2]) and len(runs[2]) == len(truths)

        print(f"{len(truths)} programs (loops), --concurrency {args.concurrency}, fake servers at "
              f"{args.token_ms:g} ms a token ({1000 / args.token_ms:.0f} tokens/s each)\n")
        print("| servers | BatchRun (model phase) | programs/s | tokens/s | cwmtui eval (whole command) | programs/s |")
        print("|---|---|---|---|---|---|")
        for count, seconds, tokens, wall, _ in rows:
            whole = f"{wall:.2f} s | **{len(truths) / wall:.2f}**" if wall else "– | –"
            print(f"| {count} | {seconds:.2f} s | **{len(truths) / seconds:.2f}** | {tokens / seconds:.0f} | {whole} |")
        (_, one, _, one_wall, _), (_, two, _, two_wall, _) = rows
        whole = f", cwmtui eval {one_wall / two_wall:.2f}x" if one_wall and two_wall else ""
        print(f"\n2 servers / 1 server: BatchRun {one / two:.2f}x{whole}; "
              f"every program once, same results with 1 and 2 servers: {'yes' if same else 'NO'}")
        if not args.model_phase_only:
            print("\ncommands (the servers' URLs were this run's):")
            for row in rows:
                print("    " + " ".join(row[4]).replace(str(suite_path), "SUITE"))
    same_truth = truth_half(args.generated, args.truth_rounds)
    print(f"\nthis run: {this_run}")
    return 0 if same and same_truth else 1


if __name__ == "__main__":
    sys.exit(main())
