"""make plan (tools/money/plan.py, tools/money/plan_evidence.py, tools/money/plan_server.py): the simulation on
hand-computed cases, the numbers it is fitted to (the reference's, the run's own job dirs', never a
bundled example's), the roofline's constants, the candidates (DP and TP side by side), the
recommendation and the command that runs it (executed under DRY_RUN=1), a calibration, and the
verb end to end (offline, writing nothing)."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.fixtures.harbor_jobs import TrialSpec, write_job
from tools.money import plan
from tools.money import plan_checks
from tools.money import plan_render
from tools.money import plan_sim
from tools.money import plan_tasks
from tools.money import plan_evidence
from tools.money import plan_server
from tools import settings as run_settings
from tools.results import tally_trials

REPO = Path(__file__).resolve().parent.parent
F = plan_evidence.INFRA_DURATION_FRACTION
QWEN = "Qwen/Qwen3.8-27B-FP8"
NO_JOBS = str(REPO / "no-such-jobs")
# The settings every direct call of the tool plans with, over the catalogue's defaults: the
# leaderboard's model on one H200, and no job dirs of its own.
PLAN_SETTINGS = {"MODEL": QWEN, "SERVER": "qwen3.8-27b-fp8-sglang-h200", "SERVER_FLAVOR": "h200", "JOB_NAME": "nothing",
                 "JOBS_DIR": NO_JOBS}


def tb_settings(run: str = "r", **over) -> str:
    """TB_SETTINGS as a verb hands it to the tool (scripts/argv.sh, plan_tool): one JSON document of
    every setting, the catalogue's defaults < PLAN_SETTINGS < `over`."""
    values = {name: s.default for name, s in run_settings.catalogue().items()}
    values.update(PLAN_SETTINGS)
    values.update({name: str(value) for name, value in over.items()})
    return json.dumps({"run": run, "settings": values})


def invoke(*args: str, run: str = "r", **over):
    """plan.cli in this process, its settings in TB_SETTINGS (tb_settings) and `args` its command line."""
    return CliRunner().invoke(plan.cli, list(args), env={"TB_SETTINGS": tb_settings(run, **over)})


def never(_pass, at_once):
    return np.zeros_like(at_once, dtype=float)


def run(pool, tasks, k=1, shards=1, slots=1, infra=never, reps=3, seed=0, **kw):
    return plan_sim.simulate(np.array(pool, dtype=float), tasks, k, shards, slots, infra, reps,
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
    first_only = lambda pass_no, at_once: np.full_like(at_once, 1.0 if pass_no == 0 else 0.0, dtype=float)  # noqa: E731
    out = run([600], tasks=6, slots=2, infra=first_only)
    # Pass 1: 6 attempts of F × 10 min, 2 at a time (3 rounds); the mop-up: 6 × 10 min (3 rounds).
    assert out.makespan == pytest.approx([3 * 600 * F + 3 * 600] * 3)
    assert out.sandbox_secs == pytest.approx([6 * 600 * F + 6 * 600] * 3)
    assert out.mopups.tolist() == [1] * 3 and out.left.tolist() == [0] * 3
    two = lambda pass_no, at_once: np.full_like(at_once, 1.0 if pass_no < 2 else 0.0, dtype=float)  # noqa: E731
    assert run([600], tasks=6, slots=2, infra=two).mopups.tolist() == [2] * 3
    always = lambda pass_no, at_once: np.ones_like(at_once, dtype=float)  # noqa: E731
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


def test_the_infra_rate_is_asked_at_the_trials_running_at_once_over_every_shard():
    seen = []

    def record(pass_no, at_once):
        seen.append((pass_no, at_once.tolist()))
        return np.full_like(at_once, 1.0 if pass_no == 0 else 0.0, dtype=float)

    run([600], tasks=12, shards=2, slots=4, infra=record, reps=1)
    # 12 attempts, 2 shards of 4 slots: 8 at once; the mop-up pass of all 12 again: 8.
    run([600], tasks=3, shards=2, slots=4, infra=record, reps=1)
    # 3 attempts can run only 3 at once, whatever the slots.
    assert seen == [(0, [8.0]), (1, [8.0]), (0, [3.0]), (1, [3.0])]


def test_an_attempt_is_its_natural_time_on_this_server_cut_at_the_timeout_plus_the_overhead():
    d = plan_sim.Durations(mean=1000.0, factor=0.5, cap=900.0, overhead=120.0)
    draws = d.draw(np.random.default_rng(0), 200_000)
    assert draws.min() >= 120.0 and draws.max() == 900.0 + 120.0
    # E[min(X, c)] for X exponential with mean m = 500: m (1 - e^(-c/m)).
    assert draws.mean() - 120 == pytest.approx(500 * (1 - math.exp(-900 / 500)), rel=0.01)
    assert (draws == 1020.0).mean() == pytest.approx(math.exp(-900 / 500), abs=0.005)
    assert d.timeout_share == pytest.approx(math.exp(-900 / 500))


# --------------------------------------------------------------------------- the evidence


def test_with_no_job_dirs_the_reference_s_own_rates_are_fitted_never_a_bundled_example():
    e = plan_evidence.choose(NO_JOBS, "nothing", QWEN, "h200", 1, 1)
    assert e.source.startswith("the reference (Run 1")
    assert (e.finished, e.sides["sandbox"], e.at_once) == (178, 12, 3)  # Runs 2 and 3: 4 of 89 and 8 of 89
    curve = plan_evidence.fit_curve(e)
    assert float(curve(3)) == pytest.approx(12 / 178)                    # 6.7%: within 4.5%-9.0%, not 36%
    assert 0.045 <= float(curve(3)) <= 0.09
    assert float(curve(8)) == pytest.approx(0.70)                        # Run 1 at -n 8
    assert float(curve(5.5)) == pytest.approx((12 / 178 + 0.70) / 2)     # linear between them
    assert float(curve(1)) == pytest.approx(12 / 178) and float(curve(20)) == pytest.approx(0.70)  # flat outside
    assert e.server_rate == 0.0  # the reference does not split its errors: all read as the sandboxes'
    # Run 1: 16 of 89 trials reached ×4's 3,600 s: an exponential with P(T > 3600) = 16/89.
    assert e.mean_agent_secs == pytest.approx(3600 / math.log(89 / 16))
    assert math.exp(-3600 / e.mean_agent_secs) == pytest.approx(16 / 89)
    # gpt-oss-20b: Run 2's 3 of 89, on one L40S.
    g = plan_evidence.choose(NO_JOBS, "nothing", "openai/gpt-oss-20b", "l40sx1", 1, 1)
    assert g.mean_agent_secs == pytest.approx(3600 / math.log(89 / 3)) and g.source_flavor == "l40sx1"
    with pytest.raises(plan_evidence.EvidenceError, match="the reference ran no org/other"):
        plan_evidence.choose(NO_JOBS, "nothing", "org/other", "h200", 1, 1)
    # make plan RUN=qwen-t2 with no job dirs: the rate at -n 3 is the reference's.
    doc = plan_doc()
    base = doc["baseline"]
    assert (base["at_once"], base["infra_sandbox"], base["infra_server"]) == (3, round(12 / 178, 4), 0.0)


def test_the_run_s_own_job_dirs_are_fitted_by_side_at_their_trials_at_once(tmp_path):
    jobs = tmp_path / "jobs"
    s = TrialSpec
    # Two shards at -n 3 each: 6 trials at once. Settled: 40 min and 10 min, a timeout at 60 min (×4);
    # infra: 2 sandbox, 1 model server; a CancelledError left out.
    write_job(jobs, "r-shard-1", [s("a", 1.0, agent_minutes=40), s("b", 0.0, agent_minutes=10),
                                  s("c", 0.0, "AgentTimeoutError", "timed out", agent_minutes=60)], multiplier=4.0)
    write_job(jobs, "r-shard-2", [s("d", None, "SandboxError", "503", agent_minutes=5),
                                  s("e", None, "ReadTimeout", "x", agent_minutes=15),
                                  s("f", None, "InternalServerError", "500", agent_minutes=10),
                                  s("g", None, "CancelledError", "", agent_minutes=1)], multiplier=4.0)
    e = plan_evidence.choose(str(jobs), "r", QWEN, "h200x2", 2, 1, step_secs=lambda b: 0.01)
    assert e.source == "the run's own job dirs"
    assert (e.settled, e.timed_out, e.finished) == (3, 1, 6)
    assert e.sides == {"sandbox": 2, "server": 1, "interrupted": 0}
    assert (e.at_once, e.per_replica) == (6, 3)
    # The censored maximum likelihood: every settled agent time over the trials that ended before it.
    assert e.mean_agent_secs == pytest.approx((40 + 10 + 60) * 60 / 2)
    # Output tokens (9,000 a trial in the fixtures) × the step at 3 per replica / the agent time.
    assert e.decode_share == pytest.approx(3 * 9000 * 0.01 / ((40 + 10 + 60) * 60))
    # The infra trials' mean agent time over the settled ones'.
    assert e.infra_fraction == pytest.approx(((5 + 15 + 10) / 3) / ((40 + 10 + 60) / 3))
    curve = plan_evidence.fit_curve(e)
    assert (curve.at_once, curve.rates) == ((6, 8.0), (pytest.approx(2 / 6), 0.70))
    assert e.server_rate == pytest.approx(1 / 6)


def test_a_settled_trial_with_an_agent_time_of_0_s_is_no_duration_to_fit(tmp_path):
    """A result.json whose agent started and finished at the same instant (anyone can write one)
    once divided the plan by a mean agent time of 0 s. It is left out of the fit, with a note; its
    outcome still counts towards the infra rate."""
    jobs, s = tmp_path / "jobs", TrialSpec
    zero = ("1 settled trial has an agent time of 0 s (the agent started and finished at the same instant): no "
            "duration, left out of the agent-time fit")
    write_job(jobs, "r", [s("a", 1.0, agent_minutes=0), s("b", 0.0, agent_minutes=40),
                          s("c", None, "SandboxError", "503", agent_minutes=10)], multiplier=4.0)
    e = plan_evidence.choose(str(jobs), "r", QWEN, "h200", 1, 1)
    assert (e.source, e.settled, e.finished, e.mean_agent_secs) == ("the run's own job dirs", 1, 3, 2400.0)
    assert e.infra_fraction == 10 / 40 and e.sandbox_rate == 1 / 3
    assert e.notes == [zero]
    # Only such trials: nothing of the run's own to fit, so the reference's figures, the note kept.
    write_job(jobs, "z", [s("a", 1.0, agent_minutes=0), s("c", None, "SandboxError", "503", agent_minutes=10)],
              multiplier=4.0)
    result = invoke(run="z", DATASET_TASKS=10, SERVER="", JOB_NAME="z", JOBS_DIR=jobs, PLAN_REPS=5)
    assert result.exit_code == 0, result.output
    assert "fitted to the reference (Run 1, and Runs 2 and 3's infra rates)" in result.output
    assert result.output.splitlines()[-1] == f"note: {zero}"


# --------------------------------------------------------------------------- the server: roofline and candidates


def test_the_roofline_s_constants_and_steps():
    assert plan_server.GPUS["h200"].bandwidth == pytest.approx(27e9 / 7.0e-3)       # 3.86 TB/s, the H200 measurement
    n = plan_server.MODELS[QWEN]
    assert (n.weight_bytes, n.kv_bytes_per_token, n.state_bytes_per_sequence) == (27e9, 32_768, 150_994_944)
    r = plan_server.roofline_for(QWEN, "h200x4")
    assert r.context == 32_768
    per_sequence = 32_768 * 32_768 + 2 * 150_994_944
    assert r.step_secs(1, 3) == pytest.approx((27e9 + 3 * per_sequence) / (27e9 / 7e-3))
    assert r.step_secs(2, 3) == pytest.approx(r.step_secs(1, 3) / 2)      # a TP share, all-reduce left out
    assert r.step_secs(1, 0) == pytest.approx(7.0e-3)                     # the weights alone: the measurement
    assert plan_server.roofline_for("openai/gpt-oss-20b", "l40sx1") is None        # no numbers: not modelled
    # The smoke trial's decode share: 681K output tokens at one sequence's step, over 3 h 06 min.
    assert plan_server.smoke_decode_share(r) == pytest.approx(681_000 * r.step_secs(1, 1) / 11_160)
    # At a step 1.5 times as long, a trial with half its time decoding takes 1.25 times as long.
    assert plan_server.speed_factor(0.5, 3.0, 2.0) == pytest.approx(1.25)
    assert plan_server.shift_share(0.5, 3.0) == pytest.approx(0.75)


def test_the_candidates_are_every_profile_of_the_model_dp_and_tp_side_by_side():
    names = sorted(p.name for p in plan_server.profiles_for(QWEN))
    assert names == ["qwen3.8-27b-fp8-sglang-h200", "qwen3.8-27b-fp8-sglang-h200x2",
                     "qwen3.8-27b-fp8-sglang-h200x2-tp2", "qwen3.8-27b-fp8-sglang-h200x2-tp2-dflash",
                     "qwen3.8-27b-fp8-sglang-h200x4", "qwen3.8-27b-fp8-sglang-h200x4-tp2-dp2",
                     "qwen3.8-27b-fp8-sglang-h200x4-tp4", "qwen3.8-27b-fp8-sglang-h200x8"]
    tp2 = plan_server.read_profile(REPO / "env/servers/qwen3.8-27b-fp8-sglang-h200x2-tp2.env")
    assert (tp2.flavor, tp2.dp, tp2.tp, tp2.gpus, tp2.suffix, tp2.speculative) == ("h200x2", 1, 2, 2, "h200x2-tp2", False)
    assert plan_server.read_profile(REPO / "env/servers/qwen3.8-27b-fp8-sglang-h200x2-tp2-dflash.env").speculative
    doc = plan_doc(tasks=10, k=1, reps=5)
    seen = {(r["profile"], r["replicas"], r["tp"]) for r in doc["configurations"]}
    assert ("qwen3.8-27b-fp8-sglang-h200x4", 4, 1) in seen and ("qwen3.8-27b-fp8-sglang-h200x4-tp4", 1, 4) in seen
    assert ("qwen3.8-27b-fp8-sglang-h200x4-tp2-dp2", 2, 2) in seen
    # The speculative one is an option, unranked without a calibration of it.
    assert not any("dflash" in r["profile"] for r in doc["configurations"])
    assert doc["options"] == ["qwen3.8-27b-fp8-sglang-h200x2-tp2-dflash"]
    # Rows: N 1..8 × shards (1; 1,2; 1,2,4; 1,2,4,8) for h200 × 1/2/4/8, tp2, tp4 (1 shard), tp2-dp2 (1, 2).
    assert len(doc["configurations"]) == 8 * (1 + 2 + 3 + 4 + 1 + 1 + 2)
    by = {(r["profile"], r["shards"], r["n_concurrent"]): r for r in doc["configurations"]}
    one, tp4 = by[("qwen3.8-27b-fp8-sglang-h200", 1, 3)], by[("qwen3.8-27b-fp8-sglang-h200x4-tp4", 1, 3)]
    dp4 = by[("qwen3.8-27b-fp8-sglang-h200x4", 1, 3)]
    # TP shortens each trial's decode; DP at the same trials at once barely moves it.
    assert tp4["trial_factor"] < dp4["trial_factor"] < one["trial_factor"] == 1.0
    assert tp4["timeout_share"] < one["timeout_share"] and tp4["step_ms"] == pytest.approx(one["step_ms"] / 4, rel=0.01)
    # The sandboxes see trials at once, whatever the GPUs: the same rate at 3 on one GPU or four.
    assert tp4["infra_rate"] == dp4["infra_rate"] == one["infra_rate"]


def test_a_calibration_scales_the_roofline_and_the_plan_says_so(tmp_path):
    r = plan_server.roofline_for(QWEN, "h200")
    cal = tmp_path / "calibration.json"
    # Measured twice the roofline's step at 1, 3 and 6 requests on one H200.
    levels = [{"concurrency": c, "tpot_ms": 2000 * r.step_secs(1, c), "ttft_ms": 100.0, "output_tok_s": 1.0}
              for c in (1, 3, 6)]
    cal.write_text(json.dumps({"server": {"profile": "qwen3.8-27b-fp8-sglang-h200"}, "levels": levels,
                               "measured_at": "2026-12-04T10:00:00Z"}))
    doc = plan_doc(calibration_path=cal, tasks=10, reps=5)
    assert doc["server_model"]["note"].startswith("the roofline scaled by 2.00, what make calibrate measured on "
                                                  "qwen3.8-27b-fp8-sglang-h200")
    base = plan_doc(tasks=10, reps=5)["baseline"]
    assert doc["baseline"]["step_ms"] == pytest.approx(2 * base["step_ms"], rel=0.01)
    # Twice the decode time: a larger decode share, so a faster server matters more.
    assert doc["server_model"]["decode_share"] > plan_doc(tasks=10, reps=5)["server_model"]["decode_share"]
    # A file that is no calibration is named, not used.
    cal.write_text("{not json")
    bad = plan_doc(calibration_path=cal, tasks=10, reps=5)
    assert bad["server_model"]["note"] == "the roofline alone (no calibration)"
    assert any("is not a calibration make calibrate writes" in n for n in bad["evidence"]["notes"])


def write_calibration(path: Path, profile: str, *tpot_ms: float) -> Path:
    path.write_text(json.dumps({"server": {"profile": profile}, "measured_at": "2026-12-04T10:00:00Z",
                                "levels": [{"concurrency": c, "tpot_ms": t} for c, t in zip((1, 3, 6), tpot_ms)]}))
    return path


def test_a_calibration_no_server_could_have_measured_is_refused_in_one_line(tmp_path):
    """0.01 ms a token once scaled the roofline by 0.00, and 59,999 ms by 7,795, without a word. A
    step reads every weight once: its floor is the model's weight bytes over the GPUs' peak bandwidth
    (27 GB over one H200's 4.8 TB/s: 5.6 ms; a TP-2 split halves the bytes each GPU reads)."""
    one, tp2, spec = ("qwen3.8-27b-fp8-sglang-h200", "qwen3.8-27b-fp8-sglang-h200x2-tp2",
                      "qwen3.8-27b-fp8-sglang-h200x2-tp2-dflash")
    assert (plan_server.GPUS["h200"].peak_bandwidth, plan_server.MAX_TPOT_SECS) == (4.8e12, 10.0)
    fix = ". Run make calibrate again with the run's server up, or remove the file to plan from the roofline alone"
    cases = [
        (one, (0.01, 8.0, 8.5), "at concurrency 1 it measured 0.01 ms per output token on qwen3.8-27b-fp8-sglang-h200, "
                                "under the 5.6 ms a decode step takes at the least (27 GB of Qwen/Qwen3.8-27B-FP8's "
                                "weights streamed over 1 GPU at the h200's peak 4.8 TB/s): no server decodes that fast"),
        (tp2, (4.0, 2.7, 5.0), "at concurrency 3 it measured 2.7 ms per output token on qwen3.8-27b-fp8-sglang-h200x2-tp2, "
                               "under the 2.8 ms a decode step takes at the least (27 GB of Qwen/Qwen3.8-27B-FP8's "
                               "weights streamed over 2 GPUs at the h200's peak 4.8 TB/s): no server decodes that fast"),
        (one, (8.0, 9.0, 59_999), "at concurrency 6 it measured 59999 ms per output token on "
                                  "qwen3.8-27b-fp8-sglang-h200, over the 10 s a token past which a server is stalled, "
                                  "not decoding"),
    ]
    for profile, tpots, why in cases:
        cal = write_calibration(tmp_path / "calibration.json", profile, *tpots)
        with pytest.raises(plan.PlanError) as refused:
            plan_doc(calibration_path=cal, tasks=10, reps=5)
        assert refused.value.message == f"the calibration {cal} is refused: {why}{fix}"
    # Through the command line, as make plan and make print's estimate run it: one line, exit 1.
    proc = plan_cli("--calibration", str(cal), "--own", "1", "3", "--json")
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", f"plan: the calibration {cal} is refused: {why}{fix}\n")
    # At the floor and above it, used: 2.9 ms on two GPUs; a speculative profile decodes several tokens a
    # step, so no weight-streaming floor holds for it (the ceiling does).
    for profile, tpots in ((tp2, (2.9, 3.0, 3.2)), (spec, (1.0, 1.2, 1.5))):
        cal = write_calibration(tmp_path / "calibration.json", profile, *tpots)
        assert plan_doc(calibration_path=cal, tasks=10, reps=5)["server_model"]["note"].startswith(
            "the roofline scaled by ")
    cal = write_calibration(tmp_path / "calibration.json", spec, 1.0, 10_001, 1.5)
    with pytest.raises(plan.PlanError, match=r"at concurrency 3 it measured 10001 ms per output token on "
                                             r"qwen3\.8-27b-fp8-sglang-h200x2-tp2-dflash, over the 10 s a token"):
        plan_doc(calibration_path=cal, tasks=10, reps=5)


# --------------------------------------------------------------------------- the recommendation


def plan_doc(**over) -> dict:
    args = dict(run="qwen-t2-leaderboard", tasks=20, k=2, mult=1.0, timeout_estimate=900.0, model=QWEN,
                server="qwen3.8-27b-fp8-sglang-h200", server_flavor="h200", sandbox_flavor="cpu-upgrade",
                jobs_dir=NO_JOBS, job_name="nothing", deadline=None, reps=30, seed=0, mopup_passes=3,
                max_infra_rate=0.3, ready_timeout=2700.0)
    args.update(over)
    return plan.plan(**args)


def test_the_same_seed_gives_the_same_table_and_another_seed_another():
    a, b = plan_render.render(plan_doc()), plan_render.render(plan_doc())
    assert a == b
    assert a != plan_render.render(plan_doc(seed=1))
    given = {"DATASET_TASKS": 20, "PLAN_REPS": 20, "DEADLINE": "24h"}
    one, two = invoke(**given), invoke(**given)
    assert one.exit_code == 0, one.output
    assert one.output == two.output
    doc = json.loads(invoke("--json", **given).output)
    assert doc["baseline"]["n_concurrent"] == 3 and doc["baseline"]["flavor"] == "h200"


def test_dollars_come_from_the_price_list_of_env_flavor_prices_tsv(tmp_path):
    tsv = (REPO / "env" / "flavor-prices.tsv").read_text()
    assert re.search(r"^h200\t5\.00$", tsv, re.M)
    dearer = tmp_path / "prices.tsv"
    dearer.write_text(re.sub(r"^h200\t5\.00$", "h200\t7.00", tsv, flags=re.M))
    costs = plan_checks.load_costs(dearer, "cpu-upgrade")
    assert costs.gpu_usd["h200"] == 7.0 and costs.port_usd == 0.01 and costs.sandbox_usd == 0.03
    e = plan_evidence.choose(NO_JOBS, "nothing", QWEN, "h200", 1, 1)
    curve = plan_evidence.fit_curve(e)
    own = plan_server.read_profile(REPO / "env/servers/qwen3.8-27b-fp8-sglang-h200.env")
    srv = plan.server_model(e, own, None, [own])
    row = plan.evaluate(plan.Config(own, 1, 3), evidence=e, server=srv, curve=curve, cap=900.0, tasks=10, k=1,
                        reps=20, seed=0, loading_secs=1200.0, costs=costs)
    out = plan_sim.simulate(plan_sim.Durations(e.mean_agent_secs, 1.0, 900.0), 10, 1, 1, 3, lambda _p, c: curve(c), 20,
                        np.random.default_rng(0))
    wall = 1200.0 + out.makespan
    # A sandbox is billed its flavor and its exposed port, as make cost counts it.
    usd = wall / 3600 * (7.0 + 0.01) + out.sandbox_secs / 3600 * (0.03 + 0.01)
    assert row["usd_median"] == round(float(np.median(usd)), 2)
    assert row["usd_p90"] == round(float(np.percentile(usd, 90)), 2)
    assert row["gpu_hours_median"] == round(float(np.median(wall)) / 3600, 2)
    assert plan_doc(prices_path=dearer)["baseline"]["usd_median"] > plan_doc()["baseline"]["usd_median"]


def test_the_recommendation_is_the_cheapest_meeting_p90_within_the_infra_ceiling():
    rows = [
        {"profile": "a", "shards": 1, "infra_rate": 0.2, "wall_clock_p90_secs": 10.0, "usd_median": 50.0},
        {"profile": "b", "shards": 1, "infra_rate": 0.2, "wall_clock_p90_secs": 20.0, "usd_median": 30.0},
        {"profile": "c", "shards": 1, "infra_rate": 0.6, "wall_clock_p90_secs": 5.0, "usd_median": 10.0},
        {"profile": "d", "shards": 2, "infra_rate": 0.2, "wall_clock_p90_secs": 9.0, "usd_median": 20.0},
    ]
    assert plan.recommend(rows, 25.0, 0.3)["row"]["profile"] == "d"
    # A run bound for the leaderboard: one job, so no shards.
    assert plan.recommend(rows, 25.0, 0.3, one_job=True)["row"]["profile"] == "b"
    assert plan.recommend(rows, 15.0, 0.3, one_job=True)["row"]["profile"] == "a"
    missed = plan.recommend(rows, 8.0, 0.3, one_job=True)
    assert (missed["meets"], missed["row"]["profile"], missed["miss_secs"]) == (False, "a", 2.0)
    assert plan.recommend(rows, None, 0.3) is None


IDENTITY = {"MODEL": QWEN, "AGENT": "terminus-2", "DATASET": "terminal-bench/terminal-bench-2-1", "N_ATTEMPTS": "5",
            "AGENT_TIMEOUT_MULTIPLIER": "1", "JOB_NAME": "lb"}


def test_the_command_names_the_run_file_made_for_its_server_with_max_cost_and_mop_up_passes():
    row = {"shards": 2, "n_concurrent": 2, "usd_p90": 401.0, "max_cost": plan_render.ceiling_of(401.0),
           "mopup_passes_p90": 5}
    files = [{"run": "lb", "settings": dict(IDENTITY, SERVER="p1")},
             {"run": "lb-h200x4", "settings": dict(IDENTITY, SERVER="p4")},
             {"run": "other-x4", "settings": dict(IDENTITY, SERVER="p4", N_ATTEMPTS="1")}]  # another benchmark
    p4 = plan_server.Profile("p4", QWEN, "h200x4", 4, 1, False)
    w = plan.run_with("lb", row, p4, IDENTITY, files, mopup_passes=3)
    assert w == {"command": "make reproduce RUN=lb-h200x4 N_SHARDS=2 N_CONCURRENT=2 MAX_COST=482 MOPUP_PASSES=5",
                 "run_file": "runs/lb-h200x4.env", "max_cost": 482, "mopup_passes": 5, "exists": True}
    assert plan.run_with("lb", dict(row, mopup_passes_p90=1), p4, IDENTITY, files, 3)["mopup_passes"] == 3
    # No run file for that server: the run to write first, named, and the command for it.
    tp2 = plan_server.Profile("p-tp2", QWEN, "h200x2", 1, 2, False)
    w = plan.run_with("lb", row, tp2, IDENTITY, files, 3)
    assert (w["exists"], w["command"]) == (False, "make reproduce RUN=lb-h200x2-tp2 N_SHARDS=2 N_CONCURRENT=2 "
                                                  "MAX_COST=482 MOPUP_PASSES=5")
    assert w["write_first"] == ("runs/lb-h200x2-tp2.env: a copy of runs/lb.env with SERVER=p-tp2 and "
                                "JOB_NAME=lb-h200x2-tp2 (a run on another server is another run, never a resume of "
                                "runs/lb.env's job dirs)")


def test_no_runnable_line_when_nothing_meets_the_deadline():
    doc = plan_doc(tasks=89, k=5, deadline=2 * 3600.0, reps=10)
    assert doc["recommendation"]["meets"] is False and "run_with" not in doc["recommendation"]
    text = plan_render.render(doc)
    assert "run it with:" not in text and "make reproduce" not in text
    assert re.search(r"^recommendation: none: no configuration at most 30% infra errors meets the deadline of 2\.0 h"
                     r".*No command: give a later DEADLINE", text, re.M)


def test_the_sandboxes_bind_and_the_plan_says_why():
    doc = plan_doc(tasks=89, k=5, deadline=48 * 3600.0, reps=20)
    b = doc["binding"]
    # 6.7% at 3, 19.4% at 4, 32% at 5: at most 4 trials at once stay at or below 30%.
    assert (b["resource"], b["at_once_limit"]) == ("sandboxes", 4)
    assert doc["recommendation"]["row"]["at_once"] == 4
    assert b["fastest_profile"] == "qwen3.8-27b-fp8-sglang-h200x4-tp4"
    line = next(x for x in plan_render.render(doc).splitlines() if x.startswith("what binds: "))
    assert line.startswith("what binds: the sandboxes: at most 4 trials at once keep the infra rate at or below 30% ")
    assert f"the attempts that hit their timeout {b['baseline_timeout_share']:.0%} → {b['fastest_timeout_share']:.0%}" in line


def test_without_a_deadline_what_binds_still_names_the_sandboxes_limit():
    """With no DEADLINE there is no row to judge; the line once read "the sandboxes allow  trials
    at once keep …", its number cut off."""
    doc = plan_doc(tasks=89, k=5, reps=20)
    assert (doc["recommendation"], doc["binding"]["resource"], doc["binding"]["at_once_limit"]) == (None, None, 4)
    line = next(x for x in plan_render.render(doc).splitlines() if x.startswith("what binds: "))
    assert line == ("what binds: no DEADLINE, so no configuration to judge; the sandboxes allow at most 4 trials at "
                    "once at or below 30% infra errors (the governor's MAX_INFRA_RATE, or the baseline's own rate). "
                    "A faster server shortens a trial by its decode share only (47%): the fastest here, "
                    "qwen3.8-27b-fp8-sglang-h200x4-tp4, makes a trial 36% shorter and the attempts that hit their "
                    "timeout 65% → 51%.")


# --------------------------------------------------------------------------- the verb


def make(*args: str, env: dict, target: str = "plan") -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-C", str(REPO), "--no-print-directory", target, *args], capture_output=True,
                          text=True, env=env, timeout=600)


@pytest.fixture
def clean_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "DRY_RUN", "CLI_SETTINGS", "DEADLINE")}
    env["STATE_ROOT"] = str(tmp_path / "state")
    return env


def test_make_plan_prints_one_table_of_dp_and_tp_and_writes_nothing(tmp_path, clean_env):
    jobs_before = (REPO / "jobs").exists()
    proc = make("RUN=qwen-t2-leaderboard", "DEADLINE=24h", "PLAN_REPS=20", "ALL=1", env=clean_env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "# plan: qwen-t2-leaderboard: 89 tasks × 5 attempts = 445 attempts"
    header = lines.index("| " + " | ".join(plan_render.COLUMNS) + " |")
    rows = [line for line in lines[header + 2:] if line.startswith("| ")]
    assert len(rows) == 8 * 14  # ALL=1: every configuration (tests/test_ceiling.py: the page without it)
    assert any(r.startswith("| qwen3.8-27b-fp8-sglang-h200 | 1 | 1 × 1 | 1 × 3 | 3 | 3 | ") for r in rows)
    assert any(r.startswith("| qwen3.8-27b-fp8-sglang-h200x2-tp2 | 2 | 1 × 2 | ") for r in rows)
    assert any(r.startswith("| qwen3.8-27b-fp8-sglang-h200x4 | 4 | 4 × 1 | ") for r in rows)
    assert any(line.startswith("baseline: qwen3.8-27b-fp8-sglang-h200 (1 replica × TP 1 on h200), 1 shard × -n 3")
               for line in lines)
    assert any(line.startswith("what binds: the sandboxes: ") for line in lines)
    # At 24 h nothing stays at or below 30% infra errors in time: said, with no command.
    rec = [line for line in lines if line.startswith("recommendation: ")]
    assert len(rec) == 1 and rec[0].startswith("recommendation: none: ") and "run it with:" not in proc.stdout
    assert not (tmp_path / "state").exists()
    assert (REPO / "jobs").exists() == jobs_before


def test_make_plan_dry_run_prints_the_command_with_the_settings_as_one_document(clean_env):
    """The tool's command line holds no setting: the run's settings go in TB_SETTINGS, the document the
    verb resolved, printed as it is. The line runs as printed and answers what make plan answers."""
    proc = make("RUN=qwen-t2-leaderboard", "DEADLINE=24h", "PLAN_REPS=20", "DRY_RUN=1", env=clean_env)
    assert proc.returncode == 0, proc.stderr
    words = shlex.split(proc.stdout)
    assert words[0].startswith("TB_SETTINGS=")
    assert words[1:] == [".venv/bin/python", "-m", "tools.money.plan", "--calibration",
                         f"{clean_env['STATE_ROOT']}/qwen-t2-leaderboard/calibration.json", "--sandbox-curve",
                         f"{clean_env['STATE_ROOT']}/namespaces/default/sandbox-curve.json", "--run-files", "-"]
    document = json.loads(words[0].removeprefix("TB_SETTINGS="))
    resolved, _, _ = run_settings.resolve_for_verb("qwen-t2-leaderboard", "plan",
                                               {"DEADLINE": "24h", "PLAN_REPS": "20", "DRY_RUN": "1"})
    assert document == {"run": "qwen-t2-leaderboard", "settings": resolved}
    assert (document["settings"]["N_ATTEMPTS"], document["settings"]["JOB_NAME"]) == (
        "5", "qwen3_8-27b-fp8-terminus2-tb21-leaderboard")
    assert "TB_SETTINGS is the run's resolved settings, one JSON document" in proc.stderr
    # Pasted as printed, with the run files' identities on its standard input: make plan's own page.
    identities = subprocess.run([str(REPO / ".venv/bin/python"), "-m", "tools.settings", "identity"], cwd=REPO,
                                capture_output=True, text=True, check=True).stdout
    pasted = subprocess.run(["bash", "-c", proc.stdout], cwd=REPO, input=identities, capture_output=True, text=True,
                            env=clean_env, timeout=600)
    assert pasted.returncode == 0, pasted.stderr
    real = make("RUN=qwen-t2-leaderboard", "DEADLINE=24h", "PLAN_REPS=20", env=clean_env)
    assert pasted.stdout == real.stdout and real.returncode == 0


@pytest.mark.parametrize("run_name, deadline, expected_run", [
    ("qwen-t2", "24h", "qwen-t2"),
    # make test only (full): the same path for other runs.
    pytest.param("qwen-t2-leaderboard", "48h", "qwen-t2-leaderboard", marks=pytest.mark.full),
    # A run on four H200s whose cheapest answer is one H200: the run file made for that server.
    pytest.param("qwen-t2-leaderboard-h200x4", "48h", "qwen-t2-leaderboard", marks=pytest.mark.full),
])
def test_the_plan_s_command_runs_as_written_under_dry_run(run_name, deadline, expected_run, clean_env):
    proc = make(f"RUN={run_name}", f"DEADLINE={deadline}", "PLAN_REPS=20", env=clean_env)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("run it with: "))
    words = shlex.split(line.removeprefix("run it with: "))
    assert words[:3] == ["make", "reproduce", f"RUN={expected_run}"]
    settings = dict(w.split("=", 1) for w in words[2:])
    assert set(settings) == {"RUN", "N_SHARDS", "N_CONCURRENT", "MAX_COST", "MOPUP_PASSES"}
    doc = json.loads(make(f"RUN={run_name}", f"DEADLINE={deadline}", "PLAN_REPS=20", "JSON=1", env=clean_env).stdout)
    rec = doc["recommendation"]
    assert int(settings["MAX_COST"]) == math.ceil(rec["row"]["usd_p90"] * 1.2)
    assert int(settings["MOPUP_PASSES"]) == max(3, rec["row"]["mopup_passes_p90"])
    # Executed as written (make's own argv), under DRY_RUN=1: make reproduce accepts it and prints its plan.
    dry = subprocess.run([*words, "DRY_RUN=1"], cwd=REPO, capture_output=True, text=True, env=clean_env, timeout=600)
    assert dry.returncode == 0, dry.stderr
    assert f"plan for run '{expected_run}'" in dry.stderr + dry.stdout
    assert f"--n-concurrent {settings['N_CONCURRENT']}" in dry.stdout + dry.stderr


@pytest.mark.parametrize("setting, message", [
    ("DEADLINE=24x", "plan: setting DEADLINE must be a number with an optional unit s, m, h or d (e.g. 4h), "
                     "more than zero, or empty, got '24x' (run 'qwen-t2-leaderboard')"),
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


def test_the_whole_space_is_every_configuration_with_a_finite_p90():
    # How long it takes is benchmarks/plan_speed.py's to measure (its baseline case is this input),
    # never a bound asserted here.
    doc = plan_doc(tasks=89, k=5, reps=200)
    assert len(doc["configurations"]) == 112
    assert math.isfinite(doc["baseline"]["wall_clock_p90_secs"])


# --------------------------------------------------------------------------- bounds: the work, the flavor, the price list


def plan_cli(*args: str, timeout: float = 120, **over) -> subprocess.CompletedProcess:
    """python -m tools.money.plan with the leaderboard's settings (89 tasks × 5, PLAN_REPS=5) and `over`
    in TB_SETTINGS, `args` its command line, its address space capped at 2 GiB: an unbounded read or
    allocation fails fast instead of filling the machine."""
    import resource

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    settings = {"DATASET_TASKS": 89, "N_ATTEMPTS": 5, "PLAN_REPS": 5, **over}
    env = {**os.environ, "TB_SETTINGS": tb_settings(**settings)}
    return subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-m", "tools.money.plan", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=timeout, preexec_fn=cap, env=env)


def test_work_past_the_budget_is_refused_in_one_line_before_anything_is_drawn(clean_env):
    """100,000 tasks × 100 × 10,000 once asked numpy for 745 GiB; 89 × 5 × 10,000 ran for minutes."""
    proc = make("RUN=qwen-t2-leaderboard", "DATASET_TASKS=100000", "N_ATTEMPTS=100", "PLAN_REPS=10000", env=clean_env)
    assert [line for line in proc.stderr.splitlines() if not line.startswith("make")] == [
        "plan: 100,000 tasks × 100 attempts = 10,000,000 attempts, above the 10,000 make plan simulates "
        "(docs/plan.md §7): plan a part of the run, N_TASKS=100 or fewer"]
    assert proc.returncode != 0 and proc.stdout == ""
    reps = plan_cli(PLAN_REPS=10000)
    assert (reps.returncode, reps.stdout, reps.stderr) == (1, "", (
        "plan: 89 tasks × 5 attempts × 10,000 repetitions = 4,450,000, above the 500,000 make plan simulates "
        "(docs/plan.md §7): set PLAN_REPS=1123 or fewer\n"))
    assert (plan.ATTEMPTS_CAP, plan.WORK_CAP) == (10_000, 500_000)
    plan.check_work(89, 5, 1123)
    plan.check_work(10_000, 1, 50)
    for tasks, k, reps in ((89, 5, 1124), (10_001, 1, 1), (5_000, 5, 1), (10_000, 1, 51)):
        with pytest.raises(plan.PlanError):
            plan.check_work(tasks, k, reps)


def test_a_flavor_with_no_gpu_is_refused_and_a_profile_that_cannot_run_is_no_candidate(clean_env, tmp_path):
    proc = make("RUN=qwen-t2-leaderboard", "SERVER_FLAVOR=h200x0", env=clean_env)
    assert [line for line in proc.stderr.splitlines() if not line.startswith("make")] == [
        "plan: SERVER_FLAVOR=h200x0 names no GPU (x0): name the flavor the model is served on, e.g. h200 or h200x2"]
    assert proc.returncode != 0 and proc.stdout == ""
    assert plan_server.gpus_of("h200x" + "9" * 5000) == 1  # a count past 9 digits is part of the name, never int()'d
    # Profiles are read as plain lines; one whose replicas do not fill its flavor (make serve refuses it),
    # or that only sources another, is no candidate.
    (tmp_path / "p.env").write_text("MODEL=m\nSERVER_FLAVOR=h200x2 # two\nSERVER_DP=2\n")
    (tmp_path / "q.env").write_text('source "${BASH_SOURCE[0]%/*}/p.env"\n')
    (tmp_path / "r.env").write_text("MODEL=m\nSERVER_FLAVOR=h200x4\nSERVER_DP=2\nSERVER_TP=1\n")
    (tmp_path / "s.env").write_text("MODEL=m\nSERVER_FLAVOR=h200x4\nSERVER_DP=99999\n")
    assert [(p.name, p.dp, p.tp) for p in plan_server.profiles_for("m", tmp_path)] == [("p", 2, 1)]
    # A flavor of no family: the examples are the flavors the model's own profiles are served on, never
    # an empty name pasted into the sentence ("e.g.  or x2").
    proc = make("RUN=qwen-t2-leaderboard", "SERVER_FLAVOR=x0", env=clean_env)
    assert [line for line in proc.stderr.splitlines() if not line.startswith("make")] == [
        "plan: SERVER_FLAVOR=x0 names no GPU (x0): name the flavor the model is served on, e.g. h200 or h200x2"]


UNPRICED = ("has no price in env/flavor-prices.tsv, the price list make plan reads (copied from HF's Jobs pricing "
            "page).{guess} Set {name} to a flavor it lists, or add {flavor}'s hourly price to it if HF Jobs offers "
            "it (hf jobs hardware)")


def test_an_unpriced_server_flavor_is_one_line_naming_the_closest_priced_one_in_every_verb(clean_env):
    """A typo of a flavor (h200x3) once put a KeyError's traceback inside make print's estimate and
    make reproduce's plan, which still exited 0."""
    why = "SERVER_FLAVOR=h200x3 " + UNPRICED.format(guess=" Did you mean h200x2?", name="SERVER_FLAVOR",
                                                    flavor="h200x3")
    proc = make("RUN=qwen-t2-leaderboard", "SERVER_FLAVOR=h200x3", env=clean_env)
    assert (proc.returncode, proc.stdout, proc.stderr.splitlines()[0]) == (2, "", f"plan: {why}")
    printed = make("RUN=qwen-t2-leaderboard", "SERVER_FLAVOR=h200x3", env=clean_env, target="print")
    assert printed.returncode == 0 and "Traceback" not in printed.stdout + printed.stderr
    assert f"# estimate: the run's length is not estimated: {why}" in printed.stdout.splitlines()
    # The closest priced flavor, case and spaces forgiven; none when nothing is close.
    assert plan_checks.closest_flavor("H200", ["cpu-basic", "h200", "h200x2"]) == "h200"
    assert plan_checks.closest_flavor("h200 ", ["cpu-basic", "h200", "h200x2"]) == "h200"
    assert plan_checks.closest_flavor("l40x4", ["l40sx1", "l40sx4", "h200x4"]) == "l40sx4"
    assert plan_checks.closest_flavor("zzz", ["cpu-basic", "h200", "h200x2"]) is None
    # A flavor no flavor could be never reaches the plan: the settings' check refuses it, as in every verb.
    proc = make("RUN=qwen-t2-leaderboard", "SERVER_FLAVOR=\x1b[31m", env=clean_env)
    assert [line for line in proc.stderr.splitlines() if not line.startswith("make")] == [
        "plan: setting SERVER_FLAVOR must be an hf jobs flavor such as cpu-basic, or empty, got '\\x1b[31m' "
        "(run 'qwen-t2-leaderboard')"]


def test_a_price_list_of_one_s_own_is_named_as_itself(tmp_path):
    """--prices PATH: every message and the page name PATH, never env/flavor-prices.tsv."""
    own = tmp_path / "prices.tsv"
    own.write_text("h200x2\t9.00\ncpu-upgrade\t0.05\nexposed-ports\t0.01\n")
    proc = plan_cli("--prices", str(own))
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", "plan: SERVER_FLAVOR=h200 " + UNPRICED.format(
        guess=" Did you mean h200x2?", name="SERVER_FLAVOR", flavor="h200").replace(
        "env/flavor-prices.tsv, the price list make plan reads (copied from HF's Jobs pricing page)",
        f"{own}, the price list make plan reads (--prices)") + "\n")
    proc = plan_cli("--prices", str(own), SERVER_FLAVOR="h200x2", SANDBOX_FLAVOR="cpu-upgrad")
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", "plan: SANDBOX_FLAVOR=cpu-upgrad " + UNPRICED.format(
        guess=" Did you mean cpu-upgrade?", name="SANDBOX_FLAVOR", flavor="cpu-upgrad").replace(
        "env/flavor-prices.tsv, the price list make plan reads (copied from HF's Jobs pricing page)",
        f"{own}, the price list make plan reads (--prices)") + "\n")
    proc = plan_cli("--prices", str(own), SERVER_FLAVOR="h200x2", SERVER_DP=2)
    assert proc.returncode == 0, proc.stderr
    assert f"- prices: {own} (--prices): h200x2 $9/h, exposed port $0.01/h, sandbox cpu-upgrade $0.05/h + its exposed " \
           "port $0.01/h (a sandbox is an HF Job harbor reaches through its port, as make cost counts it)" \
        in proc.stdout.splitlines()


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


# Every setting the plan reads, and odd values for it: make print and make reproduce run the plan for
# their estimate, and keep its last line as the reason it is missing. A value the catalogue's type
# refuses never reaches the plan from a verb (tools/settings.py refuses it first); handed over in a
# document of one's own, it is refused in one line too.
ODD_VALUES = ("", " ", "0", "-1", "0.5", "1e3", "nan", "inf", "-inf", "1e309", "9" * 30, "x", "\x1b[31m", "h200x3",
              "x0", "../x", "/", "/dev/zero", "a" * 5000, "0s", "-1h", "1e400h", "64", "65", "1000", "10000", "100000")
# What the command line still takes: files, and make print's own configuration.
ODD_OPTIONS = ("--calibration", "--prices", "--sandbox-curve")


def plan_outcome(*args: str, **over) -> list[str]:
    """plan.cli on the leaderboard's small settings (3 tasks, PLAN_REPS=2) and `over`, `args` its
    command line: a result (exit 0, every figure of the JSON finite), or one line in the verb's voice
    with exit 1 or 2, never a traceback. Its lines."""
    def finite_only(constant):
        raise AssertionError(f"{constant} in the plan's JSON")

    result = invoke("--json", *args, **{"DATASET_TASKS": 3, "PLAN_REPS": 2, **over})
    lines = result.output.splitlines()
    if result.exit_code == 0:
        assert result.exception is None
        json.loads(result.output, parse_constant=finite_only)
    else:
        assert isinstance(result.exception, SystemExit), (args[:2], over.keys(), result.exc_info)
        assert result.exit_code in (1, 2) and len(lines) == 1 and lines[0].startswith("plan: "), (args[:2], lines)
    return lines


@pytest.mark.parametrize("name", plan.READS + ODD_OPTIONS)
def test_every_odd_value_of_a_setting_is_a_result_or_one_line_for_make_print_s_estimate(name):
    """The run's own row alone (--own, what make print and make reproduce ask), so the whole sweep is fast."""
    for value in ODD_VALUES:
        if name.startswith("--"):
            plan_outcome(name, value, "--own", "1", "3")
        else:
            plan_outcome("--own", "1", "3", **{name: value})


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.full) if n not in ("DEADLINE", "MAX_INFRA_RATE")
                                  else n for n in plan.READS + ODD_OPTIONS])
def test_every_odd_value_of_a_setting_is_a_result_or_one_line_for_make_plan(name):
    """The table (make plan), every candidate; make check takes the two settings only the table reads."""
    for value in ODD_VALUES:
        if name.startswith("--"):
            plan_outcome(name, value)
        else:
            plan_outcome(**{name: value})


def test_the_plan_s_command_line_names_no_setting():
    """Every setting reaches the plan in TB_SETTINGS; its options are what no setting says."""
    catalogue = run_settings.catalogue()
    options = [opt for param in plan.cli.params for opt in param.opts]
    assert sorted(options) == ["--calibration", "--json", "--own", "--prices", "--run-files", "--sandbox-curve"]
    for param in plan.cli.params:
        for word in (param.name, *(opt.lstrip("-").replace("-", "_") for opt in param.opts)):
            assert word.upper() not in catalogue, (word, param.opts)


def test_the_identity_the_plan_matches_run_files_by_is_the_catalogue_s():
    """The identity marks of env/defaults.env plus JOB_NAME, read from the catalogue; no list of its own."""
    catalogue = run_settings.catalogue()
    marked = tuple(name for name, s in catalogue.items() if s.identity)
    assert plan.identity_names() == marked and "N_ATTEMPTS" in marked and "JOB_NAME" not in marked
    assert not hasattr(plan, "IDENTITY")
    s = run_settings.current({"TB_SETTINGS": tb_settings(JOB_NAME="lb", N_ATTEMPTS=5)})
    assert plan.identity_of(s) == {"JOB_NAME": "lb", **{name: s.raw(name) for name in marked}}
    # A run file differing in any one identity setting is another benchmark; in SERVER and JOB_NAME, the same.
    files = [{"run": "x", "settings": {**plan.identity_of(s), "SERVER": "p", "JOB_NAME": "other"}}]
    assert plan.run_file_for("p", plan.identity_of(s), files)["run"] == "x"
    for name in marked:
        changed = [{"run": "x", "settings": {**files[0]["settings"], name: "something else"}}]
        assert plan.run_file_for("p", plan.identity_of(s), changed) is None, name


def test_the_plan_reads_the_catalogue_s_bounds_and_they_are_the_ones_its_figures_need():
    """The bounds the plan once checked on its flags are the catalogue's types now: one check, made by
    tools/settings.py for every verb (tests/test_settings.py holds each bound)."""
    catalogue = run_settings.catalogue()
    assert (catalogue["N_ATTEMPTS"].type.low, catalogue["N_ATTEMPTS"].type.high) == (1, tally_trials.MAX_ATTEMPTS)
    multiplier = catalogue["AGENT_TIMEOUT_MULTIPLIER"].type
    assert (multiplier.kind, multiplier.low, multiplier.high) == ("number", *plan_evidence.MULTIPLIER_RANGE)
    assert catalogue["PLAN_REPS"].type.high * 50 == plan.WORK_CAP


def test_without_tb_settings_the_plan_refuses_in_one_line_naming_make_plan():
    env = {k: v for k, v in os.environ.items() if k != "TB_SETTINGS"}
    for given in ({}, {"TB_SETTINGS": "{not json"}, {"TB_SETTINGS": json.dumps({"run": "r", "settings": {}})}):
        proc = subprocess.run([str(REPO / ".venv/bin/python"), "-m", "tools.money.plan", "--json"], cwd=REPO,
                              capture_output=True, text=True, env={**env, **given}, timeout=60)
        assert (proc.returncode, proc.stdout) == (1, ""), given
        assert len(proc.stderr.splitlines()) == 1 and "make plan RUN=<run>" in proc.stderr, proc.stderr
    proc = subprocess.run([str(REPO / ".venv/bin/python"), "-m", "tools.money.plan"], cwd=REPO,
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.stderr == "plan: no run's settings given (TB_SETTINGS): run this through its make verb (make plan RUN=<run>)\n"


def test_the_task_count_is_the_settings_else_the_job_s_plan(tmp_path):
    """TASKS' words, else DATASET_PATH's task dirs, else DATASET_TASKS, at most N_TASKS; with none, the
    run's first job's planned trials ÷ k."""
    def count(**over):
        return plan_tasks.settings_task_count(run_settings.current({"TB_SETTINGS": tb_settings(**over)}))

    dataset = tmp_path / "local-dataset"
    for task in ("a", "b", "c", "d"):
        (dataset / task).mkdir(parents=True)
        (dataset / task / "task.toml").write_text("")
    (dataset / "notes").mkdir()
    assert count() is None
    assert count(TASKS="a 'b c'", DATASET_PATH=dataset, DATASET_TASKS=89) == 2
    assert count(DATASET_PATH=dataset, DATASET_TASKS=89) == 4
    assert count(DATASET_PATH=tmp_path / "none", DATASET_TASKS=89) == 89
    assert count(DATASET_TASKS=89, N_TASKS=10) == 10 and count(DATASET_TASKS=8, N_TASKS=10) == 8
    assert count(N_TASKS=10) == 10
    # A dataset the reference ran whole is counted without DATASET_TASKS (terminal-bench 2.1: 89).
    tb21 = "https://huggingface.co/datasets/harborframework/terminal-bench-2.1"
    assert count(DATASET_REPO=tb21) == count(DATASET_REPO=tb21 + ".git") == 89
    assert count(DATASET="terminal-bench/terminal-bench-2-1@6") == count(DATASET="terminal-bench/terminal-bench-2-1") == 89
    assert count(DATASET_REPO=tb21, N_TASKS=5) == 5 and count(DATASET_REPO=tb21 + "-fork") is None
    # None of them: the job's plan (its result.json's n_total_trials ÷ k), else one line saying what to set.
    jobs = tmp_path / "jobs"
    write_job(jobs, "r", [TrialSpec("a", 1.0, agent_minutes=10), TrialSpec("b", 0.0, agent_minutes=10)])
    assert plan_tasks.task_count(run_settings.current({"TB_SETTINGS": tb_settings(JOBS_DIR=jobs, JOB_NAME="r")})) == 2
    assert plan_outcome(JOBS_DIR=tmp_path / "no-jobs", DATASET_TASKS="") == [
        "plan: the run's task count is unknown: set DATASET_TASKS (or TASKS, N_TASKS) in its run file, or on the "
        "command line"]
    assert plan_outcome(DATASET_PATH=tmp_path / "no-jobs", DATASET_TASKS="") == [
        "plan: the run's task count is unknown: set DATASET_TASKS (or TASKS, N_TASKS) in its run file, or on the "
        "command line"]


def test_a_setting_out_of_range_is_named_in_one_line_by_the_settings_check_for_every_verb(tmp_path, clean_env):
    """Click's usage error was five lines ("Usage: …", "Error: Invalid value for '--reps' …"), and make
    print kept all of it as the reason its estimate is missing; nan passed every range unchecked. The
    ranges are the catalogue's now: make plan, make print and scripts/plan.sh refuse with the same line."""
    cases = {
        "PLAN_REPS=0": "setting PLAN_REPS must be a whole number from 1 to 10000, got '0'",
        "AGENT_TIMEOUT_MULTIPLIER=nan": "setting AGENT_TIMEOUT_MULTIPLIER must be a number from 0.01 to 100, got 'nan'",
        "DATASET_TASKS=1e3": "setting DATASET_TASKS must be a positive whole number below 1000000000, or empty, got '1e3'",
        "MAX_RETRIES=\x1b[31m": "setting MAX_RETRIES must be a whole number from 0 to 10, got '\\x1b[31m'",
        "N_ATTEMPTS=101": "setting N_ATTEMPTS must be a whole number from 1 to 100, got '101'",
    }
    for given, why in cases.items():
        for verb in ("plan", "print"):
            proc = make("RUN=qwen-t2-leaderboard", given, f"JOBS_DIR={tmp_path / 'no-jobs'}", env=clean_env, target=verb)
            assert [line for line in proc.stderr.splitlines() if not line.startswith("make")] == [
                f"{verb}: {why} (run 'qwen-t2-leaderboard')"], given
            assert proc.returncode != 0 and proc.stdout == ""
        name, value = given.split("=", 1)
        direct = subprocess.run([str(REPO / "scripts" / "plan.sh")], capture_output=True, text=True, timeout=60,
                                env={**clean_env, "RUN": "qwen-t2-leaderboard", name: value})
        assert (direct.returncode, direct.stderr) == (1, f"plan: {why} (run 'qwen-t2-leaderboard')\n")
    # What the command line still takes is the tool's own to refuse, in one line.
    assert plan_outcome("--own", "1", "1001") == [
        "plan: setting N_SHARDS or N_CONCURRENT must be a whole number from 1 to 1,000, got '1001' (--own)"]
    assert plan_outcome("--no-such-option") == ["plan: No such option '--no-such-option'."]
    # A JOBS_DIR or calibration path the system cannot look up (too long a name): one line, not OSError.
    long = "a" * 4000
    assert plan_outcome(JOBS_DIR=long) == [
        f"plan: the run's job dirs cannot be looked for under JOBS_DIR={long[:200]}… (truncated, 4,000 chars): "
        f"File name too long; set JOBS_DIR to the directory harbor writes them to"]
    long = "a" * 5000
    doc = json.loads("\n".join(plan_outcome("--calibration", long, "--own", "1", "3")))
    assert doc["evidence"]["notes"] == [f"{long[:200]}… (truncated, 5,000 chars) cannot be read (File name too "
                                        f"long); not used"]


def test_a_run_s_own_configuration_past_its_tasks_simulates_only_what_can_run():
    """N_SHARDS=64 × N_CONCURRENT=1000 on one task at 10,000 repetitions once asked numpy for 5 GB of
    idle slots: a shard with no task and a slot with no attempt hold nothing, so neither is kept.
    The figures are those of the one shard and slot that run."""
    one = plan_sim.simulate(np.array([600.0]), 1, 1, 1, 1, never, 4, np.random.default_rng(0))
    wide = plan_sim.simulate(np.array([600.0]), 1, 1, 64, 1000, never, 4, np.random.default_rng(0))
    assert wide.makespan.tolist() == one.makespan.tolist() == [600.0] * 4
    assert plan_sim.pass_makespan(np.full((2, 1, 3), 10.0), 1000).tolist() == [10.0, 10.0]
    # Its address space capped at 2 GiB (plan_cli), as the idle slots would not fit.
    proc = plan_cli("--own", "64", "1000", "--json", DATASET_TASKS=1, N_ATTEMPTS=1, PLAN_REPS=10000)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["own"]["shards"], doc["own"]["n_concurrent"], doc["reps"]) == (64, 1000, 10_000)


def test_the_run_s_own_job_dirs_of_another_model_are_refused_not_planned_from():
    """A run file copied from another keeps its JOB_NAME: the job dirs found are the other model's,
    whose durations say nothing of this run's. Refused with the fix, as the tally refuses them."""
    jobs = str(REPO / "examples" / "jobs")
    with pytest.raises(plan_evidence.EvidenceError, match=r"example-terminus2-tb21 ran model 'openai/Qwen/Qwen3.8-27B-FP8' \(its "
                                               r"config.json\), not the run's MODEL Other/Model-7B.*own JOB_NAME"):
        plan_evidence.choose(jobs, "example-terminus2-tb21", "Other/Model-7B", "h200", 1, 1)


# --------------------------------------------------------------------------- one estimator


@pytest.mark.full  # the pages' generated figures: make test
def test_print_reproduce_and_the_pages_give_make_plan_s_figures_for_the_leaderboard_run(tmp_path, clean_env):
    """One estimate for one run: make print's, make reproduce's plan, README.md's and
    docs/scaling.md's generated tables all say make plan's median and p90."""
    check = subprocess.run([str(REPO / ".venv/bin/python"), "benchmarks/plan_estimates.py", "--check"], cwd=REPO,
                           capture_output=True, text=True, env=clean_env, timeout=900)
    assert check.returncode == 0, check.stderr
    empty = f"JOBS_DIR={tmp_path / 'no-jobs'}"
    doc = json.loads(make("RUN=qwen-t2-leaderboard", "JSON=1", empty, env=clean_env).stdout)
    base = doc["baseline"]
    median, p90 = f"{base['wall_clock_median_secs'] / 3600:.1f} h", f"{base['wall_clock_p90_secs'] / 3600:.1f} h"
    printed = make("RUN=qwen-t2-leaderboard", empty, env=clean_env, target="print")
    assert printed.returncode == 0, printed.stderr
    estimate = next(x for x in printed.stdout.splitlines() if x.startswith("# estimate: "))
    assert f": median {median}, p90 {p90} from launch to the last mop-up pass" in estimate
    assert f"${base['usd_median']:,.0f} median, ${base['usd_p90']:,.0f} p90" in estimate
    dry = make("RUN=qwen-t2-leaderboard", empty, "DRY_RUN=1", env=clean_env, target="reproduce")
    assert dry.returncode == 0, dry.stderr
    assert f"estimate {estimate.removeprefix('# estimate: ')}" in dry.stdout.splitlines()
    for page in ("README.md", "docs/scaling.md"):
        row = next(x for x in (REPO / page).read_text().splitlines()
                   if x.startswith("| `qwen-t2-leaderboard` | as its run file says"))
        assert f"| {median} | {p90} | ${base['usd_median']:,.0f} / ${base['usd_p90']:,.0f} |" in row, page
    # No page says "up to" of a figure that is no upper bound, nor the old weeks.
    for page in ("README.md", "docs/scaling.md"):
        text = (REPO / page).read_text()
        assert "may take up to" not in text and "two to three weeks" not in text, page


def test_a_concurrency_past_the_reference_s_gets_its_infra_figures_beside_the_estimate(tmp_path, clean_env):
    printed = make("RUN=qwen-t2-leaderboard", "N_CONCURRENT=50", f"JOBS_DIR={tmp_path / 'no-jobs'}", env=clean_env,
                   target="print")
    estimate = next(x for x in printed.stdout.splitlines() if x.startswith("# estimate: "))
    assert estimate.endswith(". 50 trials at once is past the 3 the reference saw work: the reference's infra errors: "
                             "4.5% and 9.0% at -n 3 (Runs 2 and 3), about 70% at -n 8 (Run 1; docs/reference-runs.md); "
                             "this plan reads 70% infra errors at 50")
    # At the reference's own -n 3, no such note.
    printed = make("RUN=qwen-t2-leaderboard", f"JOBS_DIR={tmp_path / 'no-jobs'}", env=clean_env, target="print")
    assert "past the 3 the reference saw work" not in printed.stdout


@pytest.mark.full  # the pages' generated figures: make test
def test_the_readme_s_scaling_commands_are_the_plan_s_own(clean_env, tmp_path):
    """The README's scaling section runs what make plan says: its reproduce line is the plan's
    "run it with" line for DEADLINE=48h, and it carries no other: a multi-GPU line appears only where
    the plan's own row for it is faster or cheaper than that one (the four-H200 data-parallel line it
    once showed took as long for four times the dollars)."""
    empty = f"JOBS_DIR={tmp_path / 'no-jobs'}"
    proc = make("RUN=qwen-t2-leaderboard", "DEADLINE=48h", empty, env=clean_env)
    assert proc.returncode == 0, proc.stderr
    run_with = next(x for x in proc.stdout.splitlines() if x.startswith("run it with: ")).removeprefix("run it with: ")
    section = (REPO / "README.md").read_text().split("## Scaling a run", 1)[1].split("\n## ", 1)[0]
    commands = [line.split(" # ")[0].strip() for line in section.splitlines() if line.startswith("    make ")]
    assert "make plan RUN=qwen-t2-leaderboard DEADLINE=48h" in commands
    assert run_with in commands
    doc = json.loads(make("RUN=qwen-t2-leaderboard", "DEADLINE=48h", "JSON=1", empty, env=clean_env).stdout)

    def row_of(command: str) -> dict:
        words = dict(w.split("=", 1) for w in shlex.split(command)[2:])
        server = re.search(r"^SERVER=(\S+)$", (REPO / "runs" / f"{words['RUN']}.env").read_text(), re.M).group(1)
        return next(c for c in doc["configurations"] if c["profile"] == server
                    and c["shards"] == int(words.get("N_SHARDS", 1)) and c["n_concurrent"] == int(words["N_CONCURRENT"]))

    chosen = row_of(run_with)
    others = [c for c in commands if c.startswith("make reproduce ") and c != run_with]
    for command in others:
        row = row_of(command)
        assert row["wall_clock_p90_secs"] < chosen["wall_clock_p90_secs"] or row["usd_p90"] < chosen["usd_p90"], command