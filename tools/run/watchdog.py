"""watchdog: the run's own watchdog, a scheduled HF Job that cancels the run's server once nothing holds the run.

A run's server is stopped by the run itself: AUTO_STOP, make reproduce, make stop. When all of
those are gone (a laptop closed, a supervisor job out of time, a SIGKILL) only the server's own
--timeout is left, and HF enforced that late in the reference (91 h against 24 h). So make serve
installs beside the server a scheduled HF Job of its own (WATCHDOG_EVERY, on WATCHDOG_FLAVOR)
that runs `check` below. docs/watchdog.md says how it decides and what it costs.

  beat     here, and inside a remote job, while a verb holds the run's lock (scripts/lib-watchdog.sh
           runs it every HEARTBEAT_EVERY): heartbeat=<unix seconds> on each live server of the run
  check    the scheduled job, on HF: reads the facts, decides (decide()), acts, records
  timeout  here (make doctor CHECK_TIMEOUT=1, make status): a job's --timeout as HF's answer holds it

The scheduled job runs only what tools/run/watchdog_bundle.py packs at make serve, so this module
imports nothing of the repository but tools.safe_read and tools.fmt (the standard library only) and
tools.hf_client (how every tool reaches HF: its timeout, HF_CALL_TIMEOUT, and its token), and of
the world only huggingface_hub and what it depends on (click, httpx2). Facts relied on, in huggingface_hub
2.4.0 (tests/test_watchdog.py asserts each in the installed source):
  - HfApi.list_jobs(status=, labels=, namespace=), cancel_job(job_id=, namespace=);
  - HfApi.update_job_labels(job_id=, labels=, namespace=) REPLACES every label of the job (PUT
    /api/jobs/{ns}/{id}/labels): a writer reads the labels, changes its own, writes all back;
  - HfApi.list_scheduled_jobs(labels=, namespace=), update_scheduled_job_labels(scheduled_job_id=,
    labels=, namespace=), delete_scheduled_job(scheduled_job_id=, namespace=); a scheduled job's
    labels are its job_spec.labels;
  - a label's key and value: at most 100 letters, digits, '-' and '_';
  - JobInfo has no timeout field, so `hf jobs inspect` shows none: `timeout` reads HF's answer.

Exit codes: 0 done (check: decided and acted), 1 HF could not be read or asked (one line says
what; check: nothing decided, the next run tries again), 2 usage.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
import time
import urllib.error
from typing import TYPE_CHECKING

import click
import httpx2

from tools import fmt, hf_client
from tools.safe_read import clip, printable

if TYPE_CHECKING:
    from huggingface_hub import HfApi

# Labels: what a beat writes on a server, what the watchdog keeps on itself and leaves on a
# server it cancelled (make status reads them all).
HEARTBEAT = "heartbeat"
CHECKED = "checked"
VERDICT = "verdict"
TOKENS = "tokens_"  # + a server's job id: its generation-token counter at the last check
ON_SERVER_VERDICT = "watchdog_verdict"
ON_SERVER_CHECKED = "watchdog_checked"
ROLE = "watchdog"

LIVE = ("SCHEDULING", "RUNNING")
# A job of the run with one of these roles runs the run's own verbs (make reproduce, bench or
# mop-up inside a remote job), which hold the run there: while it lives, the run is held.
HOLDER_ROLES = ("supervisor", "bench", "mopup")
LABEL = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
# A time read from a label: a whole number of seconds in the years 2000-2199, else left out.
EPOCH_RANGE = (946_684_800, 7_258_118_400)
COUNT_CAP = 10**15  # a token counter past this is not one
CLOCK_SKEW = 600  # seconds a heartbeat (another machine's clock) may be ahead of this check's
# The figures read from a server's Prometheus /metrics: vLLM's, and sglang's (with
# --enable-metrics, env/servers/*sglang*.env). Requests running, and generated tokens so far. A
# data-parallel server's SMG (label gateway=smg) serves no /metrics on its port: it merges its
# engines' figures at /engine_metrics, with ':' in a name written '_' (model_gateway's
# metrics_aggregator.rs), so names are compared with ':' read as '_'.
RUNNING_METRICS = ("vllm:num_requests_running", "sglang:num_running_reqs")
TOKEN_METRICS = ("vllm:generation_tokens_total", "sglang:generation_tokens_total")
GATEWAY_LABEL = ("gateway", "smg")
METRICS_CAP = 8 << 20  # bytes of /metrics read: vLLM's is tens of KB
# Seconds a check gives one server's /metrics in all (it answers tens of KB in well under a second),
# and one socket read of it at most. A check runs every WATCHDOG_EVERY (5 min at the least) under
# that --timeout: it must end, and decide, long before.
METRICS_DEADLINE = 30.0
METRICS_READ_WAIT = 10.0
# A sample line: a name, a label set whose quoted values may hold any character ('}' and escaped
# quotes included), then the value.
METRICS_LINE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?[ \t]+(\S+)')
HF_ERRORS = (httpx2.HTTPError, OSError, ValueError, KeyError, TypeError)

def say(text: str) -> None:
    print(f"watchdog: {text}", flush=True)


# --- facts ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class Server:
    id: str
    stage: str
    created: float | None  # when HF created it: its launch held the run then
    heartbeat: float | None  # the last beat of whatever held the run
    url: str | None  # its exposed port's URL, where its metrics are asked
    labels: dict[str, str]
    metrics_path: str = "/metrics"  # /engine_metrics behind SMG (a data-parallel server)


@dataclasses.dataclass
class Holder:
    id: str
    role: str  # one of HOLDER_ROLES
    stage: str
    created: float | None


@dataclasses.dataclass
class Metrics:
    running: float | None = None  # requests running now
    tokens: float | None = None  # tokens generated since the server started
    problem: str | None = None  # why the figures are unknown (then neither counts as activity)


@dataclasses.dataclass
class Decision:
    verdict: str  # held | supervised | busy | cancelled | no-server (and cancel-failed, when HF refused)
    reason: str
    cancel: bool = False  # cancel the run's live servers
    remove: bool = False  # then delete the run's watchdog (this one)


def digits_label(labels: dict, key: str, most: int) -> int | None:
    """A label holding a whole number of at most MOST ASCII digits, else None. str.isdigit() also
    takes '²' or '٣', which int() then refuses or reads as another number."""
    value = labels.get(key)
    return int(value) if isinstance(value, str) and re.fullmatch(rf"[0-9]{{1,{most}}}", value) else None


def epoch_label(labels: dict, key: str) -> float | None:
    """A label holding unix seconds, when it is one in the years 2000-2199."""
    seconds = digits_label(labels, key, 12)
    return float(seconds) if seconds is not None and EPOCH_RANGE[0] <= seconds <= EPOCH_RANGE[1] else None


def count_label(labels: dict, key: str) -> float | None:
    count = digits_label(labels, key, 16)
    return float(count) if count is not None and count <= COUNT_CAP else None


def ago(seconds: float) -> str:
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def server_of(job) -> Server:
    labels = {str(k): str(v) for k, v in (job.labels or {}).items()}
    created = job.created_at.timestamp() if job.created_at else None
    urls = job.status.expose_urls or []
    url = urls[0] if urls and isinstance(urls[0], str) and re.match(r"^https?://[^\s]+$", urls[0]) else None
    if url is None and job.expose and isinstance(job.expose[0], int):
        url = f"https://{job.id}--{job.expose[0]}.hf.jobs"  # the proxy's URL (docs/hf-jobs.md §1.4)
    return Server(id=job.id, stage=str(job.status.stage), created=created, heartbeat=epoch_label(labels, HEARTBEAT),
                  url=url.rstrip("/") if url else None, labels=labels,
                  metrics_path="/engine_metrics" if labels.get(GATEWAY_LABEL[0]) == GATEWAY_LABEL[1] else "/metrics")


def parse_metrics(text: str) -> Metrics:
    """Requests running and tokens generated, summed over every label set, from a Prometheus
    text exposition. A sample that is not a finite count (NaN, a word) is left out alone: one bad
    label set must not hide the requests another shows running. Only when a figure has no good
    sample at all is it unknown, and then the bad one is named."""
    running = tokens = None
    bad = None
    wanted = {name.replace(":", "_"): name for name in RUNNING_METRICS + TOKEN_METRICS}
    for line in text.splitlines():
        m = METRICS_LINE.match(line)
        name = wanted.get(m.group(1).replace(":", "_")) if m else None
        if name is None:
            continue
        try:
            value = float(m.group(2))
        except ValueError:
            bad = bad or f"{m.group(1)} is {printable(m.group(2))[:40]}, not a number"
            continue
        if not (math.isfinite(value) and 0 <= value <= COUNT_CAP):
            bad = bad or f"{m.group(1)} is {printable(m.group(2))[:40]}, not a count"
            continue
        if name in RUNNING_METRICS:
            running = (running or 0) + value
        else:
            tokens = (tokens or 0) + value
    if running is None and tokens is None:
        return Metrics(problem=bad or f"/metrics holds none of {', '.join(RUNNING_METRICS + TOKEN_METRICS)}")
    return Metrics(running=running, tokens=tokens)


def fetch_metrics(url: str, token: str | None, deadline: float = METRICS_DEADLINE, path: str = "/metrics") -> Metrics:
    """GET <url><path> (/metrics, or SMG's /engine_metrics) through the jobs proxy (the token in a
    header, never in a URL or argv), all of it within DEADLINE seconds. A socket timeout bounds each read, not the answer: a server that
    sends a byte every few seconds would hold every check until HF kills it at its --timeout, and
    a check that never ends never cancels."""
    end = time.monotonic() + deadline
    chunks, size = [], 0
    try:
        # Each socket operation waits at most METRICS_READ_WAIT: the whole answer ends within
        # DEADLINE + METRICS_READ_WAIT, however it trickles.
        with hf_client.open_url(f"{url}{path}", timeout=min(METRICS_READ_WAIT, deadline), auth=token) as answer:
            while size <= METRICS_CAP:
                if time.monotonic() >= end:
                    return Metrics(problem=f"GET {path} did not finish within {deadline:g} s")
                chunk = answer.read1(65536)  # what one read brings, not a whole 64 KB
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
    except urllib.error.HTTPError as e:
        return Metrics(problem=f"GET {path} answered {e.code}" + (" (sglang serves it only with --enable-metrics)"
                                                                   if e.code == 404 and path == "/metrics" else ""))
    except (urllib.error.URLError, OSError, ValueError) as e:
        if time.monotonic() >= end:
            return Metrics(problem=f"GET {path} did not finish within {deadline:g} s")
        return Metrics(problem=f"GET {path} failed: {printable(str(getattr(e, 'reason', e)))[:200]}")
    if size > METRICS_CAP:
        return Metrics(problem=f"GET {path} answered more than {METRICS_CAP} bytes")
    return parse_metrics(b"".join(chunks).decode("utf-8", "replace"))


# --- the decision ----------------------------------------------------------------------------------


def last_held(servers: list[Server], now: float) -> float | None:
    """When something last held the run, as the servers show it: their latest heartbeat, or their
    creation (make serve holds the run while it launches). A heartbeat later than now by more than
    CLOCK_SKEW came from a clock that is wrong: it would hold the run for as long, so it is left out."""
    return max((t for s in servers for t in (s.heartbeat, s.created) if t is not None and t <= now + CLOCK_SKEW),
               default=None)


def activity(servers: list[Server], metrics: dict[str, Metrics], last_tokens: dict[str, float]) -> str | None:
    """What shows a trial under way, from the servers' own figures; None when nothing does."""
    for s in servers:
        m = metrics.get(s.id)
        if m is None or m.problem:
            continue
        if m.running:
            return f"{s.id} has {m.running:g} request(s) running"
        before = last_tokens.get(s.id)
        if m.tokens is not None and before is not None and m.tokens > before:
            return f"{s.id} generated {m.tokens - before:g} token(s) since the last check"
    return None


def stuck(h: Holder, now: float, grace: float) -> bool:
    """A job of the run that has not started WATCHDOG_GRACE after its creation (or whose creation is
    unknown) no longer holds the run: HF may keep it SCHEDULING for ever, and the idle server with it."""
    return h.stage != "RUNNING" and (h.created is None or now - h.created > grace)


def decide(now: float, grace: float, servers: list[Server], holders: list[Holder], metrics: dict[str, Metrics],
           last_tokens: dict[str, float]) -> Decision:
    """The run's live servers are cancelled only when nothing has held the run for longer than
    `grace` seconds, no job of the run that holds it runs (or, scheduled, has had less than `grace`
    to start), and no trial is under way by the servers' own figures. Figures that cannot be read
    are unknown: never taken for activity."""
    if not servers:
        return Decision("no-server", "the run has no live server job", remove=True)
    held = last_held(servers, now)
    if held is not None and now - held <= grace:
        return Decision("held", f"the run was last held {ago(now - held)} ago, within WATCHDOG_GRACE ({ago(grace)})")
    holding = [h for h in holders if not stuck(h, now, grace)]
    if holding:
        return Decision("supervised", "job(s) of the run that hold it are " + " ".join(
            f"{h.id} ({h.role}, {'running' if h.stage == 'RUNNING' else f'scheduled {ago(now - h.created)} ago'})"
            for h in holding))
    busy = activity(servers, metrics, last_tokens)
    if busy:
        return Decision("busy", f"a trial is under way: {busy}")
    since = f"for {ago(now - held)}" if held is not None else "ever (no heartbeat, no creation time)"
    unknown = [f"{s.id}: {metrics[s.id].problem}" for s in servers if s.id in metrics and metrics[s.id].problem]
    figures = (f"the servers' metrics are unknown ({'; '.join(unknown)}), which is not activity" if unknown
               else "the servers' metrics show no trial under way")
    never = "".join(f" ({h.id} ({h.role}) has not started "
                    + (f"{ago(now - h.created)} after its creation" if h.created is not None else "and its creation is unknown")
                    + f", past WATCHDOG_GRACE: it no longer holds the run)" for h in holders)
    return Decision("cancelled", f"nothing has held the run {since} (WATCHDOG_GRACE {ago(grace)}), no job of the run "
                                 f"that holds it runs{never}, and {figures}", cancel=True, remove=True)


# --- labels ----------------------------------------------------------------------------------------


def relabel(current: dict[str, str], changes: dict[str, str], required: dict[str, str]) -> dict[str, str]:
    """The whole label set to write back (HF replaces them all): CURRENT with CHANGES applied
    (None removes a key). Refused when CURRENT lacks a label the run finds its jobs by (REQUIRED):
    writing it back would hide the job from the run, and from this watchdog."""
    missing = {k: v for k, v in required.items() if current.get(k) != v}
    if missing:
        raise ValueError(f"its labels lack {' '.join(f'{k}={v}' for k, v in missing.items())}: not rewritten")
    # Only what this writer writes is checked: a label someone else put on the job (HF took it) goes
    # back as it came. Refusing the whole write for it would leave the server without its heartbeat,
    # and the watchdog would cancel a run that is held.
    bad = [k for k, v in changes.items() if not (LABEL.match(k) and (v is None or v == "" or LABEL.match(v)))]
    if bad:
        raise ValueError(f"label(s) {' '.join(printable(k)[:100] for k in bad)} are not letters, digits, '-' "
                         "and '_' of at most 100 characters: not rewritten")
    out = {k: v for k, v in current.items() if k not in changes}
    out.update({k: v for k, v in changes.items() if v is not None})
    return out


# --- beat ------------------------------------------------------------------------------------------


def beat(api: HfApi, *, run: str, project: str, instance: str, namespace: str | None, now: float) -> list[str]:
    """heartbeat=<now> on each live server job of the run's instance (never another checkout's run of
    the same name); the ids beaten."""
    run_labels = {"project": project, "run": run, "instance": instance, "role": "server"}
    beaten = []
    for job in api.list_jobs(status=list(LIVE), labels=run_labels, namespace=namespace):
        current = {str(k): str(v) for k, v in (job.labels or {}).items()}
        labels = relabel(current, {HEARTBEAT: str(int(now))}, run_labels)
        api.update_job_labels(job_id=job.id, labels=labels, namespace=namespace)
        beaten.append(job.id)
    return beaten


# --- check -----------------------------------------------------------------------------------------


@dataclasses.dataclass
class Run:
    run: str
    project: str
    instance: str  # the run's instance (scripts/lib.sh): two checkouts' runs of one name are two runs
    namespace: str
    grace: float

    @property
    def labels(self) -> dict[str, str]:
        return {"project": self.project, "run": self.run, "instance": self.instance}


def describe(s: Server, now: float, m: Metrics | None, before: float | None) -> str:
    parts = [f"server {s.id} {s.stage}"]
    if s.created is not None:
        parts.append(f"created {ago(now - s.created)} ago")
    if s.heartbeat is None:
        parts.append("no heartbeat")
    elif s.heartbeat > now + CLOCK_SKEW:
        parts.append(f"heartbeat {ago(s.heartbeat - now)} ahead of this check's clock (left out)")
    else:
        parts.append(f"heartbeat {ago(now - s.heartbeat)} ago")
    if m is None:
        parts.append("metrics: not asked (not running, or no exposed URL)")
    elif m.problem:
        parts.append(f"metrics: unknown ({m.problem})")
    else:
        since = f" (+{m.tokens - before:g})" if before is not None and m.tokens is not None else ""
        tokens = "?" if m.tokens is None else f"{m.tokens:g}{since}"
        parts.append(f"metrics: {'?' if m.running is None else f'{m.running:g}'} running, {tokens} tokens generated")
    return ", ".join(parts)


def check(api: HfApi, cfg: Run, *, token: str | None, now: float) -> int:
    """One check of the run: read every fact, decide, act, record; each step logged."""
    try:
        mine = api.list_scheduled_jobs(labels={**cfg.labels, "role": ROLE}, namespace=cfg.namespace)
        jobs = list(api.list_jobs(status=list(LIVE), labels=cfg.labels, namespace=cfg.namespace))
    except HF_ERRORS as e:
        say(f"run {cfg.run}: cannot read the run's jobs ({printable(clip(str(e), 300) or '')}): nothing decided; the "
            "next check tries again")
        return 1
    if not mine:
        say(f"run {cfg.run}: its watchdog was removed meanwhile (make stop, or a new make serve): nothing to do")
        return 0
    roles = {j.id: str((j.labels or {}).get("role", "")) for j in jobs}
    servers = [server_of(j) for j in jobs if roles[j.id] == "server"]
    holders = [Holder(id=j.id, role=roles[j.id], stage=str(j.status.stage),
                      created=j.created_at.timestamp() if j.created_at else None)
               for j in jobs if roles[j.id] in HOLDER_ROLES]
    own = {str(k): str(v) for k, v in (mine[0].job_spec.labels or {}).items()}
    last_tokens = {s.id: t for s in servers if (t := count_label(own, TOKENS + s.id)) is not None}
    metrics = {s.id: fetch_metrics(s.url, token, path=s.metrics_path) for s in servers if s.stage == "RUNNING" and s.url}
    for s in servers:
        say(describe(s, now, metrics.get(s.id), last_tokens.get(s.id)))
    for h in holders:
        say(f"job {h.id} ({h.role}) of the run is {h.stage}"
            + (f", created {ago(now - h.created)} ago" if h.created is not None else ""))
    d = decide(now, cfg.grace, servers, holders, metrics, last_tokens)
    say(f"run {cfg.run}: {d.verdict}: {d.reason}")
    if d.cancel and not cancel_servers(api, cfg, servers, now):
        # It stays, and its next check tries again: never gone while a server may be billing.
        for sj in mine:
            record(api, cfg, sj, {CHECKED: str(int(now)), VERDICT: "cancel-failed"})
        return 1
    if d.remove:
        for sj in mine:
            remove_self(api, cfg, sj.id)
        return 0
    tokens = {TOKENS + s.id: str(int(m.tokens)) for s in servers if (m := metrics.get(s.id)) and m.tokens is not None}
    stale = {k: None for k in own if k.startswith(TOKENS) and k not in tokens}
    for sj in mine:
        record(api, cfg, sj, {CHECKED: str(int(now)), VERDICT: d.verdict, **stale, **tokens})
    return 0


def cancel_servers(api: HfApi, cfg: Run, servers: list[Server], now: float) -> bool:
    """The verdict on each server's own labels first (make status shows it once this watchdog is
    gone), then its cancel; a failed label write never keeps a server billing. True when every
    cancel went through."""
    cancelled = True
    for s in servers:
        try:
            labels = relabel(s.labels, {ON_SERVER_VERDICT: "cancelled", ON_SERVER_CHECKED: str(int(now))},
                             {**cfg.labels, "role": "server"})
            api.update_job_labels(job_id=s.id, labels=labels, namespace=cfg.namespace)
        except HF_ERRORS as e:
            say(f"could not write the verdict on server {s.id}'s labels ({printable(clip(str(e), 200) or '')}); "
                "cancelling it anyway")
        try:
            api.cancel_job(job_id=s.id, namespace=cfg.namespace)
            say(f"cancelled server {cfg.namespace}/{s.id}")
        except HF_ERRORS as e:
            cancelled = False
            say(f"could not cancel server {cfg.namespace}/{s.id} ({printable(clip(str(e), 200) or '')}): it may be "
                f"billing; the next check tries again (hf jobs cancel {cfg.namespace}/{s.id})")
    return cancelled


def remove_self(api: HfApi, cfg: Run, scheduled_id: str) -> None:
    try:
        api.delete_scheduled_job(scheduled_job_id=scheduled_id, namespace=cfg.namespace)
        say(f"removed itself (scheduled job {cfg.namespace}/{scheduled_id})")
    except HF_ERRORS as e:
        say(f"could not remove itself ({printable(clip(str(e), 200) or '')}): the next check tries again")


def record(api: HfApi, cfg: Run, sj, changes: dict[str, str | None]) -> None:
    """The check's time, verdict and token counters on the watchdog's own labels."""
    try:
        current = {str(k): str(v) for k, v in (sj.job_spec.labels or {}).items()}
        labels = relabel(current, changes, {**cfg.labels, "role": ROLE})
        api.update_scheduled_job_labels(scheduled_job_id=sj.id, labels=labels, namespace=cfg.namespace)
    except HF_ERRORS as e:
        say(f"could not record this check on its labels ({printable(clip(str(e), 200) or '')})")


# --- a job's timeout, as HF's answer holds it -------------------------------------------------------


def timeout_of(answer: dict) -> int | None:
    """The timeout in seconds in HF's answer about a job: `timeoutSeconds` (what huggingface_hub
    sends) or `timeout` (what its JobSpec reads), at the top or in the job's spec. None: absent."""
    for holder in (answer, answer.get("spec"), answer.get("jobSpec")):
        if not isinstance(holder, dict):
            continue
        for key in ("timeoutSeconds", "timeout"):
            value = holder.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
                    and 0 < value <= 10 * 365 * 86400:
                return int(value)
    return None


def job_answer(api: HfApi, namespace: str, job_id: str) -> dict:
    """GET /api/jobs/{ns}/{id} as HF answers it, through huggingface_hub's own session and headers:
    its JobInfo keeps no timeout."""
    answer = hf_client.hub_json(api, f"/api/jobs/{namespace}/{job_id}")
    if not isinstance(answer, dict):
        raise ValueError("HF's answer about the job is not a JSON object")
    return answer


# --- the command line ------------------------------------------------------------------------------


def duration_seconds(text: str) -> float:
    """An hf jobs duration, <number>[s|m|h|d], in seconds (fmt.parse_duration); more than zero."""
    seconds = fmt.parse_duration(text)
    if not seconds:
        raise click.BadParameter(f"{text!r} is not a duration such as 90s, 15m, 1h")
    return seconds


def label_value(_ctx, param, value: str) -> str:
    if not LABEL.match(value or ""):
        raise click.BadParameter(f"{value!r} is not a label value (letters, digits, '-', '_')", param=param)
    return value


def hf_api() -> HfApi:
    """huggingface_hub's client, from tools/hf_client.py (bounded by HF_CALL_TIMEOUT). Imported
    there when asked, not with the module: it is most of this module's start."""
    from huggingface_hub.utils import logging as hf_logging  # noqa: PLC0415

    # huggingface_hub's own retry notes ("Retrying in 1s") would come before the one line each
    # command says when HF cannot be reached.
    hf_logging.set_verbosity_error()
    return hf_client.api()


@click.group()
def cli():
    """The run's watchdog: heartbeats, the check the scheduled job runs, a job's timeout."""


@cli.command("beat")
@click.option("--run", required=True, callback=label_value, help="the run's label value (run=)")
@click.option("--project", required=True, callback=label_value, help="the project's label value (project=)")
@click.option("--instance", required=True, callback=label_value, help="the run's instance (instance=)")
@click.option("--namespace", default=None, help="where the run's jobs are; default: the token's user")
def beat_cmd(run, project, instance, namespace):
    """heartbeat=<now> on the run's live server jobs (while a verb holds the run)."""
    try:
        beaten = beat(hf_api(), run=run, project=project, instance=instance, namespace=namespace or None,
                      now=time.time())
    except HF_ERRORS as e:
        raise click.ClickException(f"heartbeat of run {run} not written: {printable(clip(str(e), 300) or '')}") from e
    click.echo(f"heartbeat of run {run} on {' '.join(beaten) or 'no live server'}")


@cli.command("check")
@click.option("--run", envvar="WATCHDOG_RUN", required=True, callback=label_value)
@click.option("--project", envvar="WATCHDOG_PROJECT", required=True, callback=label_value)
@click.option("--instance", envvar="WATCHDOG_INSTANCE", required=True, callback=label_value)
@click.option("--namespace", envvar="WATCHDOG_NAMESPACE", required=True, callback=label_value)
@click.option("--grace", envvar="WATCHDOG_GRACE", required=True, help="WATCHDOG_GRACE, e.g. 1h")
def check_cmd(run, project, instance, namespace, grace):
    """One check of the run (what the scheduled job runs; its settings come as its environment)."""
    cfg = Run(run=run, project=project, instance=instance, namespace=namespace, grace=duration_seconds(grace))
    sys.exit(check(hf_api(), cfg, token=hf_client.token(), now=time.time()))


@cli.command("timeout")
@click.argument("job")
def timeout_cmd(job):
    """Print JOB's (NS/ID) timeout in seconds as HF's answer holds it; nothing when it holds none."""
    m = re.fullmatch(r"([A-Za-z0-9._-]+)/([A-Za-z0-9_-]+)", job)
    if not m:
        raise click.BadParameter(f"{job!r} is not NAMESPACE/JOB_ID")
    try:
        seconds = timeout_of(job_answer(hf_api(), m.group(1), m.group(2)))
    except HF_ERRORS as e:
        raise click.ClickException(f"cannot read job {job}: {printable(clip(str(e), 300) or '')}") from e
    if seconds is not None:
        click.echo(seconds)


if __name__ == "__main__":
    cli()
