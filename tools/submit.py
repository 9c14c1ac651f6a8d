#!/usr/bin/env python3
"""submit: the Harbor Hub side of a leaderboard submission (make submit's Python half).

Usage:
  python -m tools.submit credential
  python -m tools.submit plan --out OUT --jobs-dir D --job-name N [--built] [settings]
  python -m tools.submit job-id --log UPLOAD_OUTPUT --job-dir DIR
  python -m tools.submit record --state FILE --run RUN --dest DIR --leaderboard NAME
      [--upload JOB_DIR JOB_ID]... --status pending|submitted|failed|uploading [-- ARGV...]

Terminal-Bench 2.1 is submitted through Harbor Hub: each job dir is uploaded with
`harbor upload <job dir>` (harbor/cli/upload.py), which prints `View at <url>/<job id>`; the
ids then go to `harbor leaderboard submit --leaderboard ... --job-id ... --metadata ...`.

- credential: whether harbor has an API key, by harbor's own rule (harbor/auth/credentials.py
  resolve_api_key: HARBOR_API_KEY, else ~/.harbor/credentials.json from `harbor auth login`).
  Prints where it is, never the key; exit 1 when there is none.
- plan: the submission dir make submission builds (tools/submission.py's own layout:
  OUT/submissions/terminal-bench/<version>/<agent>__<model>/) and its job dirs, NUL-separated:
  the dir first, then each job dir. Without --built, the run's job dirs as the submission would
  copy them (for a dry run: nothing is built yet); with --built, the job dirs the built tree
  holds (a dir with result.json and config.json, what harbor upload takes).
- job-id: the job id `harbor upload` printed (the UUID of its last "View at" line), checked
  against the job's result.json id, which is the id harbor uploads the job under
  (upload/uploader.py upload_job: job_result.id). Terminal escapes are taken out first: a harbor
  (or a FORCE_COLOR, a wrapper) that colours its output, or makes the URL a link, prints the
  same line.
- record: writes state/<run>/submit.json atomically (the uploads and the leaderboard step) and
  prints it as one JSON line, for the manifest.

Exit codes: 0 done; 1 a user error, named (click's `Error: ...`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
from pathlib import Path

import click

from tools import safe_read as SR
from tools import submission as S
from tools import tally_core as T
from tools.report_load import fail

VIEW_LINE = re.compile(r"^View at (?P<url>\S+/(?P<id>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                       r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12}))\s*$")
STATUSES = ("uploading", "pending", "submitted", "failed")
# What a terminal-minded program wraps its text in (ECMA-48): an OSC string such as an OSC 8
# hyperlink, ended by BEL, by ST (ESC \ or 0x9c) or by the line's end; a CSI sequence such as a
# colour (\x1b[1;36m, or 0x9b...); any other escape, ESC with its intermediate and final bytes.
# Then any control character left.
TERMINAL_ESCAPE = re.compile(r"(?:\x1b\]|\x9d)[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
                             r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
                             r"|\x1b[ -/]*[0-~]?"
                             r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def without_terminal_escapes(text: str) -> str:
    """TEXT as a terminal would show it, without colours, links or other control sequences."""
    return TERMINAL_ESCAPE.sub("", text)


@click.group(help=__doc__.split("\n\n")[0])
def cli() -> None:
    pass


@cli.command("credential")
def credential_cmd() -> None:
    """Say where harbor's API key comes from (never the key); exit 1 when there is none."""
    from harbor.auth.credentials import API_KEY_ENV_VAR, resolve_api_key

    resolved = resolve_api_key()
    if resolved is None:
        sys.exit(1)
    click.echo(API_KEY_ENV_VAR if resolved[1] == "env" else "~/.harbor/credentials.json (harbor auth login)")


def submission_dest(out: Path, settings: dict) -> Path:
    """The <agent>__<model> dir tools/submission.py builds for these settings."""
    meta = S.resolve_metadata(**{k: v for k, v in settings.items() if k not in ("dataset_repo", "version")})
    version = settings["version"] or S.version_of(settings["dataset_repo"])
    return S.submission_dir(out, version, meta)


def built_job_dirs(dest: Path, run_order: list[str]) -> list[Path]:
    """The job dirs in a built tree, in the run's order (the job, then its retry jobs)."""
    if not dest.is_dir():
        fail(f"no submission at {dest}: make submission did not build it")
    found = [p for p in dest.iterdir() if not p.is_symlink() and p.is_dir()
             and (p / "result.json").is_file() and (p / "config.json").is_file()]
    # make submission copies every job dir of the run, holding only its counted trials: one left
    # with none would become a job of no trials on the Hub, part of the submission.
    empty = [p for p in found if not any(t.is_dir() and (t / "result.json").is_file() for t in p.iterdir())]
    for p in sorted(empty):
        click.echo(f"submit: left out {p.name}: it holds no counted trial, so there is nothing of it to upload",
                   err=True)
    rank = {name: i for i, name in enumerate(run_order)}
    return sorted((p for p in found if p not in empty), key=lambda p: (rank.get(p.name, len(rank)), p.name))


@cli.command("plan")
@click.option("--out", required=True, type=click.Path(path_type=Path))
@click.option("--jobs-dir", required=True, type=click.Path(path_type=Path))
@click.option("--job-name", required=True)
@click.option("--built", is_flag=True, help="List the job dirs of the built tree, not of the run.")
@S.settings_options
def plan_cmd(out, jobs_dir, job_name, built, **settings):
    """The submission dir, then its job dirs: NUL-separated."""
    dest = submission_dest(out, settings)
    try:
        run_jobs = [d for d in T.run_job_dirs(jobs_dir, job_name) if not d.is_symlink()]
    except T.TallyError as e:
        fail(str(e))
    jobs = built_job_dirs(dest, [d.name for d in run_jobs]) if built else [dest / d.name for d in run_jobs]
    if not jobs:
        fail(f"no job dir of {job_name!r} {'in ' + str(dest) if built else 'under ' + str(jobs_dir)}: nothing to upload")
    sys.stdout.write("".join(f"{p}\0" for p in [dest, *jobs]))


@cli.command("job-id")
@click.option("--log", "log", required=True, type=click.Path(path_type=Path),
              help="What harbor upload printed.")
@click.option("--job-dir", required=True, type=click.Path(path_type=Path))
def job_id_cmd(log: Path, job_dir: Path) -> None:
    """The job id harbor upload printed, checked against the job's result.json."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        fail(f"cannot read harbor upload's output {log}: {e.strerror}")
    lines = without_terminal_escapes(text).splitlines()
    ids = [m["id"].lower() for line in lines if (m := VIEW_LINE.match(line.strip()))]
    if not ids:
        fail(f"harbor upload printed no 'View at <url>/<job id>' line for {job_dir} (its output: {log})")
    try:
        recorded = str(json.loads((job_dir / "result.json").read_text(encoding="utf-8")).get("id", "")).lower()
    except (OSError, ValueError, AttributeError) as e:
        fail(f"cannot read the job id from {job_dir}/result.json: {e}")
    if ids[-1] != recorded:
        fail(f"harbor upload printed job id {ids[-1]} for {job_dir}, but its result.json says {recorded}")
    click.echo(ids[-1])


def write_json_atomically(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        fail(SR.write_error(path, e))


@cli.command("record")
@click.option("--state", required=True, type=click.Path(path_type=Path), help="state/<run>/submit.json")
@click.option("--run", required=True)
@click.option("--dest", required=True, type=click.Path(path_type=Path), help="The submission dir.")
@click.option("--leaderboard", required=True)
@click.option("--upload", "uploads", multiple=True, type=(click.Path(path_type=Path), str),
              help="JOB_DIR JOB_ID of one uploaded job dir; repeatable.")
@click.option("--status", required=True, type=click.Choice(STATUSES),
              help="uploading (some uploads are done), pending (uploaded; this harbor has no "
                   "leaderboard submit), submitted, failed (the submit call failed).")
@click.argument("argv", nargs=-1)
def record_cmd(state: Path, run: str, dest: Path, leaderboard: str, uploads, status: str, argv) -> None:
    """Write submit.json atomically; print it as one line."""
    data = {
        "run": run,
        "at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "submission": str(dest),
        "metadata": str(dest / "metadata.yaml"),
        "uploads": [{"job": job_dir.name, "job_dir": str(job_dir), "job_id": job_id} for job_dir, job_id in uploads],
        "leaderboard": {"name": leaderboard, "status": status, "argv": list(argv)},
    }
    write_json_atomically(state, data)
    click.echo(json.dumps(data, separators=(",", ":")))


if __name__ == "__main__":
    cli()
