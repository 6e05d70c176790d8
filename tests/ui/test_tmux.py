"""The real app in a real terminal: tmux at 120x40 and 80x24, driven with send-keys.

Run it as a script to see the screens: ``python -m tests.ui.test_tmux`` prints both captures.
Skipped where tmux is not installed (``apt-get install tmux``).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from cwmtui.interpreter import load_program, trace_program

from .sessions import SAMPLES, frame_texts

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def write_replay(folder: Path) -> Path:
    """samples/strings.py as a recorded generation with one wrong string (like a GPU batch dump)."""
    program = load_program(str(SAMPLES / "strings.py"))
    texts = frame_texts(trace_program(program).frames)
    step = next(i for i, t in enumerate(texts) if "\"rotated\": \"'ru'\"" in t)
    texts[step] = texts[step].replace("\"rotated\": \"'ru'\"", "\"rotated\": \"'rv'\"")
    path = folder / "strings.jsonl"
    record = {"id": "strings-1", "program": program.source, "generation": "".join(texts) + "<|end_of_text|>"}
    path.write_text(json.dumps(record) + "\n")
    return path


class Terminal:
    """One tmux session running one command."""

    def __init__(self, command: str, width: int, height: int) -> None:
        self.name = f"cwmtui-test-{uuid.uuid4().hex[:8]}"
        self.tmux = ["tmux", "-L", self.name, "-f", "/dev/null"]  # a server of its own
        self.width, self.height = width, height
        subprocess.run(
            [*self.tmux, "new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height),
             f"{command}; echo EXIT=$?; sleep 30", ";", "set-option", "-t", self.name, "status", "off"],
            check=True,
            # the pane's size is the terminal's: not a COLUMNS/LINES a test runner may have set
            env={k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")},
        )

    def screen(self) -> str:
        result = subprocess.run([*self.tmux, "capture-pane", "-p", "-t", self.name], capture_output=True, text=True)
        return result.stdout

    def wait_for(self, text: str, timeout: float = 120.0) -> str:  # a loaded 2-core CI box starts slowly
        start = time.monotonic()
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            if time.monotonic() - start > timeout:
                raise AssertionError(f"{text!r} did not appear; the screen:\n{screen}")
            time.sleep(0.2)

    def wait_until(self, condition, what: str, timeout: float = 180.0) -> str:
        start = time.monotonic()
        while True:
            screen = self.screen()
            if condition(screen):
                return screen
            if time.monotonic() - start > timeout:
                raise AssertionError(f"{what} did not happen; the screen:\n{screen}")
            time.sleep(0.2)

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", self.name, *keys], check=True)

    def close(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], check=False, capture_output=True)


def cwmtui(*args: str) -> str:
    """The command line of the installed console script (this Python's, so the same install)."""
    script = Path(sys.executable).with_name("cwmtui")
    command = [str(script)] if script.exists() else [sys.executable, "-c", "'from cwmtui.cli import entry; entry()'"]
    return " ".join(command + [shlex.quote(a) for a in args])


def run_at(width: int, height: int, replay: Path) -> tuple[str, str]:
    """The first screen, and the screen after ``d`` (the first divergence)."""
    terminal = Terminal(cwmtui("--replay", str(replay)), width, height)
    try:
        first = terminal.wait_for("first divergence")
        terminal.keys("d")
        at_divergence = terminal.wait_for("step 11/41")
        terminal.keys("q")
        terminal.wait_for("EXIT=0")
        return first, at_divergence
    finally:
        terminal.close()


def check_readable(screen: str, width: int, height: int) -> list[str]:
    lines = screen.rstrip("\n").split("\n")
    assert len(lines) <= height
    assert all(len(line) <= width for line in lines)
    return lines


def test_layout_at_120x40(tmp_path):
    first, screen = run_at(120, 40, write_replay(tmp_path))
    lines = check_readable(screen, 120, 40)
    for title in ("interpreter", "model · main", "source · <replay strings-1>", "state", "output"):
        assert title in screen
    row = next(line for line in lines if "≠ 11" in line)  # the divergent row, in both timelines
    assert "● 11" in row and "rotated='ru'" in row and "rotated='rv'" in row  # (● marks the first)
    assert "string-valued state: rotated" in screen
    assert "step 11/41" in screen and "branch main" in screen
    assert any(line.lstrip().startswith("? Help") and "q Quit" in line and "↓ ↑ step" in line for line in lines[-2:])
    assert "step 0/41" in first


def test_layout_at_80x24(tmp_path):
    _, screen = run_at(80, 24, write_replay(tmp_path))
    lines = check_readable(screen, 80, 24)
    for title in ("interpreter", "model · main", "source", "state"):
        assert title in screen
    row = next(line for line in lines if "≠ 11" in line)
    assert "● 11" in row and "rotated='rv'" in row
    assert "rotated" in screen.split("state", 1)[1]  # the state panel lists the wrong variable
    assert "string-valued state" in screen


HARD_EXIT = """import os


def f(n):  # << START_OF_TRACE
    total = n + 1
    os._exit(6)
    return total


f(2)
"""


def walk(width: int, height: int, *args: str, go_to: int = 12) -> dict[str, str]:
    """#24's walk-through of one program on the bundled model: the screen once the model has
    stopped (at the last row: both end reasons), after ':12⏎' typed at once, and after a resize."""
    terminal = Terminal(cwmtui(*args), width, height)
    try:
        screens = {}
        terminal.wait_until(lambda screen: "ended: " in screen and not any(
            busy in screen for busy in ("writing", "loading", "starting")), "the model stopping")
        terminal.keys("G")  # the last rows: each column's end row (■)
        screens["end"] = terminal.wait_until(lambda screen: screen.count("■") == 2, "both end rows")
        terminal.keys(f":{go_to}", "Enter")  # one send-keys: the terminal delivers them at once
        screens["goto"] = terminal.wait_for(f"step {go_to}/")
        subprocess.run([*terminal.tmux, "resize-window", "-t", terminal.name, "-x", "100", "-y", "30"], check=True)
        time.sleep(1.0)
        screens["resized"] = terminal.wait_for("? Help")
        terminal.keys("q")
        terminal.wait_for("EXIT=0")
        return screens
    finally:
        terminal.close()


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
def test_walk_through_the_end_reasons_type_ahead_and_a_resize(tmp_path, size):
    """The bundled model's context runs out on strings.py; a frame limit cuts the interpreter;
    a program ends itself with os._exit. Each says so on screen, in both columns' last rows and
    the status bar; ':12⏎' sent at once lands on step 12; the footer survives a resize."""
    width, height = size
    hard_exit = tmp_path / "hard_exit.py"
    hard_exit.write_text(HARD_EXIT)
    cases = [  # (what the end rows say at 120 columns, and in the narrower columns of 80)
        ((str(SAMPLES / "strings.py"),), ("context full (4,096 tokens)",) * 2, 12),
        ((str(SAMPLES / "strings.py"), "--max-frames", "20"), ("stopped by the frames limit",) * 2, 12),
        ((str(hard_exit),), ("os._exit(6)",) * 2, 3),
    ]
    for args, (said_wide, said_narrow), go_to in cases:
        said = said_wide if width >= 120 else said_narrow
        screens = walk(width, height, *args, go_to=go_to)
        end = screens["end"]
        check_readable(end, width, height)
        assert said in end, (args, end)
        assert "ended: " in end  # the status bar names the ends too (the model's where there is room)
        if width >= 120:
            assert " · model: " in end
        assert f"step {go_to}/" in screens["goto"]
        last = screens["resized"].rstrip("\n").split("\n")[-1]
        assert "? Help" in last and "q Quit" in last, screens["resized"]


def test_bad_input_never_starts_the_app(tmp_path):
    terminal = Terminal(cwmtui(str(tmp_path / "missing.py")), 200, 24)
    try:
        screen = terminal.wait_for("EXIT=2")
        assert "missing.py: no such file" in screen
    finally:
        terminal.close()


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        replay = write_replay(Path(folder))
        for size in ((120, 40), (80, 24)):
            first, divergence = run_at(*size, replay)
            print(f"--- {size[0]}x{size[1]} at the first divergence (d) ---")
            print(divergence)
