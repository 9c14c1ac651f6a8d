#!/usr/bin/env python3
"""submit: the Harbor Hub side of a leaderboard submission (make submit's Python half).

Usage:
  python -m tools.hub.submit credential
  python -m tools.hub.submit plan --out OUT --jobs-dir D --job-name N [--built] [settings]
  python -m tools.hub.submit job-id --log UPLOAD_OUTPUT --job-dir DIR
  python -m tools.hub.submit hub-check --run RUN JOB_DIR...
  python -m tools.hub.submit metadata-check --leaderboard NAME --metadata FILE
  python -m tools.hub.submit record --state FILE --run RUN --dest DIR --leaderboard NAME
      [--upload JOB_DIR JOB_ID]... --status pending|submitted|failed|uploading [-- ARGV...]

Terminal-Bench 2.1 is submitted through Harbor Hub: each job dir is uploaded with
`harbor upload <job dir>` (harbor/cli/upload.py), which prints `View at <url>/<job id>`; the
ids then go to `harbor leaderboard submit --leaderboard ... --job-id ... --metadata ...`.

- credential: whether harbor has an API key, by harbor's own rule (harbor/auth/credentials.py
  resolve_api_key: HARBOR_API_KEY, else ~/.harbor/credentials.json from `harbor auth login`).
  Prints where it is, never the key; exit 1 when there is none.
- plan: the submission dir make submission builds (tools/hub/submission.py's own layout:
  OUT/submissions/terminal-bench/<version>/<agent>__<model>/) and its job dirs, NUL-separated:
  the dir first, then each job dir. Without --built, the run's job dirs as the submission would
  copy them (for a dry run: nothing is built yet); with --built, the job dirs the built tree
  holds (a dir with result.json and config.json, what harbor upload takes). Either way, two job
  dirs of one job id are refused (their dirs named): harbor upload would put both under one id.
- job-id: the job id `harbor upload` printed (the UUID of its last "View at" line), checked
  against the job's result.json id, which is the id harbor uploads the job under
  (upload/uploader.py upload_job: job_result.id). Terminal escapes are taken out first: a harbor
  (or a FORCE_COLOR, a wrapper) that colours its output, or makes the URL a link, prints the
  same line.
- hub-check: what the Hub holds under each job id the submission names, against the built tree.
  The Hub never deletes a trial uploaded under a job id, and `harbor upload` skips a trial id it
  already holds: a trial of the job that is not in the tree (a raw job dir uploaded once, by
  `harbor run --upload`, `harbor upload jobs/<job>`, or a make submit before a later mop-up) would
  be counted by the board, which counts every trial of a submitted job. Refused, naming each
  extra trial and the way out. It reads the Hub with harbor's own client, the one `harbor upload`
  decides with (harbor/upload/db_client.py UploadDB: get_job, list_trials_for_job), under the
  same credential. A Hub that cannot be read refuses too: nothing is submitted unchecked.
- metadata-check: metadata.yaml against the board's own schema, when harbor exposes it: the
  leaderboard's metadata_schema (a JSON Schema), read with harbor's own client, as `harbor hub
  leaderboard show ... --json` prints it (harbor/hub/leaderboards.py LeaderboardClient.get, the
  leaderboard-read API), checked with the JSON Schema validator the schema names (jsonschema, as
  harbor/cli/config_validation.py checks its configs). When the board cannot be read, or has no
  schema, against the fields the leaderboard documents (submission.py's Metadata). Says which.
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
import uuid
from pathlib import Path

import click

from tools import safe_read
from tools.hub import submission_meta
from tools.results import tally_jobs
from tools.results.report_load import fail

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
    """The <agent>__<model> dir tools/hub/submission.py builds for these settings."""
    meta = submission_meta.resolve_metadata(**{k: v for k, v in settings.items() if k not in ("dataset_repo", "version", "dataset")})
    version = settings["version"] or submission_meta.version_of(settings["dataset_repo"])
    return submission_meta.submission_dir(out, version, meta)


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


def refuse_shared_job_id(job_dirs: list[Path], done: str) -> None:
    """Refuse two job dirs of one job id (their result.json's id, which harbor upload puts the job's
    trials under), before anything goes up. harbor gives a new job its own id (uuid4) and a resumed
    one keeps it (harbor/job.py), so two dirs of one id are a job and a copy of it. Both would go up
    under that one id, and the Hub never deletes a trial uploaded under a job id: the id is spoiled
    for good. The Hub check cannot see it coming, since neither is on the Hub yet. A result.json
    that cannot be read is left to make submission, which judges every job dir's files."""
    seen: dict[str, Path] = {}
    for job_dir in job_dirs:
        try:
            value = safe_read.read_json_object(job_dir / "result.json").get("id")
        except (OSError, safe_read.Unreadable):
            continue
        if not isinstance(value, str) or not value:
            continue
        first = seen.setdefault(value.lower(), job_dir)
        if first != job_dir:
            fail(f"job dirs {safe_read.printable(str(first))} and {safe_read.printable(str(job_dir))} hold one job "
                 f"id, {safe_read.printable(value.lower())} (their result.json), so harbor upload would put both "
                 "under that one job on Harbor Hub, which never deletes a trial uploaded under a job id. harbor gives "
                 "each job its own id, so one is a copy of the other: move the copy out of the run's jobs dir and "
                 f"run make submit again; {done}")


@cli.command("plan")
@click.option("--out", required=True, type=click.Path(path_type=Path))
@click.option("--jobs-dir", required=True, type=click.Path(path_type=Path))
@click.option("--job-name", required=True)
@click.option("--built", is_flag=True, help="List the job dirs of the built tree, not of the run.")
@submission_meta.settings_options
def plan_cmd(out, jobs_dir, job_name, built, **settings):
    """The submission dir, then its job dirs: NUL-separated."""
    dest = submission_dest(out, settings)
    try:
        run_jobs = [d for d in tally_jobs.run_job_dirs(jobs_dir, job_name) if not d.is_symlink()]
    except tally_jobs.TallyError as e:
        fail(str(e))
    if built:
        jobs = built_job_dirs(dest, [d.name for d in run_jobs])
        refuse_shared_job_id(jobs, "nothing was uploaded")
    else:
        # The run's own job dirs: make submit asks this before it builds the tree or takes the lock.
        refuse_shared_job_id(run_jobs, "nothing was built, uploaded or written")
        jobs = [dest / d.name for d in run_jobs]
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
        # Its last MiB: harbor prints the "View at" line when the upload is done.
        text = safe_read.read_regular(log, safe_read.LOG_TAIL_CAP, "harbor upload's output",
                                      tail=True).decode("utf-8", errors="replace")
    except FileNotFoundError:
        fail(f"cannot read harbor upload's output {safe_read.printable(str(log))}: it is not there")
    except (OSError, safe_read.Unreadable) as e:
        fail(f"cannot read harbor upload's output {safe_read.printable(str(log))}: {e}")
    lines = without_terminal_escapes(text).splitlines()
    ids = [m["id"].lower() for line in lines if (m := VIEW_LINE.match(line.strip()))]
    if not ids:
        fail(f"harbor upload printed no 'View at <url>/<job id>' line for {job_dir} (its output: {log})")
    try:
        recorded = str(safe_read.read_json_object(job_dir / "result.json").get("id", "")).lower()
    except (OSError, safe_read.Unreadable) as e:
        fail(f"cannot read the job id from {safe_read.printable(str(job_dir))}/result.json: {e}")
    if ids[-1] != recorded:
        fail(f"harbor upload printed job id {ids[-1]} for {job_dir}, but its result.json says {recorded}")
    click.echo(ids[-1])


def tree_job(job_dir: Path) -> tuple[str, dict[str, str]]:
    """(the job's id, {trial id: trial dir name}) of a job dir of the built tree, from its result.json files."""
    def read_id(path: Path) -> str:
        try:
            value = safe_read.read_json_object(path).get("id")
        except (OSError, safe_read.Unreadable) as e:
            fail(f"cannot read the id in {path}: {e}")
        if not isinstance(value, str) or not value:
            fail(f"{path} holds no id: not a result.json harbor wrote")
        return value.lower()

    trials, _, _ = safe_read.trial_dir_entries(str(job_dir))
    return read_id(job_dir / "result.json"), {read_id(Path(t) / "result.json"): os.path.basename(t)
                                               for t in trials if os.path.lexists(os.path.join(t, "result.json"))}


def hub_trials(job_id: str) -> list[dict] | None:
    """The trial rows the Hub holds under job_id (id, trial_name, ...), by harbor's own client; None when
    the Hub has no such job (or does not show it to this credential: Supabase says both alike)."""
    import asyncio
    from uuid import UUID

    from harbor.upload.db_client import UploadDB

    async def read() -> list[dict] | None:
        db = UploadDB()
        if await db.get_job(UUID(job_id)) is None:
            return None
        return await db.list_trials_for_job(UUID(job_id))
    return asyncio.run(read())


def extra_trials(job_dir: Path) -> tuple[str, int, int | None, list[str]]:
    """(job id, trials in the tree, trials on the Hub or None, the Hub's trials the tree does not hold)."""
    job_id, local = tree_job(job_dir)
    try:
        remote = hub_trials(job_id)
    except Exception as e:  # noqa: BLE001  (any failure to read the Hub refuses, in one line)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        fail(f"cannot read what Harbor Hub holds under job {job_id} ({job_dir.name}): {safe_read.clip(first, 300)}; nothing "
             f"is submitted until it can be checked (the credential, the network), then run make submit again")
    if remote is None:
        return job_id, len(local), None, []
    extra = sorted(f"{safe_read.printable(str(r.get('trial_name')))} ({safe_read.printable(str(r.get('id')))})"
                   for r in remote if str(r.get("id", "")).lower() not in local)
    return job_id, len(local), len(remote), extra


@cli.command("hub-check")
@click.option("--run", required=True, help="The run's name, for the advice.")
@click.argument("job_dirs", nargs=-1, required=True, type=click.Path(file_okay=False, path_type=Path))
def hub_check_cmd(run: str, job_dirs: tuple[Path, ...]) -> None:
    """Refuse when the Hub holds a trial under a job id of the tree that the tree does not hold."""
    spoiled = []
    for job_dir in job_dirs:
        job_id, held, on_hub, extra = extra_trials(job_dir)
        if on_hub is None:
            click.echo(f"submit: Harbor Hub has no job {job_id} ({job_dir.name}) yet", err=True)
        elif not extra:
            click.echo(f"submit: Harbor Hub holds {on_hub} trial(s) under job {job_id} ({job_dir.name}), every one "
                       f"of the tree's {held}", err=True)
        else:
            shown = ", ".join(extra[:10]) + (f" (+{len(extra) - 10} more)" if len(extra) > 10 else "")
            spoiled.append(f"job {job_id} ({job_dir.name}) holds {len(extra)} trial(s) on Harbor Hub that the "
                           f"submission does not: {shown}")
    if spoiled:
        fail("; ".join(spoiled) + ". The Hub never deletes a trial uploaded under a job id, and the board counts "
             "every trial of a submitted job, so these would count against the run (an errored or re-rolled trial "
             "uploaded from a raw job dir). The way out is a fresh job id: re-upload the curated job under a new "
             "job (a job dir with a job id and trial ids the Hub has never held), or delete the job on the Hub "
             f"first (harbor hub job delete <job id>). Nothing was submitted for run {run} (docs/submission.md §4)")


# metadata.yaml's fields as the leaderboard documents them (tools/hub/submission.py metadata_yaml writes these).
DOCUMENTED_FIELDS = ("agent_url", "agent_display_name", "agent_org_display_name", "models")
DOCUMENTED_MODEL_FIELDS = ("model_name", "model_provider", "model_display_name", "model_org_display_name")


def board_ref(ref: str) -> dict[str, str]:
    """HUB_LEADERBOARD as harbor reads a leaderboard reference (harbor 0.26.0, cli/hub_leaderboards.py
    _parse_ref): a UUID, else an org/package/name slug, the package's registry slug and the board's
    name. A package alone names no board (LeaderboardClient.get would ask for one without a name)."""
    try:
        return {"leaderboard_id": str(uuid.UUID(ref))}
    except ValueError:
        pass
    parts = ref.split("/")
    if len(parts) == 3 and all(parts):
        return {"package": f"{parts[0]}/{parts[1]}", "name": parts[2]}
    raise click.ClickException(f"HUB_LEADERBOARD={safe_read.clip(ref, 200)} names no leaderboard: harbor finds one by "
                               "its UUID or an org/package/name slug (terminal-bench/terminal-bench-2-1/main)")


def board_schema(leaderboard: str) -> tuple[dict | None, str]:
    """(the leaderboard's metadata_schema, or None, and where that answer comes from)."""
    import asyncio

    from harbor.hub.leaderboards import LeaderboardClient

    selector = board_ref(leaderboard)
    try:
        board = asyncio.run(LeaderboardClient().get(**selector))
    except Exception as e:  # noqa: BLE001  (the board unread: the documented fields decide)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return None, f"the leaderboard {leaderboard} could not be read ({safe_read.clip(first, 200)})"
    if not board.metadata_schema:
        return None, f"the leaderboard {leaderboard} publishes no metadata_schema"
    return board.metadata_schema, f"the leaderboard {leaderboard}'s metadata_schema (harbor hub leaderboard show)"


def documented_problems(meta: object) -> list[str]:
    """metadata.yaml against the fields the leaderboard documents: each present, a non-empty string."""
    if not isinstance(meta, dict):
        return ["it is not a mapping of the documented fields"]
    problems = [f"{k} is missing or empty" for k in DOCUMENTED_FIELDS[:3]
                if not isinstance(meta.get(k), str) or not meta[k].strip()]
    models = meta.get("models")
    if not isinstance(models, list) or not models:
        problems.append("models is not a list of at least one model")
    else:
        problems += [f"models[{i}].{k} is missing or empty" for i, m in enumerate(models) for k in DOCUMENTED_MODEL_FIELDS
                     if not isinstance(m, dict) or not isinstance(m.get(k), str) or not m[k].strip()]
    problems += [f"{k} is not a documented field" for k in meta if k not in DOCUMENTED_FIELDS]
    return problems


def schema_problems(meta: object, schema: dict) -> list[str]:
    """metadata.yaml against a JSON Schema, with the validator its $schema names (jsonschema's default else)."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    cls = validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as e:
        return [f"the board's schema itself is not a valid JSON Schema ({safe_read.clip(e.message, 200)})"]
    return [f"{'/'.join(map(str, e.absolute_path)) or '(the file)'}: {safe_read.clip(e.message, 200)}"
            for e in sorted(cls(schema).iter_errors(meta), key=lambda e: list(map(str, e.absolute_path)))]


@cli.command("metadata-check")
@click.option("--leaderboard", required=True)
@click.option("--metadata", "metadata_path", required=True, type=click.Path(dir_okay=False, path_type=Path))
def metadata_check_cmd(leaderboard: str, metadata_path: Path) -> None:
    """Check metadata.yaml against the board's schema when it can be read, else the documented fields."""
    import yaml

    try:
        meta = yaml.safe_load(safe_read.read_regular(metadata_path, 1 << 20, "a metadata.yaml").decode("utf-8"))
    except (OSError, safe_read.Unreadable, UnicodeDecodeError, yaml.YAMLError) as e:
        fail(f"cannot read {metadata_path}: {safe_read.clip(str(e), 200)}")
    schema, source = board_schema(leaderboard)
    if schema is None:
        problems, against = documented_problems(meta), f"the fields the leaderboard documents ({source})"
    else:
        problems, against = schema_problems(meta, schema), source
    if problems:
        fail(f"{metadata_path} does not meet {against}: " + "; ".join(problems[:10])
             + (f" (+{len(problems) - 10} more)" if len(problems) > 10 else "")
             + ". Set the run's metadata settings (AGENT_DISPLAY_NAME, AGENT_URL, MODEL_DISPLAY_NAME, ... in its run "
               "file) and run make submit again; nothing was uploaded")
    click.echo(f"submit: {metadata_path.name} meets {against}", err=True)


def write_json_atomically(path: Path, data: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        safe_read.write_atomic(path, json.dumps(data, indent=2) + "\n")
    except OSError as e:
        fail(safe_read.write_error(path, e))


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
