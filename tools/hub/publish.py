#!/usr/bin/env python3
"""publish: a run's result on the Hub, as an eval result on the model and a write-up in a bucket.

Usage:
  python -m tools.hub.publish publish --jobs-dir D --job-name N --run RUN --model-repo REPO
      --dataset-repo URL [--eval-dataset ID] [--task-id ID] --agent A --k K
      [--bucket NS/NAME] [--submitter USER] [--timeouts-unscored] [--dry-run]

Two steps, in this order, each through huggingface_hub's HfApi (the token is HF_TOKEN or the
saved `hf auth login`, read by huggingface_hub itself: never printed, never in an argv):

1. The run's README (written here, from the tally) and every job dir of the run (the job and
   its retry jobs, as tools/tally.py run_job_dirs finds them, files as harbor wrote them) go
   to the run's bucket: `HfApi.batch_bucket_files(bucket, add=[...])`, job dirs at the
   bucket's root as `make bench WHERE=hf` writes them (so `make pull` reads them back).
2. The result goes to the model repo as a pull request adding one file of the Hub's
   eval-results format: `HfApi.create_commit(model_repo, [CommitOperationAdd(...)],
   create_pr=True)`. The format is the Hub's "Evaluation Results" page,
   https://huggingface.co/docs/hub/eval-results ("Adding Evaluation Results"): a YAML list of
   results in `.eval_results/*.yaml`, each with `dataset: {id, task_id, revision}`, `value`,
   `date`, `source: {url, name, user}` and `notes`, built with huggingface_hub's own
   `EvalResultEntry` and `eval_result_entries_to_yaml` (huggingface_hub/_eval_results.py), so
   the file is what the Hub's parser reads back. `revision` is the dataset commit the run is
   pinned to (DATASET_REF); `task_id` is the benchmark's, as named in its dataset's `eval.yaml`
   (EVAL_TASK_ID). One file per benchmark variant (the Hub's own
   community-evals guidance keeps variants of one benchmark in separate files): here
   `.eval_results/<dataset name>_<agent>.yaml`, e.g. terminal-bench-2.1_terminus-2.yaml.
   Scores of terminal-bench on the Hub are percentages (moonshotai/Kimi-K2-Instruct's
   `.eval_results`: dataset harborframework/terminal-bench-2.0, task_id terminalbench_2,
   value 27.8, notes naming the agent).

The value, in percent: for a k > 1 run, the leaderboard's own figure, its resolution rate
passed / (tasks × k) over the slots (tools/results/slots.py leaderboard_figure), and a real publish is
refused while slots are open (provisional); for a k = 1 run, which the board does not take, the
tally's pass rate, passed / scored. After the pull request, `model_info(model, expand=
["evalResults"])` is read back and the result says whether the Hub lists the entry.
--dry-run prints every file (the YAML and README text, every bucket path) and every call,
and calls nothing: no token is needed for it.

Exit codes: 0 published (or --dry-run printed its plan); 1 a user error or a Hub error, named.
"""

from __future__ import annotations

import datetime as dt
import html
import os
import re
import sys
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import click
import yaml

from tools.hub import credentials
from tools import fmt, hf_client
from tools.results import report_load
from tools.results import report_output
from tools.results import report_stats
from tools import safe_read
from tools.results import tally_jobs

EVAL_RESULTS_DOCS = "https://huggingface.co/docs/hub/eval-results"
TASK_ID_PLACEHOLDER = "<EVAL_TASK_ID>"  # what a dry run shows when EVAL_TASK_ID is empty


# --- the pure part -----------------------------------------------------------------------------


def board_of(tally: dict) -> dict | None:
    """A k > 1 tally's leaderboard figure, recomputed from its slots (tools/results/report_stats.py)."""
    k = tally.get("n_attempts", 1)
    return report_stats.leaderboard_of(tally, k) if k > 1 else None


def score_of(tally: dict) -> float:
    """The published value in percent, 2 decimals: the board's rate at k > 1, else passed / scored."""
    board = board_of(tally)
    rate = board["value"] if board else tally.get("pass_rate")
    if rate is None and not board and tally.get("scored"):
        rate = tally["passed"] / tally["scored"]
    if rate is None:
        report_load.fail(f"run {tally.get('run')}: nothing is scored yet ({tally.get('scored', 0)} scored tasks), "
                         f"so there is no result to publish; make tally shows why")
    return round(100 * float(rate), 2)


def score_text(tally: dict) -> str:
    """What the value is, with its counts, for the notes and the README."""
    board = board_of(tally)
    if board:
        return (f"leaderboard resolution rate = passed / (tasks × k): {board['passed']}/{board['trials']} "
                f"({board['tasks']} tasks × {board['k']})")
    return f"pass rate = passed / scored attempts: {tally['passed']}/{tally['scored']}"


def eval_date(tally: dict) -> str:
    """The run's date: the latest finished_at of the trials the tally counted (YYYY-MM-DD)."""
    stamps = [row.get("finished_at") for row in tally["per_task"] if isinstance(row.get("finished_at"), str)]
    if not stamps:
        report_load.fail(f"run {tally.get('run')}: no finished trial has a finished_at; nothing to date the result by")
    latest = max(dt.datetime.fromisoformat(s.replace("Z", "+00:00")) for s in stamps)
    return latest.date().isoformat()


def dataset_id_of(dataset_repo: str) -> str:
    """A Hub dataset's id from its URL: https://huggingface.co/datasets/ns/name(.git) -> ns/name."""
    m = re.fullmatch(r"https?://[^/]+/datasets/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)(?:\.git)?/*", dataset_repo or "")
    if not m:
        report_load.fail(f"DATASET_REPO {dataset_repo!r} is not a Hub dataset URL: set EVAL_DATASET to the Hub "
                         f"benchmark dataset's id (e.g. harborframework/terminal-bench-2.0)")
    return m[1]


def eval_file_path(dataset_id: str, agent: str) -> str:
    name = f"{dataset_id.rsplit('/', 1)[-1]}_{agent}"
    return f".eval_results/{re.sub(r'[^A-Za-z0-9._-]', '-', name)}.yaml"


def bucket_url(endpoint: str, bucket: str) -> str:
    """A bucket's page, as huggingface_hub parses it (_buckets.py: {endpoint}/buckets/ns/name)."""
    return f"{endpoint.rstrip('/')}/buckets/{bucket}"


def notes_of(tally: dict, agent: str, k: int) -> str:
    return (f"agent: {agent}; k = {k} attempt{'s' if k != 1 else ''} per task; accounting: "
            f"{tally['accounting']} ({score_text(tally)}, {tally['errored']} errored, unscored)")


def eval_entry(tally: dict, *, run: str, dataset_id: str, task_id: str, dataset_revision: str, agent: str, k: int,
               source_url: str, submitter: str = ""):
    """The result as huggingface_hub's own EvalResultEntry."""
    from huggingface_hub import EvalResultEntry

    return EvalResultEntry(dataset_id=dataset_id, task_id=task_id or TASK_ID_PLACEHOLDER, value=score_of(tally),
                           dataset_revision=dataset_revision or None, date=eval_date(tally), source_url=source_url,
                           source_name=f"Terminal-Bench run {run}: job dirs and README", source_user=submitter or None,
                           notes=notes_of(tally, agent, k))


def eval_result_yaml(tally: dict, *, run: str, dataset_id: str, task_id: str, agent: str, k: int, source_url: str,
                     submitter: str = "", dataset_revision: str = "") -> str:
    """The file's text: a comment saying where the format comes from, then one result, as
    huggingface_hub serialises an EvalResultEntry."""
    from huggingface_hub import eval_result_entries_to_yaml

    entry = eval_entry(tally, run=run, dataset_id=dataset_id, task_id=task_id, dataset_revision=dataset_revision,
                       agent=agent, k=k, source_url=source_url, submitter=submitter)
    header = f"# Evaluation result (format: {EVAL_RESULTS_DOCS}). Written by make publish from the tally.\n"
    return header + yaml.safe_dump(eval_result_entries_to_yaml([entry]), sort_keys=False, allow_unicode=True,
                                   width=1000)


def md(text: object) -> str:
    """A setting's or a name's text as literal Markdown, on one line: no link, emphasis, code span,
    table cell or HTML that it did not mean (MODEL once reached the published README as written)."""
    escaped = html.escape(safe_read.printable(str(text)), quote=False)  # &, <, > first: entities stay as typed
    return re.sub(r"([\\`*_{}\[\]()!|~])", r"\\\1", escaped)


def readme_text(tally: dict, *, run: str, model_repo: str, agent: str, k: int, dataset_repo: str,
                job_dirs: list[Path], eval_path: str) -> str:
    """The run's write-up, pushed to the bucket beside its job dirs. Every text from a setting or
    a file name is written through md(); the model's link through a quoted URL."""
    counts = " | ".join(str(tally[o]) for o in ("passed", "failed", "errored", "unclassified", "unfinished"))
    lines = [
        f"# Terminal-Bench run {md(run)}: {md(model_repo)} with {md(agent)}",
        "",
        f"- Model: [{md(model_repo)}](https://huggingface.co/{urllib.parse.quote(model_repo, safe='/')})",
        f"- Agent: {md(agent)}, {k} attempt{'s' if k != 1 else ''} per task",
        f"- Dataset: {md(dataset_repo)}",
        f"- Accounting: {md(tally['accounting'])}",
        f"- Result: **{score_of(tally)}%** ({md(score_text(tally))}), "
        f"dated {eval_date(tally)}; on the model as {md(eval_path)}",
        "",
        "| tasks | passed | failed | errored | unclassified | unfinished |",
        "|---|---|---|---|---|---|",
        f"| {tally['tasks']} | {counts} |",
        "",
        "Job dirs (harbor's own files, as harbor wrote them), at this bucket's root:",
        "",
        *[f"- {md(d.name)}/" for d in job_dirs],
        "",
        f"Reproduce: make reproduce RUN={md(run)}; tally these job dirs: make pull RUN={md(run)} BUCKET=&lt;this "
        f"bucket&gt; then make tally RUN={md(run)}.",
        "",
    ]
    return "\n".join(lines)


@dataclass(frozen=True)
class Plan:
    bucket: str
    bucket_files: list[tuple[str | bytes, str]]  # (local path or bytes, path in the bucket)
    skipped: list[str]                           # what is never uploaded, each with why
    model_repo: str
    eval_path: str
    eval_yaml: str
    readme: str
    commit_message: str
    commit_description: str


def job_files(job_dirs: list[Path]) -> tuple[list[tuple[str, str]], list[str]]:
    """Every regular file of the job dirs as (local path, <job>/<relative path>). What could lead
    out of the run's tree is listed apart, with why, and never followed or read: a symlink (a job
    dir that is one too: os.walk would follow it to ~/.cache/huggingface or another run), a special
    file, and a file with another hard link (its other name may be anywhere, a token file's)."""
    files, skipped = [], []
    for job in job_dirs:
        if os.path.islink(job):
            skipped.append(f"{job} (a symlink, never followed)")
            continue
        for root, dirs, names in os.walk(job):
            skipped += [f"{os.path.join(root, d)} (a symlink, never followed)" for d in dirs
                        if os.path.islink(os.path.join(root, d))]
            dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(root, d)))
            for name in sorted(names):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, job.parent).replace(os.sep, "/")
                st = os.lstat(path)
                if os.path.islink(path):
                    skipped.append(f"{path} (a symlink, never followed)")
                elif not os.path.isfile(path):
                    skipped.append(f"{path} (not a regular file)")
                elif st.st_nlink > 1:
                    skipped.append(f"{path} (a hard link: its other name may be outside the run)")
                else:
                    files.append((path, rel))
    return files, skipped


def plan_publish(tally: dict, job_dirs: list[Path], *, run: str, model_repo: str, dataset_repo: str,
                 eval_dataset: str, task_id: str, agent: str, k: int, bucket: str, submitter: str,
                 endpoint: str, dataset_revision: str = "") -> Plan:
    dataset_id = eval_dataset or dataset_id_of(dataset_repo)
    path = eval_file_path(dataset_id, agent)
    text = eval_result_yaml(tally, run=run, dataset_id=dataset_id, task_id=task_id, agent=agent, k=k,
                            source_url=bucket_url(endpoint, bucket), submitter=submitter,
                            dataset_revision=dataset_revision)
    readme = readme_text(tally, run=run, model_repo=model_repo, agent=agent, k=k, dataset_repo=dataset_repo,
                         job_dirs=job_dirs, eval_path=path)
    files, skipped = job_files(job_dirs)
    message = f"Add Terminal-Bench result ({dataset_id}, {agent}): {score_of(tally)}"
    description = (f"{notes_of(tally, agent, k)}.\n\nJob dirs and README: {bucket_url(endpoint, bucket)}\n"
                   f"Format: {EVAL_RESULTS_DOCS}\n")
    return Plan(bucket=bucket, bucket_files=[(readme.encode("utf-8"), "README.md"), *files], skipped=skipped,
                model_repo=model_repo, eval_path=path, eval_yaml=text, readme=readme,
                commit_message=message, commit_description=description)


def dry_run_text(plan: Plan) -> str:
    out = [f"would push {len(plan.bucket_files)} files to bucket {plan.bucket}:",
           f"  HfApi().batch_bucket_files({plan.bucket!r}, add=[(<bytes>, 'README.md'), "
           f"... {len(plan.bucket_files) - 1} job files])",
           "  README.md:"]
    out += [f"    {line}" for line in plan.readme.splitlines()]
    out += [f"  {dest}" for _, dest in plan.bucket_files[1:]]
    out += [f"  not pushed: {p}" for p in plan.skipped]
    out += [f"would open a pull request on model {plan.model_repo}:",
            f"  HfApi().create_commit({plan.model_repo!r}, [CommitOperationAdd({plan.eval_path!r}, <the YAML>)], "
            f"commit_message={plan.commit_message!r}, commit_description=<below>, create_pr=True)",
            f"  {plan.eval_path}:"]
    out += [f"    {line}" for line in plan.eval_yaml.splitlines()]
    out += ["  commit description:"] + [f"    {line}" for line in plan.commit_description.splitlines()]
    return "\n".join(out) + "\n"


# --- the calls -----------------------------------------------------------------------------------


def publish(plan: Plan) -> str:
    """Push the bucket files, then open the pull request; its URL."""
    from huggingface_hub import CommitOperationAdd
    from huggingface_hub.errors import HfHubHTTPError

    api = hf_client.api()
    try:
        api.batch_bucket_files(plan.bucket, add=plan.bucket_files)
    except (HfHubHTTPError, OSError, RuntimeError) as e:
        report_load.fail(f"pushing to bucket {plan.bucket} failed: {first_line(e)}. No pull request was opened. "
                         f"Does the bucket exist (hf buckets create {plan.bucket}), and may your token write to it?")
    report_output.echo(f"publish: pushed README.md and {len(plan.bucket_files) - 1} job files to bucket {plan.bucket}", err=True)
    try:
        info = api.create_commit(plan.model_repo, [CommitOperationAdd(plan.eval_path, plan.eval_yaml.encode("utf-8"))],
                                 commit_message=plan.commit_message, commit_description=plan.commit_description,
                                 create_pr=True)
    except (HfHubHTTPError, OSError) as e:
        report_load.fail(f"opening the pull request on {plan.model_repo} failed: {first_line(e)}. "
                         f"The bucket {plan.bucket} already holds the run's files")
    return info.pr_url or info.commit_url


def read_back(model_repo: str, dataset_id: str, task_id: str, value: float) -> str:
    """Whether the Hub parsed the result: model_info(..., expand=["evalResults"]) lists an entry of
    this dataset and task with this value. Said either way, never a failure: the pull request is open."""
    from huggingface_hub.errors import HfHubHTTPError

    try:
        info = hf_client.api().model_info(model_repo, expand=["evalResults"])
    except (HfHubHTTPError, OSError, ValueError) as e:
        return f"could not read the model's eval results back ({first_line(e)}); look at the pull request"
    entries = info.eval_results or []
    if any(e.dataset_id == dataset_id and e.task_id == task_id and e.value == value for e in entries):
        return (f"the Hub parsed it: model_info(expand=['evalResults']) lists {dataset_id} / {task_id} = {value} "
                f"({len(entries)} eval result(s) on {model_repo})")
    return (f"the Hub does not list {dataset_id} / {task_id} = {value} among {model_repo}'s {len(entries)} eval "
            f"result(s) yet: it reads the file once parsed; check the pull request's page")


def first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]


# --- CLI -------------------------------------------------------------------------------------------


@click.group(help=__doc__.split("\n\n")[0])
def cli() -> None:
    pass


@cli.command("publish")
@click.option("--jobs-dir", required=True, type=click.Path(path_type=Path))
@click.option("--job-name", required=True)
@click.option("--run", required=True)
@click.option("--model-repo", required=True, help="The model repo the pull request goes to (EVAL_MODEL_REPO, else MODEL).")
@click.option("--dataset-repo", default="", help="DATASET_REPO: the Hub dataset id is read from it.")
@click.option("--eval-dataset", default="", help="EVAL_DATASET: the benchmark's Hub dataset id (wins).")
@click.option("--task-id", default="", help="EVAL_TASK_ID: the task id in the benchmark's eval.yaml.")
@click.option("--dataset-revision", default="", help="DATASET_REF: the dataset commit the run is pinned to.")
@click.option("--agent", required=True)
@click.option("--model", default=None, help="MODEL, the model the run served: a job dir of the run's name that "
              "records another model is another run's, refused.")
@click.option("--k", "k", type=click.IntRange(min=1), default=1, show_default=True, help="Attempts per task (N_ATTEMPTS).")
@click.option("--bucket", default="", help="NS/NAME of the run's bucket (BUCKET).")
@click.option("--submitter", default="", help="SUBMITTER: source.user.")
@click.option("--timeouts-unscored", is_flag=True, help="Tally with agent timeouts unscored.")
@click.option("--dry-run", is_flag=True, help="Print every file and call; call nothing.")
def publish_cmd(jobs_dir, job_name, run, model_repo, dataset_repo, eval_dataset, task_id, dataset_revision, agent, model,
                k, bucket, submitter, timeouts_unscored, dry_run):
    """Push RUN's README and job dirs to its bucket, then open the eval-results pull request."""
    from huggingface_hub import constants

    if not dry_run:
        if not bucket:
            report_load.fail("BUCKET is empty: the run's README and job dirs go to a bucket (BUCKET=ns/name)")
        if not task_id:
            report_load.fail("EVAL_TASK_ID is empty: the Hub's eval-results format needs dataset.task_id, the task's "
                             f"id in the benchmark dataset's eval.yaml ({EVAL_RESULTS_DOCS}); e.g. EVAL_TASK_ID=terminalbench_2 "
                             f"for harborframework/terminal-bench-2.0")
        if not hf_client.token():
            report_load.fail("no HF token: set HF_TOKEN or run 'hf auth login' (make publish writes to the Hub)")
    if dataset_revision and not re.fullmatch(r"[0-9a-f]{40}", dataset_revision):
        report_load.fail(f"DATASET_REF {safe_read.printable(dataset_revision)[:80]!r} is not a 40-hex commit: make pin RUN={run} "
                         f"writes the one the run's jobs ran")
    tally = report_load.run_tally(Path(jobs_dir).resolve(), job_name, timeouts_unscored, f"run {run}", model=model)
    board = board_of(tally)
    if board and board["provisional"]:
        # The board's figure counts an open slot as not passed: publishing now would understate it.
        message = (f"run {run}: {board['open_slots']} of {board['trials']} attempt slots are open, so its "
                   f"leaderboard figure ({fmt.percent(board['value'], 2)}) is provisional: fill them first, make mopup RUN={run}")
        if not dry_run:
            report_load.fail(message)
        report_output.echo(f"publish: note: {message}", err=True)
    job_dirs = [Path(d) for d in tally.get("job_dirs") or []] or tally_jobs.run_job_dirs(jobs_dir, job_name)
    plan = plan_publish(tally, job_dirs, run=run, model_repo=model_repo, dataset_repo=dataset_repo,
                        eval_dataset=eval_dataset, task_id=task_id, agent=agent, k=k,
                        bucket=bucket or "<BUCKET>", submitter=submitter, endpoint=constants.ENDPOINT,
                        dataset_revision=dataset_revision)
    # Nothing leaves with a credential in it: every file, the README and the YAML, dry run or not.
    findings = credentials.scan_files([p for p, _ in plan.bucket_files if isinstance(p, str)])
    secrets = credentials.machine_secrets()
    findings += credentials.scan_bytes("README.md (generated)", plan.readme.encode("utf-8"), secrets)
    findings += credentials.scan_bytes(f"{plan.eval_path} (generated)", plan.eval_yaml.encode("utf-8"), secrets)
    if findings:
        report_load.fail(credentials.refusal(findings, "make publish"))
    if dry_run:
        if not bucket:
            report_output.echo("publish: note: BUCKET is empty; <BUCKET> stands in for it (a real publish needs it)", err=True)
        if not task_id:
            report_output.echo(f"publish: note: EVAL_TASK_ID is empty, so the YAML shows {TASK_ID_PLACEHOLDER} for "
                               "dataset.task_id (a real publish needs it)", err=True)
        report_output.echo(dry_run_text(plan), nl=False)
        return
    url = publish(plan)
    report_output.echo(f"publish: opened {url} ({plan.eval_path} on {plan.model_repo}: {score_of(tally)})")
    report_output.echo(f"publish: {read_back(plan.model_repo, eval_dataset or dataset_id_of(dataset_repo), task_id, score_of(tally))}",
                       err=True)


if __name__ == "__main__":
    sys.exit(cli())
