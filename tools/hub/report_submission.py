"""report_submission: check-submission, the Terminal-Bench leaderboard rules read from a run's
job dirs (harbor's JobConfig in config.json, a valid TrialResult in every trial dir, at least
MIN_TRIALS valid trials per task); each problem says its fix in this repository's terms.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from tools import safe_read
from tools.results.report_load import display_path

MULTIPLIERS = ("timeout_multiplier", "agent_timeout_multiplier", "verifier_timeout_multiplier",
               "agent_setup_timeout_multiplier", "environment_build_timeout_multiplier")
# Every override_* of harbor 0.26.0's EnvironmentConfig (override_tpu is new in 0.26.0; tests/test_report.py
# fails when harbor adds one this list lacks).
ENV_OVERRIDES = ("override_cpus", "override_memory_mb", "override_storage_mb", "override_gpus", "override_tpu")
AGENT_OVERRIDES = ("override_timeout_sec", "override_setup_timeout_sec", "max_timeout_sec")
VERIFIER_OVERRIDES = ("override_timeout_sec", "max_timeout_sec")
MIN_TRIALS = 5


def _env_file(run: str | None) -> str:
    return f"runs/{run or '<run>'}.env"


def _bench_it(run: str | None) -> str:
    """How to run the job again with the fix, never a verb the project refuses: a bundled
    example (example-*) ships its job dirs to show a refusal and is never benched."""
    if run and run.startswith("example-"):
        return (f"run {run} is a bundled example, shipped to show this refusal, and is never benched: "
                f"a run of your own sets it in its run file (as runs/qwen-t2-leaderboard.env does)")
    return f"make bench RUN={run or '<run>'}"


def _not_ours(run: str | None) -> str:
    # harbor flags this repository never passes: the job was started some other way.
    if run and run.startswith("example-"):
        return f"this repository never sets it; {_bench_it(run)}"
    return f"this repository never sets it; start the job with {_bench_it(run)}"


def _number_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def config_problems(job_dir: Path, run: str | None = None) -> list[str]:
    """Leaderboard rules read from the job's config.json (harbor's JobConfig).

    The advice names this repository's settings (runs/<run>.env), not harbor's flags.
    """
    return config_file_problems(job_dir / "config.json", run)


def config_file_problems(path: Path, run: str | None = None, whose: str = "job") -> list[str]:
    """The same rules on one config.json: a job's (JobConfig: `agents`, a list) or a trial's
    (TrialConfig: `agent`, one mapping; make submission checks every trial it submits, since
    a trial's own config is what harbor ran it with)."""
    try:
        cfg = safe_read.read_json_object(path, what="a config.json")
    except FileNotFoundError:
        return [f"{path}: missing; the {whose}'s settings cannot be checked (it is written by harbor run)"]
    except safe_read.Unreadable as e:
        return [f"{path}: unreadable ({e}); the {whose}'s settings cannot be checked"]
    problems = []
    for key in MULTIPLIERS:
        value = cfg.get(key)
        if value is None:
            continue
        number = _number_or_none(value)
        if number is None:
            problems.append(f"{path}: {key} is {safe_read.clip(repr(value), 60)}, not a number; the leaderboard requires 1.0")
        elif number != 1.0:
            fix = (f"set AGENT_TIMEOUT_MULTIPLIER=1 in {_env_file(run)}" if key == "agent_timeout_multiplier"
                   else _not_ours(run))
            problems.append(f"{path}: {key} is {number:g}; the leaderboard requires 1.0 ({fix})")
    # harbor 0.26.0: per exception type, whether an errored trial is retried, graded, or has a valid
    # reward. The board's figures assume harbor's own table; empty is harbor's default.
    policy = cfg.get("override_error_policy")
    if policy not in (None, {}):
        problems.append(f"{path}: override_error_policy is {safe_read.clip(str(policy), 200)}; error-policy overrides "
                        f"change which errored trials are graded or retried, and are not allowed ({_not_ours(run)})")
    sections = [("environment", _mapping(cfg.get("environment")), ENV_OVERRIDES, "resource")]
    listed = cfg.get("agents") if isinstance(cfg.get("agents"), list) else []
    sections += [(f"agents[{i}]", _mapping(a), AGENT_OVERRIDES, "agent timeout") for i, a in enumerate(listed)]
    if isinstance(cfg.get("agent"), dict):
        sections.append(("agent", cfg["agent"], AGENT_OVERRIDES, "agent timeout"))
    sections.append(("verifier", _mapping(cfg.get("verifier")), VERIFIER_OVERRIDES, "verifier timeout"))
    for label, section, keys, what in sections:
        problems += [f"{path}: {label}.{key} is {safe_read.clip(str(section[key]), 60)}; {what} overrides are not "
                     f"allowed ({_not_ours(run)})" for key in keys if section.get(key) is not None]
    return problems


def _mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def task_of_dir(trial: Path) -> str:
    """Task name of a trial dir without a usable result.json: its config, else its name."""
    try:
        cfg = safe_read.read_json_object(trial / "config.json", what="a config.json")
        path = (cfg.get("task") or {}).get("path")
        if isinstance(path, str) and path:
            return safe_read.clip(Path(path).name)
    except (OSError, safe_read.Unreadable, AttributeError):
        pass
    return safe_read.shown(trial.name.rsplit("__", 1)[0])


def validation_summary(error: Exception) -> str:
    """The first pydantic error, short: `EOF while parsing a string` / `field required at id`."""
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return str(error)
    errs = errors()
    first = errs[0]
    loc = ".".join(str(p) for p in first.get("loc", ()))
    text = first["msg"] + (f" at {loc}" if loc else "")
    return safe_read.clip(text, 300) + (f", and {len(errs) - 1} more" if len(errs) > 1 else "")


def read_trial_result(result: Path):
    """A result.json as harbor's TrialResult, or Unreadable with the one-line reason.

    FileNotFoundError passes through (an unfinished trial). The shape is checked first,
    so `[]` or a truncated file reads as such, not as a pydantic error.
    """
    from harbor.models.trial.result import TrialResult
    from pydantic import ValidationError

    raw = safe_read.read_regular(result)
    data = safe_read.parse_json_object(raw)
    if not data.keys() & TrialResult.model_fields.keys():
        raise safe_read.Unreadable("a JSON object with none of TrialResult's fields (task_name, finished_at, ...)")
    try:
        return TrialResult.model_validate_json(raw)
    except ValidationError as e:
        raise safe_read.Unreadable(validation_summary(e)) from None


def _rebuild_fix(run: str | None) -> str:
    """A built tree holds what it should not: make submission builds it without (a hand-made
    tree, or one changed after it was built)."""
    return f"make submission RUN={run or '<run>'} leaves it out of the tree it builds"


def trial_problem(trial: Path, run: str | None = None, counted: bool = False) -> tuple[str, bool, str | None]:
    """(the trial's task, whether its result.json is a valid TrialResult, the problem if not).
    `counted`: a trial the submission holds (the tally read its result.json), not one of a built tree."""
    result = trial / "result.json"
    try:
        res = read_trial_result(result)
    except FileNotFoundError:
        return task_of_dir(trial), False, (f"{trial}: no result.json (an unfinished or crashed trial), which the "
                                           f"leaderboard cannot count; {_rebuild_fix(run)}")
    except safe_read.Unreadable as e:
        fix = ("the tally counts it, the leaderboard cannot: run the trial again" if counted
               else f"re-run the trial; {_rebuild_fix(run)} when the tally cannot read it either")
        return task_of_dir(trial), False, f"{result}: not a valid TrialResult ({e}); {fix}"
    return safe_read.clip(res.task_name), True, None


def short_problem(valid_per_task: Counter, tasks: set[str], min_trials: int, run: str | None,
                  k: int | None = None) -> list[str]:
    """At least `min_trials` valid trials per task. `k`: a run's attempts per task, when the trials are
    its slot-filling ones; with k at least min_trials a short task's trials are named above, as problems."""
    short = sorted(t for t in tasks if valid_per_task[t] < min_trials)
    if not short:
        return []
    shown = ", ".join(f"{t} ({valid_per_task[t]})" for t in short[:10])
    more = f" (+{len(short) - 10} more)" if len(short) > 10 else ""
    if k is not None and k >= min_trials:
        fix = "their trials' result.json are named above"
    elif run and run.startswith("example-"):
        fix = _bench_it(run)
    else:
        fix = f"set N_ATTEMPTS={min_trials} in {_env_file(run)} and bench the run with it ({_bench_it(run)})"
    return [f"{len(short)} of {len(tasks)} tasks {'has' if len(short) == 1 else 'have'} fewer than {min_trials} valid "
            f"trials: {shown}{more}; {fix}"]


def check_submission(job_dirs: list[Path], min_trials: int = MIN_TRIALS, run: str | None = None) -> dict:
    """Does a built submission tree (its job dirs, every trial dir in them) meet the Terminal-Bench
    leaderboard rules? Pure over the files. A run's check is tools/hub/submission_verdict.py's."""
    problems: list[str] = []
    valid_per_task: Counter = Counter()
    seen_tasks: set[str] = set()
    n_trials = 0
    for job_dir in job_dirs:
        if not job_dir.is_dir():
            problems.append(f"{job_dir}: no such job dir")
            continue
        problems += config_problems(job_dir, run)
        try:
            trials, refused, _ = safe_read.trial_dir_entries(str(job_dir))
        except safe_read.Unreadable as e:
            problems.append(f"{job_dir}: {e}")
            continue
        problems += [f"{path}: {why}; {_rebuild_fix(run)}" for path, why in refused]
        for trial in map(Path, trials):
            n_trials += 1
            task, valid, problem = trial_problem(trial, run)
            seen_tasks.add(task)
            valid_per_task[task] += valid
            problems += [problem] if problem else []
    problems += short_problem(valid_per_task, seen_tasks, min_trials, run)
    if not n_trials and not any("no such job dir" in p for p in problems):
        problems.append("no trial dirs found: nothing to submit")
    return verdict_of(job_dirs, seen_tasks, n_trials, valid_per_task, problems)


def verdict_of(job_dirs: list[Path], tasks: set[str], n_trials: int, valid_per_task: Counter,
               problems: list[str]) -> dict:
    return {"ok": not problems, "job_dirs": [safe_read.shown(display_path(str(d))) for d in job_dirs],
            "tasks": len(tasks), "trials": n_trials,
            "min_valid_trials_per_task": min(valid_per_task[t] for t in tasks) if tasks else 0,
            "problems": [display_path_in(p) for p in problems]}


def display_path_in(message: str) -> str:
    cwd = str(Path.cwd()) + os.sep
    return safe_read.shown(message.replace(cwd, ""))


def plural(n: int, word: str) -> str:
    """`1 problem`, `2 problems`: the plural only when more than one."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def submission_markdown(label: str, verdict: dict) -> str:
    """The verdict, as check-submission and make submission print it."""
    if verdict["ok"]:
        return (f"{label}: meets the Terminal-Bench leaderboard rules ({plural(verdict['tasks'], 'task')}, "
                f"{plural(verdict['trials'], 'trial')}, at least {plural(verdict['min_valid_trials_per_task'], 'valid trial')}"
                f" per task).\n")
    lines = [f"{label}: does NOT meet the Terminal-Bench leaderboard rules "
             f"({plural(len(verdict['problems']), 'problem')}):"]
    lines += [f"  - {p}" for p in verdict["problems"]]
    return "\n".join(lines) + "\n"
