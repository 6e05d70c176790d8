"""#27: demo scripts are data, read and checked before the app starts: every sample ships one,
and a bad one is refused in one line (exit 2), never with a traceback."""

from __future__ import annotations

import argparse

import pytest

from cwmtui.cli import main
from cwmtui.cli.app import demo_from
from cwmtui.demo_script import ACTIONS, DemoScriptError, read_demo, script_beside

from .conftest import ROOT

SAMPLES = ROOT / "samples"


@pytest.mark.parametrize("program", sorted(p.name for p in SAMPLES.glob("*.py")))
def test_every_sample_ships_a_demo_that_reads(program):
    path = script_beside(str(SAMPLES / program))
    assert path.endswith(program[:-3] + ".demo.toml")
    script = read_demo(path)
    assert script.title and len(script.steps) >= 4
    assert script.steps[0].do == "open" and "wait" in [s.do for s in script.steps]
    assert all(s.do in ACTIONS and s.say for s in script.steps)


def test_demo_without_a_file_is_the_one_beside_the_program():
    args = argparse.Namespace(demo="", program=str(SAMPLES / "strings.py"))
    assert demo_from(args, args.program).path == str(SAMPLES / "strings.demo.toml")
    assert demo_from(argparse.Namespace(demo=None), "x.py") is None


def write(tmp_path, text: str) -> str:
    path = tmp_path / "bad.demo.toml"
    path.write_text(text)
    return str(path)


STEP = '[[step]]\ndo = "say"\nsay = "hello"\n'


@pytest.mark.parametrize(
    "text, message",
    [
        ('title = "x"\n[[step]\n', "not a demo script (TOML:"),
        ('title = "x"\n', "no steps"),
        ('colour = "red"\n' + STEP, "unknown key 'colour'"),
        ('[[step]]\ndo = "jump"\nsay = "x"\n', "do = 'jump' is not an action (one of: open, wait,"),
        ('[[step]]\nsay = "x"\n', "step 1 has no do (one of: open, wait,"),
        ('[[step]]\ndo = "say"\n', "say must be the caption"),
        ('[[step]]\ndo = "say"\nsay = "at {nowhere}"\n', "say names {nowhere}, which is not on screen"),
        ('[[step]]\ndo = "say"\nsay = "at {step.__class__}"\n', "say names {step.__class__}"),
        ('[[step]]\ndo = "say"\nsay = "at {step!r}"\n', "say names {step!r}"),
        ('[[step]]\ndo = "say"\nsay = "a { brace"\n', "write {{ and }} for braces"),
        ('[[step]]\ndo = "say"\nsay = "x"\nline = 3\n', "unknown key 'line' for say"),
        ('[[step]]\ndo = "override"\nsay = "x"\nline = "fake"\n', 'line must be "real" or a source line number'),
        ('[[step]]\ndo = "go-to"\nsay = "x"\n', "go-to needs step = N"),
        ('[[step]]\ndo = "say"\nsay = "x"\npause = -1\n', "pause must be a number of seconds"),
        ('[[step]]\ndo = "say"\nsay = "x"\nexpect = "maybe"\n', "expect = 'maybe'"),
        ('pause = "slow"\n' + STEP, "pause must be a number of seconds"),
    ],
)
def test_a_bad_script_is_refused_in_one_line(tmp_path, capsys, text, message):
    path = write(tmp_path, text)
    with pytest.raises(DemoScriptError, match=None) as caught:
        read_demo(path)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    code = main([str(SAMPLES / "strings.py"), "--demo", path])  # the same line from the command line, exit 2
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.startswith(f"cwmtui: error: --demo {path}")
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["{tmp}/lonely.py", "--demo"], "--demo: no demo script beside {tmp}/lonely.py (looked for {tmp}/lonely.demo.toml)"),
        (["{samples}/strings.py", "--demo", "{tmp}/none.toml"], "--demo {tmp}/none.toml: no such file"),
        (["{samples}/strings.py", "--demo", "{tmp}"], "is a directory, not a demo script"),
        (["--demo", "{samples}/strings.py"], "was taken as --demo's script: write PROGRAM first"),
    ],
)
def test_demo_option_errors(tmp_path, capsys, argv, message):
    (tmp_path / "lonely.py").write_text("def f():  # << START_OF_TRACE\n    return 1\n\nf()\n")
    fill = {"tmp": str(tmp_path), "samples": str(SAMPLES)}
    code = main([a.format(**fill) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and message.format(**fill) in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_an_override_of_a_line_the_program_lacks_is_refused_before_the_demo(tmp_path, capsys):
    """Review of #27: `line = 999` on a 30-line program (or a blank line) was taken, and the demo
    said it mid-talk ("skipped: line 999 is not a line the model can be given")."""
    program = SAMPLES / "strings.py"
    lines = program.read_text().splitlines()
    blank = next(n for n, line in enumerate(lines, 1) if not line.strip())
    for line, message in ((999, f"line 999 is past the end of strings.py ({len(lines)} lines)"),
                          (blank, f"line {blank} of strings.py is not a line the model can be given (a blank, "
                                  "comment or docstring line; it can be given ")):
        path = write(tmp_path, f'[[step]]\ndo = "override"\nsay = "x"\nline = {line}\n')
        code = main([str(program), "--demo", path])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith(f"cwmtui: error: --demo {path}: step 1: {message}"), err
        assert err.count("\n") == 1
    from cwmtui.cli.app import check_demo_lines
    from cwmtui.interpreter import load_program
    from cwmtui.trace.source import SourceMap

    runnable = min(SourceMap(program.read_text()).action_lines())
    fine = write(tmp_path, f'[[step]]\ndo = "override"\nsay = "x"\nline = {runnable}\n')
    check_demo_lines(read_demo(fine), load_program(str(program)))  # a line it can be given: taken


def test_a_saved_session_checks_the_lines_of_its_demo(tmp_path, interpreter):
    from cwmtui.ui.launch import LaunchError, session_app

    from .ui.sessions import strings_view

    path = tmp_path / "talk.json"
    strings_view(interpreter).engine.save(str(path))
    script = read_demo(write(tmp_path, '[[step]]\ndo = "override"\nsay = "x"\nline = 999\n'))
    with pytest.raises(LaunchError, match="line 999 is past the end of strings.py"):
        session_app(str(path), demo=script)
