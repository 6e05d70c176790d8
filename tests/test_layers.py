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


# -- the seam between the engine and the screen (#23) ---------------------------------------

import ast  # noqa: E402
from pathlib import Path  # noqa: E402

PACKAGE = Path(__file__).resolve().parent.parent / "cwmtui"


def _source(node: ast.AST) -> str:
    return ast.unparse(node)


def test_only_the_app_and_its_screens_assign_their_attributes():
    """Workers post messages; only the app's and its screens' handlers change their state. No
    other code under ui/ (the live session, the triage driver, a widget) assigns an attribute of
    the app or of a screen: live.py used to set the app's no_model_reason from a worker thread
    and the screen's private _work_cancel, the triage driver the app's view."""
    offenders = []
    for path in sorted((PACKAGE / "ui").glob("*.py")):
        tree = ast.parse(path.read_text())
        owners = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
                  and any(_source(b).split(".")[-1] in ("App", "Screen", "ModalScreen") for b in node.bases)]
        handled = {id(n) for owner in owners for n in ast.walk(owner)}
        for node in ast.walk(tree):
            if id(node) in handled:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for target in targets:
                if not isinstance(target, ast.Attribute):
                    continue
                owner = _source(target.value)
                if owner in ("app", "screen", "debugger") or owner.endswith((".app", ".screen", ".debugger", ".cwm")) \
                        or "screen_stack" in owner:
                    offenders.append(f"{path.name}:{node.lineno}: {_source(target)} = ...")
    assert offenders == []


def _import_graph(with_lazy: bool) -> dict[str, set[str]]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):  # imports for type checkers only are not imports at run time
            if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                node.body = []
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        out = set()
        for node in (ast.walk(tree) if with_lazy else tree.body):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    target = f"{module}.{alias.name}"
                    out.add(target if target in modules else module)
            elif isinstance(node, ast.Import):
                out.update(alias.name for alias in node.names)
        graph[name] = {m for m in out if m in modules and m != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles_not_even_through_imports_inside_functions():
    """The backend protocol does not know the backends (the factory lives apart), the training
    card does not import the CLI: the package's imports form no cycle, counting the imports made
    inside functions (not those for type checkers only)."""
    graph = _import_graph(with_lazy=True)
    assert len(graph) > 60
    assert _cycles(graph) == []
