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
it takes (the price list and the flavors it prices) tools/money/plan_checks.py, the task count
tools/money/plan_tasks.py.

The run's settings come as one document, TB_SETTINGS (tools/settings.py current: resolved and
checked against env/defaults.env's types by the verb that starts the plan, the same check for every
verb); its command line holds only what no setting says: the run files' identities on stdin, make
print's own configuration (--own), --json, and the calibration and price files.

Exit codes: 0 done, 1 a user-facing error (the message says what and how to fix), 2 usage (also
one line). Nothing else: whatever a setting holds, a result or one line.
"""

from __future__ import annotations

import dataclasses
import json
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
from tools.money import plan_tasks
from tools.money import sandbox_curve
from tools import safe_read
from tools import settings as run_settings
from tools.money.plan_checks import Bounded, Costs, PlanError

# The reference's configuration, every plan's baseline row: one GPU, one job, -n 3
# (docs/reference-runs.md §1, "concurrency 3").
BASELINE_CONCURRENCY = 3
# A run of at least this many attempts a task is planned as bound for the leaderboard, which asks
# five trials a task: one harbor job (no shards), as whether the board takes a submission of several
# job ids is unverified (harbor 0.26.0 has no leaderboard submit; docs/submission.md §4, "Several job ids").
BOARD_ATTEMPTS = 5
# harbor's -n: the candidates per shard (the reference saw ~70% infra errors at 8, so no more).
CONCURRENCIES = tuple(range(1, 9))
# Shards tried: powers of two up to the server's replicas (each shard a harbor job: more shards
# than replicas only adds orchestrators).
SHARD_COUNTS = (1, 2, 4, 8)
# The work a plan may do, so that any input it accepts ends within about two minutes of CPU and
# 70 MiB (measured by benchmarks/plan_speed.py, docs/plan.md §7). Memory grows with one
# configuration's tasks × k × repetitions (its arrays), time with that times the configurations
# and the passes, plus a Python step per queued attempt: both products are bounded, before
# anything is drawn.
ATTEMPTS_CAP = 10_000        # tasks × k
WORK_CAP = 500_000           # tasks × k × repetitions
RUN_FILES_CAP = 1 << 20
# The settings the plan reads, from the run's one settings document (TB_SETTINGS, tools/settings.py
# current): checked there, against the catalogue's types, for every verb.
READS = ("N_ATTEMPTS", "AGENT_TIMEOUT_MULTIPLIER", "AGENT_TIMEOUT_ESTIMATE", "MODEL", "SERVER", "SERVER_FLAVOR",
         "SERVER_DP", "SERVER_TP", "SANDBOX_FLAVOR", "JOBS_DIR", "JOB_NAME", "DEADLINE", "PLAN_REPS", "PLAN_SEED",
         "MOPUP_PASSES", "MAX_INFRA_RATE", "READY_TIMEOUT", "MAX_RETRIES", "TASKS", "N_TASKS", "DATASET_PATH",
         "DATASET_TASKS", "N_SHARDS", "N_CONCURRENT", "MAX_COST", "ALL", "DATASET", "DATASET_REPO", "AGENT", "ENV_TYPE")


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
             max_retries: int = 0, recorded: float | None = None) -> dict:
    """One row: the configuration simulated `reps` times with its own generator seeded `seed`
    (every row sees the same draws where its shapes allow: a fair comparison)."""
    rng = np.random.default_rng(seed)
    factor = server.factor(config)
    durations = (plan_sim.Recorded(recorded, factor, cap) if recorded
                 else plan_sim.Durations(evidence.mean_agent_secs, factor, cap))
    server_rate = evidence.server_rate

    def infra_p(_pass, at_once):
        return np.minimum(1.0, curve(at_once) + server_rate)

    out = plan_sim.simulate(durations, tasks, k, config.shards, config.n_concurrent, infra_p, reps, rng,
                            infra_fraction=evidence.infra_fraction, in_run_retries=max_retries)
    wall = loading_secs + out.makespan
    p = config.profile
    # A sandbox is an HF Job with an exposed port (its sbx-server's): billed its flavor and the port,
    # as make cost counts it.
    usd = (wall / 3600 * (costs.gpu_usd[p.flavor] + costs.port_usd)
           + out.sandbox_secs / 3600 * (costs.sandbox_usd + costs.port_usd))
    step = server.step(config)
    sandbox_rate = float(curve(config.at_once))
    timeout_need, timeout = plan_render.server_timeout_of(float(np.percentile(wall, 90)))
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
        "max_cost": plan_render.ceiling_of(float(np.percentile(usd, 90))),
        "server_timeout_need_secs": timeout_need, "server_timeout": timeout,
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


def recommend(rows: list[dict], deadline: float | None, ceiling: float, one_job: bool = False) -> dict | None:
    """Among the rows at most `ceiling` infra rate: the cheapest whose p90 wall-clock meets the
    deadline (nine runs in ten finish in time); when none does, the fastest by p90, with how
    much it misses by. With one_job (a run bound for the leaderboard), only one-shard rows: one
    harbor job, one job id (submission_words)."""
    if deadline is None:
        return None
    eligible = [r for r in rows if r["infra_rate"] <= ceiling + 1e-9 and (r["shards"] == 1 or not one_job)]
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


def identity_names() -> tuple[str, ...]:
    """The settings that make two run files the same benchmark: the catalogue's identity marks
    (env/defaults.env, `; identity`). A run file is "the run made for" a server when these are the
    planned run's (its SERVER and JOB_NAME may differ)."""
    return tuple(name for name, setting in run_settings.catalogue().items() if setting.identity)


def identity_of(s: run_settings.Settings) -> dict[str, str]:
    """The planned run's identity as run_with reads it: the identity settings and its JOB_NAME."""
    return {name: s.raw(name) for name in ("JOB_NAME", *identity_names())}


def read_run_files(path: str | None) -> list[dict]:
    """The run files' settings as scripts/plan.sh resolves them (python -m tools.settings identity),
    one JSON object a line: {"run": name, "settings": {SERVER, JOB_NAME, and each identity setting}};
    bad lines are skipped."""
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
    names = identity_names()
    for doc in sorted(run_files, key=lambda d: d["run"]):
        s = doc["settings"]
        if s.get("SERVER") == profile and all(str(s.get(n, "")) == str(identity.get(n, "")) for n in names):
            return doc
    return None


def run_with(run: str, row: dict, profile: plan_server.Profile, identity: dict, run_files: list[dict],
             mopup_passes: int) -> dict:
    """The command that runs row `row`: make reproduce of the run file made for its server, with
    its shards, N_CONCURRENT, MAX_COST (p90 spend + plan_render.COST_MARGIN) and the MOPUP_PASSES it needs;
    or, when no run file is made for that server, the one to write first (a named new run)."""
    max_cost = row["max_cost"]
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
    measured: sandbox_curve.Measured | None  # the namespace's sandbox curve (make calibrate-sandboxes), when used
    server: ServerModel
    cap: float       # the agent timeout, seconds
    loading: float   # server loading, seconds


def inputs(*, model: str, server: str, server_flavor: str, server_dp: int, server_tp: int, sandbox_flavor: str,
           jobs_dir: str, job_name: str, mult: float, timeout_estimate: float, ready_timeout: float,
           prices_path: Path, servers_dir: Path, calibration_path: Path | None,
           sandbox_curve_path: Path | None = None, env_type: str = "hf-sandbox") -> Inputs:
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
    measured, curve_note = sandbox_curve.read(sandbox_curve_path, env_type, sandbox_flavor)
    if curve_note:
        evidence.notes.append(curve_note)
    curve = sandbox_curve.fit(measured, evidence) if measured else plan_evidence.fit_curve(evidence)
    srv = server_model(evidence, own, calibration, profiles + [own])
    # Server loading: READY_TIMEOUT, the most make serve waits. An upper bound: no record here
    # says how long the model takes to load.
    return Inputs(costs, own, profiles, calibration, evidence, curve, measured, srv, timeout_estimate * mult,
                  ready_timeout)


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
        "sandbox_budget": sandbox_curve.describe(inp.measured),
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
         identity: dict | None = None, own: tuple[int, int] | None = None, max_retries: int = 0,
         configured: tuple[int, int] = (1, BASELINE_CONCURRENCY), agent: str = "",
         task_names: tuple[str, ...] = (), sandbox_curve_path: Path | None = None,
         env_type: str = "hf-sandbox") -> dict:
    """The plan of every candidate configuration, or, with own=(shards, N_CONCURRENT), of the run's
    own configuration alone (what make print and make reproduce say: one estimator). `configured` is
    the run's own (N_SHARDS, N_CONCURRENT): the full plan names its row, and its MAX_COST, too."""
    check_work(tasks, k, reps)
    inp = inputs(model=model, server=server, server_flavor=server_flavor, server_dp=server_dp, server_tp=server_tp,
                 sandbox_flavor=sandbox_flavor, jobs_dir=jobs_dir, job_name=job_name, mult=mult,
                 timeout_estimate=timeout_estimate, ready_timeout=ready_timeout, prices_path=prices_path,
                 servers_dir=servers_dir, calibration_path=calibration_path,
                 sandbox_curve_path=sandbox_curve_path, env_type=env_type)
    recorded = None if inp.evidence.settled else plan_evidence.recorded_task_secs(model, agent, list(task_names))
    common = dict(evidence=inp.evidence, server=inp.server, curve=inp.curve, cap=inp.cap, tasks=tasks, k=k,
                  reps=reps, seed=seed, loading_secs=inp.loading, costs=inp.costs, max_retries=max_retries,
                  recorded=recorded)
    doc = {"run": run, "tasks": tasks, "n_attempts": k, "attempts": tasks * k, "agent_timeout_multiplier": mult,
           "agent_timeout_secs": inp.cap, "deadline_secs": deadline, "reps": reps, "seed": seed,
           "mopup_passes_setting": mopup_passes, "max_retries": max_retries, "loading_secs": inp.loading, "criterion": "p90 wall-clock",
           "max_infra_rate": max_infra_rate, "recorded_task_secs": recorded, **describe_inputs(inp)}
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
    rec = recommend(rows, deadline, ceiling, one_job=k >= BOARD_ATTEMPTS)
    if rec:
        rec["usd_ratio_to_baseline"] = round(rec["row"]["usd_median"] / baseline["usd_median"], 2)
        if rec["meets"]:
            profile = next(p for p in candidates if p.name == rec["row"]["profile"])
            rec["run_with"] = run_with(run, rec["row"], profile, identity or {}, run_files or [], mopup_passes)
    limit = sandbox_limit(inp.curve, inp.evidence.server_rate, ceiling)
    mine = next((r for r in rows if r["profile"] == inp.own.name and (r["shards"], r["n_concurrent"]) == configured),
                None) or evaluate(Config(inp.own, *configured), **common)
    doc.update(configurations=rows, own=mine, baseline=baseline, recommendation=rec, infra_ceiling=ceiling,
               binding=binding(rows, rec, limit, baseline, inp.server),
               options=[p.name for p in inp.profiles if p.speculative and p not in candidates])
    return doc


# --------------------------------------------------------------------------- command line


# The agent the reference's timed runs ran (Run 1 and Run 2, whose timeouts the agent times are fitted
# to): terminus-2. Run 3 (mini-swe-agent) recorded its infra errors, not how many trials timed out.
REFERENCE_TIMED_AGENT = "terminus-2"


def agent_note(agent: str, doc: dict) -> str:
    """Say so when a run of another agent is planned on the reference's terminus-2 times."""
    if doc["evidence"]["settled_trials"] or doc["recorded_task_secs"] or agent in (REFERENCE_TIMED_AGENT, "oracle"):
        return ""
    return (f"its agent, {agent}, is planned on {REFERENCE_TIMED_AGENT}'s times: the reference times no other agent "
            f"(Run 3 ran mini-swe-agent and recorded its infra errors, not its timeouts); the run's own job dirs "
            f"replace them after its first pass")


def read_settings(environ: dict[str, str] | None = None) -> run_settings.Settings:
    """The run's settings, as the verb that started the plan resolved and checked them: one JSON
    document in TB_SETTINGS (tools/settings.py current), never flags. Without one, or with one no
    verb wrote, one line."""
    try:
        s = run_settings.current(environ)
    except run_settings.SettingsError as e:
        raise PlanError(f"{e} (make plan RUN=<run>)") from None
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        raise PlanError("TB_SETTINGS is not a run's settings document: run this through its make verb "
                        "(make plan RUN=<run>)") from None
    # The catalogue's own check, not one of the plan's: a document written by hand is refused as a verb
    # refuses the value, never read into a traceback.
    catalogue = run_settings.catalogue()
    for name in READS:
        if not catalogue[name].type.valid(s.raw(name)):
            raise PlanError(f"TB_SETTINGS holds setting {name}={safe_read.clip(safe_read.printable(s.raw(name)), 40)}, "
                            f"which is not {catalogue[name].type.phrase()}: run this through its make verb "
                            "(make plan RUN=<run>), which checks every setting")
    return s


@click.command(cls=plan_checks.PlanCommand)
@click.option("--prices", "prices_path", type=click.Path(path_type=Path), default=cost_prices.TSV_PRICES,
              help="the price list (default: env/flavor-prices.tsv)")
@click.option("--calibration", "calibration_path", type=click.Path(path_type=Path), default=None,
              help="state/<run>/calibration.json (make calibrate); used when it exists")
@click.option("--sandbox-curve", "sandbox_curve_path", type=click.Path(path_type=Path), default=None,
              help="state/namespaces/<namespace>/sandbox-curve.json (make calibrate-sandboxes); used when it exists")
@click.option("--run-files", help="the run files' settings, one JSON object a line (scripts/plan.sh); - for stdin")
@click.option("--own", nargs=2, type=Bounded(1, 1000, "setting N_SHARDS or N_CONCURRENT"), default=None,
              help="SHARDS N_CONCURRENT: plan the run's own configuration only, in one line")
@click.option("--json", "as_json", is_flag=True, help="the whole plan as JSON")
def cli(prices_path, calibration_path, sandbox_curve_path, run_files, own, as_json):
    """Simulate the run under candidate servers, shards and N_CONCURRENT; print the table, what binds,
    and the cheapest configuration that meets its DEADLINE with the command that runs it. The run's
    settings come as one document in TB_SETTINGS (make plan sets it); the options are what no setting
    says. Reads job dirs, the profiles, a calibration and the price list; writes nothing."""
    s = read_settings()
    doc = plan(run=s.run, tasks=plan_tasks.task_count(s), k=s["N_ATTEMPTS"], mult=s["AGENT_TIMEOUT_MULTIPLIER"],
               timeout_estimate=float(s["AGENT_TIMEOUT_ESTIMATE"]), model=s.raw("MODEL"), server=s.raw("SERVER"),
               server_flavor=s.raw("SERVER_FLAVOR"), server_dp=s["SERVER_DP"], server_tp=s["SERVER_TP"],
               sandbox_flavor=s.raw("SANDBOX_FLAVOR"), jobs_dir=s.raw("JOBS_DIR"), job_name=s.raw("JOB_NAME"),
               deadline=s["DEADLINE"], reps=s["PLAN_REPS"], seed=s["PLAN_SEED"], mopup_passes=s["MOPUP_PASSES"],
               max_infra_rate=s["MAX_INFRA_RATE"], ready_timeout=float(s["READY_TIMEOUT"]), prices_path=prices_path,
               calibration_path=calibration_path, run_files=read_run_files(run_files), identity=identity_of(s),
               own=tuple(own) if own else None, max_retries=s["MAX_RETRIES"],
               configured=(s["N_SHARDS"], s["N_CONCURRENT"]), agent=s.raw("AGENT"), task_names=tuple(s["TASKS"] or ()),
               sandbox_curve_path=sandbox_curve_path, env_type=s.raw("ENV_TYPE"))
    doc["max_cost_setting"] = s["MAX_COST"]
    doc["agent_note"] = agent_note(s.raw("AGENT"), doc)
    if own:
        doc["own_line"] = plan_render.own_line(doc)
    doc["ceiling_level"], doc["ceiling_line"] = plan_render.ceiling(doc)
    doc["submission_line"] = (plan_render.submission_words(doc, s["MAX_RETRIES"]) if doc["n_attempts"] >= BOARD_ATTEMPTS
                              else "")
    if as_json:
        click.echo(json.dumps(doc, indent=1))
    elif own:
        click.echo(plan_render.own_line(doc))
    else:
        click.echo(plan_render.render(doc, every_row=s["ALL"]), nl=False)


if __name__ == "__main__":
    cli()
