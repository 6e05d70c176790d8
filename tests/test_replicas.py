"""``--server`` given several times: replicas of one model behind loopback vLLM-shaped servers.
Calls spread by load across workers, a rollout stays on its replica, a replica that fails is
marked down and its calls go elsewhere (a whole ``cwmtui eval`` run loses no program and runs
none twice), a refusal is the user's to see, and all replicas down is one clear error."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from cwmtui.cli import main
from cwmtui.evaluation.batch import BatchOptions, BatchRun, trace_suite
from cwmtui.evaluation.suite import load_suite
from cwmtui.interpreter import Interpreter
from cwmtui.model import ModelError, Rollout, RolloutStatus, open_backend
from cwmtui.model.replicas import ReplicaBackend, ReplicaSet, ReplicasDown, shared_replicas
from cwmtui.model.server import ServerBackend
from cwmtui.trace import tokens

from .replica_servers import SuiteServer, suite_scripts, write_suite
from .test_model_server import FRAME_SEP

#: the fields of a result that say what the model did (not when, how fast, or which server)
RESULT_FIELDS = ("id", "generation", "status", "class", "string_valued", "step", "output", "trace_exact", "frames",
                 "first_divergence", "truth", "tokens")


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    path = write_suite(tmp_path_factory.mktemp("suite") / "loops.jsonl", 8)
    return path, load_suite(str(path))


@pytest.fixture(scope="module")
def scripts(suite):
    with Interpreter() as interpreter:
        return suite_scripts(suite[1].cases, interpreter, wrong_every=3)


@pytest.fixture(scope="module")
def truths(suite):
    return trace_suite(suite[1].cases)


@pytest.fixture
def servers(scripts):
    made: list[SuiteServer] = []

    def make(count: int = 2, **options) -> list[SuiteServer]:
        new = [SuiteServer(scripts, **options) for _ in range(count)]
        made.extend(new)
        return new

    yield make
    for server in made:
        server.close()


def replicas_of(*servers, **options) -> ReplicaBackend:
    options = {"timeout": 5.0, "retries": 1, "backoff": 0.01} | options
    return ReplicaBackend([s.url for s in servers], **options)


def rollout_of(backend, truth) -> Rollout:
    rollout = Rollout(backend, truth.case.program, truth.trace.frames[0])
    rollout.run(cancel=threading.Event())
    return rollout


def head(script: list[int]) -> int:
    """Where the frames of a program's script begin (its prompt up to there names the program)."""
    return script.index(FRAME_SEP) + 1


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# -- opening ---------------------------------------------------------------------------------


def test_several_servers_open_one_backend_named_for_its_replicas(servers):
    a, b = servers()
    with open_backend(server=[a.url, b.url]) as backend:
        assert isinstance(backend, ReplicaBackend)
        assert backend.name == "vllm · 2 replicas (facebook/cwm)"
        assert backend.description == f"vllm server · 2 replicas (facebook/cwm): {a.url}, {b.url}"
        assert backend.special_ids[tokens.FRAME_SEP] == FRAME_SEP
        assert backend.context_length == 131072 and backend.warning is None
        assert backend.replica_report() == [
            {"url": s.url, "calls": 0, "failures": 0, "down_reason": None, "down_since": None, "last_failure": None}
            for s in (a, b)
        ]
    with open_backend(server=[a.url]) as one:  # one URL: the plain server backend
        assert isinstance(one, ServerBackend)


def test_each_url_is_checked_and_none_given_twice(servers):
    (a,) = servers(1)
    with pytest.raises(ModelError, match=r"--server 'localhost:8000': not an http\(s\) URL"):
        open_backend(server=[a.url, "localhost:8000"])
    with pytest.raises(ModelError, match=r"--server http://127\.0\.0\.1:\d+\S* is given twice"):
        open_backend(server=[a.url, a.url + "/v1/"])
    with pytest.raises(ModelError, match=r"--server http://127\.0\.0\.1:\d+\S* is given twice"):
        open_backend(server=[a.url, a.url.replace("http://", "http://user:secret@")])
    assert not a.requests  # refused before any request


def test_the_api_key_goes_to_every_replica_and_a_refused_key_is_raised(servers):
    a, b = servers()
    a.api_key = b.api_key = "sesame"
    with open_backend(server=[a.url, b.url], api_key="sesame") as backend:
        assert backend.replica_report()[1]["down_reason"] is None
    for server in (a, b):
        assert {h.get("Authorization") for h in server.headers} == {"Bearer sesame"}
    b.api_key = "other"
    with pytest.raises(ModelError, match="refused the API key") as caught:
        open_backend(server=[a.url, b.url], api_key="sesame")
    assert "sesame" not in str(caught.value)
    with pytest.raises(ModelError, match="holds characters an HTTP header cannot carry"):
        open_backend(server=[a.url, b.url], api_key="sésame")


def test_a_replica_down_at_opening_is_named_and_the_others_serve(servers, truths):
    (a,) = servers(1)
    port = closed_port()
    with ReplicaBackend([f"http://127.0.0.1:{port}", a.url], retries=0) as backend:
        assert backend.warning.startswith(f"1 of 2 --server replicas answer; down: http://127.0.0.1:{port} (unreachable")
        rollout = rollout_of(backend, truths[1])
        assert rollout.frames == truths[1].trace.frames
        report = backend.replica_report()
    assert report[0]["failures"] == 1 and report[0]["down_reason"].startswith("unreachable") and report[0]["down_since"]
    assert report[1]["calls"] == len(truths[1].trace.frames) and report[1]["down_reason"] is None


def test_every_replica_down_at_opening_is_one_clear_error():
    ports = [closed_port(), closed_port()]
    with pytest.raises(ReplicasDown) as caught:
        open_backend(server=[f"http://127.0.0.1:{p}" for p in ports])
    message = str(caught.value)
    assert message.startswith("all 2 --server replicas are down: ")
    for port in ports:
        assert f"http://127.0.0.1:{port} (unreachable (is the server running? is the URL right?)" in message
    assert "\n" not in message


def test_the_eval_command_says_every_replica_is_down_in_one_line(capsys, suite):
    ports = [closed_port(), closed_port()]
    code = main(["eval", str(suite[0]), *(a for p in ports for a in ("--server", f"http://127.0.0.1:{p}"))])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    line = next(line for line in err.splitlines() if "replicas are down" in line)
    assert all(f"127.0.0.1:{p}" in line for p in ports)


# -- where calls go --------------------------------------------------------------------------


def test_a_rollout_stays_on_its_replica_and_the_next_program_goes_to_the_other(servers, truths):
    a, b = servers()
    with replicas_of(a, b) as backend:
        first = rollout_of(backend, truths[0])
        second = rollout_of(backend, truths[1])
        assert first.frames and second.frames
        # the first program on one server, every frame of it; the second on the other
        assert (set(a.served), set(b.served)) in (({0}, {1}), ({1}, {0}))
        again = rollout_of(backend, truths[0])  # the program again: least loaded now (fewer calls)
        assert again.frames == first.frames
        report = backend.replica_report()
    assert sum(r["calls"] for r in report) == a.completions + b.completions


def test_a_call_that_continues_the_rollout_sticks_even_when_the_other_is_idle(servers, scripts):
    a, b = servers()
    script = scripts[2]
    with replicas_of(a, b) as backend:
        start = head(script)
        backend.complete(script[: start + 5], [FRAME_SEP], 8)
        home = 0 if a.completions else 1
        for cut in (start + 30, start + 12, start + 60):  # the next frames, and a rewind to an earlier point
            backend.complete(script[:cut], [FRAME_SEP], 8)
        assert [a.completions, b.completions][home] == 4 and [a.completions, b.completions][1 - home] == 0
        backend.complete(scripts[3][: head(scripts[3]) + 5], [FRAME_SEP], 8)  # another program: the other replica
        assert [a.completions, b.completions][1 - home] == 1


def test_load_is_counted_across_the_workers_of_one_run(servers, truths):
    """Two eval workers, each with its own backend over the same replicas: one ReplicaSet, and
    the two rollouts in flight at once run on different servers."""
    a, b = servers(token_seconds=0.002)
    with open_backend(server=[a.url, b.url]) as one, open_backend(server=[a.url, b.url]) as two:
        assert one.replicas is two.replicas
        both = threading.Barrier(2)
        done: dict[int, Rollout] = {}

        def work(number, backend):
            both.wait()
            done[number] = rollout_of(backend, truths[number])

        threads = [threading.Thread(target=work, args=(n, be)) for n, be in ((1, one), (2, two))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert all(done[n].frames == truths[n].trace.frames for n in (1, 2))
        assert (set(a.served), set(b.served)) in (({1}, {2}), ({2}, {1}))  # one program a server, both busy
    with open_backend(server=[a.url, b.url]) as three:  # opened after the others closed: fresh state
        assert three.replicas is not one.replicas


# -- failures --------------------------------------------------------------------------------


def test_a_server_error_marks_the_replica_down_and_the_call_goes_to_the_other(servers, scripts):
    a, b = servers()
    script = scripts[0]
    with replicas_of(a, b) as backend:
        start = head(script)
        backend.complete(script[: start + 3], [FRAME_SEP], 4)
        home, other = (a, b) if a.completions else (b, a)
        home.actions["/v1/completions"] = [("status", 503, {"error": {"message": "overloaded"}})] * 2
        completion = backend.complete(script[: start + 10], [FRAME_SEP], 4)  # sticky, but its replica fails
        assert completion.ids == script[start + 10 : start + 14]
        assert other.completions == 1
        report = backend.replica_report()[[a, b].index(home)]
        assert report["failures"] == 1 and report["calls"] == 2
        assert report["down_reason"] == "the server answered HTTP 503: overloaded; gave up after 2 tries"
        backend.complete(script[: start + 20], [FRAME_SEP], 4)  # the rollout now lives on the other
        backend.complete(scripts[1][: head(scripts[1]) + 2], [FRAME_SEP], 4)  # a new program: only the other is up
        assert other.completions == 3 and home.completions == 1


def test_a_refused_request_is_raised_and_the_replica_stays_up(servers, scripts):
    a, b = servers()
    script = scripts[0]
    with replicas_of(a, b) as backend:
        backend.complete(script[: head(script) + 2], [FRAME_SEP], 4)
        home, other = (a, b) if a.completions else (b, a)
        home.actions["/v1/completions"] = [("status", 400, {"object": "error", "message": "maximum context length is 5 tokens", "code": 400})]
        with pytest.raises(ModelError, match=r"HTTP 400\): maximum context length") as caught:
            backend.complete(script[: head(script) + 9], [FRAME_SEP], 4)
        assert not isinstance(caught.value, ReplicasDown)
        assert other.completions == 0
        assert all(r["down_reason"] is None and r["failures"] == 0 for r in backend.replica_report())


def test_a_replica_killed_in_the_middle_of_an_answer_is_left_for_the_other(servers, scripts):
    a, b = servers(token_seconds=0.01)
    script = scripts[1]
    with replicas_of(a, b) as backend:
        start = head(script) + 1
        backend.complete(script[:start], [FRAME_SEP], 2, cancel=threading.Event())
        home, other = (a, b) if a.completions else (b, a)
        threading.Timer(0.1, home.kill).start()
        end = script.index(FRAME_SEP, start)  # a whole frame: tokens still to come when it dies
        assert end - start > 20
        completion = backend.complete(script[:start], [FRAME_SEP], 200, cancel=threading.Event())
        assert completion.ids == script[start : end + 1] and completion.stopped == "stop"  # whole, from the other
        assert other.completions == 1
        down = backend.replica_report()[[a, b].index(home)]
        assert down["down_reason"] and down["failures"] == 1


def test_every_replica_failing_in_the_middle_is_one_clear_error(servers, scripts):
    a, b = servers()
    with replicas_of(a, b) as backend:
        backend.complete(scripts[0][: head(scripts[0])], [FRAME_SEP], 4)
        a.kill()
        b.kill()
        with pytest.raises(ReplicasDown) as caught:
            backend.complete(scripts[0][: head(scripts[0]) + 4], [FRAME_SEP], 4)
        message = str(caught.value)
        assert message.startswith("all 2 --server replicas are down: ") and "\n" not in message
        assert f"{a.url} (" in message and f"{b.url} (" in message
        started = time.monotonic()
        with pytest.raises(ReplicasDown):  # the next call says so at once
            backend.complete(scripts[1][: head(scripts[1])], [FRAME_SEP], 4)
        assert time.monotonic() - started < 0.1


def test_a_replica_down_is_tried_again_after_a_while_and_comes_back(servers, scripts):
    a, b = servers()
    replicas = ReplicaSet([a.url, b.url], retry_after=0.2)
    with replicas_of(a, b, replicas=replicas, retries=0) as backend:
        a.actions["/v1/completions"] = [("status", 502, b"bad gateway")]
        backend.complete(scripts[0][: head(scripts[0])], [FRAME_SEP], 4)  # a first (tie), fails: b serves it
        assert b.completions == 1 and replicas.report()[0]["down_reason"] == "the server answered HTTP 502: bad gateway"
        backend.complete(scripts[1][: head(scripts[1])], [FRAME_SEP], 4)  # a is down: b again
        assert (a.completions, b.completions) == (0, 2)
        time.sleep(0.25)
        backend.complete(scripts[2][: head(scripts[2])], [FRAME_SEP], 4)  # a new program: a is tried again, and answers
        assert a.completions == 1
        report = replicas.report()[0]
    assert report["down_reason"] is None and report["failures"] == 1
    assert report["last_failure"] == "the server answered HTTP 502: bad gateway"


def test_an_interrupt_ends_the_call_without_marking_the_replica_down(servers, scripts):
    a, b = servers(token_seconds=0.05)
    with replicas_of(a, b) as backend:
        threading.Timer(0.2, backend.interrupt).start()
        started = time.monotonic()
        with pytest.raises(ModelError, match="cancelled"):
            backend.complete(scripts[0][: head(scripts[0])], [FRAME_SEP], 100, cancel=threading.Event())
        assert time.monotonic() - started < 2
        assert all(r["down_reason"] is None for r in backend.replica_report())


# -- a whole run -----------------------------------------------------------------------------


def run_eval(capsys, tmp_path, suite_path, urls, name) -> tuple[dict, list[dict]]:
    out = tmp_path / f"{name}.jsonl"
    argv = ["eval", str(suite_path), "--concurrency", "2", "--out", str(out), "--json"]
    for url in urls:
        argv += ["--server", url]
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out), [json.loads(line) for line in out.read_text().splitlines()]


def test_a_replica_killed_mid_run_loses_no_program_and_runs_none_twice(capsys, tmp_path, suite, scripts, servers):
    (healthy,) = servers(1)
    alone_report, alone = run_eval(capsys, tmp_path, suite[0], [healthy.url], "alone")

    a, b = servers(token_seconds=0.0005)
    b.die_after = 12  # of about 90 completions: in the middle of its second or third program
    replicas = shared_replicas([a.url, b.url])  # what the run's backends share (held here to read it after)
    report, records = run_eval(capsys, tmp_path, suite[0], [a.url, b.url], "replicas")

    assert b.dead.is_set() and b.completions >= 12 and a.completions > 0
    ids = [r["id"] for r in records]
    assert sorted(ids) == sorted(c.id for c in suite[1].cases) and len(set(ids)) == len(ids)  # each once
    assert all(r["status"] != "error" for r in records)
    by_id = {r["id"]: r for r in alone}
    for record in records:
        assert {k: record.get(k) for k in RESULT_FIELDS} == {k: by_id[record["id"]].get(k) for k in RESULT_FIELDS}
        assert record["model"] == "vllm · 2 replicas (facebook/cwm)"
    for key in ("count", "output_accuracy", "trace_exact", "action_exact", "state_exact", "first_divergence_kinds"):
        assert report[key] == alone_report[key]
    assert 0 < report["output_accuracy"] < 1  # the model got some programs wrong: not all alike
    dead = replicas.report()[1]
    assert dead["url"] == b.url and dead["failures"] >= 1 and dead["down_reason"]
    assert replicas.report()[0]["down_reason"] is None
    # the report names the replica that failed (and the stderr says so in one line)
    named = {r["url"]: r for r in report["replicas"]}
    assert named[b.url]["failures"] >= 1 and named[a.url]["failures"] == 0
    assert report["config"]["servers"] == [a.url, b.url]


def test_a_batch_run_over_replicas_shares_one_replica_set(servers, suite, truths):
    a, b = servers(token_seconds=0.0002)
    opened: list[ReplicaBackend] = []

    def open_one():
        backend = open_backend(server=[a.url, b.url])
        opened.append(backend)
        return backend

    records = BatchRun(suite[1], open_one, BatchOptions(concurrency=3)).run(truths)
    assert len(records) == len(truths) and len(opened) == 3
    assert opened[0].replicas is opened[1].replicas is opened[2].replicas
    report = opened[0].replica_report()
    assert report[0]["calls"] > 0 and report[1]["calls"] > 0
    assert sum(r["calls"] for r in report) == a.completions + b.completions
    assert all(r["status"] == RolloutStatus.ENDED.value for r in records)


def test_the_debugger_checks_every_server_url_before_it_starts():
    import argparse

    from cwmtui.cli import UsageError
    from cwmtui.cli.app import check_model

    args = argparse.Namespace(model=None, server=["http://a:8000", "gpu:8000"], server_kind="vllm", api_key=None,
                              served_model=None)
    with pytest.raises(UsageError, match=r"--server 'gpu:8000': not an http\(s\) URL"):
        check_model(args)
    args.server = ["http://a:8000", "http://a:8000/"]
    with pytest.raises(UsageError, match="is given twice"):
        check_model(args)
    args.server = ["http://a:8000", "http://b:8000"]
    check_model(args)  # nothing is reached before the app starts


def test_a_stream_cut_before_its_end_is_retried_not_taken_for_a_short_frame(servers, scripts):
    """A killed server closes the connection: with vLLM's streamed answer that reads as a clean
    end, and only the missing [DONE] tells the frame is not whole."""
    (a,) = servers(1)
    script = scripts[1]
    start = head(script)
    whole = a.events

    def cut(payload):
        for number, event in enumerate(whole(payload)):
            if number == 3:
                raise ConnectionResetError  # the connection closes here, without [DONE]
            yield event

    with ServerBackend(a.url, retries=1, backoff=0.01) as backend:
        a.events = cut
        with pytest.raises(ModelError, match=r"closed the connection before the end of its answer; gave up after 2 tries$"):
            backend.complete(script[:start], [FRAME_SEP], 50, cancel=threading.Event())
        a.events = whole
        completion = backend.complete(script[:start], [FRAME_SEP], 50, cancel=threading.Event())
    assert completion.ids == script[start : script.index(FRAME_SEP, start) + 1]


def test_replicas_of_different_models_are_refused(servers):
    a, b = servers()
    b.models = [dict(b.models[0], id="facebook/cwm-sft")]
    with pytest.raises(ModelError, match=rf"--server {b.url} is not a replica of the same model: it serves facebook/cwm-sft, {a.url} serves facebook/cwm"):
        open_backend(server=[a.url, b.url])
    b.models = [dict(b.models[0], id="facebook/cwm", max_model_len=4096)]  # the same model, a shorter context
    with open_backend(server=[a.url, b.url]) as backend:
        assert backend.context_length == 4096
