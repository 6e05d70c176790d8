"""Suites read from files: CRUXEval, a directory of .py files, a JSONL of programs."""

import json
from pathlib import Path

import pytest

from cwmtui.evaluation.suite import SuiteError, load_suite




def test_cruxeval_suite_wraps_each_sample_in_main(interpreter):
    suite = load_suite("cruxeval", count=3)
    assert suite.name == "cruxeval" and [c.id for c in suite.cases] == ["sample_0", "sample_1", "sample_2"]
    case = suite.cases[0]
    assert case.given["input"] == "[1, 1, 3, 1, 3, 1]"
    assert case.program.entry == "main" and case.program.call == "main()"
    trace = interpreter.trace(case.program)
    assert trace.return_value() == "[(4, 1), (4, 1), (4, 1), (4, 1), (2, 3), (2, 3)]"
    assert len(load_suite("cruxeval").cases) == 800


def test_directory_of_programs(tmp_path, interpreter):
    (tmp_path / "b.py").write_text("def g(s):  # << START_OF_TRACE\n    return s[::-1]\n\ng('ab')\n")
    (tmp_path / "a.py").write_text("def f(x):  # << START_OF_TRACE\n    return x * 2\n\nf(21)\n")
    (tmp_path / "notes.txt").write_text("not a program")
    suite = load_suite(str(tmp_path))
    assert [c.id for c in suite.cases] == ["a", "b"]
    assert interpreter.trace(suite.cases[0].program).return_value() == "42"
    assert [c.id for c in load_suite(str(tmp_path), count=1).cases] == ["a"]


def test_jsonl_of_programs_and_of_cruxeval_records(tmp_path, interpreter):
    path = tmp_path / "programs.jsonl"
    lines = [
        {"id": "double", "program": "def f(x):\n    return x * 2\n", "call": "f(4)", "metadata": {"n": 1}},
        {"id": "upper", "code": "def f(s):\n    return s.upper()", "input": "'ab'"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    suite = load_suite(str(path))
    assert suite.name == "programs"
    double, upper = suite.cases
    assert double.metadata == {"n": 1} and double.given == {}
    assert upper.given == {"code": "def f(s):\n    return s.upper()", "input": "'ab'"}
    assert interpreter.trace(double.program).return_value() == "8"
    assert interpreter.trace(upper.program).return_value() == "'AB'"


def test_programs_without_ids_are_named_by_their_line_as_in_a_replay_file(tmp_path):
    # a dump of generations without ids is matched to the suite by line number (RecordedGenerations)
    program = json.dumps({"program": "def f():\n    return 1\n", "call": "f()"})
    path = tmp_path / "programs.jsonl"
    path.write_text(f"{program}\n\n{program}\n")
    assert [case.id for case in load_suite(str(path)).cases] == ["1", "3"]


def test_a_raw_line_separator_inside_a_json_string_does_not_split_the_line(tmp_path, interpreter):
    # json.dumps(..., ensure_ascii=False), as results files are written, leaves U+2028 raw
    path = tmp_path / "programs.jsonl"
    record = {"id": "sep", "program": "def f():\n    return 'a\u2028b'\n", "call": "f()"}
    path.write_text("\ufeff" + json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")  # and a BOM
    (case,) = load_suite(str(path)).cases
    assert interpreter.trace(case.program).return_value() == "'a\\u2028b'"


def test_old_mac_line_ends_and_a_damaged_line_past_count(tmp_path):
    program = json.dumps({"program": "def f():\n    return 1\n", "call": "f()"})
    path = tmp_path / "programs.jsonl"
    path.write_bytes(f"{program}\r{program}\r\n{program}\rnot json\r".encode())
    assert [case.id for case in load_suite(str(path), count=3).cases] == ["1", "2", "3"]  # line 4 never parsed
    with pytest.raises(SuiteError, match=r"programs.jsonl:4: not valid JSON"):
        load_suite(str(path))


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"id": "x"}\n', "needs 'program'"),
        ("not json\n", r":1: not valid JSON \(Expecting value at column 1\)"),
        ('{"id": "x", "program": "def f(:\\n"}\n', "syntax error"),
        ('{"id": "x", "code": "def f(): return 1", "input": ""}\n{"id": "x", "code": "def f(): return 1", "input": ""}\n', "appears twice"),
        ("", "no programs"),
    ],
)
def test_bad_jsonl_is_one_clear_error(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(SuiteError, match=message):
        load_suite(str(path))


def test_unknown_suite_names_the_choices(tmp_path):
    with pytest.raises(SuiteError, match="cruxeval, s5, zoo"):
        load_suite("humaneval")
    with pytest.raises(SuiteError, match="no such file"):
        load_suite(str(tmp_path / "missing.jsonl"))
    with pytest.raises(SuiteError, match="no .py files"):
        load_suite(str(tmp_path))


def test_zoo_types_pick_the_value_types():
    suite = load_suite("zoo", depth=[2], types=["string", "list"], count=1)
    assert sorted({c.metadata["type"] for c in suite.cases}) == ["list", "string"]
    assert len(suite.cases) == 2 * 2  # two types, nested and flat
    assert {c.metadata["depth"] for c in suite.cases} == {2}


def test_cruxeval_ships_inside_the_package_with_its_licence():
    from cwmtui.evaluation.suite import CRUXEVAL_DATA

    import cwmtui

    package = Path(cwmtui.__file__).resolve().parent
    assert CRUXEVAL_DATA.is_relative_to(package)  # not read from beside the checkout
    assert (CRUXEVAL_DATA.parent / "LICENSE").read_text().startswith("MIT License")


def test_cruxeval_data_option_reads_another_copy(tmp_path):
    copy = tmp_path / "crux.jsonl"
    copy.write_text(json.dumps({"id": "mine_0", "code": "def f(x):\n    return x + 1\n", "input": "1", "output": "2"}) + "\n")
    assert [c.id for c in load_suite("cruxeval", data=str(copy)).cases] == ["mine_0"]
    (tmp_path / "cruxeval.jsonl").write_text(copy.read_text())
    assert [c.id for c in load_suite("cruxeval", data=str(tmp_path)).cases] == ["mine_0"]  # a folder holding it
    with pytest.raises(SuiteError, match="--data .*no such file"):
        load_suite("cruxeval", data=str(tmp_path / "missing.jsonl"))
    with pytest.raises(SuiteError, match="for the cruxeval suite"):
        load_suite("s5", data=str(copy))
