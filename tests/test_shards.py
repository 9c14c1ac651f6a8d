"""Sharded runs (N_SHARDS, docs/scaling.md): the split, discovery, the tally and mop-up over
shards, and the sharded bench end to end.

Job dirs for the tally and mop-up tests are written with harbor 0.25's own models
(tests/fixtures/harbor_jobs.py); a shard is a job with --include-task-name for its tasks, as
make bench writes it. The end-to-end tests run the real `harbor run` per shard on
tests/datasets/mopup with tests/harbor_env/scripted_env.py against the fake OpenAI server, and
read what harbor executed from the scripted environment's log.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.fixtures.harbor_jobs import MODEL as MODEL_FIXTURE
from tests.fixtures.harbor_jobs import TrialSpec, make_dataset, write_job
from tests.test_tally_slots import attempts
from tools.run import harbor_guard_job
from tools.mopup import mopup_plan
from tools.run import shards
from tools.results import tally_core
from tools.results import tally_jobs
from tools.results import tally_policy

REPO = Path(__file__).resolve().parents[1]
K = 5
P, F = 1.0, 0.0
# A k = 5 run: each task's attempts, oldest first ("infra" a SandboxError, "crash" no result.json).
RUN = {
    "a": [P, P, P, P, P],
    "b": [P, F, "infra", F, P],
    "c": [F, F, "crash", F, F],
    "d": ["infra"] * 5,
    "e": [P, F, P, F, P],
    "f": [P, P, "infra"],          # only three attempts started
}
SHARD_OF = {"a": 1, "b": 2, "c": 1, "d": 2, "e": 1, "f": 2}
NEVER_STARTED = {"n": 2}         # planned in shard 2, no trial dir anywhere


def specs(tasks: list[str]) -> list[TrialSpec]:
    return [spec for task in tasks for spec in attempts(task, RUN[task])]


# --- discovery ----------------------------------------------------------------------------------


def test_shard_names_and_numbers():
    assert tally_jobs.shard_job_name("run", 3) == "run-shard-3"
    assert tally_jobs.shard_number("run", "run-shard-12") == 12
    assert tally_jobs.retry_number("run", "run-shard-12") == 0  # a shard is the run's first pass
    for other in ("run", "run-shard-", "run-shard-0", "run-shard-x", "run-shard-1a", "run-shard-²", "run-smoke"):
        assert tally_jobs.shard_number("run", other) is None, other
    with pytest.raises(ValueError):
        tally_jobs.shard_job_name("run", 0)


def test_run_job_dirs_lists_shards_in_shard_order_then_retries(tmp_path):
    for name in ("run-shard-10", "run-shard-2", "run-shard-1", "run-retry-1", "run-shard-0", "run-smoke",
                 "other-shard-1", "jobs/run-shard-3"):
        (tmp_path / name).mkdir(parents=True)
    assert [p.relative_to(tmp_path).as_posix() for p in tally_jobs.run_job_dirs(tmp_path, "run")] == [
        "run-shard-1", "run-shard-2", "run-shard-10", "run-retry-1", "jobs/run-shard-3"]
    assert tally_jobs.next_retry_job_name(tmp_path, "run") == "run-retry-2"


# --- the tally and mop-up over shards -----------------------------------------------------------


@pytest.fixture
def one_and_sharded(tmp_path):
    """The same trials as one job dir and as two shards (each scoped to its tasks, k = 5)."""
    ds = make_dataset(tmp_path / "dataset", sorted(RUN) + sorted(NEVER_STARTED))
    one = tmp_path / "one" / "jobs"
    write_job(one, "run", specs(sorted(RUN)), dataset=ds, n_attempts=K, multiplier=1.0)
    sharded = tmp_path / "sharded" / "jobs"
    for i in (1, 2):
        tasks = sorted(t for t, s in {**SHARD_OF, **NEVER_STARTED}.items() if s == i)
        job = write_job(sharded, f"run-shard-{i}", specs([t for t in tasks if t in RUN]), dataset=ds,
                        n_attempts=K, multiplier=1.0, scoped=True)
        # write_job scopes a job to the tasks it writes; a shard plans its whole share.
        cfg = json.loads((job / "config.json").read_text())
        cfg["datasets"][0]["task_names"] = tasks
        (job / "config.json").write_text(json.dumps(cfg, indent=4))
    return one, sharded


def projection(report: dict) -> dict:
    """What a run's tally says, without where the trials are."""
    rows = {row["task"]: (row["outcome"], row["rule"], row["slots_text"], row["passed_attempts"])
            for row in report["per_task"]}
    figures = ("leaderboard", "pass_at_k", "pass_rate", "passed", "failed", "errored", "unfinished", "slots",
               "replicates", "mean_task_pass_fraction", "tasks", "n_attempts", "exceptions")
    return {"rows": rows, **{name: report[name] for name in figures}}


def test_tally_of_shards_equals_the_same_trials_in_one_job(one_and_sharded):
    one, sharded = one_and_sharded
    policy = tally_policy.load_policy()
    whole = tally_core.tally([str(d) for d in tally_jobs.run_job_dirs(one, "run")], policy, {}, run="run")
    split = tally_core.tally([str(d) for d in tally_jobs.run_job_dirs(sharded, "run")], policy, {}, run="run")
    assert [Path(d).name for d in split["job_dirs"]] == ["run-shard-1", "run-shard-2"]
    assert projection(split) == projection(whole)
    assert split["tasks"] == len(RUN) == 6
    assert projection(split)["rows"]["b"] == ("passed", "reward", "✓✗✗✓E", 2)


def test_the_submission_selects_from_shards_what_it_selects_from_one_job(one_and_sharded, tmp_path):
    from tools.hub import submission_rules
    from tools.hub import submission_select

    one, sharded = one_and_sharded

    def selected(jobs: Path) -> tuple:
        sel = submission_select.select_trials([str(d) for d in tally_jobs.run_job_dirs(jobs, "run")])
        outcome = {}
        for job in tally_jobs.run_job_dirs(jobs, "run"):
            for trial in job.iterdir():
                if (trial / "result.json").is_file():
                    outcome[str(trial)] = json.loads((trial / "result.json").read_text())
        kept = sorted((outcome[t]["task_name"], (outcome[t].get("verifier_result") or {}).get("rewards", {}).get("reward"))
                      for t in sel.kept)
        return sel.k, sel.tasks, kept, len(sel.passed), sel.open, len(sel.left_out)

    assert selected(sharded) == selected(one)
    assert selected(sharded)[4] == {"b": 4, "c": 4, "d": 0, "f": 2}  # open slots: settled trials per task
    # The dataset's task list of a sharded run: its kept split, unless that split was of TASKS.
    split = tmp_path / "shards.json"
    split.write_text(json.dumps({"task_source": "DATASET_PATH /d", "shards": [{"tasks": ["a", "c"]}, {"tasks": ["b"]}]}))
    dirs = tally_jobs.run_job_dirs(sharded, "run")
    assert submission_rules.dataset_tasks(dirs, split) == ({"a", "b", "c"}, f"{split} (the shards' split of DATASET_PATH /d)")
    split.write_text(json.dumps({"task_source": "TASKS", "shards": [{"tasks": ["a", "c"]}, {"tasks": ["b"]}]}))
    assert submission_rules.dataset_tasks(dirs, split)[0] is None


def test_mopup_plan_of_a_sharded_run_is_one_retry_job_over_every_shard(one_and_sharded):
    one, sharded = one_and_sharded
    plan = mopup_plan.build_plan(sharded, "run", "auto", 3, {}, "run")
    missing = {t["task"]: t["missing"] for t in plan["tasks"]}
    # k minus the settled attempts, across both shards; "n" was planned by shard 2 and never started.
    assert missing == {"b": 1, "c": 1, "d": 5, "f": 3, "n": 5}
    assert plan["mode"] == "retry-job"
    assert plan["why_not_resume"] == ["the run is sharded (2 first-pass job dirs): one retry job covers every shard"]
    assert plan["retry_jobs"] == [{"job_name": "run-retry-1", "attempts": 1, "tasks": ["b", "c"]},
                                  {"job_name": "run-retry-2", "attempts": 3, "tasks": ["f"]},
                                  {"job_name": "run-retry-3", "attempts": 5, "tasks": ["d", "n"]}]
    assert plan["archive"] == [] and plan["resume_argv"] is None
    assert mopup_plan.what_is_left(sharded, "run").keys() == missing.keys()
    with pytest.raises(Exception, match="MOPUP_MODE=resume, but resuming the job in place cannot work"):
        mopup_plan.build_plan(sharded, "run", "resume", 3, {}, "run")


def test_mopup_runs_the_tasks_of_a_shard_that_never_started(one_and_sharded, tmp_path):
    _, sharded = one_and_sharded
    split = tmp_path / "shards.json"
    split.write_text(json.dumps({"n_shards": 3, "shards": [
        {"index": 1, "job_name": "run-shard-1", "tasks": ["a", "c", "e"]},
        {"index": 2, "job_name": "run-shard-2", "tasks": ["b", "d", "f", "n"]},
        {"index": 3, "job_name": "run-shard-3", "tasks": ["x", "y"]}]}))  # stopped before harbor made its job
    plan = mopup_plan.build_plan(sharded, "run", "auto", 3, {}, "run", split=split)
    missing = {t["task"]: t["missing"] for t in plan["tasks"]}
    assert missing == {"b": 1, "c": 1, "d": 5, "f": 3, "n": 5, "x": 5, "y": 5}
    assert [t["note"] for t in plan["tasks"] if t["task"] in ("x", "y")] == ["never started"] * 2
    assert set(mopup_plan.what_is_left(sharded, "run", split=split)) == set(missing)
    assert set(mopup_plan.what_is_left(sharded, "run", split=tmp_path / "missing.json")) == set(missing) - {"x", "y"}


# --- the split ----------------------------------------------------------------------------------


def test_split_is_longest_first_onto_the_lightest_shard():
    # Weights k × mean seconds: g 500, a 400, b 300, c 200, d 100 (k = 1); "e" untimed takes the median 300.
    seconds = {"g": 500.0, "a": 400.0, "b": 300.0, "c": 200.0, "d": 100.0}
    groups, loads, how = shards.split(["a", "b", "c", "d", "e", "g"], 2, 1, seconds)
    # g→1 (500), a→2 (400), b→2 (700), e→1 (800), c→2 (900), d→1 (900)
    assert groups == [["d", "e", "g"], ["a", "b", "c"]]
    assert loads == [900.0, 900.0]
    assert how == "agent times of 5 of 6 tasks from the run's job dirs (the rest at their median)"
    groups, loads, how = shards.split(["a", "b", "c", "d", "e"], 3, 5, {})
    assert groups == [["a", "d"], ["b", "e"], ["c"]]
    assert how == "task count (no trial of the run has finished yet)"


def shards_plan(tmp_path: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / ".venv/bin/python"), "-m", "tools.run.shards", "plan", "--run", "r",
                           "--jobs-dir", str(tmp_path / "jobs"), "--job-name", "r", "--attempts", "5",
                           "--state-dir", str(tmp_path / "state"), *args],
                          cwd=REPO, capture_output=True, text=True, env=env, timeout=120)


def test_plan_keeps_its_split_and_refuses_another_once_shards_ran(tmp_path):
    ds = make_dataset(tmp_path / "dataset", ["t1", "t2", "t3", "t4", "t5"])
    first = shards_plan(tmp_path, "--shards", "2", "--dataset-path", str(ds))
    assert first.returncode == 0, first.stderr
    plan = json.loads(first.stdout)
    assert [s["tasks"] for s in plan["shards"]] == [["t1", "t3", "t5"], ["t2", "t4"]]
    assert [s["job_name"] for s in plan["shards"]] == ["r-shard-1", "r-shard-2"]
    assert plan["task_source"] == f"DATASET_PATH {ds}" and plan["reused"] is False
    kept = json.loads((tmp_path / "state" / "shards.json").read_text())
    assert kept["shards"] == plan["shards"]
    again = json.loads(shards_plan(tmp_path, "--shards", "2", "--dataset-path", str(ds)).stdout)
    assert again["reused"] is True and again["shards"] == plan["shards"]
    (tmp_path / "jobs" / "r-shard-1").mkdir(parents=True)
    other = shards_plan(tmp_path, "--shards", "3", "--dataset-path", str(ds))
    assert other.returncode == 1
    assert "run r was split into 2 shards" in other.stderr and "Keep N_SHARDS=2" in other.stderr
    assert json.loads((tmp_path / "state" / "shards.json").read_text()) == kept  # unchanged


def state_files(tmp_path: Path) -> dict[str, str]:
    state = tmp_path / "state"
    return {p.name: p.read_text() for p in state.iterdir()} if state.is_dir() else {}


def test_a_task_added_to_the_dataset_after_shards_ran_is_refused_with_what_to_do(tmp_path):
    """DATASET_PATH gains a task under the same N_SHARDS: the kept split was compared by its source's
    label, so the bench resumed the old shards and exited 0 having run none of it. Now the tasks are
    compared: refused (each shard's list is frozen in its job's config.json), nothing written."""
    ds = make_dataset(tmp_path / "dataset", ["t1", "t2", "t3", "t4", "t5"])
    assert shards_plan(tmp_path, "--shards", "2", "--dataset-path", str(ds)).returncode == 0
    (tmp_path / "jobs" / "r-shard-1").mkdir(parents=True)
    kept = state_files(tmp_path)
    make_dataset(ds, ["t6"])
    proc = shards_plan(tmp_path, "--shards", "2", "--dataset-path", str(ds))
    assert proc.returncode == 1, proc.stdout
    assert proc.stdout == ""
    assert proc.stderr == (
        f"Error: run r's task list changed since it was split ({tmp_path / 'state' / 'shards.json'}: 5 tasks of "
        f"DATASET_PATH {ds}; now 6 of DATASET_PATH {ds}: added t6, removed none), and 1 shard job dir(s) exist: each "
        f"shard's task list is frozen into its job's config.json, and harbor refuses to resume a job whose config "
        f"changed. Restore the task list the run was split with, or give the changed run a new JOB_NAME; nothing was "
        f"written\n")
    assert state_files(tmp_path) == kept
    # TASKS too: one removed and one added.
    proc = shards_plan(tmp_path, "--shards", "2", *[a for t in ("t1", "t2", "t3", "t4", "t9") for a in ("--task", t)])
    assert proc.returncode == 1
    assert "now 5 of TASKS: added t9, removed t5)" in proc.stderr
    assert state_files(tmp_path) == kept


def test_the_kept_split_is_reused_for_the_same_tasks_wherever_they_are_listed_from(tmp_path):
    """Compared by its tasks, not by its source's label: TASKS naming the dataset's tasks is the same split."""
    ds = make_dataset(tmp_path / "dataset", ["t1", "t2", "t3"])
    first = json.loads(shards_plan(tmp_path, "--shards", "2", "--dataset-path", str(ds)).stdout)
    (tmp_path / "jobs" / "r-shard-2").mkdir(parents=True)
    again = shards_plan(tmp_path, "--shards", "2", "--task", "t3", "--task", "t1", "--task", "t2")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == dict(first, reused=True)


def test_a_changed_task_list_before_any_shard_ran_is_split_again(tmp_path):
    ds = make_dataset(tmp_path / "dataset", ["t1", "t2", "t3"])
    assert shards_plan(tmp_path, "--shards", "2", "--dataset-path", str(ds)).returncode == 0
    make_dataset(ds, ["t4"])
    proc = shards_plan(tmp_path, "--shards", "2", "--dataset-path", str(ds))
    assert proc.returncode == 0, proc.stderr
    assert [s["tasks"] for s in json.loads(proc.stdout)["shards"]] == [["t1", "t3"], ["t2", "t4"]]
    assert json.loads(proc.stdout)["reused"] is False
    assert "shards: run r's task list changed since it was split (3 tasks, now 4) and no shard has run yet: it is split again" in proc.stderr
    assert [s["tasks"] for s in json.loads((tmp_path / "state" / "shards.json").read_text())["shards"]] == [
        ["t1", "t3"], ["t2", "t4"]]


def unsharded_run(tmp_path: Path, model: str = MODEL_FIXTURE) -> Path:
    """Run r benched unsharded: a scored (passed), b scored (failed), c an infra error; k = 1."""
    jobs = tmp_path / "jobs"
    write_job(jobs, "r", [TrialSpec("a", 1.0), TrialSpec("b", 0.0), TrialSpec("c", None, "SandboxError")],
              dataset=tmp_path / "dataset", model=model)
    return jobs


def test_sharding_a_run_that_already_scored_trials_is_refused_saying_why(tmp_path):
    """N_SHARDS on a run benched unsharded: the shards would run every task again, the scored ones
    included. Refused, naming the trials and where they are, with what to do; nothing written."""
    unsharded_run(tmp_path)
    args = ("--shards", "2", *[a for t in "abcd" for a in ("--task", t)])
    for mode in ((), ("--dry-run",), ("--offline",)):
        proc = shards_plan(tmp_path, *args, *mode)
        assert proc.returncode == 1, proc.stdout
        assert proc.stderr == (
            "Error: run r already has 2 settled trial(s) (scored, or a genuine limit) of 2 task(s) that its shard(s) "
            "r-shard-1, r-shard-2 would run again, in r: continue it with make mopup RUN=r (it runs only what each "
            "task lacks), or give the sharded run a new JOB_NAME; nothing was written\n")
        assert not (tmp_path / "state").exists()
        assert sorted(p.name for p in (tmp_path / "jobs").iterdir()) == ["r"]


def test_offline_with_the_task_list_unknown_any_settled_trial_refuses(tmp_path):
    """make print of a registry dataset (not listed offline): every task of the run may be in a shard."""
    unsharded_run(tmp_path)
    proc = shards_plan(tmp_path, "--shards", "2", "--dataset", "org/ds", "--offline")
    assert proc.returncode == 1
    assert "run r already has 2 settled trial(s) (scored, or a genuine limit) of 2 task(s)" in proc.stderr


def test_a_run_with_only_infra_errors_may_be_sharded(tmp_path):
    jobs = tmp_path / "jobs"
    write_job(jobs, "r", [TrialSpec("c", None, "SandboxError")], dataset=tmp_path / "dataset")
    proc = shards_plan(tmp_path, "--shards", "2", "--task", "c", "--task", "d")
    assert proc.returncode == 0, proc.stderr


def test_a_sharded_run_resumes_after_its_retry_jobs_scored_but_never_restarts_a_settled_shard(tmp_path):
    """Every shard ran, and mop-up's retry job settled trials: the bench resumes (nothing refused). A
    shard that never started, whose tasks mop-up has settled since, would run them again: refused."""
    ds = make_dataset(tmp_path / "dataset", ["a", "b", "c", "d"])
    plan = json.loads(shards_plan(tmp_path, "--shards", "2", "--dataset-path", str(ds)).stdout)
    assert [s["tasks"] for s in plan["shards"]] == [["a", "c"], ["b", "d"]]
    jobs = tmp_path / "jobs"
    write_job(jobs, "r-shard-1", [TrialSpec("a", 1.0), TrialSpec("c", None, "SandboxError")], dataset=ds, scoped=True)
    write_job(jobs, "r-retry-1", [TrialSpec("c", 0.0), TrialSpec("b", 1.0)], dataset=ds, scoped=True)
    proc = shards_plan(tmp_path, "--shards", "2", "--dataset-path", str(ds))
    assert proc.returncode == 1
    assert ("run r already has 1 settled trial(s) (scored, or a genuine limit) of 1 task(s) that its shard(s) "
            "r-shard-2 would run again, in r-retry-1:") in proc.stderr
    write_job(jobs, "r-shard-2", [TrialSpec("b", None, "SandboxError")], dataset=ds, scoped=True)
    proc = shards_plan(tmp_path, "--shards", "2", "--dataset-path", str(ds))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["reused"] is True


def test_a_job_dir_of_another_model_is_refused(tmp_path):
    unsharded_run(tmp_path, model="openai/Other/Model-7B")
    proc = shards_plan(tmp_path, "--shards", "2", "--task", "x", "--task", "y", "--model", "Qwen/Qwen3.8-27B-FP8")
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"Error: {tmp_path / 'jobs' / 'r'} ran model 'openai/Other/Model-7B' (its "
                                  f"config.json), not the run's MODEL Qwen/Qwen3.8-27B-FP8: another run's job")
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize("args, message", [
    (("--shards", "4", "--task", "a", "--task", "b"), "N_SHARDS=4 is more than the run's 2 task(s) (TASKS)"),
    (("--shards", "2", "--task", "a", "--task", "-x"), "'-x'"),
    (("--shards", "2", "--task", "a", "--task", "t*"), "'t*'"),
    (("--shards", "2", "--task", "a", "--task", "a"), "names a task twice"),
    (("--shards", "2", "--dataset-repo", "https://huggingface.co/datasets/ns/ds"), "N_SHARDS needs the dataset pinned"),
    (("--shards", "2", "--dataset-repo", "https://github.com/ns/ds", "--dataset-ref", "a" * 40),
     "is not an HF dataset repo"),
])
def test_plan_refuses_bad_input_and_writes_nothing(tmp_path, args, message):
    proc = shards_plan(tmp_path, *args)
    assert proc.returncode == 1
    assert message in proc.stderr
    assert not (tmp_path / "state").exists()


def test_plan_dry_run_and_offline_write_nothing(tmp_path):
    proc = shards_plan(tmp_path, "--shards", "2", "--task", "a", "--task", "b", "--dry-run")
    assert proc.returncode == 0 and json.loads(proc.stdout)["shards"][1]["tasks"] == ["b"]
    proc = shards_plan(tmp_path, "--shards", "2", "--dataset", "org/ds", "--offline")
    assert proc.returncode == 0
    assert [s["tasks"] for s in json.loads(proc.stdout)["shards"]] == [None, None]
    assert not (tmp_path / "state").exists()


def test_plan_lists_an_hf_dataset_at_its_commit_through_the_hub_and_caches_it(tmp_path):
    from tests.test_publish import FakeHub, client_env

    sha = "0123456789abcdef0123456789abcdef01234567"
    tree = tmp_path / "tree"
    make_dataset(tree / "tasks", ["alpha", "beta", "gamma"])
    (tree / "README.md").write_text("not a task\n")
    hub = FakeHub(tmp_path, "--dataset", f"ns/ds@{sha}={tree}")
    env = client_env(tmp_path, hub.endpoint)
    try:
        proc = shards_plan(tmp_path, "--shards", "2", "--dataset-repo", "https://huggingface.co/datasets/ns/ds",
                           "--dataset-ref", sha, env=env)
        assert proc.returncode == 0, proc.stderr
        assert [s["tasks"] for s in json.loads(proc.stdout)["shards"]] == [["alpha", "gamma"], ["beta"]]
        cached = json.loads((tmp_path / "state" / "tasks.json").read_text())
        assert cached["source"] == f"https://huggingface.co/datasets/ns/ds@{sha}"
        assert cached["tasks"] == ["alpha", "beta", "gamma"]
        requests = [r["path"] for r in hub.requests()]
        assert requests == [f"/api/datasets/ns/ds/tree/{sha}"]
        wrong = shards_plan(tmp_path / "other", "--shards", "2", "--dataset-repo",
                            "https://huggingface.co/datasets/ns/ds", "--dataset-ref", "f" * 40, env=env)
        assert wrong.returncode == 1 and "could not list the tasks of ns/ds@ffff" in wrong.stderr
    finally:
        hub.stop()
    # The hub is gone: the run's cached list still gives the same split.
    (tmp_path / "state" / "shards.json").unlink()
    proc = shards_plan(tmp_path, "--shards", "2", "--dataset-repo", "https://huggingface.co/datasets/ns/ds",
                       "--dataset-ref", sha, env=env)
    assert proc.returncode == 0, proc.stderr
    assert [s["tasks"] for s in json.loads(proc.stdout)["shards"]] == [["alpha", "gamma"], ["beta"]]


# --- stopping shards: the escalation, with harbors that do not stop ------------------------------

PYTHON = str(REPO / ".venv" / "bin" / "python")
BOUND_S = 60  # only a hang reaches it

# A harbor that a stop does not end: it records each SIGINT and SIGTERM it gets and goes on, as a
# harbor does whose cancellation hangs; KILL ends it. A signal ignored when it started stays
# ignored, as in harbor (Python keeps an inherited SIG_IGN).
DEAF_HARBOR = r"""
import os, signal, sys, time
from pathlib import Path
marks = Path(sys.argv[1])
def record(signum, _frame):
    with (marks / f"signals-{os.getpid()}").open("a") as out:
        out.write(signal.Signals(signum).name + "\n")
for sig in (signal.SIGINT, signal.SIGTERM):
    if signal.getsignal(sig) is not signal.SIG_IGN:
        signal.signal(sig, record)
(marks / f"ready-{os.getpid()}").write_text("")
for _ in range(1200):
    time.sleep(0.1)
"""


class DeafBench:
    """tools/run/shard_run.py over two shards whose "harbor" is DEAF_HARBOR, under the real watch,
    optionally holding a run lock (flock on fd 9, as scripts/lib-run.sh takes it) and started with
    SIGINT ignored, as `nohup … &` starts it."""

    def __init__(self, tmp: Path, grace: float, sigint_ignored: bool, lock: bool = False, harbor: str = DEAF_HARBOR):
        self.tmp, self.grace = tmp, grace
        self.marks = tmp / "marks"
        self.marks.mkdir()
        self.manifest = tmp / "manifest.jsonl"
        self.lock = tmp / "lock"
        (tmp / "deaf.py").write_text(harbor)
        spec = {"run": "r", "event_file": str(self.manifest), "log_dir": str(tmp / "logs"), "poll_s": 0.1,
                "stop_grace_s": grace, "governor": None,
                "watch": ["--grace", "60", "--term-wait", str(grace), "--poll", "0.1", "--event-file", str(self.manifest)],
                "shards": [{"index": i, "job_dir": str(tmp / "jobs" / f"r-shard-{i}"), "tasks": 1,
                            "argv": [PYTHON, str(tmp / "deaf.py"), str(self.marks)]} for i in (1, 2)]}
        (tmp / "spec.json").write_text(json.dumps(spec))
        argv = [PYTHON, "-m", "tools.run.shard_run", "run", "--spec", str(tmp / "spec.json")]
        if lock:  # the verb's own lock, then the supervisor in its place (exec), as bench.sh holds it
            argv = ["bash", "-c", 'exec 9>>"$1" && flock -n 9 && shift && exec "$@"', "lock", str(self.lock), *argv]

        def preexec() -> None:
            if sigint_ignored:
                signal.signal(signal.SIGINT, signal.SIG_IGN)

        self.proc = subprocess.Popen(argv, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True, preexec_fn=preexec)
        deadline = time.monotonic() + BOUND_S
        while len(self.harbors()) < 2:
            assert self.proc.poll() is None and time.monotonic() < deadline, self.proc.stdout.read()
            time.sleep(0.05)

    def harbors(self) -> list[int]:
        return sorted(int(p.name.removeprefix("ready-")) for p in self.marks.glob("ready-*"))

    def signals(self, pid: int) -> list[str]:
        path = self.marks / f"signals-{pid}"
        return path.read_text().split() if path.exists() else []

    def events(self, name: str) -> list[dict]:
        lines = self.manifest.read_text().splitlines() if self.manifest.exists() else []
        return [e for e in map(json.loads, lines) if e["event"] == name]

    def processes(self) -> list[int]:
        """Every live process started for this bench (its cmdline names this test's tmp dir)."""
        return [pid for pid in pids_naming(str(self.tmp)) if not zombie(pid)]

    def wait_until_gone(self) -> float:
        """Seconds until no process of this bench is left (bounded)."""
        started, deadline = time.monotonic(), time.monotonic() + BOUND_S
        while self.processes():
            assert time.monotonic() < deadline, f"still running: {self.processes()}"
            time.sleep(0.05)
        return time.monotonic() - started

    def lock_is_free(self) -> bool:
        return subprocess.run(["flock", "-n", str(self.lock), "true"], timeout=BOUND_S).returncode == 0

    def close(self) -> None:
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=BOUND_S)


def pids_naming(text: str) -> list[int]:
    """Processes whose command line has `text` in one of its words."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(text.encode() in word for word in argv):
                found.append(int(entry.name))
    return found


def zombie(pid: int) -> bool:
    """Exited and not yet reaped (an orphan waits for init), or gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


@pytest.fixture
def deaf_bench(tmp_path):
    made = []

    def make(**kwargs) -> DeafBench:
        made.append(DeafBench(tmp_path, **kwargs))
        return made[-1]

    yield make
    for bench in made:
        bench.close()


# What a shard whose harbor ignores its stop gets from its watch, whether or not the bench was
# started with SIGINT ignored: SIGINT (restored in each shard), then TERM, then KILL.
SENT = ["INT", "TERM", "KILL"]


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["foreground", "nohup"])
def test_a_stopped_bench_ends_shards_whose_harbor_ignores_the_stop(deaf_bench, sigint_ignored):
    bench = deaf_bench(grace=0.5, sigint_ignored=sigint_ignored)
    os.kill(bench.proc.pid, signal.SIGTERM)  # kill of the bench
    out, _ = bench.proc.communicate(timeout=BOUND_S)
    assert bench.proc.returncode == 128 + signal.SIGTERM, out
    assert bench.wait_until_gone() < BOUND_S
    for pid in bench.harbors():  # what each harbor saw: the stop, then TERM (KILL is not seen)
        assert bench.signals(pid) == ["SIGINT", "SIGTERM"]
    stopped = sorted(bench.events("shard-stopped"), key=lambda e: e["shard"])
    assert [(e["shard"], e["why"], [(s["signal"], s["to"]) for s in e["signals"]], e["exited"], e["exit"])
            for e in stopped] == [(i, "interrupted", [("INT", "watch")], True, 128 + signal.SIGINT) for i in (1, 2)]
    for e in stopped:  # each signal had its grace before the next, and no wait was unbounded
        assert 2 * bench.grace <= e["stop_s"] < 2 * bench.grace + BOUND_S / 2
    interrupted = bench.events("harbor-interrupted")
    assert [(e["received"], [s["signal"] for s in e["signals"]], e["exited"], e["returncode"]) for e in interrupted] \
        == [("INT", SENT, True, -signal.SIGKILL)] * 2
    assert ("interrupted (SIGTERM): stopping every shard (SIGINT, as Ctrl-C; TERM, then KILL, each 0.5 s later, "
            "to a harbor still running)") in out


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["foreground", "nohup"])
def test_a_killed_bench_ends_its_shards_through_the_parent_death_signal(deaf_bench, sigint_ignored):
    bench = deaf_bench(grace=0.5, sigint_ignored=sigint_ignored)
    os.kill(bench.proc.pid, signal.SIGKILL)  # the supervisor, as a lost terminal or the OOM killer ends it
    bench.proc.wait(timeout=BOUND_S)
    assert bench.wait_until_gone() < BOUND_S
    for pid in bench.harbors():
        assert bench.signals(pid) == ["SIGINT", "SIGTERM"]
    interrupted = bench.events("harbor-interrupted")
    assert [(e["received"], [s["signal"] for s in e["signals"]], e["exited"]) for e in interrupted] == \
        [("INT", SENT, True)] * 2


def test_a_stuck_shard_watch_is_killed_with_its_group(deaf_bench):
    bench = deaf_bench(grace=0.5, sigint_ignored=False)
    stuck = wait_for("shard 1's watch", lambda: watch_pid(bench.tmp / "jobs" / "r-shard-1"))
    os.kill(stuck, signal.SIGSTOP)  # the watch can do nothing: its harbor would run on unwatched
    os.kill(bench.proc.pid, signal.SIGTERM)
    out, _ = bench.proc.communicate(timeout=BOUND_S)
    assert bench.proc.returncode == 128 + signal.SIGTERM, out
    assert bench.wait_until_gone() < BOUND_S
    by_shard = {e["shard"]: e for e in bench.events("shard-stopped")}
    assert [(s["signal"], s["to"]) for s in by_shard[1]["signals"]] == [("INT", "watch"), ("KILL", "group")]
    assert (by_shard[1]["exited"], by_shard[1]["exit"]) == (True, 128 + signal.SIGKILL)
    assert by_shard[1]["stop_s"] >= 3 * bench.grace
    assert [(s["signal"], s["to"]) for s in by_shard[2]["signals"]] == [("INT", "watch")]
    assert "shard 1's watch (pid" in out and "after it was stopped: killing its process group" in out


def test_the_run_lock_is_held_until_the_last_shard_process_exits(deaf_bench):
    # One writer per run: the supervisor is killed, its shards live on through their stop, and the
    # run's lock stays held by them (inherited, as an unsharded harbor inherits it) until the last exits.
    bench = deaf_bench(grace=3, sigint_ignored=True, lock=True)
    assert not bench.lock_is_free()
    os.kill(bench.proc.pid, signal.SIGKILL)
    bench.proc.wait(timeout=BOUND_S)
    holders = bench.processes()
    assert len(holders) == 4 and holders_of(bench.lock) == holders  # each shard's watch and harbor
    assert not bench.lock_is_free()
    wait_for("the lock's last holder gone", lambda: not holders_of(bench.lock), bound=BOUND_S)
    assert bench.lock_is_free() and not bench.processes()


# A harbor that leaves a process behind: it starts one in its own process group (the shard's),
# as a tool harbor ran could outlive it, and exits at once on the stop.
LEAVING_HARBOR = r"""
import os, signal, subprocess, sys, time
from pathlib import Path
marks = Path(sys.argv[1])
left = subprocess.Popen(["sleep", "600"])
(marks / f"left-{left.pid}").write_text("")
signal.signal(signal.SIGINT, lambda *_: os._exit(130))
(marks / f"ready-{os.getpid()}").write_text("")
for _ in range(1200):
    time.sleep(0.1)
"""


def test_what_a_stopped_shard_leaves_in_its_group_is_killed_once_its_watch_has_exited(deaf_bench):
    bench = deaf_bench(grace=30, sigint_ignored=False, harbor=LEAVING_HARBOR)
    left = sorted(int(p.name.removeprefix("left-")) for p in bench.marks.glob("left-*"))
    assert len(left) == 2 and not any(zombie(pid) for pid in left)
    os.kill(bench.proc.pid, signal.SIGTERM)
    out, _ = bench.proc.communicate(timeout=BOUND_S)
    assert bench.proc.returncode == 128 + signal.SIGTERM, out
    # Each harbor's leftover: killed, not running on. SIGKILL is delivered when the kernel next runs
    # the process, which on a loaded machine can be a moment after the bench has exited.
    wait_for("the leftovers' end", lambda: all(zombie(pid) for pid in left), bound=BOUND_S)
    stopped = sorted(bench.events("shard-stopped"), key=lambda e: e["shard"])
    assert [(e["shard"], [s["signal"] for s in e["signals"]], e["exit"], e.get("leftovers_killed")) for e in stopped] \
        == [(i, ["INT"], 128 + signal.SIGINT, True) for i in (1, 2)]
    assert out.count("processes left in its process group after its watch exited were killed") == 2


def fds_of(pid: int) -> list[str]:
    try:
        return [os.readlink(f) for f in Path(f"/proc/{pid}/fd").iterdir()]
    except OSError:
        return []


def holders_of(path: Path) -> list[int]:
    """Processes with `path` open. Found by their descriptors, not their command line: an exiting
    process has lost its command line (its memory) a moment before it closes its descriptors."""
    return sorted(pid for pid in (int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit())
                  if str(path) in fds_of(pid))


# --- the sharded bench, end to end ---------------------------------------------------------------

from tests.test_mopup import DEFAULT_PLAN, JOB, MODEL, SCORED, FakeServer, Tree, report_line  # noqa: E402

assert report_line  # a fixture, used by name

MOPUP_TASKS = sorted(DEFAULT_PLAN)
WAIT_S = 240  # every wait below ends on an event; this only bounds a broken run


@pytest.fixture
def server(tmp_path):
    s = FakeServer(tmp_path, MODEL)
    yield s
    s.stop()


def the_split(n: int = 2) -> list[list[str]]:
    """make bench's split of tests/datasets/mopup before any trial ran: by task count."""
    return shards.split(MOPUP_TASKS, n, 1, {})[0]


def shard_bench(tree: Tree, nohup: bool = False, **settings: str) -> subprocess.Popen:
    """bench.sh's sharded path (lib-shards.sh bench_shards) under the run's lock. Not bench.sh
    itself: its doctor and probe need git-lfs, a real HF token and a real endpoint. In a session
    of its own (a test can end it whole); with `nohup`, started with SIGINT ignored, as
    `nohup make bench &` from a script starts it."""
    script = ('source scripts/lib.sh; source scripts/argv.sh; source scripts/lib-run.sh; source scripts/lib-shards.sh; '
              'resolve_run; load_settings; refuse_key_in_argv; hold_run_lock "make bench"; '
              'bench_shards "$API_BASE" "$HF_TOKEN"')
    env = tree.env("bench", N_SHARDS="2", GOVERNOR_POLL="0.2", N_CONCURRENT="1", **settings)

    def preexec() -> None:
        if nohup:
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    return subprocess.Popen(["bash", "-c", script], cwd=tree.root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True, preexec_fn=preexec)


def wait_for(what: str, check, proc: subprocess.Popen | None = None, bound: float = WAIT_S):
    deadline = time.monotonic() + bound
    while not (found := check()):
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the bench ended before {what}:\n{proc.stdout.read()}")
        assert time.monotonic() < deadline, f"no {what} in {bound} s"
        time.sleep(0.05)
    return found


def watch_pid(job_dir: Path) -> int | None:
    """The harbor watch running this shard's job (its process group's leader)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"tools.run.harbor_guard" in argv and str(job_dir).encode() in argv:
            return int(entry.name)
    return None


def test_the_sharded_bench_refuses_before_any_harbor_runs_and_writes_nothing(tmp_path, server):
    """Through bench's sharded path: (1) a run benched unsharded, its scored trials in <job>, benched
    again with N_SHARDS; (2) a sharded run whose dataset gained a task after its shards ran. Each is
    refused in one line with what to do: no harbor started, no shard dir, no manifest line, the
    kept state as it was."""
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = Tree(tmp_path / "one", DEFAULT_PLAN, server)
    write_job(one.root / "jobs", JOB, [TrialSpec("t-pass", 1.0), TrialSpec("t-fail", 0.0)],
              dataset=tmp_path / "fixture-dataset", model=f"openai/{MODEL}")
    out, _ = shard_bench(one, GOVERNOR="0").communicate(timeout=WAIT_S)
    assert ("run mopup-test already has 2 settled trial(s) (scored, or a genuine limit) of 2 task(s) that its shard(s) "
            f"{JOB}-shard-1, {JOB}-shard-2 would run again, in {JOB}: continue it with make mopup RUN=mopup-test") in out
    assert sorted(p.name for p in (one.root / "jobs").iterdir()) == [JOB]
    # The run's lock, held by the bench, and the instance its lock drew (scripts/lib.sh).
    assert sorted(p.name for p in one.state.iterdir()) == ["instance", "lock", "lock.json"]
    assert one.executed("bench") == []

    two = Tree(tmp_path / "two", DEFAULT_PLAN, server)
    kept = subprocess.run([str(REPO / ".venv/bin/python"), "-m", "tools.run.shards", "plan", "--run", "mopup-test",
                           "--jobs-dir", str(two.root / "jobs"), "--job-name", JOB, "--shards", "2", "--attempts", "1",
                           "--state-dir", str(two.state), "--dataset-path", str(two.root / "dataset")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert kept.returncode == 0, kept.stderr
    (two.root / "jobs" / f"{JOB}-shard-1").mkdir(parents=True)
    shutil.copytree(two.root / "dataset" / "t-pass", two.root / "dataset" / "t-new")
    before = {p.name: p.read_bytes() for p in two.state.iterdir()}
    bench = shard_bench(two, GOVERNOR="0")
    out, _ = bench.communicate(timeout=WAIT_S)
    assert bench.returncode == 1, out
    assert "run mopup-test's task list changed since it was split" in out and "added t-new, removed none" in out
    after = {p.name: p.read_bytes() for p in two.state.iterdir()}
    assert {k: v for k, v in after.items() if k not in ("instance", "lock", "lock.json")} == before
    assert sorted(p.name for p in (two.root / "jobs").iterdir()) == [f"{JOB}-shard-1"]
    assert two.executed("bench") == []


@pytest.mark.e2e
def test_two_shards_one_killed_then_mopup_completes_both_with_no_wasted_work(tmp_path, server, report_line):
    split = the_split()
    plan = dict(DEFAULT_PLAN, **{"t-hang": ["hang", "pass"]})
    tree = Tree(tmp_path, plan, server)
    victim = next(i for i, tasks in enumerate(split, 1) if "t-hang" in tasks)
    bench = shard_bench(tree, GOVERNOR="0")
    wait_for("hung trial", lambda: any(r["task"] == "t-hang" for r in tree.executed("bench")), bench)
    shard_dir = tree.root / "jobs" / f"{JOB}-shard-{victim}"
    pid = wait_for("shard watch", lambda: watch_pid(shard_dir))
    os.killpg(pid, signal.SIGKILL)  # the shard's watch and its harbor, mid-run, as a lost machine would
    out, _ = bench.communicate(timeout=WAIT_S)
    assert bench.returncode == 128 + signal.SIGKILL, out
    assert f"shard {victim} ended: harbor's watch exited -9" in out
    kept = json.loads((tree.state / "shards.json").read_text())
    assert [s["tasks"] for s in kept["shards"]] == split
    other = 3 - victim
    assert {r["task"] for r in tree.executed("bench") if r["job"] == f"{JOB}-shard-{other}"} == set(split[other - 1])
    bench_manifest = [r for r in tree.manifest() if r.get("event") == "bench"]
    assert [[s["index"], s["tasks"]] for s in bench_manifest[-1]["shards"]] == [[1, len(split[0])], [2, len(split[1])]]

    scored_before = {r["task"] for r in tree.executed("bench") if r["task"] in SCORED and r["task"] != "t-hang"}
    mop = tree.mopup()
    assert mop.returncode == 0, mop.stdout + mop.stderr
    executed = tree.executed("mopup")
    wasted = [r for r in executed if r["task"] in scored_before]
    report_line(f"wasted work: {len(wasted)} scored trial(s) re-executed by mop-up (of {len(executed)} it ran)")
    assert wasted == []
    report = tree.tally()
    outcomes = {row["task"]: row["outcome"] for row in report["per_task"]}
    assert set(outcomes) == set(MOPUP_TASKS)
    assert "unfinished" not in outcomes.values()
    assert outcomes["t-hang"] == "passed" and outcomes["t-sandbox"] == "passed" and outcomes["t-fail"] == "failed"
    # Everything the killed shard never started ran in mop-up, once.
    never_started = set(split[victim - 1]) - {r["task"] for r in tree.executed("bench")}
    assert never_started and never_started <= {r["task"] for r in executed}
    assert len(executed) == len({r["task"] for r in executed})


def manifest_events(tree: Tree, name: str) -> list[dict]:
    return [r for r in tree.manifest() if r.get("event") == name]


@pytest.mark.e2e
def test_the_governor_interrupts_the_newest_shard_above_the_rate_and_starts_it_again(tmp_path, server):
    first, second = the_split()
    plan = {**{t: ["held-SandboxError", "pass"] for t in first}, **{t: ["slow-pass"] for t in second}}
    tree = Tree(tmp_path, plan, server)
    hold, release = tmp_path / "hold", tmp_path / "release"
    bench = shard_bench(tree, MAX_INFRA_RATE="0.3", GOVERNOR_MIN_TRIALS="3", GOVERNOR_WINDOW="600",
                        GOVERNOR_QUIET="600", SCRIPTED_ENV_HOLD=str(hold), SCRIPTED_ENV_RELEASE=str(release))
    # Both shards are mid-trial before the first infra error lands.
    wait_for("a trial in each shard", lambda: {r["job"] for r in tree.executed("bench")} ==
             {f"{JOB}-shard-1", f"{JOB}-shard-2"}, bench)
    hold.touch()
    stop = wait_for("the governor's stop", lambda: manifest_events(tree, "governor-stop"), bench)
    assert len(stop) == 1 and stop[0]["shard"] == 2  # the newest; never the last one running
    assert stop[0]["infra"] == stop[0]["finished"] >= 3 and stop[0]["rate"] == 1.0
    assert stop[0]["max_rate"] == 0.3 and stop[0]["min_trials"] == 3
    # Shard 1 runs out; nothing is running, so shard 2 starts again at once (harbor resumes it).
    start = wait_for("the governor's start", lambda: manifest_events(tree, "governor-start"), bench)
    assert [e["shard"] for e in start] == [2]
    release.touch()
    out, _ = bench.communicate(timeout=WAIT_S)
    assert bench.returncode == 0, out
    assert "shard 2 stopped by the governor" in out and "shard 2 (4 tasks) started again" in out
    job2 = tree.root / "jobs" / f"{JOB}-shard-2"
    results = [json.loads((t / "result.json").read_text()) for t in job2.iterdir() if (t / "result.json").is_file()]
    cancelled = [r for r in results if (r.get("exception_info") or {}).get("exception_type") == "CancelledError"]
    passed = {r["task_name"] for r in results if ((r.get("verifier_result") or {}).get("rewards") or {}).get("reward") == 1}
    # The interrupted trial is an infra error for mop-up; the resume ran every other task once.
    assert len(cancelled) == 1 and passed == set(second) - {cancelled[0]["task_name"]}
    left = mopup_plan.what_is_left(tree.root / "jobs", JOB)
    assert set(left) == set(first) | {cancelled[0]["task_name"]}


@pytest.mark.e2e
def test_the_governor_stops_nothing_below_the_rate(tmp_path, server):
    tree = Tree(tmp_path, {t: ["pass"] for t in MOPUP_TASKS}, server)
    bench = shard_bench(tree, MAX_INFRA_RATE="0.3", GOVERNOR_MIN_TRIALS="2")
    out, _ = bench.communicate(timeout=WAIT_S)
    assert bench.returncode == 0, out
    assert [r.get("event") for r in tree.manifest() if str(r.get("event", "")).startswith("governor")] == []
    assert sorted(r["task"] for r in tree.executed("bench")) == MOPUP_TASKS
    assert out.count("ended: harbor's watch exited 0") == 2


# --- the sharded bench stopped, end to end: one writer, the stop under nohup, the bounded linger --


@pytest.fixture
def tree_processes():
    """Trees whose processes (anything naming the tree in its command line) are ended after the
    test, with their lingering trials released, whatever the test left."""
    trees: list[tuple[Tree, Path]] = []
    yield lambda tree, release: trees.append((tree, release))
    for tree, release in trees:
        release.touch()
        for pid in pids_naming(str(tree.root)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def shard_processes(tree: Tree) -> list[int]:
    """Every shard's watch (its argv names the shard's job dir) and what it started (harbor)."""
    watches = [pid for pid in pids_naming(str(tree.root / "jobs")) if not zombie(pid)]
    return sorted({*watches, *(child for pid in watches for child in children(pid) if not zombie(child))})


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def lock_holders(tree: Tree) -> list[int]:
    return holders_of(tree.state / "lock")


def lock_is_free(tree: Tree) -> bool:
    return subprocess.run(["flock", "-n", str(tree.state / "lock"), "true"], timeout=WAIT_S).returncode == 0


def trial_results(job_dir: Path) -> dict[str, dict]:
    return {t.name: json.loads((t / "result.json").read_text()) for t in job_dir.iterdir()
            if t.is_dir() and (t / "result.json").is_file()}


def exception_type(result: dict) -> str | None:
    return (result.get("exception_info") or {}).get("exception_type")


def stopped_events(tree: Tree, shard: int) -> list[dict]:
    return [e for e in manifest_events(tree, "shard-stopped") if e["shard"] == shard]


def interrupted_events(tree: Tree, shard: int) -> list[dict]:
    job_dir = str(tree.root / "jobs" / f"{JOB}-shard-{shard}")
    return [e for e in manifest_events(tree, "harbor-interrupted") if e["job_dir"] == job_dir]


@pytest.mark.e2e
def test_a_killed_supervisors_shards_keep_the_run_locked_until_the_last_one_exits(tmp_path, server, tree_processes,
                                                                                 report_line):
    # nohup make bench &, then its process group is killed (kill -9, a lost machine session): the
    # shards live on through their stop (their harbors linger after it), and while any of them
    # lives no second writer may start: make mopup then would run every task beside them.
    split = the_split()
    lingering = {tasks[-1] for tasks in split}  # each shard's last task lingers (the rest, run first, pass)
    plan = {t: ["linger", "pass"] if t in lingering else ["pass"] for t in MOPUP_TASKS}
    tree = Tree(tmp_path, plan, server)
    release = tmp_path / "release"
    tree_processes(tree, release)
    bench = shard_bench(tree, nohup=True, STOP_GRACE="600", SCRIPTED_ENV_RELEASE=str(release))
    wait_for("a lingering trial in each shard",
             lambda: {r["task"] for r in tree.executed("bench")} >= lingering, bench)
    scored_before = {r["task"] for r in tree.executed("bench") if r["task"] not in lingering}
    os.killpg(bench.pid, signal.SIGKILL)  # bench.sh's bash and the supervisor: the shards have groups of their own
    bench.wait(timeout=WAIT_S)
    # The stop reached each shard (the kernel's parent-death signal, SIGINT, which each shard has
    # back though the bench ignores it); each harbor wrote its cancelled trial and lives on,
    # holding the run's lock.
    jobs = [tree.root / "jobs" / f"{JOB}-shard-{i}" for i in (1, 2)]
    wait_for("the cancelled trials", lambda: all(
        any(exception_type(r) == "CancelledError" for r in trial_results(job).values()) for job in jobs))
    holders = shard_processes(tree)
    assert len(holders) == 4 and lock_holders(tree) == holders  # each shard's watch and harbor
    assert not lock_is_free(tree)
    second = tree.mopup()
    assert second.returncode == 1
    [refusal] = [line for line in second.stderr.splitlines() if "is busy" in line]
    assert "run 'mopup-test' is busy: make bench (pid " in refusal
    assert "has exited, but a process it started still holds the lock: " in refusal
    named = {int(word.split("(")[0]) for word in refusal.split("still holds the lock: ")[1].split(" (")[0].split()}
    assert named == set(holders)
    assert tree.executed("mopup") == []
    release.touch()  # the lingering harbors exit; with them, the last holders of the lock
    wait_for("the lock's last holder gone", lambda: not lock_holders(tree))
    assert lock_is_free(tree) and not shard_processes(tree)
    for i in (1, 2):
        [event] = interrupted_events(tree, i)
        assert (event["received"], [s["signal"] for s in event["signals"]], event["exited"]) == ("INT", ["INT"], True)
    # Nothing lost, nothing re-run: mop-up runs the cancelled and never-started tasks once each.
    mop = tree.mopup()
    assert mop.returncode == 0, mop.stdout + mop.stderr
    executed = [r["task"] for r in tree.executed("mopup")]
    report_line(f"wasted work: {len(set(executed) & scored_before)} scored trial(s) re-executed by mop-up "
                f"(of {len(executed)} it ran)")
    assert set(executed) & scored_before == set() and len(executed) == len(set(executed))
    assert set(executed) == set(MOPUP_TASKS) - scored_before
    outcomes = {row["task"]: row["outcome"] for row in tree.tally()["per_task"]}
    assert outcomes == {t: "passed" for t in MOPUP_TASKS}


@pytest.mark.e2e
def test_a_background_bench_is_governed_and_stopped_though_sigint_is_ignored(tmp_path, server, tree_processes):
    # nohup make bench &: SIGINT is ignored by the bench and would be by everything it starts. The
    # governor's stop and a kill of the bench must still stop the shard, and say so: each shard has
    # SIGINT back at its default, and is stopped with it, as Ctrl-C stops harbor.
    first, second = the_split()
    plan = {**{t: ["held-SandboxError", "pass"] for t in first}, **{t: ["slow-pass"] for t in second}}
    tree = Tree(tmp_path, plan, server)
    hold, release = tmp_path / "hold", tmp_path / "release"
    tree_processes(tree, release)
    grace = 20
    bench = shard_bench(tree, nohup=True, MAX_INFRA_RATE="0.3", GOVERNOR_MIN_TRIALS="3", GOVERNOR_WINDOW="600",
                        GOVERNOR_QUIET="600", STOP_GRACE=str(grace), SCRIPTED_ENV_HOLD=str(hold),
                        SCRIPTED_ENV_RELEASE=str(release))
    wait_for("a trial in each shard", lambda: {r["job"] for r in tree.executed("bench")} ==
             {f"{JOB}-shard-1", f"{JOB}-shard-2"}, bench)
    hold.touch()
    [stop] = wait_for("the governor's stop", lambda: manifest_events(tree, "governor-stop"), bench)
    assert stop["shard"] == 2
    # Stopped with SIGINT, harbor cancelled its trial and exited within the grace.
    [stopped] = wait_for("shard 2 stopped", lambda: stopped_events(tree, 2), bench, bound=3 * grace)
    assert (stopped["why"], [(s["signal"], s["to"]) for s in stopped["signals"]], stopped["exited"], stopped["exit"]) \
        == ("governor", [("INT", "watch")], True, 128 + signal.SIGINT)
    assert stopped["stop_s"] < grace  # harbor's own cancellation ended it: no TERM or KILL after it
    [watch_line] = interrupted_events(tree, 2)
    assert (watch_line["received"], [s["signal"] for s in watch_line["signals"]]) == ("INT", ["INT"])
    wait_for("the governor's start", lambda: manifest_events(tree, "governor-start"), bench)
    wait_for("shard 2 running again", lambda: len([r for r in tree.executed("bench")
                                                   if r["job"] == f"{JOB}-shard-2"]) == 2, bench)
    # kill of the bench (TERM to its supervisor): the running shard is stopped the same way.
    [supervisor] = pids_naming(str(tree.state / "shards-spec.json"))
    os.kill(supervisor, signal.SIGTERM)
    out, _ = bench.communicate(timeout=WAIT_S)
    assert bench.returncode == 128 + signal.SIGTERM, out
    assert "interrupted (SIGTERM): stopping every shard (SIGINT, as Ctrl-C; " in out
    wait_for("every shard process gone", lambda: not shard_processes(tree), bound=3 * grace)
    [_, again] = stopped_events(tree, 2)
    assert (again["why"], [(s["signal"], s["to"]) for s in again["signals"]], again["exited"]) == \
        ("interrupted", [("INT", "watch")], True)
    # Nothing lost: every trial dir of both shards has its result; shard 2's two are its cancellations.
    for i in (1, 2):
        assert harbor_guard_job.trials_without_result(str(tree.root / "jobs" / f"{JOB}-shard-{i}")) == []
    cancelled = [r for r in trial_results(tree.root / "jobs" / f"{JOB}-shard-2").values()
                 if exception_type(r) == "CancelledError"]
    assert len(cancelled) == 2


@pytest.mark.e2e
def test_a_shard_that_lingers_after_the_governors_stop_is_ended_and_the_bench_finishes(tmp_path, server,
                                                                                      tree_processes):
    # The governor stops shard 2 while its harbor's trial is one that lingers after an interrupt:
    # harbor writes the cancelled trial and stays alive. It is ended STOP_GRACE later (TERM), the
    # shard is started again when shard 1 runs out, and the bench reaches its end.
    first, second = the_split()
    plan = {**{t: ["held-SandboxError", "pass"] for t in first}, **{t: ["linger"] for t in second}}
    tree = Tree(tmp_path, plan, server)
    hold, release = tmp_path / "hold", tmp_path / "release"
    tree_processes(tree, release)
    grace = 10  # time for harbor's own cancellation, on a loaded machine
    bench = shard_bench(tree, MAX_INFRA_RATE="0.3", GOVERNOR_MIN_TRIALS="3", GOVERNOR_WINDOW="600",
                        GOVERNOR_QUIET="600", STOP_GRACE=str(grace), SCRIPTED_ENV_HOLD=str(hold),
                        SCRIPTED_ENV_RELEASE=str(release))
    wait_for("a trial in each shard", lambda: {r["job"] for r in tree.executed("bench")} ==
             {f"{JOB}-shard-1", f"{JOB}-shard-2"}, bench)
    hold.touch()
    [stop] = wait_for("the governor's stop", lambda: manifest_events(tree, "governor-stop"), bench)
    assert stop["shard"] == 2
    [stopped] = wait_for("shard 2 stopped", lambda: stopped_events(tree, 2), bench, bound=3 * grace + 60)
    assert (stopped["why"], [(s["signal"], s["to"]) for s in stopped["signals"]], stopped["exited"]) == \
        ("governor", [("INT", "watch")], True)
    assert grace <= stopped["stop_s"]
    [watch_line] = interrupted_events(tree, 2)
    # harbor lingered after SIGINT; TERM, STOP_GRACE later, ended it (or KILL as long after that)
    assert (watch_line["received"], [s["signal"] for s in watch_line["signals"]][:2], watch_line["exited"]) == \
        ("INT", ["INT", "TERM"], True)
    [cancelled] = [r for r in trial_results(tree.root / "jobs" / f"{JOB}-shard-2").values()
                   if exception_type(r) == "CancelledError"]
    release.touch()  # shard 2's other tasks pass at once when it is started again
    out, _ = bench.communicate(timeout=WAIT_S)
    assert bench.returncode == 0, out
    assert "shard 2 stopped by the governor" in out and "shard 2 (4 tasks) started again" in out
    assert [e["shard"] for e in manifest_events(tree, "governor-start")] == [2]
    results = trial_results(tree.root / "jobs" / f"{JOB}-shard-2")
    passed = {r["task_name"] for r in results.values() if ((r.get("verifier_result") or {}).get("rewards") or {}).get("reward") == 1}
    assert passed == set(second) - {cancelled["task_name"]}
    assert not shard_processes(tree)
