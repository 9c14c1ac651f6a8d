"""make plan (tools/plan.py): the simulation on hand-computed cases, its determinism, p(L)'s fit,
its prices, and the verb end to end (offline, writing nothing)."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from tools import plan

REPO = Path(__file__).resolve().parent.parent
F = plan.INFRA_DURATION_FRACTION


def never(_pass, load):
    return np.zeros_like(load, dtype=float)


def run(pool, tasks, k=1, shards=1, slots=1, replicas=1, infra=never, reps=3, seed=0, **kw):
    return plan.simulate(np.array(pool, dtype=float), tasks, k, shards, slots, replicas, infra, reps,
                         np.random.default_rng(seed), **kw)


# --------------------------------------------------------------------------- the simulation, by hand


def test_six_ten_minute_attempts_two_at_a_time_take_thirty_minutes():
    out = run([600], tasks=6, slots=2)
    assert out.makespan.tolist() == [1800.0] * 3          # 3 rounds of 2 × 10 min
    assert out.sandbox_secs.tolist() == [3600.0] * 3       # 6 × 10 min of sandbox
    assert out.mopups.tolist() == [0] * 3 and out.left.tolist() == [0] * 3
    # tasks × k: 3 tasks × 2 attempts are the same six; seven need a fourth round.
    assert run([600], tasks=3, k=2, slots=2).makespan.tolist() == [1800.0] * 3
    assert run([600], tasks=7, slots=2).makespan.tolist() == [2400.0] * 3


def test_shards_split_the_tasks_and_the_pass_ends_with_the_slowest_shard():
    # Tasks 0 and 2 in shard 0 (one slot: 2 × 10 min), task 1 in shard 1: 20 min.
    assert run([600], tasks=3, shards=2, slots=1).makespan.tolist() == [1200.0] * 3
    # Six tasks over three shards of one slot each: 2 rounds.
    assert run([600], tasks=6, shards=3, slots=1).makespan.tolist() == [1200.0] * 3


def test_infra_errors_on_the_first_pass_cost_a_fraction_then_one_mop_up_pass():
    first_only = lambda pass_no, load: np.full_like(load, 1.0 if pass_no == 0 else 0.0, dtype=float)  # noqa: E731
    out = run([600], tasks=6, slots=2, infra=first_only)
    # Pass 1: 6 attempts of F × 10 min, 2 at a time (3 rounds); the mop-up: 6 × 10 min (3 rounds).
    assert out.makespan == pytest.approx([3 * 600 * F + 3 * 600] * 3)
    assert out.sandbox_secs == pytest.approx([6 * 600 * F + 6 * 600] * 3)
    assert out.mopups.tolist() == [1] * 3 and out.left.tolist() == [0] * 3
    two = lambda pass_no, load: np.full_like(load, 1.0 if pass_no < 2 else 0.0, dtype=float)  # noqa: E731
    assert run([600], tasks=6, slots=2, infra=two).mopups.tolist() == [2] * 3
    always = lambda pass_no, load: np.ones_like(load, dtype=float)  # noqa: E731
    stuck = run([600], tasks=6, slots=2, infra=always, max_mopups=4)
    assert stuck.mopups.tolist() == [4] * 3 and stuck.left.tolist() == [6] * 3


def test_in_run_retries_try_an_errored_attempt_again_in_its_slot_before_any_mop_up():
    # MAX_RETRIES=2 and no infra error: nothing changes.
    assert run([600], tasks=6, slots=2, in_run_retries=2).makespan.tolist() == [1800.0] * 3
    # An attempt that errs on every try takes 1 + MAX_RETRIES errored tries, then waits for mop-up.
    always = lambda pass_no, load: np.ones_like(load, dtype=float)  # noqa: E731
    stuck = run([600], tasks=6, slots=2, infra=always, in_run_retries=2, max_mopups=1)
    assert stuck.makespan == pytest.approx([2 * 3 * 3 * 600 * F] * 3)  # two passes of 3 rounds of 3 tries
    assert stuck.left.tolist() == [6] * 3 and stuck.mopups.tolist() == [1] * 3


def test_no_in_run_retries_draw_as_before_and_retries_leave_fewer_attempts_to_mop_up():
    # The reference's ~36% infra rate at -n 3: with MAX_RETRIES=0 the draws are the ones the model always
    # made (the same seed gives the same run); with 2, an attempt waits for mop-up only after 3 errored tries.
    rate = lambda _pass, load: np.full_like(load, 0.36, dtype=float)  # noqa: E731
    before = run([600, 1200, 1800], tasks=89, k=5, slots=3, infra=rate, reps=200, seed=7)
    again = run([600, 1200, 1800], tasks=89, k=5, slots=3, infra=rate, reps=200, seed=7, in_run_retries=0)
    assert again.makespan.tolist() == before.makespan.tolist() and again.mopups.tolist() == before.mopups.tolist()
    retried = run([600, 1200, 1800], tasks=89, k=5, slots=3, infra=rate, reps=200, seed=7, in_run_retries=2)
    assert retried.mopups.mean() < before.mopups.mean()
    # Left for the first mop-up pass: about 445 × 0.36³ ≈ 21 attempts, not 445 × 0.36 ≈ 160.
    first_pass_left = run([600], tasks=89, k=5, slots=3, infra=lambda p, load: rate(p, load) * (p == 0),
                          reps=200, seed=7, in_run_retries=2, max_mopups=0)
    assert 15 < first_pass_left.left.mean() < 27


def test_a_mop_up_pass_loads_the_server_with_only_what_is_left():
    seen = []

    def record(pass_no, load):
        seen.append((pass_no, load.tolist()))
        return np.full_like(load, 1.0 if pass_no == 0 else 0.0, dtype=float)

    run([600], tasks=3, slots=4, replicas=2, infra=record, reps=1)
    # 3 attempts, 4 slots, 2 replicas: 1.5 trials per replica in both passes.
    assert seen == [(0, [1.5]), (1, [1.5])]


def test_a_settled_trial_keeps_its_time_under_a_shorter_timeout_until_capped():
    # Finished in 5 min at ×4: the same 5 min at ×1 (capped at 15 min only when longer).
    assert plan.planned_duration(300, False, 4, 1, 900) == 300 + plan.TRIAL_OVERHEAD_SECS
    assert plan.planned_duration(1800, False, 4, 1, 900) == 900 + plan.TRIAL_OVERHEAD_SECS
    # Timed out at 60 min under ×4: scaled to the budget under ×1, and under ×8 to 120 min.
    assert plan.planned_duration(3600, True, 4, 1, 900) == 900 + plan.TRIAL_OVERHEAD_SECS
    assert plan.planned_duration(3600, True, 4, 8, 7200) == 7200 + plan.TRIAL_OVERHEAD_SECS


def test_flavors_durations_and_shards():
    prices = {"h200": 5.0, "h200x2": 10.0, "h200x4": 20.0, "h200x8": 40.0, "a100x4": 10.0, "cpu-upgrade": 0.03}
    assert plan.candidate_flavors("h200", prices) == [("h200", 1), ("h200x2", 2), ("h200x4", 4), ("h200x8", 8)]
    assert plan.candidate_flavors("h200x2", prices) == [("h200x2", 1), ("h200x4", 2), ("h200x8", 4)]
    assert plan.shard_counts(8) == [1, 2, 4, 8] and plan.shard_counts(1) == [1]
    assert [plan.parse_duration(d) for d in ("24h", "90m", "2d", "3600", "1.5h")] == [86400, 5400, 172800, 3600, 5400]
    with pytest.raises(plan.PlanError):
        plan.parse_duration("24x")


# --------------------------------------------------------------------------- p(L)


def independent_example_rate() -> tuple[int, int]:
    """(infra, finished) of the bundled terminus-2 example, counted here from its result.json files
    and the policy file's infra types and message patterns, without tools/."""
    policy = yaml.safe_load((REPO / "env" / "outcome-policy.yaml").read_text())
    types = set(policy["infra"]["types"])
    patterns = [re.compile(p["pattern"] if isinstance(p, dict) else p) for p in policy["infra"].get("message_patterns", [])]
    infra = finished = 0
    for job in ("example-terminus2-tb21", "example-terminus2-tb21-retry-1"):
        for result in sorted((REPO / "examples" / "jobs" / job).glob("*/result.json")):
            try:
                r = json.loads(result.read_text())
            except json.JSONDecodeError:
                continue  # the example's deliberately truncated one
            finished += 1
            exc = r.get("exception_info") or {}
            if exc.get("exception_type") in types or any(p.search(exc.get("exception_message") or "") for p in patterns):
                infra += 1
    return infra, finished


def test_p_of_load_passes_through_the_job_dirs_point_and_the_reference_point():
    infra, finished = independent_example_rate()
    assert (infra, finished) == (5, 14)
    sample = plan.choose_sample(str(REPO / "no-such-jobs"), "nothing", 1.0, 900.0)
    assert (sample.infra, sample.finished, sample.load) == (infra, finished, 3.0)
    curve = plan.fit_curve(sample)
    assert float(curve(3.0)) == pytest.approx(infra / finished)
    assert float(curve(8.0)) == pytest.approx(0.70)
    assert float(curve(5.5)) == pytest.approx((infra / finished + 0.70) / 2)  # linear between them
    assert float(curve(1.0)) == pytest.approx(infra / finished)  # flat below the lower point
    own = plan.Sample("own", [], np.array([60.0]), finished=20, infra=2, load=4.0, notes=[])
    c = plan.fit_curve(own)
    assert (float(c(4.0)), float(c(8.0))) == (pytest.approx(0.1), pytest.approx(0.7))


# --------------------------------------------------------------------------- determinism and prices


def plan_doc(**over) -> dict:
    args = dict(run="r", tasks=20, k=2, mult=1.0, timeout_estimate=900.0, run_flavor="h200",
                sandbox_flavor="cpu-upgrade", jobs_dir=str(REPO / "no-such-jobs"), job_name="nothing",
                deadline=12 * 3600.0, reps=30, seed=0, mopup_passes=3, max_infra_rate=0.3, ready_timeout=2700.0)
    args.update(over)
    return plan.plan(**args)


def test_the_same_seed_gives_the_same_table_and_another_seed_another():
    a, b = plan.render(plan_doc()), plan.render(plan_doc())
    assert a == b
    assert a != plan.render(plan_doc(seed=1))
    runner = CliRunner()
    argv = ["--run", "r", "--tasks", "20", "--server-flavor", "h200", "--job-name", "nothing",
            "--jobs-dir", str(REPO / "no-such-jobs"), "--reps", "20", "--deadline", "24h"]
    one, two = runner.invoke(plan.cli, argv), runner.invoke(plan.cli, argv)
    assert one.exit_code == 0, one.output
    assert one.output == two.output
    doc = json.loads(runner.invoke(plan.cli, argv + ["--json"]).output)
    assert doc["baseline"]["n_concurrent"] == 3 and doc["baseline"]["flavor"] == "h200"


def test_dollars_come_from_the_price_list_of_env_flavor_prices_tsv(tmp_path):
    tsv = (REPO / "env" / "flavor-prices.tsv").read_text()
    assert re.search(r"^h200\t5\.00$", tsv, re.M)
    dearer = tmp_path / "prices.tsv"
    dearer.write_text(re.sub(r"^h200\t5\.00$", "h200\t7.00", tsv, flags=re.M))
    costs = plan.load_costs(dearer, "cpu-upgrade")
    assert costs.gpu_usd["h200"] == 7.0 and costs.port_usd == 0.01 and costs.sandbox_usd == 0.03
    sample = plan.choose_sample(str(REPO / "no-such-jobs"), "nothing", 1.0, 900.0)
    curve = plan.fit_curve(sample)
    config = plan.Config("h200", 1, 1, 3)
    row = plan.evaluate(config, pool=sample.durations, curve=curve, tasks=10, k=1, reps=20, seed=0,
                        loading_secs=1200.0, run_gpus=1, costs=costs)
    out = plan.simulate(sample.durations, 10, 1, 1, 3, 1, lambda _p, load: curve(load), 20, np.random.default_rng(0))
    wall = 1200.0 + out.makespan
    assert row["usd_median"] == round(float(np.median(wall / 3600 * (7.0 + 0.01) + out.sandbox_secs / 3600 * 0.03)), 2)
    assert row["gpu_hours_median"] == round(float(np.median(wall)) / 3600, 2)
    cheaper = plan_doc()["baseline"]["usd_median"]
    assert plan_doc(prices_path=dearer)["baseline"]["usd_median"] > cheaper


def test_the_recommendation_is_the_cheapest_meeting_p90_within_the_infra_ceiling():
    rows = [
        {"flavor": "a", "infra_rate": 0.2, "wall_clock_p90_secs": 10.0, "usd_median": 50.0},
        {"flavor": "b", "infra_rate": 0.2, "wall_clock_p90_secs": 20.0, "usd_median": 30.0},
        {"flavor": "c", "infra_rate": 0.6, "wall_clock_p90_secs": 5.0, "usd_median": 10.0},
    ]
    assert plan.recommend(rows, 25.0, 0.3)["row"]["flavor"] == "b"
    assert plan.recommend(rows, 15.0, 0.3)["row"]["flavor"] == "a"
    missed = plan.recommend(rows, 8.0, 0.3)
    assert (missed["meets"], missed["row"]["flavor"], missed["miss_secs"]) == (False, "a", 2.0)
    assert plan.recommend(rows, None, 0.3) is None


# --------------------------------------------------------------------------- the verb


def make(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "plan", *args], capture_output=True,
                          text=True, env=env, timeout=300)


@pytest.fixture
def clean_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "DRY_RUN", "CLI_SETTINGS", "DEADLINE")}
    env["STATE_ROOT"] = str(tmp_path / "state")
    return env


def test_make_plan_prints_the_table_and_a_recommendation_and_writes_nothing(tmp_path, clean_env):
    jobs_before = (REPO / "jobs").exists()
    proc = make("RUN=qwen-t2-leaderboard", "DEADLINE=24h", "PLAN_REPS=40", env=clean_env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "# plan: qwen-t2-leaderboard: 89 tasks × 5 attempts = 445 attempts"
    header = lines.index("| " + " | ".join(plan.COLUMNS) + " |")
    rows = [line for line in lines[header + 2:] if line.startswith("| ")]
    assert len(rows) == 8 * (1 + 2 + 3 + 4)  # N 1..8 × shards (1; 1,2; 1,2,4; 1,2,4,8)
    assert rows[2].startswith("| h200 | 1 | 1 | 3 | 3 | ")
    assert any(line.startswith("baseline: h200 (1 replica), 1 shard × -n 3: ") for line in lines)
    rec = [line for line in lines if line.startswith("recommendation: ")]
    assert len(rec) == 1 and re.search(r"meets the deadline of 24\.0 h.*× the baseline's \$", rec[0])
    assert not (tmp_path / "state").exists()
    assert (REPO / "jobs").exists() == jobs_before


def test_make_plan_dry_run_prints_the_command(clean_env):
    proc = make("RUN=qwen-t2-leaderboard", "DEADLINE=24h", "DRY_RUN=1", env=clean_env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (
        ".venv/bin/python -m tools.plan --run qwen-t2-leaderboard --attempts 5 --multiplier 1 --timeout-estimate 900 "
        "--server-flavor h200 --sandbox-flavor cpu-upgrade --jobs-dir jobs "
        "--job-name qwen3_8-27b-fp8-terminus2-tb21-leaderboard --reps 200 --seed 0 --mopup-passes 3 "
        "--max-infra-rate 0.3 --ready-timeout 2700 --model Qwen/Qwen3.8-27B-FP8 --server-dp 1 --max-retries 2 "
        "--tasks 89 --deadline 24h\n")


def test_the_recommendation_names_the_bundled_profile_that_runs_it(tmp_path):
    row = {"flavor": "h200x4", "replicas": 4, "shards": 2, "n_concurrent": 6, "mopup_passes_p90": 2}
    assert plan.server_profile("Qwen/Qwen3.8-27B-FP8", "h200x4", 4) == "qwen3.8-27b-fp8-sglang-h200x4"
    assert plan.server_profile("Qwen/Qwen3.8-27B-FP8", "h200", 1) == "qwen3.8-27b-fp8-sglang-h200"
    assert plan.server_profile("openai/gpt-oss-20b", "l40sx4", 4) == "gpt-oss-20b-vllm-l40sx4"
    assert plan.run_with("r", row, "Qwen/Qwen3.8-27B-FP8", 3) == (
        "make reproduce RUN=r SERVER=qwen3.8-27b-fp8-sglang-h200x4 N_SHARDS=2 N_CONCURRENT=6")
    assert plan.run_with("r", dict(row, mopup_passes_p90=7), "Qwen/Qwen3.8-27B-FP8", 3).endswith(" MOPUP_PASSES=7")
    assert plan.run_with("r", row, "org/other", 3) == (
        "no profile in env/servers/ serves org/other on h200x4 with SERVER_DP=4: write one (docs/data-parallel.md), "
        "then make reproduce RUN=r SERVER=<it> N_SHARDS=2 N_CONCURRENT=6")
    # Profiles are read as plain lines: one that only sources another names no model of its own.
    (tmp_path / "p.env").write_text("MODEL=m\nSERVER_FLAVOR=h200x2 # two\nSERVER_DP=2\n")
    (tmp_path / "q.env").write_text('source "${BASH_SOURCE[0]%/*}/p.env"\n')
    assert plan.server_profile("m", "h200x2", 2, tmp_path) == "p"
    assert plan.server_profile("m", "h200x2", 1, tmp_path) is None


def test_a_data_parallel_run_is_planned_per_replica():
    prices = {"h200": 5.0, "h200x2": 10.0, "h200x4": 20.0, "l40sx1": 1.8, "l40sx4": 8.3}
    assert plan.replica_flavor("h200x4", 4, prices) == "h200"
    assert plan.replica_flavor("h200x4", 2, prices) == "h200x2"
    assert plan.replica_flavor("l40sx4", 4, prices) == "l40sx1"
    assert plan.replica_flavor("h200", 1, prices) == "h200"
    with pytest.raises(plan.PlanError, match="SERVER_DP=3 does not divide the 4 GPUs of h200x4"):
        plan.replica_flavor("h200x4", 3, prices)
    whole = plan_doc(run_flavor="h200x4", server_dp=4)
    assert whole["baseline"]["flavor"] == "h200" and whole["baseline"] == plan_doc()["baseline"]


@pytest.mark.parametrize("setting, message", [
    ("DEADLINE=24x", "plan: setting DEADLINE must be a number with an optional unit s, m, h or d (e.g. 4h), "
                     "got '24x' (run 'qwen-t2-leaderboard')"),
    ("PLAN_SEED=-1", "plan: setting PLAN_SEED must be a whole number from 0 to 999999999, got '-1' "
                     "(run 'qwen-t2-leaderboard')"),
])
def test_a_bad_setting_is_one_line_and_exit_1(setting, message, clean_env):
    proc = make("RUN=qwen-t2-leaderboard", setting, env=clean_env)
    assert [line for line in proc.stderr.splitlines() if not line.startswith("make")] == [message]
    assert proc.stdout == ""
    name, value = setting.split("=", 1)
    direct = subprocess.run([str(REPO / "scripts" / "plan.sh")], capture_output=True, text=True, timeout=60,
                            env={**clean_env, "RUN": "qwen-t2-leaderboard", name: value})
    assert direct.returncode == 1 and direct.stderr.splitlines() == [message]


def test_the_whole_space_runs_in_seconds():
    import time
    start = time.monotonic()
    doc = plan_doc(tasks=89, k=5, reps=200)
    assert len(doc["configurations"]) == 80
    assert time.monotonic() - start < 30  # a few seconds here; the bound only catches a blow-up
    assert math.isfinite(doc["baseline"]["wall_clock_p90_secs"])


# --------------------------------------------------------------------------- bounds: the work, the flavor, the price list


def plan_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """python -m tools.plan with the leaderboard's settings and `args`, its address space capped at
    2 GiB: an unbounded read or allocation fails fast instead of filling the machine."""
    import resource

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    return subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-m", "tools.plan", "--run", "r", "--tasks", "89",
                           "--attempts", "5", "--server-flavor", "h200", "--job-name", "nothing", "--jobs-dir",
                           str(REPO / "no-such-jobs"), "--reps", "20", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=timeout, preexec_fn=cap)


def test_work_past_the_budget_is_refused_in_one_line_before_anything_is_drawn(clean_env):
    """100,000 tasks × 100 × 10,000 once asked numpy for 745 GiB; 89 × 5 × 10,000 ran for minutes."""
    proc = make("RUN=qwen-t2-leaderboard", "DATASET_TASKS=100000", "N_ATTEMPTS=100", "PLAN_REPS=10000", env=clean_env)
    assert [line for line in proc.stderr.splitlines() if not line.startswith("make")] == [
        "plan: 100,000 tasks × 100 attempts = 10,000,000 attempts, above the 10,000 make plan simulates "
        "(docs/plan.md §7): plan a part of the run, N_TASKS=100 or fewer"]
    assert proc.returncode != 0 and proc.stdout == ""
    reps = plan_cli("--reps", "10000")
    assert (reps.returncode, reps.stdout, reps.stderr) == (1, "", (
        "plan: 89 tasks × 5 attempts × 10,000 repetitions = 4,450,000, above the 500,000 make plan simulates "
        "(docs/plan.md §7): set PLAN_REPS=1123 or fewer\n"))
    # The edges: the largest accepted, one more refused (tasks × k at most ATTEMPTS_CAP, × reps at most WORK_CAP).
    assert (plan.ATTEMPTS_CAP, plan.WORK_CAP) == (10_000, 500_000)
    plan.check_work(89, 5, 1123)
    plan.check_work(10_000, 1, 50)
    plan.check_work(2_000, 5, 50)
    for tasks, k, reps in ((89, 5, 1124), (10_001, 1, 1), (5_000, 5, 1), (10_000, 1, 51)):
        with pytest.raises(plan.PlanError):
            plan.check_work(tasks, k, reps)


def test_a_flavor_with_no_gpu_is_refused_and_a_price_list_adds_no_replica_count_past_8(clean_env, tmp_path):
    proc = make("RUN=qwen-t2-leaderboard", "SERVER_FLAVOR=h200x0", env=clean_env)
    assert [line for line in proc.stderr.splitlines() if not line.startswith("make")] == [
        "plan: SERVER_FLAVOR=h200x0 names no GPU (x0): name the flavor the model is served on, e.g. h200 or h200x2"]
    assert proc.returncode != 0 and proc.stdout == ""
    # A price list's h200x0 (zero replicas: a division by zero), x3 and x16 to x64 are no candidates.
    prices = {"h200": 5.0} | {f"h200x{n}": 5.0 * n for n in range(0, 65)}
    assert plan.candidate_flavors("h200", prices) == [("h200", 1), ("h200x2", 2), ("h200x4", 4), ("h200x8", 8)]
    assert plan.candidate_flavors("h200x2", prices) == [("h200x2", 1), ("h200x4", 2), ("h200x8", 4), ("h200x16", 8)]
    assert plan.gpus_of("h200x" + "9" * 5000) == 1  # a count past 9 digits is part of the name, never int()'d
    tsv = tmp_path / "prices.tsv"
    tsv.write_text((REPO / "env" / "flavor-prices.tsv").read_text()
                   + "".join(f"h200x{n}\t{5.0 * n}\n" for n in range(0, 65) if n not in (2, 4, 8))
                   + "h200x2\t9.00\nh200x02\t8.00\n")  # two of 2 GPUs, the cheaper one planned
    doc = plan_doc(prices_path=tsv, tasks=3, k=1, reps=2)
    assert len(doc["configurations"]) == 8 * (1 + 2 + 3 + 4)  # at most 80: replicas 1, 2, 4, 8
    assert sorted({(r["flavor"], r["replicas"]) for r in doc["configurations"]}, key=lambda x: x[1]) == [
        ("h200", 1), ("h200x02", 2), ("h200x4", 4), ("h200x8", 8)]


def test_a_price_list_is_read_only_as_a_regular_file_of_at_most_64_kib(tmp_path):
    """A FIFO hung the plan, /dev/zero never ended, 100k rows ran for ever: one line each, at once."""
    fifo = tmp_path / "prices.fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big.tsv"
    big.write_text((REPO / "env" / "flavor-prices.tsv").read_text()
                   + "".join(f"h200x{n}\t{5 * n}\n" for n in range(9, 100_009)))
    size = big.stat().st_size
    form = "(a price list is a regular file of at most 64 KiB, as env/flavor-prices.tsv)"
    for path, why in ((fifo, "not a regular file (a FIFO); not opened"),
                      ("/dev/zero", "not a regular file (a character device); not opened"),
                      (tmp_path, "not a regular file (a directory); not opened"),
                      (big, f"over the 65,536 bytes cap for a price list ({size:,} bytes); not read")):
        proc = plan_cli("--prices", str(path))
        assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", f"plan: the price list {path} is refused: {why} {form}\n")
    proc = plan_cli("--prices", str(tmp_path / "none.tsv"))
    assert proc.stderr == (f"plan: the price list {tmp_path / 'none.tsv'} does not exist: pass an existing file "
                           f"(the default is env/flavor-prices.tsv)\n")


def test_the_run_s_own_job_dirs_of_another_model_are_refused_not_planned_from():
    """A run file copied from another keeps its JOB_NAME: the job dirs found are the other model's,
    whose durations say nothing of this run's. Refused with the fix, as the tally refuses them."""
    jobs = str(REPO / "examples" / "jobs")
    with pytest.raises(plan.PlanError, match=r"example-terminus2-tb21 ran model 'openai/Qwen/Qwen3.8-27B-FP8' \(its "
                                             r"config.json\), not the run's MODEL Other/Model-7B.*own JOB_NAME"):
        plan.choose_sample(jobs, "example-terminus2-tb21", 1.0, 900.0, model="Other/Model-7B")
    assert plan.choose_sample(jobs, "example-terminus2-tb21", 1.0, 900.0,
                              model="Qwen/Qwen3.8-27B-FP8").source == "the run's own job dirs"
