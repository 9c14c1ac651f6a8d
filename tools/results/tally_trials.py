"""tally_trials: reading a job dir's trials, each from its own result.json, as untrusted data.

`scan_job_dir` lists the trial dirs directly under a job dir (never walking into them, never
following a link) and `read_trial` reads one: its task, finished_at, reward, exception, tokens and
times, each checked (finite, in range, bounded); what cannot be read is noted in ScanNotes, never
raised. `retried_attempts` adds the attempts harbor retried inside the job (tools/results/retried.py kept
them beside it). Classifying a trial is tools/results/tally_policy.py's, counting it tools/results/tally_core.py's.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

from tools import safe_read
from tools.results.tally_jobs import retried_attempts_dir, short_repr

# The fields of TrialResult (harbor 0.26) this tool reads; a result.json lacking one is
# reported, because a schema change would otherwise read as "no reward" or "no error".
RESULT_FIELDS = (
    "task_name",
    "finished_at",
    "verifier_result",
    "exception_info",
    "agent_result",
    "agent_execution",
)
_RESULT_FIELD_SET = frozenset(RESULT_FIELDS)
_EPOCH = datetime.min.replace(tzinfo=timezone.utc)


@dataclass
class Trial:
    """One trial dir, as far as its result.json (or its absence) tells."""

    trial_dir: str
    job_dir: str
    task: str
    status: str  # finished | unfinished | unreadable
    finished_at: datetime | None = None
    reward: float | None = None
    exception_type: str | None = None
    exception_message: str | None = None
    tokens: tuple[int | None, int | None, int | None] | None = None
    agent_seconds: float | None = None
    error: str | None = None  # why an unreadable result.json could not be used
    outcome: str | None = None  # set by classify
    rule: str | None = None
    reason: str | None = None
    result_id: str | None = None  # harbor's TrialResult.id: one attempt, wherever its dir is
    trial_seconds: float | None = None  # started_at to finished_at: the whole trial, as the board times it
    retried: bool = False  # an attempt harbor retried inside its job (kept under .retried/): never a slot's
    verified: bool = False  # its result holds a verifier_result (an object): the verifier ran

    def sort_key(self) -> tuple[datetime, str]:
        # Latest finished_at wins; a trial without a usable timestamp sorts first; equal
        # timestamps fall back to the path so the choice never depends on scan order.
        return (self.finished_at or _EPOCH, self.trial_dir)


@dataclass
class ScanNotes:
    warnings: list[str] = field(default_factory=list)
    unreadable: list[dict] = field(default_factory=list)
    unreadable_warnings: list[str] = field(default_factory=list)  # one per unreadable, said last
    naive: list[str] = field(default_factory=list)
    missing_fields: dict[tuple[str, ...], list[str]] = field(default_factory=dict)

    def refuse(self, path: str, error: str, consequence: str) -> None:
        """Record a file or dir that could not be used, and what that means for the tally."""
        self.unreadable.append({"path": safe_read.shown(path), "error": error})
        self.unreadable_warnings.append(f"{safe_read.shown(path)}: {consequence}")


# What a trial's figures may be, read from files anyone could have edited: outside these they are
# left out with a note, never computed with (9999-12-31T23:59:59-14:00 overflowed, 1e999 tokens
# could not be counted, n_attempts 100000000 grew the tally to 3.4 GB).
YEARS = (2000, 2199)      # a trial's timestamps
TOKENS_CAP = 10 ** 15     # tokens of one trial
MAX_ATTEMPTS = 100        # harbor's -k: the leaderboard asks for 5


def parse_timestamp(value: Any) -> tuple[datetime | None, bool]:
    """(UTC datetime or None, was_naive). Harbor writes trial times as UTC with `Z`; a time
    outside YEARS is no time."""
    if not isinstance(value, str):
        return None, False
    try:
        dt = datetime.fromisoformat(value)
        utc = dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)
    except (ValueError, OverflowError):
        return None, False
    if not YEARS[0] <= utc.year <= YEARS[1]:
        return None, False
    return utc, dt.tzinfo is None


def count_of(value: Any, cap: int) -> int | None:
    """A whole count in [0, cap] (an int, or a float with no fraction), else None: never a
    bool, a NaN, an infinity or a negative number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return None
    return int(value) if 0 <= value <= cap else None


def _task_from_config(trial_dir: str) -> str | None:
    """The task name harbor would give, from the trial's config.json (written at start)."""
    try:
        task = safe_read.read_json_object(os.path.join(trial_dir, "config.json"), what="a config.json").get("task") or {}
    except (OSError, safe_read.Unreadable):
        return None
    if isinstance(task, dict):
        if isinstance(task.get("name"), str):  # package task: "org/name"
            return safe_read.clip(task["name"])
        if isinstance(task.get("path"), str) and task["path"].rstrip("/"):
            return safe_read.clip(os.path.basename(task["path"].rstrip("/")))
    return None


def _task_from_dir_name(name: str) -> str:
    # `<task[:32]>__<7 chars>`: exact for names up to 32 chars; longer ones are matched
    # back to a full name seen in a result.json by `_resolve_truncated`.
    return safe_read.shown(name.rsplit("__", 1)[0] if "__" in name else name)


def _task_of(trial_dir: str) -> str:
    return _task_from_config(trial_dir) or _task_from_dir_name(os.path.basename(trial_dir))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)



def read_result_object(path: str) -> dict:
    """A result.json as a JSON object with at least one TrialResult field, or Unreadable.

    FileNotFoundError passes through: no result.json is an unfinished trial, not an error.
    """
    data = safe_read.read_json_object(path, safe_read.RESULT_CAP)
    if not data.keys() & _RESULT_FIELD_SET:
        raise safe_read.Unreadable(f"a JSON object with none of TrialResult's fields ({', '.join(RESULT_FIELDS[:2])}, ...)")
    return data


def read_trial(trial_dir: str, job_dir: str, notes: ScanNotes) -> Trial:
    """Read one trial dir's result.json; never raises on bad content, notes it instead.

    `trial_dir` and `job_dir` are the real paths; the Trial carries them as `shown()`.
    """
    path = os.path.join(trial_dir, "result.json")
    shown_dir, shown_job = safe_read.shown(trial_dir), safe_read.shown(job_dir)
    try:
        data = read_result_object(path)
    except FileNotFoundError:
        return Trial(shown_dir, shown_job, _task_of(trial_dir), "unfinished")
    except safe_read.Unreadable as e:
        return _unreadable(trial_dir, job_dir, path, str(e), notes)
    path = safe_read.shown(path)

    if not data.keys() >= _RESULT_FIELD_SET:
        missing = tuple(k for k in RESULT_FIELDS if k not in data)
        notes.missing_fields.setdefault(missing, []).append(path)

    task = data.get("task_name")
    task = safe_read.clip(task) if isinstance(task, str) and task else _task_of(trial_dir)

    finished_at, naive = parse_timestamp(data.get("finished_at"))
    if naive:
        notes.naive.append(path)
    elif finished_at is None and "finished_at" in data:
        notes.warnings.append(
            f"{path}: finished_at {short_repr(data.get('finished_at'))} is not an ISO-8601 time of the years "
            f"{YEARS[0]}-{YEARS[1]}; this trial ranks below every timestamped attempt of its task")

    reward = _reward(data.get("verifier_result"), path, notes)
    exc_type, exc_msg = _exception(data.get("exception_info"), path, notes)
    tokens = _tokens(data.get("agent_result"), path, notes)
    agent_seconds = None
    timing = data.get("agent_execution")
    if isinstance(timing, dict):
        start, _ = parse_timestamp(timing.get("started_at"))
        end, _ = parse_timestamp(timing.get("finished_at"))
        if start and end and end >= start:
            agent_seconds = (end - start).total_seconds()

    result_id = data.get("id") if isinstance(data.get("id"), str) else None
    started_at, _ = parse_timestamp(data.get("started_at"))
    trial_seconds = (finished_at - started_at).total_seconds() if started_at and finished_at and \
        finished_at >= started_at else None
    return Trial(shown_dir, shown_job, task, "finished", finished_at, reward, exc_type, exc_msg, tokens,
                 agent_seconds, result_id=safe_read.clip(result_id, 100) if result_id else None, trial_seconds=trial_seconds,
                 verified=isinstance(data.get("verifier_result"), dict))


def _reward(verifier: Any, path: str, notes: ScanNotes) -> float | None:
    """verifier_result.rewards.reward as a finite number; None (noted) for anything else."""
    reward = None
    if isinstance(verifier, dict) and isinstance(verifier.get("rewards"), dict):
        rewards = verifier["rewards"]
        if "reward" in rewards:
            reward = _number(rewards["reward"])
            if reward is None or not math.isfinite(reward):
                notes.warnings.append(f"{path}: verifier reward {short_repr(rewards['reward'])} is not a number; "
                                      f"treated as no reward")
                reward = None
        elif rewards:
            notes.warnings.append(
                f"{path}: verifier rewards {short_repr(sorted(rewards))} have no 'reward' key; treated as no reward")
    elif verifier is not None:
        notes.warnings.append(f"{path}: verifier_result is not an object; treated as no reward")
    return reward


def _exception(exc: Any, path: str, notes: ScanNotes) -> tuple[str | None, str | None]:
    """(exception_type, exception_message) of exception_info; a type is never missing from a present one."""
    exc_type = exc_msg = None
    if isinstance(exc, dict):
        exc_type = exc.get("exception_type") if isinstance(exc.get("exception_type"), str) else None
        exc_msg = exc.get("exception_message") if isinstance(exc.get("exception_message"), str) else None
        if exc_type is None:
            exc_type = "(exception_info without exception_type)"
            notes.warnings.append(f"{path}: exception_info has no exception_type")
    return exc_type, exc_msg


def _tokens(agent: Any, path: str, notes: ScanNotes) -> tuple[int | None, int | None, int | None] | None:
    """agent_result's (input, cache, output) token counts, each a count in range or None (noted)."""
    tokens = None
    if isinstance(agent, dict):
        fields = ("n_input_tokens", "n_cache_tokens", "n_output_tokens")
        tokens = tuple(count_of(agent.get(name), TOKENS_CAP) for name in fields)
        bad = [f"{name} {short_repr(agent[name])}" for name, n in zip(fields, tokens)
               if n is None and agent.get(name) is not None]
        if bad:
            notes.warnings.append(f"{path}: {', '.join(bad)} is not a token count (0 to {TOKENS_CAP:.0e}); "
                                  f"left out of the token totals")
    return tokens


def _unreadable(trial_dir: str, job_dir: str, path: str, error: str, notes: ScanNotes) -> Trial:
    notes.refuse(path, error, f"unreadable result.json ({error}); the trial counts as unfinished")
    return Trial(safe_read.shown(trial_dir), safe_read.shown(job_dir), _task_of(trial_dir), "unreadable", error=error)


def scan_job_dir(job_dir: str | os.PathLike, notes: ScanNotes,
                 settle: Callable[[Trial], None] | None = None) -> list[Trial]:
    """Every trial dir directly under job_dir (one level: never walks into agent/ etc.).

    `settle` is applied to each trial as soon as it is read (tally classifies it there and
    caps its message, so a run of huge messages never sits in memory whole).
    """
    job_dir = os.path.abspath(job_dir)
    if os.path.islink(job_dir):
        # A run's job dir is read where it is: a link could lead anywhere (~/.cache/huggingface,
        # another run), and what is read here is what submission and publish would copy.
        error = f"symlink to {safe_read.link_target(job_dir)}, not followed"
        notes.refuse(job_dir, error, f"{error} (a job dir is read only where it is); no trial of it is counted")
        return []
    try:
        dirs, refused, others = safe_read.trial_dir_entries(job_dir)
    except safe_read.Unreadable as e:
        notes.refuse(job_dir, str(e), f"{e}; no trial of this job dir is counted")
        return []
    for path, error in refused:
        notes.refuse(path, error, f"{error}; not counted")
    for path in others:
        notes.warnings.append(f"{safe_read.shown(path)}: not a trial dir (no result.json or config.json); skipped")
    trials = []
    for path in dirs:
        if safe_read.shown(path) != path:
            notes.warnings.append(f"{safe_read.shown(path)}: the name is not valid UTF-8, shown with \\x escapes "
                                  f"(rename the dir for mop-up to act on it)")
        trial = read_trial(path, job_dir, notes)
        if settle:
            settle(trial)
        trials.append(trial)
    return trials + retried_attempts(job_dir, {t.result_id for t in trials if t.result_id}, notes, settle)


def retried_attempts(job_dir: str, live_ids: set[str], notes: ScanNotes,
                     settle: Callable[[Trial], None] | None = None) -> list[Trial]:
    """The attempts harbor retried inside job_dir, as tools/results/retried.py kept them (retried_attempts_dir):
    each a Trial of the job marked `retried`, an infra error that never fills a slot (harbor ran the
    same trial again in its place). A copy whose result id is a trial's still in the job is that
    trial (the last attempt harbor kept), not another attempt: left out. None when nothing is kept."""
    kept = retried_attempts_dir(job_dir)
    if not os.path.lexists(kept):
        return []
    if kept.is_symlink() or not kept.is_dir():
        error = "not a directory of kept attempts (a symlink or a file), not followed"
        notes.refuse(str(kept), error, f"{error}; none of it is counted")
        return []
    try:
        dirs, refused, _ = safe_read.trial_dir_entries(str(kept))
    except safe_read.Unreadable as e:
        notes.refuse(str(kept), str(e), f"{e}; no attempt kept there is counted")
        return []
    for path, error in refused:
        notes.refuse(path, error, f"{error}; not counted")
    out = []
    for path in dirs:
        trial = read_trial(path, job_dir, notes)
        if trial.status != "finished":
            notes.warnings.append(f"{trial.trial_dir}: a kept attempt without a readable result.json "
                                  f"(tools/results/retried.py copies only finished ones); not counted")
            continue
        if trial.result_id in live_ids:
            continue
        trial.retried = True
        if settle:
            settle(trial)
        out.append(trial)
    return out

