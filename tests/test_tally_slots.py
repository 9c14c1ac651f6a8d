"""Attempt slots (docs/design.md decision 13): k = 5 runs, their figures, and the bundled k = 5 example.

Job dirs are written with harbor 0.25's own models (tests/fixtures/harbor_jobs.py). Every
expected figure is derived here from the slots written out by hand below: pass@k with the
closed form 1 - C(n-c, k) / C(n, k), the bootstrap with numpy (and a loose check with the
standard library's random), never by calling tools/results/slots.py.
"""

from __future__ import annotations

import importlib.util
import json
import math
import random
import re
import statistics
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.fixtures.harbor_jobs import TrialSpec, trial_name, write_job
from tests.test_tally import TOP_FIELDS
from test_report_slots import bootstrap
from tools.results import slots
from tools import tally as tally_cli
from tools.results import tally_core
from tools.results import tally_jobs
from tools.results import tally_policy

S = TrialSpec
REPO = Path(__file__).resolve().parent.parent
K = 5
GLYPH = {"✓": "passed", "✗": "failed", "E": "errored", "?": "unclassified", "…": "unfinished"}


@pytest.fixture(scope="module")
def policy():
    return tally_policy.load_policy()


def attempts(task: str, plan: list, start: int = 0, base: int = 0) -> list[TrialSpec]:
    """One spec per attempt: 1.0/0.0 a reward, "infra" a SandboxError, "crash" no result.json,
    "timeout" an AgentTimeoutError with reward 0, "unclassified" a VerifierTimeoutError."""
    out = []
    for i, what in enumerate(plan, start):
        when = base + 10 * i
        if what == "infra":
            out.append(S(task, None, "SandboxError", "Sandbox API error (503)", finished=when, attempt=i))
        elif what == "crash":
            out.append(S(task, finished=None, attempt=i))
        elif what == "timeout":
            out.append(S(task, 0.0, "AgentTimeoutError", "Agent execution timed out", finished=when, attempt=i))
        elif what == "unclassified":
            out.append(S(task, None, "VerifierTimeoutError", "", finished=when, attempt=i))
        else:
            out.append(S(task, what, finished=when, attempt=i))
    return out


P, F = 1.0, 0.0
MAIN = {
    "a": [P, P, P, P, P],
    "b": [P, F, "infra", F, P],            # an infra attempt, not retried yet: its slot is errored
    "c": [F, F, "crash", F, F],            # a crashed attempt: its slot is unfinished
    "d": ["infra"] * 5,                    # nothing settled: five errored slots
    "e": [P, F, P, F, P],                  # + two settled attempts in the retry job: two re-rolls
    "f": ["timeout", "timeout", P, P, P],  # a genuine limit is settled (and scored by default)
    "g": ["infra"] * 5,                    # a manual verdict decides every slot
    "h": ["unclassified", P, P, P, P],     # settled, never scored
    "j": [P, F, F, F, F],                  # + an infra error after its five settled: ignored
}
RETRY = {"e": [F, P], "j": ["infra"]}
# The slots, worked out by hand: the latest 5 settled trials oldest first, then open ones.
SLOTS = {"a": "✓✓✓✓✓", "b": "✓✗✗✓E", "c": "✗✗✗✗…", "d": "EEEEE", "e": "✓✗✓✗✓", "f": "✗✗✓✓✓",
         "g": "EEEEE", "h": "?✓✓✓✓", "j": "✓✗✗✗✗"}
SLOTS_UNSCORED = dict(SLOTS, f="EE✓✓✓")
VERDICTS = {"g": tally_policy.Verdict("errored", "SandboxError on every attempt; accepted as final")}


@pytest.fixture(scope="module")
def k5(tmp_path_factory):
    root = tmp_path_factory.mktemp("k5")
    jobs, ds = root / "jobs", root / "dataset"
    write_job(jobs, "fx5", [s for t, plan in MAIN.items() for s in attempts(t, plan)], dataset=ds, n_attempts=K,
              multiplier=1.0)
    write_job(jobs, "fx5-retry-1", [s for t, plan in RETRY.items() for s in attempts(t, plan, base=1000)],
              dataset=ds, scoped=True, multiplier=1.0)
    return jobs


def expected_figures(slots: dict[str, str], k: int = K) -> dict:
    """Every run figure from the slot strings, independently of tools/results/slots.py."""
    outcomes = {t: [GLYPH[g] for g in s] for t, s in slots.items()}
    fractions = []
    pass_at_k = []
    for outs in outcomes.values():
        scored = [o for o in outs if o in ("passed", "failed")]
        if scored:
            fractions.append(scored.count("passed") / len(scored))
        n, c = len(scored), scored.count("passed")
        if n >= k:
            pass_at_k.append(1 - math.comb(n - c, k) / math.comb(n, k))
    reps = []
    for j in range(k):
        col = [outs[j] for outs in outcomes.values() if outs[j] in ("passed", "failed")]
        reps.append(col.count("passed") / len(col))
    rng = np.random.default_rng(0)
    fr = np.array(fractions)
    means = [fr[rng.integers(0, len(fr), size=len(fr))].mean() for _ in range(10_000)]
    low, high = np.quantile(means, [0.025, 0.975])
    return {"fractions": fractions, "mean": sum(fractions) / len(fractions),
            "pass_at_k": sum(pass_at_k) / len(pass_at_k), "pass_at_k_tasks": len(pass_at_k),
            "replicates": reps, "rep_mean": statistics.mean(reps),
            "rep_stderr": statistics.stdev(reps) / math.sqrt(len(reps)), "interval": (low, high)}


def count(slots: dict[str, str], glyph: str) -> int:
    return sum(s.count(glyph) for s in slots.values())


def test_k_is_read_from_the_job_config_and_slots_are_filled(k5, policy):
    report = tally_core.tally(tally_jobs.run_job_dirs(k5, "fx5"), policy, VERDICTS)
    assert report["n_attempts"] == K and report["slots"] == 9 * K
    assert {e["task"]: e["slots_text"] for e in report["per_task"]} == SLOTS
    by_task = {e["task"]: e for e in report["per_task"]}
    e = by_task["e"]
    # Re-rolls: the two oldest settled trials of e, listed and not counted.
    assert e["rerolled"] == [str(k5 / "fx5" / trial_name("e", "fx5", i)) for i in (0, 1)]
    assert e["slot_trials"][-2:] == [str(k5 / "fx5-retry-1" / trial_name("e", "fx5-retry-1", i)) for i in (0, 1)]
    assert by_task["b"]["slot_trials"][-1] is None and by_task["b"]["slots"][-1] == "errored"
    assert (by_task["c"]["passed_attempts"], by_task["c"]["scored_attempts"], by_task["c"]["pass_fraction"]) == (0, 4, 0)
    assert by_task["d"]["pass_fraction"] is None and by_task["d"]["outcome"] == "errored"
    assert by_task["g"]["outcome"] == "errored" and by_task["g"]["rule"] == "verdict"
    assert report["rerolled_trials"] == 2
    # Exact counts over the 45 slots.
    assert [report[o] for o in ("passed", "failed", "errored", "unclassified", "unfinished", "scored")] == \
        [18, 14, 11, 1, 1, 32]
    assert [count(SLOTS, g) for g in "✓✗E?…"] == [18, 14, 11, 1, 1]
    assert report["pass_rate"] == 18 / 32
    assert report["errored_breakdown"] == {"infra": 6, "final": 0, "timeout": 0, "verdict": 5}
    # An infra error after five settled trials is normal with k > 1: no warning for j.
    assert not [w for w in report["warnings"] if w.startswith("j:")]
    assert not [w for w in report["warnings"] if "scored attempts disagree" in w]


def test_run_figures_against_independent_computation(k5, policy):
    report = tally_core.tally(tally_jobs.run_job_dirs(k5, "fx5"), policy, VERDICTS)
    want = expected_figures(SLOTS)
    assert want["fractions"] == [1, 0.5, 0, 0.6, 0.6, 1, 0.2]  # a b c e f h j; d and g have no scored slot
    assert report["mean_task_pass_fraction"] == pytest.approx(3.9 / 7)
    assert report["mean_task_pass_fraction"] == pytest.approx(want["mean"])
    assert report["tasks_with_scored_attempts"] == 7
    assert report["pass_at_k"] == {"k": K, "value": pytest.approx(want["pass_at_k"]), "tasks": 4}
    assert [r["pass_rate"] for r in report["replicates"]] == pytest.approx(want["replicates"])
    # replicate 1 is every task's first settled attempt: a b c e f j scored, 4 of 6 passed (a b e j)
    assert report["replicates"][0] == {"replicate": 1, "passed": 4, "scored": 6, "pass_rate": 4 / 6}
    assert report["replicate_mean"] == pytest.approx(want["rep_mean"])
    assert report["replicate_stderr"] == pytest.approx(want["rep_stderr"])
    b = report["bootstrap95"]
    assert (b["resamples"], b["seed"], b["statistic"]) == (10_000, 0, "mean_task_pass_fraction")
    assert (b["low"], b["high"]) == pytest.approx(want["interval"])
    # A second bootstrap with the standard library's generator lands close: the interval is
    # a property of the data, not of one generator.
    r = random.Random(7)
    fr = want["fractions"]
    means = sorted(sum(r.choice(fr) for _ in fr) / len(fr) for _ in range(4000))
    assert abs(means[100] - b["low"]) < 0.05 and abs(means[3899] - b["high"]) < 0.05


def test_final_error_at_k5_is_max_task_retries_attempts_per_open_slot(tmp_path, policy):
    """k = 5: a task's open slots are final errors once its infra error survived MAX_TASK_RETRIES
    attempts in a row for each of them (mop-up runs a task's missing attempts side by side)."""
    limit, settled = 2, [P, F]
    open_slots = K - len(settled)
    plans = {"short": settled + ["infra"] * (limit * open_slots - 1), "final": settled + ["infra"] * (limit * open_slots)}
    write_job(tmp_path / "jobs", "fin", [s for t, plan in plans.items() for s in attempts(t, plan)], n_attempts=K,
              multiplier=1.0)
    report = tally_core.tally(tally_jobs.run_job_dirs(tmp_path / "jobs", "fin"), policy, max_task_retries=limit)
    by_task = {e["task"]: e for e in report["per_task"]}
    assert {t: (e["infra_streak"], e["final_error"]) for t, e in by_task.items()} == {
        "short": (limit * open_slots - 1, False), "final": (limit * open_slots, True)}
    assert report["final_errors"] == ["final"]
    assert report["errored_breakdown"] == {"infra": open_slots, "final": open_slots, "timeout": 0, "verdict": 0}
    assert [(t["task"], t["missing"]) for t in tally_core.retry_targets(report)] == [("short", open_slots)]
    # A final error's slots are not open: the headline is provisional for the other task's only.
    lb = report["leaderboard"]
    assert (lb["open_slots"], lb["provisional"]) == (open_slots, True)
    text = tally_cli.render_text(report)
    assert (f"FINAL ERRORS: {open_slots} of {2 * K} slots, of 1 task(s) whose infra error survived {limit} attempts "
            f"in a row per open slot (MAX_TASK_RETRIES={limit}): final: counted as not passed, not open") in text


def test_the_headline_is_the_boards_resolution_rate_with_its_replicate_interval(k5, policy, tmp_path):
    """passed / (tasks × k), errored and open slots not passed; the interval from the k replicates
    (each a rate over every task), and a task-level bootstrap, all recomputed here."""
    report = tally_core.tally(tally_jobs.run_job_dirs(k5, "fx5"), policy, VERDICTS)
    lb = report["leaderboard"]
    n = len(SLOTS)
    passed = count(SLOTS, "✓")
    assert (lb["passed"], lb["trials"], lb["tasks"], lb["k"]) == (18, 45, 9, 5) == (passed, n * K, n, K)
    assert lb["value"] == 18 / 45
    # Open: b's errored slot, c's unfinished one, d's five (g's are closed by its verdict).
    assert (lb["open_slots"], lb["provisional"]) == (7, True)
    rates = [sum(s[j] == "✓" for s in SLOTS.values()) / n for j in range(K)]
    assert lb["replicate_rates"] == pytest.approx(rates)
    assert statistics.mean(rates) == pytest.approx(lb["value"])  # the replicates' mean is the figure
    se = statistics.stdev(rates) / math.sqrt(K)
    assert lb["replicate_stderr"] == pytest.approx(se)
    assert (lb["interval95"]["low"], lb["interval95"]["high"]) == pytest.approx(
        (max(0, 18 / 45 - 2.776 * se), min(1, 18 / 45 + 2.776 * se)))
    per_task = [s.count("✓") / K for s in SLOTS.values()]
    assert (lb["bootstrap95"]["low"], lb["bootstrap95"]["high"]) == pytest.approx(bootstrap(per_task))
    # Shown first, before the outcome table, in the text and the Markdown; provisional said.
    md = tmp_path / "t.md"
    r = CliRunner().invoke(tally_cli.cli, ["tally", "--jobs-dir", str(k5), "--job-name", "fx5", "--run-name", "fx5",
                                   "--markdown", str(md)])
    lines = r.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("Leaderboard resolution rate: "))
    assert first < lines.index("| Outcome | Attempts | % of 45 (9 tasks × 5) |")
    assert lines[first].startswith("Leaderboard resolution rate: 40.00% (18 passed of 45 trials = 9 tasks × 5; "
                                   "errored and open slots count as not passed), 95% interval ")
    # No verdicts file here: g's five slots are open too (7 + 5).
    assert lines[first + 1] == ("PROVISIONAL: 12 of 45 slots are open (counted as not passed until mop-up fills "
                                "them: make mopup RUN=fx5)")
    assert md.read_text().splitlines()[8].startswith("**Leaderboard resolution rate: 40.00%")


@pytest.mark.parametrize("n", [1, 7, 89, 300])
def test_the_bootstrap_draws_in_blocks_exactly_the_one_at_a_time_resamples(n, monkeypatch):
    """Equal, not approximately: the same indices in the same order, each mean summed alike, also
    when the draws are split over several blocks (a small block here; 2,000 resamples keep it quick)."""
    rng = random.Random(n)
    values = [rng.choice([0, 0.2, 0.4, 0.6, 0.8, 1]) for _ in range(n)] if n % 2 else [rng.random() for _ in range(n)]
    want = bootstrap(values, 2000)
    assert slots.bootstrap_interval(values, resamples=2000) == want
    monkeypatch.setattr(slots, "BOOTSTRAP_BLOCK", 3 * n + 1)  # three resamples a block, the last one short
    assert slots.bootstrap_interval(values, resamples=2000) == want
    assert slots.bootstrap_interval([]) is None


# t(0.975, df) as the NIST/SEMATECH e-Handbook's table of the t distribution prints it (1.3.6.7.2),
# every df it lists up to 99 = MAX_ATTEMPTS - 1: including those the old lookup table lacked (11,
# k = 12) and those past 30, where 1.96 was used, below the true value.
PRINTED_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
                10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
                18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060,
                26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042, 31: 2.040, 32: 2.037, 40: 2.021,
                50: 2.009, 60: 2.000, 80: 1.990, 99: 1.984}


@pytest.mark.parametrize("df", sorted(PRINTED_T975))
def test_t975_is_the_printed_tables_value(df):
    assert slots.t975(df) == PRINTED_T975[df]


def test_t975_where_the_distribution_has_a_closed_form():
    # df 1 is Cauchy: t = tan(0.95 pi / 2); df 2: P(|T| < t) = t / sqrt(2 + t^2).
    assert slots.t975(1) == round(math.tan(0.95 * math.pi / 2), 3)
    assert slots.t975(2) == round(0.95 * math.sqrt(2 / (1 - 0.95 ** 2)), 3)
    assert [slots.t975(df) for df in range(1, 100)] == sorted((slots.t975(df) for df in range(1, 100)), reverse=True)


def test_a_k12_run_uses_t_at_11_degrees_of_freedom():
    # k = 12 replicates: t(0.975, 11) = 2.201, a df between two of the old table's rows.
    per_task = [["passed"] * j + ["failed"] * (12 - j) for j in range(4)]
    lb = slots.leaderboard_figure(per_task, 12, 0)
    rates = [3 / 4, 2 / 4, 1 / 4] + [0.0] * 9  # replicate j: the tasks whose first j + 1 slots passed
    half = 2.201 * statistics.stdev(rates) / math.sqrt(12)
    assert (lb["value"], lb["replicate_rates"]) == (6 / 48, rates)
    assert (lb["interval95"]["low"], lb["interval95"]["high"]) == pytest.approx((max(0.0, 6 / 48 - half), 6 / 48 + half))
    assert lb["interval95"]["method"] == "mean of the 12 replicates ± t(0.975, 11) = 2.201 × their standard error"


def test_one_headline_interval_named_once_and_every_other_interval_labelled_second(policy):
    """The bundled k = 5 example: three 95% intervals, of two figures. The headline's (the board's
    rate, the replicates' t interval) comes first and is the only one called the headline's; the
    others follow it and each says it is not the headline's and of what it is. Values computed here."""
    report = tally_core.tally(tally_jobs.run_job_dirs(REPO / "examples" / "jobs", "example-leaderboard-tb21"), policy,
                     run="example-leaderboard")
    slots = [e["slots"] for e in report["per_task"]]
    n = len(slots)
    reps = [sum(s[j] == "passed" for s in slots) / n for j in range(K)]
    value = sum(s.count("passed") for s in slots) / (n * K)
    half = 2.776 * statistics.stdev(reps) / math.sqrt(K)
    low, high = max(0, value - half), min(1, value + half)
    rng = np.random.default_rng(0)
    per_task = np.array([s.count("passed") / K for s in slots])
    board_boot = np.quantile([per_task[rng.integers(0, n, size=n)].mean() for _ in range(10_000)], [0.025, 0.975])
    fractions = np.array([e["pass_fraction"] for e in report["per_task"] if e["pass_fraction"] is not None])
    rng = np.random.default_rng(0)
    mean_boot = np.quantile([fractions[rng.integers(0, len(fractions), size=len(fractions))].mean()
                             for _ in range(10_000)], [0.025, 0.975])
    # The default view shows the headline's interval alone; ALL=1 (every_figure) the other two.
    assert [line for line in tally_cli.render_text(report).splitlines() if re.search(r"\d% to \d", line)] == [
        next(line for line in tally_cli.render_text(report).splitlines() if line.startswith("Leaderboard resolution rate: "))]
    lines = tally_cli.render_text(report, every_figure=True).splitlines()
    with_interval = [line for line in lines if re.search(r"\d% to \d", line)]
    assert len(with_interval) == 3
    head, second, third = with_interval
    assert head.startswith(f"Leaderboard resolution rate: {100 * value:.2f}% ")
    assert f"95% interval {100 * low:.2f}% to {100 * high:.2f}%: the headline and its interval (mean of the 5 " in head
    assert sum("headline and its interval" in line for line in lines) == 1
    assert second == (f"  not the headline's interval: the same rate by a task-level bootstrap of each task's passed / "
                      f"5 (10,000 resamples, seed 0), {100 * board_boot[0]:.2f}% to {100 * board_boot[1]:.2f}%")
    assert third.startswith(f"pass@1, mean over tasks of each task's pass fraction: {100 * fractions.mean():.2f}% ")
    assert third.endswith(f"its 95% interval by a task-level bootstrap (10,000 resamples, seed 0): "
                          f"{100 * mean_boot[0]:.2f}% to {100 * mean_boot[1]:.2f}%")
    assert lines.index(head) < lines.index(second) < lines.index("Other figures, not the headline (each interval is "
                                                                 "its own figure's):") < lines.index(third)


def test_a_run_with_every_slot_filled_is_not_provisional(policy):
    """A finished slot set: the figure is passed / (tasks × k), nothing open."""
    from tools.results import slots
    outs = [["passed"] * 3 + ["failed"] * 2, ["failed"] * 5, ["passed"] * 5]
    lb = slots.leaderboard_figure(outs, 5, 0)
    assert (lb["value"], lb["provisional"], lb["open_slots"]) == (8 / 15, False, 0)
    assert lb["replicate_rates"] == [2 / 3, 2 / 3, 2 / 3, 1 / 3, 1 / 3]
    assert not [line for line in slots.headline_lines({"leaderboard": lb, "run": "r"}) if "PROVISIONAL" in line]


def test_timeouts_unscored_fills_the_slots_the_same_trials(k5, policy):
    report = tally_core.tally(tally_jobs.run_job_dirs(k5, "fx5"), policy, VERDICTS, timeouts_unscored=True)
    assert {e["task"]: e["slots_text"] for e in report["per_task"]} == SLOTS_UNSCORED
    assert [report[o] for o in ("passed", "failed", "errored", "scored")] == [18, 12, 13, 30]
    assert report["errored_breakdown"] == {"infra": 6, "final": 0, "timeout": 2, "verdict": 5}
    assert report["mean_task_pass_fraction"] == pytest.approx(expected_figures(SLOTS_UNSCORED)["mean"])


def test_attempts_option_overrides_k_and_k1_is_the_single_attempt_rule(k5, policy):
    report = tally_core.tally(tally_jobs.run_job_dirs(k5, "fx5"), policy, VERDICTS, attempts=1)
    assert set(report) == TOP_FIELDS  # single-attempt output has no slot fields
    assert {e["task"]: e["outcome"] for e in report["per_task"]} == {
        "a": "passed", "b": "passed", "c": "failed", "d": "errored", "e": "passed", "f": "passed",
        "g": "errored", "h": "passed", "j": "failed"}
    # j's settled attempt is no longer hidden by the infra error after it, and that is said.
    assert ("j: an infra error (SandboxError) finished after the settled attempt (failed); the settled attempt "
            "counts and the task is not retried (an infra error no longer hides a settled attempt: "
            "docs/design.md decision 13)") in report["warnings"]
    three = tally_core.tally(tally_jobs.run_job_dirs(k5, "fx5"), policy, attempts=3)
    assert {e["task"]: e["slots_text"] for e in three["per_task"]}["e"] == "✓✗✓"  # the latest 3 of 7 settled
    # a b c e f h j keep 3 of their 5, 4, 4, 7, 5, 5, 5 settled trials; d and g have none
    assert three["rerolled_trials"] == 2 + 1 + 1 + 4 + 2 + 2 + 2


def test_cli_text_json_and_markdown(k5, tmp_path):
    md = tmp_path / "t.md"
    r = CliRunner().invoke(tally_cli.cli, ["tally", "--jobs-dir", str(k5), "--job-name", "fx5", "--markdown", str(md),
                                           "--all"])
    assert r.exit_code == 0, r.output
    want = expected_figures(dict(SLOTS, g="EEEEE"))
    out = r.stdout
    assert "Attempts per task (k): 5; each task's latest 5 settled trials fill its slots" in out
    assert "| Outcome | Attempts | % of 45 (9 tasks × 5) |" in out
    assert "Pass rate excluding infra errors: 56.25% (18/32 scored attempts; not the headline)" in out
    assert f"pass@1, mean over tasks of each task's pass fraction: {100 * want['mean']:.2f}% (7 of 9 tasks" in out
    assert f"mean ± standard error: {100 * want['rep_mean']:.2f}% ± {100 * want['rep_stderr']:.2f}%" in out
    assert "pass@5 (harbor's estimator, over the 4 tasks with 5 scored attempts): 100.00%" in out
    lo, hi = want["interval"]
    assert f"seed 0): {100 * lo:.2f}% to {100 * hi:.2f}%" in out
    assert "  b  ✓✗✗✓E  2/4" in out
    text = md.read_text()
    assert "| b | ✓✗✗✓E | 2/4 | passed | 5 | - |" in text
    assert "**Pass rate excluding infra errors: 56.25% (18/32 scored attempts; not the headline)**" in text
    assert f"| e | ✓✗✓✗✓ | 3/5 | passed | 7 | fx5/{trial_name('e', 'fx5', 0)}, fx5/{trial_name('e', 'fx5', 1)} |" in text
    doc = json.loads(CliRunner().invoke(tally_cli.cli, ["tally", "--jobs-dir", str(k5), "--job-name", "fx5", "--json"]).stdout)
    assert set(doc) - TOP_FIELDS == {"n_attempts", "slots", "rerolled_trials", "mean_task_pass_fraction",
                                     "tasks_with_scored_attempts", "pass_at_k", "replicates", "replicate_mean",
                                     "replicate_stderr", "bootstrap95", "leaderboard"}
    assert {"slots", "slots_text", "slot_trials", "passed_attempts", "scored_attempts", "pass_fraction",
            "rerolled"} <= set(doc["per_task"][0])
    r = CliRunner().invoke(tally_cli.cli, ["tally", "--jobs-dir", str(k5), "--job-name", "fx5", "--attempts", "0"])
    assert r.exit_code == 2


def test_the_default_view_is_the_headline_and_what_explains_it_and_all_adds_every_figure(k5, tmp_path, monkeypatch):
    """k > 1 without --all: the headline, its notes, the outcome table, infra errors by side and one
    line naming the other figures, which --all prints (and the Markdown file always holds)."""
    md = tmp_path / "state" / "fx5" / "tally.md"
    md.parent.mkdir(parents=True)
    args = ["tally", "--jobs-dir", str(k5), "--job-name", "fx5", "--run-name", "fx5", "--markdown", str(md)]
    out = CliRunner().invoke(tally_cli.cli, args).stdout
    every = CliRunner().invoke(tally_cli.cli, args + ["--all"]).stdout
    hidden = ["Pass rate excluding infra errors: 56.25% (18/32 scored attempts; not the headline)",
              "  not the headline's interval: the same rate by a task-level bootstrap",
              "The board's other figures, over the slots' trials: pass@2 ",
              "Other figures, not the headline (each interval is its own figure's):",
              "pass@1, mean over tasks of each task's pass fraction: ",
              "pass@1 over the 5 replicates (replicate j = the j-th settled attempt of every task), mean ± standard error: ",
              "pass@5 (harbor's estimator, over the 4 tasks with 5 scored attempts): 100.00%"]
    assert [h for h in hidden if h in every] == hidden
    assert [h for h in hidden if h in out] == []
    pointer = ("Other figures, not the headline (pass@2, pass@4, pass@5, the bootstrap intervals, the replicates, the "
               "mean task pass fraction, the pass rate excluding infra errors, the mean trial duration): make tally "
               f"RUN=fx5 ALL=1 prints them; {md} holds them too")
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("Leaderboard resolution rate: 40.00% "))
    table = lines.index("| Outcome | Attempts | % of 45 (9 tasks × 5) |")
    assert lines[head + 1].startswith("PROVISIONAL: 12 of 45 slots are open") and lines[head + 2:table] == [""]
    assert lines[table + 7:table + 11] == ["", lines[table + 8], "", pointer]
    assert lines[table + 8].startswith("Infra errors by side (every attempt): sandbox ")
    assert pointer not in every and "  b  ✓✗✗✓E  2/4" in out
    # Everything else is the same in both views.
    assert [line for line in every.splitlines() if line not in lines and not any(line.startswith(h) for h in hidden)] == []
    # The breakdown file is named as a person reads it: under the current directory, relative.
    monkeypatch.chdir(tmp_path)
    report = tally_core.tally(tally_jobs.run_job_dirs(k5, "fx5"), tally_policy.load_policy(), run="fx5")
    assert tally_cli.render_text(report, markdown=str(md)).count("; state/fx5/tally.md holds them too\n") == 1
    assert "holds them too" not in tally_cli.render_text(report)
    # timeouts-unscored names the rate it hides as that accounting counts it.
    unscored = CliRunner().invoke(tally_cli.cli, args + ["--timeouts-unscored"]).stdout
    assert "the pass rate excluding infra errors and timeouts, the mean trial duration): make tally" in unscored


# --------------------------------------------------------------------------- the bundled example

JOBS = REPO / "examples" / "jobs"
JOB = "example-leaderboard-tb21"
EXAMPLE_SLOTS = {"build-pov-ray": "✗✓✗✗✓", "circuit-fibsqrt": "✗✗✗✗✗", "cobol-modernization": "✓✓✓EE",
                 "fix-git": "✓✓✓✓✓", "path-tracing": "✗✗✗✗✗", "regex-log": "✓✗✓✗✓"}


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes()
            for name in (JOB, f"{JOB}-retry-1") for p in sorted((root / name).rglob("*")) if p.is_file()}


def test_example_is_what_its_script_writes(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("mel", REPO / "examples" / "make_example_leaderboard.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.chdir(tmp_path)
    mod.main(tmp_path / "out")
    fresh, committed = _files(tmp_path / "out" / "jobs"), _files(JOBS)
    assert sorted(fresh) == sorted(committed)
    assert [k for k in fresh if fresh[k] != committed[k]] == []
    assert sum(len(b) for b in committed.values()) < 200_000


def test_example_tally(policy):
    report = tally_core.tally(tally_jobs.run_job_dirs(JOBS, JOB), policy, run="example-leaderboard")
    assert report["n_attempts"] == 5
    assert {e["task"]: e["slots_text"] for e in report["per_task"]} == EXAMPLE_SLOTS
    assert [report[o] for o in ("passed", "failed", "errored", "unfinished", "scored")] == [13, 15, 2, 0, 28]
    want = expected_figures(EXAMPLE_SLOTS)
    assert report["mean_task_pass_fraction"] == pytest.approx(want["mean"]) == pytest.approx(3.0 / 6)
    assert report["pass_at_k"]["value"] == pytest.approx(want["pass_at_k"]) == pytest.approx(3 / 5)
    assert report["replicate_stderr"] == pytest.approx(want["rep_stderr"])
    assert (report["bootstrap95"]["low"], report["bootstrap95"]["high"]) == pytest.approx(want["interval"])
    assert report["rerolled_trials"] == 1


def test_retry_targets_of_a_k_run_are_its_open_slots(policy):
    """retry-targets with k = 5: the tasks with open slots and how many (mop-up's own selection)."""
    report = tally_core.tally(tally_jobs.run_job_dirs(JOBS, JOB), policy, run="example-leaderboard")
    targets = tally_core.retry_targets(report)
    assert [(t["task"], t["missing"]) for t in targets] == [("cobol-modernization", 2)]
    result = CliRunner().invoke(tally_cli.cli, ["retry-targets", "--jobs-dir", str(JOBS), "--job-name", JOB])
    assert result.exit_code == 0, result.output
    errored = sorted(str(JOBS / JOB / d.name) for d in (JOBS / JOB).glob("cobol-modernization__*")
                     if "ReadTimeout" in (d / "result.json").read_text())
    assert len(errored) == 2
    assert result.output == f"cobol-modernization\t✓✓✓EE\tReadTimeout\t{','.join(errored)}\t2\n"
    as_json = CliRunner().invoke(tally_cli.cli, ["retry-targets", "--jobs-dir", str(JOBS), "--job-name", JOB, "--json"])
    assert [(t["task"], t["missing"]) for t in json.loads(as_json.output)["tasks"]] == [("cobol-modernization", 2)]


# --------------------------------------------------------------------------- attempts harbor retried in the run


def test_an_attempt_harbor_retried_in_the_run_is_a_trial_of_its_job_and_never_a_slot(tmp_path):
    """tools/results/retried.py keeps each attempt harbor retried (MAX_RETRIES) under .retried/<job>/<trial>.<id>:
    the tally reads it as one of the job's trials, never as a slot's, whatever its outcome would be
    (nothing is cherry-picked); a copy whose id is a trial's of the job is that trial, read once."""
    import shutil


    job = write_job(tmp_path / "jobs", "r", attempts("t", [P, F]), n_attempts=2, multiplier=1.0)
    # Two earlier attempts of the run's trials, written as harbor would have (another job dir), copied
    # beside the job: a SandboxError, and one scored 1.0 (a policy changed since might call it settled).
    other = write_job(tmp_path / "other", "r", attempts("t", ["infra", P], start=5), n_attempts=2, multiplier=1.0)
    kept = tally_jobs.retried_attempts_dir(job)
    for d in sorted(other.iterdir()):
        if d.is_dir():
            rid = json.loads((d / "result.json").read_text())["id"]
            shutil.copytree(d, kept / f"{d.name}.{rid}")
    # A copy of a trial still in the job (the last attempt, kept by a harbor stopped before its end).
    live = next(d for d in sorted(job.iterdir()) if d.is_dir())
    shutil.copytree(live, kept / f"{live.name}.{json.loads((live / 'result.json').read_text())['id']}")
    report = tally_core.tally([job], tally_policy.load_policy())
    [entry] = report["per_task"]
    assert report["trial_dirs"] == 4 and report["retried_in_run"] == 2
    assert sorted(entry["slot_trials"]) == sorted(str(d) for d in job.iterdir() if d.is_dir())
    assert [t["retried"] for t in entry["trials"]].count(True) == 2
    assert entry["slots"] == ["passed", "failed"] and entry["rerolled"] == []
    assert report["exceptions_all_trials"] == {"SandboxError": 1}
    # A .retried/<job> that is a symlink is never followed: refused, named, nothing of it counted.
    shutil.rmtree(kept)
    kept.symlink_to(other)
    report = tally_core.tally([job], tally_policy.load_policy())
    assert report["retried_in_run"] == 0 and report["unreadable"][0]["path"] == str(kept)


def test_an_attempt_harbor_retried_in_the_run_counts_in_no_infra_streak(tmp_path, policy):
    """MAX_TASK_RETRIES counts a trial once, whatever harbor retried inside the run: its in-run retries
    come at once, under the same load, so a short sandbox outage would otherwise make a final error of
    every task it touched before any mop-up pass. Here: one trial, errored after two in-run retries."""
    import shutil


    job = write_job(tmp_path / "jobs", "r", attempts("t", ["infra"], start=2), multiplier=1.0)
    other = write_job(tmp_path / "other", "r", attempts("t", ["infra", "infra"]), multiplier=1.0)
    for d in sorted(p for p in other.iterdir() if p.is_dir()):
        rid = json.loads((d / "result.json").read_text())["id"]
        shutil.copytree(d, tally_jobs.retried_attempts_dir(job) / f"{d.name}.{rid}")
    report = tally_core.tally([job], policy, max_task_retries=2)
    [entry] = report["per_task"]
    assert report["retried_in_run"] == 2 and report["exceptions_all_trials"] == {"SandboxError": 3}
    assert (entry["infra_streak"], entry["final_error"]) == (1, False)
    assert report["final_errors"] == [] and [t["task"] for t in tally_core.retry_targets(report)] == ["t"]
    # A second trial of it (a mop-up pass) that errs too makes it one: two attempts in a row.
    write_job(tmp_path / "jobs", "r-retry-1", attempts("t", ["infra"], start=3), multiplier=1.0)
    report = tally_core.tally(tally_jobs.run_job_dirs(tmp_path / "jobs", "r"), policy, max_task_retries=2)
    assert (report["per_task"][0]["infra_streak"], report["final_errors"]) == (2, ["t"])


def test_the_boards_other_figures_are_harbors_pass_at_j_the_mean_trial_duration_and_the_token_totals():
    """Over the slots' trials of the bundled complete k = 5 run (what its submission holds), counted here
    from its result.json files: pass@2, pass@4 and pass@5 with harbor's own k values and estimator, the
    mean started_at-to-finished_at of a trial, and the token totals."""
    from datetime import datetime

    from harbor.utils.pass_at_k import _eligible_k_values, _pass_at_k_for_task

    from tools.results import slots

    job = "example-leaderboard-complete-tb21"
    report = tally_core.tally(tally_jobs.run_job_dirs(JOBS, job), tally_policy.load_policy(), run="example-leaderboard-complete")
    board = report["leaderboard"]
    counted = [Path(d) for e in report["per_task"] for d in e["slot_trials"]]
    assert len(counted) == 30
    results = [json.loads((d / "result.json").read_text()) for d in counted]
    passed = {e["task"]: e["slots"].count("passed") for e in report["per_task"]}
    assert list(board["pass_at"]) == [str(j) for j in _eligible_k_values(5)] == ["2", "4", "5"]
    for j in (2, 4, 5):
        assert board["pass_at"][str(j)] == pytest.approx(sum(_pass_at_k_for_task(5, c, j) for c in passed.values()) / 6)
    assert board["pass_at"]["5"] == pytest.approx(4 / 6)  # 4 of the 6 tasks passed at least once

    def secs(r):
        return (datetime.fromisoformat(r["finished_at"]) - datetime.fromisoformat(r["started_at"])).total_seconds()
    assert board["mean_trial_secs"] == pytest.approx(sum(map(secs, results)) / 30, abs=0.05)
    assert board["trials_timed"] == board["slot_trials"] == 30
    assert board["tokens"] == {key: sum(r["agent_result"][f"n_{key}_tokens"] for r in results)
                               for key in ("input", "cache", "output")}
    assert slots.other_figures_line(board) == (
        f"The board's other figures, over the slots' trials: pass@2 {100 * board['pass_at']['2']:.2f}%, pass@4 "
        f"{100 * board['pass_at']['4']:.2f}%, pass@5 66.67% (harbor's estimator over the slots); mean trial duration "
        f"{board['mean_trial_secs'] / 60:.1f} min; tokens {board['tokens']['input']:,} in ({board['tokens']['cache']:,} "
        f"cached), {board['tokens']['output']:,} out")
    assert slots.other_figures_line(board) in slots.headline_lines(report)


# --- one rule in one place: the tally decides what settles a slot, every other verb reads it


def doctored(report: dict, fields: dict[str, tuple[int, list[tuple[bool, bool]]]]) -> dict:
    """The report with each named task's `open_slots` and its trials' (`settled`, `infra`) replaced,
    outcomes and rules left as they were: a consumer that re-derives the rule from those disagrees."""
    out = json.loads(json.dumps(report))
    for row in out["per_task"]:
        if row["task"] in fields:
            row["open_slots"], marks = fields[row["task"]]
            for trial, (settled, infra) in zip(row["trials"], marks, strict=True):
                trial.update(settled=settled, infra=infra)
            if "slot_trials" in row:
                row["slot_trials"] = [d for d in row["slot_trials"] if d][:len(row["slots"]) - row["open_slots"]] \
                    + [None] * row["open_slots"]
    return out


def test_every_consumer_follows_the_tallys_settled_infra_and_open_slots_not_the_outcome(tmp_path, policy,
                                                                                         monkeypatch):
    """k = 1: "p" passed, "i" an infra error, "u" never finished; the doctored report says the
    opposite (p's slot open, i's and u's closed). The retry targets, mop-up's plan, its text, the
    shard guard's settled trials and the watch's settled count all follow the fields."""
    from tools.mopup import mopup_plan
    from tools.run import shards
    from tools.results import tally_core
    from tools.run import watch

    jobs = tmp_path / "jobs"
    write_job(jobs, "w", [S("p", P, finished=10), S("i", None, "SandboxError", "Sandbox API error (503)", finished=20),
                          S("u", finished=None)])
    report = tally_core.tally(tally_jobs.run_job_dirs(jobs, "w"), policy)
    assert [t["task"] for t in tally_core.retry_targets(report)] == ["i", "u"]  # as the outcomes say
    fake = doctored(report, {"p": (1, [(False, True)]), "i": (0, [(True, False)]), "u": (0, [(True, False)])})
    monkeypatch.setattr(tally_core, "tally", lambda *a, **kw: fake)

    assert [(t["task"], t["missing"]) for t in tally_core.retry_targets(fake)] == [("p", 1)]
    assert list(mopup_plan.left_to_retry(fake, [])) == ["p"]
    r = CliRunner().invoke(tally_cli.cli, ["retry-targets", "--jobs-dir", str(jobs), "--job-name", "w"])
    assert r.exit_code == 0, r.output
    assert [line.split("\t")[0] for line in r.stdout.splitlines()] == ["p"]
    dirs = {e["task"]: e["trials"][0]["trial_dir"] for e in report["per_task"]}
    assert shards.settled_of(fake) == {"i": [dirs["i"]], "u": [dirs["u"]]}
    frame = watch.frame_of(watch_settings(jobs), now=None, tasks_hint=None, max_cost=None, max_infra_rate=1,
                           with_cost=False)
    assert (frame.total, frame.settled) == (3, 2)


def test_mopup_takes_a_k_run_s_dirs_and_error_from_the_trials_fields(tmp_path, policy, monkeypatch):
    """k = 2: "t" passed once, then an infra error. The doctored rows call the pass unsettled and the
    infra error settled: mop-up's dirs to move and the error it names, and the tally's retry-targets
    text, follow them."""
    from tools.mopup import mopup_plan
    from tools.results import tally_core

    jobs = tmp_path / "jobs"
    write_job(jobs, "w", attempts("t", [P, "infra"]), n_attempts=2)
    report = tally_core.tally(tally_jobs.run_job_dirs(jobs, "w"), policy)
    passed, infra = (t["trial_dir"] for t in report["per_task"][0]["trials"])
    fake = doctored(report, {"t": (1, [(False, False), (True, False)])})
    monkeypatch.setattr(tally_core, "tally", lambda *a, **kw: fake)

    left = mopup_plan.left_to_retry(fake, [])["t"]
    assert (left["trial_dirs"], left["exception_type"], left["missing"]) == ([passed], None, 1)
    r = CliRunner().invoke(tally_cli.cli, ["retry-targets", "--jobs-dir", str(jobs), "--job-name", "w"])
    assert r.exit_code == 0, r.output
    assert r.stdout.split("\t")[2:4] == ["-", passed]


def watch_settings(jobs: Path):
    from tools.results import report_load

    return report_load.RunSettings(run="w", jobs_dir=jobs, job_name="w", verdicts=None, state_dir=jobs.parent / "state",
                                   namespace="", project_label="terminal-bench-harness", call_timeout=5.0,
                                   prices_max_age=0.0, state_root=jobs.parent / "state")
