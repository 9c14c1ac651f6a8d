"""make campaign, and make plan|watch|report|stop CAMPAIGN=…: the command line (scripts/campaign.sh).

A thin layer: each command reads the campaign file (campaign_file), resolves it (campaign_plan),
and hands over to what it does: the dry run's print (campaign_print), the supervisor
(campaign_supervisor), the schedule (campaign_schedule), the verbs over every run (campaign_verbs).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import click

from tools.campaign import campaign_file
from tools.campaign import campaign_plan
from tools.campaign import campaign_print
from tools.campaign import campaign_state

PATHS = [click.option("--name", required=True, help="the campaign: campaigns/<name>.env"),
         click.option("--repo", required=True, type=click.Path(file_okay=False, path_type=Path)),
         click.option("--state-root", required=True, type=click.Path(file_okay=False, path_type=Path))]


def paths(f):
    for option in reversed(PATHS):
        f = option(f)
    return f


def dry_run_wanted() -> bool:
    return os.environ.get("DRY_RUN", "0") not in ("", "0")


def read_file(repo: Path, name: str) -> campaign_file.Campaign:
    """The campaign file alone (stop and report need no run resolved); a refusal is the CLI's error."""
    try:
        return campaign_file.read(repo, name)
    except campaign_file.CampaignError as e:
        raise click.ClickException(str(e)) from None


def read(repo: Path, name: str, recorded: dict | None = None) -> campaign_plan.Resolved:
    campaign = read_file(repo, name)
    try:
        return campaign_plan.resolve(repo, campaign, dict(os.environ), recorded)
    except campaign_file.CampaignError as e:
        raise click.ClickException(str(e)) from None


@click.group()
def cli():
    """A campaign of runs: served once per distinct server, benched within one budget and one ceiling."""


@cli.command("run")
@paths
def run_cmd(name, repo, state_root):
    """make campaign CAMPAIGN=<name> [DRY_RUN=1]."""
    repo = repo.resolve()
    if dry_run_wanted():
        resolved = read(repo, name)
        for line in campaign_print.dry_run(repo, resolved, dict(os.environ), state_root):
            click.echo(line)
        return
    from tools.campaign import campaign_supervisor  # noqa: PLC0415
    try:
        code = campaign_supervisor.main(repo, state_root, name, dict(os.environ), read)
    except (campaign_state.StateError, campaign_file.CampaignError) as e:
        raise click.ClickException(str(e)) from None
    except KeyboardInterrupt:  # before the supervisor started anything (its own handler takes over then)
        click.echo("campaign: interrupted before anything was launched", err=True)
        code = 130
    sys.exit(code)


@cli.command("plan")
@paths
def plan_cmd(name, repo, state_root):
    """make plan CAMPAIGN=<name>: the cheapest order and overlap of servers and benches by DEADLINE."""
    from tools.campaign import campaign_schedule  # noqa: PLC0415
    repo = repo.resolve()
    resolved = read(repo, name)
    given = os.environ.get("DEADLINE", "")
    if given and ("CLI_SETTINGS" not in os.environ or "DEADLINE" in os.environ["CLI_SETTINGS"].split()):
        try:  # DEADLINE on make's command line wins over the campaign file's, as for make plan RUN=…
            deadline = campaign_file.check_value("DEADLINE", given, "the command line")
        except campaign_file.CampaignError as e:
            raise click.ClickException(str(e)) from None
        resolved.campaign = dataclasses.replace(resolved.campaign, deadline_secs=deadline)
    for line in campaign_schedule.plan_lines(repo, resolved, dict(os.environ)):
        click.echo(line)


@cli.command("watch")
@paths
def watch_cmd(name, repo, state_root):
    """make watch CAMPAIGN=<name>: the campaign's record, then make watch ONCE=1 of each run."""
    from tools.campaign import campaign_verbs  # noqa: PLC0415
    sys.exit(campaign_verbs.watch(repo.resolve(), state_root, name, dict(os.environ)))


@cli.command("report")
@paths
def report_cmd(name, repo, state_root):
    """make report CAMPAIGN=<name>: the comparison and the report of the campaign's runs."""
    from tools.campaign import campaign_verbs  # noqa: PLC0415
    sys.exit(campaign_verbs.report(repo.resolve(), state_root, read_file(repo.resolve(), name), dict(os.environ)))


@cli.command("stop")
@paths
def stop_cmd(name, repo, state_root):
    """make stop CAMPAIGN=<name>: the campaign's supervisor, then every server of it (safe to repeat)."""
    from tools.campaign import campaign_verbs  # noqa: PLC0415
    sys.exit(campaign_verbs.stop(repo.resolve(), state_root, read_file(repo.resolve(), name), dict(os.environ)))


if __name__ == "__main__":
    cli()
