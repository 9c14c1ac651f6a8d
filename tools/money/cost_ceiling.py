"""cost_ceiling: MAX_COST, a spending ceiling per run, measured with make cost's own figures.

What a run has spent is what `make cost` says it cost: every job of its manifest and every job
labelled run=<run> (`hf jobs inspect`/`ps`, durations.running_secs, what HF bills, running jobs
up to now), and the sandboxes its trials prove their own (cost_sandboxes.attribute, docs/cost.md §5),
priced from `hf jobs hardware` (cost_prices.load_prices: the cache, the Hub, the offline TSV). While
harbor runs, a trial it started that has no result.json yet claims the sandbox created since its
dir was written. A sandbox of another run in the namespace never moves the ceiling: the ones
created while the run ran that no trial of it proves its own are counted nowhere, and said.

The ceiling "would pass" when spent + burn × poll > MAX_COST, where burn is the price per hour
of every job of the run still billing (not in a terminal stage): the next check could come too
late, so the stop comes one poll early rather than one poll late.

A job whose flavor has no price, or whose running time HF does not report, and a call to hf
that fails, leave part of the spend unknown. The ceiling is then enforced on the part that is
known (a lower bound), and the watch says once which part is missing and why: refusing to run
because the Hub blinked would stop a run that is nowhere near its ceiling.

    python -m tools.money.cost ceiling --max-cost USD --poll S --scope JSON

(its command line, in tools/money/cost.py) exits 0 when the run may go on (or the ceiling cannot be
measured: a note says why), and 75 (CEILING_EXIT) when the run is already at its ceiling, with
the message saying what was spent and how to continue. tools/run/harbor_guard.py runs the same
measure every --poll seconds.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import click

from tools.money import cost_hf
from tools.money import cost_jobs
from tools.money import cost_prices
from tools.money import cost_sandboxes
from tools import fmt
from tools.results import tally_jobs

# The exit code of a stop at the ceiling, for bench, mop-up and make reproduce alike (EX_TEMPFAIL:
# nothing is wrong, the run continues once the ceiling is raised). harbor itself exits 0, 1 or 128+N.
CEILING_EXIT = 75
EVENT = "cost-ceiling"
TERMINAL = {"COMPLETED", "CANCELED", "ERROR", "DELETED"}
USD = re.compile(r"^[0-9]+(\.[0-9]+)?$")


def parse_ceiling(text: str) -> float:
    """MAX_COST as a positive number of US dollars; ValueError naming the fix otherwise."""
    value = (text or "").strip().lstrip("$")
    if not USD.match(value) or float(value) <= 0:
        raise ValueError(f"MAX_COST must be a positive number of US dollars, e.g. MAX_COST=50 or MAX_COST=12.5, "
                         f"got '{text}'")
    return float(value)


@dataclass
class Spend:
    spent_usd: float  # what the priced jobs cost so far
    burn_usd_per_hour: float  # what the jobs still billing cost per hour
    source: str  # where the prices came from: hub | cache | recorded | tsv
    prices_label: str
    unknown: list[str] = field(default_factory=list)  # what is left out of spent_usd, and why
    billing: list[str] = field(default_factory=list)  # the jobs counted in the burn
    priced_flavors: int = 1  # how many flavors have a valid price: 0, and no figure means anything
    unattributed: list[str] = field(default_factory=list)  # sandboxes created meanwhile, not the run's: not counted

    def projected(self, poll_s: float) -> float:
        return self.spent_usd + self.burn_usd_per_hour * poll_s / 3600


def would_pass(spend: Spend, ceiling: float, poll_s: float) -> bool:
    """True when the spend at the next check could be past the ceiling."""
    return spend.projected(poll_s) > ceiling


@dataclass
class Scope:
    """Which run to measure, and how to ask HF about it."""

    run: str
    state_dir: Path
    jobs_dir: str
    job_name: str
    namespace: str | None = None
    project_label: str = "terminal-bench-harness"
    instance: str | None = None  # the run's instance (scripts/lib.sh): another checkout's same-named run is not it
    verdicts: str | None = None
    prices_cache: Path | None = None
    prices_max_age: float = 86400
    call_timeout: float = 60


def measure(hf, scope: Scope, *, running_since: datetime | None = None, now: datetime | None = None) -> Spend:
    """The run's spend now, and what it burns per hour; cost.py's figures, job by job."""
    now = now or fmt.utc_now()
    prices = cost_prices.load_prices(hf, scope.prices_cache, scope.prices_max_age)
    try:
        report = cost_jobs.run_tally(scope.jobs_dir, scope.job_name, scope.run, scope.verdicts)
    except tally_jobs.TallyError:
        report = {}
    claims = cost_sandboxes.run_claims(report, scope.state_dir, running_since)
    # `now` was taken before the trial dirs were read: a sandbox created since may be of a trial
    # they did not hold yet, so it is not said to be another's (it is counted, or said, next time).
    jobs, problems, others = cost_jobs.collect(hf, run=scope.run, project_label=scope.project_label,
                                               namespace=scope.namespace, manifest=scope.state_dir / "manifest.jsonl",
                                               claims=claims, since=running_since, until=now, instance=scope.instance)
    spent = burn = 0.0
    unknown = [f"hf could not be asked: {p}" for p in problems]
    billing = []
    for job, role, found in jobs:
        row = cost_jobs.job_row(job, role, found, prices, now)
        if row["cost_usd"] is None:
            why = "no price for its flavor" if row["usd_per_hour"] is None else "no running time from HF"
            unknown.append(f"{row['job']} ({role}, flavor {row['flavor'] or fmt.UNKNOWN}): {why}")
        else:
            spent += row["cost_usd"]
        if job["stage"] not in TERMINAL and row["usd_per_hour"] is not None:
            burn += row["usd_per_hour"] + (row["exposed_port_usd_per_hour"] or 0)
            billing.append(row["job"])
    return Spend(round(spent, 6), round(burn, 6), prices.source, prices.label, unknown, billing,
                 len(prices.per_hour), [cost_hf.sandbox_name(j) for j in others])


def reached_message(run: str, spend: Spend, ceiling: float, poll_s: float, what: str) -> str:
    """The one plain message of a stop at the ceiling (what stopped: 'harbor was stopped', …)."""
    where = "already past it" if spend.spent_usd > ceiling else \
        f"spending {fmt.dollars(spend.burn_usd_per_hour)}/h, it would pass it before the next check in {poll_s:g} s"
    others = f" ({cost_sandboxes.unattributed_note(spend.unattributed)})" if spend.unattributed else ""
    return (f"MAX_COST reached: run '{run}' has spent {fmt.dollars(spend.spent_usd)} of its {fmt.dollars(ceiling)} ceiling ({where}; "
            f"prices: {spend.prices_label}){others}. {what} To continue, raise MAX_COST (in runs/{run}.env, or "
            f"MAX_COST=<usd> on the command line), then make mopup RUN={run}, or make reproduce RUN={run}: "
            f"the unfinished trials are retried, nothing finished is re-run.")


def unknown_note(spend: Spend) -> str:
    shown = "; ".join(spend.unknown[:3]) + (f"; and {len(spend.unknown) - 3} more" if len(spend.unknown) > 3 else "")
    return (f"note: MAX_COST can only be enforced on the spend that is known ({fmt.dollars(spend.spent_usd)}): {shown}. "
            f"make cost RUN=<run> shows every job.")


def ceiling_event(run: str, spend: Spend, ceiling: float, poll_s: float, job_dir: str | None, signal: str | None,
                  at: str) -> dict:
    return {"event": EVENT, "run": run, "job_dir": job_dir, "spent_usd": round(spend.spent_usd, 2),
            "ceiling_usd": ceiling, "burn_usd_per_hour": round(spend.burn_usd_per_hour, 4),
            "projected_usd": round(spend.projected(poll_s), 2), "poll_s": poll_s, "source": spend.source,
            "prices": spend.prices_label, "unknown": spend.unknown, "unattributed_sandboxes": len(spend.unattributed),
            "signal": signal, "at": at}


class Watch:
    """MAX_COST while harbor runs: measure every poll seconds; say once what cannot be measured."""

    def __init__(self, hf, scope: Scope, ceiling: float, poll_s: float, running_since: datetime):
        self.hf, self.scope, self.ceiling, self.poll_s = hf, scope, ceiling, poll_s
        self.running_since = running_since
        self.noted = False
        self.said_unattributed = 0  # how many of another's sandboxes were last said

    def check(self) -> Spend | None:
        """The spend when it would pass the ceiling, else None."""
        try:
            spend = measure(self.hf, self.scope, running_since=self.running_since)
        except (cost_hf.HfFailed, click.ClickException, OSError) as e:
            spend = None
            why = str(e.message if isinstance(e, click.ClickException) else e)
            if not self.noted:
                self.noted = True
                click.echo(f"harbor_guard: note: MAX_COST cannot be checked now ({why}); the watch keeps trying "
                           f"every {self.poll_s:g} s.", err=True)
            return None
        if spend.unknown and not self.noted:
            self.noted = True
            click.echo(f"harbor_guard: {unknown_note(spend)}", err=True)
        if len(spend.unattributed) > self.said_unattributed:  # said when more appear, not every poll
            self.said_unattributed = len(spend.unattributed)
            click.echo(f"harbor_guard: note: {cost_sandboxes.unattributed_note(spend.unattributed, ' in MAX_COST')}", err=True)
        return spend if would_pass(spend, self.ceiling, self.poll_s) else None


# --------------------------------------------------------------------------- the scope, as the scripts send it


def scope_of(text: str) -> Scope:
    """The Scope from its JSON (scripts/lib-run.sh cost_scope_json): data, never shell text."""
    fields = json.loads(text)
    return Scope(**{**fields, "state_dir": Path(fields["state_dir"]),
                    "prices_cache": Path(fields["prices_cache"]) if fields.get("prices_cache") else None})
