#!/usr/bin/env python3
"""shards: split a run into N_SHARDS harbor jobs, <job>-shard-1 … <job>-shard-N (docs/scaling.md).

    shards.py plan --run R --jobs-dir J --job-name NAME [--model M] --shards S --attempts K --state-dir D
                   [--task T ...] [--dataset-path P] [--dataset-repo URL --dataset-ref SHA]
                   [--dataset ORG/NAME[@VERSION]] [--dry-run] [--offline]

prints the split as JSON ({"n_shards", "task_source", "balanced_by", "reused", "shards": [{"index",
"job_name", "tasks", "weight_s"}]}) and, unless --dry-run, keeps it in D/shards.json. --offline (make
print) never reaches the network: a task list that would need it is null in every shard.

The task list, first match wins:
  --task (TASKS)            the names given;
  --dataset-path            the task dirs of a local dataset (each holds a task.toml);
  --dataset-repo + --ref    the task dirs of an HF dataset repo at that commit, listed through
                            huggingface_hub (a moving HEAD would give shards different lists, so
                            an unpinned repo is refused); cached in D/tasks.json, so a resume
                            lists nothing again;
  --dataset                 a Harbor registry dataset, through harbor's own registry client (its
                            tasks' get_name()); cached the same way.

Balance: all k attempts of a task stay in one shard (mop-up and the slots read a task's attempts
together, and harbor runs -k per job). Each task weighs k × its mean agent time in the run's
earlier job dirs (the tally's agent_seconds), a task never timed weighs the median of the timed
ones; with none timed every task weighs the same. Tasks go heaviest first to the lightest shard
(longest-processing-time first), ties by name, so the same input gives the same split.

Stability: a shard's --include-task-name list is frozen into its job's config.json, and harbor
refuses to resume a job under a different one. So a kept split is reused as long as N_SHARDS and
the tasks themselves are the same (wherever they are listed from now); a different split (another
N_SHARDS, a task added or removed) is made while no shard job dir exists, and refused once one
does (keep the split's tasks, or give the changed run a new JOB_NAME).

Nothing run twice: the sharded bench is the run's first pass. A shard that has not run yet is
refused when the run already has settled trials of one of its tasks (an unsharded bench, a retry
job, another shard): make mopup continues such a run, running only what each task's slots lack.

Whose dirs: a job dir of the run's name whose config.json names another job, or (--model, the
run's MODEL) records another model, is another run's (tools/results/tally_jobs.py): refused.

Every refusal writes nothing: shards.json and the tasks.json listing are written only with a plan
that is accepted.

Exit codes: 0, 1 a user-facing error (the message names the problem and the fix), 2 usage.
"""

from __future__ import annotations

import json
import os
import re
import statistics
from pathlib import Path

import click

from tools import fmt, hf_client
from tools import safe_read
from tools.results import tally_core
from tools.results import tally_jobs
from tools.results import tally_policy
from tools.results import tally_trials

MAX_TASKS = 100_000            # a dataset listing longer than this is not a task dataset
MAX_NAME = 200                 # a task name longer than this is not harbor's
STATE_CAP = 16 << 20           # shards.json and tasks.json are a few KB
HF_DATASET_URL = re.compile(r"^https://huggingface\.co/datasets/(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)(?:\.git)?/?$")
SHA = re.compile(r"^[0-9a-f]{40}$")


class ShardError(click.ClickException):
    """Bad input or state: the message names the problem and the fix; nothing was written."""


# --- the task list -------------------------------------------------------------------------------


def checked_names(names: list[str], where: str) -> list[str]:
    """The names, each one harbor's --include-task-name can take as itself; else ShardError."""
    if len(names) > MAX_TASKS:
        raise ShardError(f"{where} lists {len(names)} tasks, more than {MAX_TASKS}: not a task dataset")
    bad = [n for n in names if not n or len(n) > MAX_NAME or tally_jobs.NOT_A_NAME.search(n)
           or tally_jobs.GLOB_CHARS.search(n)]
    if bad:
        raise ShardError(f"{where} has task names a shard cannot pass to harbor's --include-task-name: "
                         f"{', '.join(repr(safe_read.clip(b)) for b in bad[:5])} (empty, too long, a control character, "
                         f"a leading '-' or a glob character). Give the run's tasks with TASKS=… instead.")
    if len(set(names)) != len(names):
        raise ShardError(f"{where} names a task twice: a task's attempts must stay in one shard")
    return sorted(names)


def local_tasks(path: Path) -> list[str]:
    """The task dirs of a local dataset: its subdirs that hold a task.toml (harbor --path)."""
    if not path.is_dir():
        raise ShardError(f"DATASET_PATH {path} is not a directory: set it to the dataset's dir of task dirs")
    names = [e.name for e in sorted(path.iterdir(), key=lambda e: e.name)
             if e.is_dir() and not e.is_symlink() and (e / "task.toml").is_file()]
    if not names:
        raise ShardError(f"DATASET_PATH {path} has no task dir (a subdir with a task.toml): nothing to shard")
    return checked_names(names, f"DATASET_PATH {path}")


def hub_tasks(url: str, ref: str) -> list[str]:
    """The task dirs of an HF dataset repo at commit ref, through huggingface_hub: every dir
    that holds a task.toml, named by its last part (harbor's GitTaskId.get_name)."""
    m = HF_DATASET_URL.match(url)
    if not m:
        raise ShardError(f"DATASET_REPO {url} is not an HF dataset repo (https://huggingface.co/datasets/NS/NAME): "
                         f"N_SHARDS lists its tasks through the Hub. Give the tasks with TASKS=… instead")
    if not SHA.match(ref or ""):
        raise ShardError(f"N_SHARDS needs the dataset pinned: DATASET_REF is {ref!r}, and shards listed from a "
                         f"moving HEAD could each run a different task list. Set DATASET_REF=<40-hex commit> in the "
                         f"run file (make pin RUN=… writes the one a job resolved)")
    from huggingface_hub.errors import HfHubHTTPError  # noqa: PLC0415

    names: list[str] = []
    try:
        for entry in hf_client.api().list_repo_tree(m["repo"], repo_type="dataset", revision=ref, recursive=True):
            parts = entry.path.split("/")
            if parts[-1] == "task.toml" and len(parts) >= 2:
                names.append(parts[-2])
                if len(names) > MAX_TASKS:
                    break
    except (HfHubHTTPError, OSError) as exc:
        raise ShardError(f"could not list the tasks of {m['repo']}@{ref} on the Hub ({type(exc).__name__}: "
                         f"{safe_read.clip(str(exc).splitlines()[0] if str(exc) else '')}). Check the network and HF_TOKEN, "
                         f"or give the tasks with TASKS=…") from exc
    if not names:
        raise ShardError(f"{m['repo']}@{ref} has no task dir (a dir with a task.toml): is DATASET_REPO a task dataset?")
    return checked_names(names, f"{m['repo']}@{ref}")


def registry_tasks(name: str) -> list[str]:
    """A Harbor registry dataset's tasks, through harbor's own registry client."""
    import asyncio  # noqa: PLC0415

    from harbor.registry.client.factory import RegistryClientFactory  # noqa: PLC0415

    try:
        meta = asyncio.run(RegistryClientFactory.create().get_dataset_metadata(name))
    except Exception as exc:  # harbor's client raises whatever its transport does
        raise ShardError(f"could not list registry dataset {name} through harbor's registry client "
                         f"({type(exc).__name__}: {safe_read.clip(str(exc).splitlines()[0] if str(exc) else '')}). "
                         f"Give the tasks with TASKS=…") from exc
    return checked_names([t.get_name() for t in meta.task_ids], f"registry dataset {name}")


def read_state(path: Path) -> dict | None:
    if not os.path.lexists(path):
        return None
    try:
        return safe_read.read_json_object(path, STATE_CAP, f"{path.name}")
    except (OSError, safe_read.Unreadable, ValueError) as exc:
        raise ShardError(f"{path} cannot be read ({exc}): move it aside and run again; it is rebuilt") from exc


def write_state(path: Path, doc: dict) -> None:
    """Written whole or not at all (tools/safe_read.py write_atomic)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    safe_read.write_atomic(path, json.dumps(doc, indent=2) + "\n")


def task_list(opts: dict, state_dir: Path, offline: bool = False) -> tuple[list[str] | None, str, dict | None]:
    """(the run's tasks, where they came from, the listing to cache in STATE_DIR/tasks.json once the
    plan is accepted, or None); tasks None offline when listing needs the network."""
    if opts["task"]:
        return checked_names(list(opts["task"]), "TASKS"), "TASKS", None
    if opts["dataset_path"]:
        path = Path(opts["dataset_path"]).resolve()
        return local_tasks(path), f"DATASET_PATH {path}", None
    if opts["dataset_repo"]:
        source, lister = f"{opts['dataset_repo']}@{opts['dataset_ref']}", lambda: hub_tasks(opts["dataset_repo"], opts["dataset_ref"])
    elif opts["dataset"]:
        source, lister = f"registry {opts['dataset']}", lambda: registry_tasks(opts["dataset"])
    else:
        raise ShardError("N_SHARDS needs the run's task list: set TASKS, DATASET_PATH, DATASET_REPO (with DATASET_REF) "
                         "or DATASET in the run file")
    cache = state_dir / "tasks.json"
    cached = read_state(cache)
    if cached and cached.get("source") == source and isinstance(cached.get("tasks"), list) \
            and all(isinstance(t, str) for t in cached["tasks"]):
        return checked_names(cached["tasks"], str(cache)), source, None
    if offline:
        return None, source, None
    tasks = lister()
    return tasks, source, {"source": source, "listed_at": fmt.stamp(), "tasks": tasks}


# --- the split -----------------------------------------------------------------------------------


def mean_agent_seconds(dirs: list[Path]) -> dict[str, float]:
    """Each task's mean agent time over the run's finished trials so far (the tally's reading)."""
    times: dict[str, list[float]] = {}
    notes = tally_trials.ScanNotes()
    for d in dirs:
        if d.is_symlink():
            continue
        for trial in tally_trials.scan_job_dir(d, notes):
            s = trial.agent_seconds
            if trial.status == "finished" and s is not None and 0 < s < 1e7:
                times.setdefault(trial.task, []).append(s)
    return {task: statistics.fmean(v) for task, v in times.items()}


def settled_trials(dirs: list[Path]) -> dict[str, list[str]]:
    """Each task's settled trials in these job dirs (trial dirs): the ones mop-up never re-runs
    (passed, failed, a genuine limit; tools/results/slots.py), classified as make tally classifies them."""
    if not dirs:
        return {}
    return settled_of(tally_core.tally([str(d) for d in dirs], tally_policy.load_policy()))


def settled_of(report: dict) -> dict[str, list[str]]:
    """Each task's settled trial dirs, as the tally decided them (each trial row's `settled`)."""
    return {row["task"]: settled for row in report["per_task"]
            if (settled := [t["trial_dir"] for t in row["trials"] if t["settled"]])}


def split(tasks: list[str], n: int, k: int, seconds: dict[str, float]) -> tuple[list[list[str]], list[float], str]:
    """(each shard's tasks, each shard's weight in agent seconds, how it was balanced)."""
    known = [seconds[t] for t in tasks if t in seconds]
    if known:
        fill = statistics.median(known)
        weight = {t: k * seconds.get(t, fill) for t in tasks}
        how = f"agent times of {len(known)} of {len(tasks)} tasks from the run's job dirs (the rest at their median)"
    else:
        weight = {t: 1.0 for t in tasks}
        how = "task count (no trial of the run has finished yet)"
    shards: list[list[str]] = [[] for _ in range(n)]
    loads = [0.0] * n
    for task in sorted(tasks, key=lambda t: (-weight[t], t)):
        i = min(range(n), key=lambda j: (loads[j], j))
        shards[i].append(task)
        loads[i] += weight[task]
    if known:
        return [sorted(s) for s in shards], [round(x, 1) for x in loads], how
    return [sorted(s) for s in shards], [0.0] * n, how


@click.group()
def cli() -> None:
    """Split a run into shard jobs."""


@cli.command("plan")
@click.option("--run", required=True)
@click.option("--jobs-dir", required=True, type=click.Path(path_type=Path))
@click.option("--job-name", required=True)
@click.option("--model", default=None, help="the run's MODEL: a job dir of the run's name that records another "
              "model is another run's, refused")
@click.option("--shards", "n", required=True, type=click.IntRange(2, 64))
@click.option("--attempts", "k", required=True, type=click.IntRange(1, 100))
@click.option("--state-dir", required=True, type=click.Path(path_type=Path))
@click.option("--task", multiple=True)
@click.option("--dataset-path")
@click.option("--dataset-repo")
@click.option("--dataset-ref", default="")
@click.option("--dataset")
@click.option("--dry-run", is_flag=True, help="write nothing (DRY_RUN=1, make print)")
@click.option("--offline", is_flag=True, help="list nothing over the network (make print); implies --dry-run")
def plan_cmd(run: str, jobs_dir: Path, job_name: str, model: str | None, n: int, k: int, state_dir: Path,
             dry_run: bool, offline: bool, **opts) -> None:
    """Print the split (JSON) and keep it in STATE_DIR/shards.json. Every refusal writes nothing."""
    kept_path = state_dir / "shards.json"
    kept = read_state(kept_path)
    try:
        run_dirs = tally_jobs.run_job_dirs(jobs_dir, job_name) if jobs_dir.is_dir() else []
        tally_jobs.refuse_foreign_job_dirs(run_dirs, model)
    except tally_jobs.TallyError as exc:
        raise ShardError(str(exc)) from exc
    shard_dirs = [d for d in run_dirs if tally_jobs.shard_number(job_name, d.name)]
    tasks, source, listing = task_list(opts, state_dir, offline)
    doc = kept_split(run, kept, kept_path, job_name, n, tasks, source, shard_dirs)
    if doc is None and tasks is None:  # offline, the list unknown: each shard's tasks are listed at launch
        doc = {"run": run, "job_name": job_name, "n_shards": n, "n_attempts": k, "task_source": source,
               "balanced_by": None, "shards": [
                   {"index": i, "job_name": tally_jobs.shard_job_name(job_name, i), "tasks": None, "weight_s": None}
                   for i in range(1, n + 1)]}
    elif doc is None:
        if n > len(tasks):
            raise ShardError(f"N_SHARDS={n} is more than the run's {len(tasks)} task(s) ({source}): a shard needs one. "
                             f"Set N_SHARDS to at most {len(tasks)}")
        groups, loads, how = split(tasks, n, k, mean_agent_seconds(run_dirs))
        doc = {"run": run, "job_name": job_name, "n_shards": n, "n_attempts": k, "task_source": source,
               "balanced_by": how, "created_at": fmt.stamp(),
               "shards": [{"index": i + 1, "job_name": tally_jobs.shard_job_name(job_name, i + 1), "tasks": g, "weight_s": w}
                          for i, (g, w) in enumerate(zip(groups, loads))]}
    refuse_rerun(run, doc, run_dirs, shard_dirs)
    reused = doc is kept
    if not (dry_run or offline):
        if listing:
            write_state(state_dir / "tasks.json", listing)
        if not reused:
            write_state(kept_path, doc)
    click.echo(json.dumps(dict(doc, reused=reused)))


def kept_split(run: str, kept: dict | None, kept_path: Path, job_name: str, n: int, tasks: list[str] | None,
               source: str, shard_dirs: list[Path]) -> dict | None:
    """The kept split when it is this one (N_SHARDS shards of the same tasks), None when a new one is
    to be made; ShardError when a new one would change the task list of a shard that has run.

    The tasks themselves are compared, not where they came from: a task added to DATASET_PATH or
    TASKS must never be left out of every shard while the bench exits 0 (unknown offline: kept)."""
    same_n = bool(kept) and kept.get("n_shards") == n and _valid_kept(kept, job_name, n)
    kept_tasks = sorted(t for shard in kept["shards"] for t in shard["tasks"]) if same_n else []
    if same_n and (tasks is None or kept_tasks == tasks):
        checked_names(kept_tasks, str(kept_path))
        return kept
    if shard_dirs and not kept:
        raise ShardError(f"{len(shard_dirs)} shard job dir(s) of {job_name} exist but {kept_path} does not: their split "
                         f"is unknown, so a new one could not resume them. Restore {kept_path}, or give the run a new JOB_NAME")
    if shard_dirs and same_n:
        added, removed = sorted(set(tasks) - set(kept_tasks)), sorted(set(kept_tasks) - set(tasks))
        raise ShardError(
            f"run {run}'s task list changed since it was split ({kept_path}: {len(kept_tasks)} tasks of "
            f"{safe_read.printable(safe_read.clip(str(kept.get('task_source')), 300))}; now {len(tasks)} of {source}: added {_names(added)}, removed {_names(removed)}), "
            f"and {len(shard_dirs)} shard job dir(s) exist: each shard's task list is frozen into its job's config.json, "
            f"and harbor refuses to resume a job whose config changed. Restore the task list the run was split with, "
            f"or give the changed run a new JOB_NAME; nothing was written")
    if shard_dirs:
        raise ShardError(
            f"run {run} was split into {kept.get('n_shards')} shards of {kept.get('task_source')} ({kept_path}), and "
            f"{len(shard_dirs)} shard job dir(s) exist: a new split (N_SHARDS={n}, {source}) would change their task "
            f"lists, and harbor refuses to resume a job whose config changed. Keep N_SHARDS={kept.get('n_shards')} "
            f"and the dataset, or give the run a new JOB_NAME")
    if same_n and tasks is not None:
        click.echo(f"shards: run {run}'s task list changed since it was split ({len(kept_tasks)} tasks, now "
                   f"{len(tasks)}) and no shard has run yet: it is split again", err=True)
    return None


def refuse_rerun(run: str, doc: dict, run_dirs: list[Path], shard_dirs: list[Path]) -> None:
    """ShardError when a shard that has not run yet would run again a task the run already has settled
    trials of (in <job>, a retry job or another shard): the sharded bench is a run's first pass, and a
    run that has one is continued by mop-up, which runs only what each task's slots lack."""
    started = {d.name for d in shard_dirs}
    fresh = [s for s in doc["shards"] if s["job_name"] not in started]
    if not fresh:
        return
    settled = settled_trials([d for d in run_dirs if not d.is_symlink()])
    if any(s["tasks"] is None for s in fresh):  # offline, the list unknown: any task of the run may be in one
        again = settled
    else:
        again = {t: settled[t] for s in fresh for t in s["tasks"] if t in settled}
    if not again:
        return
    trials = [t for dirs in again.values() for t in dirs]
    where = sorted({safe_read.printable(Path(t).parent.name) for t in trials})
    raise ShardError(
        f"run {run} already has {len(trials)} settled trial(s) (scored, or a genuine limit) of {len(again)} task(s) "
        f"that its shard(s) {', '.join(s['job_name'] for s in fresh)} would run again, in {', '.join(where)}: continue "
        f"it with make mopup RUN={run} (it runs only what each task lacks), or give the sharded run a new JOB_NAME; "
        f"nothing was written")


def _names(tasks: list[str]) -> str:
    """At most five task names, printable (a kept split is a file anyone could have edited)."""
    if not tasks:
        return "none"
    return ", ".join(safe_read.printable(safe_read.clip(t, MAX_NAME)) for t in tasks[:5]) + (
        f" and {len(tasks) - 5} more" if len(tasks) > 5 else "")


def _valid_kept(kept: dict, job_name: str, n: int) -> bool:
    shards = kept.get("shards")
    return (isinstance(shards, list) and len(shards) == n and all(
        isinstance(s, dict) and s.get("job_name") == tally_jobs.shard_job_name(job_name, i + 1)
        and isinstance(s.get("tasks"), list) and s["tasks"] and all(isinstance(t, str) for t in s["tasks"])
        for i, s in enumerate(shards)))


if __name__ == "__main__":
    cli()
