#!/usr/bin/env python3
"""plan: which GPUs, shards and N_CONCURRENT finish a run by a deadline, and what each costs.

A discrete-event simulation of a run (tasks × k attempts) under candidate configurations: the
run's server flavor and its larger siblings (h200, h200x2, h200x4, h200x8: one data-parallel
replica per GPU of the run's own flavor), split into shards (harbor jobs, each at N_CONCURRENT
trials), repeated with a seed. Nothing is launched, read from the Hub or written: the durations
come from job dirs (the run's own, else the bundled examples), the prices from
env/flavor-prices.tsv through tools/cost.py. The model, its constants and the validation:
docs/plan.md.

Exit codes: 0 done, 1 a user-facing error (the message says what and how to fix), 2 usage.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import click
import numpy as np

from tools import cost
from tools import safe_read as SR
from tools import slots as SL
from tools import tally_core as T

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_JOBS = REPO_ROOT / "examples" / "jobs"
# The bundled example closest to the reference's Run 1 (terminus-2, Qwen3.8-27B-FP8, ×4, -n 3):
# what a run with no job dir of its own is planned from.
EXAMPLE_JOB = "example-terminus2-tb21"

# The reference's Run 1 at --n-concurrent 8 on one H200: "about 70% of trials errored with
# SandboxError, InternalServerError or ReadTimeout" (docs/reference-runs.md §3, §7 pitfall 4).
# The high point of p(L), the infra-error rate as a function of trials per replica.
REFERENCE_HIGH_LOAD = 8.0
REFERENCE_HIGH_LOAD_INFRA = 0.70
# The reference's configuration, every plan's baseline row: one GPU, one job, -n 3
# (docs/reference-runs.md §1, "concurrency 3").
BASELINE_CONCURRENCY = 3

# Server loading before the first trial: sglang's weights and CUDA graphs for a 27B FP8 model.
# A constant, bounded by READY_TIMEOUT (make serve gives up there): the reference records no
# loading time, 20 min is a round figure well inside READY_TIMEOUT's 45 min default.
LOADING_SECS = 20 * 60
# What a trial takes besides its agent: sandbox creation before, the verifier after. The
# bundled examples record 40 s before the agent and 80 s after (tests/fixtures/harbor_jobs.py);
# a result.json's agent_execution, all tally_core's scan reads, does not include them.
TRIAL_OVERHEAD_SECS = 120.0
# An infra-errored attempt fails part-way: in the bundled examples the infra trials' agent time
# averages about a third of the settled trials' (12.6 min against 40 min).
INFRA_DURATION_FRACTION = 1 / 3
# harbor's -n: the candidates per shard (the reference saw ~70% infra errors at 8, so no more).
CONCURRENCIES = tuple(range(1, 9))
MAX_REPS = 10_000
# Mop-up passes are simulated until every attempt has settled, as a run is only done then; this
# bounds a curve that never lets one settle (p = 1). MOPUP_PASSES (make reproduce's limit) is
# compared with the passes needed, not used to cut the run short.
MAX_MOPUP_PASSES = 30
# A job's settings as read from its config.json, anyone could have edited: outside these ranges
# the job's figure is left out with a note.
MULTIPLIER_RANGE = (0.01, 100.0)
CONCURRENCY_CAP = 1000
# The work a plan may do, so that any input it accepts ends within about a minute and a half of
# CPU and 70 MiB (measured by benchmarks/plan_speed.py, docs/plan.md §7). Memory grows with one configuration's
# tasks × k × repetitions (its arrays), time with that times the configurations and the passes,
# plus a Python step per queued attempt: both products are bounded, before anything is drawn.
ATTEMPTS_CAP = 10_000        # tasks × k
WORK_CAP = 500_000           # tasks × k × repetitions
# Replicas per flavor tried: a priced sibling of the run's flavor holding 1, 2, 4 or 8 copies of
# it (HF's flavors hold 1, 2, 4 or 8 GPUs); other sizes, a price list's x16 or x3, are not
# planned. With shards up to the replicas and N_CONCURRENT 1 to 8, at most 80 configurations.
REPLICA_COUNTS = (1, 2, 4, 8)
# A price list is a table of a few dozen flavors (env/flavor-prices.tsv: 1.3 KB); it is read as a
# regular file of at most this size, never a FIFO or a device.
PRICES_CAP = 64 * 1024


class PlanError(click.ClickException):
    """A user-facing error: one line saying what and how to fix."""

    def show(self, file=None) -> None:  # in the verb's voice, not click's "Error: "
        click.echo(f"plan: {self.message}", file=file, err=True)


# --------------------------------------------------------------------------- small parsers


def parse_duration(text: str) -> float:
    """An hf-style duration (<number>[s|m|h|d], e.g. 24h, 90m, 3600) in seconds."""
    m = re.fullmatch(r"([0-9]{1,9}(?:\.[0-9]+)?)([smhd]?)", text.strip())
    if not m or float(m.group(1)) <= 0:
        raise PlanError(f"DEADLINE must be a number with an optional unit s, m, h or d (e.g. 24h), got '{SR.clip(text, 40)}'")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


# `<family>x<N>`: N GPUs (at most 9 digits: a longer tail is part of a name, not a count).
GPU_SUFFIX = re.compile(r"x([0-9]{1,9})$")


def gpus_of(flavor: str) -> int:
    """GPUs of an HF Jobs flavor by its name: `<family>x<N>` has N, a bare family one."""
    m = GPU_SUFFIX.search(flavor)
    return int(m.group(1)) if m else 1


def family_of(flavor: str) -> str:
    return GPU_SUFFIX.sub("", flavor)


def require_gpus(flavor: str) -> None:
    """A server flavor holds at least one GPU: `h200x0` would plan zero replicas."""
    if gpus_of(flavor) == 0:
        raise PlanError(f"SERVER_FLAVOR={SR.printable(flavor)} names no GPU (x0): name the flavor the model is "
                        f"served on, e.g. {family_of(flavor)} or {family_of(flavor)}x2")


def candidate_flavors(run_flavor: str, prices: dict[str, float]) -> list[tuple[str, int]]:
    """[(flavor, replicas)]: the run's flavor and, for each other of REPLICA_COUNTS, the cheapest
    priced sibling holding that many copies of its GPUs, one data-parallel replica per copy of
    the run's own (the model fits it, since the run serves it there). One flavor per count: at
    most len(REPLICA_COUNTS) flavors, whatever the price list holds (h200 and h200x1 are one
    count); a priced flavor of no GPU (x0) is no candidate."""
    require_gpus(run_flavor)
    if run_flavor not in prices:
        raise PlanError(f"the run's server flavor '{run_flavor}' has no price in env/flavor-prices.tsv: add it there")
    base = gpus_of(run_flavor)
    best = {1: run_flavor}
    for flavor in sorted(prices, key=lambda f: (prices[f], f)):
        gpus = gpus_of(flavor)
        if family_of(flavor) == family_of(run_flavor) and gpus % base == 0 and gpus // base in REPLICA_COUNTS:
            best.setdefault(gpus // base, flavor)
    return sorted(((flavor, replicas) for replicas, flavor in best.items()), key=lambda x: x[1])


def replica_flavor(flavor: str, dp: int, prices: dict[str, float]) -> str:
    """The flavor one of a data-parallel server's `dp` replicas would run on alone: the priced
    flavor of the same family with 1/dp of its GPUs (h200x4 with SERVER_DP=4: h200)."""
    if dp == 1:
        return flavor
    gpus = gpus_of(flavor)
    if gpus % dp:
        raise PlanError(f"SERVER_DP={dp} does not divide the {gpus} GPUs of {flavor}")
    for candidate in sorted(prices):
        if family_of(candidate) == family_of(flavor) and gpus_of(candidate) == gpus // dp:
            return candidate
    raise PlanError(f"no flavor of {family_of(flavor)} with {gpus // dp} GPU(s) has a price in env/flavor-prices.tsv: add it")


def shard_counts(replicas: int) -> list[int]:
    """Shards tried on `replicas` replicas: powers of two up to the replicas (1, 2, 4, 8), so the
    whole space runs in seconds; each shard is a harbor job, so more shards than replicas only
    adds orchestrators, never serving capacity."""
    return [s for s in REPLICA_COUNTS if s <= replicas]


# --------------------------------------------------------------------------- the job dirs' evidence


@dataclass
class Sample:
    """What job dirs say: settled trials' durations (as the planned run would take them), and
    their infra-error rate at their own load."""

    source: str  # the run's own job dirs | the bundled examples
    dirs: list[str]
    durations: np.ndarray  # seconds, agent time rescaled and capped, plus TRIAL_OVERHEAD_SECS
    finished: int
    infra: int
    load: float | None  # trials per replica they ran at (n_concurrent_trials; one replica)
    notes: list[str]

    @property
    def infra_rate(self) -> float | None:
        return self.infra / self.finished if self.finished else None


def job_settings(job_dir: str, notes: list[str]) -> tuple[float | None, int | None]:
    """(agent_timeout_multiplier, n_concurrent_trials) from a job's config.json; None for a
    value that is missing or out of range (noted)."""
    try:
        cfg = SR.read_json_object(os.path.join(job_dir, "config.json"), 1 << 20, what="a config.json")
    except (OSError, SR.Unreadable) as e:
        notes.append(f"{SR.shown(job_dir)}/config.json: {SR.clip(str(e), 120)}; its trials are left out")
        return None, None
    mult = cost.finite_in(cfg.get("agent_timeout_multiplier", 1.0), *MULTIPLIER_RANGE)
    conc = T.count_of(cfg.get("n_concurrent_trials"), CONCURRENCY_CAP)
    if mult is None:
        notes.append(f"{SR.shown(job_dir)}/config.json: agent_timeout_multiplier is not a number from "
                     f"{MULTIPLIER_RANGE[0]} to {MULTIPLIER_RANGE[1]:g}; its trials are left out")
    if not conc:
        notes.append(f"{SR.shown(job_dir)}/config.json: n_concurrent_trials is not a count; its load is unknown")
    return mult, conc or None


def planned_duration(agent_secs: float, timed_out: bool, source_mult: float, mult: float, timeout_secs: float) -> float:
    """One settled trial's agent time as the planned run would take it, plus the overhead.

    A trial that ended before its timeout takes as long under any multiplier that still lets it
    finish: the timeout does not make the agent faster, so it is only capped at the new one. A
    trial that hit its timeout was cut by it, so it is scaled with the multiplier (a bigger
    budget would have been used, a smaller one cuts it sooner), and capped too.
    """
    secs = agent_secs * (mult / source_mult) if timed_out else agent_secs
    return min(secs, timeout_secs) + TRIAL_OVERHEAD_SECS


def read_sample(job_dirs: list[Path], source: str, mult: float, timeout_secs: float) -> Sample:
    """Every trial of the job dirs through tally_core's scan (limits and hostile files handled
    there), classified by the outcome policy: settled ones give durations, infra ones the rate."""
    policy = T.load_policy()
    notes, scan_notes = [], T.ScanNotes()
    durations, finished, infra = [], 0, 0
    load_sum, load_trials = 0.0, 0  # over the finished trials whose job's concurrency is known
    for job_dir in job_dirs:
        source_mult, conc = job_settings(str(job_dir), notes)
        if source_mult is None:
            continue
        for trial in T.scan_job_dir(job_dir, scan_notes):
            if trial.status != "finished":
                continue
            trial.outcome, trial.rule, _ = T.classify(trial, policy)
            finished += 1
            if conc:
                load_sum, load_trials = load_sum + conc, load_trials + 1
            if not SL.is_settled(trial):
                infra += 1
            elif trial.agent_seconds is not None:
                timed_out = trial.exception_type in policy.timeout_types
                durations.append(planned_duration(trial.agent_seconds, timed_out, source_mult, mult, timeout_secs))
    notes.extend(scan_notes.warnings + scan_notes.unreadable_warnings)
    load = load_sum / load_trials if load_trials else None
    return Sample(source, [cost.rel(d) for d in job_dirs], np.array(durations, dtype=float), finished, infra,
                  load, notes)


def choose_sample(jobs_dir: str, job_name: str, mult: float, timeout_secs: float,
                  examples_dir: Path = EXAMPLES_JOBS, example_job: str = EXAMPLE_JOB, model: str | None = None) -> Sample:
    """The run's own job dirs when they hold a settled trial with an agent time, else the
    bundled examples'. A job dir of the run's name that is another run's (another model's) is
    refused: its durations are not this run's."""
    try:
        own = T.run_job_dirs(jobs_dir, job_name)
    except T.TallyError:
        own = []
    try:
        T.refuse_foreign_job_dirs(own, model)
    except T.TallyError as e:
        raise PlanError(str(e)) from None
    if own:
        sample = read_sample(own, "the run's own job dirs", mult, timeout_secs)
        if sample.durations.size:
            return sample
    try:
        dirs = T.run_job_dirs(examples_dir, example_job)
    except T.TallyError:
        dirs = []
    sample = read_sample(dirs, "the bundled examples (the run has no finished trial yet)", mult, timeout_secs)
    if not sample.durations.size:
        raise PlanError(f"no settled trial with an agent time in {SR.shown(str(examples_dir))}/{example_job}*: "
                        f"nothing to draw durations from")
    return sample


# --------------------------------------------------------------------------- p(L)


@dataclass
class InfraCurve:
    """p(L), the share of attempts that end in an infra error at L trials per replica.

    Piecewise-linear through two points, flat outside them (np.interp): the job dirs' own rate
    at their own load, and the reference's ~70% at 8. Linear, because two points fix a line
    and nothing more is known between them; flat beyond them, because below the lower point
    part of the errors do not come from load at all (an expired mirror, a sandbox's 503) and
    there is no evidence they vanish, and the plan never goes past 8 trials per replica.
    A logistic curve would invent a floor and a ceiling the data do not show.
    """

    loads: tuple[float, ...]
    rates: tuple[float, ...]

    def __call__(self, load):
        return np.interp(load, self.loads, self.rates)


def fit_curve(sample: Sample) -> InfraCurve:
    high = (REFERENCE_HIGH_LOAD, REFERENCE_HIGH_LOAD_INFRA)
    if sample.infra_rate is None or sample.load is None:
        return InfraCurve((high[0],), (high[1],))
    if math.isclose(sample.load, high[0]):
        # The run's own measurement at the reference's load wins over the reference's.
        return InfraCurve((sample.load,), (sample.infra_rate,))
    points = sorted([(sample.load, sample.infra_rate), high])
    return InfraCurve(tuple(p[0] for p in points), tuple(p[1] for p in points))


# --------------------------------------------------------------------------- the simulation


def pass_makespan(durations: np.ndarray, slots: int) -> np.ndarray:
    """Each shard's queue run by `slots` trials at a time, first come first served, as harbor's
    -n runs its trials: the time the last shard's last attempt ends, per repetition.

    durations: (reps, shards, m) seconds in queue order; 0 is no attempt (it takes no slot time).
    """
    reps, shards, m = durations.shape
    queues = durations.reshape(reps * shards, m)  # one row per (repetition, shard)
    free = np.zeros((reps * shards, slots))
    rows = np.arange(reps * shards)
    for j in range(m):  # two numpy calls per attempt: this loop is most of a plan's time
        free[rows, free.argmin(axis=1)] += queues[:, j]
    return free.reshape(reps, shards, slots).max(axis=(1, 2))


def compact(durations: np.ndarray) -> np.ndarray:
    """The attempts left (non-zero) moved to the front of each shard's queue, in order, and the
    queue cut to the longest: a mop-up pass's queue."""
    left = durations > 0
    order = np.argsort(~left, axis=2, kind="stable")
    width = int(left.sum(axis=2).max(initial=0))
    return np.take_along_axis(durations, order, 2)[:, :, :width]


def queues(pool: np.ndarray, tasks: int, k: int, shards: int, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps, shards, m) full durations: task i's k attempts in shard i mod shards (a harbor job
    per shard, its tasks given by name), each drawn from the pool (a bootstrap)."""
    per_shard = [k * len(range(s, tasks, shards)) for s in range(shards)]
    m = max(per_shard)
    draws = rng.choice(pool, size=(reps, shards, m))
    real = np.arange(m)[None, :] < np.array(per_shard)[:, None]
    return np.where(real[None, :, :], draws, 0.0)


@dataclass
class Outcome:
    makespan: np.ndarray  # seconds per repetition, every pass
    sandbox_secs: np.ndarray  # sandbox time per repetition: every attempt, errored ones included
    mopups: np.ndarray  # mop-up passes per repetition
    left: np.ndarray  # attempts still errored after the last pass simulated


def simulate(pool: np.ndarray, tasks: int, k: int, shards: int, slots: int, replicas: int,
             infra_p: Callable[[int, np.ndarray], np.ndarray], reps: int, rng: np.random.Generator,
             max_mopups: int = MAX_MOPUP_PASSES, infra_fraction: float = INFRA_DURATION_FRACTION,
             in_run_retries: int = 0) -> Outcome:
    """A run: a first pass of every attempt, then mop-up passes of the infra-errored ones, each
    starting when the previous one has ended in every shard, until none is left or max_mopups
    have run.

    An attempt errs with p = infra_p(pass_no, load), load the trials per replica the pass can
    run (fewer attempts than slots load the server less); an errored one takes infra_fraction
    of its duration, and its retry the whole of it (the same task). With in_run_retries R
    (MAX_RETRIES, harbor's --max-retries), harbor tries an errored attempt again at once, in the
    same slot (its queue holds the slot across retries: harbor/trial/queue.py), up to R times,
    each try erring with the same p: only an attempt that errs R + 1 times waits for mop-up.
    """
    todo = queues(np.maximum(np.asarray(pool, dtype=float), 1.0), tasks, k, shards, reps, rng)
    makespan, sandbox = np.zeros(reps), np.zeros(reps)
    mopups, left = np.zeros(reps, dtype=int), np.zeros(reps, dtype=int)
    for pass_no in range(max_mopups + 1):
        waiting = (todo > 0).sum(axis=(1, 2))
        if pass_no and not waiting.any():
            break
        load = np.minimum(waiting, shards * slots) / replicas
        p = np.asarray(infra_p(pass_no, load), dtype=float)
        errs, took = tries(todo, p, rng, in_run_retries, infra_fraction)
        makespan += pass_makespan(took, slots)
        sandbox += took.sum(axis=(1, 2))
        mopups += (waiting > 0) & (pass_no > 0)
        todo = compact(np.where(errs, todo, 0.0))
        left = (todo > 0).sum(axis=(1, 2))
    return Outcome(makespan, sandbox, mopups, left)


def tries(todo: np.ndarray, p: np.ndarray, rng: np.random.Generator, retries: int,
          infra_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """(the attempts still errored after their in-run retries, the slot time each took): every try
    errs with p; an errored try takes infra_fraction of the attempt's duration, the one that
    settles it the whole. With no retries, one draw per attempt, as before in-run retries."""
    pending = todo > 0
    took = np.zeros_like(todo)
    for _ in range(retries + 1):
        errs = (rng.random(todo.shape) < p[:, None, None]) & pending
        took += np.where(errs, todo * infra_fraction, np.where(pending, todo, 0.0))
        pending = errs
    return pending, took


# --------------------------------------------------------------------------- configurations


@dataclass(frozen=True)
class Config:
    flavor: str
    replicas: int
    shards: int
    n_concurrent: int

    @property
    def load(self) -> float:
        return self.shards * self.n_concurrent / self.replicas


@dataclass
class Costs:
    gpu_usd: dict[str, float]  # flavor -> USD/h
    port_usd: float
    sandbox_usd: float
    sandbox_flavor: str
    label: str


class _ReadPrices:
    """A price list already read here (a regular file under PRICES_CAP), in the one form
    tools/cost.py's tsv_prices reads a path: read_text. So the bytes checked are the bytes
    parsed, by the same parser as make cost's offline prices."""

    def __init__(self, data: bytes):
        self.data = data

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.data.decode(encoding, "replace")


def read_price_list(path: Path) -> _ReadPrices:
    """The price list's bytes: a regular file of at most PRICES_CAP (a FIFO or a device would
    hang the plan, /dev/zero never ends), else one line saying which."""
    try:
        return _ReadPrices(SR.read_regular(path, PRICES_CAP, "a price list"))
    except FileNotFoundError:
        raise PlanError(f"the price list {SR.printable(str(path))} does not exist: pass an existing file "
                        f"(the default is env/flavor-prices.tsv)") from None
    except SR.Unreadable as e:
        raise PlanError(f"the price list {SR.printable(str(path))} is refused: {e} (a price list is a "
                        f"regular file of at most {PRICES_CAP // 1024} KiB, as env/flavor-prices.tsv)") from None


def load_costs(path: Path, sandbox_flavor: str) -> Costs:
    prices = cost.tsv_prices(read_price_list(path))
    port = prices.pop("exposed-ports", 0.0)
    if sandbox_flavor not in prices:
        raise PlanError(f"the sandbox flavor '{sandbox_flavor}' has no price in {SR.shown(str(path))}: add it there")
    return Costs(prices, port, prices[sandbox_flavor], sandbox_flavor,
                 f"{cost.rel(path)} (tools/cost.py's offline price list)")


def configurations(run_flavor: str, costs: Costs) -> list[Config]:
    out = []
    for flavor, replicas in candidate_flavors(run_flavor, costs.gpu_usd):
        for shards in shard_counts(replicas):
            out.extend(Config(flavor, replicas, shards, n) for n in CONCURRENCIES)
    return out


def evaluate(config: Config, *, pool: np.ndarray, curve: InfraCurve, tasks: int, k: int, reps: int, seed: int,
             loading_secs: float, run_gpus: int, costs: Costs, max_retries: int = 0) -> dict:
    """One row: the configuration simulated `reps` times with its own generator seeded `seed`
    (every row sees the same draws where its shapes allow: a fair comparison)."""
    rng = np.random.default_rng(seed)
    out = simulate(pool, tasks, k, config.shards, config.n_concurrent, config.replicas,
                   lambda _pass, load: curve(load), reps, rng, in_run_retries=max_retries)
    wall = loading_secs + out.makespan
    gpus = config.replicas * run_gpus
    usd = wall / 3600 * (costs.gpu_usd[config.flavor] + costs.port_usd) + out.sandbox_secs / 3600 * costs.sandbox_usd
    return {
        "flavor": config.flavor, "replicas": config.replicas, "gpus": gpus, "shards": config.shards,
        "n_concurrent": config.n_concurrent, "load_per_replica": round(config.load, 4),
        "infra_rate": round(float(curve(config.load)), 4),
        "wall_clock_median_secs": round(float(np.median(wall)), 1),
        "wall_clock_p90_secs": round(float(np.percentile(wall, 90)), 1),
        "gpu_hours_median": round(float(np.median(wall)) / 3600 * gpus, 2),
        "usd_median": round(float(np.median(usd)), 2),
        "sandbox_hours_median": round(float(np.median(out.sandbox_secs)) / 3600, 2),
        "mopup_passes_mean": round(float(out.mopups.mean()), 2),
        "mopup_passes_p90": int(np.percentile(out.mopups, 90, method="higher")),
        "left_errored_mean": round(float(out.left.mean()), 2),
    }


def infra_ceiling(baseline: dict, max_infra_rate: float) -> float:
    """The highest infra rate a recommendation may run at: MAX_INFRA_RATE, the rate make watch
    alarms at, or the baseline's own when that is higher already (the job dirs' rate at -n 3).

    The simulation lets an infra error cost only part of a trial and does not slow a trial down
    with load (docs/plan.md), so on time alone it would load a replica up to the ~70% the
    reference fled at -n 8; the run's evidence says where a replica is known to work, and
    capacity beyond it comes from more replicas, not more load on one."""
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


SERVERS_DIR = REPO_ROOT / "env" / "servers"
# Scale-out's aim (issue 21): a k = 5 run in about a day at the single-GPU run's cost, give or take 10%.
COST_TARGET = 1.1
PROFILE_LINE = re.compile(r"^(?P<name>MODEL|SERVER_FLAVOR|SERVER_DP)=(?P<value>[^\s#]*)")


def server_profile(model: str | None, flavor: str, replicas: int, servers_dir: Path = SERVERS_DIR) -> str | None:
    """The bundled profile (env/servers/<name>.env) that serves `model` on `flavor` with `replicas`
    data-parallel replicas, by its plain MODEL=, SERVER_FLAVOR= and SERVER_DP= lines."""
    if not model or not servers_dir.is_dir():
        return None
    for path in sorted(servers_dir.glob("*.env")):
        try:
            text = SR.read_regular(path, 1 << 16, "a server profile").decode("utf-8", "replace")
        except (OSError, SR.Unreadable):
            continue
        found = {m["name"]: m["value"] for m in map(PROFILE_LINE.match, text.splitlines()) if m}
        if found.get("MODEL") == model and found.get("SERVER_FLAVOR") == flavor \
                and found.get("SERVER_DP", "1") == str(replicas):
            return path.stem
    return None


def run_with(run: str, r: dict, model: str | None, mopup_passes: int) -> str:
    """The settings that run configuration `r`: the make command, or what is missing for it."""
    profile = server_profile(model, r["flavor"], r["replicas"])
    if profile is None:
        return (f"no profile in env/servers/ serves {model or 'the model'} on {r['flavor']} with SERVER_DP={r['replicas']}: "
                f"write one (docs/data-parallel.md), then make reproduce RUN={run} SERVER=<it> N_SHARDS={r['shards']} "
                f"N_CONCURRENT={r['n_concurrent']}")
    passes = f" MOPUP_PASSES={r['mopup_passes_p90']}" if r["mopup_passes_p90"] > mopup_passes else ""
    return (f"make reproduce RUN={run} SERVER={profile} N_SHARDS={r['shards']} "
            f"N_CONCURRENT={r['n_concurrent']}{passes}")


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


def plan(*, run: str, tasks: int, k: int, mult: float, timeout_estimate: float, run_flavor: str,
         sandbox_flavor: str, jobs_dir: str, job_name: str, deadline: float | None, reps: int, seed: int,
         mopup_passes: int, max_infra_rate: float, ready_timeout: float, prices_path: Path = cost.TSV_PRICES,
         examples_dir: Path = EXAMPLES_JOBS, model: str | None = None, server_dp: int = 1,
         max_retries: int = 0) -> dict:
    check_work(tasks, k, reps)
    require_gpus(run_flavor)
    costs = load_costs(prices_path, sandbox_flavor)
    # The plan's unit is one replica: a data-parallel run's flavor holds server_dp of them.
    run_flavor = replica_flavor(run_flavor, server_dp, costs.gpu_usd)
    timeout_secs = timeout_estimate * mult
    sample = choose_sample(jobs_dir, job_name, mult, timeout_secs, examples_dir, model=model)
    curve = fit_curve(sample)
    loading = min(LOADING_SECS, ready_timeout)
    common = dict(pool=sample.durations, curve=curve, tasks=tasks, k=k, reps=reps, seed=seed, loading_secs=loading, run_gpus=gpus_of(run_flavor), costs=costs,
                  max_retries=max_retries)
    rows = [evaluate(c, **common) for c in configurations(run_flavor, costs)]
    baseline = next(r for r in rows if r["flavor"] == run_flavor and r["shards"] == 1
                    and r["n_concurrent"] == BASELINE_CONCURRENCY)
    rec = recommend(rows, deadline, infra_ceiling(baseline, max_infra_rate))
    if rec:
        rec["usd_ratio_to_baseline"] = round(rec["row"]["usd_median"] / baseline["usd_median"], 2)
        rec["run_with"] = run_with(run, rec["row"], model, mopup_passes)
    return {
        "run": run, "tasks": tasks, "n_attempts": k, "attempts": tasks * k,
        "agent_timeout_multiplier": mult, "agent_timeout_secs": timeout_secs,
        "deadline_secs": deadline, "reps": reps, "seed": seed, "mopup_passes_setting": mopup_passes,
        "max_retries": max_retries,
        "loading_secs": loading, "criterion": "p90 wall-clock",
        "sample": {"source": sample.source, "job_dirs": sample.dirs, "settled_trials": int(sample.durations.size),
                   "mean_duration_secs": round(float(sample.durations.mean()), 1),
                   "finished_trials": sample.finished, "infra_trials": sample.infra, "load": sample.load,
                   "notes": sample.notes},
        "infra_curve": {"kind": "piecewise-linear, flat outside its points", "loads": list(curve.loads),
                        "rates": [round(r, 4) for r in curve.rates]},
        "prices": {"source": costs.label,
                   "usd_per_hour": {f: costs.gpu_usd[f] for f, _ in candidate_flavors(run_flavor, costs.gpu_usd)},
                   "exposed_port_usd_per_hour": costs.port_usd, "sandbox_flavor": sandbox_flavor,
                   "sandbox_usd_per_hour": costs.sandbox_usd},
        "configurations": rows, "baseline": baseline, "recommendation": rec,
    }


# --------------------------------------------------------------------------- rendering


def hours(secs: float) -> str:
    return f"{secs / 3600:.1f} h"


COLUMNS = ("flavor", "replicas", "shards", "N_CONCURRENT", "load/replica", "infra rate", "median wall-clock",
           "p90 wall-clock", "GPU-hours", "dollars", "mop-up passes")


def row_cells(r: dict) -> list[str]:
    return [r["flavor"], str(r["replicas"]), str(r["shards"]), str(r["n_concurrent"]), f"{r['load_per_replica']:g}",
            f"{r['infra_rate']:.0%}", hours(r["wall_clock_median_secs"]), hours(r["wall_clock_p90_secs"]),
            f"{r['gpu_hours_median']:.1f}", f"${r['usd_median']:,.0f}", f"{r['mopup_passes_mean']:.1f}"]


def describe(r: dict) -> str:
    return (f"{r['flavor']} ({r['replicas']} replica{'s' * (r['replicas'] > 1)}), {r['shards']} shard"
            f"{'s' * (r['shards'] > 1)} × -n {r['n_concurrent']}")


def render(doc: dict) -> str:
    s, c = doc["sample"], doc["infra_curve"]
    pts = " and ".join(f"{rate:.0%} at L={load:g}" for load, rate in zip(c["loads"], c["rates"]))
    lines = [
        f"# plan: {doc['run']}: {doc['tasks']} task{'s' * (doc['tasks'] > 1)} × {doc['n_attempts']} "
        f"attempt{'s' * (doc['n_attempts'] > 1)} = {doc['attempts']} attempts",
        "",
        f"- durations: {s['settled_trials']} settled trials of {s['source']} ({', '.join(s['job_dirs'])}), agent "
        f"time capped at {doc['agent_timeout_secs']:g} s (×{doc['agent_timeout_multiplier']:g}), "
        f"+{TRIAL_OVERHEAD_SECS:g} s each; mean {s['mean_duration_secs'] / 60:.1f} min",
        f"- infra errors: p(L) {c['kind']}, through {pts} (the job dirs: {s['infra_trials']} of "
        f"{s['finished_trials']} finished trials; the reference: docs/reference-runs.md §3); an errored attempt "
        f"takes {INFRA_DURATION_FRACTION:.2f} of its duration and "
        + (f"is tried again in the run up to MAX_RETRIES={doc['max_retries']} times in its slot; one still errored "
           f"waits for the next mop-up pass" if doc["max_retries"] else "waits for the next mop-up pass")
        + ", run until every attempt has settled",
        f"- server loading {doc['loading_secs'] / 60:g} min; {doc['reps']} repetitions, seed {doc['seed']}; "
        f"GPU-hours and dollars are medians",
        f"- prices: {doc['prices']['source']}: "
        + ", ".join(f"{f} ${p:g}/h" for f, p in doc["prices"]["usd_per_hour"].items())
        + f", exposed port ${doc['prices']['exposed_port_usd_per_hour']:g}/h, sandbox "
        f"{doc['prices']['sandbox_flavor']} ${doc['prices']['sandbox_usd_per_hour']:g}/h",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---" for _ in COLUMNS) + "|",
    ]
    lines += ["| " + " | ".join(row_cells(r)) + " |" for r in doc["configurations"]]
    b = doc["baseline"]
    lines += ["", f"baseline: {describe(b)}: median {hours(b['wall_clock_median_secs'])}, "
                  f"p90 {hours(b['wall_clock_p90_secs'])}, ${b['usd_median']:,.0f}"]
    rec = doc["recommendation"]
    if rec is None:
        lines.append("recommendation: none (no DEADLINE given: DEADLINE=24h picks the cheapest configuration "
                     "that meets it)")
    else:
        r = rec["row"]
        ratio = f"${r['usd_median']:,.0f}, {rec['usd_ratio_to_baseline']:.2f}× the baseline's ${b['usd_median']:,.0f}"
        if rec["meets"]:
            lines.append(f"recommendation: {describe(r)}: the cheapest whose p90 wall-clock "
                         f"({hours(r['wall_clock_p90_secs'])}) meets the deadline of {hours(doc['deadline_secs'])}, "
                         f"among those at most {rec['infra_ceiling']:.0%} infra errors; {ratio}")
        else:
            lines.append(f"recommendation: none at most {rec['infra_ceiling']:.0%} infra errors meets the deadline of "
                         f"{hours(doc['deadline_secs'])}; the fastest, {describe(r)}, misses it by "
                         f"{hours(rec['miss_secs'])} at p90 ({hours(r['wall_clock_p90_secs'])}); {ratio}")
        lines.append(f"run it with: {rec['run_with']}")
        target = COST_TARGET * b["usd_median"]
        if rec["meets"] and r["usd_median"] > target:
            lines.append(f"note: no configuration meets the deadline within {COST_TARGET:g}× the baseline's dollars "
                         f"(${target:,.0f}): the cheapest that does costs ${r['usd_median'] - target:,.0f} more than that, "
                         f"{rec['usd_ratio_to_baseline']:.2f}×. Its infra rate is what moves it most: re-run make plan "
                         f"once the run's own job dirs hold finished trials")
        if r["mopup_passes_p90"] > doc["mopup_passes_setting"]:
            lines.append(f"note: it needs up to {r['mopup_passes_p90']} mop-up passes (p90); make reproduce stops "
                         f"after MOPUP_PASSES={doc['mopup_passes_setting']}: run it with "
                         f"MOPUP_PASSES={r['mopup_passes_p90']}")
    root = str(REPO_ROOT) + os.sep
    for note in s["notes"][:5]:  # the rest: --json
        lines.append(f"note: reading the job dirs: {note.replace(root, '')}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- command line


@click.command()
@click.option("--run", required=True, help="the run's name, for the title")
@click.option("--tasks", type=click.IntRange(1, 100_000), help="tasks in the run (empty: the run's job's plan)")
@click.option("--attempts", "k", type=click.IntRange(1, T.MAX_ATTEMPTS), default=1, show_default=True,
              help="N_ATTEMPTS, harbor's -k")
@click.option("--multiplier", type=click.FloatRange(*MULTIPLIER_RANGE), default=1.0, show_default=True,
              help="AGENT_TIMEOUT_MULTIPLIER")
@click.option("--timeout-estimate", type=click.FloatRange(1, 86400 * 7), default=900.0, show_default=True,
              help="AGENT_TIMEOUT_ESTIMATE: one trial's agent timeout (s) at multiplier 1")
@click.option("--server-flavor", required=True, help="SERVER_FLAVOR, the flavor one replica runs on")
@click.option("--sandbox-flavor", default="cpu-upgrade", show_default=True, help="SANDBOX_FLAVOR")
@click.option("--jobs-dir", default="jobs", show_default=True)
@click.option("--job-name", required=True)
@click.option("--deadline", help="an hf-style duration (24h, 90m, 2d); empty: no recommendation")
@click.option("--reps", type=click.IntRange(1, MAX_REPS), default=200, show_default=True, help="PLAN_REPS")
@click.option("--seed", type=click.IntRange(0, 2**32 - 1), default=0, show_default=True, help="PLAN_SEED")
@click.option("--mopup-passes", type=click.IntRange(0, 1000), default=3, show_default=True,
              help="MOPUP_PASSES: make reproduce's limit, compared with the passes needed")
@click.option("--max-infra-rate", type=click.FloatRange(0, 1), default=0.3, show_default=True,
              help="MAX_INFRA_RATE: the highest infra rate a recommendation may run at (or the baseline's)")
@click.option("--ready-timeout", type=click.FloatRange(1, 10**9), default=2700.0, show_default=True,
              help="READY_TIMEOUT: bounds the server's loading time")
@click.option("--prices", "prices_path", type=click.Path(path_type=Path), default=cost.TSV_PRICES,
              help="the price list (default: env/flavor-prices.tsv)")
@click.option("--model", default=None, help="MODEL: the recommendation names the bundled server profile that serves it")
@click.option("--server-dp", type=click.IntRange(1, 64), default=1, show_default=True,
              help="SERVER_DP: data-parallel replicas on --server-flavor")
@click.option("--max-retries", type=click.IntRange(0, 10), default=0, show_default=True,
              help="MAX_RETRIES: harbor's in-run retries of an infra-errored attempt")
@click.option("--json", "as_json", is_flag=True, help="the whole plan as JSON")
def cli(run, tasks, k, multiplier, timeout_estimate, server_flavor, sandbox_flavor, jobs_dir, job_name, deadline,
        reps, seed, mopup_passes, max_infra_rate, ready_timeout, prices_path, model, server_dp, max_retries, as_json):
    """Simulate RUN under candidate GPU flavors, shards and N_CONCURRENT; print the table and the
    cheapest configuration that meets --deadline. Reads job dirs and the price list; writes nothing."""
    tasks = tasks or planned_tasks(jobs_dir, job_name, k)
    doc = plan(run=run, tasks=tasks, k=k, mult=multiplier, timeout_estimate=timeout_estimate,
               run_flavor=server_flavor, sandbox_flavor=sandbox_flavor, jobs_dir=jobs_dir, job_name=job_name,
               deadline=parse_duration(deadline) if deadline else None, reps=reps, seed=seed,
               mopup_passes=mopup_passes, max_infra_rate=max_infra_rate, ready_timeout=ready_timeout, prices_path=prices_path,
               model=model, server_dp=server_dp, max_retries=max_retries)
    if as_json:
        click.echo(json.dumps(doc, indent=1))
    else:
        click.echo(render(doc), nl=False)


def planned_tasks(jobs_dir: str, job_name: str, k: int) -> int:
    """The tasks the run's first pass planned (its job's result.json's n_total_trials ÷ k, summed
    over its shards), when the settings name none."""
    try:
        first = [d for d in T.run_job_dirs(jobs_dir, job_name) if T.retry_number(job_name, d.name) == 0]
        counts = [T.count_of(SR.read_json_object(os.path.join(d, "result.json")).get("n_total_trials"),
                             100_000 * T.MAX_ATTEMPTS) for d in first]
    except (T.TallyError, OSError, SR.Unreadable):
        counts = []
    n = sum(counts) if counts and None not in counts else None
    if not n or n // k < 1:
        raise PlanError("the run's task count is unknown: set DATASET_TASKS (or TASKS, N_TASKS) in its run file, "
                        "or on the command line")
    return n // k


if __name__ == "__main__":
    cli()
