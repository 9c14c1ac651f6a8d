"""mopup_harbor: harbor's files read as untrusted, and harbor's own view of a job (for mop-up's plan).

Reads config.json, lock.json and result.json without ever opening a special file (a FIFO
would hang us), each problem worded to follow the file's name; replays what `harbor job
resume` (0.26) would do with a job: its frozen config against what `harbor run` would
resolve now, its lock.json, and which trials it would run (`simulate_resume`). Split from
tools/mopup/mopup.py, which plans and carries out the mop-up.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import stat
from collections import Counter
from pathlib import Path

import click

from tools.mopup.mopup_archive import file_kind, shown, special_file

# Job-config fields that may differ without making a resume run something different:
# where the job lives (harbor rebinds both on resume) and the concurrency (mop-up patches
# config.json and lock.json together). Everything else must match what `harbor run` would
# resolve now, or the resumed trials would silently use the old settings.
IGNORED_CONFIG_FIELDS = ("job_name", "jobs_dir", "n_concurrent_trials")


# --- harbor's files, read as untrusted ---------------------------------------------------------

# Said after every file problem a standalone retry job works around: it never touches the job.
SAFE_FALLBACK = "a retry job is safe (it leaves this job as it is)"


def read_json_object(path: Path) -> tuple[dict | None, str | None]:
    """(the JSON object in path, None), or (None, what is wrong, worded to follow the file's name).

    The file type is checked first: a FIFO or a device is never opened, so it cannot hang us.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None, "is missing"
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror})"
    if not stat.S_ISREG(mode):
        return None, f"is {file_kind(mode)}, not a file"
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror})"
    if not raw.strip():
        return None, "is empty (truncated?)"
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "is not UTF-8 text (corrupt?)"
    except ValueError:
        return None, "is not valid JSON (truncated?)"
    if not isinstance(data, dict):
        kinds = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
        return None, f"is not a JSON object (it holds {kinds.get(type(data), 'a number')})"
    return data, None


def first_error(exc) -> str:
    """A pydantic ValidationError in a few words: where, and what."""
    error = exc.errors()[0]
    return f"{'.'.join(str(x) for x in error.get('loc', ())) or 'top level'}: {error.get('msg')}"


def refuse_special_files(job_dirs: list[Path]) -> None:
    """Stop when make tally would open a FIFO or a device where harbor writes its JSON.

    The tally reads every job's config.json and result.json, every trial's result.json and,
    when that names no task, the trial's config.json. A FIFO would hang it: no plan can work
    around that, so this is exit 1. (A FIFO the tally never opens is the plan's business.)
    """
    for job_dir in job_dirs:
        paths = [job_dir / "config.json", job_dir / "result.json"]
        for trial_dir in trial_dirs_of(job_dir):
            paths.append(trial_dir / "result.json")
            result, _ = read_json_object(trial_dir / "result.json")
            if not (result and isinstance(result.get("task_name"), str) and result["task_name"]):
                paths.append(trial_dir / "config.json")
        for path in paths:
            kind = special_file(path)
            if kind:
                raise click.ClickException(
                    f"{shown(path)} is {kind}, not a file: make tally would hang reading it (mop-up never opens it). "
                    "Move it out of the job (harbor never writes one), then run make mopup again")


# --- harbor's own view of the job -------------------------------------------------------------


def harbor_version() -> str:
    return importlib.metadata.version("harbor")


def read_model(path: Path, model, what: str) -> tuple[object | None, dict | None, str | None]:
    """(path read as harbor's pydantic MODEL, its raw dict, None), or (None, None, the problem)."""
    from pydantic import ValidationError

    raw, problem = read_json_object(path)
    if raw is None:
        return None, None, problem
    try:
        return model.model_validate_json(json.dumps(raw)), raw, None
    except ValidationError as exc:
        return None, None, f"is not a harbor {what} ({first_error(exc)})"


def read_job_config(job_dir: Path) -> tuple[object | None, dict | None, str | None]:
    """(harbor's JobConfig, its raw dict, None), or (None, None, why the job cannot be resumed)."""
    from harbor.models.job.config import JobConfig

    path = job_dir / "config.json"
    config, raw, problem = read_model(path, JobConfig, "job config")
    if config is None:
        return None, None, f"{shown(path)} {problem}: mop-up cannot resume this job; {SAFE_FALLBACK}"
    # What `harbor job resume -p` does (0.25, 0.26): the directory given is the job's location.
    config.jobs_dir = job_dir.parent
    config.job_name = job_dir.name
    return config, raw, None


def lock_blockers(job_dir: Path) -> list[str]:
    """Why the job's lock.json rules out a resume: unreadable, missing, or another harbor's."""
    path = job_dir / "lock.json"
    lock, problem = read_json_object(path)
    if problem == "is missing":
        return [f"{shown(path)} is missing: mop-up cannot check the job's tasks and harbor version against it, "
                f"so it does not resume; {SAFE_FALLBACK}"]
    if problem:
        why = ("harbor would hang reading it" if special_file(path)
               else "harbor refuses to resume a job whose lock.json it cannot read")
        return [f"{shown(path)} {problem}: {why}; {SAFE_FALLBACK}"]
    locked = lock.get("harbor").get("version") if isinstance(lock.get("harbor"), dict) else None
    if locked and locked != harbor_version():
        return [f"the job was created by harbor {locked}, this is harbor {harbor_version()}"]
    return []


def planned_trial_configs(config) -> tuple[list, list]:
    """(task configs, trial configs) harbor plans for this config, by its own JobPlan (as Job does)."""
    from uuid import uuid4

    from harbor.job_plan import JobPlan

    task_configs = asyncio.run(JobPlan.resolve_task_configs(config))
    return task_configs, JobPlan.build_trial_configs(config, task_configs, job_id=uuid4())


def lock_mismatch(job_dir: Path, config, task_configs: list, planned: list, n_concurrent: int) -> str | None:
    """Why harbor would refuse the job's lock.json on resume (Job._write_job_lock), or None.

    Builds the lock harbor would build, with the concurrency mop-up is about to set, and
    compares it as harbor does (created_at and the harbor version are copied over first).
    Catches what the config cannot show, e.g. a task whose files changed since the run.
    """
    from harbor.job_plan import JobPlan
    from harbor.models.job.lock import JobLock, build_job_lock

    lock_path = job_dir / "lock.json"
    if not lock_path.exists():
        return None  # harbor writes a fresh one
    try:
        existing = JobLock.model_validate_json(lock_path.read_text())
    except Exception as exc:
        return f"{lock_path} cannot be parsed ({type(exc).__name__}); harbor refuses to overwrite it"
    downloads = asyncio.run(JobPlan.cache_tasks(task_configs))
    target = config.model_copy(update={"n_concurrent_trials": n_concurrent})
    new = build_job_lock(config=target, trial_configs=planned, task_download_results=downloads)
    new.created_at, new.harbor = existing.created_at, existing.harbor
    existing.n_concurrent_trials = n_concurrent
    if existing == new:
        return None
    old_digests = {t.task.name: t.task.digest for t in existing.trials}
    changed = sorted(t.task.name for t in new.trials if old_digests.get(t.task.name, t.task.digest) != t.task.digest)
    if changed:
        return f"the files of {', '.join(changed)} changed since the job ran (lock.json task digests differ)"
    return "lock.json differs from the lock harbor would resolve now (retry policy, tasks or settings)"


def task_of(trial_config) -> str:
    return trial_config.task.get_task_id().get_name()


def config_differences(frozen: dict, current: dict) -> list[str]:
    """Fields of two JobConfig dumps that differ, as 'path: old -> new' lines."""
    from harbor.models.job.config import JobConfig

    def normal(raw: dict) -> dict:
        dump = JobConfig.model_validate(raw).model_dump(mode="json")
        for name in IGNORED_CONFIG_FIELDS:
            dump.pop(name, None)
        return dump

    out: list[str] = []

    def walk(a, b, path: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                walk(a.get(key), b.get(key), f"{path}.{key}" if path else key)
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{path}[{i}]")
        elif a != b:
            out.append(f"{path}: {json.dumps(a)} -> {json.dumps(b)}")

    walk(normal(frozen), normal(current), "")
    return out


def redacted_secrets(frozen: dict) -> list[str]:
    """Agent env values harbor saved redacted ("sk-l****def"): a resume would send them as is."""
    found = []
    for agent in frozen.get("agents", []):
        for key, value in (agent.get("env") or {}).items():
            if isinstance(value, str) and "****" in value:
                found.append(f"{agent.get('name')}: {key}")
    return found


def simulate_resume(job_dir: Path, planned: list, leaving: set[Path]) -> tuple[Counter, str | None]:
    """What `harbor job resume` would run once `leaving` has left the job dir.

    Replays Job._maybe_init_existing_job and Job._init_remaining_trial_configs: every
    surviving trial with a parseable result.json must equal a planned TrialConfig (harbor
    compares with trials_dir rebound); planned trials without a match are what runs. With
    -k K harbor plans K equal TrialConfigs per task (JobPlan.build_trial_configs), each
    survivor takes one, so a task runs K minus its survivors: the Counter says how many.
    Returns (attempts per task that would run, the error harbor would raise or None).
    """
    from harbor.models.trial.config import TrialConfig

    existing = []
    for trial_dir in trial_dirs_of(job_dir):
        if trial_dir in leaving:
            continue
        result = trial_dir / "result.json"
        if not result.exists():
            return Counter(), f"{trial_dir.name} has no result.json and would be deleted by harbor"
        if not trial_result_loads(result):  # harbor skips (and keeps) a result.json it cannot load: so do we
            continue
        # Harbor reads this one unguarded: any problem stops its resume before it runs anything.
        path = trial_dir / "config.json"
        trial_config, _, problem = read_model(path, TrialConfig, "trial config")
        if problem:
            why = "harbor's resume would hang reading it" if special_file(path) else \
                "harbor's resume would stop on this finished trial"
            return Counter(), f"{shown(path)} {problem}: {why}; {SAFE_FALLBACK}"
        trial_config.trials_dir = job_dir
        existing.append(trial_config)

    matched: set[int] = set()
    remaining: Counter = Counter()
    for planned_config in planned:
        index = next((i for i, e in enumerate(existing) if i not in matched and e == planned_config), None)
        if index is None:
            remaining[task_of(planned_config)] += 1
        else:
            matched.add(index)
    if len(matched) != len(existing):
        strays = len(existing) - len(matched)
        return remaining, f"{strays} finished trial(s) in the job match no trial harbor plans now (harbor: 'Existing trial config does not match planned job config')"
    return remaining, None


def trial_result_loads(path: Path) -> bool:
    """Whether harbor's resume would load this trial result.json (a special file: never opened)."""
    from harbor.models.trial.result import TrialResult

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        TrialResult.model_validate_json(path.read_bytes().decode("utf-8"))
        return True
    except (OSError, ValueError):  # pydantic's ValidationError and UnicodeDecodeError are ValueErrors
        return False



def job_result_readable(job_dir: Path) -> bool:
    """False when <job>/result.json exists but harbor could not load it.

    Harbor rewrites that file at every trial start and end; killed mid-write, it leaves it
    empty, and `harbor job resume` then dies in Job.__init__ before running anything. The
    file is only a summary harbor recomputes from the trial dirs, so mop-up moves it to
    the archive and harbor writes a fresh one.
    """
    from harbor.models.job.result import JobResult

    path = job_dir / "result.json"
    if not os.path.lexists(path):
        return True
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False  # a dir where harbor writes a file: it goes to the archive, unopened
        JobResult.model_validate_json(path.read_bytes().decode("utf-8"))
        return True
    except (OSError, ValueError):
        return False


def trial_dirs_of(job_dir: Path) -> list[Path]:
    return sorted(p for p in job_dir.iterdir() if p.is_dir()) if job_dir.is_dir() else []


def trial_task(trial_dir: Path) -> str | None:
    """The task a trial dir belongs to: its result.json, else its config.json (as the tally reads them)."""
    result, _ = read_json_object(trial_dir / "result.json")
    if result and isinstance(result.get("task_name"), str) and result["task_name"]:
        return result["task_name"]
    config, _ = read_json_object(trial_dir / "config.json")
    task = (config or {}).get("task")
    if isinstance(task, dict):
        if isinstance(task.get("name"), str) and task["name"]:  # a package task: "org/name"
            return task["name"]
        if isinstance(task.get("path"), str) and task["path"].rstrip("/"):
            return Path(task["path"].rstrip("/")).name
    return None
