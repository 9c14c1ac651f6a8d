"""make pin (scripts/pin.sh, tools/hub/pin.py) and the unpinned inputs make print marks.

Job dirs carry a lock.json written with harbor 0.26.0's own JobLock model, the way harbor
records a `--repo` dataset (every task resolved to a git URL and commit) or a registry dataset (each
task a package of the dataset, the dataset's resolved version in the job's config.json).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harbor.models.job.config import RetryConfig
from harbor.models.job.lock import HarborLockInfo, JobLock, TaskLock, TrialLock, VerifierLock
from harbor.models.trial.config import AgentConfig, EnvironmentConfig

from tests.fixtures import hostile
from tools import safe_read

REPO = Path(__file__).resolve().parents[1]

URL = "https://huggingface.co/datasets/harborframework/terminal-bench-2.1"
SHA_A = "a" * 40
SHA_B = "b" * 40
RUN_FILE = "# a run\nSERVER=qwen3.8-27b-fp8-sglang-h200\nJOB_NAME=job\nDATASET_REPO=" + URL + "\n"


def write_lock(job_dir: Path, commits: dict[str, str], version: str = "0.25.0", url: str = URL) -> None:
    """lock.json with one trial per task, each resolved to `url` at its commit."""
    trials = [TrialLock(task=TaskLock(name=task, type="git", digest="sha256:" + "0" * 64, git_url=url,
                                      git_commit_id=sha),
                        agent=AgentConfig(name="oracle"), environment=EnvironmentConfig(), verifier=VerifierLock())
              for task, sha in commits.items()]
    job_dir.mkdir(parents=True, exist_ok=True)
    lock = JobLock(harbor=HarborLockInfo(version=version), n_concurrent_trials=3,
                   retry=RetryConfig(), trials=trials)
    (job_dir / "lock.json").write_text(lock.model_dump_json(indent=4))


def plan(tmp_path: Path, *extra: str, run_file: str = RUN_FILE) -> subprocess.CompletedProcess:
    rf = tmp_path / "run.env"
    if not rf.exists():
        rf.write_text(run_file)
    return subprocess.run([sys.executable, "-m", "tools.hub.pin", "plan", "--jobs-dir", str(tmp_path / "jobs"),
                           "--job-name", "job", "--run-file", str(rf), *extra], capture_output=True, text=True)


def test_harbor_names_pin_relies_on():
    """harbor 0.26.0's lock model: the fields tools/hub/pin.py reads."""
    assert {"harbor", "trials"} <= set(JobLock.model_fields)
    assert "version" in HarborLockInfo.model_fields
    assert {"type", "git_url", "git_commit_id"} <= set(TaskLock.model_fields)
    assert "task" in TrialLock.model_fields


def test_pin_writes_exactly_the_dataset_commit_the_jobs_ran(tmp_path):
    write_lock(tmp_path / "jobs" / "job", {"t1": SHA_A, "t2": SHA_A})
    write_lock(tmp_path / "jobs" / "job-retry-1", {"t1": SHA_A})
    proc = plan(tmp_path, "--write")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "run.env").read_text() == RUN_FILE + f"DATASET_REF={SHA_A}\n"
    assert proc.stdout.splitlines()[-1] == f"+DATASET_REF={SHA_A}"
    assert f"pin: dataset: {URL} at {SHA_A}" in proc.stderr
    assert "pin: harbor: 0.25.0 wrote these jobs" in proc.stderr
    # Again: already pinned, nothing to change, the file untouched.
    again = plan(tmp_path, "--write")
    assert again.returncode == 0 and again.stdout == ""
    assert "(already pinned)" in again.stderr and "nothing to change" in again.stderr
    assert (tmp_path / "run.env").read_text() == RUN_FILE + f"DATASET_REF={SHA_A}\n"


def test_an_empty_dataset_ref_line_is_replaced_in_place(tmp_path):
    write_lock(tmp_path / "jobs" / "job", {"t1": SHA_A})
    text = RUN_FILE.replace("JOB_NAME=job\n", "JOB_NAME=job\nDATASET_REF=\n")
    (tmp_path / "run.env").write_text(text)
    assert plan(tmp_path, "--write").returncode == 0
    assert (tmp_path / "run.env").read_text() == text.replace("DATASET_REF=\n", f"DATASET_REF={SHA_A}\n")


@pytest.mark.parametrize("case, expect", [
    ("two-commits", "ran tasks from 2 dataset commits: " + SHA_A),
    ("other-pin", f"pins DATASET_REF={SHA_B}, but the jobs of job ran {SHA_A}"),
    ("no-lock", "no lock.json in the jobs of job"),
    # No jobs dir at all (a run never benched here): one line, not a traceback.
    ("no-jobs-dir", "(pass the --jobs-dir that harbor wrote to, or set JOBS_DIR in the run file); nothing to pin "
                    "before a bench (make bench)"),
    ("broken-lock", "is not a lock.json harbor 0.26.0 can read"),
    # A trailing newline passed the sha check ("$" matches before it) and added a blank line.
    ("newline-commit", f"the recorded dataset commit '{SHA_A}\\n' is not a 40-hex sha: pin by hand"),
    # Printed as escapes, never as the terminal's own control sequences.
    ("escapes-in-url", f"ran tasks from 2 dataset commits: {SHA_A} (https://x\\x1b]0;pwned\\x07/ds), {SHA_B} "),
])
def test_what_cannot_be_pinned_is_one_line_and_changes_nothing(tmp_path, case, expect):
    run_file = RUN_FILE
    if case == "two-commits":
        write_lock(tmp_path / "jobs" / "job", {"t1": SHA_A, "t2": SHA_B})
    elif case == "other-pin":
        write_lock(tmp_path / "jobs" / "job", {"t1": SHA_A})
        run_file = RUN_FILE + f"DATASET_REF={SHA_B}\n"
    elif case == "newline-commit":
        write_lock(tmp_path / "jobs" / "job", {"t1": SHA_A + "\n"})
    elif case == "escapes-in-url":
        write_lock(tmp_path / "jobs" / "job", {"t1": SHA_A, "t2": SHA_B}, url="https://x\x1b]0;pwned\x07/ds")
    elif case == "no-lock":
        (tmp_path / "jobs" / "job").mkdir(parents=True)
    elif case == "no-jobs-dir":
        pass
    else:
        (tmp_path / "jobs" / "job").mkdir(parents=True)
        (tmp_path / "jobs" / "job" / "lock.json").write_text('{"trials": "no"}')
    (tmp_path / "run.env").write_text(run_file)
    proc = plan(tmp_path, "--write")
    assert proc.returncode == 1
    assert expect in proc.stderr and "Traceback" not in proc.stderr
    assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr
    assert (tmp_path / "run.env").read_text() == run_file


def test_the_server_image_is_said_pinned_or_how_to_pin_it(tmp_path):
    write_lock(tmp_path / "jobs" / "job", {"t1": SHA_A})
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text(json.dumps({"event": "serve", "settings": {"SERVER_IMAGE": "lmsysorg/sglang:latest"}}) + "\n"
                        + "{torn line\n")
    proc = plan(tmp_path, "--manifest", str(manifest))
    assert "pin: server image: lmsysorg/sglang:latest is a tag, and HF's job record has no resolved digest" in proc.stderr
    digest = "lmsysorg/sglang@sha256:" + "c" * 64
    manifest.write_text(json.dumps({"event": "serve", "settings": {"SERVER_IMAGE": digest}}) + "\n")
    proc = plan(tmp_path, "--manifest", str(manifest))
    assert f"pin: server image: {digest} (pinned by digest)" in proc.stderr


@pytest.mark.parametrize("kind", ["fifo", "oversized"])  # a directory: click's own Path check refuses it
def test_a_manifest_that_cannot_be_read_is_named_and_the_run_file_is_left(tmp_path, kind):
    write_lock(tmp_path / "jobs" / "job", {"t1": SHA_A})
    manifest = tmp_path / "manifest.jsonl"
    reason = hostile.make(manifest, kind, safe_read.MANIFEST_CAP, "a run's manifest.jsonl")
    proc = plan(tmp_path, "--manifest", str(manifest), "--write")
    assert proc.returncode == 1
    assert (f"cannot read {manifest} ({reason}): the server image the run launched is recorded there; put the "
            f"run's own manifest back") in proc.stderr
    assert (tmp_path / "run.env").read_text() == RUN_FILE


def script_env(tmp_path: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "CLI_SETTINGS", "DRY_RUN", "WHERE", "JOBS_DIR")}
    env.update(STATE_ROOT=str(tmp_path / "state"), **extra)
    return env


def test_make_pin_on_the_bundled_example_shows_the_pin_and_writes_nothing(tmp_path):
    run_file = REPO / "runs/example-terminus2.env"
    before = run_file.read_bytes()
    proc = subprocess.run([str(REPO / "scripts/pin.sh")], env=script_env(tmp_path, RUN="example-terminus2", DRY_RUN="1"),
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:2] == ["--- a/runs/example-terminus2.env", "+++ b/runs/example-terminus2.env"]
    assert proc.stdout.splitlines()[-1] == "+DATASET_REF=5d1f0c2a9e8b7d6c5b4a39281706f5e4d3c2b1a0"
    assert "pin: dry run: runs/example-terminus2.env is unchanged" in proc.stderr
    assert run_file.read_bytes() == before and not (tmp_path / "state").exists()
    # Without DRY_RUN: refused, the example's run file describes the shipped job dirs.
    real = subprocess.run([str(REPO / "scripts/pin.sh")], env=script_env(tmp_path, RUN="example-terminus2"),
                          capture_output=True, text=True, cwd=REPO)
    assert real.returncode == 1 and "is a bundled example" in real.stderr
    assert run_file.read_bytes() == before and not (tmp_path / "state").exists()


def printed_unpinned(tmp_path: Path, **settings: str) -> list[str]:
    proc = subprocess.run([str(REPO / "scripts/print.sh")], env=script_env(tmp_path, RUN="qwen-t2", **settings),
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(("# unpinned", "# pinned")))
    return lines[start:]


def test_print_marks_every_unpinned_input(tmp_path):
    assert printed_unpinned(tmp_path) == [
        "# unpinned inputs (the Python packages are pinned by env/requirements.lock):",
        "#   - SERVER_IMAGE=lmsysorg/sglang:v0.5.23 is a tag, which can move: pin a digest, "
        "SERVER_IMAGE=<repository>@sha256:<digest>",
        f"#   - the dataset {URL} has no DATASET_REF, so every resume re-resolves its HEAD: after a run, "
        "make pin RUN=qwen-t2 writes the commit it ran"]
    image = "lmsysorg/sglang@sha256:" + "c" * 64
    assert printed_unpinned(tmp_path, SERVER_IMAGE=image, DATASET_REF=SHA_A) == [
        "# pinned: every input (the Python packages by env/requirements.lock)"]
    remote = printed_unpinned(tmp_path, SERVER_IMAGE=image, DATASET_REF=SHA_A, WHERE="hf", BUCKET="alice/tb")
    assert remote[1:] == ["#   - BENCH_IMAGE=python:3.12 (the remote job's image) is a tag: pin a digest, "
                          "BENCH_IMAGE=<repository>@sha256:<digest>"]


# --- a registry dataset (DATASET=org/name[@ref], harbor run -d) ------------------------------------

REGISTRY = "terminal-bench/terminal-bench-2-1"
DIGEST_A = "sha256:" + "a" * 64
DIGEST_B = "sha256:" + "b" * 64
REGISTRY_RUN = "# a run\nSERVER=qwen3.8-27b-fp8-sglang-h200\nJOB_NAME=job\nDATASET=" + REGISTRY + "\n"
MODEL = "Qwen/Qwen3.8-27B-FP8"


def write_registry_job(job_dir: Path, ref: str, tasks=("fix-git", "regex-log"), model: str = MODEL) -> None:
    """A job of a registry dataset as harbor 0.26.0 leaves it: config.json with the dataset's ref
    resolved to its version's digest, lock.json with each task a package of that dataset."""
    from harbor.models.job.config import DatasetConfig, JobConfig

    job_dir.mkdir(parents=True, exist_ok=True)
    config = JobConfig(job_name=job_dir.name, jobs_dir=job_dir.parent,
                       agents=[AgentConfig(name="terminus-2", model_name=f"openai/{model}")],
                       datasets=[DatasetConfig(name=REGISTRY, ref=ref)])
    (job_dir / "config.json").write_text(config.model_dump_json(indent=4))
    trials = [TrialLock(task=TaskLock(name=f"terminal-bench/{t}", type="package", digest="sha256:" + "0" * 64,
                                      source=REGISTRY),
                        agent=AgentConfig(name="terminus-2"), environment=EnvironmentConfig(), verifier=VerifierLock())
              for t in tasks]
    lock = JobLock(harbor=HarborLockInfo(version="0.26.0"), n_concurrent_trials=3, retry=RetryConfig(), trials=trials)
    (job_dir / "lock.json").write_text(lock.model_dump_json(indent=4))


def test_harbor_records_the_registry_version_it_resolved_in_the_jobs_config():
    """What pin reads: harbor 0.26.0 rewrites a package dataset's ref to the resolved version's digest
    (the config.json it writes as the job starts holds it) and takes a revision, a tag or a digest after @."""
    import inspect

    from harbor.models.job.config import DatasetConfig
    from harbor.models.package.version_ref import RefType, VersionRef
    from harbor.registry.client import package

    resolve = inspect.getsource(DatasetConfig._get_package_task_configs)
    assert "self.ref = metadata.version" in resolve
    assert 'version=f"sha256:{dataset_version.get(\'content_hash\')}",' in inspect.getsource(package)
    assert [VersionRef.parse(r).type for r in ("6", DIGEST_A, "latest", "v2.1")] == \
        [RefType.REVISION, RefType.DIGEST, RefType.TAG, RefType.TAG]
    assert DatasetConfig(name=REGISTRY, ref="6").is_package()


def test_pin_writes_the_registry_version_the_jobs_ran(tmp_path):
    write_registry_job(tmp_path / "jobs" / "job", DIGEST_A)
    write_registry_job(tmp_path / "jobs" / "job-retry-1", DIGEST_A, tasks=("fix-git",))
    proc = plan(tmp_path, "--write", "--model", MODEL, run_file=REGISTRY_RUN)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "run.env").read_text() == REGISTRY_RUN.replace(f"DATASET={REGISTRY}\n",
                                                                      f"DATASET={REGISTRY}@{DIGEST_A}\n")
    assert f"pin: dataset: {REGISTRY} at {DIGEST_A} (the version its jobs ran)" in proc.stderr
    assert "DATASET_REF" not in (tmp_path / "run.env").read_text()
    again = plan(tmp_path, "--write", "--model", MODEL)
    assert again.returncode == 0 and again.stdout == "" and "(already pinned)" in again.stderr


@pytest.mark.parametrize("pinned, change", [
    ("@6", None),                      # a revision: the version the leaderboard is bound to; kept
    ("@latest", f"@{DIGEST_A}"),       # a tag can move: the digest that ran replaces it
    ("@v2.1", f"@{DIGEST_A}"),
])
def test_a_registry_revision_is_a_pin_and_a_tag_is_not(tmp_path, pinned, change):
    write_registry_job(tmp_path / "jobs" / "job", DIGEST_A)
    run_file = REGISTRY_RUN.replace(f"DATASET={REGISTRY}\n", f"DATASET={REGISTRY}{pinned}\n")
    proc = plan(tmp_path, "--write", run_file=run_file)
    assert proc.returncode == 0, proc.stderr
    want = run_file if change is None else run_file.replace(pinned, change)
    assert (tmp_path / "run.env").read_text() == want
    if change is None:
        assert f"pin: dataset: {REGISTRY} at {DIGEST_A} (pinned by revision 6, which the Hub resolves)" in proc.stderr


@pytest.mark.parametrize("case, expect", [
    ("two-versions", f"ran 2 registry dataset versions: {REGISTRY}@{DIGEST_A}, {REGISTRY}@{DIGEST_B}"),
    ("other-digest", f"pins DATASET={REGISTRY}@{DIGEST_B}, but the jobs of job ran {REGISTRY}@{DIGEST_A}"),
    ("unresolved", f"recorded {REGISTRY} at 'latest', not the version harbor resolves it to"),
    # A job dir of the run's name that ran another model is another run's: refused, as the tally does.
    ("other-model", "ran model 'openai/other/model' (its config.json), not the run's MODEL Qwen/Qwen3.8-27B-FP8"),
])
def test_what_registry_pin_cannot_write_is_one_line_and_changes_nothing(tmp_path, case, expect):
    run_file = REGISTRY_RUN
    write_registry_job(tmp_path / "jobs" / "job", "latest" if case == "unresolved" else DIGEST_A)
    if case == "two-versions":
        write_registry_job(tmp_path / "jobs" / "job-retry-1", DIGEST_B)
    elif case == "other-digest":
        run_file = REGISTRY_RUN.replace(f"DATASET={REGISTRY}\n", f"DATASET={REGISTRY}@{DIGEST_B}\n")
    elif case == "other-model":
        write_registry_job(tmp_path / "jobs" / "job-retry-1", DIGEST_A, model="other/model")
    (tmp_path / "run.env").write_text(run_file)
    proc = plan(tmp_path, "--write", "--model", MODEL)
    assert proc.returncode == 1
    assert expect in proc.stderr and "Traceback" not in proc.stderr
    assert (tmp_path / "run.env").read_text() == run_file
