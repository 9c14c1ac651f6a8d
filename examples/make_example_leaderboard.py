#!/usr/bin/env python3
"""Regenerate the bundled k = 5 example under examples/jobs/ (deterministic: same bytes every time).

    .venv/bin/python examples/make_example_leaderboard.py [OUT_DIR]   (default: examples/)

A leaderboard-style run (runs/example-leaderboard.env): terminus-2 with Qwen3.8-27B-FP8 on
six Terminal-Bench 2.1 tasks, 5 attempts per task (harbor's -k 5), the tasks' own timeouts,
written with harbor 0.26's own pydantic models by the writer the tests use
(tests/fixtures/harbor_jobs.py), as a run looks after its first job and one retry job:

    examples/jobs/example-leaderboard-tb21/          -k 5: 30 trials, some infra-errored, one crashed
    examples/jobs/example-leaderboard-tb21-retry-1/  a retry job: an errored and a crashed slot filled, one re-roll

Slots per task (the latest 5 settled trials, oldest first; `make tally RUN=example-leaderboard`):

    fix-git              ✓✓✓✓✓   5 passed
    regex-log            ✓✗✓✗✓   alternating
    build-pov-ray        ✗✓✗✗✓   attempt 3 a SandboxError, its slot filled by the retry job
    cobol-modernization  ✓✓✓EE   two ReadTimeouts, not retried yet
    path-tracing         ✗✗✗✗✗   one AgentTimeoutError (reward 0, scored); attempt 4 crashed (no result.json),
                                 its slot filled by the retry job
    circuit-fibsqrt      ✗✗✗✗✗   five failures, then a re-roll in the retry job (failed too): the oldest is
                                 listed, not counted

Every trial whose agent ran has a valid ATIF agent/trajectory.json (harbor's Trajectory model), as
a run's would: so `make submission RUN=example-leaderboard` is refused for its open slots alone, the
refusal this example is built to show (`make mopup`; runs/example-leaderboard-complete.env is the
same run with them filled). tests/test_tally_slots.py pins the tally of these files.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.fixtures.harbor_jobs import MODEL, TrialSpec, write_job  # noqa: E402

JOB = "example-leaderboard-tb21"
K = 5
TIMEOUT = "Agent execution timed out after 900.0 seconds"


def first_job() -> list[TrialSpec]:
    """harbor run -k 5: attempt i of every task finishes at hour i + 1 (minutes after T0)."""
    S = TrialSpec

    def at(i: int, j: int) -> int:
        return 60 * (i + 1) + 7 * j

    plan = {
        "fix-git": [1.0, 1.0, 1.0, 1.0, 1.0],
        "regex-log": [1.0, 0.0, 1.0, 0.0, 1.0],
        "build-pov-ray": [0.0, 1.0, "SandboxError", 0.0, 0.0],
        "cobol-modernization": [1.0, "ReadTimeout", 1.0, "ReadTimeout", 1.0],
        "path-tracing": [0.0, "AgentTimeoutError", 0.0, None, 0.0],
        "circuit-fibsqrt": [0.0, 0.0, 0.0, 0.0, 0.0],
    }
    specs = []
    for j, (task, attempts) in enumerate(plan.items()):
        for i, what in enumerate(attempts):
            if what is None:  # crashed: no result.json
                specs.append(S(task, finished=None, attempt=i))
            elif what == "AgentTimeoutError":  # a genuine limit: the verifier ran, reward 0
                specs.append(S(task, 0.0, what, TIMEOUT, finished=at(i, j), attempt=i, agent_minutes=15))
            elif isinstance(what, str):  # infra
                specs.append(S(task, None, what, "Sandbox API error (503)" if what == "SandboxError" else "timed out",
                               finished=at(i, j), attempt=i, agent_minutes=5))
            else:
                specs.append(S(task, what, finished=at(i, j), attempt=i))
    return specs


def retry_job() -> list[TrialSpec]:
    """A standalone retry job a day later: build-pov-ray's errored slot, path-tracing's crashed one, a re-roll."""
    S = TrialSpec
    return [
        S("build-pov-ray", 1.0, finished=24 * 60 + 30),
        S("path-tracing", 0.0, finished=24 * 60 + 40),
        S("circuit-fibsqrt", 0.0, finished=24 * 60 + 45),
    ]


def trajectory(job: str, spec: TrialSpec) -> dict[str, str]:
    """agent/trajectory.json in ATIF, through harbor's own model: a few hundred bytes standing in
    for a real one (megabytes): the task given, the agent's answer."""
    from harbor.models.trajectories.agent import Agent
    from harbor.models.trajectories.step import Step
    from harbor.models.trajectories.trajectory import Trajectory

    traj = Trajectory(
        session_id=f"{job}/{spec.task}/{spec.attempt}",
        agent=Agent(name="terminus-2", version="2.0.0", model_name=MODEL),
        steps=[Step(step_id=1, source="user", message=f"Solve {spec.task}."),
               Step(step_id=2, source="agent", model_name=MODEL, message=f"Worked on {spec.task}; done.")],
    )
    return {"trajectory.json": traj.model_dump_json(indent=2, exclude_none=True) + "\n"}


def with_trajectories(job: str, specs: list[TrialSpec]) -> list[TrialSpec]:
    """Every trial that finished ran its agent, which wrote its trajectory; a crashed one has none."""
    return [s if s.finished is None else dataclasses.replace(s, agent_files=trajectory(job, s)) for s in specs]


def main(out: Path = HERE) -> None:
    out.mkdir(parents=True, exist_ok=True)
    os.chdir(out)  # relative paths in every config.json: the bytes do not depend on the checkout
    jobs, dataset = Path("jobs"), Path("dataset")
    for name in (JOB, f"{JOB}-retry-1"):
        shutil.rmtree(jobs / name, ignore_errors=True)
    try:
        write_job(jobs, JOB, with_trajectories(JOB, first_job()), dataset=dataset, uri_root="file:///data",
                  n_attempts=K, multiplier=1.0)
        write_job(jobs, f"{JOB}-retry-1", with_trajectories(f"{JOB}-retry-1", retry_job()), dataset=dataset,
                  scoped=True, uri_root="file:///data", multiplier=1.0)
    finally:
        shutil.rmtree(dataset, ignore_errors=True)
    print(f"wrote {out / 'jobs' / JOB} and {out / 'jobs' / (JOB + '-retry-1')}")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else HERE)
