"""slots: a task's k attempt slots and the statistics over them (docs/design.md decision 13).

Imported by the tally (tools/results/tally_core.py), over the trials tools/results/tally_trials.py reads and
tools/results/tally_policy.py classifies; this module decides which of a task's trials count and what the
run's numbers are. The tally writes its decisions into its report (`settled`, `infra` on every trial
row, `open_slots` on every task row), and every other verb reads them there: `is_settled` and
`is_infra` are the rule's one definition, applied by the tally alone.

A trial is *settled* when mop-up would not retry it: it finished and its outcome is not an
infra error (passed, failed, unclassified, a genuine limit such as AgentTimeoutError, a
timeout counted unscored). Infra-errored, unfinished and unreadable trials are *unsettled*;
of them, the finished ones are *infra* (an infra error, or an attempt harbor retried in the run).
Per task, its latest k settled trials fill its k slots (oldest first); older settled trials
are re-rolls, listed and not counted; the slots left are errored when the task has an infra
trial, else unfinished. A manual verdict decides every slot of its task.

A task's infra streak (`infra_streak`) is how many of its attempts in a row, since its latest
settled trial, ended in an infra error. A task is a *final error* (`is_final_error`) when that
streak reaches MAX_TASK_RETRIES attempts for each of its open slots (k = 1: MAX_TASK_RETRIES
attempts; k = 5 with 2 open slots: twice as many, as mop-up runs the 2 side by side): its open
slots stay errored and mop-up no longer fills them, as the reference accepted Run 1's four tasks
after three attempts. The tally (tools/results/tally_core.py) decides it, once, for every verb.

Statistics over the slots (k > 1):
  * passed / scored attempts (scored: passed or failed slots);
  * the mean over tasks of each task's pass fraction (passed / scored slots; tasks with no
    scored slot are left out);
  * pass@k with harbor's own estimator (harbor.utils.pass_at_k._pass_at_k_for_task), averaged
    over the tasks whose k slots are all scored;
  * replicate j = the j-th settled attempt of every task: its pass rate over the tasks whose
    j-th slot is scored; the mean of the replicates' rates ± their standard error
    (sample standard deviation / sqrt(number of replicates));
  * a 95% interval for the mean pass fraction by a task-level bootstrap: with
    numpy.random.default_rng(BOOTSTRAP_SEED), BOOTSTRAP_RESAMPLES times draw
    rng.integers(0, n, size=n) task indices (n tasks with a pass fraction), take the mean of
    their fractions; the interval is numpy.quantile(means, [0.025, 0.975]).

The headline (leaderboard_figure): the Terminal-Bench leaderboard's resolution rate, passed
over every submitted trial, errored ones counted as not passed. A submission of the slots holds
tasks × k trials, so it is passed slots / (tasks × k); an open slot (mop-up would still fill it)
counts as not passed, and the figure is provisional while any is open. Its 95% interval is
from the k replicates (replicate j's rate = tasks passed in slot j / tasks; their mean is the
figure): mean ± t(0.975, k − 1) × their standard error, clipped to [0, 1]. The board's ±
appears to be this replicate spread (its formula is not published: an inference, noted
wherever the figure is shown); the task-level bootstrap of each task's passed / k is the second line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

from tools import fmt

INFRA_RULES = ("infra-type", "infra-message", "nonzero-exit-infra", "interrupted-unrecorded")
GLYPHS = {"passed": "✓", "failed": "✗", "errored": "E", "unclassified": "?", "unfinished": "…"}
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
BOOTSTRAP_BLOCK = 1 << 20  # indices drawn at once by bootstrap_interval


def is_settled(trial: Any) -> bool:
    """Would mop-up leave this trial alone? (finished, not an infra error, and not an attempt harbor
    retried inside its job: harbor ran the trial again in its place, so it never holds a slot,
    whatever a policy changed since would call it; docs/design.md decision 27)"""
    return (trial.status == "finished" and not (trial.outcome == "errored" and trial.rule in INFRA_RULES)
            and not getattr(trial, "retried", False))


def is_infra(trial: Any) -> bool:
    """A finished trial that settles nothing: an infra error, or an attempt harbor retried in its job
    (unfinished and unreadable trials are neither settled nor infra)."""
    return trial.status == "finished" and not is_settled(trial)


@dataclass
class Slots:
    """One task's slots: `group` is its trials oldest first (Trial.sort_key order)."""

    k: int
    counted: list = field(default_factory=list)    # settled trials in the slots, oldest first
    rerolled: list = field(default_factory=list)   # older settled trials: listed, not counted
    open_outcome: str = "unfinished"               # what each empty slot is: errored | unfinished
    shadowed: list = field(default_factory=list)   # infra trials after the last counted one, slots full

    @property
    def open(self) -> int:
        return self.k - len(self.counted)

    def outcomes(self, verdict: str | None = None) -> list[str]:
        """The k slot outcomes in order: counted (oldest first), then the open ones."""
        if verdict:
            return [verdict] * self.k
        return [t.outcome for t in self.counted] + [self.open_outcome] * self.open


def fill(group: list, k: int) -> Slots:
    settled = [t for t in group if is_settled(t)]
    infra = [t for t in group if is_infra(t)]
    counted = settled[-k:]
    shadowed = []
    if counted and len(counted) == k:
        last = next(i for i, t in enumerate(group) if t is counted[-1])
        shadowed = [t for t in group[last + 1:] if is_infra(t)]
    return Slots(k, counted, settled[:-k] if len(settled) > k else [],
                 "errored" if infra else "unfinished", shadowed)


def infra_streak(group: list) -> int:
    """How many of the task's finished trials (oldest first), since its latest settled one, ended
    in an infra error: the attempts its infra error has survived. An unfinished trial counts for
    nothing (it may have been stopped mid-trial) and breaks nothing; nor does an attempt harbor
    retried inside its job (MAX_RETRIES): those retries come at once, under the same load, and the
    attempt that ended the trial is counted, so a short outage cannot spend MAX_TASK_RETRIES in
    seconds, before any mop-up pass (docs/mopup.md §2)."""
    streak = 0
    for t in group:
        if t.status == "finished" and not getattr(t, "retried", False):
            streak = 0 if is_settled(t) else streak + 1
    return streak


def is_final_error(slots: Slots, streak: int, max_task_retries: int) -> bool:
    """Has the task's infra error survived MAX_TASK_RETRIES attempts for each open slot? (0: no limit)"""
    return slots.open > 0 and max_task_retries > 0 and streak >= max_task_retries * slots.open


def glyphs(outcomes: Iterable[str]) -> str:
    return "".join(GLYPHS.get(o, "?") for o in outcomes)


def _pass_at_k(n: int, c: int, k: int) -> float:
    # harbor's own estimator (1 - C(n-c, k) / C(n, k)), not a second implementation.
    from harbor.utils.pass_at_k import _pass_at_k_for_task

    return _pass_at_k_for_task(n, c, k)


def bootstrap_interval(values: list[float], resamples: int = BOOTSTRAP_RESAMPLES,
                       seed: int = BOOTSTRAP_SEED) -> tuple[float, float] | None:
    """Percentile 95% interval of the mean of `values`, resampling them (see the module doc)."""
    if not values:
        return None
    import numpy as np

    data = np.asarray(values, dtype=float)
    n = len(data)
    rng = np.random.default_rng(seed)
    # The resamples in blocks of rows, one draw per block instead of one per resample (a tenth of the
    # CPU): the generator yields the same indices in the same order either way, and each row's mean
    # sums as a lone resample's does, so the means are the one-at-a-time definition's, bit for bit
    # (tests/test_tally_slots.py). A block holds at most about a million indices (8 MB).
    rows = max(1, BOOTSTRAP_BLOCK // n)
    means = np.concatenate([data[rng.integers(0, n, size=(min(rows, resamples - start), n))].mean(axis=1)
                            for start in range(0, resamples, rows)])
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def run_stats(slot_outcomes: list[list[str]], k: int) -> dict:
    """The run's figures from each task's k slot outcomes (the module doc defines each)."""
    fractions, full = [], []
    for slots in slot_outcomes:
        scored = [o for o in slots if o in ("passed", "failed")]
        if scored:
            fractions.append(scored.count("passed") / len(scored))
        if len(scored) == k:
            full.append(scored.count("passed"))
    replicates = []
    for j in range(k):
        column = [slots[j] for slots in slot_outcomes if slots[j] in ("passed", "failed")]
        replicates.append({"replicate": j + 1, "passed": column.count("passed"), "scored": len(column),
                           "pass_rate": column.count("passed") / len(column) if column else None})
    rates = [r["pass_rate"] for r in replicates if r["pass_rate"] is not None]
    mean = sum(rates) / len(rates) if rates else None
    stderr = None
    if len(rates) > 1:
        stderr = math.sqrt(sum((r - mean) ** 2 for r in rates) / (len(rates) - 1)) / math.sqrt(len(rates))
    interval = bootstrap_interval(fractions)
    return {
        "mean_task_pass_fraction": sum(fractions) / len(fractions) if fractions else None,
        "tasks_with_scored_attempts": len(fractions),
        "pass_at_k": {"k": k, "value": (sum(_pass_at_k(k, c, k) for c in full) / len(full)) if full else None,
                      "tasks": len(full)},
        "replicates": replicates,
        "replicate_mean": mean,
        "replicate_stderr": stderr,
        "bootstrap95": None if interval is None else {
            "low": interval[0], "high": interval[1], "statistic": "mean_task_pass_fraction",
            "resamples": BOOTSTRAP_RESAMPLES, "seed": BOOTSTRAP_SEED, "method": "percentile"},
    }


def t_central(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with a whole number df of degrees of freedom: the finite series
    of Abramowitz & Stegun 26.7.3 (odd df) and 26.7.4 (even df), in theta = atan(t / sqrt(df))."""
    theta = math.atan(t / math.sqrt(df))
    s, c = math.sin(theta), math.cos(theta)
    if df % 2:  # (2/pi)(theta + sin(theta)(cos(theta) + 2/3 cos^3(theta) + ...)), the sum empty at df = 1
        term = total = c if df > 1 else 0.0
        for j in range(3, df - 1, 2):
            term *= c * c * (j - 1) / j
            total += term
        return 2 / math.pi * (theta + s * total)
    term = total = 1.0  # sin(theta)(1 + 1/2 cos^2(theta) + 1.3/(2.4) cos^4(theta) + ...)
    for j in range(2, df - 1, 2):
        term *= c * c * (j - 1) / j
        total += term
    return s * total


def t975(df: int) -> float:
    """t(0.975, df): the t with P(|T| < t) = 0.95, for whole df >= 1 (a k-attempt run has k - 1,
    up to MAX_ATTEMPTS - 1 = 99), solved on t_central by bisection and rounded to three decimals,
    as printed tables give it (12.706 at 1, 2.776 at 4, 2.201 at 11, 1.984 at 99)."""
    low, high = 0.0, 1000.0  # t_central(1000, 1) > 0.999
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if t_central(mid, df) < 0.95 else (low, mid)
    return round((low + high) / 2, 3)


def leaderboard_figure(slot_outcomes: list[list[str]], k: int, open_slots: int) -> dict:
    """The board's resolution rate over the slots, its replicate interval and bootstrap (module doc)."""
    n = len(slot_outcomes)
    trials = n * k
    passed = sum(slots.count("passed") for slots in slot_outcomes)
    value = passed / trials if trials else None
    rates = [sum(1 for slots in slot_outcomes if slots[j] == "passed") / n for j in range(k)] if n else []
    stderr = interval = None
    if value is not None and k > 1:
        stderr = math.sqrt(sum((r - value) ** 2 for r in rates) / (k - 1)) / math.sqrt(k)
        half = t975(k - 1) * stderr
        interval = {"low": max(0.0, value - half), "high": min(1.0, value + half),
                    "method": f"mean of the {k} replicates ± t(0.975, {k - 1}) = {t975(k - 1)} × their standard error"}
    boot = bootstrap_interval([slots.count("passed") / k for slots in slot_outcomes])
    return {
        "value": value, "passed": passed, "trials": trials, "tasks": n, "k": k,
        "pass_at": board_pass_at(slot_outcomes, k),
        "open_slots": open_slots, "provisional": open_slots > 0,
        "replicate_rates": rates, "replicate_stderr": stderr, "interval95": interval,
        "bootstrap95": None if boot is None else {
            "low": boot[0], "high": boot[1], "statistic": "passed / k per task",
            "resamples": BOOTSTRAP_RESAMPLES, "seed": BOOTSTRAP_SEED, "method": "percentile"},
    }


def board_pass_at(slot_outcomes: list[list[str]], k: int) -> dict[str, float]:
    """pass@j as harbor computes it (harbor/utils/pass_at_k.py: its k values, 2, 4, 8, … and 5, 10, … up to
    the trials per task, and its estimator averaged over tasks), over each task's k slots, an errored or
    open slot counting as not passed, as the board counts the rate. (harbor 0.26.0 itself leaves an
    infra-errored trial out of n.) Keys are strings, as JSON has them."""
    from harbor.utils.pass_at_k import _eligible_k_values

    if not slot_outcomes:
        return {}
    return {str(j): sum(_pass_at_k(k, slots.count("passed"), j) for slots in slot_outcomes) / len(slot_outcomes)
            for j in _eligible_k_values(k)}


def other_figures_line(lb: dict) -> str | None:
    """The board's other figures, one line: pass@j, the mean trial duration, the token totals."""
    parts = []
    if lb.get("pass_at"):
        parts.append(", ".join(f"pass@{j} {fmt.percent(v, 2)}" for j, v in lb["pass_at"].items())
                     + " (harbor's estimator over the slots)")
    if lb.get("mean_trial_secs") is not None:
        untimed = lb["slot_trials"] - lb["trials_timed"]
        parts.append(f"mean trial duration {lb['mean_trial_secs'] / 60:.1f} min"
                     + (f" ({untimed} untimed)" if untimed else ""))
    if lb.get("tokens") is not None:
        t = lb["tokens"]
        parts.append(f"tokens {t['input']:,} in ({t['cache']:,} cached), {t['output']:,} out"
                     + (f" ({lb['trials_without_tokens']} trials without a count)" if lb["trials_without_tokens"] else ""))
    return "The board's other figures, over the slots' trials: " + "; ".join(parts) if parts else None


def headline_lines(report: dict, others: bool = True) -> list[str]:
    """The board's figure first, with the one interval named the headline's; provisional when slots
    are open, with the command that fills them; then (others), second and labelled as not the
    headline's, the same figure's task-level bootstrap, and the board's other figures."""
    lb = report["leaderboard"]
    if lb["value"] is None:
        return [f"Leaderboard resolution rate: {fmt.UNKNOWN} (no task yet)"]
    iv = lb["interval95"]
    ci = ("" if iv is None else f", 95% interval {fmt.percent(iv['low'], 2)} to {fmt.percent(iv['high'], 2)}: the headline and its "
          f"interval ({iv['method']}; the board's ± appears to be this replicate spread)")
    out = [f"Leaderboard resolution rate: {fmt.percent(lb['value'], 2)} ({lb['passed']} passed of {lb['trials']} trials = "
           f"{lb['tasks']} tasks × {lb['k']}; errored and open slots count as not passed){ci}"]
    if lb["provisional"]:
        run = report["run"] or "<run>"
        fill = ("a bundled example: its open slots show a provisional figure" if run.startswith("example-")
                else f"make mopup RUN={run}")
        out.append(f"PROVISIONAL: {lb['open_slots']} of {lb['trials']} slots are open (counted as not passed until "
                   f"mop-up fills them: {fill})")
    final = report.get("errored_breakdown", {}).get("final", 0)
    if final:
        out.append(f"FINAL ERRORS: {final} of {lb['trials']} slots, of {final_errors_text(report)}: counted as not passed, "
                   f"not open (mop-up no longer fills them)")
    b = lb["bootstrap95"]
    if not others:
        return out
    if b is not None:
        out.append(f"  not the headline's interval: the same rate by a task-level bootstrap of each task's passed / "
                   f"{lb['k']} ({BOOTSTRAP_RESAMPLES:,} resamples, seed {BOOTSTRAP_SEED}), {fmt.percent(b['low'], 2)} to "
                   f"{fmt.percent(b['high'], 2)}")
    other = other_figures_line(lb)
    if other:
        out.append(other)
    return out


def final_errors_text(report: dict) -> str:
    """The final errors named with why: `N task(s) whose last M attempts in a row ended in an infra
    error (MAX_TASK_RETRIES=M): a, b`."""
    tasks, limit = report["final_errors"], report["max_task_retries"]
    return (f"{len(tasks)} task(s) whose infra error survived {limit} attempts in a row per open slot "
            f"(MAX_TASK_RETRIES={limit}): {', '.join(tasks)}")


def final_errors_lines(report: dict) -> list[str]:
    """The tally's paragraph on final errors (none: no lines): which, why, and how to try again."""
    if not report.get("final_errors"):
        return []
    run, limit = report["run"] or "<run>", report["max_task_retries"]
    again = ("a bundled example is never mopped up" if run.startswith("example-") else
             f"make mopup RUN={run} MAX_TASK_RETRIES={limit + 1} tries each once more")
    return [f"Final errors ({len(report['final_errors'])}): {final_errors_text(report)}. They count as errored, "
            f"and mop-up, make reproduce and AUTO_STOP no longer wait for them ({again}).", ""]


# --------------------------------------------------------------------------- rendering (k > 1)


def hidden_figures_line(report: dict, excluded: str, where: str | None = None) -> str:
    """The tally's default view at k > 1 shows the headline and what explains it; this one line
    names the other figures and how to see them (ALL=1; `where`: a file that holds them)."""
    lb = report["leaderboard"]
    run = report["run"] or "<run>"
    names = [", ".join(f"pass@{j}" for j in lb.get("pass_at") or {}) or None, "the bootstrap intervals",
             "the replicates", "the mean task pass fraction", f"the pass rate excluding {excluded}",
             "the mean trial duration" if lb.get("mean_trial_secs") is not None else None]
    return (f"Other figures, not the headline ({', '.join(n for n in names if n)}): make tally RUN={run} ALL=1 "
            f"prints them" + (f"; {where} holds them too" if where else ""))


def stats_lines(report: dict) -> list[str]:
    """The k > 1 figures, one per line, for the text table and the Markdown breakdown."""
    k = report["n_attempts"]
    pk = report["pass_at_k"]
    rep = report["replicates"]
    with_scored = [r for r in rep if r["pass_rate"] is not None]
    spread = (fmt.UNKNOWN if report["replicate_mean"] is None else
              fmt.percent(report["replicate_mean"], 2) + (" ± " + fmt.percent(report["replicate_stderr"], 2)
                                                if report["replicate_stderr"] is not None else " (one replicate)"))
    b = report["bootstrap95"]
    boot = fmt.UNKNOWN if b is None else f"{fmt.percent(b['low'], 2)} to {fmt.percent(b['high'], 2)}"
    return [
        "Other figures, not the headline (each interval is its own figure's):",
        f"pass@1, mean over tasks of each task's pass fraction: {fmt.percent(report['mean_task_pass_fraction'], 2)} "
        f"({report['tasks_with_scored_attempts']} of {report['tasks']} tasks have a scored attempt; errored slots left "
        f"out); its 95% interval by a task-level bootstrap ({BOOTSTRAP_RESAMPLES:,} resamples, seed "
        f"{BOOTSTRAP_SEED}): {boot}",
        f"pass@1 over the {k} replicates (replicate j = the j-th settled attempt of every task), mean ± standard "
        f"error: {spread}; replicates: " + ", ".join(
            f"{fmt.percent(r['pass_rate'], 1)} ({r['passed']}/{r['scored']})" for r in rep) + (
            "" if len(with_scored) == len(rep) else f" ({len(rep) - len(with_scored)} with no scored attempt)"),
        f"pass@{k} (harbor's estimator, over the {pk['tasks']} tasks with {k} scored attempts): {fmt.percent(pk['value'], 2)}",
    ]


def summary_header(report: dict) -> str:
    return f"| Outcome | Attempts | % of {report['slots']} ({report['tasks']} tasks × {report['n_attempts']}) |"


def per_task_lines(report: dict) -> list[str]:
    """Text: every task's slots, then the re-rolls."""
    out = [f"Per task ({report['n_attempts']} slots: ✓ passed, ✗ failed, E errored, ? unclassified, … unfinished):"]
    width = max((len(e["task"]) for e in report["per_task"]), default=0)
    for e in report["per_task"]:
        frac = "-" if e["pass_fraction"] is None else f"{e['passed_attempts']}/{e['scored_attempts']}"
        why = f"  ({e['reason']})" if e["verdict"] else ""
        out.append(f"  {e['task']:<{width}}  {e['slots_text']}  {frac}{why}")
    rerolled = [(e["task"], d) for e in report["per_task"] for d in e["rerolled"]]
    if rerolled:
        out += ["", f"Re-rolled settled trials, listed, not counted ({len(rerolled)}):"]
        out += [f"  {task}: {d}" for task, d in rerolled]
    return out + [""]


def markdown_rows(report: dict, rel, cell) -> list[str]:
    """The Markdown per-task table of a k > 1 run (`rel` shortens a trial dir, `cell` escapes)."""
    k = report["n_attempts"]
    out = ["## Per task", "",
           f"Slots: the latest {k} settled trials, oldest first (✓ passed, ✗ failed, E errored, ? unclassified, "
           "… unfinished); older settled trials are re-rolls, listed and not counted.", "",
           "| Task | Slots | Passed / scored | Latest settled | Attempts | Re-rolled | Why |",
           "|---|---|---|---|---|---|---|"]
    for e in report["per_task"]:
        frac = "-" if e["pass_fraction"] is None else f"{e['passed_attempts']}/{e['scored_attempts']}"
        outcome = e["outcome"] + (" (verdict)" if e["verdict"] else "")
        rerolled = ", ".join(rel(d) for d in e["rerolled"]) or "-"
        out.append(f"| {cell(e['task'])} | {e['slots_text']} | {frac} | {outcome} | {e['attempts']} | "
                   f"{cell(rerolled)} | {cell(e['reason'])} |")
    return out


def slot_errors(per_task: list[dict], by_task: dict[str, list]) -> dict[str, int]:
    """errored_breakdown over slots: open slots of a task with an infra trial (`final` when the task
    is a final error, past MAX_TASK_RETRIES), timeouts, verdicts."""
    out = {"infra": 0, "final": 0, "timeout": 0, "verdict": 0}
    for e in per_task:
        if e["rule"] == "verdict":
            out["verdict"] += e["slots"].count("errored")
            continue
        counted = set(e["slot_trials"])
        out["timeout"] += sum(1 for t in by_task[e["task"]] if t.trial_dir in counted and t.rule == "timeout-unscored")
        errored = e["slot_trials"].count(None) if e["slots"][-1:] == ["errored"] else 0
        out["final" if e["final_error"] else "infra"] += errored
    return out
