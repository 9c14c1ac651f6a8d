"""submission_select: which trial dirs of a run the leaderboard counts. Per task its k slot-filling
trials, the latest k settled (the tally's own grouping, tools/results/tally_core.py tally, and its slot
rule, tools/results/slots.py fill); every other trial dir is left out, with why."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tools import safe_read
from tools.results import slots
from tools.results import tally_core
from tools.results import tally_policy


@dataclass(frozen=True)
class Selection:
    """Which trial dirs of the run the leaderboard counts: per task, its k slot-filling trials
    (the latest k settled, tools/results/slots.py fill), and why every other trial dir is left out."""

    k: int
    tasks: list[str]
    kept: set[str]                # trial dirs in a slot (as the tally names them: shown absolute paths)
    passed: list[str]             # of those, the passing ones (they need a trajectory)
    left_out: dict[str, str]      # trial dir -> why it is not submitted
    open: dict[str, int]          # task -> its settled trials, when fewer than k


@dataclass(frozen=True)
class _Seen:
    """A trial as the tally's report lists it, in the shape slots.fill reads (status, outcome, rule)."""

    trial_dir: str
    status: str
    outcome: str
    rule: str
    exception_type: str | None
    retried: bool = False


def _seen(t: dict) -> _Seen:
    # The tally sets a trial's outcome to its status when it has no usable result.json.
    status = t["outcome"] if t["outcome"] in ("unfinished", "unreadable") else "finished"
    return _Seen(t["trial_dir"], status, t["outcome"], t["rule"], t["exception_type"], t.get("retried", False))


def select_trials(job_dirs: list[Path]) -> Selection:
    """The tally's own grouping and slot rule (tools/results/tally_core.py tally, tools/results/slots.py fill),
    with the default outcome policy: k is the first job's n_attempts, as for make tally."""
    report = tally_core.tally(job_dirs, tally_policy.load_policy())
    k = report.get("n_attempts", 1)
    unreadable = {u["path"]: u["error"] for u in report["unreadable"]}
    kept, passed, left_out, open_slots = set(), [], {}, {}
    for entry in report["per_task"]:
        filled = slots.fill([_seen(t) for t in entry["trials"]], k)
        kept |= {t.trial_dir for t in filled.counted}
        passed += [t.trial_dir for t in filled.counted if t.outcome == "passed"]
        if filled.open:
            open_slots[entry["task"]] = len(filled.counted)
        rerolled, shadowed = {t.trial_dir for t in filled.rerolled}, {t.trial_dir for t in filled.shadowed}
        for t in map(_seen, entry["trials"]):
            if t.trial_dir not in kept:
                left_out[t.trial_dir] = _why_left_out(t, k, rerolled, shadowed, unreadable)
    return Selection(k, [e["task"] for e in report["per_task"]], kept, passed, left_out, open_slots)


def _why_left_out(t: _Seen, k: int, rerolled: set, shadowed: set, unreadable: dict) -> str:
    if t.trial_dir in rerolled:
        return (f"re-rolled: an older settled attempt ({t.outcome}); the task's latest {k} settled "
                f"trials fill its slots")
    if t.status == "unfinished":
        return "no result.json (a trial harbor never finished)"
    if t.status == "unreadable":
        error = unreadable.get(safe_read.shown(os.path.join(t.trial_dir, "result.json")), "unreadable")
        return f"unreadable result.json ({error})"
    what = t.exception_type or t.rule
    if t.trial_dir in shadowed:
        return f"an infra error ({what}) after the task's {k} slots were filled; not an attempt"
    return f"an infra error ({what}): unscored, never counted; its slot is filled by another attempt (make mopup)"


def tally_name(path: str | os.PathLike) -> str:
    """A trial dir as the tally's report names it (tally_trials.scan_job_dir: absolute, shown)."""
    return safe_read.shown(os.path.abspath(path))

