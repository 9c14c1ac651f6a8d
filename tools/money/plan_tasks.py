"""plan_tasks: how many tasks a run benches, for make plan (docs/plan.md §1, "Task count").

TASKS' words, else DATASET_PATH's task dirs, else DATASET_TASKS, else a dataset the reference ran
whole, at most N_TASKS; with none of them, the run's first job's planned trials ÷ k.
"""

from __future__ import annotations

import os
from pathlib import Path

from tools import safe_read
from tools import settings as run_settings
from tools.money.plan_checks import PlanError
from tools.results import tally_jobs
from tools.results import tally_trials


def dataset_task_dirs(path: str) -> int | None:
    """The task dirs (<task>/task.toml) of a local dataset, or None when DATASET_PATH names no directory."""
    if not path or not os.path.isdir(path):
        return None
    try:
        return sum(1 for entry in Path(path).glob("*/task.toml"))
    except OSError:
        return None


# Datasets whose size the reference records (docs/reference-runs.md: terminal-bench 2.1, "all 89
# tasks"): a run file written from scratch on one of them is estimated without DATASET_TASKS.
KNOWN_DATASET_TASKS = {
    "https://huggingface.co/datasets/harborframework/terminal-bench-2.1": 89,
    "terminal-bench/terminal-bench-2-1": 89,
}


def known_dataset_tasks(dataset: str, repo: str) -> int | None:
    """The task count of a dataset the reference ran whole: the registry name without its version,
    else the git URL (without a trailing slash or .git)."""
    if dataset:
        return KNOWN_DATASET_TASKS.get(dataset.split("@", 1)[0])
    return KNOWN_DATASET_TASKS.get(repo.rstrip("/").removesuffix(".git")) if repo else None


def settings_task_count(s: run_settings.Settings) -> int | None:
    """How many tasks the settings bench: TASKS' words, else DATASET_PATH's task dirs, else
    DATASET_TASKS, else a dataset the reference ran whole, at most N_TASKS; None when none says."""
    words = s["TASKS"]
    n = len(words) if words else dataset_task_dirs(s.raw("DATASET_PATH"))
    if n is None:
        n = s["DATASET_TASKS"] or known_dataset_tasks(s.raw("DATASET"), s.raw("DATASET_REPO"))
    cap = s["N_TASKS"]
    if cap is not None and (n is None or n > cap):
        n = cap
    return n


def task_count(s: run_settings.Settings) -> int:
    """The run's task count: the settings', else what its job's first pass planned."""
    n = settings_task_count(s)
    if n == 0:
        path = safe_read.clip(safe_read.printable(s.raw("DATASET_PATH")), 200)
        raise PlanError(f"the run's task count is 0: DATASET_PATH={path} holds no task dir (<task>/task.toml); "
                        "set TASKS, N_TASKS or DATASET_TASKS, or DATASET_PATH to a dataset")
    return n if n is not None else planned_tasks(s.raw("JOBS_DIR"), s.raw("JOB_NAME"), s["N_ATTEMPTS"])


def planned_tasks(jobs_dir: str, job_name: str, k: int) -> int:
    """The tasks the run's first pass planned (its job's result.json's n_total_trials ÷ k, summed
    over its shards), when the settings name none."""
    try:
        first = [d for d in tally_jobs.run_job_dirs(jobs_dir, job_name) if tally_jobs.retry_number(job_name, d.name) == 0]
        counts = [tally_trials.count_of(safe_read.read_json_object(os.path.join(d, "result.json")).get("n_total_trials"),
                             100_000 * tally_trials.MAX_ATTEMPTS) for d in first]
    except (tally_jobs.TallyError, OSError, safe_read.Unreadable):
        counts = []
    n = sum(counts) if counts and None not in counts else None
    if not n or n // k < 1:
        raise PlanError("the run's task count is unknown: set DATASET_TASKS (or TASKS, N_TASKS) in its run file, "
                        "or on the command line")
    return n // k
