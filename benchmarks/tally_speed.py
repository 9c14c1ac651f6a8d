#!/usr/bin/env python3
"""How fast `tools/tally.py` reads a large run, and that agent/ size does not slow it down.

    .venv/bin/python benchmarks/tally_speed.py [--trials 50000] [--agent-files 10] [--scale 10]
                                               [--root DIR] [--keep]

Writes a synthetic run of --trials trials (harbor 0.25's own TrialResult JSON, spread
over a job dir and four retry jobs, two attempts per task) under a temporary dir, each
trial with an agent/ dir of --agent-files small files (terminus-2 writes a trajectory
and a recording; mini-swe-agent a log and two trajectories; real ones are megabytes).
It then times, on the same tree and in the same process:

  tally          tools.tally.tally() over the run's job dirs (reads <job>/<trial>/result.json only)
  TrialResult    reading the same result.json files and validating them with harbor's
                 TrialResult.model_validate_json (the obvious "use harbor's model" tally)
  glob           glob.glob("<jobs>/**/result.json", recursive=True): merely FINDING the
                 files the way a naive tally would, without reading any of them

Then it grows every agent/ dir --scale times (more files, same total per file) and
times all three again. Prints a Markdown table (paste it into docs/tally.md §5). Timings are
warm-cache (the tree was just written); tally is the median of 3 runs, the others 1.
The temporary tree is removed at the end unless --keep. Disk: about
trials * (agent_files * scale + 8) inodes and 4 KiB each.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from harbor.models.trial.result import TrialResult

from tests.fixtures.harbor_jobs import T0, TrialSpec, write_job
from tools.results import tally_core
from tools.results import tally_jobs
from tools.results import tally_policy

REPO = Path(__file__).resolve().parent.parent

JOB = "bench-terminus2-tb21"
N_JOB_DIRS = 5  # the job and 4 retry jobs
AGENT_FILE = b'{"step": 1, "source": "agent", "message": "' + b"x" * 400 + b'"}\n'

# (reward, exception type) cycled over the trials: a realistic mix of outcomes.
MIX = [(1.0, None), (0.0, None), (1.0, None), (0.0, "AgentTimeoutError"), (None, "SandboxError"),
       (1.0, None), (0.0, None), (None, "ReadTimeout"), (1.0, "AgentTimeoutError"), (0.0, None)]


def template(root: Path) -> TrialResult:
    """One genuine harbor-written result.json, used as the model for every trial."""
    job = write_job(root / "template-jobs", "template", [TrialSpec("template-task", 1.0)],
                    dataset=root / "template-dataset")
    path = next(job.glob("*/result.json"))
    return TrialResult.model_validate_json(path.read_text())


def write_tree(root: Path, n_trials: int, agent_files: int) -> Path:
    jobs = root / "jobs"
    base = template(root)
    job_dirs = [jobs / JOB] + [jobs / tally_jobs.retry_job_name(JOB, n) for n in range(1, N_JOB_DIRS)]
    for d in job_dirs:
        d.mkdir(parents=True)
        (d / "config.json").write_text("{}")
        (d / "result.json").write_text('{"n_total_trials": 0}')  # a job-level file: never a trial
    payload = AGENT_FILE
    for i in range(n_trials):
        task = f"task-{i // 2:06d}"  # two attempts per task
        name = f"{task}__{i:07d}"[:39]
        job_dir = job_dirs[i % N_JOB_DIRS]
        tdir = job_dir / name
        reward, exc = MIX[i % len(MIX)]
        res = base.model_copy(update={
            "task_name": task, "trial_name": name, "trial_uri": tdir.as_uri(),
            "finished_at": T0 + timedelta(seconds=i),
            "verifier_result": None if reward is None else base.verifier_result.model_copy(update={"rewards": {"reward": reward}}),
            "exception_info": None if exc is None else _exception(exc),
        })
        os.makedirs(tdir / "agent")
        os.mkdir(tdir / "verifier")
        with open(tdir / "result.json", "w") as f:
            f.write(res.model_dump_json(indent=4))
        with open(tdir / "config.json", "w") as f:
            f.write(res.config.model_dump_json(indent=4, exclude_defaults=True))
        with open(tdir / "trial.log", "w") as f:
            f.write("trial\n")
        _fill_agent(tdir / "agent", 0, agent_files, payload)
    return jobs


def _exception(exc: str):
    from harbor.models.trial.result import ExceptionInfo
    return ExceptionInfo(exception_type=exc, exception_message=f"bench {exc}",
                         exception_traceback="Traceback\n", occurred_at=T0)


def _fill_agent(agent: Path, start: int, stop: int, payload: bytes) -> None:
    for k in range(start, stop):
        fd = os.open(agent / f"episode-{k:04d}.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, payload)
        os.close(fd)


def grow_agent_dirs(jobs: Path, have: int, want: int) -> None:
    for job_dir in sorted(jobs.iterdir()):
        for entry in os.scandir(job_dir):
            if entry.is_dir():
                _fill_agent(Path(entry.path) / "agent", have, want, AGENT_FILE)


def timed(fn, repeats: int = 1) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def measure(jobs: Path, policy) -> dict:
    job_dirs = tally_jobs.run_job_dirs(jobs, JOB)
    assert len(job_dirs) == N_JOB_DIRS, job_dirs
    t_tally, report = timed(lambda: tally_core.tally(job_dirs, policy), repeats=3)
    paths = [os.path.join(d, e.name, "result.json") for d in job_dirs for e in os.scandir(d) if e.is_dir()]

    def load_with_harbor():
        out = []
        for p in paths:
            with open(p, "rb") as f:
                out.append(TrialResult.model_validate_json(f.read()))
        return out

    t_model, models = timed(load_with_harbor)
    t_glob, found = timed(lambda: glob.glob(f"{jobs}/**/result.json", recursive=True))
    n_trials = report["trial_dirs"]
    # glob also finds the job-level result.json files: the naive tally's first bug.
    assert len(models) == n_trials and len(found) == n_trials + N_JOB_DIRS, (len(models), len(found), n_trials)
    return {"trials": n_trials, "tasks": report["tasks"], "tally": t_tally, "model": t_model, "glob": t_glob,
            "passed": report["passed"], "scored": report["scored"]}


def count_files(jobs: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(jobs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=50_000)
    ap.add_argument("--agent-files", type=int, default=10)
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--root", help="parent dir for the temporary tree (default: the system temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the tree (prints its path)")
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="tally-speed-", dir=args.root))
    rows = []
    try:
        policy = tally_policy.load_policy()
        t0 = time.perf_counter()
        jobs = write_tree(root, args.trials, args.agent_files)
        print(f"wrote {args.trials} trials ({args.agent_files} agent files each) in "
              f"{time.perf_counter() - t0:.0f}s under {root}", file=sys.stderr)
        for files in (args.agent_files, args.agent_files * args.scale):
            if files != args.agent_files:
                t0 = time.perf_counter()
                grow_agent_dirs(jobs, args.agent_files, files)
                print(f"grew agent/ to {files} files in {time.perf_counter() - t0:.0f}s", file=sys.stderr)
            n_files = count_files(jobs)
            os.sync()  # let writeback of the files just written finish before timing reads
            m = measure(jobs, policy)
            m.update(agent_files=files, files=n_files)
            rows.append(m)
            print(f"measured agent/ = {files} files: {m}", file=sys.stderr)
    finally:
        if args.keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)

    print(f"Tally speed: {rows[0]['trials']:,} trials ({rows[0]['tasks']:,} tasks, 2 attempts each) in "
          f"{N_JOB_DIRS} job dirs; warm cache; {os.cpu_count()} CPUs; Python {sys.version.split()[0]}.\n")
    print("| agent/ files per trial | files in tree | tally | trials/s | harbor TrialResult load | "
          "tally faster by | recursive glob only | tally faster by |")
    print("|---|---|---|---|---|---|---|---|")
    for m in rows:
        print(f"| {m['agent_files']} | {m['files']:,} | {m['tally']:.2f} s | {m['trials'] / m['tally']:,.0f} | "
              f"{m['model']:.2f} s | {m['model'] / m['tally']:.1f}x | {m['glob']:.2f} s | {m['glob'] / m['tally']:.1f}x |")
    growth = rows[-1]["tally"] / rows[0]["tally"]
    print(f"\nTally time with {args.scale}x the agent/ files: {growth:.2f}x "
          f"(glob: {rows[-1]['glob'] / rows[0]['glob']:.2f}x).")


if __name__ == "__main__":
    main()
