"""The engine never imports Textual: headless verbs (eval on a GPU box, trace in a pipe) run
without Textual, and the engine's behaviour cannot depend on it."""

import subprocess
import sys

ENGINE = ("trace", "interpreter", "model", "analysis", "session", "evaluation", "suites", "training")
HEADLESS_VERBS = ("trace", "diff", "eval", "train")

PROBE = """
import importlib, pkgutil, sys
import cwmtui
names = []
for top in {engine!r}:
    module = importlib.import_module("cwmtui." + top)
    names.append(module.__name__)
    for info in pkgutil.walk_packages(getattr(module, "__path__", []), module.__name__ + "."):
        importlib.import_module(info.name)
        names.append(info.name)
for verb in {verbs!r}:
    importlib.import_module("cwmtui.cli." + verb).build_parser()
print(len(names), sorted(m for m in sys.modules if m.split(".")[0] == "textual"))
"""


def test_engine_modules_and_headless_verbs_never_import_textual():
    code = PROBE.format(engine=ENGINE, verbs=HEADLESS_VERBS)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    count, loaded = done.stdout.strip().split(" ", 1)
    assert int(count) > 30  # every engine module was imported
    assert loaded == "[]"
