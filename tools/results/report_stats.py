"""report_stats: the comparison of tallied runs (pure) and its statistics.

k = 1 runs (one attempt per task) are compared as they always were: passed / scored with a
Wilson interval, and McNemar flips over the tasks scored in both runs. When any run has k > 1
attempt slots per task (tools/results/slots.py), each task's figure is its pass fraction (passed /
scored attempts; a k = 1 run's task is 1/1, 0/1 or unscored), the runs' pass rate is the mean
over tasks of those fractions, and two runs are compared by a paired bootstrap over tasks:

    d_t = fraction_A(t) - fraction_B(t) over the tasks with a scored attempt in both runs;
    the mean of d_t, and its 95% percentile interval: numpy.random.default_rng(0), 10,000 times
    draw rng.integers(0, n, size=n) task indices and take the mean of their d_t
    (tools/results/slots.py's bootstrap_interval, the very code behind each run's own interval).

Why a paired bootstrap and not a sign test: a sign test keeps only which run did better on a
task, so 1/5 against 5/5 counts the same as 4/5 against 5/5, and every tie (most tasks, at
these sizes) is thrown away; the bootstrap uses the fractions themselves, pairs each task with
itself (the tasks' difficulty, the largest source of variance, cancels), and its interval is on
the same scale as the pass rates it compares. An interval that excludes 0 is a difference at
the 5% level.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

from tools import safe_read
from tools.results import slots
from tools.results.report_load import OUTCOMES, SCORED, display_path, fail

Z95 = 1.959963984540054  # two-sided 95% normal quantile

ACCOUNTING_TEXT = {
    "timeouts-scored": (
        "timeouts scored (a genuine agent timeout is a scored failure; "
        "infrastructure errors are unscored)"
    ),
    "timeouts-unscored": (
        "timeouts unscored (agent timeouts are set aside, unscored, with the infrastructure "
        "errors: the reference's Run 1 table)"
    ),
}
PAIRED_METHOD = "paired percentile bootstrap over tasks"


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval for a binomial proportion; None when n == 0."""
    if n == 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes={successes} outside 0..n={n}")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar_exact_p(b: int, c: int) -> float | None:
    """Two-sided exact McNemar p-value: binomial(b + c, 1/2) on the discordant pairs."""
    n = b + c
    if n == 0:
        return None
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired_bootstrap(diffs: list[float]) -> dict | None:
    """Mean of the per-task differences and its 95% interval (the module doc); None: no task."""
    interval = slots.bootstrap_interval(diffs)
    if interval is None:
        return None
    return {"low": interval[0], "high": interval[1], "resamples": slots.BOOTSTRAP_RESAMPLES,
            "seed": slots.BOOTSTRAP_SEED, "method": PAIRED_METHOD}


# --- the comparison (pure) -------------------------------------------------------------------


def agent_of(tally: dict) -> tuple[str | None, str | None]:
    """Agent and model: from the tally if it says, else the first job's config.json."""
    if tally.get("agent"):
        return tally.get("agent"), tally.get("model")
    for job_dir in tally.get("job_dirs") or []:
        try:
            cfg = safe_read.read_json_object(Path(job_dir) / "config.json", what="a config.json")
            agent = (cfg.get("agents") or [{}])[0]
            name, model = agent.get("name"), agent.get("model_name")
        except (OSError, safe_read.Unreadable, AttributeError, IndexError, KeyError, TypeError):
            continue
        return (safe_read.clip(name, 100) if isinstance(name, str) else None,
                safe_read.clip(model, 200) if isinstance(model, str) else None)
    return None, None


def policy_text(policy: Any) -> str:
    if policy is None:
        return "unstated"
    if isinstance(policy, str):
        return display_path(policy)
    if isinstance(policy, dict):
        for key in ("path", "file", "name"):
            if policy.get(key):
                return display_path(str(policy[key]))
    return json.dumps(policy, sort_keys=True)[:80]


def attempts_of(tally: dict) -> int:
    """k, the attempt slots per task (1: a tally from before k, or a k = 1 run)."""
    return tally.get("n_attempts", 1)


def task_fraction(row: dict, k: int) -> tuple[int, int]:
    """(passed, scored) attempts of a task row; a k = 1 row is 1/1, 0/1 or 0/0."""
    if k > 1:
        return row.get("passed_attempts") or 0, row.get("scored_attempts") or 0
    return int(row["outcome"] == "passed"), int(row["outcome"] in SCORED)


def leaderboard_of(tally: dict, k: int) -> dict | None:
    """The board's resolution rate of a k > 1 tally, recomputed from its slots (checked by
    validate_attempts), never taken from the file: an older tally has none, a hostile one any."""
    if k == 1:
        return None
    rows = tally["per_task"]
    open_slots = 0
    for row in rows:
        if row.get("verdict") or row.get("final_error"):
            continue  # a verdict, or a final error (past MAX_TASK_RETRIES), closes its task's slots
        trials = row.get("slot_trials")
        open_slots += (trials.count(None) if isinstance(trials, list) and len(trials) == k
                       else sum(1 for s in row["slots"] if s in ("errored", "unfinished")))
    figure = slots.leaderboard_figure([row["slots"] for row in rows], k, open_slots)
    return {**figure, **board_totals_of(tally.get("leaderboard"))}


def board_totals_of(board: object) -> dict:
    """The mean trial duration and token totals a tally's leaderboard block holds (tally_core.board_totals),
    each kept only when it is a number in range: a file anyone could edit is never computed with."""
    board = board if isinstance(board, dict) else {}

    def count(value, cap):
        return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= cap else None
    secs = board.get("mean_trial_secs")
    ok_secs = isinstance(secs, (int, float)) and not isinstance(secs, bool) and math.isfinite(secs) and 0 <= secs <= 1e7
    tokens = board.get("tokens") if isinstance(board.get("tokens"), dict) else {}
    sums = {key: count(tokens.get(key), 10 ** 18) for key in ("input", "cache", "output")}
    n = count(board.get("slot_trials"), 10 ** 7)
    return {"mean_trial_secs": secs if ok_secs else None, "trials_timed": count(board.get("trials_timed"), 10 ** 7) or 0,
            "slot_trials": n or 0, "tokens": sums if None not in sums.values() else None,
            "trials_without_tokens": count(board.get("trials_without_tokens"), 10 ** 7) or 0}


def run_summary(tally: dict) -> dict:
    """One row of the comparison table: every figure straight from the tally."""
    agent, model = agent_of(tally)
    k = attempts_of(tally)
    attempts = [r.get("attempts") for r in tally["per_task"]]
    known = [a for a in attempts if isinstance(a, int)]
    interval = wilson_interval(tally["passed"], tally["scored"])
    tokens = tally.get("tokens") if isinstance(tally.get("tokens"), dict) else {}
    seconds = tally.get("agent_seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        seconds = None
    return {
        "run": tally["run"],
        "agent": agent,
        "model": model,
        "tasks": tally["tasks"],
        **{k: tally[k] for k in OUTCOMES},
        "scored": tally["scored"],
        "pass_rate": tally["pass_rate"],
        "wilson95": list(interval) if interval else None,
        "tokens_in": tokens.get("input"),
        "tokens_cache": tokens.get("cache"),
        "tokens_out": tokens.get("output"),
        "agent_hours": None if seconds is None else seconds / 3600,
        "attempts_per_task": (sum(known) / len(known)) if known else None,
        "n_attempts": k,
        # k = 1: passed / scored tasks, which is the mean of the tasks' 1/1 and 0/1.
        "mean_task_pass_fraction": tally.get("mean_task_pass_fraction") if k > 1 else tally["pass_rate"],
        "pass_at_k": tally.get("pass_at_k") if k > 1 else None,
        "bootstrap95": tally.get("bootstrap95") if k > 1 else None,
        "leaderboard": leaderboard_of(tally, k),
        "cost": None,  # filled by tools/report/report_cost.py when the run was named (the CLI)
        "exceptions": dict(sorted(tally["exceptions"].items())) if isinstance(tally.get("exceptions"), dict) else {},
        "accounting": tally["accounting"],
        "policy": policy_text(tally.get("policy")),
        "job_dirs": [display_path(d) for d in tally.get("job_dirs") or []],
        "source": display_path(tally.get("source")),
    }


def cell_of(row: dict, k: int = 1, attempts_mode: bool = False) -> dict:
    cell = {
        "outcome": row["outcome"],
        "exception_type": row.get("exception_type"),
        "reward": row.get("reward"),
        "attempts": row.get("attempts"),
        "trial_dir": display_path(row.get("trial_dir")),
    }
    if attempts_mode:  # a k = 1 run among k > 1 runs: its one slot is its outcome
        passed, scored = task_fraction(row, k)
        cell.update(slots=list(row["slots"]) if k > 1 else [row["outcome"]], passed_attempts=passed,
                    scored_attempts=scored, pass_fraction=passed / scored if scored else None)
    return cell


def check_same_tasks(tallies: list[dict]) -> None:
    """Every run must cover the same tasks: say which are missing where."""
    sets = [{r["task"] for r in t["per_task"]} for t in tallies]
    union = set().union(*sets)
    problems = []
    for tally, tasks in zip(tallies, sets):
        missing = sorted(union - tasks)
        if missing:
            shown = ", ".join(missing[:10]) + (f" (+{len(missing) - 10} more)" if len(missing) > 10 else "")
            problems.append(f"run {tally['run']} lacks {len(missing)}: {shown}")
    if problems:
        fail("the runs cover different task sets, so their pass rates are not comparable. "
             + "; ".join(problems)
             + ". Tally the same dataset for every run (or finish the missing tasks).")


def pair_flips(name_a: str, name_b: str, outcomes_a: dict, outcomes_b: dict) -> dict:
    """McNemar-style counts over tasks scored in both runs."""
    counts = Counter()
    for task in sorted(outcomes_a):
        a, b = outcomes_a[task], outcomes_b[task]
        if a in SCORED and b in SCORED:
            counts[(a, b)] += 1
        else:
            counts["not_comparable"] += 1
    a_only = counts[("passed", "failed")]
    b_only = counts[("failed", "passed")]
    return {
        "a": name_a,
        "b": name_b,
        "a_passed_b_failed": a_only,
        "a_failed_b_passed": b_only,
        "both_passed": counts[("passed", "passed")],
        "both_failed": counts[("failed", "failed")],
        "not_comparable": counts["not_comparable"],
        "mcnemar_exact_p": mcnemar_exact_p(a_only, b_only),
    }


def pair_fractions(name_a: str, name_b: str, rows_a: list[dict], rows_b: list[dict]) -> dict:
    """The paired comparison of two runs' per-task pass fractions (the module doc)."""
    diffs, counts = [], Counter()
    for a, b in zip(rows_a, rows_b):
        fa, fb = a["pass_fraction"], b["pass_fraction"]
        if fa is None or fb is None:
            counts["not_comparable"] += 1
            continue
        diffs.append(fa - fb)
        counts["a_higher" if fa > fb else "b_higher" if fb > fa else "equal"] += 1
    return {
        "a": name_a,
        "b": name_b,
        "tasks_compared": len(diffs),
        "a_higher": counts["a_higher"],
        "b_higher": counts["b_higher"],
        "equal": counts["equal"],
        "not_comparable": counts["not_comparable"],
        "mean_difference": sum(diffs) / len(diffs) if diffs else None,
        "bootstrap95": paired_bootstrap(diffs),
    }


def compare(tallies: list[dict]) -> dict:
    """The comparison of one or more tallies over the same task set (pure)."""
    if not tallies:
        fail("nothing to compare: give at least one run or tally JSON file")
    names = [t["run"] for t in tallies]
    dupes = sorted(n for n, c in Counter(names).items() if c > 1)
    if dupes:
        fail(f"run {', '.join(dupes)} given more than once; give each run once")
    accountings = {t["accounting"] for t in tallies}
    if len(accountings) > 1:
        fail("the tallies use different accountings ("
             + ", ".join(f"{t['run']}: {t['accounting']}" for t in tallies)
             + "). Tally every run with the same switch (--timeouts-unscored or not).")
    empty = [t["run"] for t in tallies if not t["per_task"]]
    if empty:
        fail(f"empty matrix: run {', '.join(empty)} has no tasks in its tally. "
             f"Check its jobs dir and job name (make tally RUN=...).")
    check_same_tasks(tallies)
    by_run = [{r["task"]: r for r in t["per_task"]} for t in tallies]
    tasks = sorted(by_run[0])
    ks = [attempts_of(t) for t in tallies]
    # Any run with k > 1: every run's task is its pass fraction (a k = 1 run's: 1/1, 0/1, none).
    attempts_mode = max(ks) > 1
    cells = {task: [cell_of(rows[task], k, attempts_mode) for rows, k in zip(by_run, ks)] for task in tasks}

    def disagrees(task: str) -> bool:
        key = "pass_fraction" if attempts_mode else "outcome"
        return len({cell[key] for cell in cells[task]}) > 1

    order = sorted(tasks, key=lambda task: (not disagrees(task), task))
    matrix = [{"task": task, "disagree": disagrees(task), "cells": cells[task]} for task in order]
    flips, paired = [], []
    for i in range(len(tallies)):
        for j in range(i + 1, len(tallies)):
            if attempts_mode:
                paired.append(pair_fractions(names[i], names[j], [row["cells"][i] for row in matrix],
                                             [row["cells"][j] for row in matrix]))
            else:
                flips.append(pair_flips(names[i], names[j],
                                        {k: v["outcome"] for k, v in by_run[i].items()},
                                        {k: v["outcome"] for k, v in by_run[j].items()}))
    accounting = accountings.pop()
    return {
        "accounting": accounting,
        "accounting_text": ACCOUNTING_TEXT.get(accounting, accounting),
        "interval": "Wilson score, 95%",
        "attempts_mode": attempts_mode,
        "runs": [run_summary(t) for t in tallies],
        "flips": flips,
        "paired": paired,
        "matrix": matrix,
        "disagreements": sum(1 for row in matrix if row["disagree"]),
    }
