#!/usr/bin/env python3
"""Regenerate the bundled finished k = 5 example under examples/jobs/ (deterministic: the same bytes).

    .venv/bin/python examples/make_example_leaderboard_complete.py [OUT_DIR]   (default: examples/)

runs/example-leaderboard-complete.env: the k = 5 example (runs/example-leaderboard.env, written by
examples/make_example_leaderboard.py) as it stands once `make mopup` has filled its last open slots,
so that `make submission` has something to accept offline, beside the example it refuses. Written
with harbor 0.26's own pydantic models (tests/fixtures/harbor_jobs.py for the job dirs, harbor's
Trajectory for each agent/trajectory.json, JobLock through examples/make_example.py write_lock):

    examples/jobs/example-leaderboard-complete-tb21/          -k 5: the same 30 attempts as the k = 5 example
    examples/jobs/example-leaderboard-complete-tb21-retry-1/  the same retry job: build-pov-ray's errored slot,
                                                              path-tracing's crashed one, a circuit-fibsqrt re-roll
    examples/jobs/example-leaderboard-complete-tb21-retry-2/  mop-up's -k 2 job for cobol-modernization's two
                                                              errored slots (its two ReadTimeouts): both passed

Every trial whose agent ran has a valid ATIF agent/trajectory.json; every job has a lock.json, and
the first one's (a job that ran the dataset unfiltered) lists its six tasks. Slots per task
(`make tally RUN=example-leaderboard-complete`): every one filled, 15 of 30 passed:

    fix-git ✓✓✓✓✓  regex-log ✓✗✓✗✓  build-pov-ray ✗✓✗✗✓  cobol-modernization ✓✓✓✓✓
    path-tracing ✗✗✗✗✗  circuit-fibsqrt ✗✗✗✗✗

`make submission RUN=example-leaderboard-complete` submits 30 trial dirs (6 tasks × 5) and leaves
out 5: build-pov-ray's SandboxError, cobol-modernization's two ReadTimeouts, path-tracing's crashed
attempt and circuit-fibsqrt's oldest attempt (re-rolled). tests/test_submission.py pins both
examples; tests/test_submission_slots.py checks this script writes these very bytes.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from examples.make_example import write_lock  # noqa: E402
from examples.make_example_leaderboard import K, first_job, retry_job, with_trajectories  # noqa: E402
from tests.fixtures.harbor_jobs import TrialSpec, write_job  # noqa: E402

JOB = "example-leaderboard-complete-tb21"


def mopup_job() -> list[TrialSpec]:
    """make mopup's retry job two days in: cobol-modernization's two open slots, -k 2."""
    return [TrialSpec("cobol-modernization", 1.0, finished=2 * 24 * 60 + 20, attempt=0),
            TrialSpec("cobol-modernization", 1.0, finished=2 * 24 * 60 + 35, attempt=1)]


def main(out: Path = HERE) -> None:
    out.mkdir(parents=True, exist_ok=True)
    os.chdir(out)  # relative paths in every config.json: the bytes do not depend on the checkout
    jobs, dataset = Path("jobs"), Path("dataset")
    names = (JOB, f"{JOB}-retry-1", f"{JOB}-retry-2")
    for name in names:  # only this example's own job dirs: examples/jobs/ holds the others too
        shutil.rmtree(jobs / name, ignore_errors=True)
    try:
        common = dict(dataset=dataset, uri_root="file:///data", multiplier=1.0)
        write_job(jobs, names[0], with_trajectories(names[0], first_job()), n_attempts=K, **common)
        write_job(jobs, names[1], with_trajectories(names[1], retry_job()), scoped=True, **common)
        write_job(jobs, names[2], with_trajectories(names[2], mopup_job()), scoped=True, n_attempts=2, **common)
        for name in names:
            write_lock(jobs / name)
    finally:
        shutil.rmtree(dataset, ignore_errors=True)
    print("wrote " + ", ".join(str(out / "jobs" / name) for name in names))


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else HERE)
