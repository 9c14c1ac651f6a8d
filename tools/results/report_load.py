"""report_load: the tallies tools/report/report.py compares, read and checked (a file, a job dir, a run).

A tally JSON file is read and validated; a job dir or a run name is tallied by importing the
tally's library (tools/results/tally_core.py), the same code `make tally` runs: no subprocess, no JSON
parsed back. A run name's job dirs, verdicts and state dir come from scripts/lib.sh (one source
of truth for settings), as make tally resolves them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from tools import safe_read
from tools.results import tally_core
from tools.results import tally_jobs
from tools.results import tally_policy

REPO_ROOT = Path(__file__).resolve().parents[2]

OUTCOMES = ("passed", "failed", "errored", "unclassified", "unfinished")
SCORED = ("passed", "failed")

TALLY_FIELDS = (
    "run", "accounting", "tasks", "passed", "failed", "errored", "unclassified",
    "unfinished", "scored", "pass_rate", "per_task",
)
TASK_FIELDS = ("task", "outcome")
COUNT_FIELDS = ("tasks", *OUTCOMES, "scored")
REGENERATE = "Regenerate it with: python -m tools.tally tally ... --json"


def fail(message: str) -> None:
    """A user error: click prints `Error: message` and exits 1."""
    raise click.ClickException(message)


def validate_tally(tally: Any, source: str) -> dict:
    """Check the fields this tool reads, and their types; name what is wrong and the fix."""
    if not isinstance(tally, dict):
        fail(f"{source}: not a tally (a JSON object was expected). "
             f"Make one with: python -m tools.tally tally --jobs-dir D --job-name N --json")
    missing = [f for f in TALLY_FIELDS if f not in tally]
    if missing:
        fail(f"{source}: tally JSON lacks {', '.join(missing)}. {REGENERATE}")
    for key in COUNT_FIELDS:
        if isinstance(tally[key], bool) or not isinstance(tally[key], int) or tally[key] < 0:
            fail(f"{source}: {key} is not a whole number ({safe_read.clip(repr(tally[key]), 60)}). {REGENERATE}")
    if not isinstance(tally["run"], str) or not isinstance(tally["accounting"], str):
        fail(f"{source}: run and accounting must be strings. {REGENERATE}")
    rate = tally["pass_rate"]
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate <= 1):
        fail(f"{source}: pass_rate is not null or a number in [0, 1] ({safe_read.clip(repr(rate), 60)}). {REGENERATE}")
    if not isinstance(tally["per_task"], list):
        fail(f"{source}: per_task is not a list of task rows. {REGENERATE}")
    for i, row in enumerate(tally["per_task"]):
        if not isinstance(row, dict):
            fail(f"{source}: per_task[{i}] is not an object. {REGENERATE}")
        lacking = [f for f in TASK_FIELDS if f not in row]
        if lacking:
            fail(f"{source}: per_task[{i}] lacks {', '.join(lacking)}")
        if not isinstance(row["task"], str):
            fail(f"{source}: per_task[{i}].task is not a string. {REGENERATE}")
        if row["outcome"] not in OUTCOMES:
            fail(f"{source}: task {safe_read.clip(repr(row['task']), 80)} has outcome {safe_read.clip(repr(row['outcome']), 40)}, "
                 f"not one of {', '.join(OUTCOMES)}")
    validate_attempts(tally, source)
    tally.setdefault("source", source)
    return tally


def validate_attempts(tally: dict, source: str) -> None:
    """A k > 1 tally's fields the comparison reads (tools/results/slots.py defines them)."""
    k = tally.get("n_attempts", 1)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        fail(f"{source}: n_attempts is not a whole number ≥ 1 ({safe_read.clip(repr(k), 60)}). {REGENERATE}")
    if k == 1:
        return
    for i, row in enumerate(tally["per_task"]):
        slots = row.get("slots")
        if not isinstance(slots, list) or len(slots) != k or any(s not in OUTCOMES for s in slots):
            fail(f"{source}: per_task[{i}].slots is not a list of {k} outcomes (n_attempts is {k}). {REGENERATE}")


def load_tally_file(path: Path) -> dict:
    try:
        raw = safe_read.read_regular(path, safe_read.TALLY_CAP, "a tally file")
    except FileNotFoundError:
        fail(f"no tally at {path}: the file does not exist. "
             f"Write one with: python -m tools.tally tally --jobs-dir D --job-name N --json > {path}")
    except safe_read.Unreadable as e:
        fail(f"{path}: {e}")
    try:
        data = safe_read.parse_json(raw)
    except safe_read.Unreadable as e:
        fail(f"{path}: not valid JSON ({e}). Regenerate the tally.")
    return validate_tally(data, str(path))


def known_runs() -> list[str]:
    return sorted(p.stem for p in (REPO_ROOT / "runs").glob("*.env"))


@dataclass(frozen=True)
class RunSettings:
    """What the report needs of a run, as scripts/lib.sh resolves it."""

    run: str
    jobs_dir: Path
    job_name: str
    verdicts: Path | None  # runs/<run>.verdicts.yaml, when there is one (make tally reads it too)
    state_dir: Path  # state/<run>/: its manifest, for the cost
    namespace: str  # HF_NAMESPACE (empty: the manifest's)
    project_label: str
    call_timeout: float
    prices_max_age: float
    state_root: Path
    model: str = ""  # MODEL: a job dir of the run's name that records another model is another run's
    max_task_retries: int = tally_core.DEFAULT_MAX_TASK_RETRIES  # MAX_TASK_RETRIES: the tally's final errors
    where: str = "local"  # WHERE: an hf run's trajectories come home with make pull (check-submission's advice)
    dataset: str = ""  # DATASET: a registry dataset, which check-submission wants pinned


def _absolute(p: str) -> Path:
    path = Path(p)
    return path if path.is_absolute() else REPO_ROOT / path


def run_settings(name: str) -> RunSettings:
    """A run's settings, through scripts/lib.sh: one source of truth. "" is the last run used."""
    script = ('source "$1"; RUN=$2; resolve_run; load_settings; '
              'v=""; [[ ! -f "$RUNS_DIR/$RUN.verdicts.yaml" ]] || v="$RUNS_DIR/$RUN.verdicts.yaml"; '
              'printf "%s\\n" "$RUN" "$JOBS_DIR" "$JOB_NAME" "$v" "$(run_state_dir)" "${HF_NAMESPACE:-}" '
              '"$(sanitize_label "${PROJECT_LABEL:-terminal-bench-harness}")" "${HF_CALL_TIMEOUT:-60}" '
              '"${PRICES_MAX_AGE:-86400}" "$STATE_ROOT" "$MODEL" "$MAX_TASK_RETRIES" "${WHERE:-local}" "${DATASET:-}"')
    proc = subprocess.run(
        ["bash", "-c", script, "report", str(REPO_ROOT / "scripts" / "lib.sh"), name],
        capture_output=True, text=True, cwd=REPO_ROOT,
    )
    if proc.returncode != 0:
        fail(proc.stderr.strip() or f"cannot resolve run {name!r}")
    if not name:
        # resolve_run's note (RUN not given; using the last run, …): which run this is, said.
        sys.stderr.write(proc.stderr)
    run, jobs_dir, job_name, verdicts, state_dir, ns, label, timeout, max_age, root, model, retries, where, dataset = \
        proc.stdout.split("\n")[:14]
    return RunSettings(run, _absolute(jobs_dir), job_name, Path(verdicts) if verdicts else None,
                       _absolute(state_dir), ns, label, _seconds(timeout, 60.0), _seconds(max_age, 86400.0),
                       _absolute(root), model, _max_task_retries(retries), where, dataset)


def _max_task_retries(text: str) -> int:
    """MAX_TASK_RETRIES as the tally takes it (scripts/lib.sh validate_max_task_retries checks it for
    the verbs); a value that is not one is refused here too."""
    if not (text.isascii() and text.isdigit() and int(text) <= tally_core.MAX_TASK_RETRIES_CAP):
        fail(f"setting MAX_TASK_RETRIES must be a whole number from 0 to {tally_core.MAX_TASK_RETRIES_CAP} (0: no limit), "
             f"got {safe_read.clip(repr(text), 40)}")
    return int(text)


def _seconds(text: str, default: float) -> float:
    try:
        return float(text)
    except ValueError:
        return default


def resolve_run_settings(name: str) -> tuple[str, Path, str]:
    """(run, jobs dir, job name) of a run."""
    s = run_settings(name)
    return s.run, s.jobs_dir, s.job_name


def run_tally(jobs_dir: Path, job_name: str, timeouts_unscored: bool, label: str,
              verdicts: Path | None = None, model: str | None = None,
              max_task_retries: int = tally_core.DEFAULT_MAX_TASK_RETRIES) -> dict:
    """The run's tally, from the tally's library (what `python -m tools.tally tally --json` prints).
    With `model` (the run's MODEL), a job dir of another run under the run's name is refused."""
    try:
        policy = tally_policy.load_policy()
        verdict_map = tally_policy.load_verdicts(str(verdicts)) if verdicts else {}
        dirs = tally_jobs.resolve_job_dirs((), str(jobs_dir), job_name, model)
    except tally_jobs.TallyError as e:
        try:
            found = tally_jobs.run_job_dirs(jobs_dir, job_name)
        except tally_jobs.TallyError:
            found = []
        if not found:
            # The run is known, its job has not run yet: that, not a setting, is what to fix.
            fail(f"no tally for {label}: its job dir {display_path(str(jobs_dir / job_name))} does not exist yet "
                 f"(make bench runs it; RUN=<run> names another run)")
        fail(f"no tally for {label} ({jobs_dir / job_name}): {e}")
    report = tally_core.tally(dirs, policy, verdict_map, timeouts_unscored, run=job_name,
                      verdicts_path=str(verdicts) if verdicts else None, max_task_retries=max_task_retries)
    # Through JSON, as the command line gives it: the same types (lists, not tuples) and fields.
    return validate_tally(json.loads(json.dumps(report)), label)


def load_run(arg: str, timeouts_unscored: bool = False) -> dict:
    """A tally from a tally JSON file, a job dir, or a run name (see tools/report/report.py's doc).

    A run name's tally carries `_settings` (its RunSettings), for the cost; never printed.
    """
    path = Path(arg)
    if os.path.lexists(arg) and not path.is_dir():  # a file, or a FIFO/loop load_tally_file names
        tally = load_tally_file(path)
        if timeouts_unscored and tally["accounting"] != "timeouts-unscored":
            fail(f"{arg}: tally uses {tally['accounting']}, but --timeouts-unscored was "
                 f"given. Re-tally with --timeouts-unscored, or drop the flag.")
        return tally
    if path.is_dir():
        resolved = path.resolve()
        return run_tally(resolved.parent, resolved.name, timeouts_unscored, arg)
    if arg.endswith(".json"):
        fail(f"no tally at {arg}: the file does not exist. Write one with: "
             f"python -m tools.tally tally --jobs-dir D --job-name N --json > {arg}")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", arg) or arg not in known_runs():
        fail(f"{arg!r} is neither a tally JSON file, a job dir, nor a run. "
             f"Known runs: {' '.join(known_runs()) or '(none in runs/)'}")
    settings = run_settings(arg)
    tally = run_tally(settings.jobs_dir, settings.job_name, timeouts_unscored, f"run {settings.run}",
                      settings.verdicts, settings.model or None, settings.max_task_retries)
    tally["_settings"] = settings
    return tally


def no_job_dir(run: str | None, jobs_dir: str | os.PathLike, job_name: str, fix: str | None = None) -> str:
    """A run not benched yet (no jobs dir, or none of the run's job dirs in it), in make's terms:
    where it looked (JOBS_DIR/JOB_NAME) and what to run."""
    run = run or "<run>"
    where = display_path(os.path.join(jobs_dir, job_name))
    fix = fix or f"run make bench RUN={run} first, or make pull RUN={run} for a run benched as an HF Job"
    return (f"run {run} has no job dir yet (looked for JOBS_DIR/JOB_NAME, {where}, and its -shard-N and -retry-N "
            f"jobs): {fix}")


def display_path(p: str | None) -> str | None:
    """A path relative to the working directory when it lies under it (stable goldens)."""
    if not p:
        return p
    try:
        return os.path.relpath(p) if Path(p).resolve().is_relative_to(Path.cwd()) else p
    except (OSError, ValueError, RuntimeError):  # RuntimeError: a symlink loop
        return p
