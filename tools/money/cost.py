#!/usr/bin/env python3
"""cost: what a run cost, the sandbox behind each infra error, and the HF Jobs price list.

  prices     the price per hour of every flavor, and where it came from: `hf jobs hardware
             --json`, cached in <state-root>/prices.json for --max-age seconds; when the Hub
             cannot be asked, the last cache (however old), else env/flavor-prices.tsv.
             make status and make jobs read it (--json).
  cost       every job a run launched (from state/<run>/manifest.jsonl, and by its run=<run>
             label) and every sandbox one of its trials proves its own (docs/cost.md §5: the job
             id a trial's result.json names, else the sandbox created while the trial set up its
             environment, with the image and flavor its trial.log names, one per sandbox the
             trial created), each with flavor, running time, price and cost; totals per role,
             GPU hours, wall-clock, dollars per scored attempt, per passed attempt and per passed
             task (k > 1: a task with at least one passed attempt; k = 1 prints one, the counts
             being the same), and idle GPU time (a server running while no trial of the run ran). The sandboxes created while
             the run ran that none of its trials proves its own are another's: not counted, and
             how many is said.
  sandboxes  for a task (or every infra-errored task of the tally), the sandbox job(s) its
             trials ran in, their stage and the last lines of their logs; a sandbox that shut
             itself down for idleness (`sbx-server: idle for 601917ms, shutting down`) is named,
             with the fix (SANDBOX_IDLE_TIMEOUT).
  ceiling    MAX_COST: exit 75 (CEILING_EXIT) when the run's spend, as `cost` measures it, would
             pass the ceiling before the next check; 0 otherwise (tools/money/cost_ceiling.py).

Every fact about a job comes from the real `hf` CLI (huggingface_hub 2.4.0) with a pinned
output format (`--json`; logs are raw lines), HF_HUB_DISABLE_UPDATE_CHECK=1, and each call
bounded by --call-timeout seconds. The facts relied on (docs/hf-jobs.md §2):
  - `hf jobs hardware --json`: a list of {"name", "accelerator" ("" for CPU), "cost/hour"
    ("$5.00", or "free")}, from GET /api/jobs/hardware;
  - `hf jobs inspect --json NS/ID`: a one-element list; `hf jobs ps -a --json`: a list. Both
    hold `durations` {scheduling_secs, running_secs, total_secs} (computed by HF, also while a
    job runs), `created_at`, `started_at`, `finished_at`, `flavor`, `labels`, `expose` (ports);
    inspect's `status` is {stage, …}, ps's a plain string;
  - a sandbox of harbor's hf-sandbox environment is huggingface_hub's `Sandbox.create`, a job
    labelled hf-sandbox=1, hf-sandbox-mode=dedicated and a random hf-sandbox-nonce (no run or
    task label), with the task's image, exposing port 49983;
  - a job id is a plain name; an answer that gives it as a number is read as the same name.

A bundled example run (RUN=example-*) never calls HF: its job facts were recorded once as the
exact output of each call (examples/state/<run>/hf-recorded.json) and are read from there by
the same code.

Exit codes: 0 done, 1 a user-facing error (the message says what and how to fix), 2 usage.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from tools.money import cost_ceiling
from tools.money import cost_hf
from tools.money import cost_jobs
from tools.money import cost_prices
from tools.money import cost_sandbox_logs
from tools.money import cost_sandboxes
from tools import fmt, hf_client
from tools.results import tally_jobs


def make_hf(recorded: str | None, dry_run: bool, call_timeout: float | None):
    if recorded:
        return cost_hf.RecordedHf.load(Path(recorded))
    return cost_hf.LiveHf(timeout=hf_client.call_timeout(call_timeout), dry_run=dry_run)


common = [
    click.option("--recorded", type=click.Path(dir_okay=False), help="Answer hf calls from this recording (bundled examples)."),
    click.option("--dry-run", is_flag=True, help="Print the hf calls; run none, write nothing."),
    click.option("--call-timeout", type=float, default=None,
                 help="Seconds each hf call may take (default: the setting HF_CALL_TIMEOUT, else 60)."),
    click.option("--json", "as_json", is_flag=True, help="Print JSON (fields: docs/cost.md §4)."),
]


def with_common(f):
    for opt in reversed(common):
        f = opt(f)
    return f


run_options = [
    click.option("--run", required=True), click.option("--state-dir", required=True, type=click.Path(file_okay=False)),
    click.option("--jobs-dir", required=True), click.option("--job-name", required=True),
    click.option("--verdicts", type=click.Path(dir_okay=False)), click.option("--namespace", default=""),
    click.option("--model", default="", help="The run's MODEL: a job dir of the run's name that records another is refused."),
]


def with_run(f):
    for opt in reversed(run_options):
        f = opt(f)
    return f


@click.group(epilog="Exit codes: 0 done, 1 a user-facing error, 2 usage.")
def cli() -> None:
    """cost: what a run cost, the sandbox behind an infra error, and the HF Jobs price list."""


@cli.command()
@with_common
@click.option("--cache", type=click.Path(dir_okay=False), help="The price cache (state/prices.json).")
@click.option("--max-age", type=float, default=86400, show_default=True, help="Seconds a cached price list is reused.")
def prices(recorded, dry_run, call_timeout, as_json, cache, max_age):
    """The price per hour of every flavor, and where it came from."""
    hf = make_hf(recorded, dry_run, call_timeout)
    p = cost_prices.load_prices(hf, Path(cache) if cache else None, max_age)
    if dry_run:
        return
    if as_json:
        click.echo(json.dumps(p.as_json(), indent=1))
    else:
        click.echo(f"Prices: {p.label}")
        for k, v in sorted(p.per_hour.items()):
            click.echo(f"  {k:<18} ${v:.2f}/h")


def _prices_for(hf, dry_run: bool, cache: str | None, max_age: float) -> cost_prices.Prices:
    return cost_prices.load_prices(hf, Path(cache) if cache and not dry_run else None, max_age)


@cli.command()
@with_common
@with_run
@click.option("--project-label", default="terminal-bench-harness", show_default=True)
@click.option("--instance", default="", help="the run's instance: jobs labelled with another are not its own")
@click.option("--cache", type=click.Path(dir_okay=False))
@click.option("--max-age", type=float, default=86400, show_default=True)
def cost(recorded, dry_run, call_timeout, as_json, run, state_dir, jobs_dir, job_name, verdicts, namespace, model,
         project_label, instance, cache, max_age):
    """Every job the run launched and every sandbox its trials used, with what each cost."""
    hf = make_hf(recorded, dry_run, call_timeout)
    try:
        report = cost_jobs.run_tally(jobs_dir, job_name, run, verdicts, model or None)
    except tally_jobs.TallyError as e:
        raise cost_hf.CostError(str(e)) from None
    prices_ = _prices_for(hf, dry_run, cache, max_age)
    doc = cost_jobs.cost_report(hf, prices_, run=run, project_label=project_label, namespace=namespace or None,
                                manifest=Path(state_dir) / "manifest.jsonl", report=report, instance=instance or None)
    if dry_run:
        return
    click.echo(json.dumps(doc, indent=1) if as_json else cost_jobs.render_cost(doc), nl=as_json)


@cli.command()
@with_common
@with_run
@click.option("--task", default="")
@click.option("--tail", type=click.IntRange(1, 10000), default=20, show_default=True)
@click.option("--idle-timeout", default="", help="The run's SANDBOX_IDLE_TIMEOUT, for the advice.")
def sandboxes(recorded, dry_run, call_timeout, as_json, run, state_dir, jobs_dir, job_name, verdicts, namespace,
              model, task, tail, idle_timeout):
    """The sandbox job(s) behind a task's trials (default: every infra-errored task)."""
    hf = make_hf(recorded, dry_run, call_timeout)
    try:
        report = cost_jobs.run_tally(jobs_dir, job_name, run, verdicts, model or None)
    except tally_jobs.TallyError as e:
        raise cost_hf.CostError(str(e)) from None
    doc = cost_sandbox_logs.sandboxes_report(hf, run=run, namespace=namespace or None,
                                             manifest=Path(state_dir) / "manifest.jsonl", report=report,
                                             task=task or None, tail=tail, idle_timeout=idle_timeout)
    if dry_run:
        return
    click.echo(json.dumps(doc, indent=1) if as_json else cost_sandbox_logs.render_sandboxes(doc), nl=as_json)


def ceiling_option(value: str) -> float:
    try:
        return cost_ceiling.parse_ceiling(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


@cli.command()
@click.option("--max-cost", required=True, help="The ceiling, in US dollars.")
@click.option("--poll", type=click.FloatRange(min=0.05), default=60.0, show_default=True,
              help="Seconds between checks while harbor runs (the projection's horizon).")
@click.option("--scope", "scope_json", required=True, help="JSON: the run to measure (Scope's fields).")
@click.option("--json", "as_json", is_flag=True)
def ceiling(max_cost, poll, scope_json, as_json):
    """MAX_COST: exit 75 with the message when the run is at its ceiling; 0 otherwise."""
    usd_ceiling = ceiling_option(max_cost)
    try:
        s = cost_ceiling.scope_of(scope_json)
    except (ValueError, TypeError, KeyError) as e:
        raise click.BadParameter(f"not a run's scope: {e}", param_hint="--scope") from None
    try:
        spend = cost_ceiling.measure(cost_hf.LiveHf(timeout=s.call_timeout), s)
    except (cost_hf.HfFailed, OSError) as e:
        click.echo(f"note: MAX_COST={max_cost} cannot be checked now ({e}); harbor's watch checks it again "
                   f"every {poll:g} s.", err=True)
        return
    if not spend.priced_flavors:
        # Every price failed its check (the cache, the Hub's answer, env/flavor-prices.tsv): a
        # ceiling measured with none would read $0 for ever. Refused, rather than pretending.
        raise click.ClickException(f"MAX_COST={max_cost} cannot be enforced: no valid price is known "
                                   f"({spend.prices_label}). Nothing was launched. Fix env/flavor-prices.tsv or "
                                   f"let hf jobs hardware answer, or unset MAX_COST.")
    if as_json:
        click.echo(json.dumps({**spend.__dict__, "ceiling_usd": usd_ceiling, "projected_usd": spend.projected(poll),
                               "would_pass": cost_ceiling.would_pass(spend, usd_ceiling, poll)}))
    if spend.unknown:
        click.echo(cost_ceiling.unknown_note(spend), err=True)
    if spend.unattributed:
        click.echo(f"note: {cost_sandboxes.unattributed_note(spend.unattributed, ' in MAX_COST')}", err=True)
    if cost_ceiling.would_pass(spend, usd_ceiling, poll):
        click.echo(cost_ceiling.reached_message(s.run, spend, usd_ceiling, poll, "Nothing was launched."), err=True)
        sys.exit(cost_ceiling.CEILING_EXIT)
    click.echo(f"MAX_COST: run '{s.run}' has spent {fmt.dollars(spend.spent_usd)} of its {fmt.dollars(usd_ceiling)} ceiling "
               f"(spending {fmt.dollars(spend.burn_usd_per_hour)}/h now; checked every {poll:g} s while harbor runs).",
               err=True)


if __name__ == "__main__":
    cli()
