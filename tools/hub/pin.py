#!/usr/bin/env python3
"""make pin: what a run really ran, read off its job dirs and written back into its run file.

    pin.py resolved --jobs-dir D --job-name N [--model M]
        JSON: the dataset commit or registry version and the harbor version the run's jobs recorded.
    pin.py plan --jobs-dir D --job-name N --run-file F [--model M] [--manifest M] [--write]
        The run file's pins that would make the next run reproduce this one, as a unified diff;
        with --write, the run file is replaced by the pinned one (atomically).

Harbor resolves a `--repo` dataset to a commit when a job starts and records it in the job's
lock.json: every task's `TaskLock` carries `git_url` and `git_commit_id` (harbor 0.26.0,
harbor/models/job/lock.py; tests/test_pin.py checks the names on harbor's own model), and
`JobLock.harbor.version` is the harbor that wrote it. Only that recorded commit is written
back, as DATASET_REF: a run whose jobs recorded two commits (a resume after the dataset's HEAD
moved) is refused with both named, since no one commit reproduces it.

A registry dataset (`-d org/name[@ref]`, DATASET) is resolved to one version when a job starts:
harbor 0.26.0 rewrites the job's DatasetConfig ref to that version's content digest,
`sha256:<64 hex>` (harbor/models/job/config.py DatasetConfig._get_package_task_configs), so the
job's config.json, written as the job starts, records it; its lock.json lists each task as a
package TaskLock of that dataset (`source`) with the task's own digest. That recorded version is
written back as DATASET=org/name@sha256:<digest> when the run file names no version or a tag
(a tag, latest included, can move); a revision number (`@6`, what a leaderboard is bound to) or
a digest is a pin already, checked against what ran where it can be (a digest). Jobs that ran two
versions are refused, as two commits are. A job dir of the run's name that is another run's (its
config.json names another job or model than the run's MODEL) is refused, as the tally refuses it.

Server images: HF's job inspect output (huggingface_hub 2.4.0 JobInfo) has `docker_image` as
launched and no resolved digest, so an image given by tag cannot be pinned after the fact. The
plan says so and how to pin one by hand (SERVER_IMAGE=<repo>@sha256:…); an image the manifest
recorded with a digest is already pinned.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
from pathlib import Path

import click

from tools.hub.pin_lock import DIGEST, PinError, read_lock, registry_pinned, split_registry
from tools.safe_read import Unreadable, manifest_events, printable, write_atomic
from tools.results.tally_jobs import TallyError, refuse_foreign_job_dirs, run_job_dirs

SHA = re.compile(r"[0-9a-f]{40}")  # fullmatch: "$" would let a trailing newline through


def resolved(jobs_dir: Path, job_name: str, model: str | None = None) -> dict:
    """What the run's jobs recorded: one dataset commit (or none), registry versions, harbor versions,
    per job. A job dir of the run's name that is another run's (another job's or model's) is refused."""
    try:
        dirs = run_job_dirs(jobs_dir, job_name)
    except TallyError as e:  # no jobs dir at all: the run has not been benched here
        raise PinError(f"{e}; nothing to pin before a bench (make bench), or make pull a remote run's job dirs") from e
    try:
        refuse_foreign_job_dirs(dirs, model)
    except TallyError as e:
        raise PinError(str(e)) from e
    jobs = [lk for lk in (read_lock(d) for d in dirs) if lk is not None]
    if not jobs:
        raise PinError(f"no lock.json in the jobs of {job_name} under {jobs_dir}: harbor writes one when a job "
                       "starts; run the bench first (make bench), or make pull a remote run's job dirs")
    commits = sorted({c for job in jobs for c in job["commits"]})
    versions = sorted({job["harbor_version"] for job in jobs if job["harbor_version"]})
    dataset = None
    if len(commits) == 1:
        dataset = {"git_url": commits[0][0], "commit": commits[0][1]}
    registry = sorted({r for job in jobs for r in job["registry"]})
    return {"dataset": dataset, "dataset_commits": [{"git_url": u, "commit": c} for u, c in commits],
            "registry_datasets": [{"name": n, "ref": r} for n, r in registry],
            "harbor_versions": versions, "jobs": jobs}


def set_line(text: str, name: str, value: str) -> str:
    """The run file with NAME=value: its assignment replaced in place, else appended."""
    pattern = re.compile(rf"^{re.escape(name)}=.*$", re.M)
    line = f"{name}={value}"
    if pattern.search(text):
        return pattern.sub(line, text, count=1)
    return text + ("" if text.endswith("\n") or not text else "\n") + line + "\n"


def current_value(text: str, name: str) -> str | None:
    m = re.search(rf"^{re.escape(name)}=(\S*)", text, re.M)
    return m.group(1) if m else None


def last_server_image(manifest: Path | None) -> str | None:
    """SERVER_IMAGE as the run's last launch of a server recorded it (state/<run>/manifest.jsonl)."""
    image = None
    try:
        events = manifest_events(manifest) if manifest else []
    except Unreadable as e:
        raise PinError(f"cannot read {printable(str(manifest))} ({e}): the server image the run launched is "
                       f"recorded there; put the run's own manifest back") from e
    for event in events:
        if event.get("event") in ("serve", "reproduce-relaunch"):
            image = (event.get("settings") or {}).get("SERVER_IMAGE") or image
    return image


def pin_registry(text: str, found: dict, job_name: str, run_file: Path, notes: list[str]) -> str:
    """The run file with its registry DATASET pinned to the version its jobs recorded (pin.py's doc)."""
    recorded = found["registry_datasets"]
    names = sorted({r["name"] for r in recorded})
    if len(names) > 1 or len(recorded) > 1:
        listed = ", ".join(f"{r['name']}@{r['ref']}" for r in recorded)
        raise PinError(f"the jobs of {job_name} ran {len(recorded)} registry dataset versions: {listed}. No one version "
                       f"reproduces this run: pin the one you want by hand, DATASET=<org/name>@<version> in {run_file.name}")
    name, ref = recorded[0]["name"], recorded[0]["ref"]
    if not DIGEST.fullmatch(ref):
        raise PinError(f"the jobs of {job_name} recorded {name} at '{ref}', not the version harbor resolves it to "
                       f"(sha256:<digest>, in the job's config.json): pin by hand, DATASET={name}@<version>")
    current = current_value(text, "DATASET") or ""
    current_name, current_ref = split_registry(current)
    if current and current_name != name:
        raise PinError(f"{run_file.name} names DATASET={current}, but the jobs of {job_name} ran {name}: one of them "
                       f"is not what you think. Check the run's job dirs")
    if registry_pinned(current_ref):
        if DIGEST.fullmatch(current_ref) and current_ref != ref:
            raise PinError(f"{run_file.name} pins DATASET={current}, but the jobs of {job_name} ran {name}@{ref}: one "
                           f"of them is not what you think. Check the run's job dirs, then remove the version and run "
                           f"make pin again")
        how = "already pinned" if current_ref == ref else f"pinned by revision {current_ref}, which the Hub resolves"
        notes.append(f"dataset: {name} at {ref} ({how})")
        return text
    notes.append(f"dataset: {name} at {ref} (the version its jobs ran"
                 + (f"; the run file's @{current_ref} is a tag, which can move)" if current_ref else ")"))
    return set_line(text, "DATASET", f"{name}@{ref}")


def plan(jobs_dir: Path, job_name: str, run_file: Path, manifest: Path | None,
         model: str | None = None) -> tuple[str, str, list[str]]:
    """(old run file, new run file, notes): the pins this run's records allow, as data."""
    found = resolved(jobs_dir, job_name, model)
    old = run_file.read_text()
    new, notes = old, []
    commits = found["dataset_commits"]
    if found["registry_datasets"]:
        new = pin_registry(new, found, job_name, run_file, notes)
    elif len(commits) > 1:
        listed = ", ".join(f"{c['commit']} ({c['git_url']})" for c in commits)
        raise PinError(f"the jobs of {job_name} ran tasks from {len(commits)} dataset commits: {listed}. No one "
                       "commit reproduces this run: pin the one you want by hand, DATASET_REF=<sha> in "
                       f"{run_file.name}")
    if not commits:
        notes.append("dataset: a local path (nothing to pin)")
    else:
        commit = commits[0]["commit"]
        if not SHA.fullmatch(commit):
            raise PinError(f"the recorded dataset commit '{commit}' is not a 40-hex sha: pin by hand")
        pinned = current_value(old, "DATASET_REF")
        if pinned and pinned != commit:
            raise PinError(f"{run_file.name} pins DATASET_REF={pinned}, but the jobs of {job_name} ran {commit}: "
                           "one of them is not what you think. Check the run's job dirs, then remove the line "
                           "and run make pin again")
        new = set_line(new, "DATASET_REF", commit)
        notes.append(f"dataset: {commits[0]['git_url']} at {commit}"
                     + (" (already pinned)" if pinned == commit else ""))
    image = last_server_image(manifest)
    if image and "@sha256:" in image:
        notes.append(f"server image: {image} (pinned by digest)")
    elif image:
        notes.append(f"server image: {image} is a tag, and HF's job record has no resolved digest: pin it by "
                     "hand with SERVER_IMAGE=<repository>@sha256:<digest> (the digest your registry shows for it)")
    versions = found["harbor_versions"]
    if versions:
        notes.append(f"harbor: {', '.join(versions)} wrote these jobs (env/requirements.lock pins what runs next)")
    return old, new, notes


def unified(old: str, new: str, name: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{name}", f"b/{name}"))


@click.group()
def cli():
    """make pin: pins a run's dataset to what its jobs ran (scripts/pin.sh runs it)."""


@cli.command("resolved")
@click.option("--jobs-dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--job-name", required=True)
@click.option("--model", default=None, help="The run's MODEL: a job dir that ran another is refused.")
def resolved_cmd(jobs_dir, job_name, model):
    """The dataset commit or registry version and the harbor version the run's jobs recorded, as JSON."""
    try:
        click.echo(json.dumps(resolved(jobs_dir, job_name, model or None)))
    except PinError as e:
        raise click.ClickException(str(e)) from e


@cli.command("plan")
@click.option("--jobs-dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--job-name", required=True)
@click.option("--run-file", required=True, type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--manifest", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--model", default=None, help="The run's MODEL: a job dir that ran another is refused.")
@click.option("--write", is_flag=True, help="Replace the run file with the pinned one.")
def plan_cmd(jobs_dir, job_name, run_file, manifest, model, write):
    """The diff that pins the run file to what ran; --write applies it."""
    try:
        old, new, notes = plan(jobs_dir, job_name, run_file, manifest, model or None)
    except PinError as e:
        raise click.ClickException(str(e)) from e
    for note in notes:
        click.echo(f"pin: {note}", err=True)
    if old == new:
        click.echo(f"pin: {run_file.name} already pins everything its jobs recorded; nothing to change", err=True)
        return
    sys.stdout.write(unified(old, new, f"runs/{run_file.name}"))
    if write:
        try:
            write_atomic(run_file, new)
        except OSError as e:
            raise click.ClickException(f"cannot write {run_file}: {e.strerror or e}; it is unchanged") from e
        click.echo(f"pin: wrote runs/{run_file.name}; the next run reproduces this one's dataset", err=True)


if __name__ == "__main__":
    cli()
