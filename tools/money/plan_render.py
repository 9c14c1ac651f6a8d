"""plan_render: make plan's page and its one-line summary, from the plan's JSON (tools/money/plan.py).

Every figure is rendered through tools/fmt.py (hours, percents), so the plan reads as the tally
and the watch do; the page says where each number comes from (docs/plan.md §4).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from tools import fmt
from tools.money import plan_evidence

REPO_ROOT = Path(__file__).resolve().parents[2]
# Scale-out's aim (issue 21): a k = 5 run in about a day at the single-GPU run's cost, give or take 10%.
COST_TARGET = 1.1
# The MAX_COST a recommendation carries: its p90 spend and this much more, for what the plan does
# not price (docs/plan.md §6): the smoke test, the server's time after the last pass until
# AUTO_STOP stops it, a relaunched server's loading.
COST_MARGIN = 0.20


def ceiling_of(usd_p90: float) -> int:
    """The MAX_COST of a configuration whose p90 spend is usd_p90: the one figure make plan, make
    print, make reproduce's plan, the README and the shipped run files give (tests hold them to it)."""
    return math.ceil(round(usd_p90, 2) * (1 + COST_MARGIN))


def server_timeout_of(p90_secs: float) -> tuple[int, str]:
    """What a configuration whose p90 wall-clock is p90_secs needs of SERVER_TIMEOUT: its p90 with
    COST_MARGIN to spare, in seconds, and that rounded up to whole hours, the figure a shipped run
    file holds (benchmarks/plan_estimates.py) and a short timeout's warning names (scripts/argv.sh)."""
    need = math.ceil(round(p90_secs, 1) * (1 + COST_MARGIN))
    return need, f"{math.ceil(need / 3600)}h"

# Rows a page shows of each server without ALL=1 (with the baseline, the run's own, the
# recommendation and the fastest): make plan RUN=qwen-t2 fits in 40 lines.
CHEAPEST_PER_SERVER = 2

COLUMNS = ("server", "GPUs", "replicas × TP", "shards × -n", "at once", "per replica", "step", "trial ×",
           "timeouts", "infra (sandbox + server)", "median wall-clock", "p90 wall-clock", "dollars", "p90 dollars",
           "mop-up passes (p90)")


def past_reference(at_once: float) -> bool:
    """More trials at once than the reference saw work (-n 3 on one server)."""
    return at_once > plan_evidence.REFERENCE_LOW_AT_ONCE


def row_cells(r: dict) -> list[str]:
    star = "*" if past_reference(r["at_once"]) else ""
    step = "-" if r["step_ms"] is None else f"{r['step_ms']:.1f} ms"
    return [r["profile"], str(r["gpus"]), f"{r['replicas']} × {r['tp']}", f"{r['shards']} × {r['n_concurrent']}",
            str(r["at_once"]), f"{r['per_replica']:g}", step, f"{r['trial_factor']:.2f}", fmt.percent(r["timeout_share"], 0),
            f"{fmt.percent(r['infra_rate'], 0)}{star} ({fmt.percent(r['infra_sandbox'], 0)} + {fmt.percent(r['infra_server'], 0)})",
            fmt.hours(r["wall_clock_median_secs"]), fmt.hours(r["wall_clock_p90_secs"]), f"${r['usd_median']:,.0f}",
            f"${r['usd_p90']:,.0f}", f"{r['mopup_passes_mean']:.1f} ({r['mopup_passes_p90']})"]


def describe(r: dict) -> str:
    return (f"{r['profile']} ({r['replicas']} replica{'s' * (r['replicas'] > 1)} × TP {r['tp']} on {r['flavor']}), "
            f"{r['shards']} shard{'s' * (r['shards'] > 1)} × -n {r['n_concurrent']} ({r['at_once']} at once)")


REFERENCE_FIGURES = ("the reference's infra errors: 4.5% and 9.0% at -n 3 (Runs 2 and 3), about 70% at -n 8 "
                     "(Run 1; docs/reference-runs.md)")


def evidence_lines(doc: dict) -> list[str]:
    e, c, srv = doc["evidence"], doc["infra_curve"], doc["server_model"]
    where = f"{e['server_flavor']} at {e['at_once']:g} trials at once" if e["at_once"] else e["server_flavor"]
    fitted = (f"{e['settled_trials']} settled trials, {e['timed_out']} of them timed out ({', '.join(e['job_dirs'])})"
              if e["settled_trials"] else f"{e['reference_run']}: {e['timed_out']} of 89 trials hit ×4's 3,600 s")
    pts = " and ".join(f"{rate:.0%} at {n:g}" for n, rate in zip(c["at_once"], c["rates"]))
    times = (f"exponential, mean {e['mean_agent_secs'] / 60:.1f} min on {where} (fitted to {e['source']}: {fitted})"
             if not doc.get("recorded_task_secs") else
             f"the reference's recorded time of this run's task, {fmt.hours(doc['recorded_task_secs'])} (the TB3 smoke: "
             f"docs/reference-runs.md §2), every attempt alike: a record, not a fit, so this plan repeats it")
    lines = [
        f"- agent times: {times}; cut at the timeout, {doc['agent_timeout_secs']:g} s (×{doc['agent_timeout_multiplier']:g}); "
        f"+{plan_evidence.TRIAL_OVERHEAD_SECS:g} s each (the sandbox's start, at most 120 s; the verifier is not timed here)",
        f"- infra errors: sandbox side through {pts} trials at once over every shard, flat outside; model-server "
        f"side {c['server_rate']:.1%} at any load; interruptions left out. An errored attempt takes "
        f"{e['infra_fraction']:.2f} of its duration and "
        + (f"is tried again in the run up to MAX_RETRIES={doc['max_retries']} times in its slot; one still errored "
           f"waits for the next mop-up pass" if doc["max_retries"] else "waits for the next mop-up pass")
        + ", run until every attempt has settled",
    ]
    if doc.get("sandbox_budget"):
        lines.append(f"- {doc['sandbox_budget']['line']}")
    if srv["decode_share"] is None:
        lines.append(f"- server: {srv['note']}")
    else:
        lines.append(f"- server: a decode step streams each GPU's share of the weights and the sequences' KV and state "
                     f"(tools/money/plan_server.py, H200 at 3.86 TB/s measured; context {srv['context_tokens']:,} tokens, "
                     f"an assumption); {srv['note']}. A trial's decode share is {srv['decode_share']:.0%} on the "
                     f"evidence's server ({srv['source_step_ms']:.2f} ms a step), so a server whose step is r times that "
                     f"makes a trial 1 - f + f r times as long (trial ×); TP steps leave out their all-reduces")
        lines.append(f"- timeouts: the share of attempts that reach the {doc['agent_timeout_secs']:g} s timeout, "
                     f"exp(-timeout / (mean × trial ×)): a faster server finishes more of them before it")
    lines.append(f"- server loading {doc['loading_secs'] / 60:g} min (READY_TIMEOUT: an upper bound, no loading time "
                 f"is recorded); {doc['reps']} repetitions, seed {doc['seed']}; dollars are medians and 90th percentiles")
    prices = doc["prices"]
    lines.append(f"- prices: {prices['source']}: " + ", ".join(f"{f} ${p:g}/h" for f, p in prices["usd_per_hour"].items())
                 + f", exposed port ${prices['exposed_port_usd_per_hour']:g}/h, sandbox {prices['sandbox_flavor']} "
                   f"${prices['sandbox_usd_per_hour']:g}/h + its exposed port ${prices['exposed_port_usd_per_hour']:g}/h "
                   f"(a sandbox is an HF Job harbor reaches through its port, as make cost counts it)")
    return lines


def sandbox_words(b: dict, ceiling: float) -> str:
    if b["at_once_limit"] < 1:
        return (f"the sandboxes keep the infra rate at or below {ceiling:.0%} at no number of trials at once (the "
                f"governor's MAX_INFRA_RATE, or the baseline's own rate)")
    return (f"the sandboxes allow at most {b['at_once_limit']} trials at once at or below {ceiling:.0%} infra errors "
            f"(the governor's MAX_INFRA_RATE, or the baseline's own rate)")


def binding_line(doc: dict) -> str:
    b, ceiling = doc["binding"], doc["infra_ceiling"]
    speed = ""
    if b["decode_share"] is not None:
        speed = (f" A faster server shortens a trial by its decode share only ({b['decode_share']:.0%}): the fastest "
                 f"here, {b['fastest_profile']}, makes a trial {1 - b['fastest_factor']:.0%} shorter and the attempts "
                 f"that hit their timeout {fmt.percent(b['baseline_timeout_share'], 0)} → {fmt.percent(b['fastest_timeout_share'], 0)}.")
    allows = (f"at most {b['at_once_limit']} trials at once keep the infra rate at or below {ceiling:.0%} (the "
              f"governor's MAX_INFRA_RATE, or the baseline's own rate)")
    if b["resource"] == "sandboxes":
        return (f"what binds: the sandboxes: {allows}, whatever the GPUs; more replicas add no trial at once.{speed}")
    if b["resource"] == "server":
        return f"what binds: the server and the deadline, not the sandboxes ({allows}).{speed}"
    # No DEADLINE: no row to judge, so only the sandboxes' limit, which holds whatever the GPUs.
    return f"what binds: no DEADLINE, so no configuration to judge; {sandbox_words(b, ceiling)}.{speed}"


def same_row(a: dict, b: dict) -> bool:
    return (a["profile"], a["shards"], a["n_concurrent"]) == (b["profile"], b["shards"], b["n_concurrent"])


def shown_rows(doc: dict, every_row: bool) -> list[dict]:
    """The table's rows, cheapest first: every configuration with every_row (ALL=1); else the
    baseline, the run's own configuration, the recommendation, and, within the infra ceiling, the
    CHEAPEST_PER_SERVER cheapest of each server and the fastest of all (a page, not a wall: the rest
    is ALL=1's or --json's)."""
    rows = doc["configurations"]
    if not every_row:
        # Within the infra ceiling, as a recommendation is (a server with no such row: its own cheapest).
        fit = [r for r in rows if r["infra_rate"] <= doc["infra_ceiling"] + 1e-9] or rows
        keep = [doc["baseline"], doc["own"], min(fit, key=lambda r: (r["wall_clock_p90_secs"], r["usd_median"]))]
        if doc["recommendation"]:
            keep.append(doc["recommendation"]["row"])
        for profile in dict.fromkeys(r["profile"] for r in rows):
            mine = [r for r in fit if r["profile"] == profile] or [r for r in rows if r["profile"] == profile]
            keep += sorted(mine, key=lambda r: r["usd_median"])[:CHEAPEST_PER_SERVER]
        rows = [r for r in rows if any(same_row(r, k) for k in keep)]
        if not any(same_row(doc["own"], r) for r in rows):
            rows.append(doc["own"])
    return sorted(rows, key=lambda r: (r["usd_median"], r["wall_clock_p90_secs"]))


def render(doc: dict, every_row: bool = False) -> str:
    lines = [f"# plan: {doc['run']}: {doc['tasks']} task{'s' * (doc['tasks'] > 1)} × {doc['n_attempts']} "
             f"attempt{'s' * (doc['n_attempts'] > 1)} = {doc['attempts']} attempt{'s' * (doc['attempts'] > 1)}", ""]
    lines += evidence_lines(doc)
    rows = shown_rows(doc, every_row)
    lines += ["", "| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(row_cells(r)) + " |" for r in rows]
    hidden = len(doc["configurations"]) - len(rows)
    if hidden > 0:
        lines.append(f"(cheapest first; {hidden} more configuration{'s' * (hidden > 1)}: ALL=1 shows every one)")
    if any(past_reference(r["at_once"]) for r in rows):
        lines += ["", f"* past the {plan_evidence.REFERENCE_LOW_AT_ONCE} trials at once the reference saw work: {REFERENCE_FIGURES}"]
    b = doc["baseline"]
    lines += ["", f"baseline: {describe(b)}: median {fmt.hours(b['wall_clock_median_secs'])}, "
                  f"p90 {fmt.hours(b['wall_clock_p90_secs'])}, ${b['usd_median']:,.0f} (p90 ${b['usd_p90']:,.0f})"]
    lines.append(configured_line(doc))
    if doc.get("submission_line"):
        lines.append(doc["submission_line"])
    lines.append(binding_line(doc))
    rec = doc["recommendation"]
    if rec is None:
        lines.append("recommendation: none (no DEADLINE given: DEADLINE=24h picks the cheapest configuration "
                     "that meets it)")
    else:
        r = rec["row"]
        ratio = f"${r['usd_median']:,.0f}, {rec['usd_ratio_to_baseline']:.2f}× the baseline's ${b['usd_median']:,.0f}"
        if rec["meets"]:
            w = rec["run_with"]
            lines.append(f"recommendation: {describe(r)}: the cheapest whose p90 wall-clock "
                         f"({fmt.hours(r['wall_clock_p90_secs'])}) meets the deadline of {fmt.hours(doc['deadline_secs'])}, "
                         f"among those at most {rec['infra_ceiling']:.0%} infra errors; {ratio}")
            if not w["exists"]:
                lines.append(f"write first: {w['write_first']}")
            lines.append(f"run it with: {w['command']}")
            lines.append(f"  (MAX_COST={w['max_cost']}: the p90 spend ${r['usd_p90']:,.0f} + {COST_MARGIN:.0%} for what "
                         f"the plan does not price; MOPUP_PASSES={w['mopup_passes']}: the passes it needs at p90, "
                         f"{r['mopup_passes_p90']}, or the setting's {doc['mopup_passes_setting']})")
            target = COST_TARGET * b["usd_median"]
            if r["usd_median"] > target:
                lines.append(f"note: no configuration meets the deadline within {COST_TARGET:g}× the baseline's "
                             f"dollars (${target:,.0f}): the cheapest that does costs "
                             f"{rec['usd_ratio_to_baseline']:.2f}× it")
        else:
            lines.append(f"recommendation: none: no configuration at most {rec['infra_ceiling']:.0%} infra errors "
                         f"meets the deadline of {fmt.hours(doc['deadline_secs'])}; the fastest, {describe(r)}, misses it "
                         f"by {fmt.hours(rec['miss_secs'])} at p90 ({fmt.hours(r['wall_clock_p90_secs'])}); {ratio}. No "
                         f"command: give a later DEADLINE, or accept a higher infra rate (MAX_INFRA_RATE)")
    for name in doc.get("options", []):
        lines.append(f"option: {name} (speculative decoding; not ranked: its speed-up is what make calibrate "
                     f"measures on it, not a roofline's)")
    root = str(REPO_ROOT) + os.sep
    if doc.get("agent_note"):
        lines.append(f"note: {doc['agent_note']}")
    for note in doc["evidence"]["notes"][:5]:  # the rest: --json
        lines.append(f"note: {note.replace(root, '')}")
    return "\n".join(lines) + "\n"


def ceiling(doc: dict) -> tuple[str, str]:
    """The run's MAX_COST against the plan's figure for its configuration, compared once: its level
    (none, below-median, below-p90 or ok: what make reproduce refuses or warns on) and its words,
    the same in make plan, make print and make reproduce's plan (one ceiling per run)."""
    r, setting = doc["own"], doc.get("max_cost_setting")
    figure = f"MAX_COST={r['max_cost']}"
    if setting is None:
        return "none", f"no spending ceiling: MAX_COST is unset (make plan's figure for this configuration: {figure})"
    if setting < r["usd_median"]:
        return "below-median", (f"MAX_COST={setting:g} is below the median spend ${r['usd_median']:,.0f}: the run would "
                                f"likely stop at it (exit 75, and each resume reloads the server); make plan's figure "
                                f"is {figure}")
    if setting < r["usd_p90"]:
        return "below-p90", (f"MAX_COST={setting:g} is below the p90 spend ${r['usd_p90']:,.0f}: one run in ten or more "
                             f"stops at it; make plan's figure is {figure}")
    return "ok", f"MAX_COST={setting:g} (make plan's figure for this configuration: {figure})"


def submission_words(doc: dict, max_retries: int) -> str:
    """What a run bound for the leaderboard (k >= 5) will submit, and what is still unverified."""
    r, k = doc["own"], doc["n_attempts"]
    jobs = ("one harbor job" if r["shards"] == 1 else
            f"{r['shards']} harbor jobs (one a shard: several job ids, unverified below; N_SHARDS=1 keeps one)")
    retries = (f"in-run retries (MAX_RETRIES={max_retries}) and mop-up in place keep it one job id; a mop-up pass "
               f"harbor cannot run in place adds a retry job (<job>-retry-N), and its id" if max_retries else
               "mop-up in place keeps it one job id; a mop-up pass harbor cannot run in place adds a retry job "
               "(<job>-retry-N), and its id (MAX_RETRIES=2 fills most slots in the first pass)")
    return (f"leaderboard: it submits each task's {k} settled trials, {doc['tasks'] * k} in all, from {jobs}; {retries}. "
            f"Checked before upload: the board's rules (timeout multiplier 1, no overrides, ATIF trajectories: make "
            f"submission). Unverified until harbor ships its leaderboard submit (0.26.0 has none): whether the board "
            f"takes a submission of several job ids")


def configured_line(doc: dict) -> str:
    """The run as its files configure it, in the table's terms, with its one ceiling."""
    r = doc["own"]
    return (f"this run as configured: {describe(r)}: median {fmt.hours(r['wall_clock_median_secs'])}, p90 "
            f"{fmt.hours(r['wall_clock_p90_secs'])}, ${r['usd_median']:,.0f} (p90 ${r['usd_p90']:,.0f}); "
            f"{ceiling(doc)[1]}")


def own_line(doc: dict) -> str:
    """The run's own configuration in one line: what make print and make reproduce say."""
    r, e = doc["own"], doc["evidence"]
    max_cost = r["max_cost"]
    line = (f"make plan's model for this configuration ({r['profile']}, {r['shards']} shard(s) × -n "
            f"{r['n_concurrent']}, {r['at_once']} trial(s) at once): median {fmt.hours(r['wall_clock_median_secs'])}, p90 "
            f"{fmt.hours(r['wall_clock_p90_secs'])} from launch to the last mop-up pass (server loading at READY_TIMEOUT "
            f"included); ${r['usd_median']:,.0f} median, ${r['usd_p90']:,.0f} p90 (MAX_COST={max_cost} covers it with "
            f"{COST_MARGIN:.0%} to spare); {r['mopup_passes_mean']:.1f} mop-up passes (p90 {r['mopup_passes_p90']}; "
            f"MOPUP_PASSES={doc['mopup_passes_setting']}); {fmt.percent(r['timeout_share'], 0)} of attempts reach their "
            f"{doc['agent_timeout_secs']:g} s timeout; "
            + (f"its task at the reference's recorded {fmt.hours(doc['recorded_task_secs'])}" if doc.get("recorded_task_secs")
               else f"fitted to {e['source']}") + " (docs/plan.md)")
    if doc.get("agent_note"):
        line += f"; {doc['agent_note']}"
    budget = doc.get("sandbox_budget") or {}
    if budget.get("source") == "measured":
        line += f"; its sandboxes' infra errors as make calibrate-sandboxes measured them on {budget['measured_at'][:10]}"
    if past_reference(r["at_once"]):
        line += (f". {r['at_once']} trials at once is past the {plan_evidence.REFERENCE_LOW_AT_ONCE} the reference saw work: "
                 f"{REFERENCE_FIGURES}; this plan reads {fmt.percent(r['infra_rate'], 0)} infra errors at {r['at_once']}")
    return line


# --------------------------------------------------------------------------- command line
