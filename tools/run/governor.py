"""governor: when a sharded bench should stop adding load, and when it may add it back.

The reference saw about 70% of its trials fail with infra errors (SandboxError,
InternalServerError, ReadTimeout) at `-n 8` and far fewer at `-n 3`: load strains the sandboxes
and the server. A sharded bench runs several harbor jobs `<job>-shard-<i>` side by side, started
in that order, against one endpoint. tools/run/shard_run.py (the supervisor) asks `decide` every
GOVERNOR_POLL seconds what to do, and carries it out; this module only decides, and reads the
finished trials it decides on (`finished_trials`).

The trials counted are those that finished in the window (since, now], since being the later of
now - GOVERNOR_WINDOW and the last decision: after a decision, the rate is that of the load as it
has been since, so one burst of errors is never acted on twice (a stop is followed by nothing
until GOVERNOR_MIN_TRIALS trials have finished under the lighter load). The rate is infra errors
over trials counted, counting the sandbox side only (below). The rules, in this order:

  start  at once, when no shard runs any more and the governor stopped one: the most recently
         stopped. Nothing would finish, so no rate could ever say so, and the run would stall.
  none   fewer than GOVERNOR_MIN_TRIALS trials counted: too few to judge.
  stop   the rate is above MAX_INFRA_RATE (strictly) and more than one shard runs: the newest
         running shard (the last one (re)started) is interrupted (tools/run/shard_run.py: SIGINT, as Ctrl-C,
         even under nohup; then TERM, then KILL, if harbor does not exit).
  hold   the rate is above MAX_INFRA_RATE but one shard runs: it is never stopped, since one
         shard is the least load the run can have. Nothing is carried out; the supervisor says it
         and records it like a decision (its time becomes last_decision_at), so it is said once
         per GOVERNOR_MIN_TRIALS new trials, not at every poll, and a stopped shard waits a full
         GOVERNOR_QUIET after it.
  start  the rate is at or below MAX_INFRA_RATE, a shard is stopped, and GOVERNOR_QUIET seconds
         have passed since the last decision: the most recently stopped shard is started again.
  none   otherwise.

What is an infra error is the tally's own reading (tools/results/tally_policy.py classify under
env/outcome-policy.yaml, tools/results/slots.py is_settled), the one make tally, make mopup and make
watch use: a finished trial that does not settle its attempt slot. Only the sandbox side of them
counts towards the rate (tools/results/tally_policy.py infra_side: infra.server_types are the model
server's): more trials at once strain the sandboxes, and stopping a shard eases that; a model
server that fails (InternalServerError, its link timing out) fails as much at any load a shard
could take off, so its errors are the server's problem, named in each decision and in make
status and make watch, never a reason to stop a shard. Trials that ended in an interruption
(CancelledError) are left out altogether (see finished_trials).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from tools import fmt
from tools.results import slots
from tools.results import tally_jobs
from tools.results import tally_policy
from tools.results import tally_trials

# The exception harbor records for a trial it cancelled: type(e).__name__ of asyncio's.
CANCELLED = "CancelledError"


@dataclass(frozen=True)
class Settings:
    max_rate: float      # MAX_INFRA_RATE: above this share of infra errors, load is taken off
    window_s: float      # GOVERNOR_WINDOW: seconds of finished trials the rate is taken over
    min_trials: int      # GOVERNOR_MIN_TRIALS: fewer trials counted decide nothing
    quiet_s: float       # GOVERNOR_QUIET: seconds since the last decision before a start

    def validate(self) -> None:
        """ValueError naming the setting, when one cannot be used."""
        if not (_real(self.max_rate) and 0 <= self.max_rate <= 1):
            raise ValueError(f"MAX_INFRA_RATE must be a fraction from 0 to 1, got {self.max_rate!r}")
        for name, value in (("GOVERNOR_WINDOW", self.window_s), ("GOVERNOR_QUIET", self.quiet_s)):
            if not (_real(value) and value > 0):
                raise ValueError(f"{name} must be a number of seconds above 0, got {value!r}")
        if not (isinstance(self.min_trials, int) and not isinstance(self.min_trials, bool) and self.min_trials >= 1):
            raise ValueError(f"GOVERNOR_MIN_TRIALS must be a whole number of at least 1, got {self.min_trials!r}")


def _real(value: object) -> bool:
    """A finite number (a bool is not one, though Python counts it as an int)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class Finished:
    at: float            # when the trial finished, epoch seconds
    infra: bool          # a sandbox-side infra error: finished, not settled, not the server's
    shard: int | None    # i of the job dir <job>-shard-<i>; None for any other job dir
    trial: str           # the trial dir, as the tally shows it
    server: bool = False  # a model-server infra error (infra.server_types): not counted in the rate


@dataclass(frozen=True)
class Decision:
    action: str          # "stop" | "start" | "hold" (see the module's docstring)
    shard: int           # the shard stopped, started, or held running
    rate: float | None   # infra / finished over the trials counted; None when none were
    infra: int
    finished: int
    since: float         # epoch start of the trials counted (exclusive)
    reason: str          # one sentence with the figures, for the supervisor to print
    server: int = 0      # model-server infra errors among the trials counted: named, not acted on

    def as_event(self, settings: Settings) -> dict:
        """The manifest line: the decision and every figure behind it."""
        return {"event": f"governor-{self.action}", "shard": self.shard,
                "rate": None if self.rate is None else round(self.rate, 4), "infra": self.infra,
                "server_errors": self.server, "finished": self.finished, "since": _iso(self.since),
                "max_rate": settings.max_rate, "window_s": settings.window_s, "min_trials": settings.min_trials,
                "quiet_s": settings.quiet_s, "reason": self.reason}


# --------------------------------------------------------------------------- reading the trials


def shard_of(job_dir: Path) -> int | None:
    """i for a job dir named `<anything>-shard-<i>` (i >= 1, ASCII digits), read as the tally
    reads a shard's name; None for anything else."""
    name = job_dir.name
    job_name, infix, _ = name.rpartition(tally_jobs.SHARD_INFIX)
    return tally_jobs.shard_number(job_name, name) if infix else None


def finished_trials(job_dirs: list[Path]) -> list[Finished]:
    """Every finished trial of these job dirs but the cancelled ones, classified as the tally does.

    Read with the tally's own code (tools/results/tally_trials.py scan_job_dir): a missing or symlinked job
    dir, an unreadable dir or result.json is noted there and skipped, never raised. A trial with
    no result.json is running (not finished); an unreadable result.json (harbor may be writing it
    right now) has no time to count it at, and is read at the next poll; a finished_at outside the
    tally's years is no time either. Both are left out.
    """
    policy = tally_policy.load_policy()
    notes = tally_trials.ScanNotes()  # what the tally would warn about is make tally's to say, not the governor's
    out: list[Finished] = []
    for job_dir in job_dirs:
        shard = shard_of(job_dir)
        for trial in tally_trials.scan_job_dir(job_dir, notes):
            # CancelledError is an infra type to the tally (mop-up retries it), but it is what an
            # interruption leaves: the governor's own stop, Ctrl-C, the spending ceiling. Counted,
            # every stop would raise the rate that made it, and stop the next shard, and the next.
            if trial.status != "finished" or trial.finished_at is None or trial.exception_type == CANCELLED:
                continue
            at = trial.finished_at.timestamp()  # parse_timestamp's times are UTC, of the years 2000-2199
            if not math.isfinite(at):
                continue
            trial.outcome, trial.rule, trial.reason = tally_policy.classify(trial, policy)
            side = None if slots.is_settled(trial) else tally_policy.infra_side(trial, policy)
            if side == "interrupted":  # any of infra.interrupted_types: a stop's, like CancelledError
                continue
            out.append(Finished(at=at, infra=side == "sandbox", shard=shard, trial=trial.trial_dir,
                                server=side == "server"))
    return out


# --------------------------------------------------------------------------- deciding


def decide(now: float, finished: list[Finished], running: list[int], stopped: list[int],
           last_decision_at: float | None, settings: Settings) -> Decision | None:
    """What to do now, by the rules of the module's docstring; None when nothing.

    `running`: the running shards in the order they were (re)started, the newest last.
    `stopped`: the shards the governor stopped, the most recently stopped last.
    """
    since = now - settings.window_s if last_decision_at is None else max(now - settings.window_s, last_decision_at)
    counted = [f for f in finished if since < f.at <= now]
    infra = sum(1 for f in counted if f.infra)
    server = sum(1 for f in counted if f.server)
    rate = infra / len(counted) if counted else None

    def decision(action: str, shard: int, reason: str) -> Decision:
        return Decision(action, shard, rate, infra, len(counted), since, reason, server)

    figures = f"sandbox infra errors {infra} of {len(counted)} trials ({fmt.percent(rate, 0)}) finished since {_clock(since)}"
    if server:
        figures += (f" (and {server} model-server error{'s' * (server > 1)}, not counted: the server's problem, "
                    f"which a stopped shard does not ease)")
    limit = f"MAX_INFRA_RATE {_setting_pct(settings.max_rate)}"
    if not running and stopped:
        return decision("start", stopped[-1], f"no shard runs any more ({figures}): starting shard {stopped[-1]} "
                                              f"again, the most recently stopped")
    if rate is None or len(counted) < settings.min_trials:
        return None
    if rate > settings.max_rate:
        if len(running) > 1:
            return decision("stop", running[-1], f"{figures}, above {limit}: interrupting shard {running[-1]}, "
                                                 f"the newest running")
        if running:
            return decision("hold", running[0], f"{figures}, above {limit}: shard {running[0]} is the only one "
                                                f"running and is left running (one shard is the least load)")
        return None
    quiet = last_decision_at is None or now - last_decision_at >= settings.quiet_s
    if stopped and quiet:
        return decision("start", stopped[-1], f"{figures}, at or below {limit}, and "
                                              f"{fmt.span(settings.quiet_s)} since the last decision: starting "
                                              f"shard {stopped[-1]} again, the most recently stopped")
    return None


def describe(settings: Settings) -> str:
    """One line: what the governor will do with these settings."""
    return (f"governor: interrupts the newest shard while more than {_setting_pct(settings.max_rate)} of the trials "
            f"finished in the last {fmt.span(settings.window_s)} are sandbox infra errors (at least "
            f"{settings.min_trials} trials; model-server errors are named, not acted on); starts one again after "
            f"{fmt.span(settings.quiet_s)} at or below")


# --------------------------------------------------------------------------- wording


def _utc(epoch: float) -> datetime:
    """The UTC time of an epoch second, clamped to what datetime holds (a huge GOVERNOR_WINDOW
    reaches before the year 1)."""
    try:
        return datetime.fromtimestamp(epoch, timezone.utc)
    except (OverflowError, ValueError, OSError):
        return (datetime.min if epoch < 0 else datetime.max).replace(tzinfo=timezone.utc)


def _iso(epoch: float) -> str:
    # The manifest's format (tools/run/harbor_guard.py utc_now); isoformat, as strftime's %Y drops
    # the zeros of the year 1.
    return _utc(epoch).isoformat(timespec="seconds").replace("+00:00", "Z")


def _clock(epoch: float) -> str:
    return _utc(epoch).strftime("%H:%M:%S UTC")


def _setting_pct(x: float) -> str:
    # The setting as it was written (0.005 is "0.5%", not "0%"), without float noise (0.3 is "30%").
    return f"{round(100 * x, 4):g}%"
