#!/usr/bin/env python3
"""Regenerate the bundled example run under examples/jobs/ (deterministic: same bytes every time).

    .venv/bin/python examples/make_example.py [OUT_DIR]   (default: examples/, writing OUT_DIR/jobs/...)

The example is what `make tally` shows when no run is given: a terminus-2 run of
Qwen3.8-27B-FP8 on twelve Terminal-Bench 2.1 tasks, written with harbor 0.26's own
pydantic models by the same writer the tests use (tests/fixtures/harbor_jobs.py), in
the state a real run reaches after a first pass, a resume pass and one retry job:

    examples/jobs/example-terminus2-tb21/          first pass + a `harbor job resume` pass
    examples/jobs/example-terminus2-tb21-retry-1/  a standalone retry job (after a server relaunch)

Each of the 13 tasks exercises one rule of env/outcome-policy.yaml (see first_job and
retry_job). Expected tally (default accounting): 4 passed, 4 failed, 3 errored,
1 unclassified, 1 unfinished; pass rate 50.00% (4/8). With --timeouts-unscored:
3 passed, 3 failed, 5 errored; 50.00% (3/6). tests/test_tally_example.py pins these.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.fixtures.harbor_jobs import TrialSpec, write_job  # noqa: E402

JOB = "example-terminus2-tb21"
# The dataset the run file names, and the commit the example's lock.json records for it: a
# stand-in, as the tasks are (make pin RUN=example-terminus2 DRY_RUN=1 shows it as the pin).
DATASET_REPO = "https://huggingface.co/datasets/harborframework/terminal-bench-2.1"
DATASET_COMMIT = "5d1f0c2a9e8b7d6c5b4a39281706f5e4d3c2b1a0"

# A NonZeroAgentExitCodeError message the way harbor's _classify_exec_error writes it.
APT_MIRROR = (
    "Command failed (exit 100): apt-get update && apt-get install -y curl\n"
    "stdout: Hit:1 http://deb.debian.org/debian bullseye InRelease\n"
    "stderr: E: Release file for http://security.debian.org/debian-security/dists/"
    "bullseye-security/InRelease is expired (invalid since 12d 4h 3min 11s). "
    "Updates for this repository will not be applied."
)
CONTEXT_WINDOW = (
    "Command failed (exit 1): mini-swe-agent --yolo --model=openai/Qwen/Qwen3.8-27B-FP8 "
    "-c model.model_kwargs.timeout=3600 --exit-immediately\n"
    "stdout: litellm.ContextWindowExceededError: This model's maximum context length is "
    "262144 tokens. However, your messages resulted in 263017 tokens.\nstderr: "
)


def trajectory(task: str, steps: int) -> dict[str, str]:
    """A few hundred bytes standing in for agent/trajectory.json (real ones are megabytes)."""
    body = {"schema_version": "ATIF-v1.2", "task": task,
            "steps": [{"step_id": i + 1, "source": "agent", "message": f"step {i + 1}"} for i in range(steps)]}
    return {"trajectory.json": json.dumps(body, indent=1) + "\n"}


def first_job() -> list[TrialSpec]:
    """Pass 1 (finished 01:00-05:00 after T0) and a resume pass (06:00 onwards)."""
    S = TrialSpec
    return [
        S("fix-git", 1.0, finished=62, tokens=(310_000, 240_000, 12_500), agent_files=trajectory("fix-git", 3)),
        S("regex-log", 0.0, finished=75, tokens=(420_000, 300_000, 21_000), agent_files=trajectory("regex-log", 4)),
        # AgentTimeoutError: the verifier still ran (docs/harbor.md §2), so these are scored.
        S("build-pov-ray", 0.0, "AgentTimeoutError", "Agent execution timed out after 3600.0 seconds",
          finished=124, agent_minutes=60, tokens=(2_900_000, 2_400_000, 160_000), agent_files=trajectory("build-pov-ray", 6)),
        S("cobol-modernization", 1.0, "AgentTimeoutError", "Agent execution timed out after 3600.0 seconds",
          finished=131, agent_minutes=60, tokens=(2_400_000, 2_000_000, 140_000), agent_files=trajectory("cobol-modernization", 6)),
        S("path-tracing", 0.0, "ContextWindowExceededError", CONTEXT_WINDOW, finished=150, agent_minutes=45,
          tokens=(5_200_000, 4_800_000, 90_000), agent_files=trajectory("path-tracing", 5)),
        # Infra: retried below in the retry job.
        S("circuit-fibsqrt", None, "SandboxError", "Sandbox API error (503): upstream connect error",
          finished=88, agent_minutes=12, tokens=(150_000, 100_000, 7_000), agent_files=trajectory("circuit-fibsqrt", 2)),
        S("feal-linear-cryptanalysis", None, "ReadTimeout", "timed out", finished=97, agent_minutes=20,
          tokens=(260_000, 200_000, 11_000), agent_files=trajectory("feal-linear-cryptanalysis", 2)),
        S("query-optimize", None, "CancelledError", "", finished=301, agent_minutes=8, tokens=(90_000, 60_000, 4_000),
          agent_files=trajectory("query-optimize", 1)),
        # NonZeroAgentExitCodeError family: infra by message (with a reward), genuine by message (without).
        S("qemu-startup", 0.0, "NonZeroAgentExitCodeError", APT_MIRROR, finished=140, agent_minutes=3,
          tokens=(0, 0, 0), agent_files=trajectory("qemu-startup", 1)),
        S("password-recovery", None, "NonZeroAgentExitCodeError", CONTEXT_WINDOW, finished=170, agent_minutes=50,
          tokens=(6_100_000, 5_700_000, 70_000), agent_files=trajectory("password-recovery", 5)),
        # A type the policy deliberately leaves to a human.
        S("git-multibranch", None, "VerifierTimeoutError", "Verifier execution timed out after 900.0 seconds",
          finished=210, agent_minutes=25, tokens=(700_000, 560_000, 31_000), agent_files=trajectory("git-multibranch", 4)),
        # Pass 1 left a truncated result.json (harbor killed mid-write); harbor's resume keeps such a
        # dir and re-runs the task in a new one, which passed.
        S("sqlite-with-gcov", raw_result='{\n    "id": "0b5e", "task_name": "sqlite-with-gcov",\n    "trial_na'),
        S("sqlite-with-gcov", 1.0, finished=380, attempt=1, tokens=(530_000, 410_000, 24_000),
          agent_files=trajectory("sqlite-with-gcov", 4)),
        # Crashed (no result.json) and never re-run yet: unfinished, a retry target.
        S("schemelike-metacircular-eval", finished=None, agent_files=trajectory("schemelike-metacircular-eval", 1)),
    ]


def retry_job() -> list[TrialSpec]:
    """`make mopup`'s standalone retry job: only the infra tasks, against a relaunched server."""
    S = TrialSpec
    return [
        S("circuit-fibsqrt", 1.0, finished=24 * 60 + 40, tokens=(880_000, 700_000, 38_000),
          agent_files=trajectory("circuit-fibsqrt", 5)),
        S("feal-linear-cryptanalysis", None, "ReadTimeout", "timed out", finished=24 * 60 + 55, agent_minutes=20,
          tokens=(240_000, 190_000, 9_000), agent_files=trajectory("feal-linear-cryptanalysis", 2)),
    ]


def write_lock(job_dir: Path) -> None:
    """The job's lock.json as harbor 0.26.0 writes it when a job starts (its own JobLock model):
    each trial's task resolved to DATASET_REPO at DATASET_COMMIT, harbor's version, a fixed time."""
    from datetime import datetime, timezone
    from hashlib import sha256

    from harbor.models.job.config import JobConfig
    from harbor.models.job.lock import HarborLockInfo, JobLock, TaskLock, TrialLock, VerifierLock
    from harbor.models.trial.config import TrialConfig

    cfg = JobConfig.model_validate_json((job_dir / "config.json").read_text())
    trials = []
    for trial_dir in sorted(p for p in job_dir.iterdir() if (p / "config.json").is_file()):
        tc = TrialConfig.model_validate_json((trial_dir / "config.json").read_text())
        name = tc.task.get_task_id().get_name()
        task = TaskLock(name=name, type="git", digest="sha256:" + sha256(name.encode()).hexdigest(),
                        git_url=DATASET_REPO, git_commit_id=DATASET_COMMIT)
        trials.append(TrialLock(task=task, agent=tc.agent, environment=tc.environment,
                                verifier=VerifierLock(**tc.verifier.model_dump()),
                                agent_timeout_multiplier=tc.agent_timeout_multiplier))
    lock = JobLock(created_at=datetime(2026, 9, 3, 4, 3, tzinfo=timezone.utc), harbor=HarborLockInfo(version="0.26.0"),
                   n_concurrent_trials=cfg.n_concurrent_trials, retry=cfg.retry, trials=trials)
    (job_dir / "lock.json").write_text(lock.model_dump_json(indent=4, exclude_defaults=True) + "\n")


def main(out: Path = HERE) -> None:
    out.mkdir(parents=True, exist_ok=True)
    os.chdir(out)  # relative paths in every config.json: the bytes do not depend on the checkout
    jobs, dataset = Path("jobs"), Path("dataset")
    # Only this example's own job dirs: examples/jobs/ also holds other examples.
    for name in (JOB, f"{JOB}-retry-1"):
        shutil.rmtree(jobs / name, ignore_errors=True)
    try:
        write_job(jobs, JOB, first_job(), dataset=dataset, uri_root="file:///data")
        write_job(jobs, f"{JOB}-retry-1", retry_job(), dataset=dataset, scoped=True, uri_root="file:///data")
        for name in (JOB, f"{JOB}-retry-1"):
            write_lock(jobs / name)
    finally:
        # The stand-in task dirs only let harbor's JobPlan build the trial configs; the
        # configs keep naming `dataset/<task>` (as harbor records a local -p dataset).
        shutil.rmtree(dataset, ignore_errors=True)
    print(f"wrote {out / 'jobs' / JOB} and {out / 'jobs' / (JOB + '-retry-1')}")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else HERE)
