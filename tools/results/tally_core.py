"""tally_core: the tally itself, the report behind `make tally`, imported by mop-up, the report,
cost and the rest.

`tally` reads a run's trials (tools/results/tally_trials.py), classifies them (tools/results/tally_policy.py),
fills each task's slots (tools/results/slots.py) and returns the whole report: the `--json` document
that tools/tally.py's docstring describes field by field. The rule of the slots is applied here
once: every trial row carries `settled` and `infra`, every task row `open_slots`, and every other
verb reads those fields (`retry_targets`, what mop-up retries, is the first of them). Job dirs are
found by tools/results/tally_jobs.py. tools/tally.py is the command line over it and renders the tables.
Nothing here prints or exits.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable

from tools import safe_read
from tools.results import slots
from tools.results.tally_jobs import short_repr
from tools.results.tally_policy import Policy, Verdict, classify, count_sides
from tools.results.tally_trials import MAX_ATTEMPTS, ScanNotes, Trial, count_of, scan_job_dir

OUTCOMES = ("passed", "failed", "errored", "unclassified", "unfinished")
ACCOUNTING_SCORED = "timeouts-scored"
ACCOUNTING_UNSCORED = "timeouts-unscored"
EXIT_EMPTY = 3
# MAX_TASK_RETRIES's default (env/defaults.env holds the same, checked by a test): a task whose
# infra error survived 3 attempts in a row (per open slot) is a final error, as the reference
# accepted Run 1's four after three attempts across two serving sessions (docs/reference-runs.md §3).
DEFAULT_MAX_TASK_RETRIES = 3
MAX_TASK_RETRIES_CAP = 999


# --------------------------------------------------------------------------- tally


def _iso(dt: datetime | None) -> str | None:
    # UTC with "Z", as harbor writes it (isoformat: several times faster than strftime).
    return dt.replace(tzinfo=None).isoformat() + "Z" if dt else None


def _resolve_truncated(trials: list[Trial]) -> None:
    """Map a result-less dir named `<task[:32]>__id` back to the task's full name."""
    full = {t.task for t in trials if t.status == "finished"}
    by_prefix: dict[str, set[str]] = {}
    for name in full:
        if len(name) > 32:
            by_prefix.setdefault(name[:32].rstrip("_-"), set()).add(name)
    for t in trials:
        if t.status != "finished" and t.task not in full and len(by_prefix.get(t.task, ())) == 1:
            t.task = next(iter(by_prefix[t.task]))


def tally(
    job_dirs: list[str | os.PathLike],
    policy: Policy,
    verdicts: dict[str, Verdict] | None = None,
    timeouts_unscored: bool = False,
    run: str | None = None,
    verdicts_path: str | None = None,
    attempts: int | None = None,
    max_task_retries: int = DEFAULT_MAX_TASK_RETRIES,
) -> dict:
    """The whole report (the `--json` document) for the given job dirs.

    `attempts` is k, the slots per task; None: the first job's n_attempts (1 when unknown).
    `max_task_retries` (MAX_TASK_RETRIES; 0: no limit): a task whose infra error survived that many
    attempts in a row per open slot (slots.is_final_error) is a final error: its open slots stay
    errored, are not open for the headline, and are no retry target.

    The rule of the slots is applied here and only here: every trial row carries `settled` and
    `infra`, every task row its `open_slots`, and the other verbs read those fields.
    """
    verdicts = verdicts or {}
    notes = ScanNotes()
    dirs = _distinct_dirs(job_dirs)
    trials = _read_trials(dirs, notes, policy, timeouts_unscored)
    k = attempts or _job_attempts(dirs, notes)
    by_task: dict[str, list[Trial]] = {}
    for t in trials:
        by_task.setdefault(t.task, []).append(t)
    warnings = list(notes.warnings)
    tasks = [_task_tally(task, sorted(by_task[task], key=Trial.sort_key), k, verdicts.get(task), max_task_retries,
                         warnings) for task in sorted(by_task)]
    warnings += _closing_warnings(verdicts, set(by_task), notes, dirs)
    per_task = [t.row for t in tasks]
    counts, errored_breakdown = _counts(tasks, by_task, k)
    scored = counts["passed"] + counts["failed"]
    report = {
        "run": safe_read.shown(run or os.path.basename(dirs[0])) if (run or dirs) else None,
        "accounting": ACCOUNTING_UNSCORED if timeouts_unscored else ACCOUNTING_SCORED,
        "policy": safe_read.shown(policy.path),
        "verdicts": verdicts_path and safe_read.shown(verdicts_path),
        "pass_threshold": policy.pass_threshold,
        "job_dirs": [safe_read.shown(d) for d in dirs],
        "tasks": len(per_task),
        **counts,
        "scored": scored,
        "pass_rate": counts["passed"] / scored if scored else None,
        "errored_breakdown": errored_breakdown,
        **_trial_totals([t for task in tasks for t in task.counted], trials, policy),
        "max_task_retries": max_task_retries,
        "final_errors": [e["task"] for e in per_task if e["final_error"]],
        "warnings": warnings,
        "unreadable": notes.unreadable,
        "per_task": per_task,
    }
    if k > 1:
        slot_outcomes = [t.slot_outcomes for t in tasks]
        open_slots = sum(e["open_slots"] for e in per_task)
        report.update(n_attempts=k, slots=len(per_task) * k,
                      rerolled_trials=sum(len(e["rerolled"]) for e in per_task),
                      **slots.run_stats(slot_outcomes, k),
                      leaderboard={**slots.leaderboard_figure(slot_outcomes, k, open_slots),
                                   **board_totals([t for task in tasks for t in task.in_slots])})
    return report


@dataclass
class TaskTally:
    """One task's row of the report, and what the run's totals take from it."""

    row: dict
    slot_outcomes: list[str]  # its k slots' outcomes (a verdict's k times)
    counted: list[Trial]      # its counted trials: the settled ones in its slots, else its latest finished
    in_slots: list[Trial]     # its trials in a slot, what a submission holds (none with a verdict)


def _distinct_dirs(job_dirs: Iterable[str | os.PathLike]) -> list[str]:
    """The job dirs as absolute paths, each real dir once (a dir given twice, or by two names)."""
    dirs: list[str] = []
    for d in job_dirs:
        a = os.path.abspath(d)
        if os.path.realpath(a) not in {os.path.realpath(x) for x in dirs}:
            dirs.append(a)
    return dirs


def _read_trials(dirs: list[str], notes: ScanNotes, policy: Policy, timeouts_unscored: bool) -> list[Trial]:
    """Every trial of the job dirs, each classified as soon as it is read, truncated names resolved."""

    def settle(t: Trial) -> None:
        if t.status == "finished":
            t.outcome, t.rule, t.reason = classify(t, policy, timeouts_unscored)
        else:
            t.outcome = t.status
            t.rule = t.status
            t.reason = "no result.json: the trial never finished" if t.status == "unfinished" else t.error
        # Classified on the whole message; only a capped one is carried on.
        t.exception_message = safe_read.clip(t.exception_message)
        t.exception_type = safe_read.clip(t.exception_type, 200)

    trials: list[Trial] = []
    for d in dirs:
        trials.extend(scan_job_dir(d, notes, settle))
    _resolve_truncated(trials)
    return trials


def trial_row(t: Trial) -> dict:
    """A trial as the report lists it, with the slot rule's answer for it (slots.is_settled, is_infra)."""
    return {"trial_dir": t.trial_dir, "job_dir": t.job_dir, "finished_at": _iso(t.finished_at), "reward": t.reward,
            "exception_type": t.exception_type, "outcome": t.outcome, "rule": t.rule, "retried": t.retried,
            "settled": slots.is_settled(t), "infra": slots.is_infra(t)}


def _task_tally(task: str, group: list[Trial], k: int, verdict: Verdict | None, max_task_retries: int,
                warnings: list[str]) -> TaskTally:
    """One task's row: its shown trial (the latest settled, else the latest finished), its outcome,
    its slots, and how many of them mop-up would still fill (`open_slots`). What a reader should
    know about the choice is appended to `warnings`, in task order."""
    finished = [t for t in group if t.status == "finished"]
    filled = slots.fill(group, k)
    shown = (filled.counted[-1] if filled.counted else finished[-1]) if finished else None
    row: dict[str, Any] = {"task": task}
    if shown:
        outcome, rule, reason = shown.outcome, shown.rule, shown.reason
        row.update(reward=shown.reward, exception_type=shown.exception_type,
                   exception_message=shown.exception_message, finished_at=_iso(shown.finished_at),
                   trial_dir=shown.trial_dir, job_dir=shown.job_dir,
                   settled=slots.is_settled(shown), infra=slots.is_infra(shown))
        warnings.extend(_choice_warnings(task, shown, finished, filled, k))
    else:
        outcome, rule = "unfinished", "no-finished-trial"
        reason = f"{len(group)} trial dir(s), none with a readable result.json"
        row.update(reward=None, exception_type=None, exception_message=None, finished_at=None,
                   trial_dir=None, job_dir=None, settled=False, infra=False)
    row["computed_outcome"] = outcome
    if verdict:
        outcome, rule, reason = verdict.outcome, "verdict", f"manual verdict: {verdict.reason}"
    streak = slots.infra_streak(group)
    final = not verdict and slots.is_final_error(filled, streak, max_task_retries)
    row.update(outcome=outcome, rule=rule, reason=reason, attempts=len(finished),
               verdict=verdict.reason if verdict else None, infra_streak=streak, final_error=final,
               open_slots=0 if verdict or final else filled.open, trials=[trial_row(t) for t in group])
    outcomes = filled.outcomes(verdict.outcome if verdict else None)
    if k > 1:
        n_scored = sum(1 for o in outcomes if o in ("passed", "failed"))
        row.update(slots=outcomes, slots_text=slots.glyphs(outcomes),
                   slot_trials=[t.trial_dir for t in filled.counted] + [None] * filled.open,
                   passed_attempts=outcomes.count("passed"), scored_attempts=n_scored,
                   pass_fraction=outcomes.count("passed") / n_scored if n_scored else None,
                   rerolled=[t.trial_dir for t in filled.rerolled])
    return TaskTally(row, outcomes, filled.counted or ([shown] if shown else []), [] if verdict else filled.counted)


def _choice_warnings(task: str, shown: Trial, finished: list[Trial], filled: slots.Slots, k: int) -> list[str]:
    """What a reader should know about the trial chosen: a tie on its time; with k = 1, scored attempts
    that disagree, an unsettled latest attempt after a scored one, an infra error after the settled one."""
    out = []
    if shown.finished_at is not None and any(t is not shown and t.finished_at == shown.finished_at for t in finished):
        out.append(f"{task}: two attempts finished at the same time {_iso(shown.finished_at)}; "
                   f"took {shown.trial_dir} (last by path)")
    if k != 1:
        return out
    scored_trials = [t for t in finished if t.outcome in ("passed", "failed") and slots.is_settled(t)]
    scored = {t.outcome for t in scored_trials}
    if len(scored) > 1:
        history = ", ".join(f"{t.outcome} at {_iso(t.finished_at) or '(no finished_at)'}" for t in scored_trials)
        out.append(f"{task}: scored attempts disagree ({history}); the latest counts: {shown.outcome}")
    if shown.outcome not in ("passed", "failed") and scored:
        out.append(f"{task}: the latest attempt is {shown.outcome} ({shown.exception_type or shown.rule}) "
                   f"but an earlier attempt was scored ({', '.join(sorted(scored))}); the latest counts")
    if filled.shadowed:
        after = filled.shadowed[-1]
        out.append(f"{task}: an infra error ({after.exception_type or after.rule}) finished after the "
                   f"settled attempt ({shown.outcome}); the settled attempt counts and the task is not retried "
                   f"(an infra error no longer hides a settled attempt: docs/design.md decision 13)")
    return out


def _closing_warnings(verdicts: dict[str, Verdict], tasks: set[str], notes: ScanNotes, dirs: list[str]) -> list[str]:
    """The run-wide warnings said after the per-task ones: ignored verdicts, what the files lacked."""
    out = [f"verdict for {task} ignored: no trial of that task in these job dirs" for task in sorted(set(verdicts) - tasks)]
    if notes.naive:
        out.append(f"{len(notes.naive)} result.json file(s) have a finished_at without a time zone; "
                   f"read as UTC: " + ", ".join(notes.naive))
    for missing, paths in sorted(notes.missing_fields.items()):
        out.append(f"{len(paths)} result.json file(s) lack field(s) {', '.join(missing)} "
                   f"(not harbor 0.26's TrialResult?): " + ", ".join(paths))
    out.extend(notes.unreadable_warnings)
    out.extend(_planned_vs_found(dirs, tasks))
    return out


def _counts(tasks: list[TaskTally], by_task: dict[str, list[Trial]], k: int) -> tuple[dict, dict]:
    """({outcome: count}, errored_breakdown): of tasks with k = 1, of attempt slots (tasks × k) with k > 1."""
    per_task = [t.row for t in tasks]
    if k > 1:
        counts = {o: sum(t.slot_outcomes.count(o) for t in tasks) for o in OUTCOMES}
        return counts, slots.slot_errors(per_task, by_task)
    errored = [e for e in per_task if e["outcome"] == "errored"]
    return {o: sum(1 for e in per_task if e["outcome"] == o) for o in OUTCOMES}, {
        "infra": sum(1 for e in errored if e["rule"] in slots.INFRA_RULES and not e["final_error"]),
        "final": sum(1 for e in errored if e["final_error"]),
        "timeout": sum(1 for e in errored if e["rule"] == "timeout-unscored"),
        "verdict": sum(1 for e in errored if e["rule"] == "verdict"),
    }


def _trial_totals(counted: list[Trial], trials: list[Trial], policy: Policy) -> dict:
    """The exceptions, tokens and agent time of the counted trials and of every finished one."""
    finished = [t for t in trials if t.status == "finished"]
    return {
        "exceptions": _count_types(counted),
        "exceptions_all_trials": _count_types(finished),
        "infra_by_side": count_sides(finished, policy),
        "tokens": _sum_tokens(counted),
        "tokens_all_trials": _sum_tokens(finished),
        "trials_without_tokens": sum(1 for t in finished if not t.tokens or None in t.tokens),
        "agent_seconds": round(sum(t.agent_seconds or 0 for t in counted), 3),
        "agent_seconds_all_trials": round(sum(t.agent_seconds or 0 for t in finished), 3),
        "trial_dirs": len(trials),
        "retried_in_run": sum(1 for t in trials if t.retried),
    }


def board_totals(trials: list[Trial]) -> dict:
    """The board's per-row figures besides the rate, over the trials in a slot (what a submission holds):
    the mean trial duration (started_at to finished_at, each trial's whole time) and the token totals."""
    timed = [t.trial_seconds for t in trials if t.trial_seconds is not None]
    return {"mean_trial_secs": round(sum(timed) / len(timed), 1) if timed else None, "trials_timed": len(timed),
            "slot_trials": len(trials), "tokens": _sum_tokens(trials),
            "trials_without_tokens": sum(1 for t in trials if not t.tokens or None in t.tokens)}


def _job_attempts(dirs: list[str], notes: ScanNotes) -> int:
    """k: n_attempts of the run's first job (its config.json); 1 when unknown or out of range (noted)."""
    if not dirs:
        return 1
    path = os.path.join(dirs[0], "config.json")
    try:
        value = safe_read.read_json_object(path, what="a config.json").get("n_attempts", 1)
    except (OSError, safe_read.Unreadable):
        return 1
    k = count_of(value, MAX_ATTEMPTS)
    if k is None or k < 1:
        notes.warnings.append(f"{safe_read.shown(path)}: n_attempts {short_repr(value)} is not a number of attempts "
                              f"(1 to {MAX_ATTEMPTS}); the tally counts 1 per task")
        return 1
    return k


def _count_types(trials: Iterable[Trial]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for t in trials:
        if t.exception_type:
            counts[t.exception_type] = counts.get(t.exception_type, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _sum_tokens(trials: Iterable[Trial]) -> dict[str, int]:
    total = {"input": 0, "cache": 0, "output": 0}
    for t in trials:
        if t.tokens:
            for key, value in zip(total, t.tokens):
                total[key] += value or 0
    return total


def _planned_vs_found(dirs: list[str], tasks: set[str]) -> list[str]:
    """Warn when the first job planned more tasks than have any trial dir (never started)."""
    if not dirs:
        return []
    try:
        planned = safe_read.read_json_object(os.path.join(dirs[0], "result.json")).get("n_total_trials")
        attempts = safe_read.read_json_object(os.path.join(dirs[0], "config.json"), what="a config.json").get("n_attempts", 1)
    except (OSError, safe_read.Unreadable):
        return []  # a job being written, or a hostile one: the planned count is only a hint
    out = []
    job = safe_read.shown(dirs[0])
    if isinstance(planned, int) and isinstance(attempts, int) and attempts >= 1 and len(tasks) < planned // attempts:
        out.append(f"{job}/result.json plans {planned // attempts} task(s) but only {len(tasks)} have a trial "
                   f"dir: {planned // attempts - len(tasks)} never started (resume the job)")
    return out


def retry_targets(report: dict) -> list[dict]:
    """Tasks mop-up should retry, each its per_task entry plus `missing`, the attempts to run: the
    tasks with open slots (the tally's `open_slots`: with k = 1, a task whose counted trial is an
    infra error or that has no finished trial; never a verdict's or a final error's, past
    MAX_TASK_RETRIES). What is left, for mop-up, make reproduce and AUTO_STOP alike."""
    return [{**e, "missing": e["open_slots"]} for e in report["per_task"] if e["open_slots"]]
