"""``cwmtui eval`` over replicas of a model server: programs/s with 1 and 2 loopback fake vLLM
servers, side by side in one run.

    python bench/eval_scale.py [--programs 24] [--token-ms 1.0] [--concurrency 4] [--model-phase-only]

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
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cwmtui.evaluation.batch import BatchOptions, BatchRun, trace_suite  # noqa: E402
from cwmtui.evaluation.suite import load_suite  # noqa: E402
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=24, help="programs in the generated suite (default 24)")
    parser.add_argument("--token-ms", type=float, default=1.0, help="milliseconds a fake server takes a token (default 1)")
    parser.add_argument("--concurrency", type=int, default=4, help="programs in flight (default 4)")
    parser.add_argument("--model-phase-only", action="store_true", help="measure BatchRun only, not the whole cwmtui eval command")
    args = parser.parse_args()

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
        print(f"\nthis run: python bench/eval_scale.py --programs {args.programs} --token-ms {args.token_ms:g} "
              f"--concurrency {args.concurrency}" + (" --model-phase-only" if args.model_phase_only else ""))
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
