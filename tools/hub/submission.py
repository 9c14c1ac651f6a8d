#!/usr/bin/env python3
"""submission: a run's job dirs laid out as a Terminal-Bench leaderboard submission.

Usage:
  python -m tools.hub.submission build --jobs-dir D --job-name N --out OUT --version V
      --agent-display-name A --agent-org-display-name O --agent-url U
      --model-name M --model-provider P --model-display-name MD --model-org-display-name MO
      [--run RUN] [--where local|hf] [--dry-run]

The layout and metadata.yaml are the leaderboard's own, from the README of its Hub dataset
(https://huggingface.co/datasets/harborframework/terminal-bench-2-leaderboard, "Submission
Structure" and "Required: metadata.yaml"):

    submissions/terminal-bench/<version>/<agent>__<model>/
        metadata.yaml         agent_url, agent_display_name, agent_org_display_name,
                              models: [{model_name, model_provider, model_display_name,
                                        model_org_display_name}]
        <job-folder>/         every job dir of the run: its own files and its counted trial dirs

The job dirs are the run's, found as the tally finds them (tools/results/tally_jobs.py run_job_dirs:
the job, its retry jobs, both layouts). The leaderboard's resolution rate is passed over every
trial submitted (an errored one counts as not passed), so each job dir is copied with only the
trial dirs the tally counts: per task its k slot-filling trials, the latest k settled ones
(tools/results/slots.py fill over the tally's own per-task grouping; k is the first job's n_attempts).
Every other trial dir is left out and named with why: infra-errored, unfinished (no
result.json), unreadable, re-rolled (an older settled attempt), shadowed (an infra error after
the slots filled), as harbor's own --max-retries deletes a retried attempt. A job's own files
(config.json, result.json, lock.json, job.log) are copied; symlinks are copied as links, never
followed; a link or hard link that could lead out of the run is left out and named; nothing in
the run's own dirs is moved or changed.

Refused, with nothing written and the make command that fixes it named: a task with an open
slot (fewer than k settled trials: make mopup); a passing trial without a valid ATIF
agent/trajectory.json (harbor's Trajectory model; make pull PULL=all for a remote run); a
timeout multiplier or a timeout or resource override in the job's config.json or any submitted
trial's (check-submission's rules); tasks of the dataset the run never ran (the dataset's task
list from the lock.json of a job that ran it unfiltered; without one, coverage is only noted);
a credential in any file (tools/hub/credentials.py). Those refusals and check-submission's rules on
the trials it would hold make the run's verdict (tools/hub/submission_verdict.py check_run), printed
word for word as make check-submission RUN=<run> prints it, by a dry run and by a refusal. A built
tree is checked again with check-submission, every dir in it (tools/hub/report_submission.py
check_submission, which also wants k >= 5), and that verdict printed: the tree stays either way, so a
rejected one can be looked at.

Exit codes: 0 the submission is built and meets the rules (or --dry-run printed its plan, a
refusal included); 1 refused (nothing written), built and not meeting the rules (the verdict
says why), or a user error, named.

The parts: submission_meta.py (metadata.yaml and the destination), submission_select.py (which
trial dirs fill the slots), submission_rules.py (what is refused, and the fix), submission_verdict.py
(what the submission holds and leaves out, and the verdict on it), submission_plan.py
(the plan, decided before anything is written, and the build). This file is the command line and
what it prints.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tools.results import report_output
from tools.hub import report_submission
from tools.results import slots
from tools.results import tally_core
from tools.results import tally_policy
from tools.hub.submission_meta import resolve_metadata, settings_options, version_of
from tools.hub.submission_plan import Plan, build, plan_submission
from tools.hub.submission_verdict import report_lines, verdict_label
from tools.hub.report_submission import plural


def refusal_line(plan: Plan) -> str:
    trials = "trial" if plan.k == 1 else "trials"
    return (f"refused, nothing was written: the leaderboard's resolution rate is passed over every trial "
            f"submitted, so each task must hold exactly its {plan.k} slot-filling {trials}, as the rules want them")


DRY_RUN_HINT = ("make submission RUN={run} DRY_RUN=1 lists every trial dir it would submit or leave out, "
                "and why")


def trial_count(plan: Plan) -> str:
    """The tree's trial dirs as counted, said against tasks × k only where they are that many."""
    n, slots = len(plan.trials), plan.tasks * plan.k
    if n == slots:
        return f"{plural(n, 'trial dir')}: {plural(plan.tasks, 'task')} × {plural(plan.k, 'attempt')}"
    return (f"{plural(n, 'trial dir')} of {plural(plan.tasks, 'task')} ({slots - n} of their {plan.tasks} × {plan.k} = "
            f"{slots} attempt slots {'holds' if slots - n == 1 else 'hold'} no trial)")


def verdict_text(plan: Plan, label: str) -> str:
    """The run's verdict, word for word what make check-submission RUN=<run> prints."""
    return report_submission.submission_markdown(label, plan.check.verdict)


def dry_run_text(plan: Plan, label: str) -> str:
    lines = [f"would create {plan.dest}/",
             f"would write {plan.dest / 'metadata.yaml'}:"]
    lines += [f"    {line}" for line in plan.metadata.splitlines()]
    for src, dst in plan.copies:
        n = sum(1 for t in plan.trials if t.parent == src)
        lines.append(f"would copy {src}/ to {dst}/ ({plural(n, 'trial dir')} and the job's own files)")
    lines.append(f"would submit {trial_count(plan)}")
    lines += report_lines(plan.check)
    lines += verdict_text(plan, label).splitlines()
    if plan.problems:
        lines.append("would be " + refusal_line(plan).replace("nothing was written", "writing nothing"))
    elif not plan.check.verdict["ok"]:
        lines.append("would be built, then rejected by check-submission for the problems above (the tree stays, "
                     "so it can be looked at)")
    else:
        lines.append(f"would build it, then check the tree: python -m tools.report.report check-submission "
                     f"{plan.dest}/<job> ...")
    return "\n".join(lines) + "\n"



@click.group(help=__doc__.split("\n\n")[0])
def cli() -> None:
    pass


@cli.command("build")
@click.option("--jobs-dir", required=True, type=click.Path(path_type=Path))
@click.option("--job-name", required=True)
@click.option("--out", required=True, type=click.Path(path_type=Path),
              help="The submission goes under OUT/submissions/terminal-bench/<version>/.")
@settings_options
@click.option("--run", default=None, help="The run's name, for the advice (runs/<run>.env, make mopup RUN=...).")
@click.option("--where", default="local", help="Where harbor ran (WHERE): hf's trajectories come with make pull.")
@click.option("--shard-plan", type=click.Path(path_type=Path), default=None,
              help="A sharded run's split (state/<run>/shards.json): the dataset's task list when no job ran it whole.")
@click.option("--dry-run", is_flag=True, help="Print what would be written, and write nothing.")
@click.option("--refusal-exit", is_flag=True,
              help="With --dry-run: exit 1 when the run would be refused or its tree rejected (make submit's dry run).")
@click.option("--rebuild", is_flag=True,
              help="With --dry-run: the destination is make submit's own tree, removed before a build.")
def build_cmd(jobs_dir, job_name, out, run, where, shard_plan, dry_run, refusal_exit, rebuild, **settings):
    """Build the submission tree of a run, then check it against the leaderboard rules."""
    meta = resolve_metadata(**{k: v for k, v in settings.items() if k not in ("dataset_repo", "version", "dataset")})
    version = settings["version"] or version_of(settings["dataset_repo"])
    plan = plan_submission(jobs_dir, job_name, out, version, meta, run=run, where=where, shard_plan=shard_plan,
                           model=settings["model"] or None, dataset=settings["dataset"], rebuild=dry_run and rebuild)
    label = verdict_label(run, job_name)
    if dry_run:
        # A dry run prints its plan, a refusal included, and exits 0: it was asked what would happen.
        # make submit's asks whether the submission would go through: a refusal is its exit code.
        report_output.echo(dry_run_text(plan, label), nl=False)
        if refusal_exit and not plan.check.verdict["ok"]:
            sys.exit(1)
        return
    if plan.problems:
        # The verdict on stdout, as make check-submission prints it; why nothing was written on stderr.
        report_output.echo(verdict_text(plan, label), nl=False)
        for line in [refusal_line(plan), plan.check.coverage, DRY_RUN_HINT.format(run=run or "<run>")]:
            report_output.echo(f"submission: {line}", err=True)
        sys.exit(1)
    build(plan)
    report_output.echo(f"submission: built {plan.dest}/ (metadata.yaml, {plural(len(plan.copies), 'job dir')}, {trial_count(plan)})",
                       err=True)
    # The board's own figure over what the tree holds (tools/results/slots.py leaderboard_figure): first.
    held = tally_core.tally([str(dst) for _, dst in plan.copies], tally_policy.load_policy(), run=run)
    if held.get("n_attempts", 1) > 1:
        for line in slots.headline_lines(held):
            report_output.echo(f"submission: {line.strip()}", err=True)
    for line in report_lines(plan.check):
        report_output.echo(f"submission: {line}", err=True)
    verdict = report_submission.check_submission([dst for _, dst in plan.copies], run=run)
    report_output.echo(report_submission.submission_markdown(f"submission {plan.dest}", verdict), nl=False)
    if not verdict["ok"]:
        report_output.echo("submission: the tree is built, so you can look at it; fix the problems above "
                           "and build it again before you open a pull request", err=True)
        sys.exit(1)


if __name__ == "__main__":
    cli()
