"""make watch's figures: one frame of a run, and what it is computed from.

The Frame holds every figure the watch shows (tools/run/watch.py documents them); the functions here
read the run's job dirs the way the tally reads them (tools/results/tally_core.py) and work out the
trials' times. tools/run/watch.py's frame_of puts them together; watch_alarms.py, watch_text.py and
watch_page.py read a frame.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from tools.results import report_load
from tools import safe_read
from tools.results import tally_core
from tools.results import tally_jobs
from tools.results import tally_policy
from tools.results import tally_trials

HOUR = 3600.0


@dataclass
class Frame:
    """One view of the run: every figure the watch shows, computed from its files."""

    run: str
    k: int
    total: int                 # attempt slots: tasks × k
    settled: int               # slots mop-up leaves alone: passed + failed + unclassified + final + verdict
    passed: int                # slots, as the tally counts them
    failed: int
    infra: int                 # infra-errored trials so far (every attempt): trials, not slots
    sides: dict                # those by side: sandbox, server, interrupted (tally_policy.count_sides)
    running: int               # trial dirs with no result.json yet: trials, not slots
    per_job: list[tuple[str, int, int]]  # (job dir name, settled trials, trial dirs)
    pace_hour: float           # settled trials in the last hour
    pace_all: float | None     # settled trials per hour since the run started
    infra_rate_hour: float | None
    infra_rate_all: float | None
    eta_hours: float | None
    eta_range: tuple[float, float] | None
    spend: dict
    projected_usd: float | None
    alarms: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was left out of the figures, and why
    unclassified: int = 0      # slots: settled, no policy rule
    final: int = 0             # slots of the final errors (the tally's, past MAX_TASK_RETRIES): settled
    verdict_errored: int = 0   # slots errored by a manual verdict: settled
    open_infra: int = 0        # slots open after an infra error: mop-up retries them
    unfinished: int = 0        # slots of tasks seen with no finished trial
    trial_dirs: int = 0        # every trial dir of the run
    final_errors: list[str] = field(default_factory=list)
    max_task_retries: int = tally_core.DEFAULT_MAX_TASK_RETRIES
    settled_at: list[datetime] = field(default_factory=list)  # each settled trial's end, for the page's plot
    infra_at: list[datetime] = field(default_factory=list)    # each infra error's end
    server_hour: int = 0       # model-server infra errors that finished in the last hour
    sandbox_rate_hour: float | None = None  # sandbox-side infra errors / trials finished, last hour

    @property
    def finished(self) -> bool:
        return self.total > 0 and self.settled >= self.total

    @property
    def not_started(self) -> int:
        """Slots of planned tasks no trial dir names yet."""
        return self.total - self.settled - self.open_infra - self.unfinished


def aware(dt: datetime | None) -> datetime | None:
    return dt if dt is None or dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def job_started(job_dir: str) -> datetime | None:
    """When harbor started the job (its result.json's started_at); None when unknown."""
    try:
        value = safe_read.read_json_object(os.path.join(job_dir, "result.json")).get("started_at")
    except (OSError, safe_read.Unreadable):
        return None
    return aware(tally_trials.parse_timestamp(value)[0])


def planned_tasks(job_dir: str, k: int) -> int | None:
    """The tasks the first job planned: n_total_trials / k of its result.json."""
    try:
        n = safe_read.read_json_object(os.path.join(job_dir, "result.json")).get("n_total_trials")
    except (OSError, safe_read.Unreadable):
        return None
    count = tally_trials.count_of(n, tally_trials.MAX_ATTEMPTS * 100_000)
    return count // k if count else None


def first_pass_tasks(dirs: list[str], job_name: str, k: int) -> int | None:
    """The tasks the run's first pass planned: its job's, or the sum of its shards'."""
    counts = [planned_tasks(d, k) for d in dirs if tally_jobs.retry_number(job_name, os.path.basename(d)) == 0]
    return sum(counts) if counts and None not in counts else None


def scan(dirs: list[str], policy: tally_policy.Policy) -> list[tally_trials.Trial]:
    """Every trial of the run's job dirs, classified as the tally classifies them."""
    notes = tally_trials.ScanNotes()
    trials: list[tally_trials.Trial] = []
    for d in dirs:
        for t in tally_trials.scan_job_dir(d, notes):
            if t.status == "finished":
                t.outcome, t.rule, t.reason = tally_policy.classify(t, policy)
            trials.append(t)
    return trials


def foreign_job_dirs(jobs_dir: Path, run_dirs: list[str], job_name: str, depth: int = 3) -> list[str]:
    """Job dirs of this run (their config.json names the run's job or one of its retry jobs) that
    discovery does not find: under the jobs dir, up to `depth` levels down, never through a link.
    The reference's resume wrote its trials under jobs/<job-name>/ while the flat dir was watched."""
    mine = {os.path.realpath(d) for d in run_dirs}
    out: list[str] = []

    def visit(path: str, level: int) -> None:
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if entry.is_symlink() or not entry.is_dir():
                continue
            config = os.path.join(entry.path, "config.json")
            named = None
            if os.path.isfile(config) and os.path.realpath(entry.path) not in mine:
                try:
                    named = safe_read.read_json_object(config, what="a config.json").get("job_name")
                except (OSError, safe_read.Unreadable):
                    named = None
            if isinstance(named, str) and tally_jobs.retry_number(job_name, named) is not None:
                try:
                    trial_dirs, _, _ = safe_read.trial_dir_entries(entry.path)
                except safe_read.Unreadable:
                    trial_dirs = []
                out.append(f"{safe_read.shown(os.path.relpath(entry.path, jobs_dir.parent))} ({len(trial_dirs)} trial dir(s))")
            elif level < depth and "__" not in entry.name:  # never into a trial dir
                visit(entry.path, level + 1)

    visit(str(jobs_dir), 1)
    return out


def last_moment(trials: list[tally_trials.Trial]) -> datetime | None:
    """A frozen run's own "now": its latest trial's end (None: no trial has a time)."""
    ends = [aware(t.finished_at) for t in trials if t.status == "finished" and t.finished_at]
    return max(ends, default=None)


def timed_trials(trials: list[tally_trials.Trial], now: datetime) -> tuple[list[tally_trials.Trial], list[str]]:
    """(the finished trials whose end the pace, the infra-error rates, the stall alarm, the ETA and
    the plot are computed from; a note for each kind left out of them). Every finished trial still
    fills its slots and counts as passed, failed or an infra error: only its time is not used.

    A finished_at tally_core cannot read (not ISO 8601, or outside its years) is no time. One later
    than now is left out too, not clamped to now: a clock is wrong (harbor's or this machine's), so
    when the trial really ended is unknown, and counting it in "the last hour" would raise the pace
    with a trial that may have ended at any time.
    """
    timed, untimed, future = [], [], []
    for t in trials:
        if t.status == "finished":
            (untimed if t.finished_at is None else future if aware(t.finished_at) > now else timed).append(t)
    left_out = "counted in the slots, left out of the pace, the infra-error rates, the ETA and the plot"
    notes = []
    if untimed:
        notes.append(f"{len(untimed)} finished trial(s) have no finished_at that is an ISO 8601 time of the years "
                     f"{tally_trials.YEARS[0]}-{tally_trials.YEARS[1]} (e.g. {safe_read.printable(os.path.join(os.path.basename(untimed[0].job_dir), os.path.basename(untimed[0].trial_dir)))}): {left_out}")
    if future:
        latest = max(aware(t.finished_at) for t in future)
        notes.append(f"{len(future)} finished trial(s) end after now ({now:%Y-%m-%d %H:%M:%S} UTC), the latest at "
                     f"{latest:%Y-%m-%d %H:%M:%S} UTC: a clock is wrong (harbor's or this machine's); {left_out}")
    return timed, notes


def cost_of(settings: report_load.RunSettings, report: dict) -> dict:
    """make cost's figures for the run (its manifest, HF's durations and prices), or why unknown."""
    from tools.report import report_cost  # heavy: the hf client, only when a cost is asked for
    return report_cost.run_cost(settings, report)
