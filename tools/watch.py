#!/usr/bin/env python3
"""watch: a live view of a whole run: progress, pace, ETA, spend and alarms.

Usage (through make watch RUN=<run> [ONCE=1] [WATCH_EVERY=60]):
  python -m tools.watch watch --run RUN [--once] [--every SECONDS] [--now ISO] [--max-cost USD]
      [--max-infra-rate R] [--tasks N]

Everything comes from what the run's own files already say, read the way the tally reads them
(tools/tally_core.py; a symlinked job dir is never followed): every job dir of the run (the job,
its retry jobs, both layouts), its manifest and cost (tools/report_cost.py, make cost's figures).

- Progress: attempt slots settled (mop-up leaves them alone) out of tasks × k, the tasks being
  what the first job planned (its result.json's n_total_trials / k), or --tasks, or those seen.
  Every count of the bar is of slots, from the tally's own counts, and they sum to it: settled =
  passed + failed + unclassified + final errors (the tally's: past MAX_TASK_RETRIES, named) +
  errored by verdict; open = infra-errored (mop-up retries them) + no finished trial + not
  started. The trials are counted apart, as trials: every trial dir, those that ended in an infra
  error (every attempt so far) and those with no result yet (running, or stopped mid-trial).
- Pace: settled trials per hour over the last hour and over the whole run (since its first job
  started); the infra-error rate (infra-errored / finished trials) over the same two windows.
- ETA: the slots left over the recent pace (the whole run's when nothing settled in the last
  hour), with the range the two paces give. Mop-up's work is in it: open slots are slots left.
- Times are data: a trial whose finished_at is no time (tally_trials's years) or later than now
  fills its slot but is left out of the paces, the rates, the ETA and the plot, with a note
  (timed_trials says why not clamped). A bundled example (example-*) is frozen: its "now" is its
  own last moment (its latest trial's end), said in a note, so its pace and ETA are what they were
  then, not what months of silence since make of them.
- Spend: make cost's total so far, and projected to the end at the run's average rate; with
  MAX_COST, the ceiling.
- Infra errors by side (env/outcome-policy.yaml, tools/tally_policy.py infra_side): the sandboxes'
  (what more trials at once strain, and what the governor acts on), the model server's (its
  problem: make status, make logs; no shard stopped eases it), and interruptions.
- Alarms, in plain words: nothing settled for longer than the slowest recent trial took; trial
  dirs of this run's tasks landing in a job dir that is not one of the run's (the reference lost
  8 hours that way); the sandbox infra-error rate over the last hour above --max-infra-rate;
  model-server errors in the last hour; paid GPUs idle (a server recorded live in the manifest
  with fewer trials running than its replicas, and the shards the governor stopped); the spend
  projected past MAX_COST.

A remote run (--where hf --bucket NS/NAME: benched with WHERE=hf, its job dirs flat in the
bucket) is read through huggingface_hub's own bucket API (HfApi.list_bucket_tree, then
HfApi.download_bucket_files), the token being the client's own (HF_TOKEN or the login): only the
json files the frame needs (each job's config.json and result.json, each trial's config.json and
result.json; never agent/ trajectories), of the run's job and its retry jobs, into a private
temporary dir removed on exit, under caps (files listed, files read, bytes per file and in all).
Each frame lists the bucket again and downloads only what changed since the last one (by xet
hash), and drops what is gone; then the frame is computed from that dir exactly as from local
job dirs, the spend from the run's local manifest as for a local run. Why a temporary dir and not
a cache under state/: make watch writes nothing and takes no lock (a cache would need one, and
could be taken for the run's own job dirs); the json files are small, so one session's copy is
enough.

On a terminal it draws with rich and redraws every --every seconds until Ctrl-C, with an
"updated HH:MM:SS" line; otherwise (a pipe, a log, --once) it prints plain lines. Exit codes: 0,
or 1 with a message for a user error.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import click

from tools import report_load as RL
from tools import safe_read as SR
from tools import slots as SL
from tools import tally_core
from tools import tally_jobs
from tools import tally_policy
from tools import tally_trials

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


def _aware(dt: datetime | None) -> datetime | None:
    return dt if dt is None or dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def job_started(job_dir: str) -> datetime | None:
    """When harbor started the job (its result.json's started_at); None when unknown."""
    try:
        value = SR.read_json_object(os.path.join(job_dir, "result.json")).get("started_at")
    except (OSError, SR.Unreadable):
        return None
    return _aware(tally_trials.parse_timestamp(value)[0])


def planned_tasks(job_dir: str, k: int) -> int | None:
    """The tasks the first job planned: n_total_trials / k of its result.json."""
    try:
        n = SR.read_json_object(os.path.join(job_dir, "result.json")).get("n_total_trials")
    except (OSError, SR.Unreadable):
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
                    named = SR.read_json_object(config, what="a config.json").get("job_name")
                except (OSError, SR.Unreadable):
                    named = None
            if isinstance(named, str) and tally_jobs.retry_number(job_name, named) is not None:
                try:
                    trial_dirs, _, _ = SR.trial_dir_entries(entry.path)
                except SR.Unreadable:
                    trial_dirs = []
                out.append(f"{SR.shown(os.path.relpath(entry.path, jobs_dir.parent))} ({len(trial_dirs)} trial dir(s))")
            elif level < depth and "__" not in entry.name:  # never into a trial dir
                visit(entry.path, level + 1)

    visit(str(jobs_dir), 1)
    return out


def last_moment(trials: list[tally_trials.Trial]) -> datetime | None:
    """A frozen run's own "now": its latest trial's end (None: no trial has a time)."""
    ends = [_aware(t.finished_at) for t in trials if t.status == "finished" and t.finished_at]
    return max(ends, default=None)


def frame_of(settings: RL.RunSettings, *, now: datetime | None, tasks_hint: int | None, max_cost: float | None,
             max_infra_rate: float, with_cost: bool = True) -> Frame:
    """The frame at `now`; None: the run's own last moment (a bundled example, frozen)."""
    dirs = [str(d) for d in tally_jobs.run_job_dirs(settings.jobs_dir, settings.job_name)]
    try:
        tally_jobs.refuse_foreign_job_dirs(dirs, settings.model or None)  # another run's trials are not this run's
    except tally_jobs.TallyError as e:
        RL.fail(f"run {settings.run}: {e}")
    if not dirs:
        RL.fail(f"run {settings.run} has no job dir yet under {RL.display_path(str(settings.jobs_dir))} "
                f"({settings.job_name}): nothing to watch until make bench (or make reproduce) starts it")
    policy = tally_policy.load_policy()
    verdicts = tally_policy.load_verdicts(str(settings.verdicts)) if settings.verdicts else {}
    report = tally_core.tally(dirs, policy, verdicts, run=settings.run, max_task_retries=settings.max_task_retries)
    k = report.get("n_attempts", 1)
    trials = scan(dirs, policy)
    # The slots as the tally counts them (tasks × k; k = 1: tasks): mop-up leaves the settled alone.
    errored = report["errored_breakdown"]
    settled = report["tasks"] * k - sum(e["open_slots"] for e in report["per_task"])
    tasks = max(tasks_hint or first_pass_tasks(dirs, settings.job_name, k) or 0, report["tasks"])
    frozen = now is None
    if frozen:
        now = last_moment(trials) or datetime.now(timezone.utc)
    finished, notes = timed_trials(trials, now)
    if frozen:
        notes.insert(0, f"run {settings.run} is a bundled example, frozen: its figures are taken at its own last "
                        f"moment, its latest trial's end ({now:%Y-%m-%d %H:%M} UTC), not now")
    settled_at = sorted(_aware(t.finished_at) for t in finished if SL.is_settled(t))
    infra_at = [_aware(t.finished_at) for t in finished if not SL.is_settled(t)]
    starts = [s for s in (job_started(d) for d in dirs) if s and s <= now]
    start = min(starts) if starts else (settled_at[0] if settled_at else None)
    hour_ago = now - timedelta(hours=1)
    pace_hour = float(sum(1 for s in settled_at if s >= hour_ago))
    elapsed = (now - start).total_seconds() / HOUR if start else None
    pace_all = len(settled_at) / elapsed if elapsed and elapsed > 0 else None

    def rate(infra: int, done: int) -> float | None:
        return infra / done if done else None

    recent = [t for t in finished if _aware(t.finished_at) >= hour_ago]
    recent_done = len(recent)
    recent_sides = tally_policy.count_sides(recent, policy)
    total = tasks * k
    left = max(0, total - settled)
    paces = [p for p in (pace_hour, pace_all) if p]
    eta = eta_range = None
    if left == 0:
        eta = 0.0
    elif paces:
        eta = left / (pace_hour or pace_all)
        eta_range = (left / max(paces), left / min(paces)) if len(set(paces)) > 1 else None
    spend = cost_of(settings, report) if with_cost else {"known": False, "why": "not asked"}
    projected = None
    if spend.get("known") and elapsed and eta is not None:
        projected = spend["total_usd"] * (elapsed + eta) / elapsed
    f = Frame(run=settings.run, k=k, total=total, settled=settled, passed=report["passed"], failed=report["failed"],
              infra=sum(1 for t in trials if t.status == "finished" and not SL.is_settled(t)),
              sides=tally_policy.count_sides(trials, policy), running=sum(1 for t in trials if t.status == "unfinished"),
              unclassified=report["unclassified"], final=errored["final"], verdict_errored=errored["verdict"],
              open_infra=errored["infra"], unfinished=report["unfinished"], trial_dirs=len(trials),
              final_errors=report["final_errors"], max_task_retries=report["max_task_retries"],
              per_job=[(os.path.basename(d), sum(1 for t in trials if t.job_dir == os.path.abspath(d)
                                                   and t.status == "finished" and SL.is_settled(t)),
                        sum(1 for t in trials if t.job_dir == os.path.abspath(d))) for d in dirs],
              pace_hour=pace_hour, pace_all=pace_all,
              infra_rate_hour=rate(sum(1 for s in infra_at if s >= hour_ago), recent_done),
              infra_rate_all=rate(len(infra_at), len(finished)), eta_hours=eta, eta_range=eta_range,
              spend=spend, projected_usd=projected, notes=notes, settled_at=settled_at, infra_at=sorted(infra_at),
              server_hour=recent_sides["server"], sandbox_rate_hour=rate(recent_sides["sandbox"], recent_done))
    f.alarms = alarms(f, finished, settled_at, now, max_cost, max_infra_rate,
                      foreign_job_dirs(Path(settings.jobs_dir), dirs, settings.job_name))
    f.alarms += idle_gpus(f, SR.manifest_events(Path(settings.state_dir) / "manifest.jsonl"))
    return f


# The most replicas a recorded SERVER_DP is read as (HF's flavors hold at most 8 GPUs; a bigger
# or malformed figure in a hand-edited manifest is not a count).
MAX_REPLICAS = 64


def live_server(events: list[dict]) -> dict | None:
    """The run's server as the manifest last recorded it, when no server-stop of its job came after:
    {job_id, replicas (its SERVER_DP), flavor}; None when none is recorded live."""
    server = None
    for e in events:
        if e.get("event") == "serve" and isinstance(e.get("job_id"), str):
            recorded = e.get("settings") if isinstance(e.get("settings"), dict) else {}
            dp = tally_trials.count_of(_int_or_none(recorded.get("SERVER_DP", "1")), MAX_REPLICAS)
            server = {"job_id": e["job_id"], "replicas": dp or 1, "flavor": SR.printable(str(recorded.get("SERVER_FLAVOR", "?")))[:40]}
        elif e.get("event") == "server-stop" and server and e.get("job_id") == server["job_id"]:
            server = None
    return server


def _int_or_none(value) -> int | None:
    """A setting's text as a whole number (the manifest records settings as strings), else None."""
    text = str(value)
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 3 else None


def governor_stopped(events: list[dict]) -> dict[int, str]:
    """{shard: the reason it was stopped} for the shards whose last governor decision stopped or
    parked them (tools/shard_run.py records each as governor-stop, governor-park, governor-start)."""
    out: dict[int, str] = {}
    for e in events:
        shard = e.get("shard")
        if not isinstance(shard, int) or isinstance(shard, bool):
            continue
        if e.get("event") in ("governor-stop", "governor-park"):
            out[shard] = SR.clip(SR.printable(str(e.get("reason", ""))), 200)
        elif e.get("event") == "governor-start":
            out.pop(shard, None)
    return out


def idle_gpus(f: Frame, events: list[dict]) -> list[str]:
    """The alarm for paid GPUs with no work: a server recorded live, the run not finished, and
    fewer trials running than its replicas (each trial holds at most one replica busy at a time),
    with the shards the governor stopped, so that an idle GPU is never silent."""
    server = live_server(events)
    if not server or f.finished or f.running >= server["replicas"]:
        return []
    idle = server["replicas"] - f.running
    stopped = governor_stopped(events)
    why = (f"; the governor stopped shard{'s' * (len(stopped) > 1)} {', '.join(map(str, sorted(stopped)))} "
           f"({stopped[max(stopped)]})" if stopped else "")
    return [f"paid GPUs idle: {f.running} trial(s) running on the {server['replicas']} replica(s) of server job "
            f"{SR.printable(server['job_id'])[:40]} ({server['flavor']}): at least {idle} replica(s) bill with no "
            f"trial{why}"]


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
            (untimed if t.finished_at is None else future if _aware(t.finished_at) > now else timed).append(t)
    left_out = "counted in the slots, left out of the pace, the infra-error rates, the ETA and the plot"
    notes = []
    if untimed:
        notes.append(f"{len(untimed)} finished trial(s) have no finished_at that is an ISO 8601 time of the years "
                     f"{tally_trials.YEARS[0]}-{tally_trials.YEARS[1]} (e.g. {SR.printable(os.path.join(os.path.basename(untimed[0].job_dir), os.path.basename(untimed[0].trial_dir)))}): {left_out}")
    if future:
        latest = max(_aware(t.finished_at) for t in future)
        notes.append(f"{len(future)} finished trial(s) end after now ({now:%Y-%m-%d %H:%M:%S} UTC), the latest at "
                     f"{latest:%Y-%m-%d %H:%M:%S} UTC: a clock is wrong (harbor's or this machine's); {left_out}")
    return timed, notes


def alarms(f: Frame, finished: list[tally_trials.Trial], settled_at: list[datetime], now: datetime, max_cost: float | None,
           max_infra_rate: float, foreign: list[str]) -> list[str]:
    """The alarms of a frame; `finished` are the trials with a usable end (timed_trials)."""
    out = []
    if not f.finished and settled_at:
        recent = sorted((t for t in finished if t.agent_seconds and SL.is_settled(t)),
                        key=lambda t: _aware(t.finished_at))[-10:]
        slowest = max((t.agent_seconds for t in recent), default=None)
        quiet = (now - settled_at[-1]).total_seconds()
        if slowest and quiet > slowest:
            out.append(f"stalled: no trial has settled for {hours(quiet / HOUR)}, longer than the slowest of the "
                       f"last {len(recent)} took ({hours(slowest / HOUR)}): is harbor running, is the server up? "
                       f"(make status RUN={f.run})")
    for where in foreign:
        out.append(f"misplaced trials: {where} is a job of this run (its config.json names it) where the run's job "
                   f"dirs are not looked for: a resume writing there looks idle here (the reference lost 8 hours so); "
                   f"move it next to the others, or set JOBS_DIR")
    if f.sandbox_rate_hour is not None and f.sandbox_rate_hour > max_infra_rate:
        out.append(f"sandbox infra errors: {pct(f.sandbox_rate_hour)} of the trials that finished in the last hour, "
                   f"above {pct(max_infra_rate)} (MAX_INFRA_RATE): the sandboxes are strained by the trials at once; "
                   f"lower N_CONCURRENT (a sharded bench's governor interrupts a shard)")
    if f.server_hour:
        out.append(f"model-server errors: {f.server_hour} trial(s) in the last hour failed at the model server "
                   f"(env/outcome-policy.yaml infra.server_types): the server's problem, not load on the sandboxes; "
                   f"the governor does not act on them. Check it: make status RUN={f.run}, make logs RUN={f.run}")
    if max_cost and f.projected_usd is not None and f.projected_usd > max_cost:
        out.append(f"ceiling: the spend is projected to reach ${f.projected_usd:,.2f} by the end, past MAX_COST "
                   f"${max_cost:,.2f}: the run will be stopped there")
    return out


def cost_of(settings: RL.RunSettings, report: dict) -> dict:
    """make cost's figures for the run (its manifest, HF's durations and prices), or why unknown."""
    from tools import report_cost as RC  # heavy: the hf client, only when a cost is asked for
    return RC.run_cost(settings, report)


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def hours(h: float | None) -> str:
    if h is None:
        return "n/a"
    minutes = int(round(h * 60))
    return f"{minutes // 60}h{minutes % 60:02d}m"


def lines_of(f: Frame) -> list[str]:
    """The frame as plain lines (what a pipe, a log and --once get)."""
    share = f.settled / f.total if f.total else 0.0
    width = 30
    bar = "#" * round(width * share) + "." * (width - round(width * share))
    out = [f"run {f.run}: [{bar}] {f.settled}/{f.total} attempt slots settled ({pct(share)}; "
           f"{f.total // f.k if f.k else 0} tasks × {f.k})",
           f"  slots: {slot_sums(f)}",
           f"  trials: {f.trial_dirs} trial dir(s); {f.infra} ended in an infra error (every attempt so far: "
           f"{side_text(f.sides)}), {f.running} with no result yet (running, or stopped mid-trial)"]
    if f.final_errors:
        out.append(f"  final errors, not retried (their infra error survived MAX_TASK_RETRIES={f.max_task_retries} "
                   f"attempts in a row; make tally RUN={f.run} says more): {', '.join(f.final_errors)}")
    if len(f.per_job) > 1:
        out += [f"  {name}: {done} settled of {n} trial dir(s)" for name, done, n in f.per_job]
    out.append(f"  pace: {f.pace_hour:.0f} trial(s) settled in the last hour, "
               f"{'n/a' if f.pace_all is None else f'{f.pace_all:.1f}'} per hour over the whole run; infra-error "
               f"rate {pct(f.infra_rate_hour)} (last hour), {pct(f.infra_rate_all)} (whole run)")
    if f.finished:
        out.append("  ETA: finished")
    elif f.eta_hours is None:
        out.append("  ETA: unknown (nothing has settled yet)")
    else:
        which = "the last hour's" if f.pace_hour else "the whole run's"
        span = "" if not f.eta_range else f" (range {hours(f.eta_range[0])} to {hours(f.eta_range[1])} by the two paces)"
        out.append(f"  ETA: {hours(f.eta_hours)} at {which} pace{span}, {f.total - f.settled} slot(s) left, "
                   f"mop-up's included")
    if f.spend.get("known"):
        proj = "" if f.projected_usd is None else f", projected ${f.projected_usd:,.2f} at the end"
        out.append(f"  spend: ${f.spend['total_usd']:,.2f} so far{proj} ({f.spend['prices']})")
        if f.spend.get("unattributed_note"):
            out.append(f"  note: {f.spend['unattributed_note']}")
    else:
        out.append(f"  spend: unknown ({SR.printable(str(f.spend.get('why', '')))})")
    out += [f"  note: {n}" for n in f.notes]
    out += [f"  ALARM: {a}" for a in f.alarms] or ["  alarms: none"]
    return out


def side_text(sides: dict) -> str:
    """The infra errors of each side (tools/tally.py says it the same way)."""
    return (f"sandbox {sides.get('sandbox', 0)}, model server {sides.get('server', 0)}, "
            f"interrupted {sides.get('interrupted', 0)}")


def slot_sums(f: Frame) -> str:
    """The bar's slots, each kind once, as two sums: settled = …; open = … (they add up to the bar)."""
    settled = [("passed", f.passed), ("failed", f.failed), ("unclassified", f.unclassified),
               ("final errors", f.final), ("errored by verdict", f.verdict_errored)]
    open_ = [("infra-errored", f.open_infra), ("no finished trial", f.unfinished), ("not started", f.not_started)]
    shown = [f"{name} {n}" for i, (name, n) in enumerate(settled) if i < 2 or n]
    waiting = [f"{name} {n}" for i, (name, n) in enumerate(open_) if i < 2 or n]
    return (f"settled {f.settled} = {' + '.join(shown)}; open {f.total - f.settled} = {' + '.join(waiting)} "
            "(mop-up fills the open ones)")


def summary_line(f: Frame) -> str:
    """One line for make status: done/total, ETA, spend."""
    eta = "finished" if f.finished else ("ETA unknown" if f.eta_hours is None else f"ETA {hours(f.eta_hours)}")
    spend = f"${f.spend['total_usd']:,.2f} spent" if f.spend.get("known") else "spend unknown"
    alarm = f"; {len(f.alarms)} alarm(s): make watch RUN={f.run}" if f.alarms else ""
    server = (f"; {f.server_hour} model-server error(s) in the last hour: the server's problem (make logs "
              f"RUN={f.run}), not the sandboxes' (the governor leaves them alone)" if f.server_hour else "")
    return f"progress: {f.settled}/{f.total} attempt slots settled, {eta}, {spend}{server}{alarm}"


def timeline_svg(f: Frame) -> str:
    """Settled trials and infra errors over time, cumulative, as a small SVG (matplotlib, as the
    report draws)."""
    from tools import report_html as RH
    plt, _, _ = RH._matplotlib()
    fig = plt.figure(figsize=(6.4, 2.6), dpi=100)
    ax = fig.add_axes((0.1, 0.2, 0.85, 0.68))
    for times, label, color in ((f.settled_at, "settled trials", "#1b5e20"), (f.infra_at, "infra errors", "#b71c1c")):
        if times:
            line, = ax.step(times, range(1, len(times) + 1), where="post", label=label, color=color)
            line.set_gid("settled" if label.startswith("settled") else "infra")
    ax.set_ylabel("trials", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_title(f"{f.run}: settled trials and infra errors over time", fontsize=9)
    if f.settled_at or f.infra_at:
        ax.legend(fontsize=7, frameon=False, loc="upper left")
    fig.autofmt_xdate()
    svg = RH.figure_bytes(fig, "svg").decode("utf-8")
    plt.close(fig)
    return svg[svg.index("<svg"):]


def page_of(f: Frame, every: float) -> str:
    """The frame as a self-contained HTML page that reloads itself every `every` seconds."""
    import html
    share = f.settled / f.total if f.total else 0.0
    items = [line.strip() for line in lines_of(f)[1:]]
    rows = "".join(f"<li class='{'alarm' if item.startswith('ALARM') else 'figure'}'>{html.escape(item)}</li>"
                   for item in items)
    return (f"<!doctype html><html><head><meta charset='utf-8'>"
            f"<meta http-equiv='refresh' content='{int(every)}'>"
            f"<title>{html.escape(f.run)}: {f.settled}/{f.total}</title>"
            "<style>body{font-family:sans-serif;margin:1.5em;max-width:60em}"
            ".bar{background:#eee;height:1.4em;width:100%;border:1px solid #888}"
            ".fill{background:#1b5e20;height:100%}.alarm{color:#b71c1c}li{margin:.2em 0}</style></head><body>"
            f"<h1>{html.escape(f.run)}</h1>"
            f"<div class='bar' id='bar' title='{f.settled}/{f.total}'><div class='fill' id='fill' "
            f"style='width:{100 * share:.1f}%'></div></div>"
            f"<p id='progress'>{f.settled}/{f.total} attempt slots settled ({pct(share)})</p>"
            f"<ul>{rows}</ul><div id='plot'>{timeline_svg(f)}</div>"
            f"<p>Reloads every {int(every)} s (make watch HTML=…).</p></body></html>\n")


def write_page(path: Path, text: str) -> None:
    """Write the page whole or not at all (a reader reloading mid-write sees the last one), and
    only over a regular file or at a new name (tools/safe_read.py write_atomic): any failure, a
    device or a full disk, is one line and leaves no temp file."""
    try:
        SR.write_atomic(path, text)
    except OSError as e:
        RL.fail(SR.write_error(f"HTML={path}", e))


# --------------------------------------------------------------------------- a remote run, from its bucket

BUCKET_JSON = ("config.json", "result.json")  # what the frame reads of a job dir and of a trial dir
BUCKET_LIST_CAP = 500_000       # entries listed per frame (trajectories included: names only)
BUCKET_FILES_CAP = 50_000       # json files mirrored
BUCKET_FILE_CAP = 16 * SR.MiB   # bytes of one json file (a result.json is a few KB)
BUCKET_TOTAL_CAP = SR.TALLY_CAP  # bytes of them all


class BucketError(Exception):
    """The bucket cannot be read (not found, no access, the network, a cap): one line."""


@dataclass
class Remote:
    """A run's job dirs mirrored from its bucket: only the json files the frame needs."""

    bucket: str
    job_name: str
    root: Path                                   # the private temporary dir
    have: dict[str, str] = field(default_factory=dict)  # bucket path -> xet hash of the local copy
    notes: list[str] = field(default_factory=list)      # this frame's files left out, said as alarms
    refreshed: datetime | None = None


def _safe_part(name: str) -> bool:
    """A path component that is a plain name here (never '..', a separator, a control char)."""
    return name not in ("", ".", "..") and len(name) <= 255 and SR.printable(name) == name and \
        "\\" not in name and "/" not in name


def bucket_wanted(job_name: str, path: str) -> bool:
    """<job>/{config,result}.json or <job>/<trial>/{config,result}.json of the run's jobs (the job
    or its -shard-N, and its -retry-N): nothing deeper, so never agent/ and its trajectories."""
    parts = path.split("/")
    return 2 <= len(parts) <= 3 and all(_safe_part(p) for p in parts) and parts[-1] in BUCKET_JSON and \
        tally_jobs.retry_number(job_name, parts[0]) is not None


def bucket_listing(api, remote: Remote) -> tuple[dict[str, object], set[str]]:
    """({path: BucketFile} of the json files wanted, {job and trial dir paths}) of the run, now."""
    from huggingface_hub import BucketFolder

    jobs = [e.path for e in api.list_bucket_tree(remote.bucket, recursive=False)
            if isinstance(e, BucketFolder) and tally_jobs.retry_number(remote.job_name, e.path) is not None]
    files: dict[str, object] = {}
    dirs: set[str] = set(jobs)
    listed = 0
    for job in jobs:
        for entry in api.list_bucket_tree(remote.bucket, prefix=job, recursive=True):
            listed += 1
            if listed > BUCKET_LIST_CAP:
                raise BucketError(f"more than {BUCKET_LIST_CAP:,} entries under the run's jobs: not a run's job dirs")
            parts = entry.path.split("/")
            if parts[0] != job:  # a prefix listing may also match job-retry-1's paths: listed on its own
                continue
            if len(parts) >= 2 and (len(parts) > 2 or isinstance(entry, BucketFolder)) and _safe_part(parts[1]):
                dirs.add(f"{job}/{parts[1]}")  # a trial dir, even with no json yet (running)
            if not isinstance(entry, BucketFolder) and bucket_wanted(remote.job_name, entry.path):
                files[entry.path] = entry
    if len(files) > BUCKET_FILES_CAP:
        raise BucketError(f"{len(files):,} json files in the run's jobs, above the cap of {BUCKET_FILES_CAP:,}")
    return files, dirs


def _drop_gone(remote: Remote, files: dict[str, object], dirs: set[str]) -> None:
    """Forget what the bucket no longer holds (a mop-up archived it, a job was removed)."""
    for path in [p for p in remote.have if p not in files]:
        (remote.root / path).unlink(missing_ok=True)
        del remote.have[path]
    for job in sorted(os.listdir(remote.root)):
        job_dir = remote.root / job
        if job not in dirs:
            shutil.rmtree(job_dir)  # our own dir: made here, never a link
            continue
        for trial in os.listdir(job_dir):
            if (job_dir / trial).is_dir() and f"{job}/{trial}" not in dirs:
                shutil.rmtree(job_dir / trial)


def bucket_refresh(api, remote: Remote) -> None:
    """Bring the mirror to what the bucket holds now: changed files fetched, gone ones dropped."""
    files, dirs = bucket_listing(api, remote)
    _drop_gone(remote, files, dirs)
    for d in sorted(dirs):
        (remote.root / d).mkdir(parents=True, exist_ok=True)
    remote.notes = []
    fetch, total = [], 0
    for path, entry in sorted(files.items()):
        if entry.size > BUCKET_FILE_CAP:
            remote.notes.append(f"bucket: {SR.shown(path)} not read: {entry.size:,} bytes, above the cap of "
                                f"{BUCKET_FILE_CAP:,} (its trial shows as having no result)")
            continue
        total += entry.size
        if total > BUCKET_TOTAL_CAP:
            raise BucketError(f"the run's json files hold more than {BUCKET_TOTAL_CAP:,} bytes, above the cap")
        if remote.have.get(path) != entry.xet_hash:
            (remote.root / path).unlink(missing_ok=True)  # a new version: never written into an old file
            fetch.append((entry, str(remote.root / path)))
    if fetch:
        api.download_bucket_files(remote.bucket, fetch, raise_on_missing_files=False)
    for entry, dest in fetch:
        _check_fetched(remote, entry, Path(dest))
    remote.refreshed = datetime.now(timezone.utc)


def _check_fetched(remote: Remote, entry, dest: Path) -> None:
    """Keep a downloaded file only when it is a regular file of the size listed."""
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        return  # gone between the listing and the download: the next frame sees it
    if not stat.S_ISREG(st.st_mode) or st.st_size != entry.size:
        dest.unlink()
        remote.notes.append(f"bucket: {SR.shown(entry.path)} not read: not the {entry.size:,} bytes listed")
        return
    remote.have[entry.path] = entry.xet_hash


def bucket_api():
    """huggingface_hub's client, quiet: its token is its own (HF_TOKEN or the login)."""
    from huggingface_hub import HfApi
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()  # a bar on stderr would tear the live view
    return HfApi()


def remote_frame(remote: Remote, api, settings: RL.RunSettings, **kw) -> Frame:
    """The frame of the mirrored job dirs; a failed refresh after the first keeps the last copy
    and says so, so a network blip does not end the watch."""
    stale = None
    try:
        bucket_refresh(api, remote)
    except Exception as e:  # noqa: BLE001 - huggingface_hub's and the network's errors are many
        why = SR.printable(SR.clip(str(e).splitlines()[0] if str(e) else type(e).__name__, 200))
        if remote.refreshed is None:
            raise BucketError(f"cannot read the bucket {remote.bucket}: {why}") from None
        stale = (f"bucket: could not refresh ({why}); the figures are as of "
                 f"{remote.refreshed.strftime('%H:%M:%S')} UTC")
    if not tally_jobs.run_job_dirs(remote.root, remote.job_name):
        raise BucketError(f"run {settings.run} has no job dir yet in the bucket {remote.bucket} "
                          f"({remote.job_name}): nothing to watch until make bench WHERE=hf starts it")
    f = frame_of(dataclasses.replace(settings, jobs_dir=remote.root), **kw)
    f.alarms += remote.notes + ([stale] if stale else [])
    return f


@click.group()
def cli() -> None:
    """Watch a run."""


@cli.command("watch")
@click.option("--run", "run", default="", help="The run (default: the last one used).")
@click.option("--once", is_flag=True, help="Print one frame and exit.")
@click.option("--every", type=click.FloatRange(min=1, max=86400), default=60.0, show_default=True)
@click.option("--now", "now_text", default="", help="The time to compute at (ISO 8601; tests).")
@click.option("--max-cost", type=click.FloatRange(min=0, min_open=True, max=1e9), default=None)
@click.option("--max-infra-rate", type=click.FloatRange(min=0, max=1), default=0.3, show_default=True)
@click.option("--tasks", "tasks_hint", type=click.IntRange(min=1, max=1_000_000), default=None,
              help="Tasks in the run (default: what its first job planned).")
@click.option("--summary", is_flag=True, help="One line (for make status).")
@click.option("--html", "html_path", type=click.Path(path_type=Path), default=None,
              help="Also write the frame as a self-reloading HTML page here, every frame.")
@click.option("--where", type=click.Choice(["local", "hf"]), default="local", show_default=True,
              help="hf: read the run's job dirs from --bucket (a run benched with WHERE=hf).")
@click.option("--bucket", default="", help="NS/NAME of the HF bucket the run's jobs write to (with --where hf).")
def watch_cmd(run, once, every, now_text, max_cost, max_infra_rate, tasks_hint, summary, html_path, where, bucket):
    """Progress, pace, ETA, spend and alarms of RUN, from its files."""
    if where == "hf" and not bucket:
        RL.fail("--where hf reads the run from its bucket: pass --bucket NS/NAME (make watch: BUCKET=ns/name)")
    settings = RL.run_settings(run)
    if where != "hf":
        return watch_run(settings, once, every, now_text, max_cost, max_infra_rate, tasks_hint, summary,
                         html_path, None)
    root = Path(tempfile.mkdtemp(prefix="watch-bucket-"))  # 0700: this process's own
    try:
        remote = Remote(bucket=bucket, job_name=settings.job_name, root=root)
        watch_run(settings, once, every, now_text, max_cost, max_infra_rate, tasks_hint, summary, html_path, remote)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def watch_run(settings, once, every, now_text, max_cost, max_infra_rate, tasks_hint, summary, html_path,
              remote: Remote | None) -> None:
    """The watch of one run, local (remote None) or mirrored from its bucket."""
    api = bucket_api() if remote else None

    def now() -> datetime | None:
        if not now_text:  # a bundled example is frozen: its own last moment (frame_of)
            return None if settings.run.startswith("example-") else datetime.now(timezone.utc)
        parsed, _ = tally_trials.parse_timestamp(now_text)
        if parsed is None:
            RL.fail(f"--now {SR.printable(now_text)[:40]!r} is not an ISO 8601 time")
        return _aware(parsed)

    if html_path is not None and not html_path.parent.is_dir():
        RL.fail(f"HTML={SR.printable(str(html_path))}: its directory does not exist; name a file in an existing one")
    if html_path is not None:  # refused before the first frame is worked out, as each write is
        try:
            SR.write_target(html_path)
        except OSError as e:
            RL.fail(SR.write_error(f"HTML={html_path}", e))

    def build() -> Frame:
        kw = dict(now=now(), tasks_hint=tasks_hint, max_cost=max_cost, max_infra_rate=max_infra_rate)
        try:
            f = remote_frame(remote, api, settings, **kw) if remote else frame_of(settings, **kw)
        except tally_jobs.TallyError as e:
            RL.fail(f"run {settings.run}: {e}")
        except BucketError as e:
            RL.fail(str(e))
        if html_path is not None:
            write_page(html_path, page_of(f, every))
        return f

    if summary:
        click.echo(summary_line(build()))
        return
    if once or not sys.stdout.isatty():
        click.echo("\n".join(lines_of(build())))
        if once:
            return
    live_view(build, every)


def wrapped(lines: list[str], width: int) -> list[str]:
    """Lines folded at word boundaries to the terminal's width (read at each redraw, so a resize
    is followed), continuations indented under their line's text."""
    out = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip(" ")) + 2)
        out += textwrap.wrap(line, width=max(width, 20), subsequent_indent=indent, break_long_words=False,
                             break_on_hyphens=False, drop_whitespace=True) or [""]
    return out


def live_view(build, every: float) -> None:
    """Redraw every `every` seconds with rich until Ctrl-C; plain lines when not on a terminal."""
    if not sys.stdout.isatty():
        try:
            while True:  # a log: one frame per interval, until Ctrl-C ends it quietly
                time.sleep(every)
                click.echo("\n".join(lines_of(build())))
        except KeyboardInterrupt:
            return
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    console = Console()

    def view() -> Text:
        # The time of each redraw: a frame that stopped changing still shows the watch is alive.
        stamp = datetime.now(timezone.utc).strftime("%H:%M:%S")
        lines = lines_of(build()) + [f"  updated {stamp} UTC (every {every:g} s; Ctrl-C stops)"]
        return Text("\n".join(wrapped(lines, console.width)))

    try:
        with Live(view(), console=console, refresh_per_second=1) as live:
            while True:
                time.sleep(every)
                live.update(view())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    cli()
