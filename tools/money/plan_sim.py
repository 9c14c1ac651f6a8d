"""plan_sim: the discrete-event simulation behind make plan: a run's passes, queued as harbor runs them.

A run is a first pass of every attempt (tasks × k), split into shards (a harbor job each, its
tasks given by name), each shard run N_CONCURRENT trials at a time, first come first served; then
mop-up passes of the infra-errored attempts until none is left. Attempt durations are drawn from
Durations (or, in the simulation's own tests, from a given array); the infra-error probability
is the caller's function of the pass and the trials running at once. Every figure is per
repetition: numpy arrays of `reps` runs drawn with one generator (docs/plan.md §2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from tools.money import plan_evidence
from tools.money import plan_server

# Mop-up passes are simulated until every attempt has settled, as a run is only done then; this
# bounds a curve that never lets one settle (p = 1). MOPUP_PASSES (make reproduce's limit) is
# compared with the passes needed, not used to cut the run short.
MAX_MOPUP_PASSES = 30


@dataclass(frozen=True)
class Durations:
    """One attempt's duration on a server: its natural agent time (exponential with `mean` seconds
    at the evidence's server and load, `factor` times as long on this one), cut at the timeout,
    plus the sandbox's and verifier's overhead."""

    mean: float
    factor: float
    cap: float
    overhead: float = plan_evidence.TRIAL_OVERHEAD_SECS

    def draw(self, rng: np.random.Generator, size) -> np.ndarray:
        return np.minimum(rng.exponential(self.mean * self.factor, size), self.cap) + self.overhead

    @property
    def timeout_share(self) -> float:
        return plan_server.timeout_share(self.mean, self.factor, self.cap)


@dataclass(frozen=True)
class Recorded(Durations):
    """A task's recorded agent time (plan_evidence.RECORDED_TASK_SECS), `factor` times as long on
    this server, cut at the timeout: the same every attempt, as one record gives no spread."""

    def draw(self, rng: np.random.Generator, size) -> np.ndarray:
        return np.full(size, min(self.mean * self.factor, self.cap)) + self.overhead

    @property
    def timeout_share(self) -> float:
        return 1.0 if self.mean * self.factor >= self.cap else 0.0


# --------------------------------------------------------------------------- the simulation


def pass_makespan(durations: np.ndarray, slots: int) -> np.ndarray:
    """Each shard's queue run by `slots` trials at a time, first come first served, as harbor's
    -n runs its trials: the time the last shard's last attempt ends, per repetition.

    durations: (reps, shards, m) seconds in queue order; 0 is no attempt (it takes no slot time).
    """
    reps, shards, m = durations.shape
    queues = durations.reshape(reps * shards, m)  # one row per (repetition, shard)
    # More slots than attempts change nothing (each attempt has one at once) and cost memory: -n 1000
    # on one task at 10,000 repetitions asked numpy for 5 GB of slots that would stay idle.
    free = np.zeros((reps * shards, max(1, min(slots, m))))
    rows = np.arange(reps * shards)
    for j in range(m):  # two numpy calls per attempt: this loop is most of a plan's time
        free[rows, free.argmin(axis=1)] += queues[:, j]
    return free.reshape(reps, shards, -1).max(axis=(1, 2))


def compact(durations: np.ndarray) -> np.ndarray:
    """The attempts left (non-zero) moved to the front of each shard's queue, in order, and the
    queue cut to the longest: a mop-up pass's queue."""
    left = durations > 0
    order = np.argsort(~left, axis=2, kind="stable")
    width = int(left.sum(axis=2).max(initial=0))
    return np.take_along_axis(durations, order, 2)[:, :, :width]


def queues(pool, tasks: int, k: int, shards: int, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps, shards, m) full durations: task i's k attempts in shard i mod shards (a harbor job
    per shard, its tasks given by name), each drawn from `pool`: a Durations, or an array of
    durations drawn with replacement (what the simulation's own tests give it)."""
    per_shard = [k * len(range(s, tasks, shards)) for s in range(shards)]
    m = max(per_shard)
    size = (reps, shards, m)
    draws = pool.draw(rng, size) if isinstance(pool, Durations) else rng.choice(np.asarray(pool, dtype=float), size)
    real = np.arange(m)[None, :] < np.array(per_shard)[:, None]
    return np.where(real[None, :, :], draws, 0.0)


@dataclass
class Outcome:
    makespan: np.ndarray  # seconds per repetition, every pass
    sandbox_secs: np.ndarray  # sandbox time per repetition: every attempt, errored ones included
    mopups: np.ndarray  # mop-up passes per repetition
    left: np.ndarray  # attempts still errored after the last pass simulated


def simulate(pool, tasks: int, k: int, shards: int, slots: int,
             infra_p: Callable[[int, np.ndarray], np.ndarray], reps: int, rng: np.random.Generator,
             max_mopups: int = MAX_MOPUP_PASSES, infra_fraction: float = plan_evidence.INFRA_DURATION_FRACTION,
             in_run_retries: int = 0) -> Outcome:
    """A run: a first pass of every attempt, then mop-up passes of the infra-errored ones, each
    starting when the previous one has ended in every shard, until none is left or max_mopups
    have run.

    An attempt errs with p = infra_p(pass_no, at_once), at_once the trials the pass runs at once
    over every shard (a pass with fewer attempts than slots runs fewer); an errored one takes
    infra_fraction of its duration, and its retry the whole of it (the same task). With
    in_run_retries R (MAX_RETRIES, harbor's --max-retries), harbor tries an errored attempt again at
    once, in the same slot (its queue holds the slot across retries: harbor/trial/queue.py), up to R
    times, each try erring with the same p: only an attempt that errs R + 1 times waits for mop-up.
    """
    if not isinstance(pool, Durations):
        pool = np.maximum(np.asarray(pool, dtype=float), 1.0)
    # A shard with no task runs nothing and strains nothing: only as many shards as tasks are kept,
    # so 64 shards of one task hold one queue, not 63 empty ones.
    shards = max(1, min(shards, tasks))
    todo = queues(pool, tasks, k, shards, reps, rng)
    makespan, sandbox = np.zeros(reps), np.zeros(reps)
    mopups, left = np.zeros(reps, dtype=int), np.zeros(reps, dtype=int)
    for pass_no in range(max_mopups + 1):
        waiting = (todo > 0).sum(axis=(1, 2))
        if pass_no and not waiting.any():
            break
        at_once = np.minimum(waiting, shards * slots).astype(float)
        p = np.asarray(infra_p(pass_no, at_once), dtype=float)
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
