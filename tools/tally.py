#!/usr/bin/env python3
"""tally: the real per-task outcome of a harbor benchmark run, across every job dir and attempt.

Harbor's end-of-run table is not the answer (docs/reference-runs.md §3, §7): a run spans
the first job (or its shards), its resume passes, standalone retry jobs after a server relaunch,
and jobs that landed under an unexpected `jobs/<job-name>/`. env/outcome-policy.yaml (the file
mop-up reads too) decides what each trial means: passed, failed, errored (infra),
unclassified, or unfinished. A task has k attempt slots (k: the first job's n_attempts, or
--attempts), filled by its latest k *settled* trials (tools/results/slots.py: every trial but an
infra error, an attempt harbor retried in the run, an unfinished or an unreadable one); with
k = 1 the latest settled trial counts, else the latest infra error, else the task is unfinished.
The library is tools/results/tally_core.py (the report), over tools/results/tally_jobs.py (the job dirs),
tools/results/tally_trials.py (reading result.json) and tools/results/tally_policy.py (the outcome policy); this
file is its command line and renders the tables.

Usage:
    tally.py tally [JOB_DIR...] [--jobs-dir D --job-name N] [--model M] [--policy FILE] [--verdicts FILE]
                   [--timeouts-unscored] [--run-name LABEL] [--attempts K] [--all] [--json] [--markdown FILE]
    tally.py retry-targets --jobs-dir D --job-name N [--model M] [--policy FILE] [--verdicts FILE] [--json]
    tally.py job-dirs --jobs-dir D --job-name N [--model M] [--next-retry]
    tally.py policy infra-types [--policy FILE]
    tally.py policy retry-include [--policy FILE]
    tally.py policy check [--policy FILE]

Job dirs of a run (tools/results/tally_jobs.py, shared with mop-up):
    <jobs-dir>/<job-name>, a sharded run's <jobs-dir>/<job-name>-shard-<i>,
    <jobs-dir>/<job-name>-retry-<N>, and the same under <jobs-dir>/jobs/ (harbor's default
    --jobs-dir nests), plus every JOB_DIR given.
    Only `<job>/<trial>/result.json` is read; nothing below a trial dir is walked. A job dir
    found by name whose config.json names another job, or (with --model, the run's MODEL)
    records another model, is another run's: refused (exit 1), never counted.

Accounting (always printed): "timeouts-scored" (default) counts AgentTimeoutError trials
as scored (a reward < 1 or no reward is a failure); "timeouts-unscored"
(--timeouts-unscored) counts every one of them as an unscored error, as the reference's
Run 1 table did.

Text (k > 1): the headline (the leaderboard's resolution rate, its interval, the provisional and
final-error notes), the outcome table, infra errors by side and one line naming the other
figures; --all (make tally ALL=1) prints those too (render_text). k = 1 prints the reference's
table and its pass rate excluding infra errors either way. The --markdown file holds every figure.

Exit codes:
    0  the tally was produced (warnings, errored or unclassified tasks included)
    1  bad input that prevents a tally: missing jobs dir or job dir, no job dir found for
       the run, an invalid policy or verdicts file (the message names the file and the fix)
    2  usage error (unknown option, missing argument)
    3  the run is empty: its job dirs hold no trial dirs yet (the report still prints)

JSON (`tally --json`): run, accounting, policy, verdicts, job_dirs, tasks, passed, failed,
errored, unclassified, unfinished, scored, pass_rate (passed/scored in [0,1], null when
scored == 0), errored_breakdown {infra, final, timeout, verdict} (final: infra errors of the
final errors), max_task_retries, final_errors [task], exceptions {type: n} and
exceptions_all_trials, infra_by_side {sandbox, server, interrupted} (every infra-errored
attempt, by env/outcome-policy.yaml's infra.server_types and infra.interrupted_types), tokens
{input, cache, output} and tokens_all_trials (input includes
cache, as harbor counts it; over the counted trial per task / over every finished trial),
trials_without_tokens, agent_seconds and agent_seconds_all_trials, trial_dirs,
retried_in_run (the attempts harbor retried inside a job, kept under <jobs-dir>/.retried/<job>/:
each is one of the trials, an infra error that never fills a slot), warnings [str],
unreadable [{path, error}], per_task [{task, outcome, rule, reason, reward,
exception_type, exception_message, finished_at, trial_dir, job_dir, settled, infra, attempts,
computed_outcome, verdict, infra_streak, final_error, open_slots, trials: [{trial_dir, job_dir,
finished_at, reward, exception_type, outcome, rule, retried, settled, infra}]}] sorted by task.
The slot rule is decided here once, and every other verb reads it from these fields: `settled`
(bool): the trial fills a slot (finished, not an infra error, not an attempt harbor retried in
the run); `infra` (bool): a finished trial that is not settled (an infra error, or a retried
attempt); an unfinished or unreadable trial is neither. On the task row they are those of the
trial the row shows (its latest settled, else its latest finished; none: both false).
`open_slots` (int): the slots mop-up would still fill, k minus the settled trials in them, 0 for
a task with a verdict or a final error (with k = 1: 1 for an infra error or an unfinished task). A trial's outcome may also be
"unreadable" (result.json empty, truncated, not a TrialResult, not a regular file, over
the 64 MiB cap). exception_message is capped at 500 characters (classification reads the
whole message first); undecodable bytes of a file name are shown as \\xNN. A symlinked
trial dir is never followed: it is listed under unreadable, not counted.
With k > 1: passed ... unfinished, scored, pass_rate and errored_breakdown count attempt
slots (tasks x k), per_task[].outcome is the task's latest settled trial, and there are
also n_attempts, slots, rerolled_trials, mean_task_pass_fraction,
tasks_with_scored_attempts, pass_at_k {k, value, tasks}, replicates [{replicate, passed,
scored, pass_rate}], replicate_mean, replicate_stderr, bootstrap95 {low, high, statistic,
resamples, seed, method}, leaderboard {value, passed, trials, tasks, k, open_slots,
provisional, replicate_rates, replicate_stderr, interval95 {low, high, method}, bootstrap95}
(the board's resolution rate, shown first), and per task slots [outcome x k], slots_text, slot_trials,
passed_attempts, scored_attempts, pass_fraction, rerolled (tools/results/slots.py defines each).
A task whose infra error survived --max-task-retries attempts in a row per open slot
(infra_streak: its finished trials since its latest settled one that ended in an infra error) is
a final error (final_error): errored, not an open slot of the headline, and no retry target.
`retry-targets --json`: {run, policy, infra_types, tasks: [per_task entries plus
`missing`, the attempts mop-up runs: the tasks with open_slots, missing = open_slots (with k = 1
the tasks whose outcome is errored (infra) or unfinished); manual verdicts and final errors
excluded]}.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from tools import fmt
from tools import safe_read
from tools.results import slots
from tools.results import tally_core
from tools.results import tally_jobs
from tools.results import tally_policy
from tools.results import tally_options


# --------------------------------------------------------------------------- rendering


def _accounting_line(report: dict) -> str:
    if report["accounting"] == tally_core.ACCOUNTING_UNSCORED:
        return ("Accounting: timeouts-unscored (--timeouts-unscored): every AgentTimeoutError trial is an "
                "unscored error, as in the reference's Run 1 table.")
    return ("Accounting: timeouts-scored (default): AgentTimeoutError trials are scored, "
            "a timeout without a passing reward is a failure.")


def _excluded(report: dict) -> str:
    """What the pass rate leaves out: infra errors, and timeouts too when they are unscored."""
    return "infra errors and timeouts" if report["accounting"] == tally_core.ACCOUNTING_UNSCORED else "infra errors"


def _rate_line(report: dict) -> str:
    what = _excluded(report)
    unit = " scored attempts; not the headline" if report.get("n_attempts", 1) > 1 else ""
    if report["pass_rate"] is None:
        return f"Pass rate excluding {what}: {fmt.UNKNOWN} (0 scored {'attempts' if unit else 'tasks'})"
    return (f"Pass rate excluding {what}: {fmt.percent(report['pass_rate'], 2)} "
            f"({report['passed']}/{report['scored']}{unit})")


def _shown_path(path: str) -> str:
    """A path as a person reads it: relative to the current directory when it is under it."""
    rel = os.path.relpath(os.path.abspath(path))
    return path if rel.startswith("..") else rel


def summary_table(report: dict) -> list[str]:
    n = report["tasks"]
    b = report["errored_breakdown"]
    err_parts = [f"{b['infra']} infra"]
    if b.get("final"):
        err_parts.append(f"{b['final']} final: MAX_TASK_RETRIES={report['max_task_retries']} attempts in a row were infra")
    if report["accounting"] == tally_core.ACCOUNTING_UNSCORED:
        err_parts.append(f"{b['timeout']} AgentTimeoutError")
    if b["verdict"]:
        err_parts.append(f"{b['verdict']} by verdict")
    failed = "Failed (scored, reward < {:g}{})".format(
        report["pass_threshold"], ", incl. AgentTimeoutError" if report["accounting"] == tally_core.ACCOUNTING_SCORED else "")
    rows = [
        ("Passed", report["passed"]),
        (failed, report["failed"]),
        (f"Errored (unscored: {', '.join(err_parts)})", report["errored"]),
        ("Unclassified (no policy rule)", report["unclassified"]),
        ("Unfinished (no finished trial)", report["unfinished"]),
    ]
    header = f"| Outcome | Count | % of {n} |"
    if report.get("n_attempts", 1) > 1:
        header, n = slots.summary_header(report), report["slots"]
        rows[-1] = ("Unfinished (no finished trial for the slot)", report["unfinished"])
    lines = [header, "|---|---|---|"]
    lines += [f"| {label} | {count} | {fmt.share(count, n)} |" for label, count in rows]
    return lines


def render_text(report: dict, every_figure: bool = False, markdown: str | None = None) -> str:
    """The tally as text. k = 1: the reference's table and its pass rate excluding infra errors.
    k > 1, by default: the headline and what explains it (its provisional note and final errors,
    the outcome table, infra errors by side) and one line naming the other figures; every_figure
    (make tally ALL=1) adds them: the bootstrap interval, the board's pass@j and trial duration,
    the pass rate excluding infra errors, the mean task pass fraction, the replicates, pass@k.
    `markdown`: the breakdown file written beside it, which always holds every figure."""
    out = [f"Run: {report['run']}", _accounting_line(report), f"Policy: {report['policy']}"]
    if report["verdicts"]:
        out.append(f"Verdicts: {report['verdicts']}")
    out.append(f"Job dirs ({len(report['job_dirs'])}):")
    out += [f"  {d}" for d in report["job_dirs"]]
    out.append(f"Trial dirs read: {report['trial_dirs']}")
    k = report.get("n_attempts", 1)
    if k > 1:
        out.append(f"Attempts per task (k): {k}; each task's latest {k} settled trials fill its slots")
    out.append("")
    every = k == 1 or every_figure
    if k > 1 and report["tasks"]:
        out += slots.headline_lines(report, others=every) + [""]
    if report["tasks"] == 0:
        out.append("EMPTY RUN: the job dirs hold no trial dirs yet (nothing has started, or the wrong --jobs-dir).")
        out.append("")
    out += summary_table(report) + [""]
    if every:
        out += [_rate_line(report), ""]
    out += _sides_block(report)
    if k > 1 and every:
        out += slots.stats_lines(report) + [""]
    elif k > 1 and report["tasks"]:
        out += [slots.hidden_figures_line(report, _excluded(report), markdown and _shown_path(markdown)), ""]
    out += _exceptions_block(report)
    out += _tokens_block(report)
    if k > 1:
        out += slots.per_task_lines(report)
    for outcome in ("unclassified", "errored", "unfinished") if k == 1 else ():
        rows = [e for e in report["per_task"] if e["outcome"] == outcome]
        if rows:
            out.append(f"{outcome.capitalize()} tasks ({len(rows)}):")
            out += [f"  {e['task']}: {e['exception_type'] or '-'}: {e['reason']}"
                    + (f" (a final error: its last {e['infra_streak']} attempt(s) in a row ended in an infra error)"
                       if e["final_error"] else "")
                    for e in rows]
            if outcome == "errored":
                out.append(f"  The sandbox job behind each, its last log lines: make sandboxes RUN={report['run']}")
            out.append("")
    out += slots.final_errors_lines(report)
    if report["warnings"]:
        out.append(f"Warnings ({len(report['warnings'])}):")
        out += [f"  - {w}" for w in report["warnings"]]
    return "\n".join(out).rstrip() + "\n"


def side_text(sides: dict) -> str:
    """"sandbox 3, model server 1, interrupted 1": the infra errors of each side."""
    return (f"sandbox {sides.get('sandbox', 0)}, model server {sides.get('server', 0)}, "
            f"interrupted {sides.get('interrupted', 0)}")


def _sides_block(report: dict) -> list[str]:
    """Which side every infra-errored attempt is on: what strains with load (the sandboxes), what the
    model server did, what a stop left (env/outcome-policy.yaml, infra.server_types and
    infra.interrupted_types)."""
    sides = report.get("infra_by_side") or {}
    if not any(sides.values()):
        return []
    return [f"Infra errors by side (every attempt): {side_text(sides)} (env/outcome-policy.yaml: "
            f"infra.server_types are the model server's, infra.interrupted_types a stop's, the rest the "
            f"sandbox's)", ""]


def _exceptions_block(report: dict) -> list[str]:
    if not report["exceptions_all_trials"]:
        return ["Exceptions: none", ""]
    counted = "Tasks (counted trial)" if report.get("n_attempts", 1) == 1 else "Counted trials (slots)"
    lines = [f"| Exception | {counted} | All attempts |", "|---|---|---|"]
    for etype, n in report["exceptions_all_trials"].items():
        lines.append(f"| {etype} | {report['exceptions'].get(etype, 0)} | {n} |")
    return lines + [""]


def _tokens_block(report: dict) -> list[str]:
    t, a = report["tokens"], report["tokens_all_trials"]
    counted = "Counted trial per task" if report.get("n_attempts", 1) == 1 else "Counted trials (slots)"
    lines = [
        f"| Usage | {counted} | All attempts |",
        "|---|---|---|",
        f"| Input tokens (incl. cache) | {t['input']:,} | {a['input']:,} |",
        f"| Cache tokens | {t['cache']:,} | {a['cache']:,} |",
        f"| Output tokens | {t['output']:,} | {a['output']:,} |",
        f"| Agent time | {fmt.elapsed(report['agent_seconds'])} | {fmt.elapsed(report['agent_seconds_all_trials'])} |",
    ]
    if report["trials_without_tokens"]:
        lines.append(f"\n{report['trials_without_tokens']} finished trial(s) recorded no (or partial) token counts.")
    return lines + [""]


def _rel(path: str | None, report: dict) -> str:
    """`<job dir name>/<trial dir name>`: stable across machines, unlike the absolute path."""
    if not path:
        return "-"
    return f"{os.path.basename(os.path.dirname(path))}/{os.path.basename(path)}"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ") if text is not None else "-"


def render_markdown(report: dict) -> str:
    """The per-task breakdown file, like the reference's `<job>/README.md`."""
    out = [f"# {report['run']}: per-task outcomes", ""]
    out += [_accounting_line(report), ""]
    out.append(f"Policy: `{os.path.relpath(report['policy'], tally_policy.REPO_ROOT) if report['policy'].startswith(str(tally_policy.REPO_ROOT)) else report['policy']}`"
               + (f"; verdicts: `{report['verdicts']}`" if report["verdicts"] else ""))
    out.append("")
    out.append("Job dirs: " + ", ".join(f"`{os.path.basename(d)}`" for d in report["job_dirs"]))
    out.append("")
    if report.get("n_attempts", 1) > 1 and report["tasks"]:
        first, *rest = slots.headline_lines(report)
        out += [f"**{first}**", *[f"- {line.strip()}" for line in rest], ""]
    out += summary_table(report)
    out += ["", f"**{_rate_line(report)}**", ""]
    if report.get("n_attempts", 1) > 1:
        title, *figures = slots.stats_lines(report)
        out += [title, "", *[f"- {line}" for line in figures], ""]
    out += ["## Exceptions", ""]
    out += _exceptions_block(report)
    out += ["## Usage", ""]
    out += _tokens_block(report)
    if report.get("n_attempts", 1) > 1:
        out += slots.markdown_rows(report, lambda d: _rel(d, report), _cell)
    else:
        out += ["## Per task", "",
                "| Task | Outcome | Reward | Exception | Attempts | Finished (UTC) | Trial | Why |",
                "|---|---|---|---|---|---|---|---|"]
        for e in report["per_task"]:
            outcome = e["outcome"] + (" (verdict)" if e["verdict"] else "")
            reward = "-" if e["reward"] is None else f"{e['reward']:g}"
            out.append(f"| {_cell(e['task'])} | {outcome} | {reward} | {_cell(e['exception_type'])} | {e['attempts']} | "
                       f"{_cell(e['finished_at'])} | {_cell(_rel(e['trial_dir'], report))} | {_cell(e['reason'])} |")
    final = slots.final_errors_lines(report)
    if final:
        out += ["", "## Final errors", "", *final[:-1]]
    if report["warnings"]:
        # Paths relative to the jobs dir: the file is read beside the job dirs, and a
        # breakdown written on the orchestrator should read the same on a laptop.
        roots = sorted({os.path.dirname(d) + os.sep for d in report["job_dirs"]}, key=len, reverse=True)
        out += ["", "## Warnings", ""]
        for w in report["warnings"]:
            for root in roots:
                w = w.replace(root, "")
            out.append(f"- {_cell(w)}")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- CLI


def _policy_option(f):
    return click.option("--policy", "policy_path", default=str(tally_policy.DEFAULT_POLICY), show_default=True,
                        type=click.Path(dir_okay=False), help="The outcome policy (shared with mop-up).")(f)


def _fail(e: tally_jobs.TallyError):
    raise click.ClickException(str(e))


@click.group(help=__doc__.split("\n\n")[0], epilog="Exit codes: 0 tallied, 1 bad input, 2 usage, 3 empty run.")
def cli():
    pass


@cli.command("tally")
@click.argument("job_dirs", nargs=-1, type=click.Path(file_okay=False))
@click.option("--jobs-dir", help="Where harbor wrote the run's job dirs (harbor's --jobs-dir).")
@click.option("--job-name", help="The run's job name; its shard jobs are <job-name>-shard-<i>, its retry jobs "
                                 "<job-name>-retry-<N>.")
@_policy_option
@click.option("--verdicts", "verdicts_path", type=click.Path(dir_okay=False),
              help="YAML of manual per-task verdicts: verdicts: {task: {outcome, reason}}.")
@click.option("--timeouts-unscored", is_flag=True,
              help="Count AgentTimeoutError trials as unscored errors (the reference's Run 1 table).")
@click.option("--model", help="The run's MODEL: a job dir of the run's name whose config.json records another "
              "model (or names another job) is refused, not counted.")
@click.option("--run-name", help="Label for the report (default: the job name).")
@click.option("--attempts", type=click.IntRange(min=1),
              help="k, the attempt slots per task (default: the first job's n_attempts, harbor's -k).")
@tally_options.max_task_retries_option
@click.option("--all", "every_figure", is_flag=True,
              help="k > 1: print every figure (pass@k, the replicates, the bootstrap intervals, the pass rate "
                   "excluding infra errors), not only the headline and what explains it (make tally ALL=1).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (fields in the module docstring).")
@click.option("--markdown", "markdown_path", type=click.Path(dir_okay=False),
              help="Also write the per-task breakdown, with every figure, as Markdown to this file.")
def tally_cmd(job_dirs, jobs_dir, job_name, policy_path, verdicts_path, timeouts_unscored, model, run_name,
              attempts, max_task_retries, every_figure, as_json, markdown_path):
    """Tally a run: the latest finished trial of every task, classified by the policy.

    Exit codes: 0 tallied, 1 bad input (missing dir, invalid policy/verdicts), 2 usage, 3 empty run.
    """
    try:
        policy = tally_policy.load_policy(policy_path)
        verdicts = tally_policy.load_verdicts(verdicts_path)
        dirs = tally_jobs.resolve_job_dirs(job_dirs, jobs_dir, job_name, model)
    except tally_jobs.TallyError as e:
        _fail(e)
    report = tally_core.tally(dirs, policy, verdicts, timeouts_unscored, run=run_name or job_name, verdicts_path=verdicts_path,
                   attempts=attempts, max_task_retries=max_task_retries)
    if markdown_path:
        try:
            safe_read.write_atomic(markdown_path, render_markdown(report))
        except OSError as e:
            raise click.ClickException(safe_read.write_error(markdown_path, e))
        _echo(f"tally: wrote {markdown_path}", err=True)
    _echo(json.dumps(report, indent=2) if as_json else render_text(report, every_figure, markdown_path), nl=as_json)
    if report["tasks"] == 0:
        _echo(f"tally: empty run: no trial dirs in {', '.join(report['job_dirs'])}", err=True)
        sys.exit(tally_core.EXIT_EMPTY)


def _echo(text: str, nl: bool = True, err: bool = False) -> None:
    # As bytes: a stray undecodable name must print escaped, never stop the output midway.
    click.echo(safe_read.shown(text).encode("utf-8", "backslashreplace"), nl=nl, err=err)


@cli.command("retry-targets")
@click.argument("job_dirs", nargs=-1, type=click.Path(file_okay=False))
@click.option("--jobs-dir", help="Where harbor wrote the run's job dirs.")
@click.option("--job-name", help="The run's job name (its shard jobs <job-name>-shard-<i> and retry jobs "
                                 "<job-name>-retry-<N> are the run's too).")
@_policy_option
@click.option("--verdicts", "verdicts_path", type=click.Path(dir_okay=False),
              help="Manual verdicts; a task with a verdict is never retried.")
@click.option("--model", help="The run's MODEL: a job dir of the run's name whose config.json records another "
              "model (or names another job) is refused, not counted.")
@tally_options.max_task_retries_option
@click.option("--json", "as_json", is_flag=True, help="Print {run, policy, infra_types, tasks: [...]}.")
def retry_targets_cmd(job_dirs, jobs_dir, job_name, policy_path, verdicts_path, model, max_task_retries, as_json):
    """What mop-up retries: tasks whose latest trial errored (infra) or that never finished (k > 1: open slots).

    Text output: one task per line, `task<TAB>outcome<TAB>exception type<TAB>trial dirs (comma-separated)`;
    with k > 1 `task<TAB>slots<TAB>latest infra error<TAB>unsettled trial dirs<TAB>attempts missing`.
    Always computed with the default accounting: a timeout is the model's result, never retried.
    """
    try:
        policy = tally_policy.load_policy(policy_path)
        verdicts = tally_policy.load_verdicts(verdicts_path)
        dirs = tally_jobs.resolve_job_dirs(job_dirs, jobs_dir, job_name, model)
    except tally_jobs.TallyError as e:
        _fail(e)
    report = tally_core.tally(dirs, policy, verdicts, False, run=job_name, verdicts_path=verdicts_path,
                   max_task_retries=max_task_retries)
    targets = tally_core.retry_targets(report)
    if as_json:
        _echo(json.dumps({"run": report["run"], "policy": policy.path, "infra_types": list(policy.infra_types),
                          "job_dirs": report["job_dirs"], "tasks": targets}, indent=2))
        return
    if report.get("n_attempts", 1) > 1:  # the slots, the latest infra error, its unsettled dirs, the count
        for e in targets:
            open_trials = [t for t in e["trials"] if not t["settled"]]
            errors = [t["exception_type"] for t in open_trials if t["exception_type"]]
            _echo("\t".join([e["task"], e["slots_text"], errors[-1] if errors else "-",
                             ",".join(t["trial_dir"] for t in open_trials) or "-", str(e["missing"])]))
        return
    for e in targets:
        _echo("\t".join([e["task"], e["outcome"], e["exception_type"] or "-",
                         ",".join(t["trial_dir"] for t in e["trials"])]))


@cli.command("job-dirs")
@click.option("--jobs-dir", required=True, help="Where harbor wrote the run's job dirs.")
@click.option("--job-name", required=True, help="The run's job name (its shard jobs <job-name>-shard-<i> and "
              "retry jobs <job-name>-retry-<N> are the run's too).")
@click.option("--next-retry", is_flag=True, help="Print the next unused retry job name instead.")
@click.option("--model", help="The run's MODEL: refuse (exit 1) when a job dir of the run's name is another run's "
              "(its config.json records another model or names another job).")
def job_dirs_cmd(jobs_dir, job_name, next_retry, model):
    """The run's job dirs, one per line (flat layout first, then jobs/); in each, the run's job or its
    shards <job-name>-shard-<i> in shard order, then its retry jobs <job-name>-retry-<N>."""
    try:
        if next_retry:
            _echo(tally_jobs.next_retry_job_name(jobs_dir, job_name))
            return
        dirs = tally_jobs.run_job_dirs(jobs_dir, job_name)
        tally_jobs.refuse_foreign_job_dirs(dirs, model)
        for d in dirs:
            click.echo(os.fsencode(d))  # the exact bytes: scripts use these paths as they are
    except tally_jobs.TallyError as e:
        _fail(e)


@cli.group("policy")
def policy_group():
    """Queries over the outcome policy (one source of truth for tally and mop-up)."""


@policy_group.command("infra-types")
@_policy_option
def infra_types_cmd(policy_path):
    """The infra exception types, one per line (what mop-up may retry)."""
    _echo_policy_names(policy_path, lambda policy: policy.infra_types)


@policy_group.command("retry-include")
@_policy_option
def retry_include_cmd(policy_path):
    """The types harbor may retry inside a run, one per line (make bench's --retry-include, MAX_RETRIES)."""
    _echo_policy_names(policy_path, tally_policy.retry_include)


def _echo_policy_names(policy_path, names_of) -> None:
    """Print names_of(the policy), one per line; an unreadable policy is one line and exit 1."""
    try:
        policy = tally_policy.load_policy(policy_path)
    except tally_jobs.TallyError as e:
        _fail(e)
    for name in names_of(policy):
        click.echo(name)


@policy_group.command("check")
@_policy_option
def check_cmd(policy_path):
    """Validate the policy file; exit 1 with the problem if it is invalid."""
    try:
        policy = tally_policy.load_policy(policy_path)
    except tally_jobs.TallyError as e:
        _fail(e)
    click.echo(f"{policy.path}: OK ({len(policy.infra_types)} infra types, {len(policy.infra_patterns)} infra patterns, "
               f"{len(policy.limit_types)} limit types, pass threshold {policy.pass_threshold:g})")


if __name__ == "__main__":
    cli()
