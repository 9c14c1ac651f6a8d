"""make calibrate-sandboxes (scripts/calibrate-sandboxes.sh, tools/money/sandbox_cal.py) and the curve make
plan then fits (tools/money/sandbox_curve.py): docs/sandbox-calibration.md.

The ladder runs through the REAL harbor with its oracle agent on tests/datasets/mopup, with
tests/harbor_env/scripted_env.py playing the sandboxes, in a scratch checkout (the real scripts/, tools/,
env/ by symlink, like tests/test_mopup.py's Tree). ScriptedEnv's plan is per attempt of a task, and each
level runs every task once, in order: so attempt i of a task is level i, and each level's infra errors
are known exactly. Which trials ran is read from ScriptedEnv's own log, not inferred.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import signal
import subprocess
import time
from importlib import metadata
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.fixtures import scratch
from tests.test_plan import tb_settings
from tools import settings as run_settings
from tools.money import plan
from tools.money import plan_evidence
from tools.money import sandbox_cal
from tools.money import sandbox_curve
from tools.results import tally_jobs

REPO = Path(__file__).resolve().parents[1]
RUN = "cal-test"
JOB = "cal-e2e"
TASKS = ("t-apt", "t-cancel", "t-context", "t-fail", "t-hang", "t-pass", "t-readtimeout", "t-sandbox", "t-timeout")
RUN_FILE = f"""\
# Written by tests/test_sandbox_cal.py: the sandbox calibration's test run (no server: the oracle calls none).
SERVER=qwen3.8-27b-fp8-sglang-h200
MODEL=Qwen/Qwen3.8-27B-FP8
JOB_NAME={JOB}
DATASET_PATH=dataset
ENV_TYPE=scripted_env:ScriptedEnv
HF_NAMESPACE=alice
SANDBOX_LEVELS="1 2 3"
SANDBOX_LEVEL_TASKS=9
SANDBOX_TRIAL_SECS=60
"""
# Attempt i of each task is level i. Level 1 (-n 1): one scored failure, no infra error: 0 of 9.
# Level 2 (-n 2): a SandboxError, and a CancelledError (a stop's: left out): 1 of 8.
# Level 3 (-n 3): SandboxError, ReadTimeout, ConnectError and an expired apt mirror (infra by its
# message, the sandbox's image): 4 of 9. Unnamed tasks pass.
LADDER_PLAN = {
    "t-fail": ["fail"],
    "t-cancel": ["pass", "CancelledError", "pass"],
    "t-sandbox": ["pass", "SandboxError", "SandboxError"],
    "t-readtimeout": ["pass", "pass", "ReadTimeout"],
    "t-apt": ["pass", "pass", "apt-mirror"],
    "t-pass": ["pass", "pass", "ConnectError"],
}


class Tree:
    """A scratch checkout: the real code by symlink; its own runs/, dataset/, and (once written) state/, jobs/."""

    def __init__(self, tmp: Path, plan_doc: dict):
        self.tmp = tmp
        self.root = scratch.checkout(tmp / "repo", makefile=True)
        (self.root / "runs" / f"{RUN}.env").write_text(RUN_FILE)
        self.plan_file = tmp / "plan.json"
        self.plan_file.write_text(json.dumps(plan_doc))
        self.log = tmp / "executed.jsonl"
        self.curve = self.root / "state" / "namespaces" / "alice" / "sandbox-curve.json"

    def env(self, **settings: str) -> dict:
        catalogue = run_settings.catalogue()
        env = {k: v for k, v in os.environ.items() if k not in catalogue and k not in ("RUN", "STATE_ROOT", "CLI_SETTINGS")}
        env.update(RUN=RUN, HF_TOKEN="hf_fake_token_for_tests", LITELLM_LOCAL_MODEL_COST_MAP="True", HF_HUB_OFFLINE="1",
                   PYTHONPATH=str(REPO / "tests" / "harbor_env"), SCRIPTED_ENV_PLAN=str(self.plan_file),
                   SCRIPTED_ENV_LOG=str(self.log), SCRIPTED_ENV_PHASE="calibrate")
        env.update(settings)
        return env

    def calibrate(self, **settings: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.root / "scripts" / "calibrate-sandboxes.sh")], cwd=self.root,
                              env=self.env(**settings), capture_output=True, text=True, timeout=600)

    def executed(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def listing(self) -> list[tuple[str, str]]:
        """Every path under the test's tmp dir (links not followed), with its kind: what a dry run may not change."""
        out = []
        for top, dirs, files in os.walk(self.tmp):
            for name in dirs + files:
                path = Path(top) / name
                kind = "link" if path.is_symlink() else "dir" if path.is_dir() else "file"
                out.append((str(path.relative_to(self.tmp)), kind))
        return sorted(out)

    def plan_json(self, **settings: str) -> dict:
        proc = subprocess.run([str(self.root / "scripts" / "plan.sh")], cwd=self.root, capture_output=True, text=True,
                              env=self.env(PLAN_REPS="5", JSON="1", **settings), timeout=300)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)


def stderr_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("calibrate-sandboxes:")]


# --------------------------------------------------------------------------- the ladder, through the real harbor


@pytest.mark.e2e
def test_the_ladder_runs_the_oracle_per_level_records_each_level_s_exact_rate_and_make_plan_uses_it(tmp_path):
    tree = Tree(tmp_path, LADDER_PLAN)
    proc = tree.calibrate()
    assert proc.returncode == 0, proc.stderr
    lines = stderr_lines(proc)
    assert lines[:2] == [
        "calibrate-sandboxes: the ladder: 1 2 3 trials at once, one harbor job each (cal-e2e-sandbox-cal-1-n<level>), 9 "
        "trials a level, 27 in all: harbor's oracle agent (no model server, no GPU) on scripted_env:ScriptedEnv "
        "(cpu-upgrade) in namespace alice",
        "calibrate-sandboxes: cost: at most $0.02 ($0.006 a level): 27 trials × 60 s (SANDBOX_TRIAL_SECS) × $0.04/h "
        "(cpu-upgrade $0.03/h + its exposed port $0.01/h (env/flavor-prices.tsv))"]
    # One harbor job per level, the oracle at the level's concurrency, under names no run's tally takes.
    jobs = tree.root / "jobs"
    names = [f"{JOB}-sandbox-cal-1-n{n}" for n in (1, 2, 3)]
    assert sorted(p.name for p in jobs.iterdir()) == names
    for n, name in zip((1, 2, 3), names):
        config = json.loads((jobs / name / "config.json").read_text())
        assert (config["n_concurrent_trials"], [a["name"] for a in config["agents"]]) == (n, ["oracle"])
    assert tally_jobs.run_job_dirs(jobs, JOB) == []
    # Every task ran once a level, in its level's job (ScriptedEnv's own log).
    ran = tree.executed()
    assert sorted((r["job"], r["task"]) for r in ran) == sorted((j, t) for j in names for t in TASKS)
    # The curve: the exact rates per level, the sandbox side only (the CancelledError is a stop's).
    doc = json.loads(tree.curve.read_text())
    assert [(lv["level"], lv["at_once"], lv["trials"], lv["sandbox_errors"], lv["interrupted"], lv["rate"])
            for lv in doc["levels"]] == [(1, 1, 9, 0, 0, 0.0), (2, 2, 8, 1, 1, 0.125), (3, 3, 9, 4, 0, 0.4444)]
    for lv in doc["levels"]:  # every trial's sandbox start, from its result.json environment_setup
        assert len(lv["setup_secs"]) == 9 and all(0 <= s < 60 for s in lv["setup_secs"]), lv
    assert {k: doc[k] for k in ("kind", "version", "run", "namespace", "env_type", "sandbox_flavor", "harbor_version",
                                "agent", "stopped")} == {
        "kind": "sandbox-curve", "version": 1, "run": RUN, "namespace": "alice", "env_type": "scripted_env:ScriptedEnv",
        "sandbox_flavor": "cpu-upgrade", "harbor_version": metadata.version("harbor"), "agent": "oracle", "stopped": None}
    token = tree.env()["HF_TOKEN"]  # in harbor's environment only: never printed, never in state/
    assert token not in proc.stdout + proc.stderr
    assert not [p for p in (tree.root / "state").rglob("*") if p.is_file() and token in p.read_text()]
    assert "calibrate-sandboxes: warning: harbor exited 1 at level 2, every trial of it finished (a cancelled trial " \
           "makes it so): going on" in proc.stderr
    # make plan fits its sandbox curve to it: (errors + 1/2) / (trials + 1) a level, then the reference's 70%
    # at 8 above the ladder's top, and says so.
    planned = tree.plan_json()
    assert planned["infra_curve"]["at_once"] == [1, 2, 3, 8]
    assert planned["infra_curve"]["rates"] == [0.05, 0.1667, 0.45, 0.7]
    assert planned["sandbox_budget"]["source"] == "measured"
    date = doc["measured_at"][:10]
    proc = subprocess.run([str(tree.root / "scripts" / "plan.sh")], cwd=tree.root, capture_output=True, text=True,
                          env=tree.env(PLAN_REPS="5"), timeout=300)
    assert (f"- sandbox budget: measured by make calibrate-sandboxes on {date}: 0.0% at 1, 12.5% at 2, 44.4% at 3 "
            f"(namespace alice, cpu-upgrade, run {RUN}; {tree.curve}); above 3, toward the reference's 70% at 8 (the "
            f"ladder went no higher)") in proc.stdout.splitlines()
    # Another namespace has no curve: the reference's anecdotes, said so.
    other = tree.plan_json(HF_NAMESPACE="bob")
    assert other["sandbox_budget"]["source"] == "reference"
    assert other["infra_curve"]["at_once"] == [3, 8]


@pytest.mark.e2e
def test_the_ladder_stops_before_a_level_whose_estimate_with_the_spend_so_far_passes_max_cost(tmp_path):
    """Each trial is priced at 1 s up front and takes about 1.5 s (slow-pass): the ladder (2 levels × 2
    trials × 1 s × $0.04/h = $0.000044) fits MAX_COST=0.00005, but level 1's spend (at least 3 s) and
    level 2's estimate (2 s) do not."""
    tree = Tree(tmp_path, {task: ["slow-pass"] for task in TASKS})
    proc = tree.calibrate(SANDBOX_LEVELS="1 2", SANDBOX_LEVEL_TASKS="2", SANDBOX_TRIAL_SECS="1", MAX_COST="0.00005",
                          SCRIPTED_ENV_SLOW="1.5")
    assert proc.returncode == 75, proc.stderr
    assert "calibrate-sandboxes: MAX_COST=0.00005: within it; the ladder stops before a level whose estimate, with " \
           "what the levels before it spent, would pass it" in stderr_lines(proc)
    stop = [line for line in stderr_lines(proc) if "stopped before level 2" in line]
    assert len(stop) == 1 and stop[0].endswith("would pass MAX_COST=0.00005"), stderr_lines(proc)
    assert [r["job"] for r in tree.executed()] == [f"{JOB}-sandbox-cal-1-n1"] * 2
    assert sorted(p.name for p in (tree.root / "jobs").iterdir()) == [f"{JOB}-sandbox-cal-1-n1"]
    doc = json.loads(tree.curve.read_text())
    assert doc["stopped"] == "MAX_COST=0.00005: stopped before level 2"
    assert [(lv["level"], lv["trials"], lv["sandbox_errors"]) for lv in doc["levels"]] == [(1, 2, 0)]
    assert doc["spent_usd"] > 0.00005 - 2 / 3600 * 0.04


@pytest.mark.e2e
def test_a_level_that_runs_nothing_ends_the_ladder_and_an_earlier_curve_is_left_as_it_was(tmp_path):
    tree = Tree(tmp_path, LADDER_PLAN)
    tree.curve.parent.mkdir(parents=True)
    tree.curve.write_text("an earlier ladder's record\n")
    proc = tree.calibrate(DATASET_PATH="no-such-dataset")
    assert proc.returncode == 1
    assert stderr_lines(proc)[-2:] == [
        f"calibrate-sandboxes: nothing to record: no level with a trial at one or more trials at once; {tree.curve} is "
        f"left as it was",
        "calibrate-sandboxes: harbor exited 1 at level 1: the levels after it were not run"]
    assert tree.curve.read_text() == "an earlier ladder's record\n" and tree.executed() == []
    assert not (tree.root / "jobs" / f"{JOB}-sandbox-cal-1-n2").exists()


@pytest.mark.e2e
def test_an_interrupt_mid_level_records_what_was_measured_and_runs_no_further_level(tmp_path):
    """Ctrl-C (SIGINT to the verb's process group) while level 2's first trial hangs in its sandbox's start."""
    tree = Tree(tmp_path, {"t-apt": ["pass", "hang"]})
    out = tmp_path / "stderr.txt"
    with out.open("w") as err:
        proc = subprocess.Popen([str(tree.root / "scripts" / "calibrate-sandboxes.sh")], cwd=tree.root, stdout=err,
                                stderr=err, stdin=subprocess.DEVNULL, start_new_session=True,
                                env=tree.env(SANDBOX_LEVELS="1 2 3", SANDBOX_LEVEL_TASKS="3", STOP_GRACE="5"))
        try:
            deadline = time.monotonic() + 300
            while not any(r["behaviour"] == "hang" for r in tree.executed()):
                assert proc.poll() is None and time.monotonic() < deadline, out.read_text()
                time.sleep(0.1)
            os.killpg(proc.pid, signal.SIGINT)
            rc = proc.wait(timeout=300)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    lines = [line for line in out.read_text().splitlines() if line.startswith("calibrate-sandboxes:")]
    assert rc == 1 and lines[-1] == "calibrate-sandboxes: harbor exited 130 at level 2: the levels after it were not " \
                                    "run; those measured are recorded (above)", out.read_text()
    doc = json.loads(tree.curve.read_text())
    assert doc["stopped"] == "harbor exited 130 at level 2"
    assert [(lv["level"], lv["trials"], lv["sandbox_errors"]) for lv in doc["levels"]][0] == (1, 3, 0)
    assert not (tree.root / "jobs" / f"{JOB}-sandbox-cal-1-n3").exists()
    assert {r["job"] for r in tree.executed()} == {f"{JOB}-sandbox-cal-1-n1", f"{JOB}-sandbox-cal-1-n2"}


def test_the_ladder_holds_the_run_s_lock_and_refuses_while_another_verb_does(tmp_path):
    tree = Tree(tmp_path, LADDER_PLAN)
    lock = tree.root / "state" / RUN / "lock"
    lock.parent.mkdir(parents=True)
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as another verb of the run holds it
        proc = tree.calibrate()
    assert proc.returncode == 1
    assert stderr_lines(proc)[-1].startswith(f"calibrate-sandboxes: run '{RUN}' is busy: ")
    assert not (tree.root / "jobs").exists() and tree.executed() == [] and not tree.curve.exists()


@pytest.mark.e2e
def test_one_ladder_per_namespace_another_run_s_is_named_and_nothing_runs(tmp_path):
    tree = Tree(tmp_path, LADDER_PLAN)
    lock = tree.root / "state" / "namespaces" / "alice" / "calibrate.lock"
    lock.parent.mkdir(parents=True)
    (lock.parent / "calibrate.lock.json").write_text('{"run": "other-run", "pid": 4242, "since": "2026-12-07T06:00:00Z"}\n')
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as another run's ladder in namespace alice holds it
        proc = tree.calibrate()
    assert proc.returncode == 1
    assert stderr_lines(proc)[-1] == (
        "calibrate-sandboxes: namespace alice is being calibrated already by run other-run (pid 4242, since "
        "2026-12-07T06:00:00Z): two ladders at once would each measure the other's load. Wait for it to end, then "
        "run this again. Nothing was run.")
    assert not (tree.root / "jobs").exists() and tree.executed() == [] and not tree.curve.exists()
    # Once it is free, the ladder takes it and names itself the holder.
    proc = tree.calibrate(SANDBOX_LEVELS="1", SANDBOX_LEVEL_TASKS="1")
    assert proc.returncode == 0, proc.stderr
    holder = json.loads((lock.parent / "calibrate.lock.json").read_text())
    assert (holder["run"], holder["pid"] > 0) == (RUN, True)


def test_a_ladder_whose_estimate_passes_max_cost_is_refused_and_nothing_is_written(tmp_path):
    tree = Tree(tmp_path, LADDER_PLAN)
    before = tree.listing()
    proc = tree.calibrate(SANDBOX_TRIAL_SECS="3600", MAX_COST="0.01")
    assert proc.returncode == 1
    assert stderr_lines(proc)[-1] == (
        "calibrate-sandboxes: the ladder may cost $1.08, above MAX_COST=0.01: nothing was started. Measure fewer levels "
        "(SANDBOX_LEVELS) or trials (SANDBOX_LEVEL_TASKS), price a trial at the oracle's real length "
        "(SANDBOX_TRIAL_SECS), or raise MAX_COST")
    assert tree.listing() == before


def dry_run(tree: Tree, *settings: str) -> subprocess.CompletedProcess:
    """make calibrate-sandboxes through the Makefile, its settings on make's command line."""
    env = {k: v for k, v in tree.env().items() if k != "RUN"}
    return subprocess.run(["make", "-s", "calibrate-sandboxes", f"RUN={RUN}", "DRY_RUN=1", *settings], cwd=tree.root,
                          env=env, capture_output=True, text=True, timeout=300)


def test_a_dry_run_prints_the_ladder_its_cost_and_every_harbor_command_as_run_and_writes_nothing(tmp_path):
    tree = Tree(tmp_path, LADDER_PLAN)
    (tree.root / "jobs" / f"{JOB}-sandbox-cal-4-n8").mkdir(parents=True)  # an earlier ladder: the next is 5
    before = tree.listing()
    proc = dry_run(tree)
    assert proc.returncode == 0, proc.stderr
    assert tree.listing() == before
    commands = proc.stdout.splitlines()
    assert commands == [
        f'HF_TOKEN="$(hf auth token)" harbor run --agent oracle --path dataset --n-tasks 9 --env scripted_env:ScriptedEnv '
        f'--agent-timeout-multiplier 1 --jobs-dir jobs --job-name {JOB}-sandbox-cal-5-n{n} --n-concurrent {n} -y'
        for n in (1, 2, 3)]
    assert stderr_lines(proc)[1] == (
        "calibrate-sandboxes: cost: at most $0.02 ($0.006 a level): 27 trials × 60 s (SANDBOX_TRIAL_SECS) × $0.04/h "
        "(cpu-upgrade $0.03/h + its exposed port $0.01/h (env/flavor-prices.tsv))")
    assert stderr_lines(proc)[-1].endswith("Nothing was run or written (DRY_RUN=1)")
    # The real harbor resolves each printed command (--print-config writes nothing either).
    for n, line in zip((1, 2, 3), commands):
        argv = shlex.split(line)[1:] + ["--print-config"]
        resolved = subprocess.run([str(REPO / ".venv/bin" / argv[0]), *argv[1:]], cwd=tree.root, env=tree.env(),
                                  capture_output=True, text=True, timeout=120)
        assert resolved.returncode == 0, resolved.stderr
        config = json.loads(resolved.stdout)
        assert (config["n_concurrent_trials"], config["agents"][0]["name"], config["datasets"][0]["n_tasks"]) == (n, "oracle", 9)
    assert tree.listing() == before


def test_on_hf_sandbox_a_level_runs_on_the_run_s_flavor_idle_timeout_and_namespace(tmp_path):
    tree = Tree(tmp_path, LADDER_PLAN)
    proc = dry_run(tree, "ENV_TYPE=hf-sandbox", "SANDBOX_LEVELS=4", "SANDBOX_LEVEL_TASKS=4", "SANDBOX_TRIAL_SECS=",
                   "MAX_COST=1", "AGENT_TIMEOUT_MULTIPLIER=4", "REASONING_EFFORT=high")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        'HF_TOKEN="$(hf auth token)" harbor run --agent oracle --path dataset --n-tasks 4 --env hf-sandbox '
        '--ek flavor=cpu-upgrade --ek job_timeout=2h --ek namespace=alice --agent-timeout-multiplier 4 --jobs-dir jobs '
        f'--job-name {JOB}-sandbox-cal-1-n4 --n-concurrent 4 -y']
    # 4 trials at the oracle's longest: 900 s × 4 + 120 s = 62 min each, $0.04/h: $0.17.
    assert stderr_lines(proc)[1:3] == [
        "calibrate-sandboxes: cost: at most $0.17 ($0.17 a level): 4 trials × 62 min (the oracle's longest: "
        "AGENT_TIMEOUT_ESTIMATE 900 s × 4 + 120 s of sandbox start; SANDBOX_TRIAL_SECS sets it) × $0.04/h (cpu-upgrade "
        "$0.03/h + its exposed port $0.01/h (env/flavor-prices.tsv))",
        "calibrate-sandboxes: MAX_COST=1: within it; the ladder stops before a level whose estimate, with what the "
        "levels before it spent, would pass it"]


@pytest.mark.parametrize("settings, message", [
    (("SANDBOX_LEVELS=1 x",), "setting SANDBOX_LEVELS must be whole numbers from 1 to 1000 (trials at once), got 'x' "
                              "(run 'cal-test')"),
    (("SANDBOX_LEVELS=",), "setting SANDBOX_LEVELS is empty: give the trials at once to measure, e.g. "
                           "SANDBOX_LEVELS=\"1 3 6 8\" (run 'cal-test')"),
    (("SANDBOX_LEVELS=2 12",), "setting SANDBOX_LEVEL_TASKS (9) must be at least the largest level of SANDBOX_LEVELS "
                               "(12): a level runs that many trials at once only with as many to run (run 'cal-test')"),
    (("SANDBOX_LEVEL_TASKS=0",), "setting SANDBOX_LEVEL_TASKS must be a whole number from 1 to 1000, got '0' "
                                 "(run 'cal-test')"),
    (("SANDBOX_TRIAL_SECS=-1",), "setting SANDBOX_TRIAL_SECS must be a whole number from 1 to 604800, or empty, got "
                                 "'-1' (run 'cal-test')"),
])
def test_a_bad_setting_is_one_line_and_nothing_is_written(tmp_path, settings, message):
    tree = Tree(tmp_path, LADDER_PLAN)
    before = tree.listing()
    proc = dry_run(tree, *settings)
    assert proc.returncode != 0 and proc.stdout == ""
    # One line in the verb's voice (then make's own about the recipe's exit).
    assert proc.stderr.splitlines()[0] == f"calibrate-sandboxes: {message}", proc.stderr
    assert len(proc.stderr.splitlines()) == 2
    # make[N] when the tests themselves run under make (make test)
    assert re.fullmatch(r"make(\[\d+\])?: \*\*\* \[Makefile:\d+: calibrate-sandboxes\] Error 1", proc.stderr.splitlines()[1])
    assert tree.listing() == before


def test_the_settings_are_declared_with_their_types():
    catalogue = run_settings.catalogue()
    assert {n: (catalogue[n].default, catalogue[n].type.spec) for n in
            ("SANDBOX_LEVELS", "SANDBOX_LEVEL_TASKS", "SANDBOX_TRIAL_SECS")} == {
        "SANDBOX_LEVELS": ("1 3 6 8", "words"), "SANDBOX_LEVEL_TASKS": ("8", "int 1..1000"),
        "SANDBOX_TRIAL_SECS": ("", "int? 1..604800")}


def test_each_ladder_is_new_jobs_numbered_after_the_last(tmp_path):
    assert sandbox_cal.next_ladder(tmp_path / "none", "j") == 1
    for name in ("j-sandbox-cal-1-n1", "j-sandbox-cal-7-n3", "j-sandbox-cal-x-n1", "k-sandbox-cal-9-n1", "j",
                 "j-retry-1", "j-sandbox-cal-8"):
        (tmp_path / name).mkdir()
    assert sandbox_cal.next_ladder(tmp_path, "j") == 8
    assert tally_jobs.run_job_dirs(tmp_path, "j") == [tmp_path / "j", tmp_path / "j-retry-1"]


# --------------------------------------------------------------------------- the curve make plan fits


def curve_doc(*levels: tuple[int, int, int], **over) -> dict:
    doc = {"kind": "sandbox-curve", "version": 1, "measured_at": "2026-12-07T02:30:00Z", "run": "r",
           "namespace": "default", "env_type": "hf-sandbox", "sandbox_flavor": "cpu-upgrade",
           "levels": [{"at_once": c, "trials": t, "sandbox_errors": e} for c, t, e in levels]}
    return doc | over


def plan_with(path: Path | None) -> dict:
    args = ["--json"] + (["--sandbox-curve", str(path)] if path else [])
    result = CliRunner().invoke(plan.cli, args, env={"TB_SETTINGS": tb_settings(DATASET_TASKS=3, PLAN_REPS=2)})
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_the_fit_is_the_reference_s_form_with_limits_for_few_points_no_errors_and_dips():
    fit = lambda *levels: sandbox_curve.fit(sandbox_curve.parse(curve_doc(*levels), "f"))  # noqa: E731
    # No errors is not 0%: (0 + 1/2) / (8 + 1). A dip at 8 is read as noise: the running maximum.
    curve = fit((1, 8, 0), (3, 8, 1), (6, 8, 3), (8, 8, 2))
    assert curve.at_once == (1.0, 3.0, 6.0, 8.0)
    assert [round(r, 4) for r in curve.rates] == [0.0556, 0.1667, 0.3889, 0.3889]
    assert float(curve(2)) == pytest.approx((0.0556 + 0.1667) / 2, abs=1e-4)  # piecewise-linear
    assert float(curve(64)) == curve.rates[-1] and float(curve(0.5)) == curve.rates[0]  # flat outside
    # One point below 8: the reference's 70% at 8 above it; a top rate above 70% raises that point.
    assert fit((2, 9, 0)).at_once == (2.0, 8.0) and fit((2, 9, 0)).rates == (0.05, 0.7)
    assert fit((3, 4, 4)).rates == (0.9, 0.9)
    # Every error at the top of a ladder past 8: below 100%, flat above it.
    assert fit((10, 4, 4)).rates == (0.9,)
    # Two levels that ran as many at once (a dataset of 6 tasks at 8 and 10) are one: 3 of 12.
    assert fit((1, 6, 0), (6, 6, 1), (6, 6, 2)).rates == (0.5 / 7, 3.5 / 13, 0.7)


def test_the_run_s_own_job_dirs_add_their_point_and_win_at_their_load():
    measured = sandbox_curve.parse(curve_doc((1, 9, 0), (3, 9, 1), (8, 9, 5)), "f")
    own = plan_evidence.reference("Qwen/Qwen3.8-27B-FP8")
    assert sandbox_curve.fit(measured, own).rates == sandbox_curve.fit(measured).rates  # the reference is no own point
    own.reference, own.sides, own.finished = None, {"sandbox": 3, "server": 0, "interrupted": 0}, 10
    curve = sandbox_curve.fit(measured, own)  # the run's own 30% at 3 wins over the ladder's 15%
    assert curve.at_once == (1.0, 3.0, 8.0) and [round(r, 4) for r in curve.rates] == [0.05, 0.3, 0.55]


def test_make_plan_uses_a_measured_curve_and_says_so_else_the_reference_s_anecdotes(tmp_path):
    path = tmp_path / "sandbox-curve.json"
    path.write_text(json.dumps(curve_doc((1, 8, 0), (3, 8, 1), (6, 8, 3), (8, 8, 2))))
    doc = plan_with(path)
    assert doc["infra_curve"]["at_once"] == [1, 3, 6, 8] and doc["infra_curve"]["rates"] == [0.0556, 0.1667, 0.3889, 0.3889]
    assert doc["sandbox_budget"]["line"] == (
        f"sandbox budget: measured by make calibrate-sandboxes on 2026-12-07: 0.0% at 1, 12.5% at 3, 37.5% at 6, "
        f"25.0% at 8 (namespace default, cpu-upgrade, run r; {path})")
    assert doc["evidence"]["notes"] == []
    table = CliRunner().invoke(plan.cli, ["--sandbox-curve", str(path)],
                               env={"TB_SETTINGS": tb_settings(DATASET_TASKS=3, PLAN_REPS=2)}).output
    assert f"- {doc['sandbox_budget']['line']}" in table.splitlines()
    # make print's and make reproduce's estimate (the run's own row, --own) says it too.
    own = CliRunner().invoke(plan.cli, ["--sandbox-curve", str(path), "--own", "1", "6"],
                             env={"TB_SETTINGS": tb_settings(DATASET_TASKS=3, PLAN_REPS=2)}).output
    assert "; its sandboxes' infra errors as make calibrate-sandboxes measured them on 2026-12-07. 6 trials at once " \
           "is past the 3 the reference saw work: " in own and own.endswith("this plan reads 39% infra errors at 6\n")
    reference = plan_with(None)
    assert reference["sandbox_budget"] == {
        "source": "reference", "line": "sandbox budget: the reference's anecdotes (6.7% at 3, about 70% at 8; "
                                       "docs/reference-runs.md): make calibrate-sandboxes measures this namespace's"}
    assert plan_with(tmp_path / "missing.json") == reference


BAD_CURVES = {
    "not JSON": "{not json",
    "another kind": json.dumps(curve_doc((1, 8, 0), kind="calibration")),
    "another version": json.dumps(curve_doc((1, 8, 0), version=2)),
    "more errors than trials": json.dumps(curve_doc((1, 8, 9))),
    "a NaN count": json.dumps(curve_doc((1, 8, 0))).replace('"trials": 8', '"trials": NaN'),
    "a fraction": json.dumps(curve_doc((1, 8.5, 0))),
    "a negative level": json.dumps(curve_doc((-1, 8, 0))),
    "a huge level": json.dumps(curve_doc((10 ** 9, 8, 0))),
    "no trial": json.dumps(curve_doc((1, 0, 0))),
    "no level": json.dumps(curve_doc()),
    "too many levels": json.dumps(curve_doc(*[(c, 8, 0) for c in range(1, 40)])),
    "a control character": json.dumps(curve_doc((1, 8, 0), run="r\x1b[31m")),
    "a list": "[]",
    "too big": json.dumps(curve_doc((1, 8, 0), pad="x" * sandbox_curve.CURVE_CAP)),
}


@pytest.mark.parametrize("what", BAD_CURVES)
def test_a_bad_curve_file_is_reported_and_the_reference_used(tmp_path, what):
    path = tmp_path / "sandbox-curve.json"
    path.write_text(BAD_CURVES[what])
    doc = plan_with(path)
    assert doc["sandbox_budget"]["source"] == "reference" and doc["infra_curve"]["at_once"] == [3, 8]
    [note] = doc["evidence"]["notes"]
    assert note.startswith(f"the sandbox curve {path} is not used: ") and note.endswith(
        "; the reference's anecdotes are (run make calibrate-sandboxes again, or remove the file)"), note


def test_a_curve_of_other_sandboxes_or_a_path_that_is_no_file_is_not_used(tmp_path):
    path = tmp_path / "sandbox-curve.json"
    path.write_text(json.dumps(curve_doc((1, 8, 0), sandbox_flavor="cpu-basic")))
    doc = plan_with(path)
    assert doc["sandbox_budget"]["source"] == "reference"
    assert doc["evidence"]["notes"] == [
        f"the sandbox curve {path} is not used: it was measured on hf-sandbox (cpu-basic), and this run's sandboxes "
        f"are hf-sandbox (cpu-upgrade); the reference's anecdotes are (make calibrate-sandboxes measures this one)"]
    for odd in (tmp_path, Path("/dev/zero")):
        doc = plan_with(odd)
        assert doc["sandbox_budget"]["source"] == "reference" and len(doc["evidence"]["notes"]) == 1
