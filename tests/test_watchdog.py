"""The run's watchdog (tools/run/watchdog.py): its decisions, its heartbeat, its bundle, and the facts of
huggingface_hub 2.4.0 it relies on.

The decision table is tested as a pure function (decide()), then end to end through the real
huggingface_hub client against the loopback fake of the HF Jobs API (tests/fakes/fake_hf_jobs.py,
which plays scheduled jobs and label updates) and the fake model server's /metrics
(tests/fakes/fake_openai.py --metrics FILE, whose figures each test writes). Every check is given
its clock (`now`), so no test waits on time. The scripts' side (make serve installs it, make stop
and AUTO_STOP remove it, make status shows it) is in lifecycle.bats, stop.bats, remote.bats and
status.bats; the whole rehearsal (a SIGKILLed make reproduce whose server the watchdog cancels)
is in test_reproduce.py.
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import datetime as dt
import gzip
import hashlib
import inspect
import io
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import click
import pytest
from huggingface_hub import HfApi

from tools.run import watchdog, watchdog_bundle

REPO = Path(__file__).resolve().parents[1]
TOKEN = "hf_fake-token-that-must-never-be-printed"
T0 = 1_780_000_000  # when the scenario's server was created (2026-05-28)
GRACE = 3600
INSTANCE = "0a1b2c3d4e5f6789"  # the run's instance (scripts/lib.sh): which checkout's qwen-t2 this is
RUN_LABELS = {"project": "terminal-bench-harness", "run": "qwen-t2", "instance": INSTANCE}
SERVER_LABELS = {**RUN_LABELS, "role": "server", "model": "qwen3_8-27b-fp8", "launch": "0123456789abcdef"}
WATCHDOG_LABELS = {**RUN_LABELS, "role": "watchdog", "name": "watchdog-qwen-t2", "code": "c0de"}
CFG = watchdog.Run(run="qwen-t2", project="terminal-bench-harness", instance=INSTANCE, namespace="alice", grace=GRACE)


def iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def wait_for(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def start(argv: list[str], port_file: Path) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: port_file.exists() and port_file.read_text().strip() or proc.poll() is not None, 30, port_file)
    assert proc.poll() is None, f"{argv[1]} exited"
    return proc, int(port_file.read_text())


class Fakes:
    """The fake Jobs API with a scenario, and a fake model server whose /metrics a test writes."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.procs: list[subprocess.Popen] = []
        self.metrics = tmp / "metrics.txt"
        self.openai_record = tmp / "openai.jsonl"
        proc, port = start([sys.executable, str(REPO / "tests/fakes/fake_openai.py"), "--port-file",
                            str(tmp / "openai.port"), "--record", str(self.openai_record), "--metrics",
                            str(self.metrics), "--max-lifetime", "300"], tmp / "openai.port")
        self.procs.append(proc)
        self.model_url = f"http://127.0.0.1:{port}"
        self.record = tmp / "hf.jsonl"
        self.url = ""

    def jobs_api(self, scenario: dict) -> HfApi:
        (self.tmp / "scenario.json").write_text(json.dumps({"namespace": "alice", **scenario}))
        proc, port = start([sys.executable, str(REPO / "tests/fakes/fake_hf_jobs.py"), "--scenario",
                            str(self.tmp / "scenario.json"), "--record", str(self.record), "--port-file",
                            str(self.tmp / "hf.port"), "--max-lifetime", "300"], self.tmp / "hf.port")
        self.procs.append(proc)
        self.url = f"http://127.0.0.1:{port}"
        return HfApi(endpoint=self.url, token=TOKEN)

    def requests(self) -> list[dict]:
        return [json.loads(line) for line in self.record.read_text().splitlines()] if self.record.exists() else []

    def writes(self) -> list[tuple[str, str]]:
        """Every request that changed something, in order: (method, path)."""
        return [(r["method"], r["path"]) for r in self.requests() if r["method"] != "GET"]

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
            proc.wait(timeout=10)


@pytest.fixture
def fakes(tmp_path):
    made = Fakes(tmp_path)
    yield made
    made.stop()


def server(fakes: Fakes, *, stage: str = "RUNNING", heartbeat: int | None = None, created: float = T0,
           labels: dict | None = None) -> dict:
    labels = {**SERVER_LABELS, **(labels or {})}
    if heartbeat is not None:
        labels["heartbeat"] = str(heartbeat)
    return {"stages": [stage], "flavor": "h200", "port": 30000, "created_at": iso(created),
            "expose_url": fakes.model_url, "labels": labels}


def scenario(fakes: Fakes, *, watchdog_labels: dict | None = None, **jobs: dict) -> dict:
    return {"jobs": jobs, "scheduled_jobs": {"wd1": {"labels": {**WATCHDOG_LABELS, **(watchdog_labels or {})},
                                                     "schedule": "*/15 * * * *"}}}


def vllm_metrics(running: float, tokens: float) -> str:
    """vLLM's /metrics, as its Prometheus client writes it (the lines the watchdog reads among others)."""
    return (f'# HELP vllm:num_requests_running Number of requests in model execution batches.\n'
            f'# TYPE vllm:num_requests_running gauge\n'
            f'vllm:num_requests_running{{engine="0",model_name="openai/gpt-oss-20b"}} {running}\n'
            f'# TYPE vllm:generation_tokens_total counter\n'
            f'vllm:generation_tokens_total{{engine="0",model_name="openai/gpt-oss-20b"}} {tokens}\n'
            f'vllm:generation_tokens_created{{engine="0",model_name="openai/gpt-oss-20b"}} 1.78e+09\n')


def play_the_scheduler(spec: dict, *, endpoint: str, token: str, tmp: Path) -> tuple[subprocess.CompletedProcess, float,
                                                                                       float]:
    """One run of a scheduled job's spec as HF's scheduler runs it: its command, in its environment,
    with its secrets' values (HF_TOKEN: TOKEN), in a scratch HOME. Here HF is the fake (HF_ENDPOINT)
    and PyPI a stub of pip that keeps what it was asked in TMP (pip-argv, pip-requirements.txt):
    the job's python is .venv's, which has huggingface_hub. (run, started, ended)."""
    bin_dir = tmp / "scheduler-bin"
    if not bin_dir.exists():
        bin_dir.mkdir()
        (bin_dir / "pip").write_text(f'#!/usr/bin/env bash\nprintf "%s\\n" "$*" >>"{tmp}/pip-argv"\n'
                                     f'cp requirements.txt "{tmp}/pip-requirements.txt"\n')
        (bin_dir / "pip").chmod(0o755)
        (tmp / "scheduler-home").mkdir()
    env = {"PATH": f"{bin_dir}:{REPO / '.venv/bin'}:/usr/bin:/bin", "HOME": str(tmp / "scheduler-home"),
           "TMPDIR": str(tmp), "HF_HOME": str(tmp / "scheduler-home"), "HF_HUB_DISABLE_UPDATE_CHECK": "1",
           "HF_ENDPOINT": endpoint, **spec["environment"], **{name: token for name in spec["secrets"]}}
    started = time.time()
    proc = subprocess.run(spec["command"], env=env, cwd=tmp, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    return proc, started, time.time()


def scheduled(api: HfApi) -> dict[str, dict]:
    return {sj.id: dict(sj.job_spec.labels or {}) for sj in api.list_scheduled_jobs(namespace="alice")}


def run_check(api: HfApi, now: float, capsys) -> tuple[int, list[str]]:
    rc = watchdog.check(api, CFG, token=TOKEN, now=now)
    return rc, capsys.readouterr().out.splitlines()


# --- the decision table, as a pure function ----------------------------------------------------------


def srv(heartbeat=None, created=T0, sid="srv1") -> watchdog.Server:
    return watchdog.Server(id=sid, stage="RUNNING", created=created, heartbeat=heartbeat, url="http://x", labels={})


IDLE = watchdog.Metrics(running=0, tokens=500)


def holder(stage="RUNNING", created=T0, role="supervisor", hid="sup1") -> watchdog.Holder:
    return watchdog.Holder(id=hid, role=role, stage=stage, created=created)


@pytest.mark.parametrize("case, servers, holders, metrics, last, verdict, cancel, remove", [
    ("heartbeat fresh", [srv(heartbeat=T0 + 7000)], [], {"srv1": IDLE}, {}, "held", False, False),
    ("heartbeat exactly at the grace", [srv(heartbeat=T0 + 7200 - GRACE)], [], {"srv1": IDLE}, {}, "held", False, False),
    ("heartbeat stale, metrics idle", [srv(heartbeat=T0 + 100)], [], {"srv1": IDLE}, {"srv1": 500}, "cancelled", True, True),
    ("heartbeat missing, server just created", [srv(created=T0 + 7000)], [], {"srv1": IDLE}, {}, "held", False, False),
    ("heartbeat missing, server old", [srv()], [], {"srv1": IDLE}, {"srv1": 500}, "cancelled", True, True),
    ("a supervisor job runs", [srv(heartbeat=T0)], [holder()], {"srv1": IDLE}, {}, "supervised", False, False),
    ("a bench job scheduled within the grace", [srv(heartbeat=T0)], [holder("SCHEDULING", T0 + 7200 - GRACE, "bench")],
     {"srv1": IDLE}, {}, "supervised", False, False),
    ("a bench job scheduled for longer than the grace", [srv(heartbeat=T0)], [holder("SCHEDULING", T0 + 100, "bench")],
     {"srv1": IDLE}, {"srv1": 500}, "cancelled", True, True),
    ("a mop-up job scheduled, its creation unknown", [srv(heartbeat=T0)], [holder("SCHEDULING", None, "mopup")],
     {"srv1": IDLE}, {"srv1": 500}, "cancelled", True, True),
    ("a supervisor running for days", [srv(heartbeat=T0)], [holder("RUNNING", T0 - 86400 * 3)], {"srv1": IDLE}, {},
     "supervised", False, False),
    ("a request is running", [srv(heartbeat=T0)], [], {"srv1": watchdog.Metrics(running=2, tokens=500)}, {"srv1": 500}, "busy",
     False, False),
    ("tokens generated since the last check", [srv(heartbeat=T0)], [], {"srv1": watchdog.Metrics(running=0, tokens=900)},
     {"srv1": 500}, "busy", False, False),
    ("metrics unknown", [srv(heartbeat=T0)], [], {"srv1": watchdog.Metrics(problem="GET /metrics answered 404")}, {},
     "cancelled", True, True),
    ("a first check: no earlier count, nothing running", [srv(heartbeat=T0)], [], {"srv1": IDLE}, {}, "cancelled", True,
     True),
    ("the server is already gone", [], [], {}, {}, "no-server", False, True),
])
def test_the_decision_table(case, servers, holders, metrics, last, verdict, cancel, remove):
    d = watchdog.decide(T0 + 7200, GRACE, servers, holders, metrics, last)
    assert (d.verdict, d.cancel, d.remove) == (verdict, cancel, remove), (case, d)


def test_the_reasons_say_what_was_seen():
    now = T0 + 7200
    d = watchdog.decide(now, GRACE, [srv(heartbeat=T0 + 100)], [], {"srv1": watchdog.Metrics(problem="GET /metrics answered 404")}, {})
    assert d.reason == ("nothing has held the run for 1h58m (WATCHDOG_GRACE 1h00m), no job of the run that holds it "
                        "runs, and the servers' metrics are unknown (srv1: GET /metrics answered 404), which is not "
                        "activity")
    d = watchdog.decide(now, GRACE, [srv(heartbeat=T0 + 100)], [], {"srv1": IDLE}, {"srv1": 500})
    assert d.reason.endswith("and the servers' metrics show no trial under way")
    assert watchdog.decide(now, GRACE, [srv(heartbeat=now - 300)], [], {}, {}).reason == \
        "the run was last held 5m00s ago, within WATCHDOG_GRACE (1h00m)"
    assert watchdog.decide(now, GRACE, [srv(heartbeat=T0)], [], {"srv1": watchdog.Metrics(running=0, tokens=900)}, {"srv1": 500}) \
        .reason == "a trial is under way: srv1 generated 400 token(s) since the last check"
    # Two servers (a relaunch): the newest heartbeat or creation counts.
    assert watchdog.last_held([srv(heartbeat=T0 + 5, sid="a"), srv(created=T0 + 50, sid="b")], now) == T0 + 50
    # A heartbeat from a clock far ahead would hold the run that long: it is left out.
    assert watchdog.last_held([srv(heartbeat=now + 86400)], now) == T0
    assert watchdog.decide(now, GRACE, [srv(heartbeat=now + 86400)], [], {"srv1": IDLE}, {"srv1": 500}).verdict == "cancelled"
    assert watchdog.last_held([srv(heartbeat=now + 300)], now) == now + 300  # a few minutes: another machine's clock


# --- metrics ---------------------------------------------------------------------------------------


def test_metrics_of_vllm_and_sglang_are_read_and_summed_over_label_sets():
    m = watchdog.parse_metrics(vllm_metrics(1, 1234) + 'vllm:num_requests_running{engine="1"} 2\n')
    assert (m.running, m.tokens, m.problem) == (3, 1234, None)
    sglang = ('# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name="Qwen/Qwen3.8-27B-FP8"} 0.0\n'
              'sglang:generation_tokens_total{model_name="Qwen/Qwen3.8-27B-FP8"} 7.557572e+06\n')
    m = watchdog.parse_metrics(sglang)
    assert (m.running, m.tokens, m.problem) == (0, 7557572, None)


@pytest.mark.parametrize("text, problem", [
    ("", "/metrics holds none of vllm:num_requests_running, sglang:num_running_reqs, vllm:generation_tokens_total, "
         "sglang:generation_tokens_total"),
    ("vllm:num_requests_running NaN\n", "vllm:num_requests_running is NaN, not a count"),
    ("vllm:generation_tokens_total -5\n", "vllm:generation_tokens_total is -5, not a count"),
    ("vllm:generation_tokens_total 1e999\n", "vllm:generation_tokens_total is 1e999, not a count"),
    ("vllm:num_requests_running \x1b[31m\n", "vllm:num_requests_running is \\x1b[31m, not a number"),
])
def test_metrics_that_are_not_counts_are_unknown(text, problem):
    assert watchdog.parse_metrics(text) == watchdog.Metrics(problem=problem)


def smg_engine_metrics(running: tuple[float, ...], tokens: tuple[float, ...]) -> str:
    """SMG's GET /engine_metrics in front of sglang replicas, as its model_gateway writes it (lightseekorg/smg,
    worker/manager.rs and worker/metrics_aggregator.rs): each replica's /metrics with the label
    worker_addr=<its url> on every sample, then ':' replaced by '_' in the whole text (metric names and
    label values alike), one family per name."""
    addrs = [f"http_//127.0.0.1_{31000 + i}" for i in range(len(running))]
    lines = ["# HELP sglang_num_running_reqs The number of running requests.", "# TYPE sglang_num_running_reqs gauge"]
    lines += [f'sglang_num_running_reqs{{model_name="Qwen/Qwen3.8-27B-FP8",worker_addr="{a}"}} {r}'
              for a, r in zip(addrs, running)]
    lines += ["# TYPE sglang_generation_tokens_total counter"]
    lines += [f'sglang_generation_tokens_total{{is_streaming="true",model_name="Qwen/Qwen3.8-27B-FP8",worker_addr="{a}"}} {t}'
              for a, t in zip(addrs, tokens)]
    return "\n".join(lines) + "\n"


def test_smgs_merged_engine_metrics_are_read_as_the_engines_own():
    assert watchdog.parse_metrics(smg_engine_metrics((0, 2), (100, 250))) == watchdog.Metrics(running=2, tokens=350)


def test_a_bad_label_set_does_not_hide_the_requests_another_shows_running():
    text = ('vllm:num_requests_running{engine="0"} NaN\n'
            'vllm:num_requests_running{engine="1"} 2\n'
            'vllm:generation_tokens_total{engine="0"} nope\n'
            'vllm:generation_tokens_total{engine="1"} 40\n')
    assert watchdog.parse_metrics(text) == watchdog.Metrics(running=2, tokens=40)


def test_a_label_value_may_hold_a_closing_brace_or_an_escaped_quote():
    # The exposition format quotes label values; any character may sit inside, '}' included.
    text = ('sglang:num_running_reqs{model_name="a}b",x="say \\"hi}\\""} 3\n'
            'sglang:generation_tokens_total{model_name="}"} 9\n')
    assert watchdog.parse_metrics(text) == watchdog.Metrics(running=3, tokens=9)


def test_a_metrics_answer_that_trickles_is_cut_at_its_deadline():
    import http.server
    import socketserver
    import threading

    sent = threading.Event()
    stop = threading.Event()

    class Trickle(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's naming
            self.send_response(200)
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            # A byte every 50 ms: each read returns in time, and the whole takes 20 s, far past the
            # deadline (a watch without one ends the test then, failing, not hanging).
            for _ in range(400):
                if stop.is_set():
                    return
                try:
                    self.wfile.write(b"#")
                    self.wfile.flush()
                except OSError:
                    return
                sent.set()
                stop.wait(0.05)

        def log_message(self, *_args):
            pass

    server_ = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Trickle)
    server_.daemon_threads = True
    threading.Thread(target=server_.serve_forever, daemon=True).start()
    try:
        m = watchdog.fetch_metrics(f"http://127.0.0.1:{server_.server_address[1]}", None, deadline=0.5)
    finally:
        stop.set()
        server_.shutdown()
        server_.server_close()
    assert sent.is_set()
    assert m == watchdog.Metrics(problem="GET /metrics did not finish within 0.5 s")


# --- labels ----------------------------------------------------------------------------------------


def test_relabel_writes_back_every_label_and_refuses_to_drop_the_runs_own():
    current = {**SERVER_LABELS, "heartbeat": "1"}
    assert watchdog.relabel(current, {"heartbeat": "2"}, {**RUN_LABELS, "role": "server"}) == {**SERVER_LABELS, "heartbeat": "2"}
    assert watchdog.relabel({**current, "tokens_x": "5"}, {"tokens_x": None}, RUN_LABELS) == current
    with pytest.raises(ValueError, match=f"its labels lack run=qwen-t2 instance={INSTANCE}: not rewritten"):
        watchdog.relabel({"project": "terminal-bench-harness"}, {"heartbeat": "2"}, RUN_LABELS)
    # Another checkout's run of the same name (another instance) is not rewritten either.
    with pytest.raises(ValueError, match=f"its labels lack instance={INSTANCE}: not rewritten"):
        watchdog.relabel({**RUN_LABELS, "instance": "ffffffffffffffff"}, {"heartbeat": "2"}, RUN_LABELS)
    with pytest.raises(ValueError, match="are not letters, digits"):
        watchdog.relabel(dict(RUN_LABELS), {"heartbeat": "2 3"}, RUN_LABELS)
    with pytest.raises(ValueError, match="are not letters, digits"):
        watchdog.relabel(dict(RUN_LABELS), {"x" * 101: "1"}, RUN_LABELS)


def test_relabel_checks_only_what_it_writes_and_gives_a_foreign_label_back_as_it_came():
    # A label someone else put on the server (HF took it) once made every heartbeat fail, and the
    # watchdog then cancelled a run that was held.
    current = {**SERVER_LABELS, "team.name": "a b/c"}
    assert watchdog.relabel(current, {"heartbeat": "2"}, {**RUN_LABELS, "role": "server"}) == \
        {**current, "heartbeat": "2"}


@pytest.mark.parametrize("value, read", [("1780000000", 1780000000.0), ("99", None), ("9999999999999", None),
                                         ("17800000.5", None), ("", None), ("-1780000000", None),
                                         ("178000000²", None), ("١٧٨٠٠٠٠٠٠٠", None), ("1780000000\n", None)])
def test_a_heartbeat_is_read_only_as_a_time_of_these_centuries(value, read):
    assert watchdog.epoch_label({"heartbeat": value}, "heartbeat") == read


@pytest.mark.parametrize("value, read", [("120", 120.0), ("0", 0.0), ("²", None), ("1²", None), ("٣", None),
                                         ("10000000000000000", None), ("1e3", None)])
def test_a_token_count_is_ascii_digits_only(value, read):
    # str.isdigit() takes '²', and int('²') raises: every check died with a traceback.
    assert watchdog.count_label({"tokens_srv1": value}, "tokens_srv1") == read


def test_labels_that_are_not_ascii_numbers_are_left_out_and_the_check_decides(fakes, capsys):
    fakes.metrics.write_text(vllm_metrics(0, 120))
    api = fakes.jobs_api(scenario(fakes, watchdog_labels={"tokens_srv1": "²"}, srv1=server(fakes, labels={"heartbeat": "²"})))
    rc, out = run_check(api, T0 + 600, capsys)
    assert rc == 0
    assert out == ["watchdog: server srv1 RUNNING, created 10m00s ago, no heartbeat, metrics: 0 running, 120 tokens "
                   "generated",
                   "watchdog: run qwen-t2: held: the run was last held 10m00s ago, within WATCHDOG_GRACE (1h00m)"]
    assert scheduled(api)["wd1"]["tokens_srv1"] == "120"


# --- the check, through the real huggingface_hub against the fake Jobs API -------------------------------


def test_a_fresh_heartbeat_keeps_the_server_and_the_check_is_recorded_on_the_watchdog(fakes, capsys):
    fakes.metrics.write_text(vllm_metrics(0, 120))
    api = fakes.jobs_api(scenario(fakes, srv1=server(fakes, heartbeat=T0 + 6900)))
    rc, out = run_check(api, T0 + 7200, capsys)
    assert rc == 0
    assert out == ["watchdog: server srv1 RUNNING, created 2h00m ago, heartbeat 5m00s ago, metrics: 0 running, 120 "
                   "tokens generated",
                   "watchdog: run qwen-t2: held: the run was last held 5m00s ago, within WATCHDOG_GRACE (1h00m)"]
    assert fakes.writes() == [("PUT", "/api/scheduled-jobs/alice/wd1/labels")]
    assert scheduled(api) == {"wd1": {**WATCHDOG_LABELS, "checked": str(T0 + 7200), "verdict": "held",
                                      "tokens_srv1": "120"}}
    # /metrics was asked through the proxy with the token, as the endpoint's every other call.
    asked = [json.loads(line) for line in fakes.openai_record.read_text().splitlines()]
    assert [(r["path"], r["auth"]) for r in asked] == [("/metrics", "ok")]


def test_a_stale_heartbeat_on_an_idle_server_cancels_it_says_so_on_its_labels_and_removes_the_watchdog(fakes, capsys):
    fakes.metrics.write_text(vllm_metrics(0, 120))
    api = fakes.jobs_api(scenario(fakes, watchdog_labels={"tokens_srv1": "120"},
                                  srv1=server(fakes, heartbeat=T0 + 100),
                                  other=server(fakes, heartbeat=T0, labels={"run": "gptoss-t2"})))
    rc, out = run_check(api, T0 + 7200, capsys)
    assert rc == 0
    assert out[1:] == [
        "watchdog: run qwen-t2: cancelled: nothing has held the run for 1h58m (WATCHDOG_GRACE 1h00m), no job of the "
        "run that holds it runs, and the servers' metrics show no trial under way",
        "watchdog: cancelled server alice/srv1",
        "watchdog: removed itself (scheduled job alice/wd1)"]
    # The verdict on the server first (it outlives the watchdog), then the cancel, then itself.
    assert fakes.writes() == [("PUT", "/api/jobs/alice/srv1/labels"), ("POST", "/api/jobs/alice/srv1/cancel"),
                              ("DELETE", "/api/scheduled-jobs/alice/wd1")]
    put = next(r for r in fakes.requests() if r["method"] == "PUT")
    assert put["body"] == {"labels": {**SERVER_LABELS, "heartbeat": str(T0 + 100), "watchdog_verdict": "cancelled",
                                      "watchdog_checked": str(T0 + 7200)}}
    stages = {j.id: j.status.stage for j in api.list_jobs(namespace="alice")}
    assert stages == {"srv1": "CANCELED", "other": "RUNNING"}  # another run's server is not this watchdog's
    assert scheduled(api) == {}


def test_a_cancel_hf_refuses_keeps_the_watchdog_for_the_next_check(fakes, capsys, monkeypatch):
    fakes.metrics.write_text(vllm_metrics(0, 120))
    api = fakes.jobs_api(scenario(fakes, watchdog_labels={"tokens_srv1": "120"}, srv1=server(fakes, heartbeat=T0)))

    def refused(**_kwargs):
        raise watchdog.httpx2.HTTPError("403 Forbidden")

    monkeypatch.setattr(api, "cancel_job", refused)
    rc, out = run_check(api, T0 + 7200, capsys)
    assert rc == 1
    assert out[-1] == ("watchdog: could not cancel server alice/srv1 (403 Forbidden): it may be billing; the next check "
                       "tries again (hf jobs cancel alice/srv1)")
    assert scheduled(api)["wd1"]["verdict"] == "cancel-failed"
    assert ("DELETE", "/api/scheduled-jobs/alice/wd1") not in fakes.writes()


def test_a_server_with_no_exposed_url_is_asked_at_its_proxy_url():
    from huggingface_hub._jobs_api import JobInfo

    job = JobInfo(id="abc", owner={"id": "u", "name": "alice", "type": "user"}, status={"stage": "RUNNING"},
                  expose={"ports": [30000]}, labels={"heartbeat": "1780000000"})
    s = watchdog.server_of(job)
    assert (s.url, s.heartbeat, s.created) == ("https://abc--30000.hf.jobs", 1780000000.0, None)


def test_a_trial_under_way_keeps_the_server_whatever_the_heartbeat(fakes, capsys):
    fakes.metrics.write_text(vllm_metrics(2, 120))
    api = fakes.jobs_api(scenario(fakes, watchdog_labels={"tokens_srv1": "120"}, srv1=server(fakes, heartbeat=T0)))
    rc, out = run_check(api, T0 + 7200, capsys)
    assert (rc, out[-1]) == (0, "watchdog: run qwen-t2: busy: a trial is under way: srv1 has 2 request(s) running")
    # Nothing running at this instant, but tokens generated since the last check: still a trial under way.
    fakes.metrics.write_text(vllm_metrics(0, 480))
    rc, out = run_check(api, T0 + 8100, capsys)
    assert out[-1] == "watchdog: run qwen-t2: busy: a trial is under way: srv1 generated 360 token(s) since the last check"
    assert scheduled(api)["wd1"]["tokens_srv1"] == "480"
    # Then idle, and nothing holds the run: cancelled.
    rc, out = run_check(api, T0 + 9000, capsys)
    assert out[-3].startswith("watchdog: run qwen-t2: cancelled: nothing has held the run for 2h30m")
    assert ("POST", "/api/jobs/alice/srv1/cancel") in fakes.writes()


def test_metrics_that_cannot_be_read_are_unknown_not_activity(fakes, capsys):
    # No --enable-metrics on sglang: /metrics answers 404 (the fake without its file does).
    api = fakes.jobs_api(scenario(fakes, srv1=server(fakes, heartbeat=T0)))
    rc, out = run_check(api, T0 + 7200, capsys)
    assert out[0] == ("watchdog: server srv1 RUNNING, created 2h00m ago, heartbeat 2h00m ago, metrics: unknown (GET "
                      "/metrics answered 404 (sglang serves it only with --enable-metrics))")
    assert out[1] == ("watchdog: run qwen-t2: cancelled: nothing has held the run for 2h00m (WATCHDOG_GRACE 1h00m), "
                      "no job of the run that holds it runs, and the servers' metrics are unknown (srv1: GET /metrics "
                      "answered 404 (sglang serves it only with --enable-metrics)), which is not activity")
    assert ("POST", "/api/jobs/alice/srv1/cancel") in fakes.writes()


def test_a_server_without_a_heartbeat_counts_from_its_creation(fakes, capsys):
    fakes.metrics.write_text(vllm_metrics(0, 0))
    api = fakes.jobs_api(scenario(fakes, srv1=server(fakes)))
    rc, out = run_check(api, T0 + 600, capsys)
    assert out[0].startswith("watchdog: server srv1 RUNNING, created 10m00s ago, no heartbeat,")
    assert out[1] == "watchdog: run qwen-t2: held: the run was last held 10m00s ago, within WATCHDOG_GRACE (1h00m)"
    rc, out = run_check(api, T0 + 3700, capsys)
    assert out[1].startswith("watchdog: run qwen-t2: cancelled: nothing has held the run for 1h01m")


def test_a_running_supervisor_holds_the_run(fakes, capsys):
    fakes.metrics.write_text(vllm_metrics(0, 0))
    sup = {"stages": ["RUNNING"], "flavor": "cpu-upgrade", "created_at": iso(T0), "labels": {**RUN_LABELS, "role": "supervisor"}}
    api = fakes.jobs_api(scenario(fakes, srv1=server(fakes, heartbeat=T0), sup1=sup))
    rc, out = run_check(api, T0 + 7200, capsys)
    assert out[1:] == ["watchdog: job sup1 (supervisor) of the run is RUNNING, created 2h00m ago",
                       "watchdog: run qwen-t2: supervised: job(s) of the run that hold it are sup1 (supervisor, running)"]
    assert fakes.writes() == [("PUT", "/api/scheduled-jobs/alice/wd1/labels")]


def test_a_bench_job_stuck_in_scheduling_holds_the_run_only_for_the_grace(fakes, capsys):
    fakes.metrics.write_text(vllm_metrics(0, 0))
    bench = {"stages": ["SCHEDULING"], "flavor": "cpu-upgrade", "created_at": iso(T0 + 100),
             "labels": {**RUN_LABELS, "role": "bench"}}
    api = fakes.jobs_api(scenario(fakes, watchdog_labels={"tokens_srv1": "0"}, srv1=server(fakes, heartbeat=T0),
                                  bench1=bench))
    rc, out = run_check(api, T0 + 3000, capsys)
    assert out[1:] == ["watchdog: job bench1 (bench) of the run is SCHEDULING, created 48m20s ago",
                       "watchdog: run qwen-t2: held: the run was last held 50m00s ago, within WATCHDOG_GRACE (1h00m)"]
    rc, out = run_check(api, T0 + 3600 + 50, capsys)
    assert out[-1] == ("watchdog: run qwen-t2: supervised: job(s) of the run that hold it are bench1 (bench, scheduled "
                       "59m10s ago)")
    rc, out = run_check(api, T0 + 7200, capsys)
    assert out[2] == ("watchdog: run qwen-t2: cancelled: nothing has held the run for 2h00m (WATCHDOG_GRACE 1h00m), no "
                      "job of the run that holds it runs (bench1 (bench) has not started 1h58m after its creation, past "
                      "WATCHDOG_GRACE: it no longer holds the run), and the servers' metrics show no trial under way")
    assert ("POST", "/api/jobs/alice/srv1/cancel") in fakes.writes()


def test_a_data_parallel_servers_figures_are_read_where_smg_merges_them(fakes, capsys, tmp_path):
    """SMG's port has no /metrics: a server labelled gateway=smg is asked GET /engine_metrics, where a
    replica's running request keeps it; once idle, it is cancelled on those figures."""
    gateway_metrics = tmp_path / "engine_metrics.txt"
    proc, port = start([sys.executable, str(REPO / "tests/fakes/fake_openai.py"), "--port-file", str(tmp_path / "gw.port"),
                        "--metrics", str(gateway_metrics), "--metrics-path", "/engine_metrics", "--max-lifetime", "300"],
                       tmp_path / "gw.port")
    fakes.procs.append(proc)
    dp = {**server(fakes, heartbeat=T0, labels={"gateway": "smg"}), "expose_url": f"http://127.0.0.1:{port}"}
    api = fakes.jobs_api(scenario(fakes, watchdog_labels={"tokens_srv1": "350"}, srv1=dp))
    gateway_metrics.write_text(smg_engine_metrics((0, 2), (100, 250)))
    rc, out = run_check(api, T0 + 7200, capsys)
    assert out[-1] == "watchdog: run qwen-t2: busy: a trial is under way: srv1 has 2 request(s) running"
    gateway_metrics.write_text(smg_engine_metrics((0, 0), (100, 250)))
    rc, out = run_check(api, T0 + 8100, capsys)
    assert out[0] == ("watchdog: server srv1 RUNNING, created 2h15m ago, heartbeat 2h15m ago, metrics: 0 running, "
                      "350 (+0) tokens generated")
    assert out[1].startswith("watchdog: run qwen-t2: cancelled: nothing has held the run for 2h15m")
    assert ("POST", "/api/jobs/alice/srv1/cancel") in fakes.writes()


def test_another_checkouts_run_of_the_same_name_is_neither_held_nor_cancelled_nor_beaten(fakes, capsys):
    # Two checkouts with runs/qwen-t2.env in one org: the other's server is fresh and busy, its bench
    # runs; ours is abandoned. Ours is cancelled; theirs is not touched and holds nothing of ours.
    fakes.metrics.write_text(vllm_metrics(0, 0))
    theirs = {**RUN_LABELS, "instance": "ffffffffffffffff"}
    api = fakes.jobs_api(scenario(
        fakes, watchdog_labels={"tokens_srv1": "0"}, srv1=server(fakes, heartbeat=T0),
        srv9=server(fakes, heartbeat=T0 + 7100, labels={"instance": "ffffffffffffffff"}),
        bench9={"stages": ["RUNNING"], "flavor": "cpu-upgrade", "labels": {**theirs, "role": "bench"}}))
    rc, out = run_check(api, T0 + 7200, capsys)
    assert rc == 0
    assert out[0].startswith("watchdog: server srv1 RUNNING") and not any("srv9" in line or "bench9" in line for line in out)
    assert out[1].startswith("watchdog: run qwen-t2: cancelled: nothing has held the run for 2h00m")
    assert {j.id: j.status.stage for j in api.list_jobs(namespace="alice")} == {"srv1": "CANCELED", "srv9": "RUNNING",
                                                                               "bench9": "RUNNING"}
    listing = [r["query"] for r in fakes.requests() if r["path"] == "/api/jobs/alice" and r["method"] == "GET"]
    assert listing[0]["label"] == ["project=terminal-bench-harness", "run=qwen-t2", f"instance={INSTANCE}"]
    # Their watchdog's check (their instance) sees their servers only, and our heartbeat never reaches theirs.
    assert watchdog.beat(api, run="qwen-t2", project="terminal-bench-harness", instance="ffffffffffffffff",
                         namespace="alice", now=T0 + 7300) == ["srv9"]


def test_the_watchdogs_own_running_check_does_not_hold_the_run(fakes, capsys):
    fakes.metrics.write_text(vllm_metrics(0, 120))
    api = fakes.jobs_api(scenario(fakes, watchdog_labels={"tokens_srv1": "120"}, srv1=server(fakes, heartbeat=T0)))
    # HF's scheduler starts a check: a job of the watchdog's spec, labelled as the run's jobs.
    check_job = api.trigger_scheduled_job(scheduled_job_id="wd1", namespace="alice")
    assert (check_job.status.stage, check_job.labels["role"], check_job.initiator.type) == \
        ("RUNNING", "watchdog", "scheduled-job")
    rc, out = run_check(api, T0 + 7200, capsys)
    assert out[1].startswith("watchdog: run qwen-t2: cancelled: nothing has held the run for 2h00m")
    assert {j.id: j.status.stage for j in api.list_jobs(namespace="alice")} == {"srv1": "CANCELED",
                                                                               "wd1-run-1": "RUNNING"}


def test_a_watchdog_whose_server_is_gone_removes_itself(fakes, capsys):
    api = fakes.jobs_api(scenario(fakes, srv1=server(fakes, stage="CANCELED", heartbeat=T0)))
    rc, out = run_check(api, T0 + 60, capsys)
    assert (rc, out) == (0, ["watchdog: run qwen-t2: no-server: the run has no live server job",
                             "watchdog: removed itself (scheduled job alice/wd1)"])
    assert fakes.writes() == [("DELETE", "/api/scheduled-jobs/alice/wd1")]


def test_a_watchdog_removed_while_its_check_ran_does_nothing(fakes, capsys):
    api = fakes.jobs_api({"jobs": {"srv1": server(fakes, heartbeat=T0)}})
    rc, out = run_check(api, T0 + 7200, capsys)
    assert (rc, out) == (0, ["watchdog: run qwen-t2: its watchdog was removed meanwhile (make stop, or a new make "
                             "serve): nothing to do"])
    assert fakes.writes() == []


def test_hf_unreachable_decides_nothing_and_says_so(capsys):
    api = HfApi(endpoint="http://127.0.0.1:9", token=TOKEN)
    rc, out = run_check(api, T0, capsys)
    assert rc == 1 and len(out) == 1
    assert out[0].startswith("watchdog: run qwen-t2: cannot read the run's jobs (")
    assert out[0].endswith("): nothing decided; the next check tries again")


# --- the heartbeat -----------------------------------------------------------------------------------


def test_beat_writes_the_heartbeat_on_the_runs_live_servers_and_keeps_every_other_label(fakes):
    jobs = {"srv1": server(fakes, heartbeat=T0), "old": server(fakes, stage="CANCELED"),
            "theirs": server(fakes, labels={"run": "gptoss-t2"}),
            "bench1": {"stages": ["RUNNING"], "labels": {**RUN_LABELS, "role": "bench"}}}
    api = fakes.jobs_api({"jobs": jobs})
    env = {**os.environ, "HF_ENDPOINT": fakes.url, "HF_TOKEN": TOKEN, "HF_HUB_DISABLE_UPDATE_CHECK": "1"}
    before = int(time.time())
    proc = subprocess.run([sys.executable, "-m", "tools.run.watchdog", "beat", "--run", "qwen-t2", "--project",
                           "terminal-bench-harness", "--instance", INSTANCE, "--namespace", "alice"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "heartbeat of run qwen-t2 on srv1\n", "")
    labels = {j.id: dict(j.labels) for j in api.list_jobs(namespace="alice")}
    beat = int(labels["srv1"].pop("heartbeat"))
    assert before <= beat <= time.time() and labels["srv1"] == SERVER_LABELS
    assert fakes.writes() == [("PUT", "/api/jobs/alice/srv1/labels")]
    # The query asked HF for exactly the run's live servers.
    listing = next(r for r in fakes.requests() if r["path"] == "/api/jobs/alice")
    assert listing["query"] == {"stage": ["SCHEDULING", "RUNNING"],
                                "label": ["project=terminal-bench-harness", "run=qwen-t2", f"instance={INSTANCE}",
                                          "role=server"]}


def test_beat_that_hf_refuses_is_one_line_and_exit_1(fakes):
    fakes.jobs_api({"reject_token": True})
    env = {**os.environ, "HF_ENDPOINT": fakes.url, "HF_TOKEN": TOKEN, "HF_HUB_DISABLE_UPDATE_CHECK": "1"}
    proc = subprocess.run([sys.executable, "-m", "tools.run.watchdog", "beat", "--run", "qwen-t2", "--project", "p",
                           "--instance", INSTANCE, "--namespace", "alice"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and proc.stdout == ""
    assert proc.stderr.startswith("Error: heartbeat of run qwen-t2 not written: Client error '401 Unauthorized'")
    assert proc.stderr.count("\n") == 1 and TOKEN not in proc.stderr


# --- a job's timeout, as HF's answer holds it ------------------------------------------------------------


def test_timeout_reads_hfs_answer_itself(fakes):
    api = fakes.jobs_api({"jobs": {"kept": {"stages": ["RUNNING"], "timeout_secs": 345600}, "none": {"stages": ["RUNNING"]}}})
    env = {**os.environ, "HF_ENDPOINT": fakes.url, "HF_TOKEN": TOKEN, "HF_HUB_DISABLE_UPDATE_CHECK": "1"}
    out = [subprocess.run([sys.executable, "-m", "tools.run.watchdog", "timeout", f"alice/{job}"], env=env,
                          capture_output=True, text=True, timeout=60) for job in ("kept", "none", "gone")]
    assert [(p.returncode, p.stdout) for p in out] == [(0, "345600\n"), (0, ""), (1, "")]
    assert out[2].stderr.startswith("Error: cannot read job alice/gone: ")
    assert watchdog.timeout_of({"jobSpec": {"timeout": 86400}}) == 86400
    assert watchdog.timeout_of({"timeoutSeconds": True}) is None and watchdog.timeout_of({"timeoutSeconds": -1}) is None
    assert api.inspect_job(job_id="kept", namespace="alice").id == "kept"


# --- the bundle the scheduled job runs -------------------------------------------------------------------


def unpack(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def test_the_bundle_is_this_checkouts_watchdog_and_huggingface_hubs_hash_pinned_requirements():
    data = watchdog_bundle.bundle(REPO)
    assert watchdog_bundle.bundle(REPO) == data  # the same bytes for the same files: its sha256 names the code
    files = unpack(data)
    assert sorted(files) == ["requirements.txt", "tools/__init__.py", "tools/fmt.py", "tools/hf_client.py",
                            "tools/run/__init__.py", "tools/run/watchdog.py", "tools/safe_read.py"]
    for name in watchdog_bundle.BUNDLE_FILES:
        assert files[name] == (REPO / name).read_bytes()
    entries = watchdog_bundle.lock_entries((REPO / "env/requirements.lock").read_text())
    want = ["anyio", "click", "filelock", "fsspec", "h11", "hf-xet", "httpcore2", "httpx2", "huggingface-hub", "idna",
            "packaging", "pyyaml", "tqdm", "truststore", "typing-extensions"]
    assert files["requirements.txt"].decode() == "\n".join(entries[n] for n in want) + "\n"
    assert "huggingface-hub==2.4.0 \\\n    --hash=sha256:" in files["requirements.txt"].decode()
    assert all("--hash=sha256:" in entries[n] for n in want)
    # One line of base64, as hf's -e needs (it reads each value as a dotenv line), of a size HF
    # takes in a job's environment (its limit is not documented; this keeps an eye on it).
    encoded = base64.b64encode(data).decode()
    assert len(encoded) < 40_000


def test_the_watchdog_imports_nothing_the_bundle_lacks():
    allowed = {"base64", "dataclasses", "gzip", "hashlib", "io", "math", "re", "sys", "tarfile", "time",
               "urllib.error", "urllib.request", "pathlib", "click", "httpx2", "huggingface_hub",
               "huggingface_hub.utils", "huggingface_hub.utils._http", "tools.safe_read", "__future__", "importlib.metadata",
               "packaging.requirements", "datetime"}
    for name in watchdog_bundle.BUNDLE_FILES:
        tree = ast.parse((REPO / name).read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module != "tools"}
        imported |= {f"tools.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "tools"
                     for a in n.names}
        bundled = {f"tools.{Path(f).stem}" for f in watchdog_bundle.BUNDLE_FILES}
        stdlib = {"contextlib", "errno", "json", "os", "shutil", "stat", "tempfile", "typing"}
        assert imported - bundled - allowed - stdlib == set(), name


def test_a_lock_without_an_entry_the_closure_needs_is_refused():
    lock = (REPO / "env/requirements.lock").read_text()
    without = "\n".join(line for line in lock.splitlines() if not line.startswith("tqdm=="))
    with pytest.raises(click.ClickException, match="env/requirements.lock has no entry for tqdm, which huggingface_hub "
                                                   "needs: run make lock"):
        watchdog_bundle.requirements(without)


# --- the facts of huggingface_hub 2.4.0 the watchdog relies on -------------------------------------------


def test_the_huggingface_hub_names_it_relies_on():
    import huggingface_hub
    from huggingface_hub import HfApi, _jobs_api
    from huggingface_hub.cli import _cli_utils

    assert huggingface_hub.__version__ == "2.4.0"
    wanted = {"list_jobs": {"status", "labels", "namespace"}, "cancel_job": {"job_id", "namespace"},
              "update_job_labels": {"job_id", "labels", "namespace"},
              "create_scheduled_job": {"image", "command", "schedule", "concurrency", "env", "secrets", "flavor",
                                       "timeout", "labels", "namespace"},
              "list_scheduled_jobs": {"labels", "namespace"}, "inspect_scheduled_job": {"scheduled_job_id", "namespace"},
              "delete_scheduled_job": {"scheduled_job_id", "namespace"},
              "update_scheduled_job_labels": {"scheduled_job_id", "labels", "namespace"},
              "trigger_scheduled_job": {"scheduled_job_id", "namespace"}}
    for name, params in wanted.items():
        assert params <= set(inspect.signature(getattr(HfApi, name)).parameters), name
    # A label update replaces every label: the writers read, change their own, write all back.
    source = inspect.getsource(HfApi.update_job_labels)
    assert "Replaces all existing user-provided labels" in source and '/labels",' in source
    assert "get_session().put(" in source
    assert "/api/scheduled-jobs/{namespace}/{scheduled_job_id}/labels" in inspect.getsource(
        HfApi.update_scheduled_job_labels)
    assert "max 100 characters" in source and "alphanumeric characters, dashes, and underscores" in source
    # No timeout in what inspect returns: `timeout` reads HF's answer (what create sends is timeoutSeconds).
    assert "timeout" not in {f.name for f in dataclasses.fields(_jobs_api.JobInfo)}
    assert 'job_spec["timeoutSeconds"]' in inspect.getsource(_jobs_api._create_job_spec)
    # hf's -e reads each value as a dotenv line: the bundle goes in as one line of base64.
    assert "load_dotenv(env_value" in inspect.getsource(_cli_utils.parse_env_map)
    b64 = base64.b64encode(watchdog_bundle.bundle(REPO)).decode()
    assert _cli_utils.parse_env_map([f"WATCHDOG_BUNDLE={b64}"]) == {"WATCHDOG_BUNDLE": b64}
    # A scheduled job's labels are its job spec's.
    assert "scheduled_job.job_spec.labels" in inspect.getsource(HfApi.list_scheduled_jobs)


def test_bundle_command_prints_its_sha256_and_its_base64():
    proc = subprocess.run([sys.executable, "-m", "tools.run.watchdog_bundle"], capture_output=True, text=True, timeout=60)
    sha, encoded = proc.stdout.split()
    data = base64.b64decode(encoded)
    assert hashlib.sha256(data).hexdigest() == sha and data == watchdog_bundle.bundle(REPO)


# --- the installed job, run as HF runs it ------------------------------------------------------------


def install(fakes: Fakes, tmp: Path, **settings: str) -> subprocess.CompletedProcess:
    """scripts/lib-watchdog.sh's install_watchdog for qwen-t2 in namespace alice, as make serve calls
    it once its server is launched: the real hf CLI against the fake."""
    hf_home = tmp / "hf-home"
    hf_home.mkdir(exist_ok=True)
    (hf_home / ".agent_harnesses.json").write_text('{"standardEnvVars": [], "harnesses": {}}')
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "DRY_RUN", "CLI_SETTINGS", "HF_NAMESPACE")}
    env.update(RUN="qwen-t2", HF_ENDPOINT=fakes.url, HF_TOKEN=TOKEN, HF_HOME=str(hf_home),
               HF_HUB_DISABLE_UPDATE_CHECK="1", STATE_ROOT=str(tmp / "state"), RUN_INSTANCE=INSTANCE, **settings)
    script = ('source scripts/lib.sh; source scripts/argv.sh; source scripts/lib-run.sh; resolve_run; load_settings; '
              'install_watchdog alice')
    return subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_the_installed_job_unpacks_its_bundle_installs_its_hash_pinned_requirements_and_checks(fakes, tmp_path):
    fakes.metrics.write_text(vllm_metrics(0, 7))
    api = fakes.jobs_api({"jobs": {"srv1": server(fakes, heartbeat=int(time.time()))}, "new_scheduled_jobs": ["wd1"]})
    proc = install(fakes, tmp_path)
    assert proc.returncode == 0, proc.stderr
    created = [r for r in fakes.requests() if (r["method"], r["path"]) == ("POST", "/api/scheduled-jobs/alice")]
    spec = created[0]["body"]["jobSpec"]
    run, _, _ = play_the_scheduler(spec, endpoint=fakes.url, token=TOKEN, tmp=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines()[1].startswith("watchdog: run qwen-t2: held: the run was last held ")
    assert scheduled(api)["wd1"]["verdict"] == "held" and scheduled(api)["wd1"]["tokens_srv1"] == "7"
    assert (tmp_path / "pip-argv").read_text() == ("install --quiet --disable-pip-version-check --root-user-action=ignore "
                                                   "--no-deps --require-hashes -r requirements.txt\n")
    assert (tmp_path / "pip-requirements.txt").read_text() == watchdog_bundle.requirements((REPO / "env/requirements.lock").read_text())
    assert TOKEN not in run.stdout + run.stderr + proc.stdout + proc.stderr


def test_bad_watchdog_settings_are_refused_in_one_line_before_anything(fakes, tmp_path):
    fakes.jobs_api({})
    for settings, line in (
            ({"WATCHDOG_EVERY": "7m"}, "setting WATCHDOG_EVERY must be one a cron runs evenly: one of 5m 6m 10m 12m 15m "
                                       "20m 30m 1h 2h 3h 4h 6h 8h 12h, got '7m' (run 'qwen-t2')"),
            ({"WATCHDOG_GRACE": "5m"}, "setting WATCHDOG_GRACE=5m must be longer than HEARTBEAT_EVERY=5m: a run that is "
                                       "held would look abandoned between two heartbeats (e.g. WATCHDOG_GRACE=1h "
                                       "HEARTBEAT_EVERY=5m) (run 'qwen-t2')"),
            ({"HEARTBEAT_EVERY": "0m"}, "setting HEARTBEAT_EVERY must be a number with an optional unit s, m, h or d "
                                        "(e.g. 4h), more than zero, got '0m' (run 'qwen-t2')"),
            ({"WATCHDOG": "yes"}, "setting WATCHDOG must be 0 or 1, got 'yes' (run 'qwen-t2')"),
            ({"WATCHDOG_IMAGE": "python:3.12 ; rm"}, "setting WATCHDOG_IMAGE must be an image name such as "
                                                     "python:3.12-slim, got 'python:3.12 ; rm' (run 'qwen-t2')")):
        proc = install(fakes, tmp_path, **settings)
        assert (proc.returncode, proc.stderr) == (1, f"bash: {line}\n"), settings
    assert fakes.requests() == []


@pytest.mark.parametrize("every, cron", [("5m", "*/5 * * * *"), ("15m", "*/15 * * * *"), ("30m", "*/30 * * * *"),
                                         ("1h", "0 * * * *"), ("6h", "0 */6 * * *"), ("12h", "0 */12 * * *")])
def test_watchdog_every_is_a_cron_that_runs_evenly(every, cron):
    proc = subprocess.run(["bash", "-c", 'source scripts/lib.sh; watchdog_cron "$1"', "x", every], cwd=REPO,
                          capture_output=True, text=True, timeout=30)
    assert (proc.returncode, proc.stdout) == (0, cron)
