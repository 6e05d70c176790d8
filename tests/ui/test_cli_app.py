"""`cwmtui PROGRAM`, `cwmtui --replay`, `cwmtui open`: bad input is one line and exit 2, before
any app starts."""

from __future__ import annotations

import json

import pytest

from cwmtui.cli import main

from .sessions import SAMPLES


def run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    err = capsys.readouterr().err
    return code, err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["missing.py"], "missing.py: no such file"),
        ([str(SAMPLES / "strings.py"), "--theme", "neon"], "no theme named 'neon'"),
        ([str(SAMPLES / "strings.py"), "--theme", "nowhere/x.tcss"], "theme file 'nowhere/x.tcss' not found"),
        ([str(SAMPLES / "strings.py"), "--model", "/no/such/model"], "--model /no/such/model: no such model directory"),
        ([str(SAMPLES / "strings.py"), "--model", str(SAMPLES / "swaps.py")], "swaps.py: not a directory (--model takes"),
        ([str(SAMPLES / "strings.py"), "--entry", "nope"], "no function named 'nope'"),
        (["--replay", "/no/such.jsonl"], "/no/such.jsonl: no such file"),
        (["--replay", "/no/such.jsonl", "--id", "3"], "/no/such.jsonl: no such file"),
        (["--theme", "light"], "no program"),
        (["open", "/no/such/session.json"], "/no/such/session.json: no such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(capsys, argv, message):
    code, err = run(capsys, *argv)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_replay_brings_its_own_program(capsys, tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"id": "a", "program": "def f():  # << START_OF_TRACE\n    return 1\n",
                                "generation": ""}) + "\n")
    code, err = run(capsys, str(SAMPLES / "strings.py"), "--replay", str(path))
    assert code == 2 and "--replay brings its own program" in err


def test_replay_with_an_unknown_id_names_the_ids(capsys, tmp_path):
    path = tmp_path / "r.jsonl"
    record = {"program": "def f():  # << START_OF_TRACE\n    return 1\n", "generation": ""}
    path.write_text("".join(json.dumps({**record, "id": i}) + "\n" for i in ("a", "b")))
    code, err = run(capsys, "--replay", str(path), "--id", "zz")
    assert code == 2 and "no generation with id 'zz'" in err and "a, b" in err


def test_a_replay_list_with_a_model_is_refused(capsys, tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "a", "generation": ""}\n{"id": "b", "generation": ""}\n')
    code, err = run(capsys, "--replay", str(path), "--model", "/x")
    assert code == 2 and "cannot be used together" in err


def test_open_refuses_a_file_that_is_not_a_session(capsys, tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"hello": 1}')
    code, err = run(capsys, "open", str(path))
    assert code == 2 and "not a cwmtui session file" in err


def test_help_names_the_debugger_and_open(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "cwmtui PROGRAM" in out and "open" in out and "--replay" in out
