"""make watch (tools/watch.py): one frame of a run at several points of its life.

Job dirs are written with harbor 0.25's own models (tests/fixtures/harbor_jobs.py), every trial
at a known minute after T0; the frame is computed at a fixed --now, and every expected figure
(slots, pace, infra rates, ETA and its range, alarms) is worked out here by hand.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from tests.fixtures.harbor_jobs import T0, TrialSpec, make_dataset, write_job
from tools import report_load as RL
from tools import watch as W

S = TrialSpec
REPO = Path(__file__).resolve().parent.parent
TASKS = [f"t{i}" for i in range(10)]


def settings(jobs: Path, job: str = "w") -> RL.RunSettings:
    return RL.RunSettings(run=job, jobs_dir=jobs, job_name=job, verdicts=None, state_dir=jobs.parent / "state" / job,
                          namespace="", project_label="terminal-bench-harness", call_timeout=5.0, prices_max_age=0.0,
                          state_root=jobs.parent / "state")


def run_of(tmp: Path, specs: list[TrialSpec], k: int = 1, tasks: list[str] = TASKS) -> Path:
    """A run whose first job planned `tasks` × k trials (the dataset holds every task)."""
    jobs = tmp / "jobs"
    make_dataset(tmp / "dataset", tasks)
    write_job(jobs, "w", specs, dataset=tmp / "dataset", n_attempts=k, multiplier=1.0)
    return jobs


def frame(jobs: Path, minutes: float, **kw) -> W.Frame:
    return W.frame_of(settings(jobs), now=T0 + timedelta(minutes=minutes), tasks_hint=None,
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
    lines = W.lines_of(f)
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
    assert f.alarms == ["infra errors: 50.0% of the trials that finished in the last hour, above 30.0% (MAX_INFRA_RATE): "
                        "the sandboxes or the server are strained; lower N_CONCURRENT"]
    lines = W.lines_of(f)
    assert "  ETA: 3h30m at the last hour's pace (range 3h30m to 4h40m by the two paces), 7 slot(s) left, " \
           "mop-up's included" in lines
    assert "  pace: 2 settled in the last hour, 1.5 per hour over the whole run; infra-error rate 50.0% (last hour), " \
           "40.0% (whole run)" in lines
    # Under the threshold, no alarm.
    assert frame(run_of(tmp_path / "b", MID), 120, max_infra_rate=0.5).alarms == []


def test_a_stalled_run_raises_the_stall_alarm(tmp_path):
    f = frame(run_of(tmp_path, MID), 200)  # the last trial settled at 100: 1 h 40 m of quiet
    assert f.pace_hour == 0 and f.pace_all == pytest.approx(3 / (200 / 60))
    assert f.eta_hours == pytest.approx(7 / (3 / (200 / 60))) and f.eta_range is None
    assert f.alarms == ["stalled: no trial has settled for 1h40m, longer than the slowest of the last 3 took (0h30m): "
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
    lines = W.lines_of(f)
    assert lines[0] == "run w: [##############################] 4/4 attempt slots settled (100.0%; 2 tasks × 2)"
    assert "  ETA: finished" in lines
    assert W.summary_line(f) == "progress: 4/4 attempt slots settled, finished, spend unknown"


def watch_cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "DRY_RUN", "CLI_SETTINGS", "MAX_COST")}
    return subprocess.run([sys.executable, "-m", "tools.watch", "watch", *args], capture_output=True, text=True,
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


def test_make_watch_once_prints_the_frame_offline_and_writes_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "DRY_RUN", "CLI_SETTINGS", "MAX_COST")}
    env["STATE_ROOT"] = str(tmp_path / "state")
    proc = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "watch", "RUN=example-leaderboard", "ONCE=1"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == ("run example-leaderboard: [############################..] 28/30 attempt slots settled "
                        "(93.3%; 6 tasks × 5)")
    assert lines[1] == "  passed 13, failed 15, infra errors 3 (every attempt), no result yet 1 (running, or stopped mid-trial)"
    assert any(line.startswith("  ETA: ") for line in lines) and any(line.startswith("  spend: ") for line in lines)
    assert not (tmp_path / "state").exists()
    dry = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "watch", "RUN=example-leaderboard",
                          "DRY_RUN=1", "MAX_COST=20"], capture_output=True, text=True, env=env, timeout=120)
    assert dry.stdout == (".venv/bin/python -m tools.watch watch --run example-leaderboard --every 60 "
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
