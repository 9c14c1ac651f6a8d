#!/usr/bin/env python3
"""plan: which server, shards and N_CONCURRENT finish a run by a deadline, what each costs, and
which resource binds.

A discrete-event simulation of a run (tasks × k attempts) under candidate configurations: every
bundled server profile of the run's model (env/servers/: data-parallel replicas, tensor-parallel
GPUs per replica, both), split into shards (harbor jobs, each at N_CONCURRENT trials), repeated
with a seed. Two resources are modelled, each fitted to real numbers (tools/money/plan_evidence.py,
tools/money/plan_server.py): the sandboxes, whose infra-error rate grows with the trials running at
once over every shard, and the server, whose decode step sets how long a trial's model calls
take. Nothing is launched, read from the Hub or written: the numbers come from the run's own job
dirs, else the reference, a calibration (make calibrate) when there is one, and the prices from
env/flavor-prices.tsv through tools/money/cost_prices.py. The model, its constants and the validation:
docs/plan.md. The simulation is tools/money/plan_sim.py, the page tools/money/plan_render.py, what
it takes (its values, the price list and the flavors it prices) tools/money/plan_checks.py.

Exit codes: 0 done, 1 a user-facing error (the message says what and how to fix), 2 usage (also
one line, naming the setting). Nothing else: whatever a setting holds, a result or one line.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import numpy as np

from tools.money import cost_prices
from tools.money import plan_checks
from tools.money import plan_evidence
from tools.money import plan_render
from tools.money import plan_server
from tools.money import plan_sim
from tools import safe_read
from tools.results import tally_jobs
from tools.results import tally_trials
from tools.money.plan_checks import Bounded, Costs, PlanError

# The reference's configuration, every plan's baseline row: one GPU, one job, -n 3
# (docs/reference-runs.md §1, "concurrency 3").
BASELINE_CONCURRENCY = 3
# harbor's -n: the candidates per shard (the reference saw ~70% infra errors at 8, so no more).
CONCURRENCIES = tuple(range(1, 9))
# Shards tried: powers of two up to the server's replicas (each shard a harbor job: more shards
# than replicas only adds orchestrators).
SHARD_COUNTS = (1, 2, 4, 8)
MAX_REPS = 10_000
# The work a plan may do, so that any input it accepts ends within about two minutes of CPU and
# 70 MiB (measured by benchmarks/plan_speed.py, docs/plan.md §7). Memory grows with one
# configuration's tasks × k × repetitions (its arrays), time with that times the configurations
# and the passes, plus a Python step per queued attempt: both products are bounded, before
# anything is drawn.
ATTEMPTS_CAP = 10_000        # tasks × k
WORK_CAP = 500_000           # tasks × k × repetitions
# The identity of a run: a run file is "the run made for" a server when these settings are the
# planned run's (its SERVER and JOB_NAME may differ). scripts/plan.sh sends them for every run file.
IDENTITY = ("MODEL", "AGENT", "DATASET", "DATASET_REPO", "DATASET_PATH", "DATASET_REF", "TASKS", "N_TASKS",
            "N_ATTEMPTS", "AGENT_TIMEOUT_MULTIPLIER", "REASONING_EFFORT", "SERVER_EXTRA_ARGS", "ENV_TYPE",
            "SANDBOX_FLAVOR", "SANDBOX_IDLE_TIMEOUT")
RUN_FILES_CAP = 1 << 20


# --------------------------------------------------------------------------- small checks


def shard_counts(replicas: int) -> list[int]:
    """Shards tried on `replicas` replicas: powers of two up to the replicas."""
    return [s for s in SHARD_COUNTS if s <= replicas]


# --------------------------------------------------------------------------- configurations


@dataclass(frozen=True)
class Config:
    profile: plan_server.Profile
    shards: int
    n_concurrent: int

    @property
    def at_once(self) -> int:
        """Trials running at once over every shard: what strains the sandboxes."""
        return self.shards * self.n_concurrent

    @property
    def per_replica(self) -> float:
        """Trials per replica: the sequences each replica's decode step runs (at most)."""
        return self.at_once / self.profile.dp


def candidate_profiles(own: plan_server.Profile, profiles: list[plan_server.Profile], costs: Costs,
                       calibrated: str | None) -> list[plan_server.Profile]:
    """The run's own server and every bundled profile of its model on a priced flavor of the same
    family, by GPUs then name; a speculative one only when a calibration measured it (its speed-up
    is no roofline's)."""
    out = {own.name: own}
    for p in profiles:
        if (p.name not in out and plan_server.family_of(p.flavor) == plan_server.family_of(own.flavor) and p.flavor in costs.gpu_usd
                and (not p.speculative or p.name == calibrated)):
            out[p.name] = p
    return sorted(out.values(), key=lambda p: (p.gpus, p.tp, p.name))


def configurations(profiles: list[plan_server.Profile]) -> list[Config]:
    return [Config(p, s, n) for p in profiles for s in shard_counts(p.dp) for n in CONCURRENCIES
            if s * n / p.dp <= plan_server.MAX_ROOFLINE_SEQUENCES]


@dataclass
class ServerModel:
    """How fast each candidate decodes against the evidence's server: the roofline (or nothing,
    for a model or GPU it has no numbers for), the decode share at the evidence's server, and
    that server's step."""

    roofline: plan_server.Roofline | None
    share: float | None
    source_step: float | None
    note: str

    def step(self, config: Config) -> float | None:
        return self.roofline.step_secs(config.profile.tp, config.per_replica) if self.roofline else None

    def factor(self, config: Config) -> float:
        step = self.step(config)
        if step is None or self.share is None or not self.source_step:
            return 1.0
        return plan_server.speed_factor(self.share, step, self.source_step)


def server_model(evidence: plan_evidence.Evidence, own: plan_server.Profile, calibration: plan_server.Calibration | None,
                 profiles: list[plan_server.Profile]) -> ServerModel:
    roofline = plan_server.roofline_for(own.model, own.flavor)
    if roofline is None:
        return ServerModel(None, None, None, f"no roofline numbers for {own.model} on {plan_server.family_of(own.flavor)} "
                                             f"(tools/money/plan_server.py): every server is taken as fast as the evidence's")
    note = "the roofline alone (no calibration)"
    if calibration:
        measured = next((p for p in profiles if p.name == calibration.profile), None)
        # The measured server's own roofline: its GPUs are what its floor and its scale are read against.
        measured_roofline = measured and plan_server.roofline_for(measured.model, measured.flavor)
        if measured is None:
            note = f"the roofline alone: the calibration {calibration.path} measured {calibration.profile}, no profile here"
        elif measured_roofline is None:
            note = (f"the roofline alone: the calibration {calibration.path} measured {calibration.profile}, on "
                    f"{plan_server.family_of(measured.flavor)}, a GPU with no roofline numbers here")
        else:
            refused = plan_server.calibration_refused(calibration, measured_roofline, measured)
            if refused:
                raise PlanError(f"the calibration {calibration.path} is refused: {refused}. Run make calibrate again "
                                f"with the run's server up, or remove the file to plan from the roofline alone")
            scale = plan_server.calibration_scale(calibration, measured_roofline, measured)
            roofline = dataclasses.replace(roofline, scale=scale)
            note = (f"the roofline scaled by {scale:.2f}, what make calibrate measured on {calibration.profile} "
                    f"({calibration.path}, {calibration.measured_at}) against it")
    source_tp = evidence.source_tp
    source_step = roofline.step_secs(source_tp, evidence.per_replica or 1)
    if evidence.decode_share is not None:
        share = evidence.decode_share
    else:
        share = plan_server.shift_share(plan_server.smoke_decode_share(roofline), source_step / roofline.step_secs(1, 1))
    return ServerModel(roofline, share, source_step, note)


def evaluate(config: Config, *, evidence: plan_evidence.Evidence, server: ServerModel, curve: plan_evidence.InfraCurve, cap: float,
             tasks: int, k: int, reps: int, seed: int, loading_secs: float, costs: Costs,
             max_retries: int = 0) -> dict:
    """One row: the configuration simulated `reps` times with its own generator seeded `seed`
    (every row sees the same draws where its shapes allow: a fair comparison)."""
    rng = np.random.default_rng(seed)
    factor = server.factor(config)
    durations = plan_sim.Durations(evidence.mean_agent_secs, factor, cap)
    server_rate = evidence.server_rate

    def infra_p(_pass, at_once):
        return np.minimum(1.0, curve(at_once) + server_rate)

    out = plan_sim.simulate(durations, tasks, k, config.shards, config.n_concurrent, infra_p, reps, rng,
                            infra_fraction=evidence.infra_fraction, in_run_retries=max_retries)
    wall = loading_secs + out.makespan
    p = config.profile
    usd = wall / 3600 * (costs.gpu_usd[p.flavor] + costs.port_usd) + out.sandbox_secs / 3600 * costs.sandbox_usd
    step = server.step(config)
    sandbox_rate = float(curve(config.at_once))
    return {
        "profile": p.name, "flavor": p.flavor, "gpus": p.gpus, "replicas": p.dp, "tp": p.tp,
        "shards": config.shards, "n_concurrent": config.n_concurrent, "at_once": config.at_once,
        "per_replica": round(config.per_replica, 4),
        "step_ms": None if step is None else round(step * 1000, 2), "trial_factor": round(factor, 4),
        "timeout_share": round(durations.timeout_share, 4),
        "infra_sandbox": round(sandbox_rate, 4), "infra_server": round(server_rate, 4),
        "infra_rate": round(min(1.0, sandbox_rate + server_rate), 4),
        "wall_clock_median_secs": round(float(np.median(wall)), 1),
        "wall_clock_p90_secs": round(float(np.percentile(wall, 90)), 1),
        "gpu_hours_median": round(float(np.median(wall)) / 3600 * p.gpus, 2),
        "usd_median": round(float(np.median(usd)), 2),
        "usd_p90": round(float(np.percentile(usd, 90)), 2),
        "sandbox_hours_median": round(float(np.median(out.sandbox_secs)) / 3600, 2),
        "mopup_passes_mean": round(float(out.mopups.mean()), 2),
        "mopup_passes_p90": int(np.percentile(out.mopups, 90, method="higher")),
        "left_errored_mean": round(float(out.left.mean()), 2),
    }


def infra_ceiling(baseline: dict, max_infra_rate: float) -> float:
    """The highest infra rate a recommendation may run at: MAX_INFRA_RATE, the rate the governor
    interrupts a shard at and make watch alarms at (so a plan above it is not what would run), or
    the baseline's own when that is higher already."""
    return max(max_infra_rate, baseline["infra_rate"])


def recommend(rows: list[dict], deadline: float | None, ceiling: float) -> dict | None:
    """Among the rows at most `ceiling` infra rate: the cheapest whose p90 wall-clock meets the
    deadline (nine runs in ten finish in time); when none does, the fastest by p90, with how
    much it misses by."""
    if deadline is None:
        return None
    eligible = [r for r in rows if r["infra_rate"] <= ceiling + 1e-9]
    meets = [r for r in eligible if r["wall_clock_p90_secs"] <= deadline]
    if meets:
        best = min(meets, key=lambda r: (r["usd_median"], r["wall_clock_p90_secs"]))
        return {"meets": True, "row": best, "miss_secs": 0.0, "infra_ceiling": ceiling}
    best = min(eligible, key=lambda r: (r["wall_clock_p90_secs"], r["usd_median"]))
    return {"meets": False, "row": best, "miss_secs": round(best["wall_clock_p90_secs"] - deadline, 1),
            "infra_ceiling": ceiling}


def sandbox_limit(curve: plan_evidence.InfraCurve, server_rate: float, ceiling: float) -> int:
    """The most trials at once whose infra rate stays at or below the ceiling (0: none)."""
    ok = [c for c in range(1, plan_server.MAX_ROOFLINE_SEQUENCES + 1) if float(curve(c)) + server_rate <= ceiling + 1e-9]
    return max(ok, default=0)


def binding(rows: list[dict], rec: dict | None, limit: int, baseline: dict, server: ServerModel) -> dict:
    """Which resource binds, and the figures that say so: the sandboxes when the best row runs
    as many trials at once as the infra ceiling allows (more GPUs add none), else the server or
    the deadline's slack."""
    fastest = min(rows, key=lambda r: r["trial_factor"])
    row = rec["row"] if rec else None
    resource = "sandboxes" if row and row["at_once"] >= limit else "server" if row else None
    return {"resource": resource, "at_once_limit": limit, "decode_share": server.share,
            "fastest_profile": fastest["profile"], "fastest_factor": fastest["trial_factor"],
            "fastest_timeout_share": fastest["timeout_share"], "baseline_timeout_share": baseline["timeout_share"]}


# --------------------------------------------------------------------------- the command that runs it


def read_run_files(path: str | None) -> list[dict]:
    """The run files' settings as scripts/plan.sh resolves them, one JSON object a line:
    {"run": name, "settings": {SERVER, JOB_NAME, and each of IDENTITY}}; bad lines are skipped."""
    if not path:
        return []
    try:
        text = sys.stdin.read(RUN_FILES_CAP) if path == "-" else \
            safe_read.read_regular(Path(path), RUN_FILES_CAP, "the run files' settings").decode("utf-8", "replace")
    except (OSError, safe_read.Unreadable) as e:
        raise PlanError(f"cannot read the run files' settings from {safe_read.printable(path)}: {e}") from None
    out = []
    for line in text.splitlines():
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: nested past the decoder's depth
            continue
        if isinstance(doc, dict) and isinstance(doc.get("run"), str) and isinstance(doc.get("settings"), dict):
            out.append(doc)
    return out


def run_file_for(profile: str, identity: dict, run_files: list[dict]) -> dict | None:
    """The run file made for `profile`: its SERVER is that profile and its identity the planned
    run's (docs/plan.md §1: a run on another server is another run, with its own job dirs)."""
    for doc in sorted(run_files, key=lambda d: d["run"]):
        s = doc["settings"]
        if s.get("SERVER") == profile and all(str(s.get(n, "")) == str(identity.get(n, "")) for n in IDENTITY):
            return doc
    return None


def run_with(run: str, row: dict, profile: plan_server.Profile, identity: dict, run_files: list[dict],
             mopup_passes: int) -> dict:
    """The command that runs row `row`: make reproduce of the run file made for its server, with
    its shards, N_CONCURRENT, MAX_COST (p90 spend + plan_render.COST_MARGIN) and the MOPUP_PASSES it needs;
    or, when no run file is made for that server, the one to write first (a named new run)."""
    max_cost = math.ceil(row["usd_p90"] * (1 + plan_render.COST_MARGIN))
    passes = max(mopup_passes, row["mopup_passes_p90"])
    found = run_file_for(profile.name, identity, run_files)
    name = found["run"] if found else f"{run}-{profile.suffix}"
    words = ["make", "reproduce", f"RUN={name}", f"N_SHARDS={row['shards']}", f"N_CONCURRENT={row['n_concurrent']}",
             f"MAX_COST={max_cost}", f"MOPUP_PASSES={passes}"]
    out = {"command": shlex.join(words), "run_file": f"runs/{name}.env", "max_cost": max_cost,
           "mopup_passes": passes, "exists": found is not None}
    if not found:
        job = identity.get("JOB_NAME") or run
        out["write_first"] = (f"runs/{name}.env: a copy of runs/{run}.env with SERVER={profile.name} and "
                              f"JOB_NAME={job}-{profile.suffix} (a run on another server is another run, never a "
                              f"resume of runs/{run}.env's job dirs)")
    return out


def check_work(tasks: int, k: int, reps: int) -> None:
    """Refuse, before anything is drawn, a plan past ATTEMPTS_CAP or WORK_CAP, saying what fits."""
    attempts = tasks * k
    if attempts > ATTEMPTS_CAP:
        raise PlanError(f"{tasks:,} tasks × {k} attempts = {attempts:,} attempts, above the {ATTEMPTS_CAP:,} make plan "
                        f"simulates (docs/plan.md §7): plan a part of the run, N_TASKS={ATTEMPTS_CAP // k} or fewer")
    if attempts * reps > WORK_CAP:
        raise PlanError(f"{tasks:,} tasks × {k} attempts × {reps:,} repetitions = {attempts * reps:,}, above the "
                        f"{WORK_CAP:,} make plan simulates (docs/plan.md §7): set PLAN_REPS={WORK_CAP // attempts} "
                        f"or fewer")


# --------------------------------------------------------------------------- the plan


def own_profile(server: str, model: str, flavor: str, dp: int, tp: int, servers_dir: Path, costs: Costs,
                profiles: list[plan_server.Profile]) -> plan_server.Profile:
    """The run's own server as its settings resolve it (SERVER_FLAVOR, SERVER_DP, SERVER_TP win
    over the profile's plain lines), speculative when its profile is; on a priced GPU flavor, else
    one line (checked here, so the table and make print's own row refuse it alike)."""
    plan_checks.require_gpus(flavor, costs, profiles)
    plan_checks.require_priced("SERVER_FLAVOR", flavor, costs)
    read = plan_server.read_profile(servers_dir / f"{server}.env") if server else None
    return plan_server.Profile(server or "(the run's server)", model, flavor, dp, tp, bool(read and read.speculative))


@dataclass
class Inputs:
    """What every row is computed from: the prices, the servers, the evidence and what it fits."""

    costs: Costs
    own: plan_server.Profile
    profiles: list[plan_server.Profile]
    calibration: plan_server.Calibration | None
    evidence: plan_evidence.Evidence
    curve: plan_evidence.InfraCurve
    server: ServerModel
    cap: float       # the agent timeout, seconds
    loading: float   # server loading, seconds


def inputs(*, model: str, server: str, server_flavor: str, server_dp: int, server_tp: int, sandbox_flavor: str,
           jobs_dir: str, job_name: str, mult: float, timeout_estimate: float, ready_timeout: float,
           prices_path: Path, servers_dir: Path, calibration_path: Path | None) -> Inputs:
    costs = plan_checks.load_costs(prices_path, sandbox_flavor)
    profiles = plan_server.profiles_for(model, servers_dir)
    own = own_profile(server, model, server_flavor, server_dp, server_tp, servers_dir, costs, profiles)
    calibration, cal_note = plan_server.read_calibration(calibration_path) if calibration_path else (None, None)
    roofline = plan_server.roofline_for(model, own.flavor)
    try:
        evidence = plan_evidence.choose(jobs_dir, job_name, model, own.flavor, own.dp, own.tp,
                             (lambda b: roofline.step_secs(own.tp, b)) if roofline else None)
    except plan_evidence.EvidenceError as e:
        raise PlanError(str(e)) from None
    if cal_note:
        evidence.notes.append(cal_note)
    srv = server_model(evidence, own, calibration, profiles + [own])
    # Server loading: READY_TIMEOUT, the most make serve waits. An upper bound: no record here
    # says how long the model takes to load.
    return Inputs(costs, own, profiles, calibration, evidence, plan_evidence.fit_curve(evidence), srv,
                  timeout_estimate * mult, ready_timeout)


def describe_inputs(inp: Inputs) -> dict:
    e, srv, curve = inp.evidence, inp.server, inp.curve
    return {
        "evidence": {"source": e.source, "job_dirs": e.dirs, "settled_trials": e.settled, "timed_out": e.timed_out,
                     "mean_agent_secs": round(e.mean_agent_secs, 1), "finished_trials": e.finished,
                     "infra_by_side": e.sides, "at_once": e.at_once, "per_replica": e.per_replica,
                     "server_flavor": e.source_flavor, "server_tp": e.source_tp,
                     "infra_fraction": round(e.infra_fraction, 4),
                     "reference_run": e.reference.name if e.reference else None, "notes": e.notes},
        "infra_curve": {"kind": "sandbox side: piecewise-linear in trials at once over every shard, flat outside "
                                "its points; model-server side: flat",
                        "at_once": list(curve.at_once), "rates": [round(r, 4) for r in curve.rates],
                        "server_rate": round(e.server_rate, 4)},
        "server_model": {"note": srv.note, "decode_share": None if srv.share is None else round(srv.share, 4),
                         "source_step_ms": None if srv.source_step is None else round(srv.source_step * 1000, 3),
                         "context_tokens": plan_server.AGENT_CONTEXT_TOKENS,
                         "calibration": inp.calibration.path if inp.calibration else None},
        "prices": {"source": inp.costs.label, "exposed_port_usd_per_hour": inp.costs.port_usd,
                   "sandbox_flavor": inp.costs.sandbox_flavor, "sandbox_usd_per_hour": inp.costs.sandbox_usd},
    }


def plan(*, run: str, tasks: int, k: int, mult: float, timeout_estimate: float, model: str, server: str,
         server_flavor: str, server_dp: int = 1, server_tp: int = 1, sandbox_flavor: str, jobs_dir: str,
         job_name: str, deadline: float | None, reps: int, seed: int, mopup_passes: int, max_infra_rate: float,
         ready_timeout: float, prices_path: Path = cost_prices.TSV_PRICES, servers_dir: Path = plan_server.SERVERS_DIR,
         calibration_path: Path | None = None, run_files: list[dict] | None = None,
         identity: dict | None = None, own: tuple[int, int] | None = None, max_retries: int = 0) -> dict:
    """The plan of every candidate configuration, or, with own=(shards, N_CONCURRENT), of the run's
    own configuration alone (what make print and make reproduce say: one estimator)."""
    check_work(tasks, k, reps)
    inp = inputs(model=model, server=server, server_flavor=server_flavor, server_dp=server_dp, server_tp=server_tp,
                 sandbox_flavor=sandbox_flavor, jobs_dir=jobs_dir, job_name=job_name, mult=mult,
                 timeout_estimate=timeout_estimate, ready_timeout=ready_timeout, prices_path=prices_path,
                 servers_dir=servers_dir, calibration_path=calibration_path)
    common = dict(evidence=inp.evidence, server=inp.server, curve=inp.curve, cap=inp.cap, tasks=tasks, k=k,
                  reps=reps, seed=seed, loading_secs=inp.loading, costs=inp.costs, max_retries=max_retries)
    doc = {"run": run, "tasks": tasks, "n_attempts": k, "attempts": tasks * k, "agent_timeout_multiplier": mult,
           "agent_timeout_secs": inp.cap, "deadline_secs": deadline, "reps": reps, "seed": seed,
           "mopup_passes_setting": mopup_passes, "max_retries": max_retries, "loading_secs": inp.loading, "criterion": "p90 wall-clock",
           "max_infra_rate": max_infra_rate, **describe_inputs(inp)}
    if own:
        return doc | {"own": evaluate(Config(inp.own, *own), **common)}
    candidates = candidate_profiles(inp.own, inp.profiles, inp.costs,
                                    inp.calibration.profile if inp.calibration else None)
    doc["prices"]["usd_per_hour"] = {p.flavor: inp.costs.gpu_usd[p.flavor] for p in candidates}
    rows = [evaluate(c, **common) for c in configurations(candidates)]
    base_profile = next((p for p in candidates if p.gpus == 1), inp.own)
    baseline = next(r for r in rows if r["profile"] == base_profile.name and r["shards"] == 1
                    and r["n_concurrent"] == BASELINE_CONCURRENCY)
    ceiling = infra_ceiling(baseline, max_infra_rate)
    rec = recommend(rows, deadline, ceiling)
    if rec:
        rec["usd_ratio_to_baseline"] = round(rec["row"]["usd_median"] / baseline["usd_median"], 2)
        if rec["meets"]:
            profile = next(p for p in candidates if p.name == rec["row"]["profile"])
            rec["run_with"] = run_with(run, rec["row"], profile, identity or {}, run_files or [], mopup_passes)
    limit = sandbox_limit(inp.curve, inp.evidence.server_rate, ceiling)
    doc.update(configurations=rows, baseline=baseline, recommendation=rec, infra_ceiling=ceiling,
               binding=binding(rows, rec, limit, baseline, inp.server),
               options=[p.name for p in inp.profiles if p.speculative and p not in candidates])
    return doc


# --------------------------------------------------------------------------- command line


@click.command(cls=plan_checks.PlanCommand)
@click.option("--run", required=True, help="the run's name, for the title")
@click.option("--tasks", type=Bounded(1, 100_000, "the run's task count (TASKS, N_TASKS or DATASET_TASKS)"),
              help="tasks in the run (empty: the run's job's plan)")
@click.option("--attempts", "k", type=Bounded(1, tally_trials.MAX_ATTEMPTS, "setting N_ATTEMPTS"), default=1,
              show_default=True,
              help="N_ATTEMPTS, harbor's -k")
@click.option("--multiplier", type=Bounded(*plan_evidence.MULTIPLIER_RANGE, "setting AGENT_TIMEOUT_MULTIPLIER",
                                           whole=False), default=1.0, show_default=True,
              help="AGENT_TIMEOUT_MULTIPLIER")
@click.option("--timeout-estimate", type=Bounded(1, 86400 * 7, "setting AGENT_TIMEOUT_ESTIMATE", whole=False),
              default=900.0, show_default=True,
              help="AGENT_TIMEOUT_ESTIMATE: one trial's agent timeout (s) at multiplier 1")
@click.option("--model", required=True, help="MODEL: the candidates are the bundled profiles that serve it")
@click.option("--server", default="", help="SERVER, the run's own profile")
@click.option("--server-flavor", required=True, help="SERVER_FLAVOR of the run's own server")
@click.option("--server-dp", type=Bounded(1, 64, "setting SERVER_DP"), default=1, show_default=True, help="SERVER_DP")
@click.option("--server-tp", type=Bounded(1, 64, "setting SERVER_TP"), default=1, show_default=True, help="SERVER_TP")
@click.option("--sandbox-flavor", default="cpu-upgrade", show_default=True, help="SANDBOX_FLAVOR")
@click.option("--jobs-dir", default="jobs", show_default=True)
@click.option("--job-name", required=True)
@click.option("--deadline", help="an hf-style duration (24h, 90m, 2d); empty: no recommendation")
@click.option("--reps", type=Bounded(1, MAX_REPS, "setting PLAN_REPS"), default=200, show_default=True, help="PLAN_REPS")
@click.option("--seed", type=Bounded(0, 2**32 - 1, "setting PLAN_SEED"), default=0, show_default=True, help="PLAN_SEED")
@click.option("--mopup-passes", type=Bounded(0, 1000, "setting MOPUP_PASSES"), default=3, show_default=True,
              help="MOPUP_PASSES: make reproduce's limit, compared with the passes needed")
@click.option("--max-infra-rate", type=Bounded(0, 1, "setting MAX_INFRA_RATE", whole=False), default=0.3,
              show_default=True,
              help="MAX_INFRA_RATE: the highest infra rate a recommendation may run at (or the baseline's)")
@click.option("--ready-timeout", type=Bounded(1, 10**9, "setting READY_TIMEOUT", whole=False), default=2700.0,
              show_default=True,
              help="READY_TIMEOUT: bounds the server's loading time")
@click.option("--prices", "prices_path", type=click.Path(path_type=Path), default=cost_prices.TSV_PRICES,
              help="the price list (default: env/flavor-prices.tsv)")
@click.option("--calibration", "calibration_path", type=click.Path(path_type=Path), default=None,
              help="state/<run>/calibration.json (make calibrate); used when it exists")
@click.option("--run-files", help="the run files' settings, one JSON object a line (scripts/plan.sh); - for stdin")
@click.option("--identity", help="the planned run's identity settings as a JSON object (scripts/plan.sh)")
@click.option("--own", nargs=2, type=Bounded(1, 1000, "setting N_SHARDS or N_CONCURRENT"), default=None,
              help="SHARDS N_CONCURRENT: plan the run's own configuration only, in one line")
@click.option("--max-retries", type=Bounded(0, 10, "setting MAX_RETRIES"), default=0, show_default=True,
              help="MAX_RETRIES: harbor's in-run retries of an infra-errored attempt")
@click.option("--json", "as_json", is_flag=True, help="the whole plan as JSON")
def cli(run, tasks, k, multiplier, timeout_estimate, model, server, server_flavor, server_dp, server_tp, sandbox_flavor,
        jobs_dir, job_name, deadline, reps, seed, mopup_passes, max_infra_rate, ready_timeout, prices_path,
        calibration_path, run_files, identity, own, max_retries, as_json):
    """Simulate RUN under candidate servers, shards and N_CONCURRENT; print the table, what binds,
    and the cheapest configuration that meets --deadline with the command that runs it. Reads job
    dirs, the profiles, a calibration and the price list; writes nothing."""
    tasks = tasks or planned_tasks(jobs_dir, job_name, k)
    try:
        ident = json.loads(identity) if identity else {}
    except (ValueError, RecursionError):  # RecursionError: nested past the decoder's depth
        raise PlanError("--identity is not a JSON object (scripts/plan.sh builds it)") from None
    doc = plan(run=run, tasks=tasks, k=k, mult=multiplier, timeout_estimate=timeout_estimate, model=model,
               server=server, server_flavor=server_flavor, server_dp=server_dp, server_tp=server_tp,
               sandbox_flavor=sandbox_flavor, jobs_dir=jobs_dir, job_name=job_name,
               deadline=plan_checks.deadline_seconds(deadline) if deadline else None, reps=reps, seed=seed,
               mopup_passes=mopup_passes, max_infra_rate=max_infra_rate, ready_timeout=ready_timeout,
               prices_path=prices_path, calibration_path=calibration_path, run_files=read_run_files(run_files),
               identity=ident if isinstance(ident, dict) else {}, own=tuple(own) if own else None,
               max_retries=max_retries)
    if own:
        doc["own_line"] = plan_render.own_line(doc)
    if as_json:
        click.echo(json.dumps(doc, indent=1))
    elif own:
        click.echo(plan_render.own_line(doc))
    else:
        click.echo(plan_render.render(doc), nl=False)


def planned_tasks(jobs_dir: str, job_name: str, k: int) -> int:
    """The tasks the run's first pass planned (its job's result.json's n_total_trials ÷ k, summed
    over its shards), when the settings name none."""
    try:
        first = [d for d in tally_jobs.run_job_dirs(jobs_dir, job_name) if tally_jobs.retry_number(job_name, d.name) == 0]
        counts = [tally_trials.count_of(safe_read.read_json_object(os.path.join(d, "result.json")).get("n_total_trials"),
                             100_000 * tally_trials.MAX_ATTEMPTS) for d in first]
    except (tally_jobs.TallyError, OSError, safe_read.Unreadable):
        counts = []
    n = sum(counts) if counts and None not in counts else None
    if not n or n // k < 1:
        raise PlanError("the run's task count is unknown: set DATASET_TASKS (or TASKS, N_TASKS) in its run file, "
                        "or on the command line")
    return n // k


if __name__ == "__main__":
    cli()
