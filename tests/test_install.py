"""Installed like any tool: a light core (no torch, no transformers), extras for the rest, a
one-line error naming the extra when one is missing, the usual conventions (--version,
python -m cwmtui). The real non-editable install from outside the checkout is .ci/user_install.sh."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
HEAVY = ("torch", "transformers", "accelerate", "safetensors", "matplotlib", "tiktoken", "llama_models", "huggingface_hub")

#: runs the command line as the core install has it: the heavy packages cannot be imported
CORE = """
import sys
for name in {heavy!r}:
    sys.modules[name] = None  # import raises ImportError, as where it is not installed
from cwmtui.cli import main
code = main({argv!r})
loaded = sorted(m for m in {heavy!r} if sys.modules.get(m) is not None)
print("LOADED", loaded, file=sys.stderr)
sys.exit(code)
"""


def core(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    code = CORE.format(heavy=HEAVY, argv=list(argv))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_the_core_install_pulls_neither_torch_nor_transformers():
    from packaging.requirements import Requirement

    core_names = {Requirement(r).name for r in PYPROJECT["project"]["dependencies"]}
    assert not core_names & {"torch", "transformers", "accelerate", "matplotlib"}
    extras = PYPROJECT["project"]["optional-dependencies"]
    transformers = next(Requirement(r) for r in extras["hf"] if r.startswith("transformers"))
    # what vLLM 0.33 (<5.21) and 0.34 (<5.23) accept, and the newest release
    for version in ("5.16.1", "5.20.2", "5.22.2", "5.24.0", "5.25.0"):
        assert transformers.specifier.contains(version), version
    assert {"accelerate", "torch"} <= {Requirement(r).name for r in extras["hf"]}
    assert "cwmtui[hf,plot,cwm-tokenizer]" in extras["test"]  # the test command runs everything


def test_the_bundled_model_diff_and_cruxeval_run_without_the_heavy_packages(tmp_path):
    done = core("diff", str(ROOT / "samples" / "swaps.py"), "--json", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr
    assert "LOADED []" in done.stderr
    done = core("eval", "cruxeval", "--count", "2", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"count": 2' in done.stdout and "LOADED []" in done.stderr


@pytest.mark.parametrize("argv, extra, module", [
    (["eval", "cruxeval", "--count", "1", "--plot", "x.png"], "plot", "matplotlib"),
    (["train", "--out", "runs/x", "--minutes", "1"], "train", "torch"),
    (["diff", "PROGRAM", "--replay", "REPLAY", "--tokenizer", "cwm"], "cwm-tokenizer", "llama_models"),
])
def test_a_missing_extra_is_one_line_that_names_it(tmp_path, argv, extra, module):
    program = tmp_path / "p.py"
    program.write_text("def f(x):  # << START_OF_TRACE\n    return x\n\nf(1)\n")
    replay = tmp_path / "r.jsonl"
    replay.write_text('{"id": "a", "program": "def f(x):  # << START_OF_TRACE\\n    return x\\n\\nf(1)\\n", "generation": ""}\n')
    argv = [str(program) if a == "PROGRAM" else str(replay) if a == "REPLAY" else a for a in argv]
    done = core(*argv, cwd=tmp_path)
    lines = [line for line in done.stderr.splitlines() if not line.startswith("LOADED")]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("cwmtui: error: ") and lines[0].endswith(f"needs {module}, which the core install leaves out: pip install 'cwmtui[{extra}]'")


def test_version_and_python_dash_m():
    from cwmtui import __version__

    done = subprocess.run([sys.executable, "-m", "cwmtui", "--version"], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, f"cwmtui {__version__}\n")
    done = subprocess.run([sys.executable, "-m", "cwmtui", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("usage: cwmtui PROGRAM")
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert PYPROJECT["project"]["classifiers"] and PYPROJECT["project"]["urls"]


def test_the_prepared_gpu_check_runs_its_dry_run_on_the_cpu(capsys):
    """bench/gpu_check.py is run the day a GPU is lent; its CPU dry run keeps it working."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(ROOT / "bench"))
    assert gpu_check.main(["--model", "bundled", "--device", "cpu", "--token-budget", "400"]) == 0
    out = capsys.readouterr().out
    assert "tokens/s" in out and "frames vs CPU      all match" in out
