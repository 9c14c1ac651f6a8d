"""What a campaign would do, printed: make campaign CAMPAIGN=… DRY_RUN=1.

One block per distinct server: its exact `hf jobs run` line (scripts/argv.sh serve_argv, as make
print shows it, with the group's longest SERVER_TIMEOUT), every run benched on it with the exact
make reproduce line and that run's own dry-run plan (scripts/reproduce.sh DRY_RUN=1, the commands
it would run, through the same builders), and the stop. Then the trials-at-once budget and how it
is met, the one ceiling, and the final comparison's commands. Nothing is launched or written: the
verbs it asks run with DRY_RUN=1, which writes nothing anywhere (docs/guarantees.md).
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from tools import fmt
from tools.campaign import campaign_runs
from tools.campaign.campaign_children import child_env
from tools.campaign.campaign_plan import Resolved
from tools.campaign.campaign_runs import Group

# The endpoint a run's dry-run plan is shown with before its server exists: a URL the settings
# accept (no placeholder characters), named for the server it stands for.
STAND_IN = "https://SERVER-{n}--{port}.hf.jobs/v1"


def make_line(verb: str, **settings: str) -> str:
    return shlex.join(["make", verb, *(f"{k}={v}" for k, v in settings.items())])


def stand_in(n: int, g: Group) -> str:
    return STAND_IN.format(n=n, port=g.owner.settings["PORT"])


def serve_shown(repo: Path, g: Group, env: dict[str, str]) -> str:
    """The owner's hf jobs run line with the group's SERVER_TIMEOUT (asked again when it is not the owner's)."""
    if g.timeout == g.owner.settings["SERVER_TIMEOUT"]:
        return g.owner.serve_shown
    return campaign_runs.describe(repo, g.owner.run, child_env(env, None, SERVER_TIMEOUT=g.timeout)).serve_shown


def run_plan(repo: Path, run: str, env: dict[str, str], settings: dict[str, str]) -> list[str]:
    """The run's own make reproduce DRY_RUN=1 plan on its campaign server (its stdout lines)."""
    proc = subprocess.run([str(repo / "scripts" / "reproduce.sh")], cwd=repo, capture_output=True, text=True,
                          env=child_env({**env, "DRY_RUN": "1"}, run, **settings),
                          stdin=subprocess.DEVNULL, timeout=600)
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()
        return [f"REFUSED: {last[-1] if last else f'exit {proc.returncode}'}"]
    return proc.stdout.rstrip("\n").splitlines()


def group_block(repo: Path, r: Resolved, n: int, g: Group, env: dict[str, str]) -> list[str]:
    owner = g.owner
    s = owner.settings
    out = [f"server {n}  {s['SERVER']} ({s['MODEL']} on {s['SERVER_FLAVOR']}), owned by {owner.run}, shared by "
           f"{len(g.runs)} run(s): {' '.join(g.names)}",
           f"  serve    {make_line('serve', RUN=owner.run, SERVER_TIMEOUT=g.timeout)}   (SERVER_TIMEOUT: the longest of "
           f"its runs'; skipped while a recorded server of it is healthy; installs {owner.run}'s watchdog)",
           f"           {serve_shown(repo, g, env)}"]
    for info in g.runs:
        a = r.alloc[info.run]
        out.append(f"  bench    {make_line('reproduce', RUN=info.run, **r.bench_settings(info.run, f'<server {n} endpoint>'))}"
                   f"   ({info.settings['AGENT']}; {a.demand} trial(s) at once{'; ' + a.note if a.note else ''})")
        out += [f"           | {line}" for line in run_plan(repo, info.run, env, r.bench_settings(info.run, stand_in(n, g)))]
    out.append(f"  stop     {make_line('stop', RUN=owner.run)}   (once no run of server {n} needs it; also on a failure, "
               f"Ctrl-C or the ceiling)")
    return out


def budget_lines(r: Resolved) -> list[str]:
    total = sum(a.demand for a in r.alloc.values())
    waves = campaign_runs.start_order(r.groups, r.alloc, r.budget)
    out = [f"budget   {r.budget} trial(s) at once over every run ({r.budget_why})"]
    if total <= r.budget:
        out.append(f"         met as it is: every run side by side, {total} trial(s) at once in all")
    else:
        out.append(f"         the runs ask {total} at once in all: a server's runs share the budget (N_CONCURRENT lowered "
                   "where said above), servers wait their turn; a run starts once its trials fit what the running "
                   "ones leave:")
        for i, wave in enumerate(waves, 1):
            out.append(f"         {i}. {', '.join(f'{run} ({r.alloc[run].demand})' for run in wave)}")
    return out


def dry_run(repo: Path, r: Resolved, env: dict[str, str], state_root: Path) -> list[str]:
    c = r.campaign
    try:
        shown_state = (state_root / "campaigns" / c.name / "campaign.json").relative_to(repo)
    except ValueError:
        shown_state = state_root / "campaigns" / c.name / "campaign.json"
    out = [f"campaign {c.name} (campaigns/{c.name}.env): {len(r.runs)} run(s) on {len(r.groups)} server(s); progress "
           f"would be kept in {shown_state} (a rerun resumes: finished runs are not redone, a healthy recorded "
           "server is reused). Dry run: nothing is launched or written.", ""]
    for n, g in enumerate(r.groups, 1):
        out += group_block(repo, r, n, g, env) + [""]
    out += [f"note     {note}" for note in r.notes]
    out += budget_lines(r)
    out.append(f"ceiling  MAX_COST={c.max_cost:g} ({fmt.dollars(c.max_cost)}) over the whole campaign: every run's "
               f"spend and every server's, as make cost counts them, summed every {c.cost_poll}s; before it would be "
               "passed every run is stopped (SIGINT: harbor's running trials become retryable) and every server is "
               "cancelled. Each run's own MAX_COST still holds too.")
    runs = " ".join(r.campaign.runs)
    out.append(f"compare  {make_line('compare', RUNS=runs)}   (the comparison table, flips and per-task matrix, "
               f"kept in {shown_state.parent / 'comparison.md'})")
    out.append(f"report   {make_line('report', RUNS=runs)}   (pictures and the HTML report, under reports/)")
    return out
