#!/usr/bin/env python3
"""watch: a live view of a whole run: progress, pace, ETA, spend and alarms.

Usage (through make watch RUN=<run> [ONCE=1] [WATCH_EVERY=60]):
  python -m tools.run.watch watch --run RUN [--once] [--every SECONDS] [--now ISO] [--max-cost USD]
      [--max-infra-rate R] [--tasks N]

Everything comes from what the run's own files already say, read the way the tally reads them
(tools/results/tally_core.py; a symlinked job dir is never followed): every job dir of the run (the job,
its retry jobs, both layouts), its manifest and cost (tools/report/report_cost.py, make cost's figures).

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
- Infra errors by side (env/outcome-policy.yaml, tools/results/tally_policy.py infra_side): the sandboxes'
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

The code: frame_of (here) puts a frame together from tools/run/watch_frame.py (the Frame, the scans,
the trials' times) and watch_alarms.py; watch_text.py writes it as lines and draws it live,
watch_page.py as the HTML page; watch_bucket.py mirrors a remote run's job dirs.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import click

from tools import fmt
from tools.results import report_load
from tools import safe_read
from tools.results import slots
from tools.results import tally_core
from tools.results import tally_jobs
from tools.results import tally_policy
from tools.results import tally_trials
from tools.run import watch_bucket
from tools.run.watch_alarms import alarms, idle_gpus
# _aware: frame_of's name for watch_frame.aware
from tools.run.watch_frame import (HOUR, Frame, aware as _aware, cost_of, first_pass_tasks, foreign_job_dirs, job_started,
                               last_moment, scan, timed_trials)
from tools.run.watch_page import page_of, write_page
from tools.run.watch_text import lines_of, live_view, summary_line


def frame_of(settings: report_load.RunSettings, *, now: datetime | None, tasks_hint: int | None, max_cost: float | None,
             max_infra_rate: float, with_cost: bool = True) -> Frame:
    """The frame at `now`; None: the run's own last moment (a bundled example, frozen)."""
    # A run not benched yet may have no jobs dir at all: that is no job dir, said in make's terms.
    dirs = ([str(d) for d in tally_jobs.run_job_dirs(settings.jobs_dir, settings.job_name)]
            if settings.jobs_dir.is_dir() else [])
    try:
        tally_jobs.refuse_foreign_job_dirs(dirs, settings.model or None)  # another run's trials are not this run's
    except tally_jobs.TallyError as e:
        report_load.fail(f"run {settings.run}: {e}")
    if not dirs:
        report_load.fail(report_load.no_job_dir(settings.run, settings.jobs_dir, settings.job_name,
                                                f"nothing to watch until make bench RUN={settings.run} (or make "
                                                f"reproduce RUN={settings.run}) starts it"))
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
        now = last_moment(trials) or fmt.utc_now()
    finished, notes = timed_trials(trials, now)
    if frozen:
        notes.insert(0, f"run {settings.run} is a bundled example, frozen: its figures are taken at its own last "
                        f"moment, its latest trial's end ({now:%Y-%m-%d %H:%M} UTC), not now")
    settled_at = sorted(_aware(t.finished_at) for t in finished if slots.is_settled(t))
    infra_at = [_aware(t.finished_at) for t in finished if not slots.is_settled(t)]
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
              infra=sum(1 for t in trials if t.status == "finished" and not slots.is_settled(t)),
              sides=tally_policy.count_sides(trials, policy), running=sum(1 for t in trials if t.status == "unfinished"),
              unclassified=report["unclassified"], final=errored["final"], verdict_errored=errored["verdict"],
              open_infra=errored["infra"], unfinished=report["unfinished"], trial_dirs=len(trials),
              final_errors=report["final_errors"], max_task_retries=report["max_task_retries"],
              per_job=[(os.path.basename(d), sum(1 for t in trials if t.job_dir == os.path.abspath(d)
                                                   and t.status == "finished" and slots.is_settled(t)),
                        sum(1 for t in trials if t.job_dir == os.path.abspath(d))) for d in dirs],
              pace_hour=pace_hour, pace_all=pace_all,
              infra_rate_hour=rate(sum(1 for s in infra_at if s >= hour_ago), recent_done),
              infra_rate_all=rate(len(infra_at), len(finished)), eta_hours=eta, eta_range=eta_range,
              spend=spend, projected_usd=projected, notes=notes, settled_at=settled_at, infra_at=sorted(infra_at),
              server_hour=recent_sides["server"], sandbox_rate_hour=rate(recent_sides["sandbox"], recent_done))
    f.alarms = alarms(f, finished, settled_at, now, max_cost, max_infra_rate,
                      foreign_job_dirs(Path(settings.jobs_dir), dirs, settings.job_name))
    f.alarms += idle_gpus_alarms(f, Path(settings.state_dir) / "manifest.jsonl")
    return f


def idle_gpus_alarms(f: Frame, manifest: Path) -> list[str]:
    """The idle-GPU alarm from the run's manifest (the servers it launched), or one saying it cannot be
    read: a manifest that is a FIFO, a directory or past its cap is never taken for no server."""
    try:
        return idle_gpus(f, safe_read.manifest_events(manifest))
    except safe_read.Unreadable as e:
        return [f"cannot read {safe_read.printable(str(manifest))} ({e}): whether paid GPUs sit idle is not checked"]


def remote_frame(remote: watch_bucket.Remote, api, settings: report_load.RunSettings, **kw) -> Frame:
    """The frame of the mirrored job dirs; a failed refresh after the first keeps the last copy
    and says so, so a network blip does not end the watch."""
    stale = None
    try:
        watch_bucket.bucket_refresh(api, remote)
    except Exception as e:  # noqa: BLE001 - huggingface_hub's and the network's errors are many
        why = safe_read.printable(safe_read.clip(str(e).splitlines()[0] if str(e) else type(e).__name__, 200))
        if remote.refreshed is None:
            raise watch_bucket.BucketError(f"cannot read the bucket {remote.bucket}: {why}") from None
        stale = (f"bucket: could not refresh ({why}); the figures are as of "
                 f"{remote.refreshed.strftime('%H:%M:%S')} UTC")
    if not tally_jobs.run_job_dirs(remote.root, remote.job_name):
        raise watch_bucket.BucketError(f"run {settings.run} has no job dir yet in the bucket {remote.bucket} "
                          f"({remote.job_name}): nothing to watch until make bench WHERE=hf starts it")
    f = frame_of(dataclasses.replace(settings, jobs_dir=remote.root), **kw)
    f.alarms += remote.notes + ([stale] if stale else [])
    return f


@dataclass(frozen=True)
class WatchOptions:
    """What the watch command was asked for, once, from its options."""

    once: bool = False                 # one frame, then exit
    every: float = 60.0                # seconds between frames (and the page's reload)
    now_text: str = ""                 # the time to compute at (ISO 8601; tests); "": now
    max_cost: float | None = None      # MAX_COST: the spend projected past it is an alarm
    max_infra_rate: float = 0.3        # MAX_INFRA_RATE: the sandbox infra-error rate alarmed above
    tasks_hint: int | None = None      # the run's tasks (default: what its first job planned)
    summary: bool = False              # one line, for make status
    html_path: Path | None = None      # also write the frame as a self-reloading page here


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
def watch_cmd(run, where, bucket, **options):
    """Progress, pace, ETA, spend and alarms of RUN, from its files."""
    if where == "hf" and not bucket:
        report_load.fail("--where hf reads the run from its bucket: pass --bucket NS/NAME (make watch: BUCKET=ns/name)")
    opts = WatchOptions(**options)
    settings = report_load.run_settings(run)
    if where != "hf":
        return watch_run(settings, opts, None)
    root = Path(tempfile.mkdtemp(prefix="watch-bucket-"))  # 0700: this process's own
    try:
        watch_run(settings, opts, watch_bucket.Remote(bucket=bucket, job_name=settings.job_name, root=root))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def now_of(settings: report_load.RunSettings, now_text: str):
    """The time a frame is computed at: --now, or now; None for a bundled example (frozen at its
    own last moment, frame_of)."""
    if not now_text:
        return None if settings.run.startswith("example-") else fmt.utc_now()
    parsed, _ = tally_trials.parse_timestamp(now_text)
    if parsed is None:
        report_load.fail(f"--now {safe_read.printable(now_text)[:40]!r} is not an ISO 8601 time")
    return _aware(parsed)


def check_html_path(html_path: Path | None) -> None:
    """Refuse HTML= before the first frame is worked out, as each write is."""
    if html_path is None:
        return
    if not html_path.parent.is_dir():
        report_load.fail(f"HTML={safe_read.printable(str(html_path))}: its directory does not exist; name a file in an existing one")
    try:
        safe_read.write_target(html_path)
    except OSError as e:
        report_load.fail(safe_read.write_error(f"HTML={html_path}", e))


def watch_run(settings: report_load.RunSettings, opts: WatchOptions, remote: watch_bucket.Remote | None) -> None:
    """The watch of one run, local (remote None) or mirrored from its bucket."""
    api = watch_bucket.bucket_api(settings.call_timeout) if remote else None
    check_html_path(opts.html_path)

    def build() -> Frame:
        kw = dict(now=now_of(settings, opts.now_text), tasks_hint=opts.tasks_hint, max_cost=opts.max_cost,
                  max_infra_rate=opts.max_infra_rate)
        try:
            f = remote_frame(remote, api, settings, **kw) if remote else frame_of(settings, **kw)
        except tally_jobs.TallyError as e:
            report_load.fail(f"run {settings.run}: {e}")
        except watch_bucket.BucketError as e:
            report_load.fail(str(e))
        if opts.html_path is not None:
            write_page(opts.html_path, page_of(f, opts.every))
        return f

    if opts.summary:
        click.echo(summary_line(build()))
        return
    if opts.once or not sys.stdout.isatty():
        click.echo("\n".join(lines_of(build())))
        if opts.once:
            return
    live_view(build, opts.every)


if __name__ == "__main__":
    cli()
