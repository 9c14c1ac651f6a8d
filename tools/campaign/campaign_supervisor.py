"""make campaign CAMPAIGN=<name>: serve each distinct server once, bench every run on it, within
one sandbox budget and one ceiling; stop each server once no run needs it; end with the comparison.

The supervisor holds the campaign's lock (state/campaigns/<name>/lock) for its whole life and
keeps its record in campaign.json. It starts the project's own verbs as children (campaign_children):
make serve RUN=<owner> for a group's server, then make reproduce RUN=<run> API_BASE=<endpoint>
N_CONCURRENT=<its share> for each run of the group: the run's own pipeline under the run's own lock,
with its own state, resume, mop-up and tally; with API_BASE it neither serves nor stops, so the
server stays the campaign's to stop (make stop RUN=<owner>) once the group's last run has ended.

While a server is up, the supervisor writes its owner's heartbeat on it every HEARTBEAT_EVERY
(python -m tools.run.watchdog beat, the owner's instance): the owner's watchdog, installed by make
serve, sees the server held while any run of the group benches on it, and cancels it within
WATCHDOG_GRACE once the supervisor is gone. Every COST_POLL seconds it sums every run's spend
(campaign_spend); before the campaign's MAX_COST would be passed it stops every run (SIGINT:
harbor's running trials become retryable), then every server, and says why (exit 75).

While a run benches on a server, the supervisor asks it every HEALTH_POLL (the owner's; hf jobs
inspect, then /health), as make reproduce asks its own: a server whose job ended, or whose /health
failed HEALTH_FAILS_TO_DIE times in a row while RUNNING, died. Its runs are stopped (SIGINT: their
running trials become retryable), the dead job is cancelled (a RUNNING job bills however it
answers), and it is launched again, at most the owner's MAX_RELAUNCHES times in the campaign's
life; each run then resumes on the new server (its own reproduce.json skips what it finished, its
mop-up retries what the death cut short). Past MAX_RELAUNCHES its runs fail with why.

A rerun resumes: a run recorded done is not started again (nor one that failed: its cause is
said, and `make reproduce RUN=<run>` fixes it); a run cut short resumes in its own reproduce.json;
a recorded server that is healthy is reused.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tools import fmt, hf_client
from tools.campaign import campaign_runs, campaign_spend, campaign_state
from tools.campaign.campaign_children import Child, child_env, run_now
from tools.campaign.campaign_plan import Resolved
from tools.campaign.campaign_runs import Group
from tools.run import reproduce_children, reproduce_server, reproduce_state
from tools.run.reproduce_server import HEALTH_FAILS_TO_DIE

CEILING_EXIT = 75
INTERRUPTED_EXIT = 130
# How long a stopped run (SIGINT) may take to wind down: harbor's STOP_GRACE thrice, and the
# supervisor's own cleanup (make reproduce then ends its step and records it).
STOP_WAIT = 240
# How long a run's lock may stay held, at a resume, by what a killed supervisor left winding down.
LOCK_WAIT = 300


class Stop(Exception):
    """The campaign stops: at the ceiling, on a signal, or on a failure it cannot go past."""

    def __init__(self, outcome: str, code: int):
        super().__init__(outcome)
        self.outcome, self.code = outcome, code


class Supervisor:
    def __init__(self, repo: Path, state_root: Path, r: Resolved, env: dict[str, str], state: dict):
        self.repo, self.state_root, self.r, self.env, self.state = repo, state_root, r, env, state
        self.dir = campaign_state.campaign_dir(state_root, r.campaign.name)
        self.path = self.dir / "campaign.json"
        self.serving: dict[str, Child] = {}   # owner → make serve (or wait-ready) running
        self.benching: dict[str, Child] = {}  # run → make reproduce running
        self.next_cost = 0.0
        self.next_beat: dict[str, float] = {}
        self.next_health: dict[str, float] = {}  # owner → when its server is asked next
        self.health_fails: dict[str, int] = {}   # owner → /health failures in a row
        self.relaunched: dict[str, int] = {}     # owner → its server's relaunches in this life
        self.signalled: int | None = None

    # --- record ------------------------------------------------------------------------------------
    def say(self, text: str) -> None:
        print(f"campaign: {text}", file=sys.stderr, flush=True)

    def save(self) -> None:
        campaign_state.save(self.path, self.state)

    def run_record(self, run: str) -> dict:
        return self.state["runs"].setdefault(run, {"status": "pending", "n_concurrent": self.r.alloc[run].n_concurrent})

    def set_run(self, run: str, status: str, **fields) -> None:
        record = self.run_record(run)
        record.update(status=status, **fields)
        self.save()

    def server_record(self, g: Group) -> dict:
        return self.state["servers"].setdefault(g.owner.run, {"runs": g.names, "status": "none"})

    def log(self, name: str) -> Path:
        return self.dir / f"{name}.log"

    # --- servers ------------------------------------------------------------------------------------
    def probe_server(self, g: Group) -> reproduce_server.Health:
        """The owner's recorded server as make reproduce asks it (hf jobs inspect, then /health)."""
        o = g.owner
        cfg = reproduce_state.Config(run=o.run, repo=self.repo, state_dir=Path(o.state_dir), jobs_dir=Path(o.jobs_dir),
                                     job_name=o.settings["JOB_NAME"], api_base="", verdicts=None, mopup_passes=0,
                                     max_relaunches=0, idle_stop_after=60, health_poll=1.0)
        children = reproduce_children.Children(cfg, self.say)
        return reproduce_server.Server(cfg, hf_client.token() or "", {}, lambda: None, children, self.say).health()

    def start_server(self, g: Group) -> None:
        """Reuse a healthy recorded server, wait for one still starting, else make serve RUN=<owner>."""
        record = self.server_record(g)
        h = self.probe_server(g)
        if h.healthy and h.endpoint:
            record.update(status="up", job=h.job, endpoint=h.endpoint, how="found healthy", ready_at=fmt.stamp())
            self.save()
            self.say(f"server of {g.owner.run} ({h.job}) is healthy at {h.endpoint}: reused for {' '.join(g.names)}")
            return
        script = "serve.sh"
        if h.job and not h.terminal:
            script = "wait-ready.sh"  # launched, not ready yet (a kill during make serve): wait for it
            self.say(f"server of {g.owner.run} ({h.job}) is {h.stage}, not ready yet: waiting for it (wait-ready.sh)")
        else:
            self.say(f"serving {g.owner.run}'s server for {' '.join(g.names)} (make serve RUN={g.owner.run} "
                     f"SERVER_TIMEOUT={g.timeout}; log: {self.log('serve-' + g.owner.run)})")
        env = child_env(self.env, g.owner.run, SERVER_TIMEOUT=g.timeout)
        self.serving[g.owner.run] = Child(f"serve {g.owner.run}", [str(self.repo / "scripts" / script)], env,
                                          self.repo, self.log(f"serve-{g.owner.run}"))
        record.update(status="starting", started_at=fmt.stamp())
        self.save()

    def server_ended(self, g: Group, rc: int) -> None:
        record = self.server_record(g)
        h = self.probe_server(g) if rc == 0 else None
        if h and h.endpoint:
            record.update(status="up", job=h.job, endpoint=h.endpoint, how="launched", ready_at=fmt.stamp())
            self.say(f"server of {g.owner.run} is up ({h.job}, {h.endpoint})")
        else:
            record.update(status="failed", ended_at=fmt.stamp())
            for run in g.names:
                if self.run_record(run)["status"] in ("pending", "interrupted"):
                    self.set_run(run, "failed", why=f"its server (make serve RUN={g.owner.run}) failed, exit {rc}: "
                                                    f"see {self.log('serve-' + g.owner.run)}")
            self.say(f"the server of {g.owner.run} failed (exit {rc}; {self.log('serve-' + g.owner.run)}): its runs "
                     f"{' '.join(g.names)} are not benched")
        self.save()

    def stop_server(self, g: Group, why: str) -> bool:
        record = self.server_record(g)
        if record.get("status") in ("none", "stopped"):
            return True
        self.say(f"stopping the server of {g.owner.run} ({why}): make stop RUN={g.owner.run}")
        rc = 1
        for _ in range(3):
            rc = run_now([str(self.repo / "scripts" / "stop.sh")], child_env(self.env, g.owner.run), self.repo, 600,
                         log=self.log(f"stop-{g.owner.run}")).returncode
            if rc == 0:
                break
        if rc == 0:
            record.update(status="stopped", stopped_at=fmt.stamp(), why=why)
        else:
            self.say(f"could not stop the server of {g.owner.run} (see {self.log('stop-' + g.owner.run)}): it may be "
                     f"billing; make stop RUN={g.owner.run}, or hf jobs cancel {record.get('job') or '<job>'}")
        self.save()
        return rc == 0

    def beat(self, g: Group) -> None:
        """The owner's heartbeat on its server, while a run of the group benches on it (docs/watchdog.md)."""
        o = g.owner
        every = fmt.parse_duration(o.settings["HEARTBEAT_EVERY"]) or 300
        if o.settings["WATCHDOG"] != "1" or time.monotonic() < self.next_beat.get(o.run, 0):
            return
        self.next_beat[o.run] = time.monotonic() + every
        instance, problem = campaign_runs.recorded_instance(o.state_dir)  # read bounded, 16 hex digits or refused
        if problem:
            self.say(f"note: the heartbeat of {o.run}'s server was not written: {problem}. Put back the id its jobs "
                     "carry (make jobs shows their instance= label)")
            return
        if instance is None:
            return
        argv = [str(self.repo / ".venv" / "bin" / "python"), "-m", "tools.run.watchdog", "beat", "--run", o.run,
                "--project", o.project_label, "--instance", instance]
        if o.settings["HF_NAMESPACE"]:
            argv += ["--namespace", o.settings["HF_NAMESPACE"]]
        proc = run_now(argv, child_env(self.env, o.run), self.repo, 120, capture=True)
        if proc.returncode != 0:
            self.say(f"note: the heartbeat of {o.run}'s server was not written ({(proc.stderr or '').strip()[-200:]})")

    def watch(self, g: Group) -> None:
        """Ask the group's server every HEALTH_POLL while a run benches on it; a dead one is replaced."""
        o = g.owner
        if not any(run in self.benching for run in g.names) or time.monotonic() < self.next_health.get(o.run, 0):
            return
        self.next_health[o.run] = time.monotonic() + int(o.settings["HEALTH_POLL"])
        h = self.probe_server(g)
        self.health_fails[o.run] = self.health_fails.get(o.run, 0) + 1 if h.http != "200" else 0
        # As make reproduce's DeathWatch: HF not answering (stage None) is no death.
        if h.terminal or (h.stage == "RUNNING" and self.health_fails[o.run] >= HEALTH_FAILS_TO_DIE):
            self.server_died(g, h)

    def server_died(self, g: Group, h: reproduce_server.Health) -> None:
        o, record = g.owner, self.server_record(g)
        self.health_fails.pop(o.run, None)
        why = (f"its server died (job {h.job or fmt.UNKNOWN} stage {h.stage or fmt.UNKNOWN}, /health {h.http})")
        self.say(f"the server of {o.run} died (job {h.job or fmt.UNKNOWN} stage {h.stage or fmt.UNKNOWN}, /health "
                 f"{h.http}): stopping {' '.join(r for r in g.names if r in self.benching)} (SIGINT: their running "
                 "trials become retryable)")
        self.stop_runs([run for run in g.names if run in self.benching], why)
        record.update(died_at=fmt.stamp())
        if not self.stop_server(g, "it died"):  # cancelled first: a RUNNING job bills however it answers
            raise Stop(f"the dead server of {o.run} could not be stopped (see {self.log('stop-' + o.run)}): not "
                       "launching a second one beside it", 1)
        # At most MAX_RELAUNCHES in one life of the supervisor, as make reproduce counts its own: a
        # rerun of make campaign is the user's say to go on. campaign.json keeps the total.
        relaunches, most = self.relaunched.get(o.run, 0), int(o.settings["MAX_RELAUNCHES"])
        if relaunches >= most:
            record["status"] = "failed"
            for run in g.names:
                if self.run_record(run)["status"] in ("pending", "interrupted"):
                    self.set_run(run, "failed", why=f"{why}, and it was relaunched {relaunches} time(s) already "
                                                    f"(MAX_RELAUNCHES={most} of {o.run}): see {self.log('serve-' + o.run)}; "
                                                    "then make campaign again")
            self.say(f"the server of {o.run} died after {relaunches} relaunch(es) (MAX_RELAUNCHES={most}): its runs "
                     f"{' '.join(g.names)} stop here")
        else:
            self.relaunched[o.run] = relaunches + 1
            record.update(status="lost", relaunches=int(record.get("relaunches", 0)) + 1)
            self.say(f"relaunching the server of {o.run} ({relaunches + 1} of at most {most}); its runs resume on it")
        self.save()

    # --- runs ---------------------------------------------------------------------------------------
    def start_run(self, run: str, endpoint: str) -> None:
        n = self.r.alloc[run].n_concurrent
        deadline = time.monotonic() + LOCK_WAIT
        while not campaign_state.run_lock_free(Path(self.r.info(run).state_dir)):
            if time.monotonic() > deadline:
                raise Stop(f"run {run} stays busy (its lock, state/{run}/lock, is held): see make status RUN={run}", 1)
            time.sleep(1)
        self.say(f"benching {run} on {endpoint}: make reproduce RUN={run} API_BASE={endpoint} N_CONCURRENT={n} "
                 f"(log: {self.log(run)})")
        env = child_env(self.env, run, **self.r.bench_settings(run, endpoint))
        self.benching[run] = Child(f"reproduce {run}", [str(self.repo / "scripts" / "reproduce.sh")], env, self.repo,
                                   self.log(run))
        self.run_record(run).pop("why", None)  # why it stopped last time: not this start's
        self.set_run(run, "running", n_concurrent=n, endpoint=endpoint, started_at=fmt.stamp())

    def run_ended(self, run: str, rc: int) -> None:
        # A run the campaign did not stop that ends interrupted (exit 130: stopped from outside) is not
        # restarted by this supervisor: it is said, and the next make campaign resumes it.
        status = {0: "done", CEILING_EXIT: "ceiling"}.get(rc, "failed")
        fields = {"rc": rc, "ended_at": fmt.stamp()}
        if status == "failed":
            fields["why"] = (f"make reproduce RUN={run} {'was interrupted' if rc == INTERRUPTED_EXIT else 'failed'} "
                             f"(exit {rc}): see {self.log(run)}; then make campaign again (it resumes the run)")
        self.set_run(run, status, **fields)
        self.say(f"run {run}: {status} (exit {rc})")
        if status == "ceiling":
            raise Stop(f"run {run} stopped at its own MAX_COST (its log: {self.log(run)})", CEILING_EXIT)

    # --- the loop ------------------------------------------------------------------------------------
    def used(self) -> int:
        """Trials at once of the runs benching and of those waiting for their server to be up."""
        waiting = [run for g in self.r.groups if g.owner.run in self.serving for run in g.names
                   if self.run_record(run)["status"] in ("pending", "interrupted")]
        return sum(self.r.alloc[run].demand for run in [*self.benching, *waiting])

    def step(self) -> bool:
        """One look: reap, start what fits, stop what is unneeded. False once nothing is left."""
        for owner, child in list(self.serving.items()):
            if (rc := child.poll()) is not None:
                del self.serving[owner]
                self.server_ended(self.r.group_of(owner), rc)
        for run, child in list(self.benching.items()):
            if (rc := child.poll()) is not None:
                del self.benching[run]
                self.run_ended(run, rc)
        free = self.r.budget - self.used()
        for g in self.r.groups:
            pending = [run for run in g.names if self.run_record(run)["status"] in ("pending", "interrupted")]
            record = self.server_record(g)
            for run in pending:
                if run in self.benching:
                    continue
                if record.get("status") == "up":
                    if self.r.alloc[run].demand > free:
                        break
                    self.start_run(run, record["endpoint"])
                    free -= self.r.alloc[run].demand
                elif g.owner.run not in self.serving and record.get("status") != "failed":
                    if sum(self.r.alloc[x].demand for x in pending) > free and self.used() > 0:
                        break
                    self.start_server(g)
                    free -= sum(self.r.alloc[x].demand for x in pending)
                    break
                else:
                    break
            if any(run not in self.benching for run in pending):
                break  # servers take their turn in the campaign's order
        for g in self.r.groups:
            record = self.server_record(g)
            busy = any(self.run_record(run)["status"] in ("pending", "running", "interrupted") for run in g.names)
            if record.get("status") == "up" and not busy and not any(run in self.benching for run in g.names):
                self.stop_server(g, f"no run of it is left: {' '.join(g.names)}")
            elif record.get("status") == "up":
                self.watch(g)
                if self.server_record(g).get("status") == "up":
                    self.beat(g)
        return bool(self.serving or self.benching or any(
            self.run_record(run)["status"] in ("pending", "interrupted") for run in self.r.alloc))

    def check_ceiling(self, force: bool = False) -> None:
        if not force and time.monotonic() < self.next_cost:
            return
        poll = self.r.campaign.cost_poll
        self.next_cost = time.monotonic() + poll
        spend = campaign_spend.measure(self.r.runs, self.state_root)
        self.state["ceiling"] = {"max_cost": self.r.campaign.max_cost, "spent_usd": spend.spent_usd,
                                 "burn_usd_per_hour": spend.burn_usd_per_hour, "per_run": spend.per_run,
                                 "unknown": spend.unknown[:10], "measured_at": fmt.stamp()}
        self.save()
        if campaign_spend.would_pass(spend, self.r.campaign.max_cost, poll):
            raise Stop(f"MAX_COST reached: the campaign has spent {fmt.dollars(spend.spent_usd)} of its "
                       f"{fmt.dollars(self.r.campaign.max_cost)} ceiling (spending {fmt.dollars(spend.burn_usd_per_hour)}/h, "
                       f"it would pass it before the next check in {poll}s; per run: "
                       + ", ".join(f"{k} {fmt.dollars(v)}" for k, v in spend.per_run.items()) + ")", CEILING_EXIT)

    def on_signal(self, signum, _frame) -> None:
        if self.signalled is None:
            self.signalled = signum
            raise Stop(f"interrupted ({signal.Signals(signum).name})", INTERRUPTED_EXIT)

    def stop_runs(self, runs: list[str], why: str) -> None:
        """SIGINT to each run's make reproduce (as Ctrl-C: harbor's running trials become retryable), then
        wait for each; they are recorded interrupted, for the next start to resume."""
        for run in runs:
            self.say(f"stopping run {run} (SIGINT to its make reproduce: harbor's running trials become retryable)")
            self.benching[run].signal(signal.SIGINT)
        for run in runs:
            rc = self.benching.pop(run).stop(STOP_WAIT)
            self.set_run(run, "interrupted", rc=rc, ended_at=fmt.stamp(), why=why)

    def stop_everything(self, why: str) -> None:
        """Every run (SIGINT, as Ctrl-C: harbor's running trials become retryable), then every server."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        for owner, child in list(self.serving.items()):
            child.signal(signal.SIGINT)
        self.stop_runs(list(self.benching), why)
        for owner, child in list(self.serving.items()):
            child.stop(60)
            del self.serving[owner]
        for g in self.r.groups:
            record = self.server_record(g)
            if record.get("status") not in ("none", "stopped"):
                self.stop_server(g, why)

    # --- the whole -----------------------------------------------------------------------------------
    def resume(self) -> None:
        """What the last life left: a run cut short resumes, a failed one is tried again (its own
        reproduce.json skips what it finished), a recorded server is asked whether it is still up."""
        for run in self.r.alloc:
            record = self.run_record(run)
            if record["status"] in ("running", "failed", "ceiling"):
                record["status"] = "interrupted" if record["status"] == "running" else "pending"
        for g in self.r.groups:
            record = self.server_record(g)
            if record.get("status") in ("up", "starting"):
                h = self.probe_server(g)
                if h.healthy and h.endpoint:
                    record.update(status="up", job=h.job, endpoint=h.endpoint)
                    self.say(f"server of {g.owner.run} ({h.job}) is still healthy: reused")
                else:
                    record["status"] = "lost"
            elif record.get("status") == "failed":
                record["status"] = "none"
        self.save()

    def loop(self) -> None:
        self.check_ceiling(force=True)
        while self.step():
            self.check_ceiling()
            time.sleep(0.5)

    def finish(self) -> tuple[str, int]:
        done = [run for run in self.r.campaign.runs if self.run_record(run)["status"] == "done"]
        failed = [run for run in self.r.campaign.runs if self.run_record(run)["status"] != "done"]
        if done:
            self.compare(done)
        if failed:
            return f"failed: run(s) {' '.join(failed)} did not finish (campaign.json says why)", 1
        return "done", 0

    def compare(self, runs: list[str]) -> None:
        """The one comparison: make compare and make report of the campaign's finished runs."""
        env = child_env(self.env, None, RUNS=" ".join(runs))
        env.pop("RUN", None)
        self.say(f"comparing {' '.join(runs)}: make compare RUNS='{' '.join(runs)}', then make report")
        proc = run_now([str(self.repo / "scripts" / "report.sh"), "compare"], env, self.repo, 900, capture=True)
        table = self.dir / "comparison.md"
        if proc.returncode == 0:
            from tools import safe_read  # noqa: PLC0415
            safe_read.write_atomic(table, proc.stdout)
            print(proc.stdout, flush=True)
        else:
            self.say(f"make compare failed (exit {proc.returncode}): {(proc.stderr or '').strip()[-300:]}")
        rendered = run_now([str(self.repo / "scripts" / "report.sh"), "report"], env, self.repo, 900,
                           log=self.log("report"))
        self.state["comparison"] = {"runs": runs, "table": str(table) if proc.returncode == 0 else None,
                                    "compare_rc": proc.returncode, "report_rc": rendered.returncode,
                                    "report_log": str(self.log("report")), "at": fmt.stamp()}
        self.save()

    def run(self) -> int:
        invocation = {"pid": os.getpid(), "started_at": fmt.stamp()}
        self.state["invocations"].append(invocation)
        self.state["budget"] = {"at_once": self.r.budget, "why": self.r.budget_why,
                                "n_concurrent": {run: a.n_concurrent for run, a in self.r.alloc.items()}}
        self.state["outcome"] = None
        self.resume()
        self.say(f"campaign {self.r.campaign.name}: {len(self.r.runs)} run(s) on {len(self.r.groups)} server(s), "
                 f"{self.r.budget} trial(s) at once, MAX_COST={self.r.campaign.max_cost:g}; progress in {self.path}")
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self.on_signal)
        try:
            self.loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_IGN)
            outcome, code = self.finish()
        except Stop as e:
            outcome, code = e.outcome, e.code
            self.say(f"{outcome}: stopping every run and every server")
            self.stop_everything(outcome)
        except BaseException as e:  # a supervisor never dies quietly: every run and server is stopped first
            outcome, code = f"failed: {type(e).__name__}: {e}", 70
            self.say(f"the supervisor failed ({outcome}): stopping every run and every server")
            self.stop_everything(outcome)
        invocation.update(ended_at=fmt.stamp(), outcome=outcome)
        self.state["outcome"] = outcome
        self.save()
        self.say(f"campaign {self.r.campaign.name}: {outcome}"
                 + ("" if code == 0 else f". make campaign CAMPAIGN={self.r.campaign.name} resumes (finished runs are "
                                         "not redone)" + (", once MAX_COST is raised" if code == CEILING_EXIT else "")))
        return code


def main(repo: Path, state_root: Path, name: str, env: dict[str, str], read) -> int:
    """Lock, record, resolve, supervise. `read(repo, name, recorded)` resolves the campaign."""
    directory = campaign_state.campaign_dir(state_root, name)
    from tools.campaign import campaign_file  # noqa: PLC0415
    campaign_file.read(repo, name)  # a bad file is refused before anything is written
    lock = campaign_state.CampaignLock(directory)
    if lock.held_by_other():
        raise campaign_state.StateError(f"campaign '{name}' is busy: {lock.who()}. One supervisor per campaign: wait "
                                        "for it, or stop it (make stop CAMPAIGN=…), then run this again. Nothing was changed.")
    # Resolved and checked before anything is written: a refused campaign leaves no state, no lock.
    resolved = read(repo, name, campaign_state.load(directory / "campaign.json", name))
    preflight(repo, resolved, env)
    lock.take("make campaign")
    state = campaign_state.load(directory / "campaign.json", name)
    return Supervisor(repo, state_root, resolved, env, state).run()


def preflight(repo: Path, r: Resolved, env: dict[str, str]) -> None:
    """Every run's own checks before anything is paid: its make reproduce DRY_RUN=1 must pass."""
    from tools.campaign.campaign_file import CampaignError  # noqa: PLC0415
    for info in r.runs:
        proc = subprocess.run([str(repo / "scripts" / "reproduce.sh")], cwd=repo, capture_output=True, text=True,
                              env=child_env({**env, "DRY_RUN": "1"}, info.run,
                                            **r.bench_settings(info.run, "https://preflight--1.hf.jobs/v1")),
                              stdin=subprocess.DEVNULL, timeout=600)
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines()
            raise CampaignError(f"run {info.run} is refused by its own checks (make reproduce RUN={info.run} DRY_RUN=1): "
                                f"{lines[-1] if lines else f'exit {proc.returncode}'}. Nothing was launched")
