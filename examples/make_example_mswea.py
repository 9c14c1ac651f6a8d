#!/usr/bin/env python3
"""Write the bundled second example run: the same tasks as the terminus-2 example, under
mini-swe-agent, as harbor 0.26.0's own pydantic models would have written them.

Usage: .venv/bin/python examples/make_example_mswea.py [JOBS_DIR]   (default: examples/jobs)

Writes JOBS_DIR/example-mswea-tb21/ (refuses to overwrite it: delete it first). Deterministic:
fixed ids, trial names and timestamps, so a re-run gives byte-identical files. The job mirrors
the reference's Run 3 layout (`--jobs-dir .` in /data, one clean pass, no resume) and its kinds
of outcome: passes, genuine failures, an AgentTimeoutError with a reward, context-window
exhaustion surfacing as NonZeroAgentExitCodeError without one, and infrastructure errors (a
SandboxError, apt-get on an expired Debian mirror). Numbers are illustrative, not measured.
Expected tally (default accounting): 5 passed, 6 failed, 2 errored; 45.45% (5/11).
"""

from __future__ import annotations

import hashlib
import sys
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

from harbor.job_plan import JobPlan
from harbor.models.agent.context import AgentContext
from harbor.models.job.config import JobConfig
from harbor.models.job.result import JobResult, JobStats
from harbor.models.trial.config import AgentConfig, EnvironmentConfig, TaskConfig
from harbor.models.trial.result import AgentInfo, ExceptionInfo, ModelInfo, TimingInfo, TrialResult
from harbor.models.verifier.result import VerifierResult

JOB_NAME = "example-mswea-tb21"
DATASET = "https://huggingface.co/datasets/harborframework/terminal-bench-2.1"
MODEL = "Qwen/Qwen3.8-27B-FP8"
T0 = datetime(2026, 9, 3, 8, 0, tzinfo=timezone.utc)
NAMESPACE = uuid.UUID("6f1c1a52-5c55-4a43-9a57-0e4d5e1b7a01")

# The same NonZeroAgentExitCodeError messages as the terminus-2 example.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from examples.make_example import APT_MIRROR as APT_EXPIRED, CONTEXT_WINDOW  # noqa: E402

TIMEOUT = "Agent execution timed out after 3600.0 seconds"

# The same 13 tasks as examples/make_example.py (the terminus-2 example), one attempt each.
# task: (reward or None, exception type or None, message, agent minutes, tokens in, cache, out)
TRIALS = {
    "build-pov-ray": (0.0, "AgentTimeoutError", TIMEOUT, 60, 3_400_000, 0, 58_000),
    "circuit-fibsqrt": (0.0, None, None, 38, 1_940_000, 0, 41_800),
    "cobol-modernization": (0.0, None, None, 41, 2_050_000, 0, 44_100),
    "feal-linear-cryptanalysis": (None, "NonZeroAgentExitCodeError", CONTEXT_WINDOW, 52,
                                  8_410_000, 0, 66_200),
    "fix-git": (1.0, None, None, 6, 288_000, 0, 7_100),
    "git-multibranch": (1.0, None, None, 14, 702_000, 0, 16_400),
    "password-recovery": (1.0, None, None, 19, 930_000, 0, 21_500),
    "path-tracing": (None, "NonZeroAgentExitCodeError", CONTEXT_WINDOW, 47, 7_960_000, 0, 61_000),
    "qemu-startup": (0.0, "NonZeroAgentExitCodeError", APT_EXPIRED, 2, 0, 0, 0),
    "query-optimize": (0.0, None, None, 44, 2_610_000, 0, 38_700),
    "regex-log": (1.0, None, None, 9, 455_000, 0, 9_800),
    "schemelike-metacircular-eval": (None, "SandboxError",
                                     "Sandbox API error (503): upstream connect error", 21,
                                     1_050_000, 0, 25_600),
    "sqlite-with-gcov": (1.0, None, None, 23, 1_120_000, 0, 27_300),
}

ALPHABET = "23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"  # shortuuid's


def trial_suffix(task: str) -> str:
    digest = hashlib.sha256(f"{JOB_NAME}/{task}".encode()).digest()
    return "".join(ALPHABET[b % len(ALPHABET)] for b in digest[:7])


def main(jobs_dir: Path) -> None:
    job_dir = jobs_dir / JOB_NAME
    if job_dir.exists():
        sys.exit(f"make_example_mswea: {job_dir} exists; delete it first to regenerate")
    # As the reference ran it: --jobs-dir . inside /data, so the config says ".".
    cfg = JobConfig(
        job_name=JOB_NAME, jobs_dir=Path("."), n_concurrent_trials=3, agent_timeout_multiplier=4.0,
        environment=EnvironmentConfig(type="hf-sandbox", kwargs={"flavor": "cpu-upgrade", "job_timeout": "2h"}),
        agents=[AgentConfig(name="mini-swe-agent", model_name=f"openai/{MODEL}",
                            env={"OPENAI_API_KEY": "${OPENAI_API_KEY}",
                                 "OPENAI_BASE_URL": "${OPENAI_BASE_URL}"})],
        tasks=[TaskConfig(path=Path(name), git_url=DATASET, source="terminal-bench-2.1")
               for name in sorted(TRIALS)],
    )
    job_dir.mkdir(parents=True)
    (job_dir / "config.json").write_text(cfg.model_dump_json(indent=4, exclude_defaults=True) + "\n")
    job_id = uuid.uuid5(NAMESPACE, JOB_NAME)
    results = []
    start = T0
    for tc in JobPlan.build_trial_configs(cfg, cfg.tasks, job_id=job_id):
        name = tc.task.get_task_id().get_name()
        tc = tc.model_copy(update={"trial_name": f"{name[:32].rstrip('_-')}__{trial_suffix(name)}"})
        reward, exc, message, minutes, n_in, n_cache, n_out = TRIALS[name]
        tdir = job_dir / tc.trial_name
        for sub in ("agent", "verifier", "artifacts"):
            (tdir / sub).mkdir(parents=True)
        (tdir / "config.json").write_text(tc.model_dump_json(indent=4, exclude_defaults=True) + "\n")
        (tdir / "trial.log").write_text("example trial (generated by examples/make_example_mswea.py)\n")
        (tdir / "agent" / "mini-swe-agent.txt").write_text(f"example: {name}, no real trajectory\n")
        agent_start = start + timedelta(seconds=45)
        agent_end = agent_start + timedelta(minutes=minutes)
        end = agent_end + timedelta(seconds=30 if reward is not None else 1)
        if reward is not None:
            (tdir / "verifier" / "reward.txt").write_text(f"{reward:g}\n")
        res = TrialResult(
            id=uuid.uuid5(NAMESPACE, tc.trial_name), task_name=name, trial_name=tc.trial_name,
            trial_uri=f"file:///data/{JOB_NAME}/{tc.trial_name}", task_id=tc.task.get_task_id(),
            source=tc.task.source, task_checksum=hashlib.sha256(name.encode()).hexdigest(), config=tc,
            agent_info=AgentInfo(name="mini-swe-agent", version="example",
                                 model_info=ModelInfo(name=MODEL, provider="openai")),
            agent_result=AgentContext(n_input_tokens=n_in, n_cache_tokens=n_cache, n_output_tokens=n_out),
            verifier_result=None if reward is None else VerifierResult(rewards={"reward": reward}),
            exception_info=None if exc is None else ExceptionInfo(
                exception_type=exc, exception_message=message,
                exception_traceback=f"Traceback (most recent call last):\n  ...\n{exc}: {message}\n",
                occurred_at=agent_end),
            started_at=start, finished_at=end,
            environment_setup=TimingInfo(started_at=start, finished_at=start + timedelta(seconds=30)),
            agent_setup=TimingInfo(started_at=start + timedelta(seconds=30), finished_at=agent_start),
            agent_execution=TimingInfo(started_at=agent_start, finished_at=agent_end),
            verifier=None if reward is None else TimingInfo(started_at=agent_end, finished_at=end),
        )
        if exc:
            (tdir / "exception.txt").write_text(res.exception_info.exception_traceback)
        (tdir / "result.json").write_text(res.model_dump_json(indent=4) + "\n")
        results.append(res)
        start += timedelta(minutes=20)  # three at a time: starts staggered, not serial
    last = max(r.finished_at for r in results)
    job_result = JobResult(id=job_id, started_at=T0.replace(tzinfo=None), updated_at=last.replace(tzinfo=None),
                           finished_at=last.replace(tzinfo=None) + timedelta(seconds=5),
                           n_total_trials=len(results),
                           stats=JobStats.from_trial_results(results, n_total_trials=len(results)))
    (job_dir / "result.json").write_text(job_result.model_dump_json(indent=4, exclude={"trial_results"}) + "\n")
    (job_dir / "job.log").write_text("")
    print(job_dir)


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else here / "jobs")
