"""make submission holds exactly what the leaderboard counts: per task its k slot-filling trials.

Fixtures are k = 5 runs written with harbor 0.25's own models (tests/fixtures/harbor_jobs.py for
the job dirs, harbor's Trajectory for agent/trajectory.json, JobLock for lock.json). The trial
dirs a submission must hold are worked out by hand below (COUNTED, LEFT_OUT), never by calling
tools/results/slots.py or the tally. Refusals are asserted word for word, with nothing written; the
run's own dirs are hashed before and after.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from harbor.models.job.config import RetryConfig
from harbor.models.job.lock import JobLock, TaskLock, TrialLock, VerifierLock
from harbor.models.trajectories.agent import Agent
from harbor.models.trajectories.step import Step
from harbor.models.trajectories.trajectory import Trajectory
from harbor.models.trial.config import AgentConfig, EnvironmentConfig

from tests.fixtures.harbor_jobs import MODEL, TrialSpec, trial_name, write_job
from tests.test_submission import build_args, tree_hash
from tools.hub import submission

REPO = Path(__file__).resolve().parent.parent
K = 5
JOB, RETRY_JOB = "sx5", "sx5-retry-1"
P, F = 1.0, 0.0
# Per task, its attempts in the first job, then in the retry job: a reward, "infra" (a
# SandboxError, unscored), "crash" (no result.json), "trunc" (a result.json cut off mid-write).
MAIN = {
    "a": [P, P, P, P, P],
    "b": [P, F, "infra", F, P],
    "c": [F, F, "crash", F, F],
    "d": [P, "trunc", F, F, F],
    "e": [P, F, P, F, P],
    "j": [P, F, F, F, F],
}
RETRY = {"b": [F], "c": [P], "d": [P], "e": [F, P], "j": ["infra"]}
TASKS = sorted(MAIN)
# Worked out by hand: per task the latest 5 settled attempts count; the rest are left out.
LEFT_OUT = {
    (JOB, "b", 2): "an infra error (SandboxError): unscored, never counted; its slot is filled by another attempt "
                   "(make mopup)",
    (JOB, "c", 2): "no result.json (a trial harbor never finished)",
    (JOB, "d", 1): "unreadable result.json (truncated JSON: a string starting at line 1 column 34 never ends)",
    (JOB, "e", 0): "re-rolled: an older settled attempt (passed); the task's latest 5 settled trials fill its slots",
    (JOB, "e", 1): "re-rolled: an older settled attempt (failed); the task's latest 5 settled trials fill its slots",
    (RETRY_JOB, "j", 0): "an infra error (SandboxError) after the task's 5 slots were filled; not an attempt",
}
ALL = {(JOB, t, i) for t, plan in MAIN.items() for i in range(len(plan))} | {
    (RETRY_JOB, t, i) for t, plan in RETRY.items() for i in range(len(plan))}
COUNTED = ALL - set(LEFT_OUT)
PASSING = {(job, t, i) for job, plans in ((JOB, MAIN), (RETRY_JOB, RETRY)) for t, plan in plans.items()
           for i, what in enumerate(plan) if what == P}


def atif(task: str, attempt: int) -> str:
    """A valid ATIF trajectory, through harbor's own model."""
    return Trajectory(agent=Agent(name="terminus-2", version="2.0.0", model_name=MODEL),
                      steps=[Step(step_id=1, source="user", message=f"Solve {task}."),
                             Step(step_id=2, source="agent", message=f"attempt {attempt}: done")]
                      ).model_dump_json(indent=2, exclude_none=True)


def specs(plans: dict[str, list], base: int) -> list[TrialSpec]:
    out = []
    for task, plan in plans.items():
        for i, what in enumerate(plan):
            when = base + 10 * i
            if what == "infra":
                out.append(TrialSpec(task, None, "SandboxError", "Sandbox API error (503)", finished=when, attempt=i))
            elif what == "crash":
                out.append(TrialSpec(task, finished=None, attempt=i))
            elif what == "trunc":
                out.append(TrialSpec(task, attempt=i, raw_result=f'{{"id": "0b5e", "task_name": "{task}", "trial_na'))
            else:
                files = {"trajectory.json": atif(task, i)} if what == P else {}
                out.append(TrialSpec(task, what, finished=when, attempt=i, agent_files=files))
    return out


def write_lock(job_dir: Path, tasks: list[str]) -> None:
    """The job's lock.json as harbor writes it at start (JobLock): one trial lock per planned trial."""
    trials = [TrialLock(task=TaskLock(name=t, type="local", digest="sha256:" + "0" * 64),
                        agent=AgentConfig(name="terminus-2", model_name=MODEL), environment=EnvironmentConfig(),
                        verifier=VerifierLock()) for t in tasks for _ in range(K)]
    lock = JobLock(n_concurrent_trials=3, retry=RetryConfig(), trials=trials)
    (job_dir / "lock.json").write_text(lock.model_dump_json(indent=4, exclude_none=True))


@pytest.fixture(scope="module")
def complete(tmp_path_factory) -> Path:
    """A finished k = 5 run: jobs/sx5 (with its lock.json, the six tasks) and jobs/sx5-retry-1."""
    root = tmp_path_factory.mktemp("complete")
    jobs = root / "jobs"
    write_job(jobs, JOB, specs(MAIN, 0), dataset=root / "dataset", n_attempts=K, multiplier=1.0)
    write_job(jobs, RETRY_JOB, specs(RETRY, 1000), dataset=root / "dataset", scoped=True, multiplier=1.0)
    write_lock(jobs / JOB, TASKS)
    return jobs


@pytest.fixture
def run(complete, tmp_path) -> Path:
    """A copy of the finished run to change."""
    shutil.copytree(complete, tmp_path / "jobs", symlinks=True)
    return tmp_path / "jobs"


def trial(jobs: Path, job: str, task: str, attempt: int) -> Path:
    return jobs / job / trial_name(task, job, attempt)


def build(jobs: Path, out: Path, *extra: str):
    return CliRunner().invoke(submission.cli, build_args(jobs, JOB, out, "--run", "sx", *extra))


DEST = Path("submissions/terminal-bench/2.0/Terminus-2__Qwen3.8-27B-FP8")
REFUSED = ("submission: refused, nothing was written: the leaderboard's resolution rate is passed over every trial "
           "submitted, so each task must hold exactly its 5 slot-filling trials, as the rules want them")


def test_exactly_the_counted_trials_are_submitted_and_the_rest_named(complete, tmp_path):
    before = tree_hash(complete)
    result = build(complete, tmp_path / "out")
    assert result.exit_code == 0, result.output
    dest = tmp_path / "out" / DEST
    submitted = {(job, t.name) for job in (JOB, RETRY_JOB) for t in (dest / job).iterdir() if t.is_dir()}
    assert submitted == {(job, trial_name(t, job, i)) for job, t, i in COUNTED}
    assert len(submitted) == len(TASKS) * K == 30
    # The job's own files come along: config.json, result.json, lock.json, job.log.
    assert sorted(p.name for p in (dest / JOB).iterdir() if p.is_file()) == [
        "config.json", "job.log", "lock.json", "result.json"]
    lines = result.stderr.splitlines()
    assert sorted(line for line in lines if line.startswith("submission: left out ")) == sorted(
        f"submission: left out {trial(complete, *key)}/: {why}" for key, why in LEFT_OUT.items())
    assert f"submission: built {dest}/ (metadata.yaml, 2 job dirs, 30 trial dirs: 6 tasks × 5 attempts)" in lines
    assert (f"submission: the run covers 6 of 6 tasks of its dataset (as {complete / JOB}/lock.json lists them)"
            in lines)
    assert result.stdout == (f"submission {dest}: meets the Terminal-Bench leaderboard rules "
                             "(6 tasks, 30 trials, at least 5 valid trials per task).\n")
    assert tree_hash(complete) == before


def test_an_open_slot_is_refused_with_the_mopup_command(complete, tmp_path):
    """Without the retry job, b (infra), c (crashed) and d (truncated) have 4 settled trials each."""
    jobs = tmp_path / "jobs"
    shutil.copytree(complete / JOB, jobs / JOB, symlinks=True)
    before = tree_hash(jobs)
    result = build(jobs, tmp_path / "out")
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines() == [
        "run sx: does NOT meet the Terminal-Bench leaderboard rules (1 problem):",
        "  - 3 of 6 tasks have open attempt slots (3 of 30 slots have no settled trial): b (4 of 5 settled), "
        "c (4 of 5 settled), d (4 of 5 settled); fill them with make mopup RUN=sx",
    ]
    assert result.stderr.splitlines() == [
        REFUSED,
        f"submission: the run covers 6 of 6 tasks of its dataset (as {jobs / JOB}/lock.json lists them)",
        "submission: make submission RUN=sx DRY_RUN=1 lists every trial dir it would submit or leave out, and why",
    ]
    assert not (tmp_path / "out").exists()
    assert tree_hash(jobs) == before


def test_a_truncated_result_no_slot_uses_does_not_fail_the_submission(complete, tmp_path):
    """d's cut-off result.json: its slot is filled by the retry job's pass, so it is only left out."""
    assert (trial(complete, JOB, "d", 1) / "result.json").read_text().endswith('"trial_na')
    result = build(complete, tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "out" / DEST / JOB / trial_name("d", JOB, 1)).exists()


@pytest.mark.parametrize("where, fix", [
    ("local", "a local run has no other copy of what its agent wrote, so run those tasks again (a run benched as an "
              "HF Job: make pull RUN=sx PULL=all brings its trajectories home)"),
    ("hf", "bring them home with make pull RUN=sx PULL=all (PULL=results, which a run with N_ATTEMPTS=1 pulls by default, leaves them out)"),
])
def test_a_passing_trial_without_a_valid_trajectory_is_refused(run, tmp_path, where, fix):
    missing, invalid, empty = trial(run, JOB, "a", 0), trial(run, RETRY_JOB, "c", 0), trial(run, JOB, "a", 3)
    (missing / "agent" / "trajectory.json").unlink()
    (invalid / "agent" / "trajectory.json").write_text(json.dumps(
        {**json.loads(atif("c", 0)), "schema_version": "ATIF-v2.0"}))
    (empty / "agent" / "trajectory.json").write_text(json.dumps({**json.loads(atif("a", 3)), "steps": []}))
    # A re-rolled passing trial is not submitted: its trajectory does not matter.
    (trial(run, JOB, "e", 0) / "agent" / "trajectory.json").unlink()
    before = tree_hash(run)
    result = build(run, tmp_path / "out", "--where", where)
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[0] == REFUSED
    assert result.stdout.splitlines()[:2] == [
        "run sx: does NOT meet the Terminal-Bench leaderboard rules (1 problem):",
        f"  - 3 passing trials lack a valid ATIF agent/trajectory.json, which the leaderboard needs for every "
        f"passing trial: {missing}/ (missing), {empty}/ (not ATIF: List should have at least 1 item after validation, "
        f"not 0 at steps), {invalid}/ (not ATIF: Input should be 'ATIF-v1.0', 'ATIF-v1.1', 'ATIF-v1.2', 'ATIF-v1.3', "
        f"'ATIF-v1.4', 'ATIF-v1.5', 'ATIF-v1.6', 'ATIF-v1.7' or 'ATIF-v1.8' at schema_version); {fix}",
    ]
    assert not (tmp_path / "out").exists()
    assert tree_hash(run) == before


def test_an_override_in_a_submitted_trial_config_is_refused(run, tmp_path):
    counted = trial(run, JOB, "b", 0)
    cfg = json.loads((counted / "config.json").read_text())
    cfg["agent"]["override_timeout_sec"] = 7200
    cfg["environment"]["override_cpus"] = 4
    (counted / "config.json").write_text(json.dumps(cfg))
    # The same in a trial that is left out (re-rolled) is not the submission's business.
    rerolled = trial(run, JOB, "e", 0)
    (rerolled / "config.json").write_text(json.dumps({**cfg, "agent_timeout_multiplier": 4.0}))
    result = build(run, tmp_path / "out")
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[0] == REFUSED
    assert result.stdout.splitlines() == [
        "run sx: does NOT meet the Terminal-Bench leaderboard rules (2 problems):",
        f"  - 1 submitted trial's config.json (e.g. {counted}/config.json): environment.override_cpus is 4; "
        "resource overrides are not allowed (this repository never sets it; start the job with make bench RUN=sx)",
        f"  - 1 submitted trial's config.json (e.g. {counted}/config.json): agent.override_timeout_sec is "
        "7200; agent timeout overrides are not allowed (this repository never sets it; start the job with make bench "
        "RUN=sx)",
    ]
    assert not (tmp_path / "out").exists()


def test_tasks_of_the_dataset_the_run_never_ran_are_refused(run, tmp_path):
    write_lock(run / JOB, TASKS + ["x-never", "y-never", "z-never"])
    result = build(run, tmp_path / "out")
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[0] == REFUSED
    assert result.stdout.splitlines() == [
        "run sx: does NOT meet the Terminal-Bench leaderboard rules (1 problem):",
        f"  - the run covers 6 of 9 tasks of its dataset (as {run / JOB}/lock.json lists them): 3 missing, "
        "e.g. x-never, y-never, z-never; run them with make mopup RUN=sx",
    ]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("change", ["no lock.json", "a filtered dataset"])
def test_coverage_that_cannot_be_checked_is_said_and_not_refused(run, tmp_path, change):
    """A lock.json lists only what its job ran: without one from a job that ran the whole dataset,
    the run's coverage is unknown, said with its task count."""
    if change == "no lock.json":
        (run / JOB / "lock.json").unlink()
    else:
        cfg = json.loads((run / JOB / "config.json").read_text())
        cfg["datasets"][0]["task_names"] = TASKS
        (run / JOB / "config.json").write_text(json.dumps(cfg))
    result = build(run, tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert ("submission: the dataset's coverage cannot be checked: no job dir records the dataset's whole task list "
            "(a lock.json of a job that ran it unfiltered); the run has 6 tasks") in result.stderr.splitlines()


def test_k_below_five_is_built_and_rejected_by_check_submission(tmp_path):
    """k is the run's n_attempts; with k = 2 every slot is filled, so the tree is built, and
    check-submission's verdict (at least 5 per task) rejects it."""
    jobs = tmp_path / "jobs"
    write_job(jobs, "k2", specs({"a": [P, F, P], "b": [F, F]}, 0), dataset=tmp_path / "dataset", n_attempts=2,
              multiplier=1.0)
    result = CliRunner().invoke(submission.cli, build_args(jobs, "k2", tmp_path / "out", "--run", "sx"))
    assert result.exit_code == 1, result.output
    assert "2 of 2 tasks have fewer than 5 valid trials: a (2), b (2)" in result.stdout
    assert sorted(p.name for p in (tmp_path / "out" / DEST / "k2").iterdir() if p.is_dir()) == sorted(
        [trial_name("a", "k2", 1), trial_name("a", "k2", 2), trial_name("b", "k2", 0), trial_name("b", "k2", 1)])
    # The dry run says the same verdict on the run, and that the tree would be built and rejected.
    dry = CliRunner().invoke(submission.cli, build_args(jobs, "k2", tmp_path / "out2", "--run", "sx", "--dry-run"))
    assert dry.exit_code == 0, dry.output
    lines = dry.stdout.splitlines()
    assert lines[-3:] == [
        "run sx: does NOT meet the Terminal-Bench leaderboard rules (1 problem):",
        "  - 2 of 2 tasks have fewer than 5 valid trials: a (2), b (2); set N_ATTEMPTS=5 in runs/sx.env and bench "
        "the run with it (make bench RUN=sx)",
        "would be built, then rejected by check-submission for the problems above (the tree stays, so it can be "
        "looked at)",
    ]
    assert not (tmp_path / "out2").exists()


def _files(root: Path, names: list[str]) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for name in names for p in sorted((root / name).rglob("*"))
            if p.is_file()}


def test_the_complete_example_is_what_its_script_writes(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("melc", REPO / "examples" / "make_example_leaderboard_complete.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.chdir(tmp_path)
    mod.main(tmp_path / "out")
    names = [mod.JOB, f"{mod.JOB}-retry-1", f"{mod.JOB}-retry-2"]
    fresh, committed = _files(tmp_path / "out" / "jobs", names), _files(REPO / "examples" / "jobs", names)
    assert sorted(fresh) == sorted(committed)
    assert [k for k in fresh if fresh[k] != committed[k]] == []
    assert sum(len(b) for b in committed.values()) < 300_000


REGISTRY = "terminal-bench/terminal-bench-2-1"
DIGEST = "sha256:" + "d" * 64


def as_registry_run(jobs: Path, digest: str = DIGEST) -> None:
    """The run's first job as harbor 0.26.0 writes one of a registry dataset: its config.json's dataset
    ref resolved to the version's digest, its lock.json's tasks packages of that dataset."""
    cfg = json.loads((jobs / JOB / "config.json").read_text())
    cfg["datasets"] = [{"name": REGISTRY, "ref": digest}]
    (jobs / JOB / "config.json").write_text(json.dumps(cfg))
    trials = [TrialLock(task=TaskLock(name=t, type="package", digest="sha256:" + "0" * 64, source=REGISTRY),
                        agent=AgentConfig(name="terminus-2", model_name=MODEL), environment=EnvironmentConfig(),
                        verifier=VerifierLock()) for t in TASKS for _ in range(K)]
    lock = JobLock(n_concurrent_trials=3, retry=RetryConfig(), trials=trials)
    (jobs / JOB / "lock.json").write_text(lock.model_dump_json(indent=4, exclude_none=True))


@pytest.mark.parametrize("dataset, registry_jobs, line", [
    (REGISTRY, False, f"it names no version, so every resume resolved the latest), and the leaderboard is bound to "
                      f"one dataset version: pin it in runs/sx.env with DATASET={REGISTRY}@<version> (make pin RUN=sx "
                      f"writes it; terminal-bench 2.1's leaderboard version is revision 6: @6)"),
    (REGISTRY, True, f"it names no version, so every resume resolved the latest), and the leaderboard is bound to one "
                     f"dataset version: pin it in runs/sx.env with DATASET={REGISTRY}@{DIGEST} (the version its jobs "
                     f"ran; make pin RUN=sx writes it; terminal-bench 2.1's leaderboard version is revision 6: @6)"),
    (f"{REGISTRY}@latest", True, f"@latest is a tag, which can move), and the leaderboard is bound to one dataset "
                                 f"version: pin it in runs/sx.env with DATASET={REGISTRY}@{DIGEST} (the version its "
                                 f"jobs ran;"),
    (f"{REGISTRY}@sha256:{'e' * 64}", True, f"runs/sx.env pins {REGISTRY}@sha256:{'e' * 64}, but the run's jobs ran "
                                            f"{REGISTRY}@{DIGEST}: submit the run of the version you pin, or pin the "
                                            f"one that ran: DATASET={REGISTRY}@{DIGEST}"),
])
def test_an_unpinned_registry_dataset_is_refused_with_the_pin_line(run, tmp_path, dataset, registry_jobs, line):
    if registry_jobs:
        as_registry_run(run)
    before = tree_hash(run)
    result = build(run, tmp_path / "out", "--dataset", dataset)
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert result.stderr.splitlines()[0] == REFUSED
    assert lines[0] == "run sx: does NOT meet the Terminal-Bench leaderboard rules (1 problem):", result.stdout
    assert line in lines[1] and lines[1].startswith("  - "), result.stdout
    assert not any("DATASET=" in x for x in lines[2:] + result.stderr.splitlines())
    assert not (tmp_path / "out").exists()
    assert tree_hash(run) == before


@pytest.mark.parametrize("pinned", ["@6", f"@{DIGEST}"])
def test_a_registry_dataset_pinned_by_revision_or_its_digest_is_built(run, tmp_path, pinned):
    as_registry_run(run)
    result = build(run, tmp_path / "out", "--dataset", REGISTRY + pinned)
    assert result.exit_code == 0, result.output


def test_a_run_whose_jobs_ran_two_registry_versions_is_refused(run, tmp_path):
    as_registry_run(run)
    cfg = json.loads((run / RETRY_JOB / "config.json").read_text())
    cfg["datasets"] = [{"name": REGISTRY, "ref": "sha256:" + "f" * 64}]
    (run / RETRY_JOB / "config.json").write_text(json.dumps(cfg))
    shutil.copy(run / JOB / "lock.json", run / RETRY_JOB / "lock.json")
    result = build(run, tmp_path / "out", "--dataset", REGISTRY + "@6")
    assert result.exit_code == 1
    assert (f"  - the run's jobs ran 2 versions of {REGISTRY} ({DIGEST}, sha256:{'f' * 64}): a resume "
            f"resolved an unpinned dataset again") in result.stdout
