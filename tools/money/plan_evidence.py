"""plan_evidence: what make plan's numbers are fitted to: the run's own job dirs, else the reference.

Two things are fitted (docs/plan.md §4):

- Agent times. A trial's natural agent time (how long it would run with no timeout) is taken as
  exponential: the one-parameter family, as the reference gives one figure per model (Run 1: 16 of
  89 trials of Qwen3.8-27B-FP8 hit the 3,600 s timeout of ×4; Run 2: 3 of 89 of gpt-oss-20b), and
  the maximum-entropy law for a positive time of known mean. P(T > 3600) = 16/89 gives a mean of
  3600 / ln(89/16) = 2,098 s. From job dirs the mean is the censored maximum-likelihood one: every
  settled trial's agent time (a timed-out one at its timeout) over the trials that ended before
  their timeout.
- Infra errors by side (tools/results/tally_policy.py infra_side). The sandbox side is a function of the
  trials running at once over every shard (what strains the sandboxes): piecewise-linear through
  the job dirs' rate at their own concurrency and the reference's ~70% at 8 (Run 1), flat outside;
  with no job dirs, through the reference's 12 of 178 at 3 (Runs 2 and 3: 4 of 89 and 8 of 89) and
  70% at 8. The model-server side is flat at the job dirs' own rate (the reference does not split
  its errors, and read its -n 8 ones as sandbox strain: 0 without job dirs). Interruptions
  (CancelledError) are left out: a stop's, not strain.

A bundled example is never read here: they are hand-written fixtures (docs/plan.md §3).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tools.money import cost_hf
from tools import safe_read
from tools.results import slots
from tools.results import tally_jobs
from tools.results import tally_policy
from tools.results import tally_trials

# The reference's infra-error rates (docs/reference-runs.md §3 to §5): Runs 2 and 3 at -n 3, one
# server, 4 of 89 and 8 of 89 first-pass trials; Run 1 at -n 8 about 70%, "sandbox strain".
REFERENCE_LOW_AT_ONCE = 3
REFERENCE_LOW_INFRA = (4 + 8, 89 + 89)
REFERENCE_HIGH_AT_ONCE = 8
REFERENCE_HIGH_INFRA = 0.70
# The reference's timed-out trials, per model, at its ×4 (3,600 s of agent time): Run 1 (Qwen3.8-
# 27B-FP8, terminus-2, one H200 at -n 3): 16 AgentTimeoutError of 89; Run 2 (gpt-oss-20b, one L40S
# at -n 3): 3 of 89. The server and load they ran at is where their durations are from.
REFERENCE_TIMEOUT_SECS = 3600.0


@dataclass(frozen=True)
class ReferenceRun:
    name: str
    timed_out: int
    trials: int
    flavor: str
    at_once: int


REFERENCE_RUNS = {
    "Qwen/Qwen3.8-27B-FP8": ReferenceRun("Run 1", 16, 89, "h200", 3),
    "openai/gpt-oss-20b": ReferenceRun("Run 2", 3, 89, "l40sx1", 3),
}
# Single tasks the reference timed, by model, agent and task (docs/reference-runs.md §2: the TB3
# smoke, atrx-vep-crispr, terminus-2 on one H200: 3 h 06 min, 0 exceptions). A run of exactly such
# tasks, with no job dir of its own, plans each at its recorded time, not at the dataset-wide fit
# (whose mean, 35 min, is terminal-bench 2.1's, not a 7 h expert task's): evidence, as a job dir
# is, so its plan repeats the record and checks nothing.
RECORDED_TASK_SECS = {("Qwen/Qwen3.8-27B-FP8", "terminus-2", "atrx-vep-crispr"): 3 * 3600.0 + 6 * 60}


def recorded_task_secs(model: str, agent: str, tasks: list[str]) -> float | None:
    """The reference's recorded agent time of the run's tasks (their mean) when it timed every one
    of them with this model and agent; None otherwise."""
    times = [RECORDED_TASK_SECS.get((model, agent, task)) for task in tasks]
    return sum(times) / len(times) if times and None not in times else None


# An infra error strikes part-way through its attempt; no record here says when. Assumption: at
# any moment alike, so on average half the attempt. With job dirs: their infra trials' mean agent
# time over their settled trials'.
INFRA_DURATION_FRACTION = 0.5
# What a trial takes besides its agent: hf-sandbox's start (huggingface_hub's Sandbox.create waits
# at most start_timeout = 120 s; its docstring: about 7 s on cpu-basic) and the verifier. The bound
# is taken: no record here times the verifier.
TRIAL_OVERHEAD_SECS = 120.0

# A job's settings as read from its config.json, anyone could have edited: outside these ranges
# the job's figure is left out with a note.
MULTIPLIER_RANGE = (0.01, 100.0)
CONCURRENCY_CAP = 1000


class EvidenceError(Exception):
    """What the plan cannot be fitted to, in one line."""


@dataclass
class Evidence:
    """What the numbers are fitted to, and the server and load they were recorded at."""

    source: str                  # the run's own job dirs | the reference's Run N
    dirs: list[str]
    mean_agent_secs: float       # natural agent time's mean, at the source's server and load
    settled: int                 # trials the mean is fitted to (0: the reference's figure)
    timed_out: int
    finished: int                # finished trials, interruptions left out
    sides: dict                  # infra errors by side among them
    at_once: float | None        # trials running at once (every shard) they ran at
    per_replica: float | None    # the same per replica of their server
    source_flavor: str | None
    source_tp: int
    decode_share: float | None   # output tokens × step / agent time, when tokens were recorded
    infra_fraction: float
    reference: ReferenceRun | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def sandbox_rate(self) -> float | None:
        return self.sides["sandbox"] / self.finished if self.finished else None

    @property
    def server_rate(self) -> float:
        return self.sides["server"] / self.finished if self.finished else 0.0


def job_settings(job_dir: str, notes: list[str]) -> tuple[float | None, int | None]:
    """(agent_timeout_multiplier, n_concurrent_trials) from a job's config.json; None for a
    value that is missing or out of range (noted)."""
    try:
        cfg = safe_read.read_json_object(os.path.join(job_dir, "config.json"), 1 << 20, what="a config.json")
    except (OSError, safe_read.Unreadable) as e:
        notes.append(f"{safe_read.shown(job_dir)}/config.json: {safe_read.clip(str(e), 120)}; its trials are left out")
        return None, None
    mult = cost_hf.finite_in(cfg.get("agent_timeout_multiplier", 1.0), *MULTIPLIER_RANGE)
    conc = tally_trials.count_of(cfg.get("n_concurrent_trials"), CONCURRENCY_CAP)
    if mult is None:
        notes.append(f"{safe_read.shown(job_dir)}/config.json: agent_timeout_multiplier is not a number from "
                     f"{MULTIPLIER_RANGE[0]} to {MULTIPLIER_RANGE[1]:g}; its trials are left out")
    if not conc:
        notes.append(f"{safe_read.shown(job_dir)}/config.json: n_concurrent_trials is not a count; its load is unknown")
    return mult, conc or None


def at_once_of(job_dir: Path, job_name: str, conc: int, shards: int) -> int:
    """Trials the job ran beside the others: a shard ran with every shard of the first pass."""
    return conc * shards if tally_jobs.shard_number(job_name, job_dir.name) is not None else conc


def read_own(job_dirs: list[Path], job_name: str, flavor: str, dp: int, tp: int,
             step_secs=None) -> Evidence:
    """The run's own job dirs, every trial through tally_trials's scan, classified by the policy.
    `step_secs(sequences)` is the roofline's step on the run's own server (None: not modelled)."""
    policy = tally_policy.load_policy()
    notes, scan_notes = [], tally_trials.ScanNotes()
    shards = sum(1 for d in job_dirs if tally_jobs.shard_number(job_name, d.name) is not None)
    agent_sum, settled, timed_out, finished = 0.0, 0, 0, 0
    infra_secs, settled_secs = [], []
    sides = dict.fromkeys(tally_policy.SIDES, 0)
    at_once_sum, at_once_n = 0.0, 0
    tokens_out, tokens_secs = 0, 0.0
    instant = 0  # settled trials whose agent started and finished at the same instant
    for job_dir in job_dirs:
        mult, conc = job_settings(str(job_dir), notes)
        if mult is None:
            continue
        at_once = at_once_of(job_dir, job_name, conc, shards) if conc else None
        for trial in tally_trials.scan_job_dir(job_dir, scan_notes):
            if trial.status != "finished":
                continue
            trial.outcome, trial.rule, _ = tally_policy.classify(trial, policy)
            if not slots.is_settled(trial):
                side = tally_policy.infra_side(trial, policy)
                if side == "interrupted":
                    continue  # a stop's: neither strain nor a duration
                sides[side] += 1
                if trial.agent_seconds is not None:
                    infra_secs.append(trial.agent_seconds)
            elif trial.agent_seconds == 0:
                # No agent runs in no time: such a result.json records no duration (a hand-made
                # or broken one), and a mean of 0 s is no exponential law. Left out of the fit,
                # as a trial with no agent time is; its outcome still counts below.
                instant += 1
            elif trial.agent_seconds is not None:
                settled += 1
                agent_sum += trial.agent_seconds
                settled_secs.append(trial.agent_seconds)
                timed_out += trial.exception_type in policy.timeout_types
                out = trial.tokens[2] if trial.tokens else None
                if out is not None and trial.agent_seconds > 0:
                    tokens_out, tokens_secs = tokens_out + out, tokens_secs + trial.agent_seconds
            finished += 1
            if at_once:
                at_once_sum, at_once_n = at_once_sum + at_once, at_once_n + 1
    notes.extend(scan_notes.warnings + scan_notes.unreadable_warnings)
    if instant:
        notes.append(f"{instant} settled trial{'s' * (instant > 1)} {'have' if instant > 1 else 'has'} an agent time "
                     f"of 0 s (the agent started and finished at the same instant): no duration, left out of the "
                     f"agent-time fit")
    at_once = at_once_sum / at_once_n if at_once_n else None
    ended = settled - timed_out
    if settled and not ended:
        notes.append(f"every one of the {settled} settled trials hit its timeout: the mean agent time is only "
                     f"bounded below; taken as if one had ended at the last moment")
    mean = agent_sum / max(ended, 1) if settled else 0.0
    share = None
    if step_secs and tokens_secs and at_once:
        share = min(0.95, tokens_out * step_secs(at_once / dp) / tokens_secs)
    fraction = INFRA_DURATION_FRACTION
    if infra_secs and settled_secs:
        fraction = min(1.0, float(np.mean(infra_secs)) / float(np.mean(settled_secs)))
    return Evidence("the run's own job dirs", [cost_hf.rel(d) for d in job_dirs], mean, settled, timed_out, finished,
                    sides, at_once, at_once / dp if at_once else None, flavor, tp, share, fraction, notes=notes)


def reference(model: str) -> Evidence:
    """The reference's figures for the run's model (no job dir of the run's own yet)."""
    ref = REFERENCE_RUNS.get(model)
    if ref is None:
        known = ", ".join(sorted(REFERENCE_RUNS))
        raise EvidenceError(f"the reference ran no {model} ({known}): make plan has nothing to fit its agent times "
                            f"to until the run has job dirs of its own; run its smoke or first pass, then make plan")
    mean = REFERENCE_TIMEOUT_SECS / math.log(ref.trials / ref.timed_out)
    low_infra, low_finished = REFERENCE_LOW_INFRA
    return Evidence(f"the reference ({ref.name}, and Runs 2 and 3's infra rates)", [], mean, 0, ref.timed_out,
                    low_finished, {"sandbox": low_infra, "server": 0, "interrupted": 0}, REFERENCE_LOW_AT_ONCE,
                    REFERENCE_LOW_AT_ONCE, ref.flavor, 1, None, INFRA_DURATION_FRACTION, reference=ref)


def choose(jobs_dir: str, job_name: str, model: str, flavor: str, dp: int, tp: int, step_secs=None) -> Evidence:
    """The run's own job dirs when they hold a settled trial with an agent time, else the reference.
    A job dir of the run's name that is another run's (another model's) is refused."""
    try:
        own = tally_jobs.run_job_dirs(jobs_dir, job_name)
    except tally_jobs.TallyError:
        own = []
    except OSError as e:  # a JOBS_DIR the system cannot even look up: planning from the reference would hide it
        raise EvidenceError(f"the run's job dirs cannot be looked for under JOBS_DIR={safe_read.clip(jobs_dir, 200)}: "
                            f"{e.strerror or e}; set JOBS_DIR to the directory harbor writes them to") from None
    try:
        tally_jobs.refuse_foreign_job_dirs(own, model)
    except tally_jobs.TallyError as e:
        raise EvidenceError(str(e)) from None
    notes = []
    if own:
        evidence = read_own(own, job_name, flavor, dp, tp, step_secs)
        if evidence.settled:
            return evidence
        notes = evidence.notes  # why the run's own trials gave nothing to fit, said beside the reference's
    fallback = reference(model)
    fallback.notes.extend(notes)
    return fallback


# --------------------------------------------------------------------------- the sandbox curve


@dataclass
class InfraCurve:
    """p(C): the share of attempts that end in a sandbox-side infra error with C trials running at
    once over every shard. Piecewise-linear through its points, flat outside them (np.interp): two
    points fix a line and nothing more is known between them; below the lower one part of the
    errors have nothing to do with load (an expired mirror, a sandbox's 503) and nothing shows they
    vanish. A logistic curve would invent a floor and a ceiling the data do not show."""

    at_once: tuple[float, ...]
    rates: tuple[float, ...]

    def __call__(self, at_once):
        return np.interp(at_once, self.at_once, self.rates)


def fit_curve(evidence: Evidence) -> InfraCurve:
    high = (float(REFERENCE_HIGH_AT_ONCE), REFERENCE_HIGH_INFRA)
    if evidence.sandbox_rate is None or evidence.at_once is None:
        return InfraCurve((high[0],), (high[1],))
    if math.isclose(evidence.at_once, high[0]):
        # The run's own measurement at the reference's concurrency wins over the reference's.
        return InfraCurve((evidence.at_once,), (evidence.sandbox_rate,))
    points = sorted([(evidence.at_once, evidence.sandbox_rate), high])
    return InfraCurve(tuple(p[0] for p in points), tuple(p[1] for p in points))
