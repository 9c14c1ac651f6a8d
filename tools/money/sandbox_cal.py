"""sandbox_cal: make calibrate-sandboxes' figures: the ladder and what it may cost, the spend between
levels, each level's infra-error rate and sandbox start times, and the namespace's curve
(docs/sandbox-calibration.md).

scripts/calibrate-sandboxes.sh runs harbor's oracle agent (no model, no GPU) on the run's sandboxes once
per level of SANDBOX_LEVELS, SANDBOX_LEVEL_TASKS trials a level, and asks this tool, in order:

  ladder   the levels, their job names and harbor's task flags, one line each on stdout; the ladder
           and its cost on stderr; refused in one line when the estimate is above MAX_COST
  budget   before each level after the first: the levels measured so far (their JSON lines on
           stdin) and the next level's estimate against MAX_COST; exit CEILING_EXIT to stop
  measure  one level's job dir: its trials, classified by env/outcome-policy.yaml (the sandbox side:
           tally_policy.infra_side), their sandbox start times (result.json environment_setup) and
           what they cost, as one JSON line
  record   the measured levels (stdin) into <state>/namespaces/<namespace>/sandbox-curve.json,
           written atomically, which make plan reads (tools/money/sandbox_curve.py)

The run's settings come as one document, TB_SETTINGS (tools/settings.py current), as make plan's do.
Prices are env/flavor-prices.tsv's, make plan's list (tools/money/plan_checks.py load_costs).
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import sys
from importlib import metadata
from pathlib import Path

import click

from tools import fmt
from tools import safe_read
from tools import settings as run_settings
from tools import settings_rules
from tools.money import cost_prices
from tools.money import plan_checks
from tools.money import plan_evidence
from tools.money import sandbox_curve
from tools.results import slots
from tools.results import tally_policy
from tools.results import tally_trials

# The exit code of a stop at the spending ceiling (scripts/lib-run.sh CEILING_EXIT).
CEILING_EXIT = 75
MAX_ATTEMPTS = 100      # harbor's -k, as N_ATTEMPTS bounds it
# A level's job: <JOB_NAME>-sandbox-cal-<ladder>-n<level>. Never one of the run's own (tally_jobs
# run_job_dirs takes the job, its -shard-<i> and -retry-<N> only), so no tally, mop-up or plan counts it.
INFIX = "-sandbox-cal-"
LEVEL_DOC_CAP = 1 << 20  # one level's JSON line


class CalError(click.ClickException):
    def show(self, file=None) -> None:
        click.echo(f"calibrate-sandboxes: {self.message}", file=file, err=True)


usd = fmt.small_dollars


def say(text: str) -> None:
    click.echo(f"calibrate-sandboxes: {text}", err=True)


def read_settings() -> run_settings.Settings:
    try:
        return run_settings.current()
    except run_settings.SettingsError as e:
        raise CalError(f"{e} (make calibrate-sandboxes RUN=<run>)") from None
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        raise CalError("TB_SETTINGS is not a run's settings document: run make calibrate-sandboxes RUN=<run>") from None


# --------------------------------------------------------------------------- the ladder and its price


def levels_of(s: run_settings.Settings) -> list[int]:
    """SANDBOX_LEVELS, sorted, once each: checked by the rule every verb runs (settings_rules.sandbox_levels)."""
    words = s["SANDBOX_LEVELS"] or []
    problem = settings_rules.sandbox_levels_problem(words, s["SANDBOX_LEVEL_TASKS"], s.run)
    if problem:
        raise CalError(problem)
    return sorted({int(w) for w in words})


def task_flags(s: run_settings.Settings) -> tuple[str, int, int]:
    """(harbor's --n-tasks, its -k, the trials a level runs at most): SANDBOX_LEVEL_TASKS of the dataset's
    tasks, or, when the run names its TASKS, each of them as many times as that takes."""
    want, tasks = s["SANDBOX_LEVEL_TASKS"], s["TASKS"] or []
    if not tasks:
        return str(want), 1, want
    k = math.ceil(want / len(tasks))
    if k > MAX_ATTEMPTS:
        raise CalError(f"the run names {len(tasks)} task(s) (TASKS), so SANDBOX_LEVEL_TASKS={want} would take {k} "
                       f"attempts of each, above harbor's {MAX_ATTEMPTS}: lower SANDBOX_LEVEL_TASKS")
    return "", k, k * len(tasks)


def trial_secs(s: run_settings.Settings) -> tuple[float, str]:
    """The seconds a trial is priced at, and why."""
    if s["SANDBOX_TRIAL_SECS"] is not None:
        return float(s["SANDBOX_TRIAL_SECS"]), "SANDBOX_TRIAL_SECS"
    agent = s["AGENT_TIMEOUT_ESTIMATE"] * s["AGENT_TIMEOUT_MULTIPLIER"]
    return (agent + plan_evidence.TRIAL_OVERHEAD_SECS,
            f"the oracle's longest: AGENT_TIMEOUT_ESTIMATE {s['AGENT_TIMEOUT_ESTIMATE']} s × "
            f"{s['AGENT_TIMEOUT_MULTIPLIER']:g} + {plan_evidence.TRIAL_OVERHEAD_SECS:g} s of sandbox start; "
            f"SANDBOX_TRIAL_SECS sets it")


def hourly(s: run_settings.Settings) -> tuple[float, str]:
    """A sandbox's price an hour (its flavor and its exposed port, as make cost counts it), and the words."""
    try:
        costs = plan_checks.load_costs(cost_prices.TSV_PRICES, s.raw("SANDBOX_FLAVOR"))
    except plan_checks.PlanError as e:
        raise CalError(e.message.replace("make plan", "make calibrate-sandboxes")) from None
    return (costs.sandbox_usd + costs.port_usd,
            f"{costs.sandbox_flavor} ${costs.sandbox_usd:g}/h + its exposed port ${costs.port_usd:g}/h "
            f"({costs.source})")


def level_usd(s: run_settings.Settings) -> float:
    _, _, trials = task_flags(s)
    return trials * trial_secs(s)[0] / 3600 * hourly(s)[0]


def max_cost(s: run_settings.Settings) -> float | None:
    return s["MAX_COST"]


def next_ladder(jobs_dir: Path, job_name: str) -> int:
    """1 + the highest ladder number of the run's calibration jobs under jobs_dir (each ladder is new jobs:
    an old one's dir would be a silent resume)."""
    pattern = re.compile(re.escape(job_name + INFIX) + r"([1-9][0-9]{0,8})-n[0-9]+")
    found = [0]
    try:
        with os.scandir(jobs_dir) as entries:
            found += [int(m.group(1)) for e in entries if (m := pattern.fullmatch(e.name))]
    except FileNotFoundError:
        pass
    except OSError as e:
        raise CalError(f"cannot list JOBS_DIR {safe_read.printable(str(jobs_dir))}: {e.strerror or e}") from None
    return max(found) + 1


def namespace(s: run_settings.Settings) -> str:
    return s.raw("HF_NAMESPACE") or "default"


# --------------------------------------------------------------------------- one level, measured


def setup_secs(trial_dir: str) -> float | None:
    """The sandbox's start: the trial's environment_setup, started_at to finished_at (None: not recorded)."""
    try:
        data = tally_trials.read_result_object(os.path.join(trial_dir, "result.json"))
    except (OSError, safe_read.Unreadable):
        return None
    timing = data.get("environment_setup")
    if not isinstance(timing, dict):
        return None
    start, _ = tally_trials.parse_timestamp(timing.get("started_at"))
    end, _ = tally_trials.parse_timestamp(timing.get("finished_at"))
    return (end - start).total_seconds() if start and end and end >= start else None


def measure_level(job_dir: Path, level: int, price_h: float, secs_each: float) -> dict:
    """One level's figures from its job dir (every trial through the tally's scan and the policy)."""
    policy = tally_policy.load_policy()
    notes = tally_trials.ScanNotes()
    sides = dict.fromkeys(tally_policy.SIDES, 0)
    finished = unfinished = 0
    starts, seconds = [], 0.0
    for trial in tally_trials.scan_job_dir(job_dir, notes) if job_dir.is_dir() else []:
        if trial.retried:
            continue
        if trial.status != "finished":
            unfinished += 1
            seconds += secs_each  # billed, its length unknown: priced at the estimate
            continue
        finished += 1
        trial.outcome, trial.rule, _ = tally_policy.classify(trial, policy)
        if slots.is_infra(trial):
            sides[tally_policy.infra_side(trial, policy)] += 1
        seconds += trial.trial_seconds or 0.0
        start = setup_secs(os.path.join(str(job_dir), os.path.basename(trial.trial_dir)))
        if start is not None:
            starts.append(round(start, 3))
    trials = finished - sides["interrupted"]
    return {"level": level, "job_name": job_dir.name, "at_once": min(level, finished + unfinished),
            "trials": trials, "sandbox_errors": sides["sandbox"], "server_errors": sides["server"],
            "interrupted": sides["interrupted"], "unfinished": unfinished,
            "rate": round(sides["sandbox"] / trials, 4) if trials else None,
            "setup_secs": starts, "setup_secs_median": round(statistics.median(starts), 3) if starts else None,
            "setup_secs_max": max(starts) if starts else None, "sandbox_secs": round(seconds, 3),
            "usd": round(seconds / 3600 * price_h, 6), "notes": (notes.warnings + notes.unreadable_warnings)[:20]}


def read_levels(text: str) -> list[dict]:
    """The level lines measure wrote (stdin), each checked again: what budget and record add up."""
    out = []
    for line in text.splitlines()[:sandbox_curve.MAX_LEVELS]:
        if not line.strip():
            continue
        try:
            doc = json.loads(line[:LEVEL_DOC_CAP])
        except json.JSONDecodeError:
            raise CalError("a measured level is not one JSON line (calibrate-sandboxes' own output)") from None
        spent = doc.get("usd") if isinstance(doc, dict) else None
        if not isinstance(spent, (int, float)) or isinstance(spent, bool) or not 0 <= spent < 1e9:
            raise CalError("a measured level has no spend in dollars (calibrate-sandboxes' own output)")
        out.append(doc)
    return out


def level_line(doc: dict) -> str:
    starts = (f"sandbox start median {doc['setup_secs_median']:g} s, max {doc['setup_secs_max']:g} s"
              if doc["setup_secs"] else "no sandbox start recorded")
    extra = "".join(f", {doc[k]} {w}" for k, w in (("server_errors", "model-server errors"),
                                                     ("interrupted", "interrupted (left out)"),
                                                     ("unfinished", "unfinished")) if doc[k])
    return (f"{doc['level']} at once: {doc['sandbox_errors']} sandbox errors of {doc['trials']} trials "
            f"({fmt.share(doc['sandbox_errors'], doc['trials'])}){extra}; {starts}; {usd(doc['usd'])}")


# --------------------------------------------------------------------------- command line


@click.group(help=__doc__.split("\n\n")[0])
def cli() -> None:
    pass


@cli.command("ladder")
@click.option("--jobs-dir", required=True, type=click.Path(path_type=Path), help="JOBS_DIR, absolute")
def ladder_cmd(jobs_dir):
    """The ladder's levels and job names (stdout: LEVEL JOB_NAME N_TASKS N_ATTEMPTS a line); what it is
    and what it may cost (stderr); refused above MAX_COST."""
    s = read_settings()
    levels = levels_of(s)
    n_tasks, k, trials = task_flags(s)
    secs, why_secs = trial_secs(s)
    price_h, why_price = hourly(s)
    each = trials * secs / 3600 * price_h
    total = each * len(levels)
    ceiling = max_cost(s)
    job = s.raw("JOB_NAME")
    ladder = next_ladder(jobs_dir, job)
    say(f"the ladder: {' '.join(map(str, levels))} trials at once, one harbor job each "
        f"({job}{INFIX}{ladder}-n<level>), {trials} trials a level, {trials * len(levels)} in all: harbor's oracle "
        f"agent (no model server, no GPU) on {s.raw('ENV_TYPE')} ({s.raw('SANDBOX_FLAVOR')}) in namespace "
        f"{namespace(s)}")
    say(f"cost: at most {usd(total)} ({usd(each)} a level): {trials * len(levels)} trials × {fmt.span(secs)} "
        f"({why_secs}) × ${price_h:g}/h ({why_price})")
    if ceiling is None:
        say("no MAX_COST: nothing bounds the ladder's spend but this estimate (MAX_COST=<usd> bounds it)")
    elif total > ceiling:
        raise CalError(f"the ladder may cost {usd(total)}, above MAX_COST={s.raw('MAX_COST')}: nothing was started. "
                       f"Measure fewer levels (SANDBOX_LEVELS) or trials (SANDBOX_LEVEL_TASKS), price a trial at the oracle's "
                       f"real length (SANDBOX_TRIAL_SECS), or raise MAX_COST")
    else:
        say(f"MAX_COST={s.raw('MAX_COST')}: within it; the ladder stops before a level whose estimate, with what "
            f"the levels before it spent, would pass it")
    for level in levels:
        click.echo(f"{level} {job}{INFIX}{ladder}-n{level} {n_tasks or '-'} {k}")


@cli.command("budget")
@click.option("--next", "level", required=True, type=click.IntRange(1, sandbox_curve.LEVEL_CAP))
def budget_cmd(level):
    """Exit CEILING_EXIT when what the levels on stdin spent plus the next level's estimate passes MAX_COST."""
    s = read_settings()
    spent = sum(d["usd"] for d in read_levels(sys.stdin.read()))
    ceiling, upcoming = max_cost(s), level_usd(s)
    if ceiling is not None and spent + upcoming > ceiling:
        say(f"stopped before level {level}: the levels so far spent {usd(spent)}, and level {level} may cost "
            f"{usd(upcoming)}: {usd(spent + upcoming)} would pass MAX_COST={s.raw('MAX_COST')}")
        sys.exit(CEILING_EXIT)


@cli.command("measure")
@click.option("--job-dir", required=True, type=click.Path(path_type=Path))
@click.option("--level", required=True, type=click.IntRange(1, sandbox_curve.LEVEL_CAP))
def measure_cmd(job_dir, level):
    """One level's figures, one JSON line on stdout; a line in words on stderr."""
    s = read_settings()
    doc = measure_level(job_dir, level, hourly(s)[0], trial_secs(s)[0])
    say(level_line(doc))
    click.echo(json.dumps(doc, sort_keys=True))


@cli.command("record")
@click.option("--out", required=True, type=click.Path(path_type=Path))
@click.option("--stopped", default="", help="why the ladder ended early; empty: it ran every level")
def record_cmd(out, stopped):
    """The levels on stdin as the namespace's sandbox curve, written atomically."""
    s = read_settings()
    levels = read_levels(sys.stdin.read())
    dataset = s.raw("DATASET") or s.raw("DATASET_PATH") or (
        s.raw("DATASET_REPO") + (f"@{s.raw('DATASET_REF')}" if s.raw("DATASET_REF") else ""))
    try:
        harbor = metadata.version("harbor")
    except metadata.PackageNotFoundError:
        harbor = "unknown"
    doc = {"kind": sandbox_curve.KIND, "version": sandbox_curve.VERSION, "measured_at": fmt.stamp(), "run": s.run,
           "namespace": namespace(s), "env_type": s.raw("ENV_TYPE"), "sandbox_flavor": s.raw("SANDBOX_FLAVOR"),
           "harbor_version": harbor, "agent": "oracle", "dataset": dataset,
           "level_tasks": s["SANDBOX_LEVEL_TASKS"], "max_cost": max_cost(s), "stopped": stopped or None,
           "spent_usd": round(sum(d["usd"] for d in levels), 6), "levels": levels}
    try:
        sandbox_curve.parse(json.loads(json.dumps(doc)), str(out))
    except sandbox_curve.BadCurve as e:
        raise CalError(f"nothing to record: {e}; {safe_read.printable(str(out))} is left as it was") from None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        safe_read.write_atomic(out, json.dumps(doc, indent=1) + "\n")
    except OSError as e:
        raise CalError(f"cannot write {safe_read.printable(str(out))}: {e.strerror or e}") from None
    say(f"recorded in {cost_prices.cost_hf.rel(out)}: " + "; ".join(
        f"{fmt.share(d['sandbox_errors'], d['trials'])} at {d['at_once']}" for d in levels if d["trials"])
        + f"; spent about {usd(doc['spent_usd'])}. make plan RUN={s.run} uses it")


if __name__ == "__main__":
    cli()
