"""A loopback fake of the HF Jobs REST API, for driving the real `hf jobs` CLI in tests.

Usage:
    python tests/fakes/fake_hf_jobs.py --scenario S.json --record REQUESTS.jsonl \
        --port-file PORT_FILE [--max-lifetime 120]

Then point the real CLI at it:
    HF_ENDPOINT=http://127.0.0.1:$(cat PORT_FILE) HF_TOKEN=hf_dummy HF_HOME=$TMP/hf \
    HF_HUB_DISABLE_UPDATE_CHECK=1 hf jobs inspect --json alice/job1
and pre-seed $HF_HOME/.agent_harnesses.json with {"standardEnvVars": [], "harnesses": {}}
(tests/fakes/fakes.bash does all of this).

It binds 127.0.0.1 on a free port, writes the port to PORT_FILE once it is listening, and
exits by itself after --max-lifetime seconds. It serves the paths of docs/hf-jobs.md §4:

    GET  /api/whoami-v2                          the scenario's namespace as a user
    GET  /api/jobs/hardware                      the flavors with prices (scenario "hardware")
    GET  /api/agent-harnesses                    an empty registry
    POST /api/jobs/{ns}                          run: creates the next of "new_jobs", else "new_job"
    GET  /api/jobs/{ns}                          list, filtered by ?stage= and ?label=k=v
    GET  /api/jobs/{ns}/{id}                     inspect: advances the job's stage sequence
    GET  /api/jobs/{ns}/{id}/logs[?tail=N]       SSE, the job's log lines
    POST /api/jobs/{ns}/{id}/cancel              the job becomes CANCELED (terminal: unchanged)
    GET  /api/jobs/{ns}/{id}/metrics             SSE, one metrics event
    PUT  /api/jobs/{ns}/{id}/labels              {"labels": {...}} replaces every label of the job
    POST /api/scheduled-jobs/{ns}                schedule: {"jobSpec", "schedule", ...} creates the next
                                                 of "new_scheduled_jobs" (ids), else sched-<n>
    GET  /api/scheduled-jobs/{ns}                list, filtered by ?label=k=v (every one given)
    GET  /api/scheduled-jobs/{ns}/{id}           inspect
    DELETE /api/scheduled-jobs/{ns}/{id}         delete
    PUT  /api/scheduled-jobs/{ns}/{id}/labels    {"labels": {...}} replaces its job spec's labels
    POST /api/scheduled-jobs/{ns}/{id}/run       trigger: a job of its spec, id <id>-run-<n>,
                                                 RUNNING (the test then runs its command itself)

Unknown jobs answer 404 (the CLI prints "Job Not Found"). With "reject_token": true every
request answers 401, as Hugging Face does for a revoked token.

Scenario (JSON; every key optional):
    {
      "namespace": "alice",
      "reject_token": false,
      "jobs": {
        "job1": {
          "stages": ["SCHEDULING", "RUNNING"],   # one per inspect (GET of the job); the last sticks
          "message": "CUDA out of memory",      # status.message
          "logs": ["loading weights", "..."],
          "flavor": "h200",
          "labels": {"project": "terminal-bench-harness", "run": "qwen-t2"},
          "created_at": "2025-07-22T16:06:25.079Z",   # default: when the fake started
          "port": 30000,
          "expose_url": "http://127.0.0.1:8123",  # status.exposeUrls[0]; default https://<id>--<port>.hf.jobs
          "error_if_exists": "/tmp/x/dead",        # once this file exists the job is ERROR: it died
          "scheduling_secs": 30,                   # durations: SCHEDULING this long after created_at
          "running_secs": 3600,                    # durations.runningSecs, fixed (a finished job);
                                                   # default: seconds since it started, until canceled
          "running_secs_file": "/tmp/x/secs",      # once this file exists, its number is runningSecs
                                                   # (a test moves a job's billed time forward at will)
          "docker_image": "python:3.12-slim",      # dockerImage; default lmsysorg/sglang:latest
          "id_as_number": true,                    # the answers give the id as a JSON number (a job
                                                   # named "123" comes back as 123), as a hostile or
                                                   # changed Hub might
          "timeout_secs": 86400                    # timeoutSeconds in its answers (a run sets it from
                                                   # the spec's timeoutSeconds)
        }
      },
      "timeout_cap": 86400,                      # a run's timeoutSeconds is recorded as at most this
      "scheduled_jobs": {"wd0": {"labels": {...}, "schedule": "*/15 * * * *"}},  # already scheduled
      "new_scheduled_jobs": ["wd1", "wd2"],      # the ids POST /api/scheduled-jobs/{ns} gives, in order
      "schedule_refused": "Scheduled jobs are not enabled",  # POST /api/scheduled-jobs answers 403 so
      "hardware": [{"name": "h200", "usd_per_hour": 5.0, "gpu": "H200"}, ...],
                                                 # GET /api/jobs/hardware; default: DEFAULT_HARDWARE;
                                                 # "unavailable": 503 (the fallback path)
      "new_jobs": [{"id": "srv1", ...}, {"id": "srv2", ...}],  # one per POST, in order (a
                                                 # relaunch gets a new job); when spent, "new_job"
      "new_job": {"id": "job9", ...same keys...}, # what POST /api/jobs/{ns} creates
      "run_delay": 0,                            # seconds a run waits, after creating the job,
                                                 # before it answers (an interrupt lands there)
      "schedule_hold": "/tmp/x/release"          # POST /api/scheduled-jobs/{ns} is recorded, then
    }                                            # answered only once this file exists: the client
                                                 # is inside the call until the test says so

Every request is appended to the --record file as one JSON line:
    {"method": "POST", "path": "/api/jobs/alice/job1/cancel", "query": {}, "body": null,
     "auth": true, "at": 1767225600.25}
"at" is when it came (time.time()): a test reads a job's billed time off its run and cancel.
"auth" says whether an Authorization header came; secret values in a run's or a schedule's body
are replaced by "***", so the record never holds a token (nor does a scheduled job's stored spec).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from tests.fakes.loopback import serve_for, write_port_file

TERMINAL = {"COMPLETED", "CANCELED", "ERROR", "DELETED"}
HARDWARE_PATH = "/api/jobs/hardware"
# The default price list: the same figures as env/flavor-prices.tsv, so a test that does not
# care where prices come from sees the same dollars either way.
DEFAULT_HARDWARE = [
    {"name": "cpu-basic", "usd_per_hour": 0.01}, {"name": "cpu-upgrade", "usd_per_hour": 0.03},
    {"name": "l40sx1", "usd_per_hour": 1.80, "gpu": "L40S"}, {"name": "h200", "usd_per_hour": 5.00, "gpu": "H200"},
]
JOB_PATH = re.compile(r"^/api/jobs/(?P<ns>[^/]+)/(?P<id>[^/]+)(?:/(?P<action>[a-z]+))?$")
LIST_PATH = re.compile(r"^/api/jobs/(?P<ns>[^/]+)$")
SCHEDULED_PATH = re.compile(r"^/api/scheduled-jobs/(?P<ns>[^/]+)(?:/(?P<id>[^/]+)(?:/(?P<action>[a-z]+))?)?$")


def masked(spec: dict) -> dict:
    """A job spec with its secrets' values replaced by "***": neither the record nor the fake's
    own memory holds a token."""
    if isinstance(spec, dict) and isinstance(spec.get("secrets"), dict):
        return {**spec, "secrets": {k: "***" for k in spec["secrets"]}}
    return spec


def _now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _iso(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _parse_iso(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def hardware_info(spec: dict) -> dict:
    """One JobHardwareInfo as the Hub sends it (huggingface_hub 2.4.0 _jobs_api.JobHardwareInfo):
    the price per minute, in micro-dollars and in dollars."""
    per_minute = spec["usd_per_hour"] / 60
    gpu = spec.get("gpu")
    return {
        "name": spec["name"], "prettyName": spec["name"].upper(), "cpu": "8 vCPU", "ram": "32 GB",
        "ephemeralStorage": "50 GB",
        "accelerator": {"type": "gpu", "model": gpu, "quantity": "1", "vram": "80 GB", "manufacturer": "Nvidia"} if gpu else None,
        "unitCostMicroUSD": round(per_minute * 1e6), "unitCostUSD": per_minute, "unitLabel": "minute",
    }


class Job:
    """One job's scripted life: a stage per inspect, log lines, and what it was created with."""

    def __init__(self, job_id: str, spec: dict, namespace: str, started: str):
        self.id = job_id
        self.namespace = namespace
        self.stages = list(spec.get("stages") or ["RUNNING"])
        self.message = spec.get("message")
        self.logs = list(spec.get("logs") or [])
        self.flavor = spec.get("flavor", "cpu-basic")
        self.labels = dict(spec.get("labels") or {})
        self.created_at = spec.get("created_at", started)
        self.port = spec.get("port")
        self.expose_url = spec.get("expose_url")
        self.error_if_exists = spec.get("error_if_exists")
        self.image = spec.get("docker_image", "lmsysorg/sglang:latest")
        self.command = list(spec.get("command") or [])
        self.scheduling_secs = spec.get("scheduling_secs")
        self.running_secs = spec.get("running_secs")
        self.running_secs_file = spec.get("running_secs_file")
        self.id_as_number = bool(spec.get("id_as_number"))
        self.timeout_secs = spec.get("timeout_secs")
        self.initiator = spec.get("initiator")
        self.inspections = 0
        self.canceled = False
        self.canceled_at: dt.datetime | None = None

    @property
    def stage(self) -> str:
        if self.canceled:
            return "CANCELED"
        if self.error_if_exists and os.path.exists(self.error_if_exists):
            return "ERROR"
        return self.stages[min(self.inspections, len(self.stages) - 1)]

    def inspect(self) -> dict:
        info = self.info()
        if not self.canceled:
            self.inspections += 1
        return info

    def cancel(self) -> None:
        if self.stage not in TERMINAL:
            self.canceled = True
            self.canceled_at = dt.datetime.now(dt.timezone.utc)

    def durations(self) -> dict:
        """durations as the Hub computes them (camelCase, JobDurations): a fixed running_secs
        when the scenario gives one, else seconds since it started, frozen when canceled."""
        created = _parse_iso(self.created_at)
        sched = self.scheduling_secs or 0
        started = created + dt.timedelta(seconds=sched)
        if self.running_secs_file and os.path.exists(self.running_secs_file):
            with open(self.running_secs_file, encoding="utf-8") as f:
                running = int(f.read().strip())
        elif self.running_secs is not None:
            running = self.running_secs
        else:
            until = self.canceled_at or dt.datetime.now(dt.timezone.utc)
            running = max(0, int((until - started).total_seconds()))
        if self.stage == "SCHEDULING":
            return {"schedulingSecs": None, "runningSecs": None, "totalSecs": sched}
        return {"schedulingSecs": sched, "runningSecs": running, "totalSecs": sched + running}

    def info(self) -> dict:
        status: dict = {"stage": self.stage, "message": self.message if self.stage in TERMINAL else None}
        if self.expose_url:
            status["exposeUrls"] = [self.expose_url]
        elif self.port:
            status["exposeUrls"] = [f"https://{self.id}--{self.port}.hf.jobs"]
        durations = self.durations()
        started = _parse_iso(self.created_at) + dt.timedelta(seconds=durations["schedulingSecs"] or 0)
        info = {
            "id": int(self.id) if self.id_as_number else self.id,
            "owner": {"id": "u1", "name": self.namespace, "type": "user"},
            "status": status,
            "createdAt": self.created_at,
            "durations": durations,
            "dockerImage": self.image,
            "command": self.command,
            "arguments": [],
            "flavor": self.flavor,
            "labels": self.labels,
        }
        if self.port:
            info["expose"] = {"ports": [self.port], "portsPublic": []}
        if self.timeout_secs is not None:
            info["timeoutSeconds"] = self.timeout_secs
        if self.initiator:
            info["initiator"] = self.initiator
        if durations["runningSecs"] is not None:
            info["startedAt"] = _iso(started)
        if self.stage in TERMINAL and durations["runningSecs"] is not None:
            info["finishedAt"] = _iso(started + dt.timedelta(seconds=durations["runningSecs"]))
        return info


class Scheduled:
    """One scheduled job: its spec (secrets masked), schedule, and the jobs it was triggered into."""

    def __init__(self, sid: str, body: dict, namespace: str, created: str):
        self.id, self.namespace, self.created_at = sid, namespace, created
        self.spec = masked(dict(body.get("jobSpec") or {}))
        self.schedule = body.get("schedule")
        self.suspend = bool(body.get("suspend", False))
        self.concurrency = bool(body.get("concurrency", False))
        self.runs: list[str] = []

    def info(self) -> dict:
        last = {"id": self.runs[-1], "at": _now_iso()} if self.runs else None
        return {"id": self.id, "createdAt": self.created_at, "jobSpec": self.spec, "schedule": self.schedule,
                "suspend": self.suspend, "concurrency": self.concurrency,
                "status": {"lastJob": last, "nextJobRunAt": _now_iso()},
                "owner": {"id": "u1", "name": self.namespace, "type": "user"}}


class FakeJobsAPI:
    def __init__(self, scenario: dict, record_path: str | None):
        self.namespace = scenario.get("namespace", "alice")
        self.reject_token = bool(scenario.get("reject_token"))
        started = _now_iso()
        self.jobs = {jid: Job(jid, spec, self.namespace, started) for jid, spec in (scenario.get("jobs") or {}).items()}
        self.new_job = scenario.get("new_job") or {"id": "job-new"}
        self.new_jobs = list(scenario.get("new_jobs") or [])
        self.run_delay = float(scenario.get("run_delay") or 0)
        self.hardware = scenario.get("hardware", DEFAULT_HARDWARE)
        self.timeout_cap = scenario.get("timeout_cap")
        self.scheduled = {sid: Scheduled(sid, {"jobSpec": {"labels": spec.get("labels") or {}}, **spec},
                                         self.namespace, started)
                          for sid, spec in (scenario.get("scheduled_jobs") or {}).items()}
        self.new_scheduled = list(scenario.get("new_scheduled_jobs") or [])
        self.schedule_refused = scenario.get("schedule_refused")
        self.schedule_hold = scenario.get("schedule_hold")
        self.started = started
        self.record_path = record_path
        self.lock = threading.Lock()

    def record(self, method: str, path: str, query: dict, body, auth: bool) -> None:
        if not self.record_path:
            return
        if isinstance(body, dict):
            body = masked(body)
            if isinstance(body.get("jobSpec"), dict):
                body = {**body, "jobSpec": masked(body["jobSpec"])}
        line = json.dumps({"method": method, "path": path, "query": query, "body": body, "auth": auth,
                           "at": time.time()})
        with self.lock, open(self.record_path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


class Handler(BaseHTTPRequestHandler):
    api: FakeJobsAPI  # set on the class by main()
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass  # the JSONL record is the log; stderr stays quiet for bats

    # --- plumbing -------------------------------------------------------------------------
    def _reply(self, code: int, payload=None, *, content_type="application/json", raw: bytes | None = None):
        body = raw if raw is not None else json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if code >= 400 and isinstance(payload, dict) and "error" in payload:
            self.send_header("X-Error-Message", payload["error"])
        self.end_headers()
        self.wfile.write(body)

    def _sse(self, events: list[dict]):
        raw = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
        self._reply(200, content_type="text/event-stream", raw=raw)

    def _handle(self, method: str):
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        body = None
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode(errors="replace")
        api = self.api
        api.record(method, url.path, query, body, auth=bool(self.headers.get("Authorization")))

        if url.path == "/api/agent-harnesses":
            return self._reply(200, {"standardEnvVars": [], "harnesses": {}})
        if api.reject_token:
            return self._reply(401, {"error": "Invalid credentials in Authorization header"})
        if url.path == "/api/whoami-v2":
            return self._reply(200, {"name": api.namespace, "type": "user", "id": "u1", "orgs": []})

        if url.path == HARDWARE_PATH and method == "GET":
            if api.hardware == "unavailable":
                return self._reply(503, {"error": "Service Unavailable"})
            return self._reply(200, [hardware_info(h) for h in api.hardware])

        if m := LIST_PATH.match(url.path):
            if method == "POST":
                return self._run(body or {})
            return self._list(query)
        if m := SCHEDULED_PATH.match(url.path):
            return self._scheduled(method, m, query, body)

        m = JOB_PATH.match(url.path)
        if not m:
            return self._reply(404, {"error": f"no such route {method} {url.path}"})
        with api.lock:
            job = api.jobs.get(m["id"])
        if job is None or m["ns"] != api.namespace:
            return self._reply(404, {"error": "Job not found"})
        action = m["action"]
        if method == "GET" and action is None:
            with api.lock:
                return self._reply(200, job.inspect())
        if method == "GET" and action == "logs":
            lines = job.logs
            if "tail" in query:
                lines = lines[-int(query["tail"][0]) :] if int(query["tail"][0]) > 0 else []
            stamp = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=5)
            ts = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
            events = [{"data": f"===== Job started at {ts} =====", "timestamp": ts}]
            events += [{"data": line, "timestamp": ts} for line in lines]
            return self._sse(events)
        if method == "POST" and action == "cancel":
            with api.lock:
                job.cancel()
            return self._reply(200, {})
        if method == "PUT" and action == "labels":
            with api.lock:
                job.labels = dict((body or {}).get("labels") or {})
                return self._reply(200, job.info())
        if method == "GET" and action == "metrics":
            return self._sse([{"cpu_usage_pct": 1, "cpu_millicores": 100, "memory_used_bytes": 1, "memory_total_bytes": 2,
                               "rx_bps": 0, "tx_bps": 0, "gpus": {}, "replica": "x1"}])
        return self._reply(404, {"error": f"no such route {method} {url.path}"})

    def _run(self, body: dict):
        api = self.api
        with api.lock:
            spec = dict(api.new_jobs.pop(0) if api.new_jobs else api.new_job)
        spec.setdefault("flavor", body.get("flavor", "cpu-basic"))
        spec.setdefault("labels", body.get("labels") or {})
        spec.setdefault("docker_image", body.get("dockerImage"))
        spec.setdefault("command", body.get("command") or [])
        ports = (body.get("expose") or {}).get("ports") or []
        if ports:
            spec.setdefault("port", ports[0])
        if body.get("timeoutSeconds") is not None:
            asked = body["timeoutSeconds"]
            spec.setdefault("timeout_secs", min(asked, api.timeout_cap) if api.timeout_cap else asked)
        job = Job(spec.get("id", "job-new"), spec, api.namespace, _now_iso())
        with api.lock:
            api.jobs[job.id] = job
        # HF has accepted the job (it bills from now) but the client has no id yet.
        time.sleep(api.run_delay)
        return self._reply(200, job.info())

    def _scheduled(self, method: str, m: re.Match, query: dict, body):
        """The scheduled-jobs routes (huggingface_hub 2.4.0 hf_api.py, *_scheduled_job*)."""
        api = self.api
        if m["ns"] != api.namespace:
            return self._reply(404, {"error": "Scheduled job not found"})
        if m["id"] is None:
            if method == "POST" and api.schedule_refused:
                return self._reply(403, {"error": api.schedule_refused})
            if method == "POST":
                while api.schedule_hold and not os.path.exists(api.schedule_hold):
                    time.sleep(0.05)  # until the test releases it (the fake's lifetime bounds it)
                with api.lock:
                    sid = api.new_scheduled.pop(0) if api.new_scheduled else f"sched-{len(api.scheduled) + 1}"
                    api.scheduled[sid] = Scheduled(sid, body or {}, api.namespace, _now_iso())
                    return self._reply(200, api.scheduled[sid].info())
            labels = dict(item.split("=", 1) for item in query.get("label") or [])
            with api.lock:
                rows = [sj.info() for sj in api.scheduled.values()
                        if all((sj.spec.get("labels") or {}).get(k) == v for k, v in labels.items())]
            return self._reply(200, rows)
        with api.lock:
            sj = api.scheduled.get(m["id"])
        if sj is None:
            return self._reply(404, {"error": "Scheduled job not found"})
        action = m["action"]
        if method == "GET" and action is None:
            return self._reply(200, sj.info())
        if method == "DELETE" and action is None:
            with api.lock:
                api.scheduled.pop(sj.id, None)
            return self._reply(200, {})
        if method == "PUT" and action == "labels":
            with api.lock:
                sj.spec["labels"] = dict((body or {}).get("labels") or {})
                return self._reply(200, sj.info())
        if method == "POST" and action == "run":
            with api.lock:
                run_id = f"{sj.id}-run-{len(sj.runs) + 1}"
                sj.runs.append(run_id)
                spec = sj.spec
                job = Job(run_id, {"labels": dict(spec.get("labels") or {}), "flavor": spec.get("flavor", "cpu-basic"),
                                   "docker_image": spec.get("dockerImage"), "command": spec.get("command") or [],
                                   "timeout_secs": spec.get("timeoutSeconds"),
                                   "initiator": {"type": "scheduled-job", "id": sj.id}}, api.namespace, _now_iso())
                api.jobs[run_id] = job
                return self._reply(200, job.info())
        return self._reply(404, {"error": f"no such route {method} {self.path}"})

    def _list(self, query: dict):
        stages = set(query.get("stage") or [])
        labels = dict(item.split("=", 1) for item in query.get("label") or [])
        with self.api.lock:
            rows = [
                job.info()
                for job in self.api.jobs.values()
                if (not stages or job.stage in stages)
                and all(job.labels.get(k) == v for k, v in labels.items())
            ]
        return self._reply(200, rows)

    def do_GET(self):  # noqa: N802 - http.server's naming
        self._handle("GET")

    def do_POST(self):  # noqa: N802
        self._handle("POST")

    def do_PUT(self):  # noqa: N802
        self._handle("PUT")

    def do_DELETE(self):  # noqa: N802
        self._handle("DELETE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", help="JSON scenario file (see the module docstring)")
    parser.add_argument("--record", help="append every request to this JSONL file")
    parser.add_argument("--port-file", required=True, help="write the listening port here")
    parser.add_argument("--max-lifetime", type=float, default=120.0, help="exit after this many seconds")
    args = parser.parse_args()

    scenario = {}
    if args.scenario:
        with open(args.scenario, encoding="utf-8") as f:
            scenario = json.load(f)
    Handler.api = FakeJobsAPI(scenario, args.record)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    write_port_file(server, args.port_file)
    serve_for(server, args.max_lifetime)

if __name__ == "__main__":
    main()
