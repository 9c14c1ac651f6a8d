"""tools/report/report.py with k > 1 attempts per task, and dollars in compare and the report.

Job dirs are written with harbor's own models (test_report.write_job) and tallied by the tally's
library; every expected figure (fractions, the paired bootstrap, the cost) is computed here from
the trials' rewards or the recorded hf answers, not read back from the code under test.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import statistics
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from test_report import write_job

from tests.fixtures import hostile
from tools import safe_read

from tools.report import report
from tools.report import report_cost
from tools.report import report_html
from tools.results import report_load
from tools.results import report_stats
from tools.report import report_text
from tools.results import tally_core
from tools.results import tally_policy

REPO = Path(__file__).resolve().parent.parent

P, F = (1.0, None), (0.0, None)
INFRA = (None, "SandboxError")
# Five attempts per task, oldest first. Expected slots: an infra error never fills a slot.
A = {"t1": [P, P, P, P, P], "t2": [P, F, P, F, F], "t3": [F, F, F, F, F], "t4": [P, INFRA, P, F, P],
     "t5": [INFRA] * 5}
B = {"t1": [P, P, P, F, P], "t2": [P, P, P, P, F], "t3": [F, F, P, F, F], "t4": [P, P, P, P, P],
     "t5": [P, F, F, F, F]}
C = {"t1": [P], "t2": [F], "t3": [(0.0, "AgentTimeoutError")], "t4": [INFRA], "t5": [P]}


def fraction(trials: list) -> float | None:
    scored = [r for r, exc in trials if exc != "SandboxError"]
    return sum(1 for r in scored if r == 1.0) / len(scored) if scored else None


def bootstrap(values: list[float], resamples: int = 10_000) -> tuple[float, float]:
    """The percentile interval of the mean, resampling tasks: numpy's default_rng(0), one draw of
    n task indices per resample (10,000 unless told), as tools/results/slots.py's doc defines it."""
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(0)
    means = [data[rng.integers(0, len(data), size=len(data))].mean() for _ in range(resamples)]
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


@pytest.fixture(scope="module")
def tallies(tmp_path_factory) -> dict[str, Path]:
    """Tally JSON files of runs A, B (k = 5) and C (k = 1) over the same five tasks."""
    root = tmp_path_factory.mktemp("slots")
    out = {}
    for name, trials, k in (("A", A, 5), ("B", B, 5), ("C", C, 1)):
        job = write_job(root / "jobs", name, "terminus-2", trials, multiplier=1.0)
        doc = tally_core.tally([job], tally_policy.load_policy(), attempts=k, run=name)
        out[name] = root / f"{name}.json"
        out[name].write_text(json.dumps(doc))
    return out


def compare(tallies, *names) -> dict:
    return report_stats.compare([report_load.load_tally_file(tallies[n]) for n in names])


def cells(cmp: dict) -> dict[str, list[str]]:
    return {row["task"]: [report_text.cell_text(c) for c in row["cells"]] for row in cmp["matrix"]}


def test_k5_vs_k5_matrix_shows_each_tasks_pass_fraction(tallies):
    cmp = compare(tallies, "A", "B")
    assert cmp["attempts_mode"] is True and cmp["flips"] == []
    assert cells(cmp) == {
        "t1": ["5/5 ✓✓✓✓✓", "4/5 ✓✓✓✗✓"],
        "t2": ["2/5 ✓✗✓✗✗", "4/5 ✓✓✓✓✗"],
        "t3": ["0/5 ✗✗✗✗✗", "1/5 ✗✗✓✗✗"],
        "t4": ["3/4 ✓✓✗✓E", "5/5 ✓✓✓✓✓"],  # the infra attempt leaves an errored slot
        "t5": ["n/a EEEEE", "1/5 ✓✗✗✗✗"],
    }
    assert cmp["disagreements"] == 5
    runs = {r["run"]: r for r in cmp["runs"]}
    expected_a = [fraction(A[t]) for t in sorted(A) if fraction(A[t]) is not None]
    assert runs["A"]["mean_task_pass_fraction"] == pytest.approx(sum(expected_a) / len(expected_a))
    assert (runs["A"]["passed"], runs["A"]["scored"], runs["A"]["errored"]) == (10, 19, 6)
    low, high = bootstrap(expected_a)
    assert runs["A"]["bootstrap95"]["low"] == pytest.approx(low) and runs["A"]["bootstrap95"]["high"] == pytest.approx(high)


def test_paired_bootstrap_over_tasks_k5_vs_k5(tallies):
    (p,) = compare(tallies, "A", "B")["paired"]
    both = [t for t in sorted(A) if fraction(A[t]) is not None and fraction(B[t]) is not None]
    diffs = [fraction(A[t]) - fraction(B[t]) for t in both]
    assert diffs == pytest.approx([0.2, -0.4, -0.2, -0.25])
    low, high = bootstrap(diffs)
    assert p == {"a": "A", "b": "B", "tasks_compared": 4, "a_higher": 1, "b_higher": 3, "equal": 0,
                 "not_comparable": 1, "mean_difference": pytest.approx(-0.1625),
                 "bootstrap95": {"low": pytest.approx(low), "high": pytest.approx(high), "resamples": 10_000,
                                 "seed": 0, "method": "paired percentile bootstrap over tasks"}}
    md = report_text.compare_markdown(compare(tallies, "A", "B"))
    mean = 100 * sum(diffs) / len(diffs)  # -16.25, less a rounding error: shown -16.3
    assert f"| A | B | 4 | 1 | 3 | 0 | 1 | {mean:+.1f} pp | {100 * low:+.1f} pp to {100 * high:+.1f} pp |" in md.splitlines()


def test_k5_vs_k1_the_k1_run_reads_as_one_slot_per_task(tallies):
    cmp = compare(tallies, "A", "C")
    assert cells(cmp) == {
        "t1": ["5/5 ✓✓✓✓✓", "1/1 ✓"], "t2": ["2/5 ✓✗✓✗✗", "0/1 ✗"], "t3": ["0/5 ✗✗✗✗✗", "0/1 ✗"],
        "t4": ["3/4 ✓✓✗✓E", "n/a E"], "t5": ["n/a EEEEE", "1/1 ✓"]}
    assert [r["task"] for r in cmp["matrix"]] == ["t2", "t4", "t5", "t1", "t3"]  # differing first
    (p,) = cmp["paired"]
    diffs = [1 - 1, 0.4 - 0, 0 - 0]  # t1, t2, t3: scored in both
    low, high = bootstrap(diffs)
    assert (p["tasks_compared"], p["a_higher"], p["b_higher"], p["equal"], p["not_comparable"]) == (3, 1, 0, 2, 2)
    assert p["mean_difference"] == pytest.approx(0.4 / 3)
    assert (p["bootstrap95"]["low"], p["bootstrap95"]["high"]) == (pytest.approx(low), pytest.approx(high))
    c = next(r for r in cmp["runs"] if r["run"] == "C")
    assert c["n_attempts"] == 1 and c["bootstrap95"] is None and c["mean_task_pass_fraction"] == pytest.approx(2 / 4)


def test_captions_state_each_runs_k_and_accounting(tallies):
    md = report_text.compare_markdown(compare(tallies, "A", "C"))
    assert ("Runs: A: k = 5, timeouts-scored (the headline is the board's rate, passed / (tasks × k), with its 95% CI "
            "from the replicates; * while slots are open); C: k = 1, timeouts-scored (passed / scored tasks, Wilson "
            "95% CI).") in md
    assert ("| Run | Agent | k | Headline: leaderboard rate (passed / tasks × k) | Its 95% CI (replicates) | Mean task "
            "pass fraction (not the headline) | Its 95% CI |") in md
    lines = md.splitlines()
    a_row = next(line for line in lines if line.startswith("| A | terminus-2 |"))
    fr = [fraction(A[t]) for t in sorted(A) if fraction(A[t]) is not None]
    low, high = bootstrap(fr)
    # The board's figure first: passed slots over tasks × k (10 of 25), its interval from the 5
    # replicates (replicate j: tasks passed in slot j, of all 5), t(0.975, 4) = 2.776.
    slots = [cell.split(" ")[1] for cell, _ in cells(compare(tallies, "A", "C")).values()]
    assert sum(s.count("✓") for s in slots) == 10
    reps = [sum(s[j] == "✓" for s in slots) / 5 for j in range(5)]
    assert reps == [3 / 5, 2 / 5, 2 / 5, 2 / 5, 1 / 5]
    half = 2.776 * statistics.stdev(reps) / math.sqrt(5)
    assert a_row.startswith(f"| A | terminus-2 | 5 | 40.0% (10/25) (provisional: 6 open) | "
                            f"{100 * (0.4 - half):.1f}–{100 * (0.4 + half):.1f}% | {100 * sum(fr) / len(fr):.1f}% | "
                            f"{100 * low:.1f}–{100 * high:.1f}% (bootstrap) | 10/19 | ")
    assert "| C | terminus-2 | 1 | n/a | n/a | 50.0% | 15.0–85.0% (Wilson) | 2/4 | n/a | 1 |" in md
    assert "### Per-task pass fractions (3 of 5 tasks differ, listed first, marked ≠)" in md  # t2, t4, t5
    assert "| ≠ t4 | 3/4 ✓✓✗✓E | n/a E |" in lines
    section = report_text.results_markdown(compare(tallies, "A", "C"))
    assert "| Outcome | Attempts | % of 25 (5 tasks × 5) |" in section
    assert ("k = 5 attempts per task. Leaderboard resolution rate (passed / tasks × k, as the board counts): "
            "**40.0%** (10/25), 95% CI ") in section
    assert "PROVISIONAL: 6 of 25 slots are open (not passed until mop-up fills them)." in section
    assert "Not the headline: the mean over tasks of each task's pass fraction, 53.8%, its own 95% CI " in section


def test_the_outcome_picture_shows_each_runs_headline_with_its_own_interval(tallies):
    """Beside the board's rate of a k = 5 run, the replicates' interval (the headline's), never the
    bootstrap of another figure; beside a k = 1 run's pass rate, Wilson's. Values computed here."""
    cmp = compare(tallies, "A", "C")
    slots = [cell.split(" ")[1] for cell, _ in cells(cmp).values()]
    reps = [sum(s[j] == "✓" for s in slots) / 5 for j in range(5)]
    value = sum(s.count("✓") for s in slots) / 25
    half = 2.776 * statistics.stdev(reps) / math.sqrt(5)
    fig = report_html.outcome_bar_figure(cmp)
    texts = [t.get_text() for t in fig.axes[0].texts if "95% CI" in t.get_text()]
    assert texts[0] == (f"k = 5: {100 * value:.1f}% (board) *\n95% CI "
                        f"{100 * (value - half):.1f}–{100 * (value + half):.1f}%")
    # C: 2 of 4 scored, Wilson's interval.
    z = 1.959963984540054
    centre, spread = (0.5 + z * z / 8) / (1 + z * z / 4), z / (1 + z * z / 4) * math.sqrt(0.25 / 4 + z * z / 64)
    assert texts[1] == f"k = 1: 50.0%\n95% CI {100 * (centre - spread):.1f}–{100 * (centre + spread):.1f}%"


def test_html_and_pictures_at_k5(tallies, tmp_path):
    out = tmp_path / "r.html"
    result = CliRunner().invoke(report.cli, ["html", str(tallies["A"]), str(tallies["B"]), "-o", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert page.count('<td class="fraction"') == 9 and page.count('<td class="errored fraction"') == 1
    assert "<h2>Paired comparison (per-task pass fractions, paired bootstrap over tasks)</h2>" in page
    assert 'id="fig-cost"' not in page  # no run has a cost: a tally file names no run
    svg = report_html.render_figures(compare(tallies, "A", "B"))["heatmap.svg"].decode()
    assert len(re.findall(r'id="cell-\d-t\d"', svg)) == 10


# --- dollars -------------------------------------------------------------------------------------


def recorded_total(recording: Path, jobs_recorded: int = 17) -> float:
    """What a bundled example cost, from the recorded hf answers: every inspected job and every
    listed sandbox, running_secs × (its flavor's price + the exposed-port price when it exposes one)."""
    calls = json.loads(recording.read_text())["calls"]
    price = {row["name"]: float(row["cost/hour"].lstrip("$")) for row in calls["jobs hardware --json"]}
    port = 0.01  # env/flavor-prices.tsv exposed-ports
    jobs = [rows[0] for key, rows in calls.items() if key.startswith("jobs inspect")]
    jobs += calls["jobs ps -a --json --limit 0 -l hf-sandbox=1 --namespace alice"]
    assert len(jobs) == jobs_recorded
    return sum(j["durations"]["running_secs"] / 3600 * (price[j["flavor"]] + (port if j.get("expose") else 0))
               for j in jobs)


EXAMPLE_STATE = REPO / "examples" / "state" / "example-terminus2"
MSWEA_STATE = REPO / "examples" / "state" / "example-mswea"
MSWEA_JOBS = 15  # its server, its remote bench job and its 13 sandboxes (examples/make_example_cost.py)


def test_compare_shows_the_bundled_examples_dollars(monkeypatch, tmp_path):
    monkeypatch.chdir(REPO)
    total = recorded_total(EXAMPLE_STATE / "hf-recorded.json")
    other = recorded_total(MSWEA_STATE / "hf-recorded.json", MSWEA_JOBS)
    result = CliRunner().invoke(report.cli, ["compare", "example-terminus2", "example-mswea", "--format", "json"])
    assert result.exit_code == 0, result.output
    t2, mswea = json.loads(result.output)["runs"]
    assert t2["cost"]["known"] and t2["cost"]["total_usd"] == pytest.approx(total, abs=1e-5)
    assert t2["cost"]["usd_per_pass"] == pytest.approx(total / 4, abs=1e-5)  # 4 passed tasks
    assert t2["cost"]["price_source"] == "recorded"
    assert mswea["cost"]["known"] and mswea["cost"]["total_usd"] == pytest.approx(other, abs=1e-5)
    assert mswea["cost"]["usd_per_pass"] == pytest.approx(other / 5, abs=1e-5)  # 5 passed tasks
    md = CliRunner().invoke(report.cli, ["compare", "example-terminus2", "example-mswea"]).output
    assert f"| 1.08 | ${total:,.2f} | ${total / 4:,.2f} |" in md
    assert f"| 1.00 | ${other:,.2f} | ${other / 5:,.2f} |" in md
    assert ("- example-terminus2-tb21: $45.92; prices: hf jobs hardware, recorded 2026-09-04T09:10:00Z: "
            "examples/state/example-terminus2/hf-recorded.json.") in md
    # An example with no recording: its cost is unknown, said in one line, and the comparison goes on.
    from tools.report import report_cost
    monkeypatch.setattr(report_cost, "EXAMPLES_STATE", tmp_path)
    md = CliRunner().invoke(report.cli, ["compare", "example-terminus2", "example-mswea"]).output
    assert "| 1.00 | n/a | n/a |" in md
    assert (f"- example-mswea-tb21: cost unknown: a bundled example with no recorded jobs "
            f"({tmp_path / 'example-mswea' / 'manifest.jsonl'} does not exist)") in md


def test_results_section_states_the_cost(monkeypatch):
    monkeypatch.chdir(REPO)
    cmp = report.comparison_of(["example-terminus2", "example-mswea"], False)
    section = report_text.results_markdown(cmp)
    total = recorded_total(EXAMPLE_STATE / "hf-recorded.json")
    other = recorded_total(MSWEA_STATE / "hf-recorded.json", MSWEA_JOBS)
    assert f" Cost: **${total:,.2f}** (${total / 4:,.2f} per passed task; prices: hf jobs hardware" in section
    assert f" Cost: **${other:,.2f}** (${other / 5:,.2f} per passed task; prices: hf jobs hardware" in section


def test_at_k_5_the_reports_dollars_per_pass_are_per_passed_attempt(monkeypatch):
    """make cost's usd_per_passed_task counts tasks (4 of the k = 5 example's 6 have a passed attempt);
    the report's $ / pass stays per passed attempt (13 of 30), and says so."""
    monkeypatch.chdir(REPO)
    cmp = report.comparison_of(["example-leaderboard"], False)
    cost = cmp["runs"][0]["cost"]
    assert cost["known"] and cost["usd_per_pass"] == pytest.approx(cost["total_usd"] / 13, abs=1e-5)
    assert (f" Cost: **${cost['total_usd']:,.2f}** (${cost['total_usd'] / 13:,.2f} per passed attempt; prices: "
            in report_text.results_markdown(cmp))


def test_pass_rate_against_dollars_picture_with_two_costed_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    # A second priced run: the same recording with the H200 at $2.50/h.
    cheap = tmp_path / "cheap"
    shutil.copytree(EXAMPLE_STATE, cheap)
    doc = json.loads((cheap / "hf-recorded.json").read_text())
    for row in doc["calls"]["jobs hardware --json"]:
        if row["name"] == "h200":
            row["cost/hour"] = "$2.50"
    (cheap / "hf-recorded.json").write_text(json.dumps(doc))
    settings = report_load.run_settings("example-terminus2")
    tally = report_load.run_tally(settings.jobs_dir, settings.job_name, False, "run example-terminus2")
    other = {**tally, "run": "example-terminus2-cheap"}
    cmp = report_stats.compare([tally, other])
    cmp["runs"][0]["cost"] = report_cost.run_cost(settings, tally)
    cmp["runs"][1]["cost"] = report_cost.run_cost(settings, other, cheap, cheap / "hf-recorded.json")
    full, low = recorded_total(EXAMPLE_STATE / "hf-recorded.json"), recorded_total(cheap / "hf-recorded.json")
    assert full - low == pytest.approx((28800 + 3960) / 3600 * (5.00 - 2.50))
    assert [r["cost"]["total_usd"] for r in cmp["runs"]] == [pytest.approx(full, abs=1e-5), pytest.approx(low, abs=1e-5)]
    svg = report_html.cost_figure_svg(cmp).decode()
    assert 'id="point-0"' in svg and 'id="point-1"' in svg
    page = report_html.html_report(cmp, {**report_html.render_figures(cmp), "cost.svg": svg.encode()})
    assert 'id="fig-cost"' in page and f"${low:,.2f}" in page and f"${full:,.2f}" in page
    cmp["runs"][1]["cost"] = {"known": False, "why": "x"}
    assert report_html.cost_figure_svg(cmp) is None  # one costed run: no picture


def test_the_report_never_rewrites_a_stale_price_cache(tmp_path):
    import dataclasses
    settings = dataclasses.replace(report_load.run_settings("example-terminus2"), state_root=tmp_path,
                                   prices_max_age=100.0)
    cache = tmp_path / "prices.json"
    cache.write_text(json.dumps({"read_epoch": 1000.0, "prices": {}}))
    from tools.report.report_cost import fresh_cache
    assert fresh_cache(settings, now=1050.0) == cache
    assert fresh_cache(settings, now=1101.0) is None  # stale: cost.py is given no cache to write


@pytest.mark.parametrize("kind", hostile.KINDS)
def test_a_manifest_that_cannot_be_read_is_named_never_taken_for_no_launch(tmp_path, monkeypatch, kind):
    """A FIFO, a directory or an oversized file at manifest.jsonl: the cost is unknown and says why
    (read within its cap, never opened if not a regular file), not "no job was launched"."""
    monkeypatch.chdir(REPO)
    state = tmp_path / "state"
    shutil.copytree(EXAMPLE_STATE, state)
    (state / "manifest.jsonl").unlink()
    reason = hostile.make(state / "manifest.jsonl", kind, safe_read.MANIFEST_CAP, "a run's manifest.jsonl")
    settings = report_load.run_settings("example-terminus2")
    tally = report_load.run_tally(settings.jobs_dir, settings.job_name, False, "run example-terminus2")
    cost = report_cost.run_cost(settings, tally, state, state / "hf-recorded.json")
    assert cost["known"] is False
    assert cost["why"] == (f"cannot read {state / 'manifest.jsonl'} ({reason}): it lists every job the run launched, "
                           "so nothing is counted without it; put the run's own manifest back")
