"""make watch (tools/run/watch.py): one frame of a run at several points of its life.

Job dirs are written with harbor 0.25's own models (tests/fixtures/harbor_jobs.py), every trial
at a known minute after T0; the frame is computed at a fixed --now, and every expected figure
(slots, pace, infra rates, ETA and its range, alarms) is worked out here by hand.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.fixtures import hostile
from tests.fixtures.harbor_jobs import T0, TrialSpec, make_dataset, write_job
from tests.test_publish import FakeHub
from tools.results import report_load
from tools.results import tally_jobs
from tools.results import tally_policy
from tools.run import watch
from tools.run import watch_bucket
from tools.run import watch_frame
from tools.run import watch_text
from tools import safe_read

S = TrialSpec
REPO = Path(__file__).resolve().parent.parent
TASKS = [f"t{i}" for i in range(10)]


def settings(jobs: Path, job: str = "w") -> report_load.RunSettings:
    return report_load.RunSettings(run=job, jobs_dir=jobs, job_name=job, verdicts=None, state_dir=jobs.parent / "state" / job,
                          namespace="", project_label="terminal-bench-harness", call_timeout=5.0, prices_max_age=0.0,
                          state_root=jobs.parent / "state")


def run_of(tmp: Path, specs: list[TrialSpec], k: int = 1, tasks: list[str] = TASKS) -> Path:
    """A run whose first job planned `tasks` × k trials (the dataset holds every task)."""
    jobs = tmp / "jobs"
    make_dataset(tmp / "dataset", tasks)
    write_job(jobs, "w", specs, dataset=tmp / "dataset", n_attempts=k, multiplier=1.0)
    return jobs


def frame(jobs: Path, minutes: float, **kw) -> watch_frame.Frame:
    return watch.frame_of(settings(jobs), now=T0 + timedelta(minutes=minutes), tasks_hint=None,
                      max_cost=kw.get("max_cost"), max_infra_rate=kw.get("max_infra_rate", 0.3), with_cost=False)


# Mid-run: minutes after T0 of each trial's end (30 min of agent time each).
MID = [S("t0", 1.0, finished=40), S("t1", 0.0, finished=70),
       S("t2", None, "SandboxError", "Sandbox API error (503)", finished=80), S("t3", 1.0, finished=100),
       S("t4", None, "SandboxError", "Sandbox API error (503)", finished=110), S("t5", finished=None)]


def test_just_started_nothing_settled_no_eta_no_alarm(tmp_path):
    jobs = run_of(tmp_path, [S("t0", finished=None), S("t1", finished=None)])
    f = frame(jobs, 10)
    assert (f.total, f.settled, f.passed, f.failed, f.infra, f.running) == (10, 0, 0, 0, 0, 2)
    assert (f.pace_hour, f.pace_all, f.eta_hours, f.alarms) == (0.0, 0.0, None, [])
    lines = watch_text.lines_of(f)
    assert lines[0] == "run w: [..............................] 0/10 attempt slots settled (0.0%; 10 tasks × 1)"
    assert "  ETA: unknown (nothing has settled yet)" in lines
    assert lines[-1] == "  alarms: none"


def test_mid_run_with_errors_pace_eta_and_the_infra_alarm(tmp_path):
    f = frame(run_of(tmp_path, MID), 120)  # 10:00, two hours in
    # Settled: t0, t1, t3 (3 of 10 slots); infra: t2, t4; t5 has no result yet.
    assert (f.total, f.settled, f.passed, f.failed, f.infra, f.running) == (10, 3, 2, 1, 2, 1)
    # Last hour (09:00-10:00): t1 and t3 settled; t1 t2 t3 t4 finished, 2 of them infra.
    assert f.pace_hour == 2 and f.pace_all == pytest.approx(3 / 2)
    assert f.infra_rate_hour == pytest.approx(2 / 4) and f.infra_rate_all == pytest.approx(2 / 5)
    # 7 slots left: 3.5 h at 2/h, 4.67 h at 1.5/h.
    assert f.eta_hours == pytest.approx(7 / 2) and f.eta_range == pytest.approx((7 / 2, 7 / 1.5))
    assert f.sides == {"sandbox": 2, "server": 0, "interrupted": 0} and f.sandbox_rate_hour == pytest.approx(2 / 4)
    assert f.alarms == ["sandbox infra errors: 50.0% of the trials that finished in the last hour, above 30.0% "
                        "(MAX_INFRA_RATE): the sandboxes are strained by the trials at once; lower N_CONCURRENT (a "
                        "sharded bench's governor interrupts a shard)"]
    lines = watch_text.lines_of(f)
    assert "  ETA: 3h30m at the last hour's pace (range 3h30m to 4h40m by the two paces), 7 slot(s) left, " \
           "mop-up's included" in lines
    assert "  pace: 2 trial(s) settled in the last hour, 1.5 per hour over the whole run; infra-error rate 50.0% " \
           "(last hour), 40.0% (whole run)" in lines
    # The bar's slots, each kind once, summing to it: 3 settled, 7 open (t2, t4 infra; t5 running; t6-t9 not started).
    assert lines[1] == ("  slots: settled 3 = passed 2 + failed 1; open 7 = infra-errored 2 + no finished trial 1 + "
                        "not started 4 (mop-up fills the open ones)")
    assert lines[2] == ("  trials: 6 trial dir(s); 2 ended in an infra error (every attempt so far: sandbox 2, model "
                        "server 0, interrupted 0), 1 with no result yet (running, or stopped mid-trial)")
    # Under the threshold, no alarm.
    assert frame(run_of(tmp_path / "b", MID), 120, max_infra_rate=0.5).alarms == []


def test_the_infra_alarm_is_for_a_rate_above_max_infra_rate_not_at_it(tmp_path):
    jobs = run_of(tmp_path, MID)  # 2 of the 4 trials that finished in the last hour are infra errors: 50%
    assert frame(jobs, 120, max_infra_rate=0.5).alarms == []
    assert frame(jobs, 120, max_infra_rate=0.49).alarms == [
        "sandbox infra errors: 50.0% of the trials that finished in the last hour, above 49.0% (MAX_INFRA_RATE): "
        "the sandboxes are strained by the trials at once; lower N_CONCURRENT (a sharded bench's governor "
        "interrupts a shard)"]


def test_model_server_errors_are_told_apart_and_said_to_be_the_server_s_problem(tmp_path):
    # Two InternalServerErrors and a CancelledError in the last hour, one SandboxError before it.
    specs = [S("t0", 1.0, finished=40), S("t1", None, "SandboxError", "Sandbox API error (503)", finished=50),
             S("t2", None, "InternalServerError", "litellm.InternalServerError: 500", finished=80),
             S("t3", None, "InternalServerError", "litellm.InternalServerError: 502", finished=90),
             S("t4", None, "CancelledError", "", finished=100), S("t5", 0.0, finished=110)]
    f = frame(run_of(tmp_path, specs), 120)
    assert f.sides == {"sandbox": 1, "server": 2, "interrupted": 1} and f.infra == 4 and f.server_hour == 2
    # In the last hour: t2 t3 t4 t5 finished, no sandbox error: no strain, whatever the server did.
    assert f.sandbox_rate_hour == 0.0
    assert f.alarms == ["model-server errors: 2 trial(s) in the last hour failed at the model server "
                        "(env/outcome-policy.yaml infra.server_types): the server's problem, not load on the "
                        "sandboxes; the governor does not act on them. Check it: make status RUN=w, make logs RUN=w"]
    assert "  trials: 6 trial dir(s); 4 ended in an infra error (every attempt so far: sandbox 1, model server 2, " \
           "interrupted 1), 0 with no result yet (running, or stopped mid-trial)" in watch_text.lines_of(f)
    assert watch_text.summary_line(f) == ("progress: 2/10 attempt slots settled, ETA 8h00m, spend unknown; 2 model-server "
                                 "error(s) in the last hour: the server's problem (make logs RUN=w), not the "
                                 "sandboxes' (the governor leaves them alone); 1 alarm(s): make watch RUN=w")


def manifest(state: Path, *events: dict) -> None:
    state.mkdir(parents=True, exist_ok=True)
    with (state / "manifest.jsonl").open("a") as out:
        for e in events:
            out.write(json.dumps(e) + "\n")


def serve_event(job_id: str, dp: str) -> dict:
    return {"event": "serve", "role": "server", "job_id": job_id, "settings": {"SERVER_DP": dp, "SERVER_FLAVOR": "h200x4"}}


def test_paid_gpus_with_no_trial_are_an_alarm_with_the_governor_s_stops(tmp_path):
    jobs = run_of(tmp_path, MID)  # one trial running (t5)
    state = jobs.parent / "state" / "w"
    manifest(state, serve_event("job1", "4"),
             {"event": "governor-stop", "shard": 2, "reason": "sandbox infra errors 3 of 6 trials (50%)"},
             {"event": "governor-stop", "shard": 3, "reason": "sandbox infra errors 4 of 7 trials (57%)"},
             {"event": "governor-start", "shard": 2, "reason": "quiet"})
    f = frame(jobs, 120, max_infra_rate=1)
    assert f.alarms == ["paid GPUs idle: 1 trial(s) running on the 4 replica(s) of server job job1 (h200x4): at least 3 "
                        "replica(s) bill with no trial; the governor stopped shard 3 (sandbox infra errors 4 of 7 "
                        "trials (57%))"]
    # Stopped (a server-stop of that job): nothing bills, nothing to say; a one-replica server with a
    # trial running is busy.
    manifest(state, {"event": "server-stop", "role": "server", "job_id": "job1"})
    assert frame(jobs, 120, max_infra_rate=1).alarms == []
    manifest(state, serve_event("job2", "1"))
    assert frame(jobs, 120, max_infra_rate=1).alarms == []
    # A recorded SERVER_DP that is not a count is read as one replica.
    manifest(state, serve_event("job3", "4; rm -rf /"))
    assert frame(jobs, 120, max_infra_rate=1).alarms == []


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_manifest_that_cannot_be_read_is_an_alarm_not_a_hang(tmp_path, kind):
    jobs = run_of(tmp_path, MID)
    state = jobs.parent / "state" / "w"
    state.mkdir(parents=True)
    reason = hostile.make(state / "manifest.jsonl", kind, safe_read.MANIFEST_CAP, "a run's manifest.jsonl")
    assert frame(jobs, 120, max_infra_rate=1).alarms == [
        f"cannot read {state / 'manifest.jsonl'} ({reason}): whether paid GPUs sit idle is not checked"]


def test_a_stalled_run_raises_the_stall_alarm(tmp_path):
    f = frame(run_of(tmp_path, MID), 200)  # the last trial settled at 100: 1 h 40 m of quiet
    assert f.pace_hour == 0 and f.pace_all == pytest.approx(3 / (200 / 60))
    assert f.eta_hours == pytest.approx(7 / (3 / (200 / 60))) and f.eta_range is None
    assert f.alarms == ["stalled: no trial has settled for 1h40m, longer than the slowest of the last 3 took (30m00s): "
                        "is harbor running, is the server up? (make status RUN=w)"]
    # 20 minutes after the last settled trial is within the slowest one's 30: quiet, not stalled.
    assert not [a for a in frame(run_of(tmp_path / "b", MID), 120, max_infra_rate=1).alarms if "stalled" in a]


def test_trials_landing_in_a_job_dir_of_the_run_discovery_misses_raise_the_misplaced_alarm(tmp_path):
    jobs = run_of(tmp_path, MID)
    # A resume that wrote the run's job one level down (jobs/resumed/w), and another run's job.
    write_job(jobs / "resumed", "w", [S("t6", 1.0, finished=115)], dataset=tmp_path / "dataset")
    write_job(jobs, "other-run", [S("t6", 1.0, finished=115)], dataset=tmp_path / "dataset")
    f = frame(jobs, 120, max_infra_rate=1)
    assert f.alarms == ["misplaced trials: jobs/resumed/w (1 trial dir(s)) is a job of this run (its config.json names "
                        "it) where the run's job dirs are not looked for: a resume writing there looks idle here (the "
                        "reference lost 8 hours so); move it next to the others, or set JOBS_DIR"]
    assert (f.settled, f.per_job) == (3, [("w", 3, 6)])


def test_a_finished_run_says_finished_and_never_stalls(tmp_path):
    specs = [S(t, r, finished=10 * i + 40, attempt=a) for i, (t, r, a) in
             enumerate([("t0", 1.0, 0), ("t0", 0.0, 1), ("t1", 1.0, 0), ("t1", 1.0, 1)])]
    f = frame(run_of(tmp_path, specs, k=2, tasks=["t0", "t1"]), 60 * 24 * 30)  # a month later
    assert (f.total, f.settled, f.passed, f.failed, f.finished) == (4, 4, 3, 1, True)
    assert f.eta_hours == 0 and f.alarms == []
    lines = watch_text.lines_of(f)
    assert lines[0] == "run w: [##############################] 4/4 attempt slots settled (100.0%; 2 tasks × 2)"
    assert "  ETA: finished" in lines
    assert watch_text.summary_line(f) == "progress: 4/4 attempt slots settled, finished, spend unknown"


def test_the_slot_counts_sum_to_the_bar_and_a_final_error_is_named_and_settled(tmp_path):
    """Every kind of slot, once: passed, failed, unclassified, a final error (past MAX_TASK_RETRIES),
    an errored verdict; open ones after an infra error, with no finished trial, not started. The two
    sums add up to the bar; the trials are counted apart, as trials."""
    infra = lambda task, minute, i=0: S(task, None, "SandboxError", "Sandbox API error (503)", finished=minute,  # noqa: E731
                                        attempt=i)
    specs = [S("t0", 1.0, finished=40), S("t1", 0.0, finished=50), S("t2", None, "VerifierTimeoutError", "", finished=55),
             *[infra("t3", 60 + i, i) for i in range(3)], infra("t4", 70), S("t5", finished=None), infra("t6", 75)]
    jobs = run_of(tmp_path, specs)
    verdicts = tmp_path / "verdicts.yaml"
    verdicts.write_text("verdicts:\n  t6:\n    outcome: errored\n    reason: its image is gone\n")
    limit = 3
    run = dataclasses.replace(settings(jobs), verdicts=verdicts, max_task_retries=limit)
    f = watch.frame_of(run, now=T0 + timedelta(minutes=120), tasks_hint=None, max_cost=None, max_infra_rate=1,
                   with_cost=False)
    # From the specs: t3's infra error survived `limit` attempts; t4's one did not.
    attempts = {t: sum(1 for s in specs if s.task == t and s.exc == "SandboxError") for t in ("t3", "t4")}
    final = [t for t, n in attempts.items() if n >= limit]
    assert final == ["t3"] and f.final_errors == final
    kinds = {"passed": 1, "failed": 1, "unclassified": 1, "final": len(final), "verdict": 1}
    settled = sum(kinds.values())
    open_infra, unfinished = 1, 1  # t4 (once), t5 (running)
    not_started = len(TASKS) - len({s.task for s in specs})
    assert settled + open_infra + unfinished + not_started == f.total == len(TASKS)
    assert (f.settled, f.passed, f.failed, f.unclassified, f.final, f.verdict_errored) == (
        settled, kinds["passed"], kinds["failed"], kinds["unclassified"], kinds["final"], kinds["verdict"])
    assert (f.open_infra, f.unfinished, f.not_started) == (open_infra, unfinished, not_started)
    lines = watch_text.lines_of(f)
    assert lines[1] == (f"  slots: settled {settled} = passed 1 + failed 1 + unclassified 1 + final errors 1 + errored "
                        f"by verdict 1; open {f.total - settled} = infra-errored {open_infra} + no finished trial "
                        f"{unfinished} + not started {not_started} (mop-up fills the open ones)")
    infra_trials = sum(1 for s in specs if s.exc == "SandboxError")
    assert lines[2] == (f"  trials: {len(specs)} trial dir(s); {infra_trials} ended in an infra error (every attempt "
                        f"so far: sandbox {infra_trials}, model server 0, interrupted 0), 1 with no result yet "
                        f"(running, or stopped mid-trial)")
    assert lines[3] == (f"  final errors, not retried (their infra error survived MAX_TASK_RETRIES={limit} attempts in a "
                        f"row; make tally RUN=w says more): t3")
    # The ETA counts the open slots only: a final error is not waited for.
    assert f"{f.total - settled} slot(s) left" in next(line for line in lines if line.startswith("  ETA: "))


def test_a_bundled_example_is_watched_at_its_own_last_moment(tmp_path):
    """A frozen example's pace and ETA are those of its last moment (its latest trial's end), not of
    the months of silence since: no stall alarm, the pace of its own last hour."""
    proc = watch_cli("--run", "example-leaderboard", "--once")
    assert proc.returncode == 0, proc.stderr
    ends, settled_ends = [], []
    for job in sorted((REPO / "examples" / "jobs").glob("example-leaderboard-tb21*")):
        for result in job.glob("*/result.json"):
            doc = json.loads(result.read_text())
            end = datetime.fromisoformat(doc["finished_at"].replace("Z", "+00:00"))
            ends.append(end)
            if (doc.get("exception_info") or {}).get("exception_type") not in tally_policy.load_policy().infra_types:
                settled_ends.append(end)
    last = max(ends)
    last_hour = sum(1 for e in settled_ends if e >= last - timedelta(hours=1))
    lines = proc.stdout.splitlines()
    assert (f"  note: run example-leaderboard is a bundled example, frozen: its figures are taken at its own last "
            f"moment, its latest trial's end ({last:%Y-%m-%d %H:%M} UTC), not now") in lines
    pace = next(line for line in lines if line.startswith("  pace: "))
    assert pace.startswith(f"  pace: {last_hour} trial(s) settled in the last hour, ")
    eta = next(line for line in lines if line.startswith("  ETA: "))
    assert eta.startswith("  ETA: ") and "at the last hour's pace" in eta
    assert not [line for line in lines if "stalled" in line]
    # An explicit --now is the clock asked for, frozen example or not.
    later = watch_cli("--run", "example-leaderboard", "--once", "--now", "2027-01-01T00:00:00Z").stdout
    assert "frozen" not in later and "stalled" in later


def set_finished_at(jobs: Path, task: str, value: str) -> str:
    """Give one trial of job w the finished_at a hand-edited or clock-skewed result.json holds;
    its trial dir's name, as the note shows it."""
    result = next(jobs.glob(f"w/{task}__*/result.json"))
    data = json.loads(result.read_text())
    data["finished_at"] = value
    result.write_text(json.dumps(data))
    return f"w/{result.parent.name}"


LEFT_OUT = "counted in the slots, left out of the pace, the infra-error rates, the ETA and the plot"


@pytest.mark.parametrize("value, note", [
    ("0001-01-01T00:00:00Z", "1 finished trial(s) have no finished_at that is an ISO 8601 time of the years "
                             "2000-2199 (e.g. {trial}): " + LEFT_OUT),
    ("2099-01-01T00:00:00Z", "1 finished trial(s) end after now (2026-09-03 10:00:00 UTC), the latest at "
                             "2099-01-01 00:00:00 UTC: a clock is wrong (harbor's or this machine's); " + LEFT_OUT),
])
def test_a_settled_trial_whose_end_is_unusable_or_in_the_future_keeps_its_slot_and_no_time(tmp_path, value, note):
    """Year 1 once ended the watch with a TypeError in alarms(); a future end counted as "the last
    hour". The trial (t0, passed at 08:40) still fills its slot; its time is used nowhere."""
    jobs = run_of(tmp_path, MID)
    trial = set_finished_at(jobs, "t0", value)
    f = frame(jobs, 120)  # 10:00
    assert (f.total, f.settled, f.passed, f.failed, f.infra, f.running) == (10, 3, 2, 1, 2, 1)
    # Timed: t1 (09:10) and t3 (09:40) settled, t2 and t4 infra, all in the last hour; two hours since the start.
    assert f.settled_at == [T0 + timedelta(minutes=70), T0 + timedelta(minutes=100)]
    assert f.pace_hour == 2 and f.pace_all == pytest.approx(2 / 2)
    assert f.infra_rate_hour == pytest.approx(2 / 4) and f.infra_rate_all == pytest.approx(2 / 4)
    assert f.notes == [note.format(trial=trial)]
    assert f"  note: {note.format(trial=trial)}" in watch_text.lines_of(f)
    assert not [a for a in f.alarms if "stalled" in a]


def watch_cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "DRY_RUN", "CLI_SETTINGS", "MAX_COST")}
    return subprocess.run([sys.executable, "-m", "tools.run.watch", "watch", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


def test_spend_projected_past_the_ceiling_is_an_alarm(tmp_path):
    """The bundled example's recorded jobs: make cost's total so far, projected to the end at the
    run's average rate: (elapsed + ETA) / elapsed of it."""
    now = "2026-09-04T20:00:00Z"
    proc = watch_cli("--run", "example-terminus2", "--once", "--now", now, "--max-cost", "50")
    assert proc.returncode == 0, proc.stderr
    spend = next(line for line in proc.stdout.splitlines() if line.startswith("  spend: "))
    so_far = float(spend.split("$")[1].split(" ")[0])
    projected = float(spend.split("projected $")[1].split(" ")[0])
    assert so_far == 45.92  # make cost RUN=example-terminus2's total
    assert projected > 50
    assert (f"  ALARM: ceiling: the spend is projected to reach ${projected:,.2f} by the end, past MAX_COST $50.00: "
            f"the run will be stopped there") in proc.stdout.splitlines()
    calm = watch_cli("--run", "example-terminus2", "--once", "--now", now, "--max-cost", str(projected + 1))
    assert "ALARM: ceiling" not in calm.stdout


def test_make_watch_counts_only_the_runs_own_sandboxes_and_says_how_many_it_left_out(tmp_path):
    """make watch shows make cost's figures: eight h200 sandboxes of another run, created in the
    namespace while the run's trial ran, are not in its spend, and the frame says so."""
    from test_reproduce import TOKEN, JobsAPI

    job = "qwen3_8-27b-fp8-terminus2-tb21-full-v2"  # runs/qwen-t2.env's JOB_NAME
    write_job(tmp_path / "jobs", job, [S("t0", 1.0, finished=40)])  # set up its environment at T0+8 min
    sbx = {"hf-sandbox": "1", "hf-sandbox-mode": "dedicated"}
    at = lambda minutes: (T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%S.000Z")  # noqa: E731
    jobs = {"srv1": {"stages": ["RUNNING"], "flavor": "h200", "created_at": at(0), "running_secs": 3600,
                     "labels": {"project": "terminal-bench-harness", "run": "qwen-t2", "role": "server"}},
            "own": {"stages": ["COMPLETED"], "flavor": "cpu-upgrade", "port": 49983, "created_at": at(8.1),
                    "running_secs": 1800, "labels": sbx},
            **{f"theirs{i}": {"stages": ["COMPLETED"], "flavor": "h200", "port": 49983, "created_at": at(10 + i),
                              "running_secs": 3600, "labels": sbx} for i in range(1, 9)}}
    api = JobsAPI(tmp_path, {"jobs": jobs})
    try:
        (tmp_path / "state" / "qwen-t2").mkdir(parents=True)
        (tmp_path / "state" / "qwen-t2" / "manifest.jsonl").write_text(json.dumps(
            {"event": "serve", "run": "qwen-t2", "role": "server", "job_id": "srv1", "namespace": "alice"}) + "\n")
        (tmp_path / "hf-home").mkdir()
        (tmp_path / "hf-home" / ".agent_harnesses.json").write_text('{"standardEnvVars": [], "harnesses": {}}\n')
        env = {k: v for k, v in os.environ.items()
               if k not in ("RUN", "DRY_RUN", "CLI_SETTINGS", "MAX_COST", "HF_NAMESPACE", "MAKEFLAGS", "HF_HUB_OFFLINE")}
        env.update(STATE_ROOT=str(tmp_path / "state"), HF_ENDPOINT=api.url,
                   HF_TOKEN=TOKEN, HF_HOME=str(tmp_path / "hf-home"), HF_HUB_DISABLE_UPDATE_CHECK="1",
                   PATH=f"{REPO / '.venv/bin'}:{os.environ['PATH']}")
        proc = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "watch", "RUN=qwen-t2", "ONCE=1",
                               f"JOBS_DIR={tmp_path / 'jobs'}"], capture_output=True, text=True, env=env, timeout=300)
    finally:
        api.stop()
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    spend = next(line for line in lines if line.startswith("  spend: "))
    # The server's hour of h200 and its own sandbox's half hour of cpu-upgrade (+ the exposed port).
    assert spend.startswith("  spend: $5.02 so far, projected $5.02 at the end (hf jobs hardware, read ")
    assert lines[lines.index(spend) + 1] == (
        "  note: 8 sandbox(es) created while the run ran could not be attributed to it: not counted (alice/theirs1, "
        "alice/theirs2, alice/theirs3 and 5 more; no trial of the run names or matches them: docs/cost.md §5)")
    assert TOKEN not in proc.stdout + proc.stderr


def test_make_watch_once_prints_the_frame_offline_and_writes_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "DRY_RUN", "CLI_SETTINGS", "MAX_COST")}
    env["STATE_ROOT"] = str(tmp_path / "state")
    proc = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "watch", "RUN=example-leaderboard", "ONCE=1"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == ("run example-leaderboard: [############################..] 28/30 attempt slots settled "
                        "(93.3%; 6 tasks × 5)")
    assert lines[1] == ("  slots: settled 28 = passed 13 + failed 15; open 2 = infra-errored 2 + no finished trial 0 "
                        "(mop-up fills the open ones)")
    assert lines[2].startswith("  trials: ") and lines[2].endswith(
        "; 3 ended in an infra error (every attempt so far: sandbox 3, model server 0, interrupted 0), "
        "1 with no result yet (running, or stopped mid-trial)")
    assert any(line.startswith("  ETA: ") for line in lines) and any(line.startswith("  spend: ") for line in lines)
    assert not (tmp_path / "state").exists()
    dry = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "watch", "RUN=example-leaderboard",
                          "DRY_RUN=1", "MAX_COST=20"], capture_output=True, text=True, env=env, timeout=120)
    assert dry.stdout == (".venv/bin/python -m tools.run.watch watch --run example-leaderboard --every 60 "
                          "--max-infra-rate 0.3 --max-cost 20\n")
    bad = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "watch", "RUN=example-leaderboard",
                          "MAX_INFRA_RATE=70%"], capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode != 0
    assert "watch: setting MAX_INFRA_RATE must be a fraction from 0 to 1 (e.g. 0.3), got '70%'" in bad.stderr


def test_the_page_shows_the_bar_and_the_plot_and_reloads_itself(tmp_path):
    """make watch HTML=…: a self-contained page, opened in headless Chromium with no network: the
    bar at the settled share, the plot with both lines, and a reload every WATCH_EVERY seconds."""
    import matplotlib.image

    from tests.test_report_html import CHROMIUM_FLAGS, chromium, dump_dom
    page = tmp_path / "watch.html"
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "DRY_RUN", "CLI_SETTINGS", "MAX_COST")}
    env["STATE_ROOT"] = str(tmp_path / "state")
    proc = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "watch", "RUN=example-terminus2", "ONCE=1",
                           "WATCH_EVERY=45", f"HTML={page}"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = page.read_text()
    assert not re.search(r"""(src|href)=["'](?!data:|#)""", text)  # self-contained: nothing fetched
    dom = dump_dom(page, tmp_path / "profile")
    assert '<meta http-equiv="refresh" content="45">' in dom
    assert '<div class="fill" id="fill" style="width:69.2%"></div>' in dom  # 9 of 13 slots
    assert '<p id="progress">9/13 attempt slots settled (69.2%)</p>' in dom
    assert 'id="settled"' in dom and 'id="infra"' in dom  # both lines of the plot
    # What a person sees: a screenshot holds the bar's green and the infra line's red.
    shot = tmp_path / "shot.png"
    subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile2'}", "--window-size=900,900",
                    f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120, check=True)
    pixels = (matplotlib.image.imread(shot)[:, :, :3] * 255).round().astype(int).reshape(-1, 3).tolist()
    colors = {tuple(p) for p in pixels}
    assert (0x1b, 0x5e, 0x20) in colors and (0xb7, 0x1c, 0x1c) in colors
    assert not (tmp_path / "state").exists()


# --------------------------------------------------------------------------- the page's path

PAGE_NOW = "2026-09-04T20:00:00Z"
REFUSED = "nothing was written (name a regular file or a new one)"


def page_cli(html: str, preexec_fn=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "DRY_RUN", "CLI_SETTINGS", "MAX_COST")}
    return subprocess.run([sys.executable, "-m", "tools.run.watch", "watch", "--run", "example-terminus2", "--once",
                           "--now", PAGE_NOW, "--html", html], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=120, preexec_fn=preexec_fn)


def special_files(tmp: Path) -> dict[str, tuple[str, str]]:
    """{case: (HTML=, the reason in the refusal)}: each special file made in tmp."""
    os.mkfifo(tmp / "fifo.html")
    os.mknod(tmp / "null.html", stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null of our own
    (tmp / "dir.html").mkdir()
    (tmp / "link.html").symlink_to(tmp / "fifo.html")
    long_name = str(tmp / ("a" * 300 + ".html"))
    return {
        "fifo": (str(tmp / "fifo.html"), "it is a FIFO, not a regular file; " + REFUSED),
        "device": (str(tmp / "null.html"), "it is a character device, not a regular file; " + REFUSED),
        "directory": (str(tmp / "dir.html"), "it is a directory, not a regular file; " + REFUSED),
        "link to a fifo": (str(tmp / "link.html"), "it is a FIFO, not a regular file; " + REFUSED),
        "proc": ("/proc/self/watch.html", "it is under /proc, a system directory; " + REFUSED),
        "proc file": ("/proc/version", "it is under /proc, a system directory; " + REFUSED),
        "sys": ("/sys/kernel/watch.html", "it is under /sys, a system directory; " + REFUSED),
        "300-character name": (long_name, "File name too long (use a shorter name)"),
    }


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a character device needs root")
def test_the_page_is_written_only_over_a_regular_file_or_a_new_name(tmp_path):
    """A FIFO, a device (root once replaced /dev/null), a directory, a link to a FIFO, /proc, /sys,
    a name too long: one line each, exit 1, nothing there changed, nothing left beside it."""
    cases = special_files(tmp_path)
    before = {p.name: os.lstat(p).st_mode for p in tmp_path.iterdir()}
    for case, (html, why) in cases.items():
        proc = page_cli(html)
        assert (case, proc.returncode, proc.stderr) == (case, 1, f"Error: cannot write HTML={html}: {why}\n")
        assert proc.stdout == ""
    assert {p.name: os.lstat(p).st_mode for p in tmp_path.iterdir()} == before
    assert list((tmp_path / "dir.html").iterdir()) == []


def test_make_watch_refuses_a_fifo_before_a_frame_is_printed(tmp_path):
    """make watch ONCE=1 HTML=<a FIFO> (no root needed): refused in one line, with nothing on stdout
    before it (no frame printed, then the page refused), the FIFO left a FIFO, nothing beside it."""
    fifo = tmp_path / "fifo.html"
    os.mkfifo(fifo)
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "DRY_RUN", "CLI_SETTINGS", "MAX_COST", "HTML",
                                                            "ONCE", "MAKEFLAGS", "MAKELEVEL")}
    env["STATE_ROOT"] = str(tmp_path / "state")
    proc = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "watch", "RUN=example-terminus2", "ONCE=1",
                           f"HTML={fifo}"], capture_output=True, text=True, env=env, timeout=120)
    assert (proc.returncode, proc.stdout) == (2, "")  # make's own code for a recipe that failed
    assert proc.stderr.splitlines()[:-1] == [f"Error: cannot write HTML={fifo}: it is a FIFO, not a regular file; "
                                             + REFUSED]
    assert proc.stderr.splitlines()[-1].startswith("make: *** ")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["fifo.html"]


def test_the_page_never_writes_through_a_temp_name_someone_left_and_fits_a_long_name(tmp_path):
    """The temp file is created exclusively under an unpredictable name: a directory or a symlink
    at the name the watch once used (.watch.html.tmp) is left alone; a 250-character name works."""
    (tmp_path / ".watch.html.tmp").mkdir()
    (tmp_path / "elsewhere").write_text("not the watch's\n")
    (tmp_path / ".other.html.tmp").symlink_to(tmp_path / "elsewhere")
    long_name = "b" * 250 + ".html"
    for name in ("watch.html", "other.html", long_name):
        proc = page_cli(str(tmp_path / name))
        assert proc.returncode == 0, proc.stderr
        page = tmp_path / name
        assert stat.S_ISREG(os.lstat(page).st_mode) and page.read_text().startswith("<!doctype html>")
    assert (tmp_path / "elsewhere").read_text() == "not the watch's\n"
    assert (tmp_path / ".other.html.tmp").is_symlink() and list((tmp_path / ".watch.html.tmp").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [".watch.html.tmp", ".other.html.tmp", "elsewhere", "watch.html", "other.html", long_name])


def mounted_tmpfs(where: Path, size: str) -> bool:
    where.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True).returncode == 0


@pytest.mark.parametrize("full", ["a full tmpfs", "RLIMIT_FSIZE"])
def test_a_full_disk_is_one_line_keeps_the_old_page_and_leaves_no_temp_file(tmp_path, full):
    """The page (about 35 KB) does not fit: a 64 KiB tmpfs already 60 KB full (ENOSPC), or a file
    size limit of 8 KiB on the watch's process (EFBIG: no patch of the watch, the kernel refuses)."""
    import resource

    where, preexec = tmp_path, None
    if full == "a full tmpfs":
        where = tmp_path / "disk"
        if not mounted_tmpfs(where, "64k"):
            pytest.skip("cannot mount a tmpfs here (not root)")
        (where / "filler").write_bytes(b"\0" * 60_000)
        why = "No space left on device (free some space, or pass another path)"
    else:
        def preexec():
            resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))
        why = "File too large (the file size limit (ulimit -f) is reached: raise it, or pass another path)"
    try:
        page = where / "watch.html"
        page.write_text("the last page\n")
        before = sorted(p.name for p in where.iterdir())
        proc = page_cli(str(page), preexec_fn=preexec)
        assert (proc.returncode, proc.stderr) == (1, f"Error: cannot write HTML={page}: {why}\n")
        assert page.read_text() == "the last page\n"
        assert sorted(p.name for p in where.iterdir()) == before  # no temp file left
    finally:
        if where != tmp_path:
            subprocess.run(["umount", str(where)], check=True)


# --------------------------------------------------------------------------- a remote run, through its bucket

TOKEN = "hf_watchtesttoken"
BUCKET = "alice/tb-runs"
EXAMPLE_JOBS = REPO / "examples" / "jobs"
EXAMPLE_JOB = "example-terminus2-tb21"  # runs/example-terminus2.env's JOB_NAME
NOW = "2026-09-04T20:00:00Z"


class FakeBucketHub(FakeHub):
    """tests/fakes/fake_hub.py serving DIR as the bucket's files, read by the real huggingface_hub."""

    def __init__(self, tmp: Path, bucket_dir: Path):
        super().__init__(tmp, "--bucket", f"{BUCKET}={bucket_dir}", token=TOKEN, lifetime=120)

    def files_read(self) -> set[str]:
        """Bucket paths whose content was asked for (resolve, xet reconstruction, xorb)."""
        prefix = BUCKET + "/"
        return {r["file"][len(prefix):] for r in self.requests() if "file" in r}


@pytest.fixture
def hub(tmp_path):
    fake = FakeBucketHub(tmp_path, EXAMPLE_JOBS)
    yield fake
    fake.stop()


def hub_env(tmp: Path, endpoint: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RUN", "DRY_RUN", "CLI_SETTINGS", "MAX_COST", "WHERE", "BUCKET", "HF_TOKEN", "MAKEFLAGS")}
    env.update(HF_ENDPOINT=endpoint, HF_TOKEN=TOKEN, HF_HOME=str(tmp / "hf-home"), STATE_ROOT=str(tmp / "state"),
               HF_HUB_DISABLE_UPDATE_CHECK="1", HF_HUB_DISABLE_TELEMETRY="1", TMPDIR=str(tmp / "tmp"))
    (tmp / "tmp").mkdir(exist_ok=True)
    return env


def run_json_files(jobs: Path, job: str) -> set[str]:
    """What the watch needs of a run's job dirs: <job>/{config,result}.json and each trial's."""
    out = set()
    for d in jobs.iterdir():
        if tally_jobs.retry_number(job, d.name) is None:
            continue
        out |= {f"{d.name}/{n}" for n in watch_bucket.BUCKET_JSON if (d / n).is_file()}
        out |= {f"{d.name}/{t.name}/{n}" for t in d.iterdir() if t.is_dir() for n in watch_bucket.BUCKET_JSON
                if (t / n).is_file()}
    return out


FRAMES_SCRIPT = """
import dataclasses, json, sys, tempfile
from pathlib import Path
from tools.results import report_load
from tools.run import watch
from tools.run import watch_bucket
from tools.results import tally_trials
settings = report_load.run_settings("example-terminus2")
kw = dict(now=tally_trials.parse_timestamp(sys.argv[1])[0], tasks_hint=None, max_cost=50.0, max_infra_rate=0.3)
with tempfile.TemporaryDirectory() as root:
    remote = watch_bucket.Remote(bucket=sys.argv[2], job_name=settings.job_name, root=Path(root))
    frames = [watch.frame_of(settings, **kw), watch.remote_frame(remote, watch_bucket.bucket_api(), settings, **kw)]
print(json.dumps([dataclasses.asdict(f) for f in frames], default=str))
"""


def test_a_remote_run_read_through_its_bucket_gives_the_local_frame_and_reads_only_its_json(tmp_path, hub):
    """The bundled example's job dirs served as a bucket (with the other examples' jobs and every
    trial's agent/trajectory.json beside them), read by the real huggingface_hub: list_bucket_tree,
    then download_bucket_files through hf_xet's reconstruction, against the fake. Every figure of
    the frame equals the local one, spend and alarms included; the only files read are the run's
    job and trial config.json and result.json."""
    env = hub_env(tmp_path, hub.endpoint)
    proc = subprocess.run([sys.executable, "-c", FRAMES_SCRIPT, NOW, BUCKET], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    local, remote = json.loads(proc.stdout)
    assert local["settled"] == 9 and local["spend"]["known"] and local["alarms"]  # a frame worth comparing
    assert remote == local
    wanted = run_json_files(EXAMPLE_JOBS, EXAMPLE_JOB)
    assert hub.files_read() == wanted
    assert not [r for r in hub.requests() if "agent" in r["path"] or "trajectory" in r["path"]
                or "agent/" in r.get("file", "")]
    assert all(r["auth"] for r in hub.requests() if r["path"].startswith("/api/buckets/"))
    # The same through make watch, as plain lines; the token never on the screen; nothing left behind.
    lines = subprocess.run([sys.executable, "-m", "tools.run.watch", "watch", "--run", "example-terminus2", "--once",
                            "--now", NOW, "--where", "hf", "--bucket", BUCKET], capture_output=True, text=True,
                           cwd=REPO, env=env, timeout=120)
    assert lines.returncode == 0, lines.stderr
    assert lines.stdout == watch_cli("--run", "example-terminus2", "--once", "--now", NOW).stdout
    made = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "watch", "RUN=example-terminus2",
                           "WHERE=hf", f"BUCKET={BUCKET}", "ONCE=1"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert made.returncode == 0, made.stderr
    assert made.stdout.splitlines()[0] == lines.stdout.splitlines()[0]
    assert TOKEN not in lines.stdout + lines.stderr + made.stdout + made.stderr
    assert list((tmp_path / "tmp").iterdir()) == [] and not (tmp_path / "state").exists()


def test_make_watch_where_hf_dry_run_says_what_it_would_read_and_reads_nothing(tmp_path, hub):
    env = hub_env(tmp_path, hub.endpoint)
    proc = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "watch", "RUN=example-terminus2",
                           "WHERE=hf", f"BUCKET={BUCKET}", "DRY_RUN=1"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (".venv/bin/python -m tools.run.watch watch --run example-terminus2 --every 60 "
                           f"--max-infra-rate 0.3 --where hf --bucket {BUCKET}\n")
    assert proc.stderr == (f"watch: would read, each frame, from hf://buckets/{BUCKET}: {EXAMPLE_JOB}/{{config,result}}"
                           f".json and {EXAMPLE_JOB}/*/{{config,result}}.json, the same of {EXAMPLE_JOB}-shard-N and "
                           f"{EXAMPLE_JOB}-retry-N; "
                           "never agent/ trajectories\n")
    assert hub.requests() == []
    assert list((tmp_path / "tmp").iterdir()) == [] and not (tmp_path / "state").exists()
    assert not (tmp_path / "hf-home").exists()


def test_make_watch_where_hf_without_a_bucket_is_one_clear_line(tmp_path):
    env = hub_env(tmp_path, "http://127.0.0.1:9")
    proc = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "watch", "RUN=example-terminus2",
                           "WHERE=hf", "ONCE=1"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode != 0 and proc.stdout == ""
    assert [line for line in proc.stderr.splitlines() if not line.startswith("make")] == [
        "watch: setting BUCKET is empty for run 'example-terminus2', and WHERE=hf keeps the run's job dirs in an HF "
        "bucket: set BUCKET=NAMESPACE/NAME in runs/example-terminus2.env or on the command line"]
    tool = watch_cli("--run", "example-terminus2", "--once", "--where", "hf")
    assert tool.returncode == 1 and tool.stderr.strip().splitlines() == [
        "Error: --where hf reads the run from its bucket: pass --bucket NS/NAME (make watch: BUCKET=ns/name)"]


def test_bucket_paths_the_watch_reads_are_the_runs_json_and_nothing_deeper():
    yes = ["w/config.json", "w/result.json", "w/t0__ab/result.json", "w-retry-2/t0__ab/config.json"]
    no = ["w/lock.json", "w/t0__ab/agent/trajectory.json", "w/t0__ab/agent/result.json", "w/t0__ab/trial.log",
          "w-smoke/config.json", "w-retry-x/config.json", "other/config.json", "w/../config.json", "w/./result.json",
          "w/t0\x1b[2J/result.json", "w//result.json", "w/a/b/result.json", "result.json"]
    assert [p for p in yes if watch_bucket.bucket_wanted("w", p)] == yes
    assert [p for p in no if watch_bucket.bucket_wanted("w", p)] == []


class StubBucketApi:
    """HfApi's two bucket calls over a dict {path: bytes}: what refresh fetches, and when."""

    def __init__(self, files: dict[str, bytes], dirs: tuple[str, ...] = ()):
        self.files, self.dirs, self.fetched = dict(files), set(dirs), []

    def _entry(self, path: str):
        from huggingface_hub import BucketFile
        data = self.files[path]
        return BucketFile(type="file", path=path, size=len(data), xetHash=hashlib.sha256(data).hexdigest())

    def list_bucket_tree(self, bucket, prefix=None, *, recursive=None):
        from huggingface_hub import BucketFolder
        paths = sorted(self.files)
        folders = sorted(self.dirs | {"/".join(p.split("/")[:i]) for p in paths for i in range(1, p.count("/") + 1)})
        if not recursive:
            return [BucketFolder(type="directory", path=f) for f in folders if "/" not in f] + \
                   [self._entry(p) for p in paths if "/" not in p]
        under = [f for f in folders if f.startswith(prefix)] + [p for p in paths if p.startswith(prefix)]
        return [BucketFolder(type="directory", path=f) if f in folders else self._entry(f) for f in under]

    def download_bucket_files(self, bucket, files, raise_on_missing_files=False):
        for entry, dest in files:
            self.fetched.append(entry.path)
            Path(dest).write_bytes(self.files[entry.path])


def test_a_refresh_fetches_what_changed_drops_what_is_gone_and_keeps_to_its_caps(tmp_path, monkeypatch):
    root = tmp_path / "mirror"
    root.mkdir()
    api = StubBucketApi({"w/config.json": b"{}", "w/result.json": b"{}", "w/t0__a/config.json": b"{}",
                         "w/t0__a/result.json": b'{"a": 1}', "w/t0__a/agent/trajectory.json": b"[]",
                         "w/t1__b/config.json": b"{}", "w-retry-1/config.json": b"{}",
                         "other/config.json": b"{}"}, dirs=("w/t2__c", "w/t2__c/agent"))
    remote = watch_bucket.Remote(bucket=BUCKET, job_name="w", root=root)
    watch_bucket.bucket_refresh(api, remote)
    assert sorted(api.fetched) == ["w-retry-1/config.json", "w/config.json", "w/result.json", "w/t0__a/config.json",
                                   "w/t0__a/result.json", "w/t1__b/config.json"]
    assert (root / "w" / "t2__c").is_dir() and not (root / "w" / "t2__c" / "agent").exists()  # running: no json yet
    assert not (root / "w" / "t0__a" / "agent").exists() and not (root / "other").exists()
    # Next frame: t0's result changed, t1 archived away by a mop-up, the retry job gone.
    api.files["w/t0__a/result.json"] = b'{"a": 2}'
    del api.files["w/t1__b/config.json"], api.files["w-retry-1/config.json"]
    api.fetched = []
    watch_bucket.bucket_refresh(api, remote)
    assert api.fetched == ["w/t0__a/result.json"]
    assert (root / "w" / "t0__a" / "result.json").read_bytes() == b'{"a": 2}'
    assert not (root / "w" / "t1__b").exists() and not (root / "w-retry-1").exists()
    # Caps: a json file too big is left out and said; too many files is an error.
    monkeypatch.setattr(watch_bucket, "BUCKET_FILE_CAP", 7)
    api.files["w/t0__a/result.json"] = b'{"a": 22}'
    watch_bucket.bucket_refresh(api, remote)
    assert remote.notes == ["bucket: w/t0__a/result.json not read: 9 bytes, above the cap of 7 (its trial shows as "
                            "having no result)"]
    monkeypatch.setattr(watch_bucket, "BUCKET_FILES_CAP", 2)
    with pytest.raises(watch_bucket.BucketError, match="above the cap of 2"):
        watch_bucket.bucket_refresh(api, remote)


def test_a_bucket_that_stops_answering_keeps_the_last_frame_and_says_so(tmp_path):
    """The first frame needs the bucket (one line when it cannot be read); a later refresh that
    fails keeps the copy already here, with an alarm saying since when, so a blip ends no watch."""
    jobs = run_of(tmp_path / "src", MID)
    files = {str(p.relative_to(jobs)): p.read_bytes() for p in jobs.rglob("*.json")
             if watch_bucket.bucket_wanted("w", str(p.relative_to(jobs)))}
    api = StubBucketApi(files)
    root = tmp_path / "mirror"
    root.mkdir()
    remote = watch_bucket.Remote(bucket=BUCKET, job_name="w", root=root)
    kw = dict(now=T0 + timedelta(minutes=120), tasks_hint=None, max_cost=None, max_infra_rate=1.0, with_cost=False)
    first = watch.remote_frame(remote, api, settings(jobs), **kw)
    local = watch.frame_of(settings(jobs), **kw)
    assert (first.settled, first.infra, first.running, first.per_job) == (3, 2, 1, [("w", 3, 6)])
    assert first == local

    def down(*args, **kwargs):
        raise OSError("[Errno 111] Connection refused")

    api.list_bucket_tree = down
    second = watch.remote_frame(remote, api, settings(jobs), **kw)
    assert second.settled == 3
    assert second.alarms == [f"bucket: could not refresh ([Errno 111] Connection refused); the figures are as of "
                             f"{remote.refreshed.strftime('%H:%M:%S')} UTC"]
    refused = r"^cannot read the bucket alice/tb-runs: \[Errno 111\] Connection refused$"
    with pytest.raises(watch_bucket.BucketError, match=refused):
        watch.remote_frame(watch_bucket.Remote(bucket=BUCKET, job_name="w", root=tmp_path), api, settings(jobs), **kw)


# --------------------------------------------------------------------------- the live view, in a terminal

PANE = (100, 40)  # columns, rows


def tmux() -> str:
    exe = shutil.which("tmux")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("tmux is missing: apt-get install -y tmux (.ci/run installs it)")
        pytest.skip("tmux not installed (apt-get install -y tmux)")
    return exe


def wait_for(what: str, check, seconds: float = 60.0):
    """Poll until check() gives something truthy; fail naming `what` past the deadline."""
    deadline = time.monotonic() + seconds
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}: not within {seconds:.0f} s"
        time.sleep(0.1)


def descendants(pid: int) -> set[int]:
    """Every live process below pid, from /proc (ppid links)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def test_the_live_view_fits_a_100_column_terminal_redraws_and_stops_on_ctrl_c(tmp_path):
    """make watch WATCH_EVERY=1 in a detached 100x40 tmux session (its own server socket): the
    frame appears, every line fits the pane and no word is split across lines, the "updated"
    line changes between two captures, and Ctrl-C ends it: make, the script and the tool all
    gone, make ended as make ends on Ctrl-C (status 0, or its own SIGINT re-raised), no
    traceback, the last frame left on the screen."""
    exe = tmux()
    sock = str(tmp_path / "tmux.sock")
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "DRY_RUN", "CLI_SETTINGS", "MAX_COST", "TMUX",
                                                            "WHERE", "BUCKET", "MAKEFLAGS")}
    env.update(STATE_ROOT=str(tmp_path / "state"), TERM="xterm-256color")

    def tm(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([exe, "-S", sock, *args], capture_output=True, text=True, env=env, timeout=30)

    # The shell traps INT (a handler: make and the tool get Ctrl-C as usual, the shell lives on to
    # record make's status), and starts make only once the test has the pane (no race on the pane).
    go, status = tmp_path / "go", tmp_path / "status"
    command = (f"trap true INT; while [ ! -e {go} ]; do sleep 0.05; done; "
               f"make -C {REPO} --no-print-directory watch RUN=example-terminus2 WATCH_EVERY=1; "
               f"echo $? > {status}; sleep 60")
    started = tm("new-session", "-d", "-s", "watch", "-x", str(PANE[0]), "-y", str(PANE[1]), "bash", "-c", command)
    assert started.returncode == 0, started.stderr
    try:
        go.touch()

        def pane(fmt: str) -> str:
            return tm("display-message", "-p", "-t", "watch", fmt).stdout.strip()

        def screen() -> list[str]:
            return tm("capture-pane", "-p", "-t", "watch").stdout.splitlines()

        def updated(lines: list[str]) -> str | None:
            return next((line for line in lines if line.startswith("  updated ")), None)

        first = wait_for("the frame on the pane", lambda: (lambda s: s if updated(s) else None)(screen()))
        assert pane("#{pane_width}x#{pane_height}") == f"{PANE[0]}x{PANE[1]}"
        assert first[0].startswith("run example-terminus2: [")
        assert max(len(line) for line in first) <= PANE[0]
        text = " ".join(line.strip() for line in first)
        for phrase in ("9/13 attempt slots settled", "settled 9 = passed 4 + failed 4 + unclassified 1",
                       "example-terminus2-tb21-retry-1: 1 settled of 2 trial dir(s)", "spend: $45.92 so far",
                       "mop-up's included"):
            assert phrase in text, (phrase, first)
        # A word split by the wrap would leave its halves on two lines: every word of the plain
        # frame appears whole on the screen (durations aside: the clock moves between the two).
        plain = watch_cli("--run", "example-terminus2", "--once").stdout.split()
        on_screen = set(text.split())
        assert [w for w in plain if w not in on_screen and not re.search(r"\d+h\d\dm", w)] == []
        again = wait_for("a redraw", lambda: (lambda s: s if updated(s) not in (None, updated(first)) else None)(
            screen()))
        assert again[0] == first[0]
        below = descendants(int(pane("#{pane_pid}")))  # make, scripts/watch.sh, the tool

        def alive() -> list[str]:
            out = []
            for p in below:
                try:
                    state = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state != "Z":  # a zombie has ended
                        out.append(Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace").replace("\0", " "))
                except OSError:
                    pass
            return out

        assert tm("send-keys", "-t", "watch", "C-c").returncode == 0
        code = wait_for("make's exit status", lambda: status.exists() and status.read_text().strip(), seconds=20)
        # 0, or make's own Ctrl-C (it re-raises SIGINT): never a failure. A 2 here once came from a
        # stray SIGTERM: another test's teardown killing a pid that had been reused by this watch
        # (tests/test_helper.bash kill_running_jobs); the screen says what ended it.
        assert code in ("0", "130"), (code, tm("capture-pane", "-p", "-S", "-", "-t", "watch").stdout)
        try:
            wait_for("every process of the watch gone", lambda: not alive(), seconds=20)
        except AssertionError:
            raise AssertionError(f"still running after Ctrl-C: {alive()}") from None
        after = tm("capture-pane", "-p", "-S", "-", "-t", "watch").stdout.splitlines()  # with the scrollback
        assert not [line for line in after if "Traceback" in line or "Error" in line], after
        # The last frame stays (a wrapped line leaves its pane padding: join the stripped lines).
        assert "9/13 attempt slots settled" in " ".join(line.strip() for line in after)
    finally:
        tm("kill-server")


def test_a_job_dir_of_another_model_under_the_run_s_name_is_refused_in_one_line():
    """A run file copied from another keeps its JOB_NAME: make watch would show the other model's
    trials as this run's. Refused, as the tally refuses them."""
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "DRY_RUN", "CLI_SETTINGS", "MAX_COST")}
    proc = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "watch", "RUN=example-terminus2", "ONCE=1",
                           "MODEL=Other/Model-7B"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode != 0 and proc.stdout == ""
    error = [line for line in proc.stderr.splitlines() if not line.startswith("make")]
    assert len(error) == 1 and error[0].startswith(
        "Error: run example-terminus2: ") and "example-terminus2-tb21 ran model 'openai/Qwen/Qwen3.8-27B-FP8' (its " \
        "config.json), not the run's MODEL Other/Model-7B" in error[0] and "own JOB_NAME" in error[0], error
