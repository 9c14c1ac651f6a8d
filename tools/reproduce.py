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
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import click

from tools import tally_core as T

STEPS = ("serve", "probe", "smoke", "bench", "mopup", "tally", "stop", "summary")
TERMINAL = {"COMPLETED", "CANCELED", "ERROR", "DELETED"}
# A server whose job is RUNNING is declared dead only after this many failed /health polls in a
# row: one lost answer must not throw away a multi-day bench.
HEALTH_FAILS_TO_DIE = 3
JOB_RE = re.compile(r"^[A-Za-z0-9._-]+/[A-Za-z0-9_-]+$")
LOCK_FD = 9


class Failure(Exception):
    """The pipeline cannot go on: one line for the user, who fixes the cause and runs it again."""


class BadState(Failure):
    """state/<run>/reproduce.json is not what the supervisor writes: refused, once the server it
    would have stopped is stopped."""


class CeilingReached(Exception):
    """A step stopped at MAX_COST (exit CEILING_EXIT, the message above): no relaunch, no next pass."""


# scripts/lib-run.sh CEILING_EXIT: bench or mop-up stopped harbor at the run's spending ceiling.
CEILING_EXIT = 75


class Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclasses.dataclass(frozen=True)
class Config:
    run: str
    repo: Path
    state_dir: Path
    jobs_dir: Path
    job_name: str
    api_base: str
    verdicts: Path | None
    mopup_passes: int
    max_relaunches: int
    idle_stop_after: int
    health_poll: float
    skip_smoke: str = ""  # why the smoke step is not run (it would run the bench's very tasks); "": run it
    model: str = ""  # the run's MODEL: a job dir of its name that records another model is refused
    max_task_retries: int = T.DEFAULT_MAX_TASK_RETRIES  # MAX_TASK_RETRIES: final errors are not retried

    @property
    def state_file(self) -> Path:
        return self.state_dir / "reproduce.json"

    @property
    def server_json(self) -> Path:
        return self.state_dir / "server.json"


@dataclasses.dataclass
class Health:
    job: str | None = None
    stage: str | None = None  # None: HF could not be asked
    http: str = "-"
    endpoint: str | None = None

    @property
    def healthy(self) -> bool:
        return (self.stage == "RUNNING" or self.job is None) and self.http == "200"

    @property
    def terminal(self) -> bool:
        return self.stage in TERMINAL or self.stage == "NOT-FOUND"


# --- pure functions ------------------------------------------------------------------------------


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def epoch_of(iso: str | None) -> float | None:
    if not iso:
        return None
    try:
        return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def health_url(endpoint: str) -> str:
    base = endpoint.rstrip("/")
    return (base[: -len("/v1")] if base.endswith("/v1") else base) + "/health"


def new_state(run: str) -> dict:
    return {"run": run, "created_at": now_iso(), "updated_at": now_iso(), "current_step": None,
            "steps": {}, "server": None, "servers": [], "relaunches": 0, "mopup_passes": [],
            "invocations": [], "last_server_step_ended_at": None, "tally_output": None}


# The type of every field of reproduce.json, and of the records in its containers: what the
# supervisor reads must be what it writes, or a crash before its cleanup leaves the server billing.
STATE_SHAPE = {"run": str, "created_at": str, "updated_at": str, "current_step": (str, type(None)),
               "steps": dict, "server": (dict, type(None)), "servers": list, "relaunches": int,
               "mopup_passes": list, "invocations": list, "last_server_step_ended_at": (str, type(None)),
               "tally_output": (str, type(None))}
RECORDS = ("steps", "servers", "mopup_passes", "invocations")  # each holds JSON objects


def shape_problems(state: dict) -> list[str]:
    """What in a loaded reproduce.json is not the shape this module writes (new_state, the steps)."""
    names = {str: "a string", dict: "an object", list: "a list", int: "a whole number", type(None): "null"}
    problems = []
    for key, kinds in STATE_SHAPE.items():
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        value = state.get(key)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            problems.append(f"{key} is {json.dumps(value)[:60]}, not {' or '.join(names[k] for k in kinds)}")
    for key in RECORDS:
        value = state.get(key)
        records = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
        if any(not isinstance(r, dict) for r in records):
            problems.append(f"{key} holds something other than objects")
    server = state.get("server")
    if isinstance(server, dict) and not isinstance(server.get("job"), str):
        problems.append("server has no job name")
    return problems


def load_state(path: Path, run: str) -> dict:
    if not path.exists():
        return new_state(run)
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise BadState(f"{path} is not readable JSON ({e}): move it aside and run make reproduce RUN={run} "
                       "again (the job dirs and state/ stay; finished steps are found again from them)") from e
    if not isinstance(state, dict) or state.get("run") != run:
        raise BadState(f"{path} is not this run's supervisor state: move it aside and run it again")
    state = {**new_state(run), **state}
    problems = shape_problems(state)
    if problems:
        raise BadState(f"{path} is not the supervisor state make reproduce writes ({'; '.join(problems)}): move it "
                       f"aside and run make reproduce RUN={run} again (finished steps are found again from the "
                       f"job dirs)")
    return state


def save_state(path: Path, state: dict) -> None:
    """Write atomically: a kill at any instant leaves the old file or the new one, never half."""
    state["updated_at"] = now_iso()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, path)


def step_done(state: dict, name: str) -> bool:
    return state["steps"].get(name, {}).get("status") in ("done", "skipped")


def job_dir_exists(jobs_dir: Path, job_name: str) -> bool:
    """bench has run when harbor made its job dir, or a shard's (config.json): its unfinished
    trials are mop-up's."""
    return any((d / "config.json").is_file() for d in T.run_job_dirs(jobs_dir, job_name)
               if T.retry_number(job_name, d.name) == 0) if jobs_dir.is_dir() else False


def trial_dirs(jobs_dir: Path, job_name: str) -> set[str]:
    """Every trial dir of the run's jobs (the job or its shards, its retry jobs, flat or under jobs/), by path."""
    found: set[str] = set()
    for root in (jobs_dir, jobs_dir / "jobs"):
        if not root.is_dir():
            continue
        for job in root.iterdir():
            if job.is_dir() and T.retry_number(job_name, job.name) is not None:
                found.update(str(t) for t in job.iterdir() if t.is_dir())
    return found


def relaunch_is_due(state: dict) -> bool:
    """A launch replaces a server that died or failed: it counts against MAX_RELAUNCHES. One that
    follows a server this supervisor stopped on purpose (Ctrl-C, the end) does not."""
    return bool(state["servers"]) and state["servers"][-1].get("status") != "stopped"


def summary_lines(state: dict, now: float) -> list[str]:
    lines = []
    for p in state["mopup_passes"]:
        lines.append(f"mop-up pass {p['pass']}: {p['status']}, {len(p.get('planned', []))} task(s) planned, "
                     f"{p.get('trials_rerun', 0)} trial(s) re-run")
    if not state["mopup_passes"]:
        lines.append("mop-up: no pass was needed")
    last_need = epoch_of(state.get("last_server_step_ended_at"))
    for s in state["servers"]:
        start = epoch_of(s.get("launched_at"))
        end = epoch_of(s.get("stopped_at")) or now
        up = duration(end - start) if start else "unknown"
        idle = ""
        if s.get("status") == "stopped" and last_need and end >= last_need and s is state["servers"][-1]:
            idle = f", idle {duration(end - last_need)} after the last step that needed it"
        lines.append(f"server {s['job']}: {s.get('status')}, up {up}{idle}")
    lines.append(f"server relaunches: {state['relaunches']}")
    return lines


# --- the supervisor --------------------------------------------------------------------------------


class Supervisor:
    def __init__(self, cfg: Config, token: str, state: dict | None = None):
        self.cfg = cfg
        self.token = token  # for /health only: in a request header, never in argv or output
        self.state = state if state is not None else load_state(cfg.state_file, cfg.run)
        self.child: subprocess.Popen | None = None
        self.interrupted: int | None = None
        self.relaunches_now = 0

    # --- output and state ---------------------------------------------------------------------
    def say(self, text: str) -> None:
        print(f"reproduce: {text}", file=sys.stderr, flush=True)

    def save(self) -> None:
        save_state(self.cfg.state_file, self.state)

    @contextlib.contextmanager
    def step(self, name: str, detail: str = ""):
        number = f"[{STEPS.index(name) + 1}/{len(STEPS)}]"
        started = time.monotonic()
        record = {"status": "running", "started_at": now_iso()}
        self.state["steps"][name] = record
        self.state["current_step"] = name
        self.save()
        self.say(f"{number} {name}: started{f' ({detail})' if detail else ''}")
        try:
            yield record
        except BaseException as e:
            record.update(status="interrupted" if isinstance(e, Interrupted) else "failed", ended_at=now_iso(),
                          seconds=round(time.monotonic() - started, 1))
            self.save()
            self.say(f"{number} {name}: {record['status']} after {duration(time.monotonic() - started)}")
            raise
        if record["status"] == "running":
            record["status"] = "done"
        record.update(ended_at=now_iso(), seconds=round(time.monotonic() - started, 1))
        self.state["current_step"] = None
        self.save()
        note = f": {record['note']}" if record.get("note") else ""
        self.say(f"{number} {name}: {record['status']} in {duration(time.monotonic() - started)}{note}")

    def skip(self, name: str, why: str) -> None:
        number = f"[{STEPS.index(name) + 1}/{len(STEPS)}]"
        if not step_done(self.state, name):
            self.state["steps"][name] = {"status": "skipped", "note": why, "started_at": now_iso(), "ended_at": now_iso()}
            self.save()
        self.say(f"{number} {name}: skipped ({why})")

    def manifest(self, event: str, fields: dict) -> None:
        """One line in state/<run>/manifest.jsonl, by lib.sh's append_manifest (the same shape)."""
        lib = self.cfg.repo / "scripts" / "lib.sh"
        script = 'source "$1"; resolve_run; load_settings; append_manifest "$2" "$3"'
        subprocess.run(["bash", "-c", script, "reproduce", str(lib), event, json.dumps(fields)],
                       env=self.env(), cwd=self.cfg.repo, check=False, stdin=subprocess.DEVNULL, timeout=120)

    def remember(self) -> None:
        """The run becomes the last run used (lib.sh's remember_run) once it has job dirs to tally:
        a failed start never does, as a failed bench never does (scripts/bench.sh)."""
        if not job_dir_exists(self.cfg.jobs_dir, self.cfg.job_name):
            return
        lib = self.cfg.repo / "scripts" / "lib.sh"
        subprocess.run(["bash", "-c", 'source "$1"; resolve_run; remember_run', "reproduce", str(lib)],
                       env=self.env(), cwd=self.cfg.repo, check=False, stdin=subprocess.DEVNULL, timeout=120)

    # --- children -------------------------------------------------------------------------------
    def env(self, **extra: str) -> dict:
        env = dict(os.environ, RUN=self.cfg.run, WHERE="local")
        env.update(extra)
        return env

    def script(self, name: str) -> str:
        return str(self.cfg.repo / "scripts" / name)

    def run_child(self, argv: list[str], *, watch: bool = False, capture: bool = False, **extra: str):
        """Run one verb under the run's lock, in its own process group (a signal is forwarded once).
        With watch, the server is checked every HEALTH_POLL seconds and its death recorded (the
        child runs on). Returns (exit code, server died, captured stdout)."""
        fds = (LOCK_FD,) if _fd_open(LOCK_FD) else ()
        self.child = subprocess.Popen(argv, cwd=self.cfg.repo, env=self.env(**extra), pass_fds=fds,
                                      process_group=0, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE if capture else None, text=capture)
        died, fails, next_check = False, 0, time.monotonic() + self.cfg.health_poll
        try:
            while True:
                try:
                    out, _ = self.child.communicate(timeout=1) if capture else (None, None)
                    if not capture:
                        self.child.wait(timeout=1)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if watch and not self.cfg.api_base and not self.interrupted and time.monotonic() >= next_check:
                    next_check = time.monotonic() + self.cfg.health_poll
                    h = self.health()
                    fails = fails + 1 if h.http != "200" else 0
                    if h.terminal or (h.stage == "RUNNING" and fails >= HEALTH_FAILS_TO_DIE):
                        # Not interrupted: a harbor stopped by SIGINT writes its running trials with
                        # neither reward nor exception (unclassified, never retried), while trials
                        # against a dead server fail fast as infra errors, which mop-up retries.
                        died, watch = True, False
                        self.say(f"the server died under {Path(argv[0]).name} (job {h.job or '-'} stage "
                                 f"{h.stage or '?'}, /health {h.http}): letting it finish (its trials fail as "
                                 "infra errors, which mop-up retries); the server is relaunched after it")
                        self.mark_server("died")
            rc = self.child.returncode
            return rc, died, out if capture else None
        finally:
            self.child = None
            if self.interrupted:
                raise Interrupted(self.interrupted)

    def on_signal(self, signum, _frame) -> None:
        if self.interrupted:
            return  # one forward is enough; the child's own handlers finish the job
        self.interrupted = signum
        if self.child is None:
            raise Interrupted(signum)
        self.say(f"{signal.Signals(signum).name}: passing it to the running step, then stopping the server")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.child.pid, signum)

    # --- the server -------------------------------------------------------------------------------
    def recorded_server(self) -> dict | None:
        try:
            sj = json.loads(self.cfg.server_json.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(sj, dict):
            raise Failure(f"{self.cfg.server_json} is not a server record (a JSON object): check make jobs, then "
                          "remove the file")
        job = f"{sj.get('namespace')}/{sj.get('job_id')}"
        if not JOB_RE.fullmatch(job):
            raise Failure(f"{self.cfg.server_json} names no valid job ({json.dumps(job)[:80]}): check make jobs, then "
                          "remove the file")
        endpoint = sj.get("endpoint") if isinstance(sj.get("endpoint"), str) else ""
        launched = sj.get("launched_at") if isinstance(sj.get("launched_at"), str) else None
        return {"job": job, "endpoint": endpoint, "launched_at": launched}

    def health(self) -> Health:
        if self.cfg.api_base:
            return Health(http=self.http_status(self.cfg.api_base), endpoint=self.cfg.api_base)
        rec = self.recorded_server()
        if rec is None:
            return Health(stage="NOT-FOUND")
        h = Health(job=rec["job"], endpoint=rec["endpoint"], stage=self.job_stage(rec["job"]))
        if h.stage == "RUNNING" and rec["endpoint"]:
            h.http = self.http_status(rec["endpoint"])
        return h

    def job_stage(self, job: str) -> str | None:
        try:
            proc = subprocess.run(["hf", "jobs", "inspect", "--json", job], capture_output=True, text=True,
                                  timeout=60, stdin=subprocess.DEVNULL, env=self.env())
        except subprocess.TimeoutExpired:
            return None
        if proc.returncode != 0:
            return "NOT-FOUND" if "Not Found" in proc.stderr + proc.stdout else None
        try:
            stage = json.loads(proc.stdout)[0]["status"]["stage"]
        except (ValueError, LookupError, TypeError):
            return None
        return stage[:40] if isinstance(stage, str) else None

    def http_status(self, endpoint: str) -> str:
        request = urllib.request.Request(health_url(endpoint), headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return str(response.status)
        except urllib.error.HTTPError as e:
            return str(e.code)
        except (urllib.error.URLError, OSError):
            return "unreachable"

    def mark_server(self, status: str) -> None:
        server = self.state["server"]
        if server and server.get("status") not in ("stopped",):
            server["status"] = status
            if status == "stopped":
                server["stopped_at"] = now_iso()
            self.state["servers"][-1] = server
            self.save()

    def adopt(self, rec: dict, how: str) -> None:
        """Record the server in server.json as this pipeline's (a new launch, or one found healthy)."""
        current = self.state["server"]
        if current and current["job"] == rec["job"]:
            current.update(endpoint=rec["endpoint"], status="up")
            self.state["servers"][-1] = current
        else:
            server = {**rec, "status": "up", "how": how, "ready_at": now_iso()}
            self.state["server"] = server
            self.state["servers"].append(server)
        self.save()

    def ensure_server(self) -> None:
        """Before a step that needs the server: reuse a healthy one, else launch one (a relaunch when
        it replaces one that died), probe a relaunched one. Never two at once."""
        if self.cfg.api_base:
            return  # a server started elsewhere: the probe checks it; it is never touched
        h = self.settled_health()
        if h.healthy:
            server = self.state["server"]
            if server and server["job"] == h.job and server["status"] == "up":
                return
            # Answering /health, but never seen ready by this pipeline (a kill during make serve):
            # wait-ready, which also waits for every replica of a data-parallel server (its
            # gateway answers /health before them), and returns at once for a server that is ready.
            if self.run_child([self.script("wait-ready.sh")])[0] == 0:
                self.adopt(self.recorded_server(), "found healthy")
                return
            h = self.settled_health()
        while True:
            server = self.state["server"]
            ours = server is not None and server["job"] == h.job
            if h.job and not h.terminal and (not ours or server.get("status") == "starting"):
                # Launched but never seen ready (a kill during make serve): wait for it, as make
                # serve does; wait-ready cancels it when it never gets there.
                self.say(f"server job {h.job} is {h.stage} but not ready yet (/health {h.http}): waiting for it")
                if self.run_child([self.script("wait-ready.sh")])[0] == 0:
                    self.adopt(self.recorded_server(), "waited for")
                    return
                h = self.settled_health()
            if h.job and not h.terminal:
                self.say(f"server job {h.job} is not healthy (stage {h.stage}, /health {h.http}): stopping it first")
                self.stop_server()
            if ours and server.get("status") in ("up", "starting"):
                self.mark_server("died" if server["status"] == "up" else "failed")
            relaunch = relaunch_is_due(self.state)
            if relaunch:
                if self.relaunches_now >= self.cfg.max_relaunches:
                    raise Failure(f"the server failed to start or died {self.relaunches_now + 1} time(s) in a row "
                                  f"(MAX_RELAUNCHES={self.cfg.max_relaunches}): stopping here so a crash loop "
                                  f"bills no GPU. See its logs (make logs RUN={self.cfg.run}), fix the cause, then "
                                  f"make reproduce RUN={self.cfg.run} again: it resumes where it stopped")
                self.relaunches_now += 1
                self.state["relaunches"] += 1
                self.save()
                self.say(f"relaunching the server ({self.relaunches_now} of at most {self.cfg.max_relaunches})")
            before = self.recorded_server()
            rc, _, _ = self.run_child([self.script("serve.sh")])
            rec = self.recorded_server()
            launched = rec is not None and (before is None or rec["job"] != before["job"])
            if launched:
                server = {**rec, "status": "starting", "how": "relaunch" if relaunch else "launch"}
                self.state["server"] = server
                self.state["servers"].append(server)
                self.save()
                if relaunch:
                    self.manifest("reproduce-relaunch", {"role": "server", "job_id": rec["job"].split("/")[1],
                                                         "namespace": rec["job"].split("/")[0],
                                                         "endpoint": rec["endpoint"],
                                                         "relaunch": self.state["relaunches"]})
            if rc == 0 and rec is not None:
                self.adopt(rec, "launch")
                if relaunch:
                    self.probe()
                return
            if not launched:
                raise Failure(f"make serve failed (exit {rc}, above) before any job was launched: fix that, then "
                              f"make reproduce RUN={self.cfg.run} again")
            self.mark_server("failed")
            h = self.settled_health()

    def settled_health(self) -> Health:
        """health(), asked again a few times while HF cannot say: launching a second server on a
        network blip could leave two billing."""
        for attempt in range(3):
            h = self.health()
            if h.stage is not None or self.cfg.api_base:
                return h
            time.sleep(10 * (attempt + 1))
        raise Failure(f"cannot tell whether the run's server ({h.job}) is up: hf jobs inspect keeps failing. "
                      f"Check the network and make status RUN={self.cfg.run}, then run make reproduce again")

    def probe(self) -> None:
        rc, _, _ = self.run_child([self.script("probe.sh")])
        if rc != 0:
            raise Failure(f"the probe failed (above): the server does not serve the run right, and every trial "
                          f"would be scored against it. Fix it, then make reproduce RUN={self.cfg.run} again")

    def stop_server(self) -> bool:
        """scripts/stop.sh, retried for up to IDLE_STOP_AFTER seconds: a network blip must not
        leave the GPU billing. True once stopped."""
        deadline = time.monotonic() + self.cfg.idle_stop_after
        while True:
            rc, _, _ = self.run_child([self.script("stop.sh")])
            if rc == 0:
                return True
            if time.monotonic() >= deadline:
                rec = self.recorded_server()
                self.say(f"could not stop the server: it may be billing. Cancel it now: hf jobs cancel "
                         f"{rec['job'] if rec else '<job>'}")
                return False
            time.sleep(min(15, max(1, deadline - time.monotonic())))

    def release_recorded_server(self) -> None:
        """Stop the server of state/<run>/server.json whatever reproduce.json says (make stop's path)."""
        self.say("the supervisor state cannot be used (below); stopping the run's server first, so that it "
                 "does not bill on")
        self.stop_server()

    def release_server(self, why: str) -> None:
        """Stop the run's server once nothing needs it (never one given by API_BASE)."""
        server = self.state["server"]
        if self.cfg.api_base or not server or server.get("status") == "stopped":
            return
        self.say(f"stopping the server ({why})")
        if self.stop_server():
            self.mark_server("stopped")

    # --- the steps --------------------------------------------------------------------------------
    def retry_targets(self) -> list[str]:
        """What a mop-up pass would retry now, by mop-up's own selection (the `targets` command)."""
        argv = [sys.executable, str(Path(__file__).resolve()), "targets", "--jobs-dir", str(self.cfg.jobs_dir),
                "--job-name", self.cfg.job_name]
        if self.cfg.verdicts:
            argv += ["--verdicts", str(self.cfg.verdicts)]
        if (self.cfg.state_dir / "shards.json").is_file():
            argv += ["--split", str(self.cfg.state_dir / "shards.json")]
        if self.cfg.model:
            argv += ["--model", self.cfg.model]
        argv += ["--max-task-retries", str(self.cfg.max_task_retries)]
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=self.cfg.repo, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            raise Failure(f"cannot tell which tasks are left to retry: {last}")
        return json.loads(proc.stdout)

    def needs_server(self) -> bool:
        return not step_done(self.state, "mopup")

    def run_steps(self) -> None:
        st = self.state
        if not self.needs_server():
            self.skip("serve", "no step left needs the server")
        elif self.cfg.api_base:
            self.skip("serve", f"API_BASE given: {self.cfg.api_base}")
        else:
            h = self.health()
            if h.healthy:
                self.ensure_server()
                self.skip("serve", f"server job {h.job} is healthy at {h.endpoint}")
            else:
                with self.step("serve"):
                    self.ensure_server()

        for name, argv in (("probe", [self.script("probe.sh")]), ("smoke", [self.script("bench.sh"), "--smoke"])):
            if step_done(st, name):
                self.skip(name, "done before")
                continue
            if name == "smoke" and self.cfg.skip_smoke:
                self.skip(name, self.cfg.skip_smoke)
                continue
            self.ensure_server()
            with self.step(name) as record:
                rc, _, _ = self.run_child(argv, PROBE="0", AUTO_STOP="0")
                if rc == CEILING_EXIT:
                    raise CeilingReached(name)
                if rc != 0:
                    raise Failure(f"the {name} step failed (exit {rc}, above): fix it before hours of benchmark, "
                                  f"then make reproduce RUN={self.cfg.run} again")
                record["rc"] = rc

        if step_done(st, "bench"):
            self.skip("bench", "done before")
        elif job_dir_exists(self.cfg.jobs_dir, self.cfg.job_name):
            self.skip("bench", f"its job dir exists ({self.cfg.job_name}): what it left unfinished is mop-up's")
        else:
            with self.step("bench") as record:
                while True:
                    self.ensure_server()
                    rc, died, _ = self.run_child([self.script("bench.sh")], watch=True, PROBE="0", AUTO_STOP="0")
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

        if step_done(st, "mopup"):
            self.skip("mopup", "done before")
        else:
            with self.step("mopup", f"at most {self.cfg.mopup_passes} pass(es)") as record:
                record["note"] = self.mopup_passes()
        if not st.get("last_server_step_ended_at"):
            st["last_server_step_ended_at"] = now_iso()
            self.save()

        if step_done(st, "tally"):
            self.skip("tally", "done before")
        else:
            with self.step("tally"):
                rc, _, out = self.run_child([self.script("tally.sh")], capture=True)
                sys.stdout.write(out or "")
                sys.stdout.flush()
                if rc != 0:
                    raise Failure(f"the tally failed (exit {rc}, above); the job dirs are untouched: make tally RUN={self.cfg.run}")
                st["tally_output"] = out
        if self.cfg.api_base:
            self.skip("stop", "API_BASE given: that server is not ours to stop")
        else:
            with self.step("stop"):
                self.release_server("every step that needs it is done")
                if self.state["server"] and self.state["server"].get("status") != "stopped":
                    raise Failure("the server could not be stopped (above)")
        with self.step("summary"):
            self.summary()

    def mopup_passes(self) -> str:
        passes = self.state["mopup_passes"]
        while True:
            targets = self.retry_targets()
            done = sum(1 for p in passes if p["status"] == "done")
            if not targets:
                return f"nothing left to retry after {done} pass(es)"
            if done >= self.cfg.mopup_passes:
                self.say(f"MOPUP_PASSES={self.cfg.mopup_passes} spent with {len(targets)} task(s) still to retry "
                         f"({' '.join(targets)}): the tally counts them as they are; make mopup RUN={self.cfg.run} "
                         "retries them later")
                return f"{len(targets)} task(s) left after {done} pass(es)"
            self.ensure_server()
            number = len(passes) + 1
            record = {"pass": number, "status": "running", "planned": targets, "started_at": now_iso(),
                      "started_epoch": time.time()}
            passes.append(record)
            self.save()
            self.say(f"mop-up pass {number} (done so far: {done} of at most {self.cfg.mopup_passes}): started, "
                     f"{len(targets)} task(s): {' '.join(targets)}")
            before = trial_dirs(self.cfg.jobs_dir, self.cfg.job_name)
            started = time.monotonic()
            try:
                rc, died, _ = self.run_child([self.script("mopup.sh")], watch=True, AUTO_STOP="0", PROBE="1")
            finally:
                after = trial_dirs(self.cfg.jobs_dir, self.cfg.job_name)
                record.update(trials_rerun=len(after - before), ended_at=now_iso(), ended_epoch=time.time())
                if record["status"] == "running":
                    record["status"] = "interrupted"
                self.save()
            if rc == CEILING_EXIT:
                record.update(rc=rc, status="cost-ceiling")
                self.save()
                raise CeilingReached(f"mop-up pass {number}")
            record.update(rc=rc, status="server-died" if died else "done")
            self.save()
            self.say(f"mop-up pass {number}: {record['status']} in {duration(time.monotonic() - started)}, "
                     f"re-ran {record['trials_rerun']} trial(s) (exit {rc})")

    def summary(self) -> None:
        out = self.state.get("tally_output")
        if out:
            print(f"\nreproduce: the tally of run {self.cfg.run}:\n{out.rstrip()}\n", flush=True)
        for line in summary_lines(self.state, time.time()):
            print(f"reproduce: {line}", flush=True)

    # --- the whole ---------------------------------------------------------------------------------
    def run(self) -> int:
        invocation = {"pid": os.getpid(), "started_at": now_iso()}
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
            signal.signal(sig, self.on_signal)
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
            self.interrupted = None
            if self.state["server"] and self.state["server"].get("status") != "stopped" and not self.cfg.api_base:
                if not self.state.get("last_server_step_ended_at") and code != 0:
                    self.state["last_server_step_ended_at"] = now_iso()
                self.release_server(f"the pipeline {outcome.split(':')[0]}")
            invocation.update(ended_at=now_iso(), outcome=outcome)
            self.state["current_step"] = None
            self.save()
            self.remember()
        if code == CEILING_EXIT:
            for line in summary_lines(self.state, time.time()):
                print(f"reproduce: {line}", flush=True)
            self.say(f"{outcome}: the server is stopped and no other step was started. Raise MAX_COST, then "
                     f"make reproduce RUN={self.cfg.run} resumes (make cost RUN={self.cfg.run} shows the spend)")
        if code == 130:
            self.say(f"{outcome}: the server is stopped; make reproduce RUN={self.cfg.run} resumes")
        return code


def _fd_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def _token() -> str:
    token = os.environ.get("HF_TOKEN", "")
    if not token:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            token = subprocess.run(["hf", "auth", "token"], capture_output=True, text=True, timeout=60,
                                   stdin=subprocess.DEVNULL).stdout.strip()
    return token


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

    mop-up's own selection (tools/mopup_plan.py what_is_left, the plan's left_to_retry): the
    tasks that lack attempts (errored by an infra rule or unfinished; with N_ATTEMPTS > 1,
    any open attempt slot), plus the tasks harbor planned that never started (a bench killed
    early leaves them, and no trial dir names them, so the tally alone cannot see them). A final
    error (the tally's: past MAX_TASK_RETRIES) is not listed: AUTO_STOP and the passes end on it.
    """
    from tools import mopup_plan  # noqa: PLC0415  (heavy: harbor)

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
    if os.environ.get("RUN_LOCK_HELD") != str(lock) or not _fd_open(LOCK_FD):
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
            Supervisor(cfg, token, state=new_state(run)).release_recorded_server()
        raise click.ClickException(str(e)) from e
    except Failure as e:
        raise click.ClickException(str(e)) from e
    sys.exit(supervisor.run())


if __name__ == "__main__":
    cli()
