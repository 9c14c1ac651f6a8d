"""The run's server as make reproduce keeps it: one at a time, healthy before a step, stopped after.

The record of it is state/<run>/server.json (make serve writes it, make stop reads it); whether it
is up is asked of HF (hf jobs inspect) and of its /health. A server that dies under a step is
relaunched at most MAX_RELAUNCHES times and probed; a server given by API_BASE is never touched.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import time
import urllib.error
from typing import Callable

from tools import fmt, hf_client, safe_read
from tools.run.reproduce_children import Children
from tools.run.reproduce_state import Config, Failure, relaunch_is_due

TERMINAL = {"COMPLETED", "CANCELED", "ERROR", "DELETED"}
# A server whose job is RUNNING is declared dead only after this many failed /health polls in a
# row: one lost answer must not throw away a multi-day bench.
HEALTH_FAILS_TO_DIE = 3
JOB_RE = re.compile(r"^[A-Za-z0-9._-]+/[A-Za-z0-9_-]+$")


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


def health_url(endpoint: str) -> str:
    base = endpoint.rstrip("/")
    return (base[: -len("/v1")] if base.endswith("/v1") else base) + "/health"




class DeathWatch:
    """While a step runs: the server is asked every HEALTH_POLL seconds; died() turns True (once,
    recorded) when its job ends or /health stops answering HEALTH_FAILS_TO_DIE times in a row."""

    def __init__(self, server: Server):
        self.server = server
        self.fails = 0
        self.next_check = time.monotonic() + server.cfg.health_poll

    def died(self, step: str) -> bool:
        if time.monotonic() < self.next_check:
            return False
        self.next_check = time.monotonic() + self.server.cfg.health_poll
        h = self.server.health()
        self.fails = self.fails + 1 if h.http != "200" else 0
        if not (h.terminal or (h.stage == "RUNNING" and self.fails >= HEALTH_FAILS_TO_DIE)):
            return False
        # Not interrupted: trials against a dead server fail fast as infra errors, which mop-up
        # retries, and the ones that never needed the model finish as they would have. (A stop
        # would be retried too, CancelledError or interrupted-unrecorded, but would redo those.)
        self.server.say(f"the server died under {step} (job {h.job or fmt.UNKNOWN} stage {h.stage or fmt.UNKNOWN}, /health "
                        f"{h.http}): letting it finish (its trials fail as infra errors, which mop-up "
                        "retries); the server is relaunched after it")
        self.server.mark_server("died")
        return True


class Server:
    """The run's server: found, reused, launched, relaunched, probed and stopped."""

    def __init__(self, cfg: Config, token: str, state: dict, save: Callable[[], None], children: Children,
                 say: Callable[[str], None]):
        self.cfg = cfg
        self.token = token  # for /health only: in a request header, never in argv or output
        self.state = state
        self.save = save
        self.children = children
        self.say = say
        self.relaunches_now = 0

    def death_watch(self) -> DeathWatch | None:
        """What run_child checks while bench or a mop-up pass runs (nothing for an API_BASE server)."""
        return None if self.cfg.api_base else DeathWatch(self)

    def recorded_server(self) -> dict | None:
        try:
            raw = safe_read.read_regular(self.cfg.server_json, safe_read.STATE_CAP, "a server record")
        except FileNotFoundError:
            return None
        except (OSError, safe_read.Unreadable) as e:
            # Not a file that make serve writes (a FIFO would block, a directory or a huge file is no record):
            # said, never taken for "no server", which would launch a second one that bills beside it.
            raise Failure(f"{self.cfg.server_json} cannot be read as a server record ({e}): check make jobs, then "
                          "remove it") from None
        try:
            sj = safe_read.parse_json(raw)
        except safe_read.Unreadable:
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
                                  timeout=60, stdin=subprocess.DEVNULL, env=self.children.env())
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
        try:
            with hf_client.open_url(health_url(endpoint), timeout=10, auth=self.token) as response:
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
                server["stopped_at"] = fmt.stamp()
            self.state["servers"][-1] = server
            self.save()

    def adopt(self, rec: dict, how: str) -> None:
        """Record the server in server.json as this pipeline's (a new launch, or one found healthy)."""
        current = self.state["server"]
        if current and current["job"] == rec["job"]:
            current.update(endpoint=rec["endpoint"], status="up")
            self.state["servers"][-1] = current
        else:
            server = {**rec, "status": "up", "how": how, "ready_at": fmt.stamp()}
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
            if self.children.run_child([self.children.script("wait-ready.sh")])[0] == 0:
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
                if self.children.run_child([self.children.script("wait-ready.sh")])[0] == 0:
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
                self.count_relaunch()
            if self.launch(relaunch):
                return
            h = self.settled_health()

    def count_relaunch(self) -> None:
        """One more launch that replaces a server that died or failed: refused past MAX_RELAUNCHES."""
        if self.relaunches_now >= self.cfg.max_relaunches:
            raise Failure(f"the server failed to start or died {self.relaunches_now + 1} time(s) in a row "
                          f"(MAX_RELAUNCHES={self.cfg.max_relaunches}): stopping here so a crash loop "
                          f"bills no GPU. See its logs (make logs RUN={self.cfg.run}), fix the cause, then "
                          f"make reproduce RUN={self.cfg.run} again: it resumes where it stopped")
        self.relaunches_now += 1
        self.state["relaunches"] += 1
        self.save()
        self.say(f"relaunching the server ({self.relaunches_now} of at most {self.cfg.max_relaunches})")

    def launch(self, relaunch: bool) -> bool:
        """make serve once: True when the server it launched is up (and, on a relaunch, probed);
        False when it launched one that failed (recorded so); a launch that made no job is fatal."""
        before = self.recorded_server()
        rc, _, _ = self.children.run_child([self.children.script("serve.sh")])
        rec = self.recorded_server()
        launched = rec is not None and (before is None or rec["job"] != before["job"])
        if launched:
            server = {**rec, "status": "starting", "how": "relaunch" if relaunch else "launch"}
            self.state["server"] = server
            self.state["servers"].append(server)
            self.save()
            if relaunch:
                self.children.manifest("reproduce-relaunch", {"role": "server", "job_id": rec["job"].split("/")[1],
                                                              "namespace": rec["job"].split("/")[0],
                                                              "endpoint": rec["endpoint"],
                                                              "relaunch": self.state["relaunches"]})
        if rc == 0 and rec is not None:
            self.adopt(rec, "launch")
            if relaunch:
                self.probe()
            return True
        if not launched:
            raise Failure(f"make serve failed (exit {rc}, above) before any job was launched: fix that, then "
                          f"make reproduce RUN={self.cfg.run} again")
        self.mark_server("failed")
        return False

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
        rc, _, _ = self.children.run_child([self.children.script("probe.sh")])
        if rc != 0:
            raise Failure(f"the probe failed (above): the server does not serve the run right, and every trial "
                          f"would be scored against it. Fix it, then make reproduce RUN={self.cfg.run} again")

    def stop_server(self) -> bool:
        """scripts/stop.sh, retried for up to IDLE_STOP_AFTER seconds: a network blip must not
        leave the GPU billing. True once stopped."""
        deadline = time.monotonic() + self.cfg.idle_stop_after
        while True:
            rc, _, _ = self.children.run_child([self.children.script("stop.sh")])
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
