"""Mop-up of a k-attempt run (N_ATTEMPTS > 1, harbor's -k): it fills attempt slots, never re-rolls.

Per task mop-up runs exactly k minus its settled trials (docs/design.md decision 13): in
place when harbor's resume would run exactly those, else one retry job per distinct missing
count m, `-k m` with that group's tasks.

The plan tests read job dirs written with harbor 0.25's own models (tests/fixtures/harbor_jobs.py)
for k = 5, with infra errors in some attempts, crashed (unfinished) attempts, a retry job, a
manual verdict and a task that never started; every expected figure is counted here from
the attempt lists below, never by calling tools/results/slots.py or the tally.

The end-to-end tests run the real `harbor run -k 5` and `harbor job resume` on
tests/datasets/mopup with tests/harbor_env/scripted_env.py (as tests/test_mopup.py does),
and read what harbor executed from the scripted environment's log.

What they rely on in harbor 0.25 (harbor/job_plan.py JobPlan.build_trial_configs and
harbor/job.py Job._init_remaining_trial_configs): a job with -k K plans K equal
TrialConfigs per task; on resume every finished trial left in the job takes one of them,
so harbor runs K minus the trials left. test_resume_in_place_runs_exactly_the_missing_attempts
shows it with the real harbor: the unsettled trial dirs leave the job, the settled ones stay,
and each task runs exactly the attempts it lacks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.fixtures.harbor_jobs import TrialSpec, make_dataset, trial_name, write_job
from tests.test_mopup import JOB, MODEL, RUN_FILE, FakeServer, Tree, report_line, sha256
from tests.test_tally_slots import attempts

assert report_line  # a fixture, used by name
REPO = Path(__file__).resolve().parents[1]
TOOLS = REPO / "tools"
K = 5
S = TrialSpec
P, F = 1.0, 0.0
SETTLED = (P, F, "timeout")  # what mop-up never re-runs

# The run's attempts, oldest first: "infra" a SandboxError, "crash" no result.json.
MAIN = {
    "a": [P, P, P, P, P],                      # complete: nothing to run
    "b": [P, F, "infra", F, P],                # + an infra attempt in the retry job
    "c": [F, F, "crash", F, F],                # a crashed attempt
    "d": ["infra"] * 5,                        # nothing settled
    "e": [P, "infra", "crash", "infra", P],    # + a failed attempt in the retry job
    "f": ["timeout", "timeout", P, P, P],      # a genuine limit is settled: nothing to run
    "g": ["infra"] * 5,                        # a manual verdict: never retried
    "h": [P, P, "infra"],                      # only three attempts started
}
RETRY = {"b": ["infra"], "e": [F]}
NEVER_STARTED = ["n"]                          # in the dataset, no trial dir anywhere
VERDICTS = "verdicts:\n  g:\n    outcome: errored\n    reason: SandboxError on every attempt; accepted\n"


def specs(plan: dict, base: int = 0) -> list[TrialSpec]:
    """Every task's attempts, as the tally's own slot tests write them."""
    return [spec for task, plan_of_task in plan.items() for spec in attempts(task, plan_of_task, base=base)]


def expected_missing() -> dict[str, int]:
    """Per task, k minus its settled attempts over both jobs; verdict tasks and complete ones left out."""
    out = {}
    for task in sorted(set(MAIN) | set(RETRY) | set(NEVER_STARTED)):
        if task == "g":
            continue
        attempts = MAIN.get(task, []) + RETRY.get(task, [])
        settled = sum(1 for a in attempts if a in SETTLED)
        if K - settled > 0:
            out[task] = K - settled
    return out


def unsettled_dirs(jobs: Path, task: str) -> list[str]:
    dirs = []
    for job, plan in (("fx5", MAIN), ("fx5-retry-1", RETRY)):
        dirs += [str(jobs / job / trial_name(task, job, i)) for i, a in enumerate(plan.get(task, []))
                 if a not in SETTLED]
    return dirs


@pytest.fixture
def k5(tmp_path):
    jobs, ds = tmp_path / "jobs", tmp_path / "dataset"
    make_dataset(ds, NEVER_STARTED)
    write_job(jobs, "fx5", specs(MAIN), dataset=ds, n_attempts=K, multiplier=1.0)
    write_job(jobs, "fx5-retry-1", specs(RETRY, base=1000), dataset=ds, scoped=True, multiplier=1.0)
    (tmp_path / "verdicts.yaml").write_text(VERDICTS)
    return tmp_path


def tool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "RUN"}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def plan_k5(root: Path, *extra: str) -> tuple[dict, str]:
    current = root / "current-config.json"
    current.write_text((root / "jobs" / "fx5" / "config.json").read_text())
    proc = tool(str(TOOLS / "mopup" / "mopup.py"), "plan", "--jobs-dir", "jobs", "--job-name", "fx5", "--run", "fx5",
                "--state-dir", "state/fx5", "--n-concurrent", "3", "--current-config", str(current),
                "--verdicts", "verdicts.yaml", "--out", "plan.json", *extra, cwd=root)
    assert proc.returncode == 0, proc.stderr
    return json.loads((root / "plan.json").read_text()), proc.stderr


def test_the_plan_runs_exactly_the_missing_attempts_grouped_by_count(k5):
    plan, text = plan_k5(k5)
    missing = expected_missing()
    assert missing == {"b": 1, "c": 1, "d": 5, "e": 2, "h": 3, "n": 5}  # the fixture says what it tests
    assert plan["n_attempts"] == K
    assert plan["missing_attempts"] == sum(missing.values())
    assert {t["task"]: t["missing"] for t in plan["tasks"]} == missing
    jobs = k5 / "jobs"
    for t in plan["tasks"]:
        assert sorted(t["trial_dirs"]) == sorted(unsettled_dirs(jobs, t["task"])), t["task"]
    assert [t["note"] for t in plan["tasks"] if t["task"] == "n"] == ["never started"]
    # Written without lock.json, the job cannot be resumed: retry jobs, one per missing count,
    # numbered after the run's existing fx5-retry-1.
    assert plan["mode"] == "retry-job"
    groups: dict[int, list[str]] = {}
    for task, m in sorted(missing.items()):
        groups.setdefault(m, []).append(task)
    expected_jobs = [{"job_name": f"fx5-retry-{2 + i}", "attempts": m, "tasks": groups[m]}
                     for i, m in enumerate(sorted(groups))]
    assert plan["retry_jobs"] == expected_jobs
    assert plan["retry_job_name"] == "fx5-retry-2"
    assert plan["archive"] == [] and plan["resume_argv"] is None
    for job in expected_jobs:
        assert f"{jobs / job['job_name']}/  -k {job['attempts']}: {', '.join(job['tasks'])}" in text
    assert f"plan: run {sum(missing.values())} missing attempt(s) of {len(missing)} task(s) of job fx5" in text
    assert "  g " not in text and "  a " not in text


def test_reproduce_targets_is_the_plans_selection(k5):
    proc = tool(str(TOOLS / "run" / "reproduce.py"), "targets", "--jobs-dir", "jobs", "--job-name", "fx5",
                "--verdicts", "verdicts.yaml", cwd=k5)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == sorted(expected_missing())


def test_verdicts_and_full_slots_leave_only_the_never_started_task(k5):
    # A verdict decides every slot of a task with trials; for one with none, make tally
    # ignores it (and says so), so mop-up still runs all k attempts of that task.
    lines = "".join(f"  {t}:\n    outcome: errored\n    reason: accepted\n" for t in [*expected_missing(), "g"])
    (k5 / "verdicts.yaml").write_text("verdicts:\n" + lines)
    plan, _ = plan_k5(k5)
    assert [(t["task"], t["missing"]) for t in plan["tasks"]] == [("n", K)]
    assert plan["retry_jobs"] == [{"job_name": "fx5-retry-2", "attempts": K, "tasks": ["n"]}]
    (k5 / "dataset" / "n").rename(k5 / "n-elsewhere")  # now every task of the job is decided
    plan, text = plan_k5(k5)
    assert plan["mode"] == "none" and plan["tasks"] == [] and plan["missing_attempts"] == 0
    assert "every task's 5 attempt slots are settled (or decided by a verdict)" in text


def test_a_forced_resume_names_why_it_cannot_run_exactly_the_missing_attempts(k5):
    current = k5 / "current-config.json"
    current.write_text((k5 / "jobs" / "fx5" / "config.json").read_text())
    proc = tool(str(TOOLS / "mopup" / "mopup.py"), "plan", "--jobs-dir", "jobs", "--job-name", "fx5", "--run", "fx5",
                "--state-dir", "state/fx5", "--n-concurrent", "3", "--current-config", str(current),
                "--mode", "resume", "--out", "plan.json", cwd=k5)
    assert proc.returncode == 1
    assert "lock.json is missing" in proc.stderr
    assert not (k5 / "plan.json").exists() and not (k5 / "state").exists()


def test_a_full_tasks_crashed_extra_trial_leaves_the_job_before_an_in_place_resume(tmp_path):
    # c has its 2 slots settled and a third trial that crashed (no result.json): nothing of c is
    # to run, but harbor's resume deletes a trial dir without result.json, so it goes to the
    # archive first, with b's infra attempt and its unreadable one (unsettled, both); the resume
    # then runs b's missing attempt alone.
    from tools.mopup import mopup_plan
    jobs = tmp_path / "jobs"
    job = write_job(jobs, "fx2", specs({"a": [P, P], "b": [P, "infra"], "c": [P, P, "crash"]})
                    + [TrialSpec("b", raw_result='{"task_name": "b", "trunc', attempt=2)],
                    n_attempts=2, multiplier=1.0, lock=True)
    current = json.loads((job / "config.json").read_text())
    plan = mopup_plan.build_plan(jobs, "fx2", "auto", 3, current, "fx2")
    assert [(t["task"], t["missing"]) for t in plan["tasks"]] == [("b", 1)]
    assert (plan["mode"], plan["why_not_resume"]) == ("resume", [])
    assert sorted((a["src"], a["task"], a["finished"]) for a in plan["archive"]) == sorted([
        (str(job / trial_name("b", "fx2", 1)), "b", True), (str(job / trial_name("b", "fx2", 2)), "b", True),
        (str(job / trial_name("c", "fx2", 2)), "c", False)])


# --- end to end: the real harbor run -k 5 ------------------------------------------------------

TASKS = ["t-apt", "t-cancel", "t-pass", "t-readtimeout", "t-sandbox"]
# Attempt by attempt (the last entry repeats): bench runs the first five.
SCRIPT = {
    "t-pass": ["pass"],
    "t-apt": ["pass", "ReadTimeout", "pass", "fail", "pass", "pass"],
    "t-cancel": ["ReadTimeout", "SandboxError", "pass", "pass", "fail", "pass"],
    "t-sandbox": ["SandboxError", "pass", "ConnectError", "fail", "pass", "pass"],
    "t-readtimeout": ["SandboxError", "SandboxError", "ReadTimeout", "SandboxError", "ConnectError", "pass"],
}
INFRA_BEHAVIOURS = {"ReadTimeout", "SandboxError", "ConnectError"}


def bench_missing() -> dict[str, int]:
    return {t: sum(1 for b in SCRIPT[t][:K] if b in INFRA_BEHAVIOURS) for t in TASKS}


@pytest.fixture
def server(tmp_path):
    s = FakeServer(tmp_path, MODEL)
    yield s
    s.stop()


def k5_tree(tmp_path: Path, server) -> Tree:
    tree = Tree(tmp_path, SCRIPT, server)
    (tree.root / "runs" / "mopup-test.env").write_text(
        RUN_FILE + f"N_ATTEMPTS={K}\nTASKS='{' '.join(TASKS)}'\n")
    tree.bench()
    bench = Counter(r["task"] for r in tree.executed("bench"))
    assert bench == {t: K for t in TASKS}
    return tree


def settled_slots(tree: Tree) -> dict[str, list]:
    report = tree.tally()
    assert report["n_attempts"] == K
    return {e["task"]: e["slot_trials"] for e in report["per_task"]}


def assert_filled(tree: Tree, before_dirs: set[Path], hashes: dict[Path, str], report_line) -> None:
    """Every task has k settled slots; no settled trial re-ran or changed; no trial dir lost."""
    slots = settled_slots(tree)
    assert sorted(slots) == TASKS
    assert all(None not in s and len(s) == K for s in slots.values()), slots
    ran = Counter(r["task"] for r in tree.executed("mopup"))
    wasted = sum(max(0, ran[t] - m) for t, m in bench_missing().items())
    report_line(f"wasted work: {wasted} settled trial(s) re-run by mop-up (of {sum(ran.values())} it ran)")
    assert wasted == 0
    for path, digest in hashes.items():
        assert sha256(path / "result.json") == digest
    gone = {str(p) for p in before_dirs - tree.trial_dirs()}
    assert gone == tree.archived()
    for record in tree.manifest():
        if record.get("event") == "archive" and record.get("state") == "moved":
            assert Path(record["dest"]).is_dir()


def settled_hashes(tree: Tree) -> dict[Path, str]:
    out = {}
    for path, result in tree.results().items():
        if (result.get("exception_info") or {}).get("exception_type") not in INFRA_BEHAVIOURS:
            out[path] = sha256(path / "result.json")
    return out


@pytest.mark.e2e
def test_retry_jobs_run_exactly_the_missing_attempts(tmp_path, server, report_line):
    tree = k5_tree(tmp_path, server)
    missing = {t: m for t, m in bench_missing().items() if m}
    assert missing == {"t-apt": 1, "t-cancel": 2, "t-readtimeout": 5, "t-sandbox": 2}
    before_dirs, hashes = tree.trial_dirs(), settled_hashes(tree)

    proc = tree.mopup(MOPUP_MODE="retry-job")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    groups: dict[int, list[str]] = {}
    for task, m in sorted(missing.items()):
        groups.setdefault(m, []).append(task)
    names = {m: f"{JOB}-retry-{i + 1}" for i, m in enumerate(sorted(groups))}
    # Harbor ran each group's tasks m times in that group's job, and nothing else.
    ran = Counter((r["job"], r["task"]) for r in tree.executed("mopup"))
    assert ran == {(names[m], t): m for m, tasks in groups.items() for t in tasks}
    for m, name in names.items():
        config = json.loads((tree.root / "jobs" / name / "config.json").read_text())
        assert config.get("n_attempts", 1) == m
        assert sorted(config["datasets"][0]["task_names"]) == groups[m]
        assert f"--job-name {name}" in out
    assert f"re-ran {sum(missing.values())} of {sum(missing.values())} planned trials" in out
    mopup_lines = [r for r in tree.manifest() if r.get("event") == "mopup" and r.get("role") == "mopup"]
    assert [(r["retry_job_name"], r["attempts"], r["tasks"]) for r in mopup_lines] == \
        [(names[m], m, groups[m]) for m in sorted(groups)]
    assert tree.archived() == set()
    assert_filled(tree, before_dirs, hashes, report_line)

    again = tree.mopup()
    assert again.returncode == 0 and "nothing to retry" in again.stderr, again.stderr
    assert sum(ran.values()) == len(tree.executed("mopup"))


@pytest.mark.e2e
def test_resume_in_place_runs_exactly_the_missing_attempts(tmp_path, server, report_line):
    tree = k5_tree(tmp_path, server)
    missing = {t: m for t, m in bench_missing().items() if m}
    before_dirs, hashes = tree.trial_dirs(), settled_hashes(tree)
    infra_dirs = {str(t) for t, r in tree.results().items()
                  if (r.get("exception_info") or {}).get("exception_type") in INFRA_BEHAVIOURS}
    assert len(infra_dirs) == sum(missing.values())

    proc = tree.mopup()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "mechanism: resume the job in place" in out
    assert Counter(r["task"] for r in tree.executed("mopup")) == missing
    assert {r["job"] for r in tree.executed("mopup")} == {JOB}
    # Only the unsettled dirs left the job; the settled ones stayed and filled their slots.
    assert tree.archived() == infra_dirs
    assert f"re-ran {sum(missing.values())} of {sum(missing.values())} planned trials" in out
    assert [p.name for p in tree.job_dirs()] == [JOB]
    assert_filled(tree, before_dirs, hashes, report_line)


@pytest.mark.parametrize("name, why", [
    ("t-sandbox\nt-pass", "a control character or a leading '-': not one task's name"),  # became two arguments
    ("t-\x1b[31m", "a control character or a leading '-': not one task's name"),
    ("-rf", "a control character or a leading '-': not one task's name"),
    ("t-[ab]", "a glob character: it would match more than itself"),
])
def test_a_task_name_harbor_could_not_take_as_one_name_is_refused_and_nothing_changes(tmp_path, name, why):
    from tools.mopup import mopup_plan
    jobs = tmp_path / "jobs"
    write_job(jobs, JOB, [TrialSpec("t-pass", reward=1.0), TrialSpec(name, exc="SandboxError")])
    before = sorted(p.relative_to(jobs) for p in jobs.rglob("*"))
    with pytest.raises(Exception) as caught:
        mopup_plan.what_is_left(jobs, JOB)
    assert f"these task names: {name!r} ({why})." in str(caught.value.message)
    assert sorted(p.relative_to(jobs) for p in jobs.rglob("*")) == before
