"""The supervisor behind `make reproduce RUN=…`: one unattended command from nothing to the tally.

scripts/reproduce.sh resolves the run's settings, takes the run's lock and execs this with them
as argv. The steps, each the project's own verb run as a child under that lock (fd 9 is passed
on, so every child finds the lock already held):

    serve → probe → smoke → bench → mop-up passes → tally → stop → summary

Progress lives in state/<run>/reproduce.json (replaced atomically), so running it again after a
crash, Ctrl-C or reboot picks up where it stopped: a finished step is never redone, and a
healthy recorded server is reused, never doubled. While bench or a mop-up pass runs, the server
is checked every HEALTH_POLL seconds; when it dies (its job ends, or /health stops answering)
the step finishes (its trials fail as infra errors), then the server is relaunched (at most MAX_RELAUNCHES times) and probed, and
mop-up carries on against the new endpoint. Whatever happens, the server is stopped as soon as
no step needs it; a server given by API_BASE is never touched.

The Supervisor here walks the steps; its collaborators do the work: tools/run/reproduce_state.py
(reproduce.json and the settings), reproduce_children.py (each verb a child under the lock, the
signal forwarded), reproduce_server.py (the server's life) and reproduce_passes.py (mop-up's
passes).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import click

from tools import safe_read
from tools import fmt, hf_client
from tools.run.reproduce_children import LOCK_FD, Children, fd_open
from tools.run.reproduce_passes import MopupPasses, job_dir_exists
from tools.run.reproduce_server import Server
from tools.run.reproduce_state import (STEPS, BadState, CEILING_EXIT, CeilingReached, Config, Failure, Interrupted,
                                   load_state, new_state, step_done, summary_lines)
from tools.results.tally_options import max_task_retries_option


def save_state(path: Path, state: dict) -> None:
    """Write atomically: a kill at any instant leaves the old file or the new one, never half."""
    state["updated_at"] = fmt.stamp()
    path.parent.mkdir(parents=True, exist_ok=True)
    safe_read.write_atomic(path, json.dumps(state, indent=2) + "\n")


class Supervisor:
    """make reproduce's steps in order, each done once across crashes, the server never left billing."""

    def __init__(self, cfg: Config, token: str, state: dict | None = None):
        self.cfg = cfg
        self.state = state if state is not None else load_state(cfg.state_file, cfg.run)
        self.children = Children(cfg, self.say)
        self.server = Server(cfg, token, self.state, self.save, self.children, self.say)
        self.passes = MopupPasses(cfg, self.state, self.save, self.children, self.server, self.say)

    # --- output and state ---------------------------------------------------------------------
    def say(self, text: str) -> None:
        print(f"reproduce: {text}", file=sys.stderr, flush=True)

    def save(self) -> None:
        save_state(self.cfg.state_file, self.state)

    @contextlib.contextmanager
    def step(self, name: str, detail: str = ""):
        number = f"[{STEPS.index(name) + 1}/{len(STEPS)}]"
        started = time.monotonic()
        record = {"status": "running", "started_at": fmt.stamp()}
        self.state["steps"][name] = record
        self.state["current_step"] = name
        self.save()
        self.say(f"{number} {name}: started{f' ({detail})' if detail else ''}")
        try:
            yield record
        except BaseException as e:
            record.update(status="interrupted" if isinstance(e, Interrupted) else "failed", ended_at=fmt.stamp(),
                          seconds=round(time.monotonic() - started, 1))
            self.save()
            self.say(f"{number} {name}: {record['status']} after {fmt.elapsed(time.monotonic() - started)}")
            raise
        if record["status"] == "running":
            record["status"] = "done"
        record.update(ended_at=fmt.stamp(), seconds=round(time.monotonic() - started, 1))
        self.state["current_step"] = None
        self.save()
        note = f": {record['note']}" if record.get("note") else ""
        self.say(f"{number} {name}: {record['status']} in {fmt.elapsed(time.monotonic() - started)}{note}")

    def skip(self, name: str, why: str) -> None:
        number = f"[{STEPS.index(name) + 1}/{len(STEPS)}]"
        if not step_done(self.state, name):
            self.state["steps"][name] = {"status": "skipped", "note": why, "started_at": fmt.stamp(), "ended_at": fmt.stamp()}
            self.save()
        self.say(f"{number} {name}: skipped ({why})")

    # --- the steps --------------------------------------------------------------------------------
    def needs_server(self) -> bool:
        return not step_done(self.state, "mopup")

    def run_steps(self) -> None:
        self.serve_step()
        self.check_steps()
        self.bench_step()
        self.mopup_step()
        self.tally_step()
        self.stop_step()
        with self.step("summary"):
            self.summary()

    def serve_step(self) -> None:
        if not self.needs_server():
            self.skip("serve", "no step left needs the server")
        elif self.cfg.api_base:
            self.skip("serve", f"API_BASE given: {self.cfg.api_base}")
        else:
            h = self.server.health()
            if h.healthy:
                self.server.ensure_server()
                self.skip("serve", f"server job {h.job} is healthy at {h.endpoint}")
            else:
                with self.step("serve"):
                    self.server.ensure_server()

    def check_steps(self) -> None:
        """probe, then smoke: a few minutes that fail before hours of benchmark would."""
        for name, argv in (("probe", [self.children.script("probe.sh")]),
                           ("smoke", [self.children.script("bench.sh"), "--smoke"])):
            if step_done(self.state, name):
                self.skip(name, "done before")
                continue
            if name == "smoke" and self.cfg.skip_smoke:
                self.skip(name, self.cfg.skip_smoke)
                continue
            self.server.ensure_server()
            with self.step(name) as record:
                rc, _, _ = self.children.run_child(argv, PROBE="0", AUTO_STOP="0")
                if rc == CEILING_EXIT:
                    raise CeilingReached(name)
                if rc != 0:
                    raise Failure(f"the {name} step failed (exit {rc}, above): fix it before hours of benchmark, "
                                  f"then make reproduce RUN={self.cfg.run} again")
                record["rc"] = rc

    def bench_step(self) -> None:
        if step_done(self.state, "bench"):
            self.skip("bench", "done before")
            return
        if job_dir_exists(self.cfg.jobs_dir, self.cfg.job_name):
            self.skip("bench", f"its job dir exists ({self.cfg.job_name}): what it left unfinished is mop-up's")
            return
        with self.step("bench") as record:
            while True:
                self.server.ensure_server()
                rc, died, _ = self.children.run_child([self.children.script("bench.sh")],
                                                      watch=self.server.death_watch(), PROBE="0", AUTO_STOP="0")
                record.update(rc=rc, server_died=died)
                if rc == CEILING_EXIT:
                    raise CeilingReached("bench")
                if job_dir_exists(self.cfg.jobs_dir, self.cfg.job_name):
                    if died:
                        record["note"] = "the server died mid-bench; mop-up retries what it left"
                    break
                if not died:
                    raise Failure(f"bench failed (exit {rc}, above) before harbor made its job dir: fix that, "
                                  f"then make reproduce RUN={self.cfg.run} again")

    def mopup_step(self) -> None:
        if step_done(self.state, "mopup"):
            self.skip("mopup", "done before")
        else:
            with self.step("mopup", f"at most {self.cfg.mopup_passes} pass(es)") as record:
                record["note"] = self.passes.run()
        if not self.state.get("last_server_step_ended_at"):
            self.state["last_server_step_ended_at"] = fmt.stamp()
            self.save()

    def tally_step(self) -> None:
        if step_done(self.state, "tally"):
            self.skip("tally", "done before")
            return
        with self.step("tally"):
            rc, _, out = self.children.run_child([self.children.script("tally.sh")], capture=True)
            sys.stdout.write(out or "")
            sys.stdout.flush()
            if rc != 0:
                raise Failure(f"the tally failed (exit {rc}, above); the job dirs are untouched: make tally RUN={self.cfg.run}")
            self.state["tally_output"] = out

    def stop_step(self) -> None:
        if self.cfg.api_base:
            self.skip("stop", "API_BASE given: that server is not ours to stop")
            return
        with self.step("stop"):
            self.server.release_server("every step that needs it is done")
            if self.state["server"] and self.state["server"].get("status") != "stopped":
                raise Failure("the server could not be stopped (above)")

    def summary(self) -> None:
        out = self.state.get("tally_output")
        if out:
            print(f"\nreproduce: the tally of run {self.cfg.run}:\n{out.rstrip()}\n", flush=True)
        for line in summary_lines(self.state, time.time()):
            print(f"reproduce: {line}", flush=True)

    # --- the whole ---------------------------------------------------------------------------------
    def run(self) -> int:
        invocation = {"pid": os.getpid(), "started_at": fmt.stamp()}
        # What the last life left "running" was cut short by a kill: say so, for the record.
        for record in [*self.state["steps"].values(), *self.state["mopup_passes"]]:
            if record.get("status") == "running":
                record["status"] = "interrupted"
        self.state["invocations"].append(invocation)
        resumed = any(self.state["steps"].values())
        self.save()
        self.say(f"run {self.cfg.run}: {'resuming' if resumed else 'starting'}; progress in "
                 f"{self.cfg.state_file} (run it again after a crash: it resumes)")
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self.children.on_signal)
        outcome, code = "done", 0
        try:
            self.run_steps()
        except CeilingReached as e:
            outcome, code = f"stopped at the cost ceiling (MAX_COST) during {e}", CEILING_EXIT
        except Interrupted as e:
            outcome, code = f"interrupted ({e})", 130
        except Failure as e:
            outcome, code = f"failed: {e}", 1
            self.say(str(e))
        finally:
            # Whatever happened, no GPU idles: a signal now must not cut the stop short.
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_IGN)
            self.children.interrupted = None
            if self.state["server"] and self.state["server"].get("status") != "stopped" and not self.cfg.api_base:
                if not self.state.get("last_server_step_ended_at") and code != 0:
                    self.state["last_server_step_ended_at"] = fmt.stamp()
                self.server.release_server(f"the pipeline {outcome.split(':')[0]}")
            invocation.update(ended_at=fmt.stamp(), outcome=outcome)
            self.state["current_step"] = None
            self.save()
            if job_dir_exists(self.cfg.jobs_dir, self.cfg.job_name):
                self.children.remember()
        if code == CEILING_EXIT:
            for line in summary_lines(self.state, time.time()):
                print(f"reproduce: {line}", flush=True)
            self.say(f"{outcome}: the server is stopped and no other step was started. Raise MAX_COST, then "
                     f"make reproduce RUN={self.cfg.run} resumes (make cost RUN={self.cfg.run} shows the spend)")
        if code == 130:
            self.say(f"{outcome}: the server is stopped; make reproduce RUN={self.cfg.run} resumes")
        return code


def _token() -> str:
    """The HF token (HF_TOKEN, else the saved login), from tools/hf_client.py's one reader."""
    return hf_client.token() or ""


@click.group()
def cli():
    """The supervisor of make reproduce (scripts/reproduce.sh runs it)."""


@cli.command("targets")
@click.option("--jobs-dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--job-name", required=True)
@click.option("--verdicts", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--split", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="a sharded run's kept split (state/<run>/shards.json): its shards that never started")
@click.option("--model", default=None,
              help="the run's MODEL: a job dir of the run's name that records another model is refused")
@max_task_retries_option
def targets_cmd(jobs_dir, job_name, verdicts, split, model, max_task_retries):
    """Print, as a JSON list, the tasks a mop-up pass would retry now.

    mop-up's own selection (tools/mopup/mopup_plan.py what_is_left, the plan's left_to_retry): the
    tasks that lack attempts (errored by an infra rule or unfinished; with N_ATTEMPTS > 1,
    any open attempt slot), plus the tasks harbor planned that never started (a bench killed
    early leaves them, and no trial dir names them, so the tally alone cannot see them). A final
    error (the tally's: past MAX_TASK_RETRIES) is not listed: AUTO_STOP and the passes end on it.
    """
    from tools.mopup import mopup_plan  # noqa: PLC0415  (heavy: harbor)

    click.echo(json.dumps(sorted(mopup_plan.what_is_left(jobs_dir, job_name, verdicts, split, model,
                                                         max_task_retries))))


@cli.command("run")
@click.option("--run", required=True)
@click.option("--repo", "repo", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--state-dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--jobs-dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--job-name", required=True)
@click.option("--api-base", default="")
@click.option("--verdicts", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--mopup-passes", type=click.IntRange(min=0), default=3)
@click.option("--max-relaunches", type=click.IntRange(min=0), default=2)
@click.option("--idle-stop-after", type=click.IntRange(min=1), default=600)
@click.option("--health-poll", type=click.FloatRange(min=0.1), default=30.0)
@click.option("--skip-smoke", default="", help="Why the smoke step is skipped (it would run the bench's very tasks).")
@click.option("--model", default="", help="The run's MODEL: a job dir of the run's name that records another model is refused.")
@max_task_retries_option
def run_cmd(run, repo, state_dir, jobs_dir, job_name, api_base, verdicts, mopup_passes, max_relaunches,
        idle_stop_after, health_poll, skip_smoke, model, max_task_retries):
    """Supervise RUN from nothing to its tally (scripts/reproduce.sh execs this under the run's lock)."""
    lock = state_dir / "lock"
    if os.environ.get("RUN_LOCK_HELD") != str(lock) or not fd_open(LOCK_FD):
        raise click.ClickException(f"run this through make reproduce RUN={run}: it holds the run's lock "
                                   f"({lock}), which every step needs")
    token = _token()
    if not token:
        raise click.ClickException("no HF token: set HF_TOKEN or run 'hf auth login' (the server job, its "
                                   "endpoint and the sandboxes need it)")
    cfg = Config(run=run, repo=repo.resolve(), state_dir=state_dir, jobs_dir=jobs_dir, job_name=job_name,
                 api_base=api_base.rstrip("/"), verdicts=verdicts, mopup_passes=mopup_passes,
                 max_relaunches=max_relaunches, idle_stop_after=idle_stop_after, health_poll=health_poll,
                 skip_smoke=skip_smoke, model=model, max_task_retries=max_task_retries)
    try:
        supervisor = Supervisor(cfg, token)
    except BadState as e:
        # Its own record of the server cannot be read, and the run must not bill on for that: the
        # run's server (state/<run>/server.json, make stop's record) is stopped before the refusal.
        if cfg.server_json.exists() and not cfg.api_base:
            Supervisor(cfg, token, state=new_state(run)).server.release_recorded_server()
        raise click.ClickException(str(e)) from e
    except Failure as e:
        raise click.ClickException(str(e)) from e
    sys.exit(supervisor.run())


if __name__ == "__main__":
    cli()
