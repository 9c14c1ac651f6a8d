"""One ceiling per run (docs/cost.md §2): the run file's MAX_COST is make plan's figure for its
configuration, and make plan, make print and make reproduce's plan give that same figure; a
MAX_COST below the plan's median is refused unless ALLOW_LOW_CEILING=1, one below its p90 warned,
none at all said; make plan's page is a page; a run bound for the leaderboard says what it submits."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tools.money import plan_render

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def env(tmp_path):
    out = {k: v for k, v in os.environ.items() if k not in ("RUN", "DRY_RUN", "CLI_SETTINGS", "DEADLINE", "MAX_COST")}
    out["STATE_ROOT"] = str(tmp_path / "state")
    return out


def make(target: str, *args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-C", str(REPO), "--no-print-directory", target, *args], capture_output=True,
                          text=True, env=env, timeout=600)


def run_file_setting(run: str, name: str) -> str:
    return re.search(rf"^{name}=(\S*)", (REPO / "runs" / f"{run}.env").read_text(), re.M).group(1)


def test_the_run_file_s_max_cost_is_the_one_figure_plan_print_and_the_reproduce_plan_give(tmp_path, env):
    empty = f"JOBS_DIR={tmp_path / 'no-jobs'}"
    ceiling = run_file_setting("qwen-t2", "MAX_COST")
    doc = json.loads(make("plan", "RUN=qwen-t2", "JSON=1", empty, env=env).stdout)
    own = doc["own"]
    assert (own["profile"], own["shards"], own["n_concurrent"]) == ("qwen3.8-27b-fp8-sglang-h200", 1, 3)
    assert str(own["max_cost"]) == ceiling == str(plan_render.ceiling_of(own["usd_p90"]))
    words = f"MAX_COST={ceiling} (make plan's figure for this configuration: MAX_COST={ceiling})"
    page = make("plan", "RUN=qwen-t2", empty, env=env).stdout.splitlines()
    configured = next(x for x in page if x.startswith("this run as configured: "))
    assert configured.endswith(f"; {words}")
    printed = make("print", "RUN=qwen-t2", empty, env=env)
    assert printed.returncode == 0, printed.stderr
    assert f"# spending ceiling: MAX_COST={ceiling} USD for the whole run (make cost RUN=qwen-t2); " in printed.stdout
    assert f"\n# {words}\n" in printed.stdout
    assert f"(MAX_COST={ceiling} covers it with 20% to spare)" in printed.stdout
    dry = make("reproduce", "RUN=qwen-t2", "DRY_RUN=1", empty, env=env)
    assert dry.returncode == 0, dry.stderr
    assert f"ceiling  {words}" in dry.stdout.splitlines()
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize(("p90", "need", "figure"), [
    (3000.0, 3600, "1h"),      # 20% over exactly one hour
    (3000.04, 3600, "1h"),     # the plan's p90 is rounded to a tenth of a second first, as its row shows it
    (3000.1, 3601, "2h"),      # a second over: the next whole hour
    (66944.3, 80334, "23h"),   # qwen-mswea's and qwen-claude-code's
])
def test_the_server_timeout_figure_is_the_p90_with_the_ceiling_s_margin_in_whole_hours(p90, need, figure):
    assert plan_render.server_timeout_of(p90) == (need, figure)


def test_a_short_server_timeout_is_warned_with_the_plan_s_figure_the_run_files_hold(tmp_path, env):
    """make plan's row carries the SERVER_TIMEOUT it gives the configuration; a shorter one than its
    p90 is warned naming that figure, and benchmarks/plan_estimates.py holds the run files to it."""
    empty = f"JOBS_DIR={tmp_path / 'no-jobs'}"
    own = json.loads(make("plan", "RUN=qwen-mswea", "JSON=1", empty, env=env).stdout)["own"]
    assert (own["server_timeout_need_secs"], own["server_timeout"]) == plan_render.server_timeout_of(
        own["wall_clock_p90_secs"])
    assert own["server_timeout"] == run_file_setting("qwen-mswea", "SERVER_TIMEOUT")
    short = make("print", "RUN=qwen-mswea", "SERVER_TIMEOUT=1h", empty, env=env)
    assert short.returncode == 0, short.stderr
    assert (f"is shorter than the run may need: make plan's p90 for it is {int(own['wall_clock_p90_secs'])} s"
            in short.stderr)
    assert (f"Raise SERVER_TIMEOUT to make plan's figure for it, SERVER_TIMEOUT={own['server_timeout']} (its p90 + 20%; "
            in short.stderr)
    assert "is shorter than" not in make("print", "RUN=qwen-mswea", empty, env=env).stderr


def test_a_ceiling_below_the_median_is_refused_unless_kept_and_one_below_p90_is_warned(tmp_path, env):
    empty = f"JOBS_DIR={tmp_path / 'no-jobs'}"
    own = json.loads(make("plan", "RUN=qwen-t2", "JSON=1", empty, env=env).stdout)["own"]
    low = int(own["usd_median"] * 0.6)
    refused = make("reproduce", "RUN=qwen-t2", f"MAX_COST={low}", "DRY_RUN=1", empty, env=env)
    assert refused.returncode == 2  # make's, for a recipe that exited 1
    assert refused.stderr.splitlines()[:-1] == [
        f"reproduce: MAX_COST={low} is below the median spend ${own['usd_median']:,.0f}: the run would likely stop at it "
        f"(exit 75, and each resume reloads the server); make plan's figure is MAX_COST={own['max_cost']}. Raise "
        f"MAX_COST (in runs/qwen-t2.env, or MAX_COST=<usd> on the command line), or keep it with ALLOW_LOW_CEILING=1"]
    assert refused.stdout == "" and not (tmp_path / "state").exists()
    kept = make("reproduce", "RUN=qwen-t2", f"MAX_COST={low}", "ALLOW_LOW_CEILING=1", "DRY_RUN=1", empty, env=env)
    assert kept.returncode == 0, kept.stderr
    assert f"(kept: ALLOW_LOW_CEILING=1)" in kept.stderr
    between = (own["usd_median"] + own["usd_p90"]) / 2
    warned = make("reproduce", "RUN=qwen-t2", f"MAX_COST={between:.2f}", "DRY_RUN=1", empty, env=env)
    assert warned.returncode == 0, warned.stderr
    assert (f"MAX_COST={between:.2f} is below the p90 spend ${own['usd_p90']:,.0f}: one run in ten or more stops at it; "
            f"make plan's figure is MAX_COST={own['max_cost']}") in warned.stderr
    # The print shows the refusal it would meet, and refuses nothing itself.
    printed = make("print", "RUN=qwen-t2", f"MAX_COST={low}", empty, env=env)
    assert printed.returncode == 0, printed.stderr
    assert "# make reproduce refuses it: raise MAX_COST, or keep it with ALLOW_LOW_CEILING=1" in printed.stdout


def test_a_run_without_a_ceiling_says_so_in_every_plan_of_it(tmp_path, env):
    empty = f"JOBS_DIR={tmp_path / 'no-jobs'}"
    own = json.loads(make("plan", "RUN=qwen-t2", "JSON=1", "MAX_COST=", empty, env=env).stdout)["own"]
    words = f"no spending ceiling: MAX_COST is unset (make plan's figure for this configuration: MAX_COST={own['max_cost']})"
    page = make("plan", "RUN=qwen-t2", "MAX_COST=", empty, env=env).stdout
    assert page.count(words) == 1
    printed = make("print", "RUN=qwen-t2", "MAX_COST=", empty, env=env).stdout
    assert f"\n# {words}\n" in printed
    dry = make("reproduce", "RUN=qwen-t2", "MAX_COST=", "DRY_RUN=1", empty, env=env)
    assert dry.returncode == 0, dry.stderr
    assert f"ceiling  {words}" in dry.stdout.splitlines()
    assert f"reproduce: note: {words}" in dry.stderr.splitlines()


def test_make_plan_without_a_deadline_is_a_page_cheapest_first_and_all_1_shows_every_row(tmp_path, env):
    empty = f"JOBS_DIR={tmp_path / 'no-jobs'}"
    page = make("plan", "RUN=qwen-t2", empty, env=env).stdout.splitlines()
    assert len(page) <= 40, "\n".join(page)
    doc = json.loads(make("plan", "RUN=qwen-t2", "JSON=1", empty, env=env).stdout)
    rows = [x for x in page if x.startswith("| qwen3")]
    dollars = [float(x.split(" | ")[12].lstrip("$").replace(",", "")) for x in rows]
    assert dollars == sorted(dollars) and len(rows) < len(doc["configurations"])
    hidden = len(doc["configurations"]) - len(rows)
    assert f"(cheapest first; {hidden} more configurations: ALL=1 shows every one)" in page
    # Every server shows its cheapest, and the fastest within the infra ceiling is there.
    assert {x.split(" | ")[0].lstrip("| ") for x in rows} == {r["profile"] for r in doc["configurations"]}
    fit = [r for r in doc["configurations"] if r["infra_rate"] <= doc["infra_ceiling"]]
    fastest = min(fit, key=lambda r: (r["wall_clock_p90_secs"], r["usd_median"]))
    assert any(x.startswith(f"| {fastest['profile']} |") and f"| {fastest['shards']} × {fastest['n_concurrent']} |" in x
               for x in rows)
    every = make("plan", "RUN=qwen-t2", "ALL=1", empty, env=env).stdout.splitlines()
    assert len([x for x in every if x.startswith("| qwen3")]) == len(doc["configurations"])
    assert not any("ALL=1 shows" in x for x in every)


def test_a_run_bound_for_the_leaderboard_says_what_it_submits_and_what_is_unverified(tmp_path, env):
    empty = f"JOBS_DIR={tmp_path / 'no-jobs'}"
    words = ("leaderboard: it submits each task's 5 settled trials, 445 in all, from one harbor job; in-run retries "
             "(MAX_RETRIES=2) and mop-up in place keep it one job id; a mop-up pass harbor cannot run in place adds a "
             "retry job (<job>-retry-N), and its id. Checked before upload: the board's rules (timeout multiplier 1, no "
             "overrides, ATIF trajectories: make submission). Unverified until harbor ships its leaderboard submit "
             "(0.26.0 has none): whether the board takes a submission of several job ids")
    page = make("plan", "RUN=qwen-t2-leaderboard", "PLAN_REPS=20", empty, env=env).stdout
    assert f"\n{words}\n" in page
    printed = make("print", "RUN=qwen-t2-leaderboard", "PLAN_REPS=20", empty, env=env).stdout
    assert f"\n# {words}\n" in printed
    dry = make("reproduce", "RUN=qwen-t2-leaderboard", "PLAN_REPS=20", "ALLOW_LOW_CEILING=1", "DRY_RUN=1", empty, env=env)
    assert dry.returncode == 0, dry.stderr
    assert f"submission {words}" in dry.stdout.splitlines()
    # Sharded, it says the jobs are several; a k = 1 run says nothing of the board.
    sharded = make("print", "RUN=qwen-t2-leaderboard", "N_SHARDS=2", "PLAN_REPS=20", empty, env=env).stdout
    assert ("from 2 harbor jobs (one a shard: several job ids, unverified below; N_SHARDS=1 keeps one)") in sharded
    assert "leaderboard: it submits" not in make("print", "RUN=qwen-t2", "PLAN_REPS=20", empty, env=env).stdout


def test_a_leaderboard_run_is_recommended_one_job(tmp_path, env):
    """Several job ids are not known to be accepted: the plan recommends one-shard rows only for a
    k >= 5 run, and may recommend shards otherwise."""
    empty = f"JOBS_DIR={tmp_path / 'no-jobs'}"
    doc = json.loads(make("plan", "RUN=qwen-t2-leaderboard", "DEADLINE=12h", "PLAN_REPS=20", "JSON=1", empty,
                          env=env).stdout)
    assert doc["recommendation"]["row"]["shards"] == 1
    sharded = [r for r in doc["configurations"] if r["shards"] > 1]
    assert sharded and min(r["wall_clock_p90_secs"] for r in sharded) < doc["recommendation"]["row"]["wall_clock_p90_secs"]


def test_the_plan_against_the_reference_s_recorded_times(tmp_path, env):
    """With no job dirs, make plan against the two lengths the reference recorded (docs/plan.md §5),
    each within ±30%, the server's loading (READY_TIMEOUT, an upper bound) left out as the reference's
    figures leave it out. Run 2's ~13 h (89 tasks at -n 3 on one L40S) is a check only: no fit uses
    its length (its 3 timeouts of 89 and its infra rate are what is fitted). The TB3 smoke's 3 h 06 min
    is the record its plan is made from (plan_evidence.RECORDED_TASK_SECS), so its row repeats it
    rather than checking it; before, the dataset-wide fit planned that 7 h expert task at 0.4 h."""
    empty = f"JOBS_DIR={tmp_path / 'no-jobs'}"

    def bench_hours(run: str) -> tuple[float, dict]:
        doc = json.loads(make("plan", f"RUN={run}", "JSON=1", empty, env=env).stdout)
        return (doc["own"]["wall_clock_median_secs"] - doc["loading_secs"]) / 3600, doc

    run2, doc2 = bench_hours("gptoss-t2")
    assert doc2["recorded_task_secs"] is None and doc2["evidence"]["reference_run"] == "Run 2"
    assert 13 * 0.7 <= run2 <= 13 * 1.3, run2
    smoke, doc = bench_hours("qwen-tb3-smoke")
    assert doc["recorded_task_secs"] == 3 * 3600 + 6 * 60
    assert 3.1 * 0.7 <= smoke <= 3.1 * 1.3, smoke
    # Another task, or another agent, on the same model has no record: the dataset-wide fit.
    other = json.loads(make("plan", "RUN=qwen-tb3-smoke", "TASKS=another-task", "JSON=1", empty, env=env).stdout)
    assert other["recorded_task_secs"] is None and other["own"]["wall_clock_median_secs"] < doc["own"]["wall_clock_median_secs"]
