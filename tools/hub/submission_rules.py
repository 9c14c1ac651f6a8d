"""submission_rules: why the leaderboard would not count a run as it stands, each with the make
command that fixes it: a task with an open slot, a passing trial without a valid ATIF trajectory,
a timeout or resource override (check-submission's rules, tools/hub/report_submission.py), tasks of the
dataset the run never ran, a registry dataset not pinned to the one version the board is bound to."""

from __future__ import annotations

import os
from pathlib import Path

from tools.hub import pin_lock
from tools.hub import report_submission
from tools import safe_read
from tools.hub.submission_select import Selection

TRAJECTORY = "trajectory.json"          # agent/trajectory.json: harbor's ATIF trajectory of a trial
TRAJECTORY_CAP = 256 << 20              # real ones are megabytes; a bigger one is not read
LOCK_CAP = 64 << 20                     # as tools/hub/pin_lock.py reads a lock.json
# DatasetConfig fields that run only part of a dataset: such a job's lock.json lists only that part.
DATASET_FILTERS = ("task_names", "exclude_task_names", "n_tasks")


def mopup_fix(run: str) -> str:
    """The command that fills open slots; a bundled example is never mopped up (refuse_bundled_example)."""
    if run.startswith("example-"):
        return (f"make mopup RUN=<your run> (run {run} is a bundled example, never mopped up: make submission "
                f"RUN=example-leaderboard-complete shows a bundled run with every slot filled)")
    return f"make mopup RUN={run}"


def open_slot_problem(sel: Selection, run: str) -> list[str]:
    if not sel.open:
        return []
    slots = sum(sel.k - n for n in sel.open.values())
    shown = ", ".join(f"{task} ({n} of {sel.k} settled)" for task, n in list(sorted(sel.open.items()))[:10])
    more = f" (+{len(sel.open) - 10} more)" if len(sel.open) > 10 else ""
    n, one = len(sel.open), slots == 1
    return [f"{n} of {len(sel.tasks)} tasks {'has' if n == 1 else 'have'} {'an open attempt slot' if one else 'open attempt slots'} "
            f"({slots} of {len(sel.tasks) * sel.k} slots {'has' if one else 'have'} no settled trial): {shown}{more}; "
            f"fill {'it' if one else 'them'} with {mopup_fix(run)}"]


def trajectory_problem(trial: Path, outside: set[Path]) -> str | None:
    """Why a passing trial's agent/trajectory.json is not a valid ATIF trajectory (harbor's own
    Trajectory model: schema_version ATIF-v1.0 to v1.8, an agent, at least one step), or None."""
    from harbor.models.trajectories.trajectory import Trajectory
    from pydantic import ValidationError

    path = trial / "agent" / TRAJECTORY
    if any(p in outside or p.is_symlink() for p in (trial / "agent", path)):
        return "a link, left out of the copy"
    try:
        raw = safe_read.read_regular(path, TRAJECTORY_CAP, "a trajectory.json")
    except FileNotFoundError:
        return "missing"
    except safe_read.Unreadable as e:
        return str(e)
    try:
        Trajectory.model_validate_json(raw)
    except ValidationError as e:
        return f"not ATIF: {report_submission.validation_summary(e)}"
    return None


def trajectory_problems(trials: list[Path], outside: set[Path], run: str, where: str) -> list[str]:
    bad = [(t, why) for t in trials if (why := trajectory_problem(t, outside))]
    if not bad:
        return []
    shown = ", ".join(f"{safe_read.shown(str(t))}/ ({why})" for t, why in bad[:10])
    more = f" (+{len(bad) - 10} more)" if len(bad) > 10 else ""
    fix = (f"bring them home with make pull RUN={run} PULL=all (PULL=results, which a run with N_ATTEMPTS=1 "
           f"pulls by default, leaves them out)"
           if where == "hf" else
           f"a local run has no other copy of what its agent wrote, so run those tasks again (a run benched as "
           f"an HF Job: make pull RUN={run} PULL=all brings its trajectories home)")
    lack = "passing trial lacks" if len(bad) == 1 else "passing trials lack"
    return [f"{len(bad)} {lack} a valid ATIF agent/{TRAJECTORY}, which the leaderboard needs for "
            f"every passing trial: {shown}{more}; {fix}"]


def override_problems(job_dirs: list[Path], trials: list[Path], run: str) -> list[str]:
    """check-submission's config rules (timeout multipliers, timeout and resource overrides) on
    every job's config.json and every submitted trial's: the same problem in many trials is one line."""
    problems = [p for d in job_dirs for p in report_submission.config_problems(d, run)]
    by_rest: dict[str, list[Path]] = {}
    for trial in trials:
        path = trial / "config.json"
        for p in report_submission.config_file_problems(path, run, whose="trial"):
            by_rest.setdefault(p.removeprefix(f"{path}: "), []).append(trial)
    for rest, where in by_rest.items():
        whose = "submitted trial's" if len(where) == 1 else "submitted trials'"
        problems.append(f"{len(where)} {whose} config.json (e.g. {safe_read.shown(str(where[0]))}/config.json): "
                        f"{rest}")
    return problems


def dataset_tasks(job_dirs: list[Path], shard_plan: Path | None = None) -> tuple[set[str] | None, str]:
    """The dataset's whole task list as the run recorded it, and where: the lock.json of a job
    that ran its datasets unfiltered (harbor's JobLock lists every trial it planned; a retry
    job's --include-task-name, -n or -x lists only some), else the split of a sharded run made
    from the whole dataset (state/<run>/shards.json, tools/run/shards.py). (None, why) when neither."""
    from harbor.models.job.lock import JobLock

    for d in job_dirs:
        try:
            cfg = safe_read.read_json_object(d / "config.json", what="a config.json")
            datasets = cfg.get("datasets")
            if not (isinstance(datasets, list) and datasets and all(
                    isinstance(ds, dict) and not any(ds.get(f) for f in DATASET_FILTERS) for ds in datasets)):
                continue
            lock = JobLock.model_validate(safe_read.read_json_object(d / "lock.json", LOCK_CAP, "a lock.json"))
        except (OSError, safe_read.Unreadable, ValueError):
            continue  # harbor writes both when a job starts; without them this job cannot tell
        names = {safe_read.clip(t.task.name) for t in lock.trials}
        if names:
            return names, f"{safe_read.shown(str(d))}/lock.json"
    if shard_plan is not None and os.path.lexists(shard_plan):
        try:
            kept = safe_read.read_json_object(shard_plan, LOCK_CAP, "a shards.json")
            source, shards = kept.get("task_source"), kept.get("shards")
            names = {safe_read.clip(t) for s in shards for t in s["tasks"] if isinstance(t, str)}
        except (OSError, safe_read.Unreadable, ValueError, TypeError, KeyError):
            names, source = set(), None
        # A split of TASKS is the tasks someone chose, not the dataset's.
        if names and isinstance(source, str) and source != "TASKS":
            return names, f"{safe_read.shown(str(shard_plan))} (the shards' split of {safe_read.clip(source)})"
    return None, "no job dir records the dataset's whole task list (a lock.json of a job that ran it unfiltered)"


def coverage(sel: Selection, job_dirs: list[Path], run: str,
             shard_plan: Path | None = None) -> tuple[str, list[str]]:
    """(a note on how much of the dataset the run covers, the refusal when tasks are missing)."""
    dataset, where = dataset_tasks(job_dirs, shard_plan)
    if dataset is None:
        return (f"the dataset's coverage cannot be checked: {where}; the run has {report_submission.plural(len(sel.tasks), 'task')}", [])
    missing = sorted(dataset - set(sel.tasks))
    note = (f"the run covers {len(dataset) - len(missing)} of {len(dataset)} tasks of its dataset "
            f"(as {where} lists them)")
    if not missing:
        return note, []
    more = f" (+{len(missing) - 10} more)" if len(missing) > 10 else ""
    return note, [f"{note}: {len(missing)} missing, e.g. {', '.join(missing[:10])}{more}; run them with "
                  f"{mopup_fix(run)}"]


def registry_problems(dataset: str, job_dirs: list[Path], run: str) -> list[str]:
    """Why a registry dataset (DATASET=org/name[@ref]) is not the one version the leaderboard is bound to
    (Hub leaderboards bind dataset versions): its run file names no version or a tag, which can move
    (every resume resolved it again), or the run's jobs ran several versions, or another than the
    digest it pins. Each with the pin line to write. Nothing for a git or local dataset."""
    if not dataset:
        return []
    name, ref = pin_lock.split_registry(dataset)
    recorded = set()
    for d in job_dirs:
        try:
            lock = pin_lock.read_lock(d)
        except pin_lock.PinError:
            continue  # an unreadable lock.json: check-submission and the tally say so
        recorded |= {r for r in (lock or {}).get("registry", []) if r[0] == name and pin_lock.DIGEST.fullmatch(r[1])}
    ran = sorted(v for _, v in recorded)
    if len(ran) > 1:
        return [f"the run's jobs ran {len(ran)} versions of {name} ({', '.join(ran)}): a resume resolved an unpinned "
                f"dataset again, and the leaderboard is bound to one version; no one version reproduces this run"]
    line = f"DATASET={name}@{ran[0]}" if ran else f"DATASET={name}@<version>"
    if not pin_lock.registry_pinned(ref):
        why = f"@{ref} is a tag, which can move" if ref else "it names no version, so every resume resolved the latest"
        return [f"the registry dataset {dataset} is not pinned ({why}), and the leaderboard is bound to one dataset "
                f"version: pin it in runs/{run}.env with {line} ({'the version its jobs ran; ' if ran else ''}make "
                f"pin RUN={run} writes it; terminal-bench 2.1's leaderboard version is revision 6: @6)"]
    if pin_lock.DIGEST.fullmatch(ref) and ran and ran[0] != ref:
        return [f"runs/{run}.env pins {dataset}, but the run's jobs ran {name}@{ran[0]}: submit the run of the version "
                f"you pin, or pin the one that ran: {line}"]
    return []

