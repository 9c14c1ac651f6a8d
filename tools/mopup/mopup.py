#!/usr/bin/env python3
"""Mop-up: plan and bookkeeping for running exactly a run's missing attempts (infra-errored or unfinished).

scripts/mopup.sh drives it (settings, endpoint, harbor's argv); this file holds the commands:

  plan     which tasks to retry and how many attempts each lacks, how (resume the job in
           place, or standalone retry jobs), which trial dirs must leave the job first, and
           why. Writes the plan as JSON; prints it for people. tools/mopup/mopup_plan.py decides.
  prepare  carry out a plan's file moves: archive trial dirs, patch n_concurrent_trials.
           Idempotent: a move already done is skipped, so an interrupted mop-up reruns.
  report   after harbor: which planned attempts ran ("re-ran X of Y"), and anything unplanned.
  archive  list what mop-up took out of jobs (the manifest and the archive on disk).
  restore  move archived trial dirs back into their job.

What is left is read from the tally library (tools/results/tally_core.py, imported, the report make
tally prints). A task has k attempt slots (k: the job's n_attempts, harbor's -k; 1 unless
N_ATTEMPTS was set); mop-up fills them, never re-rolls: per task it runs exactly k minus its
settled trials (passed, failed, a genuine limit, a verdict). With k = 1 that is the task whose
latest attempt errored (infra) or never finished. In place, harbor's resume runs k minus the
finished trials left in the job, so only the task's unsettled dirs leave it; otherwise one
retry job <job-name>-retry-<N> per distinct missing count m runs `-k m` of its tasks.

Nothing here deletes. A trial dir leaves a job only by a rename into
state/<run>/archive/<batch>/<job-name>/<trial>, recorded in state/<run>/manifest.jsonl
(append-only) before and after the rename. Why the archive is outside the job: on resume
harbor rmtree's every dir of a job that has no result.json (docs/harbor.md §5). How the moves
and writes survive a kill, a full disk and a live harbor: tools/mopup/mopup_archive.py.

Harbor's files are read as untrusted (tools/mopup/mopup_harbor.py): a config.json, lock.json or
result.json may be missing, empty, truncated, not UTF-8, not a JSON object, a directory or a
FIFO. A special file is never opened (it could hang us); each problem gives one line naming
the file. Where a retry job can still run safely (it leaves the job as it is), the plan uses
one and says why; where not (make tally itself would hang), mop-up stops with exit 1.

Exit codes: 0 done, 1 a user-facing error (message says what and how to fix), 2 usage.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import click

from tools import safe_read
from tools.mopup.mopup_archive import (
    AGAIN, WriteFailed, append_manifest, archive_inventory, archive_trials, describe_archived, manifest_path, move_dir,
    patch_concurrency, read_manifest_lines, refuse_live_writers, remove_stale_temps, restore_one, shown, what_moved,
    replace_file)
from tools.mopup.mopup_harbor import trial_dirs_of, trial_task
from tools.mopup.mopup_plan import build_plan, describe_plan, job_dirs_or_fail
from tools.results.tally_options import max_task_retries_option

# --- click commands ---------------------------------------------------------------------------


@click.group()
def cli() -> None:
    """Mop-up planning and bookkeeping (see the module docstring)."""


@cli.command()
@click.option("--jobs-dir", type=click.Path(path_type=Path), required=True)
@click.option("--job-name", required=True)
@click.option("--run", required=True)
@click.option("--state-dir", type=click.Path(path_type=Path), required=True)
@click.option("--mode", type=click.Choice(["auto", "resume", "retry-job"]), default="auto")
@click.option("--n-concurrent", type=int, required=True)
@click.option("--current-config", type=click.Path(exists=True, path_type=Path), required=True,
              help="`harbor run … --print-config` output for the job as it would run now")
@click.option("--verdicts", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The run's manual verdicts (as make tally reads them): such tasks are never retried.")
@click.option("--model", default=None,
              help="The run's MODEL: a job dir of the run's name that records another model is refused.")
@max_task_retries_option
@click.option("--out", type=click.Path(path_type=Path), required=True)
def plan(jobs_dir, job_name, run, state_dir, mode, n_concurrent, current_config, verdicts, model, max_task_retries,
         out):
    """Decide what to retry and how; write the plan JSON to --out and print it."""
    try:
        current = safe_read.read_json_object(current_config, safe_read.RESULT_CAP, "a job config")
    except (OSError, safe_read.Unreadable) as e:
        raise click.ClickException(f"{current_config} holds no JSON job config ({e}): `harbor run … --print-config` "
                                   "printed none (check the run's settings with make print RUN=…)")
    the_plan = build_plan(jobs_dir.resolve(), job_name, mode, n_concurrent, current, run, verdicts,
                          split=state_dir / "shards.json", model=model, max_task_retries=max_task_retries)
    try:
        replace_file(out, json.dumps(the_plan, indent=2))
    except WriteFailed as exc:
        raise click.ClickException(exc.message("nothing was moved"))
    click.echo(describe_plan(the_plan, state_dir), err=True)


def read_plan(plan_path: Path) -> dict:
    """The plan `plan` wrote, read bounded (a regular file of at most RESULT_CAP bytes, a JSON object)."""
    try:
        return safe_read.read_json_object(plan_path, safe_read.RESULT_CAP, "a mop-up plan")
    except (OSError, safe_read.Unreadable) as e:
        raise click.ClickException(f"the mop-up plan {shown(str(plan_path))} cannot be read ({e}): nothing was "
                                   "moved; make mopup writes a new one")


@cli.command()
@click.option("--plan", "plan_path", type=click.Path(exists=True, path_type=Path), required=True)
@click.option("--state-dir", type=click.Path(path_type=Path), required=True)
def prepare(plan_path, state_dir):
    """Archive the plan's trial dirs and patch the concurrency; a rerun after a kill at any point finishes it."""
    p = read_plan(plan_path)
    state_dir = Path(os.path.abspath(state_dir))
    job_dir = Path(p["job_dir"])
    moved: list[str] = []
    try:
        if p["mode"] == "resume":  # before anything changes: refuse while someone still writes the job
            refuse_live_writers([Path(a["src"]) for a in p["archive"]], job_dir)
        for tmp in remove_stale_temps(job_dir, state_dir):
            click.echo(f"removed {shown(tmp)}, a temp file of an interrupted mop-up", err=True)
        if p["mode"] != "resume":
            return
        archive_trials(p, state_dir, moved)
        job_files = state_dir / "archive" / p["batch"] / (job_dir.name + ".job-files")
        if p.get("unreadable_job_result"):
            archive_job_result(Path(p["unreadable_job_result"]), job_files / "result.json", p["batch"], state_dir)
        if p["concurrency"]:
            patch_concurrency(job_dir, p["concurrency"]["to"], job_files, state_dir)
    except WriteFailed as exc:
        raise click.ClickException(exc.message(what_moved(moved, manifest_path(state_dir))))
    # Last line of defence before harbor runs: it deletes every dir without result.json.
    doomed = [d.name for d in trial_dirs_of(job_dir) if not (d / "result.json").exists()]
    if doomed:
        raise click.ClickException(
            f"not resuming: harbor would delete {', '.join(doomed)} (no result.json; they appeared after the plan). "
            f"{AGAIN.capitalize()}: it archives them first")
    click.echo(f"archived {len(moved)} trial dir(s) to {shown(state_dir / 'archive' / p['batch'])}", err=True)


def archive_job_result(src: Path, dest: Path, batch: str, state_dir: Path) -> None:
    """Move the job's unreadable result.json to the archive (a rename, like the trial dirs); once."""
    if not os.path.lexists(src) or os.path.lexists(dest):
        return  # moved already (maybe by an attempt killed before its record), or harbor has written a new one
    record = {"event": "archive-job-file", "src": str(src), "dest": str(dest), "batch": batch,
              "why": "unreadable (harbor killed while writing it); harbor writes a new one"}
    append_manifest(state_dir, {**record, "state": "moving"})
    move_dir(src, dest)
    append_manifest(state_dir, {**record, "state": "moved"})


@cli.command()
@click.option("--plan", "plan_path", type=click.Path(exists=True, path_type=Path), required=True)
def report(plan_path):
    """Which planned attempts ran; fails when harbor ran a trial mop-up did not plan."""
    p = read_plan(plan_path)
    before = set(p["trial_dirs_before"])
    planned = Counter({t["task"]: t.get("missing", 1) for t in p["tasks"]})
    ran: Counter = Counter()
    unplanned = []
    for jd in job_dirs_or_fail(Path(p["jobs_dir"]), p["job_name"]):
        for d in trial_dirs_of(Path(jd)):
            if str(d) in before or not (d / "result.json").exists():
                continue
            task = trial_task(d)
            if task in planned:
                ran[task] += 1
            else:
                unplanned.append(str(d))
    not_run = sorted(t for t in planned if ran[t] < planned[t])
    over = sorted(t for t in planned if ran[t] > planned[t])
    click.echo(f"re-ran {sum(min(ran[t], planned[t]) for t in planned)} of {sum(planned.values())} planned trials")
    if not_run:
        click.echo(f"not re-run (yet): {', '.join(not_run)}: {AGAIN}", err=True)
    if over:
        raise click.ClickException("harbor ran more attempts than mop-up planned: " + ", ".join(
            f"{t} {ran[t]} (planned {planned[t]})" for t in over))
    if unplanned:
        raise click.ClickException(f"harbor ran {len(unplanned)} trial(s) mop-up did not plan: {', '.join(unplanned)}")


@cli.command("archive")
@click.option("--state-dir", type=click.Path(path_type=Path), required=True)
def archive_list(state_dir):
    """List archived trial dirs: batch, job, trial, task, and whether each is still in the archive."""
    state_dir = Path(os.path.abspath(state_dir))
    entries = archive_inventory(state_dir)
    if not entries:
        click.echo(f"the archive of run {state_dir.name} is empty: mop-up has moved nothing out of its jobs")
        return
    for entry in entries:
        click.echo(describe_archived(entry))
    broken = read_manifest_lines(state_dir)[1]
    if broken:
        click.echo(f"note: {broken} line(s) of {shown(manifest_path(state_dir))} were cut short by a killed mop-up; "
                   "the list above also reads the archive on disk", err=True)


@cli.command()
@click.option("--state-dir", type=click.Path(path_type=Path), required=True)
@click.argument("trials", nargs=-1, required=True)
def restore(state_dir, trials):
    """Move archived trial dirs (by trial dir name, or 'all') back into their jobs."""
    state_dir = Path(os.path.abspath(state_dir))
    run = state_dir.name
    entries = archive_inventory(state_dir)
    if not entries:
        click.echo(f"the archive of run {run} is empty: nothing to restore")
        return
    unknown = set(trials) - {"all"} - {e.trial for e in entries}
    if unknown:
        raise click.ClickException(f"not in the archive of run {run}: {', '.join(sorted(unknown))} "
                                   "(list it with `make mopup-archive`)")
    wanted = [e for e in entries if "all" in trials or e.trial in trials]
    restored: list[str] = []
    problems: list[str] = []
    try:
        for entry in wanted:
            status = entry.status()
            if status == "MISSING":
                problems.append(f"{entry.trial} is neither in the archive ({shown(entry.dest)}) nor back in its job")
            elif status == "archived" and entry.src is None:
                problems.append(f"no record says which job {shown(entry.dest)} came from: "
                                "move it back into its job dir by hand")
            elif status == "archived":
                restore_one(state_dir, entry)
                restored.append(str(entry.src))
                click.echo(f"restored {entry.src}")
    except WriteFailed as exc:
        done = (f"{len(restored)} trial dir(s) were moved back before that, each recorded in "
                f"{shown(manifest_path(state_dir))}" if restored else "nothing was moved")
        raise click.ClickException(exc.message(done, verb="make mopup-restore"))
    if problems and ("all" not in trials or any(p.startswith("no record") for p in problems)):
        raise click.ClickException("; ".join(problems))
    for problem in problems:
        click.echo(f"warning: {problem}", err=True)
    if not restored and not problems:
        click.echo("nothing to restore: " + ("every archived trial dir is" if "all" in trials else "those trial dirs are")
                   + " back in its job already")


if __name__ == "__main__":
    cli()
