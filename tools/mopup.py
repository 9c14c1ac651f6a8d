#!/usr/bin/env python3
"""Mop-up: plan and bookkeeping for retrying exactly a run's infra-errored and unfinished tasks.

scripts/mopup.sh drives it (settings, endpoint, harbor's argv); this file holds the logic:

  plan     which tasks to retry (the tally's retry-targets, plus tasks that never started),
           how (resume the job in place, or a standalone retry job), which trial dirs must
           leave the job first, and why. Writes the plan as JSON; prints it for people.
  prepare  carry out a plan's file moves: archive trial dirs, patch n_concurrent_trials.
           Idempotent: a move already done is skipped, so an interrupted mop-up reruns.
  report   after harbor: which planned trials ran ("re-ran X of Y"), and anything unplanned.
  archive  list what mop-up took out of jobs (the manifest and the archive on disk).
  restore  move archived trial dirs back into their job.

Nothing here deletes. A trial dir leaves a job only by a rename into
state/<run>/archive/<batch>/<job-name>/<trial>, recorded in state/<run>/manifest.jsonl
(append-only) before and after the rename. Why the archive is outside the job: on resume
harbor rmtree's every dir of a job that has no result.json (docs/harbor.md §5). How the moves
and writes survive a kill, a full disk and a live harbor: tools/mopup_archive.py.

Harbor's files are read as untrusted: a config.json, lock.json or result.json may be missing,
empty, truncated, not UTF-8, not a JSON object, a directory or a FIFO. A special file is never
opened (it could hang us); each problem gives one line naming the file. Where a retry job
can still run safely (it leaves the job as it is), the plan uses one and says why; where not
(make tally itself would hang), mop-up stops with exit 1.

Exit codes: 0 done, 1 a user-facing error (message says what and how to fix), 2 usage.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import re
import stat
import subprocess
import sys
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import click

TOOLS_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS_DIR))

# read_manifest and patch_concurrency are here for tests/test_mopup.py, which calls them as mopup.*.
from mopup_archive import (  # noqa: E402  (tools/ is on sys.path)
    AGAIN, WriteFailed, append_manifest, archive_inventory, archive_trials, describe_archived,
    file_kind, manifest_path, move_dir, patch_concurrency, read_manifest, read_manifest_lines,
    refuse_live_writers, remove_stale_temps, restore_one, shown, special_file, what_moved, write_atomically)

# Passed to `harbor job resume -f`: exception types are Python class names, which cannot
# contain '-', so this matches no trial. Without an explicit -f, harbor's default
# `-f CancelledError` would rmtree those trials itself; mop-up archives them first instead.
NO_MATCH_FILTER = "mopup-archived-first-matches-nothing"

# Job-config fields that may differ without making a resume run something different:
# where the job lives (harbor rebinds both on resume) and the concurrency (mop-up patches
# config.json and lock.json together). Everything else must match what `harbor run` would
# resolve now, or the resumed trials would silently use the old settings.
IGNORED_CONFIG_FIELDS = ("job_name", "jobs_dir", "n_concurrent_trials")

GLOB_CHARS = re.compile(r"[*?\[\]]")


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


# --- the tally: one source of truth for what to retry ---------------------------------------


def tally_naming():
    """next_retry_job_name / run_job_dirs from tools/tally.py: the run's job naming lives there."""
    try:
        import tally  # noqa: PLC0415  (tools/ is on sys.path)
    except ImportError as exc:
        raise click.ClickException(f"cannot import tools/tally.py ({exc}): mop-up takes its job naming from it")
    missing = [name for name in ("next_retry_job_name", "run_job_dirs") if not hasattr(tally, name)]
    if missing:
        raise click.ClickException(f"tools/tally.py lacks {', '.join(missing)}, which mop-up imports for the run's job naming")
    return tally


def run_tally(args: list[str]) -> dict:
    """tools/tally.py with --json, in this interpreter; its error is passed on verbatim."""
    cmd = [sys.executable, str(TOOLS_DIR / "tally.py"), *args, "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise click.ClickException(f"tally failed ({' '.join(args[:1])}): {proc.stderr.strip() or proc.stdout.strip()}")
    return json.loads(proc.stdout)


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
    # What `harbor job resume -p` does (0.25): the directory given is the job's location.
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
    compares with trials_dir rebound); planned trials without a match are what runs.
    Returns (tasks that would run, the error harbor would raise or None).
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


# --- the plan ---------------------------------------------------------------------------------


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


def main_job_dir(jobs_dir: Path, job_name: str) -> Path:
    """The run's job dir, flat or nested; one without config.json too (the plan then says why it cannot resume)."""
    candidates = (jobs_dir / job_name, jobs_dir / "jobs" / job_name)
    for candidate in candidates:
        if os.path.lexists(candidate / "config.json"):
            return candidate
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise click.ClickException(
        f"no job '{job_name}' under {jobs_dir} (looked for {job_name}/config.json and jobs/{job_name}/config.json). "
        "Run `make bench RUN=…` first, or set JOBS_DIR/JOB_NAME to where the job is."
    )


def select_tasks(targets: dict, known: set[str], planned: list) -> dict[str, dict]:
    """The tally's retry targets, plus planned tasks no job dir of the run has ever seen.

    The second kind is what a crash leaves: harbor killed before it started them, so no
    trial dir names them and the tally cannot know them; harbor's own plan can.
    """
    tasks = {t["task"]: {"task": t["task"], "outcome": t["outcome"], "exception_type": t.get("exception_type"),
                         "trial_dirs": [x["trial_dir"] for x in t.get("trials", [])] or [t.get("trial_dir")]}
             for t in targets["tasks"]}
    for name in sorted({task_of(c) for c in planned} - known - set(tasks)):
        tasks[name] = {"task": name, "outcome": "unfinished", "exception_type": None, "trial_dirs": [],
                       "note": "never started"}
    for name in tasks:
        if GLOB_CHARS.search(name):
            raise click.ClickException(
                f"task name {name!r} holds a glob character: harbor's --include-task-name would match more than it")
    return tasks


def resume_blockers(job_dir: Path, frozen_raw: dict, current: dict, config, task_configs: list, planned: list,
                    leaving: list[Path], selected: set[str], n_concurrent: int) -> list[str]:
    """Every reason `harbor job resume` would not run exactly `selected`; [] when it would."""
    blockers = [f"setting changed since the job was created: {d}" for d in config_differences(frozen_raw, current)]
    blockers += lock_blockers(job_dir)
    blockers += [f"a secret was frozen redacted ({s}); a resume would send the redacted string"
                 for s in redacted_secrets(frozen_raw)]
    if blockers or not planned:
        return blockers
    would_run, error = simulate_resume(job_dir, planned, set(leaving))
    error = error or lock_mismatch(job_dir, config, task_configs, planned, n_concurrent)
    if error:
        return [error]
    extra, missing = sorted(set(would_run) - selected), sorted(selected - set(would_run))
    if extra:
        blockers.append(f"a resume would also re-run {', '.join(extra)}, already settled by another job of the run")
    if missing:
        blockers.append(f"a resume would not re-run {', '.join(missing)} (their trials are in another job of the run)")
    return blockers


def build_plan(jobs_dir: Path, job_name: str, mode: str, n_concurrent: int, current: dict, run: str,
               verdicts: Path | None = None) -> dict:
    naming = tally_naming()
    job_dir = main_job_dir(jobs_dir, job_name)
    refuse_special_files(naming.run_job_dirs(jobs_dir, job_name))
    selection = ["--jobs-dir", str(jobs_dir), "--job-name", job_name]
    if verdicts:
        selection += ["--verdicts", str(verdicts)]
    targets = run_tally(["retry-targets", *selection])
    known = {row["task"] for row in run_tally(["tally", *selection]).get("per_task", [])}

    config, frozen_raw, config_blocker = read_job_config(job_dir)
    warnings: list[str] = []
    task_configs: list = []
    planned: list = []
    blockers: list[str] = []
    if config is None:
        blockers.append(config_blocker)
        warnings.append("tasks that never started cannot be listed without the job's config.json; "
                        "they are not in this plan")
    else:
        try:
            task_configs, planned = planned_trial_configs(config)
        except Exception as exc:  # a --repo dataset needs the network; harbor's resume would fail the same way
            blockers.append(f"harbor cannot resolve the job's dataset now ({type(exc).__name__}: {exc})")
            warnings.append("tasks that never started cannot be listed without the dataset; they are not in this plan")

    tasks = select_tasks(targets, known, planned)
    selected = sorted(tasks)
    # In place, every dir of a selected task leaves the job (so harbor re-runs it), and so does
    # every dir without result.json (harbor would rmtree it). A dir's task is the tally's when
    # the tally names the dir (it also reads a task from the dir's name), else its files'.
    tally_task = {d: t["task"] for t in tasks.values() for d in t["trial_dirs"] if d}
    task_of_dir = {d: tally_task.get(str(d)) or trial_task(d) for d in trial_dirs_of(job_dir)}
    leaving = [d for d, task in task_of_dir.items() if task in tasks or not (d / "result.json").exists()]
    if config is not None:
        blockers += resume_blockers(job_dir, frozen_raw, current, config, task_configs, planned,
                                    leaving, set(selected), n_concurrent)

    if not selected:
        chosen = "none"
    elif mode == "auto":
        chosen = "retry-job" if blockers else "resume"
    elif mode == "resume" and blockers:
        raise click.ClickException(
            "MOPUP_MODE=resume, but resuming the job in place cannot work:\n  - " + "\n  - ".join(blockers)
            + "\nRun with MOPUP_MODE=auto (or retry-job) for a standalone retry job instead.")
    else:
        chosen = mode

    batch = now_utc().strftime("%Y%m%dT%H%M%S%fZ")
    plan = {
        "run": run,
        "created_at": now_utc().isoformat(),
        "batch": batch,
        "jobs_dir": str(jobs_dir),
        "job_name": job_name,
        "job_dir": str(job_dir),
        "mode": chosen,
        "requested_mode": mode,
        "why_not_resume": blockers,
        "warnings": warnings,
        "tasks": [tasks[name] for name in selected],
        "archive": [],
        "concurrency": None,
        "retry_job_name": None,
        "resume_argv": None,
        "trial_dirs_before": sorted(str(d) for jd in naming.run_job_dirs(jobs_dir, job_name) for d in trial_dirs_of(Path(jd))),
    }
    if chosen == "resume":
        plan["archive"] = [{"src": str(d), "job": job_dir.name, "task": task_of_dir[d],
                            "finished": (d / "result.json").exists()} for d in leaving]
        if not job_result_readable(job_dir):
            plan["unreadable_job_result"] = str(job_dir / "result.json")
        # Both files, each on its own: an interrupted patch may have left one behind.
        frozen_n = config.n_concurrent_trials
        locked_n = (read_json_object(job_dir / "lock.json")[0] or {}).get("n_concurrent_trials")
        if frozen_n != n_concurrent or locked_n not in (None, n_concurrent):
            plan["concurrency"] = {"from": frozen_n, "lock_from": locked_n, "to": n_concurrent}
        plan["resume_argv"] = ["harbor", "job", "resume", "-p", str(job_dir), "--filter-error-type", NO_MATCH_FILTER]
    elif chosen == "retry-job":
        plan["retry_job_name"] = naming.next_retry_job_name(jobs_dir, job_name)
    return plan


def describe_plan(plan: dict, state_dir: Path) -> str:
    lines = []
    n = len(plan["tasks"])
    if plan["mode"] == "none":
        lines.append(f"nothing to retry in run '{plan['run']}': no task is errored (infra) or unfinished.")
        return "\n".join(lines)
    lines.append(f"plan: retry {n} task(s) of job {plan['job_name']} ({plan['job_dir']})")
    for t in plan["tasks"]:
        why = t.get("exception_type") or t.get("note") or "no result.json"
        where = ", ".join(str(d) for d in t["trial_dirs"] if d) or "-"
        lines.append(f"  {t['task']:<32} {t['outcome']:<10} {why:<28} {where}")
    lines.append(f"why they errored, from their sandboxes' logs: make sandboxes RUN={plan['run']}")
    if plan["mode"] == "resume":
        lines.append("mechanism: resume the job in place (its frozen config matches what would run now)")
        if plan["archive"]:
            lines.append(f"first, move {len(plan['archive'])} trial dir(s) out of the job to {state_dir / 'archive' / plan['batch']}/:")
            for a in plan["archive"]:
                lines.append(f"  {a['src']}{'' if a['finished'] else '   (no result.json: harbor would delete it)'}")
        if plan.get("unreadable_job_result"):
            lines.append(f"{plan['unreadable_job_result']} is unreadable (harbor was killed writing it): "
                         "it goes to the archive too, and harbor writes a new one")
        if plan["concurrency"]:
            c = plan["concurrency"]
            was = c["from"] if c["lock_from"] in (None, c["from"]) else f"{c['from']} (lock.json: {c['lock_from']})"
            lines.append(f"n_concurrent_trials {was} -> {c['to']} in config.json and lock.json (backups in the archive)")
        lines.append(f"new trials land in {plan['job_dir']}/<task>__<id>/")
    else:
        lines.append("mechanism: a standalone retry job, because resuming the job in place cannot work:"
                     if plan["why_not_resume"] else "mechanism: a standalone retry job (MOPUP_MODE=retry-job)")
        lines += [f"  - {b}" for b in plan["why_not_resume"]]
        if any(b.startswith("setting changed") for b in plan["why_not_resume"]):
            lines.append("note: these tasks run with today's settings; the rest of the run ran with the old ones")
        lines.append("nothing leaves any job; new trials land in "
                     f"{Path(plan['jobs_dir']) / plan['retry_job_name']}/<task>__<id>/")
    for w in plan["warnings"]:
        lines.append(f"warning: {w}")
    return "\n".join(lines)


# --- click commands ---------------------------------------------------------------------------


@click.group()
def cli() -> None:
    """Mop-up planning and bookkeeping (see the module docstring)."""


@cli.command()
@click.option("--jobs-dir", type=click.Path(path_type=Path), required=True)
@click.option("--job-name", required=True)
@click.option("--run", required=True)
@click.option("--state-dir", type=click.Path(path_type=Path), required=True)
@click.option("--mode", type=click.Choice(["auto", "resume", "retry-job"]), default="auto")
@click.option("--n-concurrent", type=int, required=True)
@click.option("--current-config", type=click.Path(exists=True, path_type=Path), required=True,
              help="`harbor run … --print-config` output for the job as it would run now")
@click.option("--verdicts", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The run's manual verdicts (as make tally reads them): such tasks are never retried.")
@click.option("--out", type=click.Path(path_type=Path), required=True)
def plan(jobs_dir, job_name, run, state_dir, mode, n_concurrent, current_config, verdicts, out):
    """Decide what to retry and how; write the plan JSON to --out and print it."""
    the_plan = build_plan(jobs_dir.resolve(), job_name, mode, n_concurrent,
                          json.loads(current_config.read_text()), run, verdicts)
    try:
        write_atomically(out, json.dumps(the_plan, indent=2))
    except WriteFailed as exc:
        raise click.ClickException(exc.message("nothing was moved"))
    click.echo(describe_plan(the_plan, state_dir), err=True)


@cli.command()
@click.option("--plan", "plan_path", type=click.Path(exists=True, path_type=Path), required=True)
@click.option("--state-dir", type=click.Path(path_type=Path), required=True)
def prepare(plan_path, state_dir):
    """Archive the plan's trial dirs and patch the concurrency; a rerun after a kill at any point finishes it."""
    p = json.loads(plan_path.read_text())
    state_dir = Path(os.path.abspath(state_dir))
    job_dir = Path(p["job_dir"])
    moved: list[str] = []
    try:
        if p["mode"] == "resume":  # before anything changes: refuse while someone still writes the job
            refuse_live_writers([Path(a["src"]) for a in p["archive"]], job_dir)
        for tmp in remove_stale_temps(job_dir, state_dir):
            click.echo(f"removed {shown(tmp)}, a temp file of an interrupted mop-up", err=True)
        if p["mode"] != "resume":
            return
        archive_trials(p, state_dir, moved)
        job_files = state_dir / "archive" / p["batch"] / (job_dir.name + ".job-files")
        if p.get("unreadable_job_result"):
            archive_job_result(Path(p["unreadable_job_result"]), job_files / "result.json", p["batch"], state_dir)
        if p["concurrency"]:
            patch_concurrency(job_dir, p["concurrency"]["to"], job_files, state_dir)
    except WriteFailed as exc:
        raise click.ClickException(exc.message(what_moved(moved, manifest_path(state_dir))))
    # Last line of defence before harbor runs: it deletes every dir without result.json.
    doomed = [d.name for d in trial_dirs_of(job_dir) if not (d / "result.json").exists()]
    if doomed:
        raise click.ClickException(
            f"not resuming: harbor would delete {', '.join(doomed)} (no result.json; they appeared after the plan). "
            f"{AGAIN.capitalize()}: it archives them first")
    click.echo(f"archived {len(moved)} trial dir(s) to {shown(state_dir / 'archive' / p['batch'])}", err=True)


def archive_job_result(src: Path, dest: Path, batch: str, state_dir: Path) -> None:
    """Move the job's unreadable result.json to the archive (a rename, like the trial dirs); once."""
    if not os.path.lexists(src) or os.path.lexists(dest):
        return  # moved already (maybe by an attempt killed before its record), or harbor has written a new one
    record = {"event": "archive-job-file", "src": str(src), "dest": str(dest), "batch": batch,
              "why": "unreadable (harbor killed while writing it); harbor writes a new one"}
    append_manifest(state_dir, {**record, "state": "moving"})
    move_dir(src, dest)
    append_manifest(state_dir, {**record, "state": "moved"})


@cli.command()
@click.option("--plan", "plan_path", type=click.Path(exists=True, path_type=Path), required=True)
def report(plan_path):
    """Which planned trials ran; fails when harbor ran a trial mop-up did not plan."""
    p = json.loads(plan_path.read_text())
    naming = tally_naming()
    before = set(p["trial_dirs_before"])
    planned = {t["task"] for t in p["tasks"]}
    ran: Counter = Counter()
    unplanned = []
    for jd in naming.run_job_dirs(Path(p["jobs_dir"]), p["job_name"]):
        for d in trial_dirs_of(Path(jd)):
            if str(d) in before or not (d / "result.json").exists():
                continue
            task = trial_task(d)
            if task in planned:
                ran[task] += 1
            else:
                unplanned.append(str(d))
    not_run = sorted(planned - set(ran))
    click.echo(f"re-ran {sum(ran.values())} of {len(planned)} planned trials")
    if not_run:
        click.echo(f"not re-run (yet): {', '.join(not_run)}: {AGAIN}", err=True)
    if unplanned:
        raise click.ClickException(f"harbor ran {len(unplanned)} trial(s) mop-up did not plan: {', '.join(unplanned)}")


@cli.command("archive")
@click.option("--state-dir", type=click.Path(path_type=Path), required=True)
def archive_list(state_dir):
    """List archived trial dirs: batch, job, trial, task, and whether each is still in the archive."""
    state_dir = Path(os.path.abspath(state_dir))
    entries = archive_inventory(state_dir)
    if not entries:
        click.echo(f"the archive of run {state_dir.name} is empty: mop-up has moved nothing out of its jobs")
        return
    for entry in entries:
        click.echo(describe_archived(entry))
    broken = read_manifest_lines(state_dir)[1]
    if broken:
        click.echo(f"note: {broken} line(s) of {shown(manifest_path(state_dir))} were cut short by a killed mop-up; "
                   "the list above also reads the archive on disk", err=True)


@cli.command()
@click.option("--state-dir", type=click.Path(path_type=Path), required=True)
@click.argument("trials", nargs=-1, required=True)
def restore(state_dir, trials):
    """Move archived trial dirs (by trial dir name, or 'all') back into their jobs."""
    state_dir = Path(os.path.abspath(state_dir))
    run = state_dir.name
    entries = archive_inventory(state_dir)
    if not entries:
        click.echo(f"the archive of run {run} is empty: nothing to restore")
        return
    unknown = set(trials) - {"all"} - {e.trial for e in entries}
    if unknown:
        raise click.ClickException(f"not in the archive of run {run}: {', '.join(sorted(unknown))} "
                                   "(list it with `make mopup-archive`)")
    wanted = [e for e in entries if "all" in trials or e.trial in trials]
    restored: list[str] = []
    problems: list[str] = []
    try:
        for entry in wanted:
            status = entry.status()
            if status == "MISSING":
                problems.append(f"{entry.trial} is neither in the archive ({shown(entry.dest)}) nor back in its job")
            elif status == "archived" and entry.src is None:
                problems.append(f"no record says which job {shown(entry.dest)} came from: "
                                "move it back into its job dir by hand")
            elif status == "archived":
                restore_one(state_dir, entry)
                restored.append(str(entry.src))
                click.echo(f"restored {entry.src}")
    except WriteFailed as exc:
        done = (f"{len(restored)} trial dir(s) were moved back before that, each recorded in "
                f"{shown(manifest_path(state_dir))}" if restored else "nothing was moved")
        raise click.ClickException(exc.message(done, verb="make mopup-restore"))
    if problems and ("all" not in trials or any(p.startswith("no record") for p in problems)):
        raise click.ClickException("; ".join(problems))
    for problem in problems:
        click.echo(f"warning: {problem}", err=True)
    if not restored and not problems:
        click.echo("nothing to restore: " + ("every archived trial dir is" if "all" in trials else "those trial dirs are")
                   + " back in its job already")


if __name__ == "__main__":
    cli()
