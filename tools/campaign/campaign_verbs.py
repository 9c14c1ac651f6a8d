"""make watch|report|stop CAMPAIGN=<name>: each verb over every run and server of the campaign.

- stop: the campaign's supervisor first (SIGINT, as Ctrl-C: it stops its runs and servers
  itself), so it cannot launch another; then make stop of every run of the campaign (a server's
  owner is one of them; a run with no server says so). Safe to repeat.
- watch: the campaign's record (state/campaigns/<name>/campaign.json), then make watch ONCE=1 of
  each run (the run's own frame, from its own files).
- report: make compare and make report of the campaign's runs that have a job dir (the comparison
  the campaign ends with, again, from the runs' job dirs as they are now); a run not benched yet
  is named and left out, and with none benched there is nothing to compare (exit 1).
Each writes nothing of its own: the verbs it runs keep their own promises (docs/campaigns.md).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import click

from tools import fmt
from tools.campaign import campaign_state
from tools.campaign.campaign_children import child_env
from tools.campaign.campaign_file import Campaign

SUPERVISOR_WAIT = 600


def say(text: str) -> None:
    print(f"campaign: {text}", flush=True)


def verb(repo: Path, script: list[str], env: dict[str, str]) -> int:
    return subprocess.run([str(repo / "scripts" / script[0]), *script[1:]], cwd=repo, env=env,
                          stdin=subprocess.DEVNULL).returncode


def stop_supervisor(directory: Path) -> None:
    lock = campaign_state.CampaignLock(directory)
    if not lock.held_by_other():
        return
    pid = lock.holder_pid()  # read bounded; a pid that is not a whole number in range is no pid
    if pid is None:
        say(f"a supervisor holds {lock.path} but names no pid in {lock.holder}: stopping the runs' servers anyway")
        return
    if os.environ.get("DRY_RUN", "0") not in ("", "0"):
        say(f"dry run: would send SIGINT to the campaign's supervisor (pid {pid}) and wait for it")
        return
    say(f"stopping the campaign's supervisor (pid {pid}, SIGINT): it stops its runs and servers itself")
    try:
        os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + SUPERVISOR_WAIT
    while lock.held_by_other() and time.monotonic() < deadline:
        time.sleep(0.5)


def stop(repo: Path, state_root: Path, campaign: Campaign, env: dict[str, str]) -> int:
    stop_supervisor(campaign_state.campaign_dir(state_root, campaign.name))
    worst = 0
    for run in campaign.runs:
        say(f"make stop RUN={run}")
        worst = max(worst, verb(repo, ["stop.sh"], child_env(env, run)))
    return worst


def record_lines(state: dict) -> list[str]:
    out = [f"campaign {state['campaign']}: {state.get('outcome') or 'under way (or cut short)'}; updated "
           f"{state.get('updated_at')}"]
    for run, r in state["runs"].items():
        out.append(f"  run    {run}: {r.get('status')} (N_CONCURRENT={r.get('n_concurrent')}"
                   + (f", on {r['endpoint']}" if r.get("endpoint") else "") + ")" + (f": {r['why']}" if r.get("why") else ""))
    for owner, s in state["servers"].items():
        out.append(f"  server {owner}'s: {s.get('status')}" + (f" ({s['job']}, {s.get('endpoint')})" if s.get("job") else "")
                   + f" for {' '.join(s.get('runs') or [])}"
                   + (f", relaunched {s['relaunches']} time(s) (died {s.get('died_at')})" if s.get("relaunches") else ""))
    c = state.get("ceiling")
    if c:
        out.append(f"  spend  {fmt.dollars(c.get('spent_usd'))} of MAX_COST {fmt.dollars(c.get('max_cost'))}, "
                   f"{fmt.dollars(c.get('burn_usd_per_hour'))}/h, measured {c.get('measured_at')}")
    b = state.get("budget")
    if b:
        out.append(f"  budget {b.get('at_once')} trial(s) at once: {b.get('why')}")
    return out


def watch(repo: Path, state_root: Path, name: str, env: dict[str, str]) -> int:
    from tools.campaign import campaign_file  # noqa: PLC0415
    campaign = campaign_file.read(repo, name)
    path = campaign_state.campaign_dir(state_root, name) / "campaign.json"
    if path.exists():
        for line in record_lines(campaign_state.load(path, name)):
            say(line)
    else:
        say(f"campaign {name} has not started (no {path}): make campaign CAMPAIGN={name}")
    worst = 0
    for run in campaign.runs:
        say(f"make watch RUN={run} ONCE=1")
        worst = max(worst, verb(repo, ["watch.sh"], child_env(env, run, ONCE="1")))
    return worst


def benched(runs: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(the runs with a job dir, one line for each of the others): a campaign under way has runs
    not benched yet, and make compare refuses a run with nothing to compare."""
    from tools.results import report_load, tally_jobs  # noqa: PLC0415
    have, left_out = [], []
    for run in runs:
        try:
            settings = report_load.run_settings(run)
            found = settings.jobs_dir.is_dir() and tally_jobs.run_job_dirs(settings.jobs_dir, settings.job_name)
        except (click.ClickException, tally_jobs.TallyError, OSError) as e:
            left_out.append(f"{run}: {getattr(e, 'message', None) or e}")
            continue
        if found:
            have.append(run)
        else:
            left_out.append(f"{run}: no job dir yet ({settings.job_name} under {settings.jobs_dir}): not benched yet")
    return have, left_out


def report(repo: Path, state_root: Path, campaign: Campaign, env: dict[str, str]) -> int:
    have, left_out = benched(campaign.runs)
    for line in left_out:
        say(f"left out of the comparison: {line}")
    if not have:
        say(f"no run of campaign {campaign.name} has a job dir yet: nothing to compare. make campaign "
            f"CAMPAIGN={campaign.name} benches them (make watch CAMPAIGN={campaign.name} shows where it stands)")
        return 1
    runs = " ".join(have)
    renv = child_env(env, None, RUNS=runs)
    renv.pop("RUN", None)
    say(f"make compare RUNS='{runs}'")
    rc = verb(repo, ["report.sh", "compare"], renv)
    say(f"make report RUNS='{runs}'")
    return max(rc, verb(repo, ["report.sh", "report"], renv))
