"""make reproduce's mop-up step: how many passes, of what, and when to stop.

A pass is scripts/mopup.sh run under the run's lock; what it would retry is mop-up's own
selection (`python -m tools.run.reproduce targets`, tools/mopup/mopup_plan.py what_is_left), asked afresh
before each pass. The passes stop when nothing is left, when MOPUP_PASSES are spent (the tally
counts the rest as they are), or at the cost ceiling.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from tools import fmt
from tools.results import tally_jobs
from tools.run.reproduce_children import Children
from tools.run.reproduce_server import Server
from tools.run.reproduce_state import CEILING_EXIT, CeilingReached, Config, Failure


def job_dir_exists(jobs_dir: Path, job_name: str) -> bool:
    """bench has run when harbor made its job dir, or a shard's (config.json): its unfinished
    trials are mop-up's."""
    return any((d / "config.json").is_file() for d in tally_jobs.run_job_dirs(jobs_dir, job_name)
               if tally_jobs.retry_number(job_name, d.name) == 0) if jobs_dir.is_dir() else False


def trial_dirs(jobs_dir: Path, job_name: str) -> set[str]:
    """Every trial dir of the run's jobs (the job or its shards, its retry jobs, flat or under jobs/), by path."""
    found: set[str] = set()
    for root in (jobs_dir, jobs_dir / "jobs"):
        if not root.is_dir():
            continue
        for job in root.iterdir():
            if job.is_dir() and tally_jobs.retry_number(job_name, job.name) is not None:
                found.update(str(t) for t in job.iterdir() if t.is_dir())
    return found


class MopupPasses:
    """The mop-up step's passes, each recorded in reproduce.json's mopup_passes."""

    def __init__(self, cfg: Config, state: dict, save: Callable[[], None], children: Children, server: Server,
                 say: Callable[[str], None]):
        self.cfg = cfg
        self.state = state
        self.save = save
        self.children = children
        self.server = server
        self.say = say

    def retry_targets(self) -> list[str]:
        """What a mop-up pass would retry now, by mop-up's own selection (the `targets` command)."""
        cli = Path(__file__).resolve().with_name("reproduce.py")
        argv = [sys.executable, str(cli), "targets", "--jobs-dir", str(self.cfg.jobs_dir), "--job-name", self.cfg.job_name]
        if self.cfg.verdicts:
            argv += ["--verdicts", str(self.cfg.verdicts)]
        if (self.cfg.state_dir / "shards.json").is_file():
            argv += ["--split", str(self.cfg.state_dir / "shards.json")]
        if self.cfg.model:
            argv += ["--model", self.cfg.model]
        argv += ["--max-task-retries", str(self.cfg.max_task_retries)]
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=self.cfg.repo, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            raise Failure(f"cannot tell which tasks are left to retry: {last}")
        return json.loads(proc.stdout)

    def run(self) -> str:
        """Mop-up passes until nothing is left to retry or MOPUP_PASSES are spent: the step's note."""
        passes = self.state["mopup_passes"]
        while True:
            targets = self.retry_targets()
            done = sum(1 for p in passes if p["status"] == "done")
            if not targets:
                return f"nothing left to retry after {done} pass(es)"
            if done >= self.cfg.mopup_passes:
                self.say(f"MOPUP_PASSES={self.cfg.mopup_passes} spent with {len(targets)} task(s) still to retry "
                         f"({' '.join(targets)}): the tally counts them as they are; make mopup RUN={self.cfg.run} "
                         "retries them later")
                return f"{len(targets)} task(s) left after {done} pass(es)"
            self.server.ensure_server()
            number = len(passes) + 1
            record = {"pass": number, "status": "running", "planned": targets, "started_at": fmt.stamp(),
                      "started_epoch": time.time()}
            passes.append(record)
            self.save()
            self.say(f"mop-up pass {number} (done so far: {done} of at most {self.cfg.mopup_passes}): started, "
                     f"{len(targets)} task(s): {' '.join(targets)}")
            before = trial_dirs(self.cfg.jobs_dir, self.cfg.job_name)
            started = time.monotonic()
            try:
                rc, died, _ = self.children.run_child([self.children.script("mopup.sh")],
                                                      watch=self.server.death_watch(), AUTO_STOP="0", PROBE="1")
            finally:
                after = trial_dirs(self.cfg.jobs_dir, self.cfg.job_name)
                record.update(trials_rerun=len(after - before), ended_at=fmt.stamp(), ended_epoch=time.time())
                if record["status"] == "running":
                    record["status"] = "interrupted"
                self.save()
            if rc == CEILING_EXIT:
                record.update(rc=rc, status="cost-ceiling")
                self.save()
                raise CeilingReached(f"mop-up pass {number}")
            record.update(rc=rc, status="server-died" if died else "done")
            self.save()
            self.say(f"mop-up pass {number}: {record['status']} in {fmt.elapsed(time.monotonic() - started)}, "
                     f"re-ran {record['trials_rerun']} trial(s) (exit {rc})")
