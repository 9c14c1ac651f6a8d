#!/usr/bin/env python3
"""cost: what a run cost, the sandbox behind each infra error, and the HF Jobs price list.

  prices     the price per hour of every flavor, and where it came from: `hf jobs hardware
             --json`, cached in <state-root>/prices.json for --max-age seconds; when the Hub
             cannot be asked, the last cache (however old), else env/flavor-prices.tsv.
             make status and make jobs read it (--json).
  cost       every job a run launched (from state/<run>/manifest.jsonl, and by its run=<run>
             label) and every sandbox one of its trials proves its own (docs/cost.md §5: the job
             id a trial's result.json names, else the sandbox created while the trial set up its
             environment, with the image and flavor its trial.log names, one per sandbox the
             trial created), each with flavor, running time, price and cost; totals per role,
             GPU hours, wall-clock, dollars per scored attempt and per passed task, and idle GPU
             time (a server running while no trial of the run ran). The sandboxes created while
             the run ran that none of its trials proves its own are another's: not counted, and
             how many is said.
  sandboxes  for a task (or every infra-errored task of the tally), the sandbox job(s) its
             trials ran in, their stage and the last lines of their logs; a sandbox that shut
             itself down for idleness (`sbx-server: idle for 601917ms, shutting down`) is named,
             with the fix (SANDBOX_IDLE_TIMEOUT).

Every fact about a job comes from the real `hf` CLI (huggingface_hub 2.4.0) with a pinned
output format (`--json`; logs are raw lines), HF_HUB_DISABLE_UPDATE_CHECK=1, and each call
bounded by --call-timeout seconds. The facts relied on (docs/hf-jobs.md §2):
  - `hf jobs hardware --json`: a list of {"name", "accelerator" ("" for CPU), "cost/hour"
    ("$5.00", or "free")}, from GET /api/jobs/hardware;
  - `hf jobs inspect --json NS/ID`: a one-element list; `hf jobs ps -a --json`: a list. Both
    hold `durations` {scheduling_secs, running_secs, total_secs} (computed by HF, also while a
    job runs), `created_at`, `started_at`, `finished_at`, `flavor`, `labels`, `expose` (ports);
    inspect's `status` is {stage, …}, ps's a plain string;
  - a sandbox of harbor's hf-sandbox environment is huggingface_hub's `Sandbox.create`, a job
    labelled hf-sandbox=1, hf-sandbox-mode=dedicated and a random hf-sandbox-nonce (no run or
    task label), with the task's image, exposing port 49983;
  - a job id is a plain name; an answer that gives it as a number is read as the same name.

A bundled example run (RUN=example-*) never calls HF: its job facts were recorded once as the
exact output of each call (examples/state/<run>/hf-recorded.json) and are read from there by
the same code.

Exit codes: 0 done, 1 a user-facing error (the message says what and how to fix), 2 usage.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import click

from tools import cost_sandboxes as CS
from tools import safe_read as SR
from tools import tally_core
from tools import tally_jobs
from tools import tally_policy

REPO_ROOT = Path(__file__).resolve().parent.parent

TSV_PRICES = REPO_ROOT / "env" / "flavor-prices.tsv"
SANDBOX_LABEL = "hf-sandbox=1"  # huggingface_hub 2.4.0 _sandbox.py: SANDBOX_LABEL = "hf-sandbox", value "1"
IDLE_SHUTDOWN = re.compile(r"sbx-server: idle for (\d+)ms, shutting down")
SLACK_SECS = CS.SLACK_SECS  # the job's clock (HF's) and the trial's (harbor's) may disagree by this much
# watchdog: each check of the run's watchdog is a job of its own, labelled as the run's other jobs
# (scripts/argv.sh, watchdog_argv; docs/watchdog.md).
ROLE_OF_LABEL = {"server": "server", "bench": "remote-bench", "mopup": "remote-mopup", "supervisor": "supervisor",
                 "watchdog": "watchdog"}
ROLES = ("server", "remote-bench", "remote-mopup", "supervisor", "watchdog", "sandbox")


# What a price, a duration and a time may be, read from a cache anyone could edit or an hf answer:
# outside these they are left out with a note, never priced with. A negative price or duration
# made a $50 spend read as far under a $10 ceiling, and make cost total -$2.9M; 1e308 s or a NaN
# made no sense of any total; a time in year 1 or 9999 overflowed.
PRICE_CAP = 10_000.0                  # USD per hour: h200x8 costs $40
DURATION_CAP = 10 * 365 * 86400.0     # seconds: no job runs ten years
YEARS = (2000, 2199)
CLOCK_SKEW = 300.0                    # seconds a cache's read_epoch may be ahead of this clock
IDLE_CAP_MS = 10 * 365 * 86400 * 1000
# A job id is a plain name (HF's are 24 hex digits); the shell verbs check the same shape.
JOB_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")


def job_id_of(value: Any) -> str | None:
    """A job id from an hf answer or a file, as the one type it is compared in: a plain name. A
    whole number is the same name (an answer that gave the id as 123 and the manifest's "123" are
    one job, not two); anything else (a bool, a float, a path, a control character) is None."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        value = str(value)
    return value if isinstance(value, str) and JOB_ID.fullmatch(value) else None


def finite_in(value: Any, low: float, high: float) -> float | None:
    """`value` as a float when it is a real number (not a bool, a NaN or an infinity) in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        x = float(value)
    except OverflowError:  # an int past float's range
        return None
    return x if math.isfinite(x) and low <= x <= high else None


def valid_prices(raw: Any, gpu: dict) -> tuple[dict[str, float], list[str]]:
    """({flavor: USD/h}, what was discarded): a price is a finite number from 0 to PRICE_CAP, and
    only a CPU flavor may be free (a GPU at $0 would make the ceiling inert)."""
    kept, dropped = {}, []
    for flavor, value in (raw.items() if isinstance(raw, dict) else []):
        price = finite_in(value, 0.0, PRICE_CAP)
        is_gpu = gpu.get(flavor) if isinstance(gpu.get(flavor), bool) else not str(flavor).startswith("cpu")
        if not isinstance(flavor, str) or price is None or (price == 0 and is_gpu):
            dropped.append(f"{SR.clip(repr(flavor), 60)}: {SR.clip(repr(value), 60)}")
        else:
            kept[flavor] = price
    return kept, dropped


class CostError(click.ClickException):
    """A user-facing error: one line saying what and how to fix."""


# --------------------------------------------------------------------------- time


def parse_time(value: Any) -> datetime | None:
    """An ISO-8601 time of the years YEARS, else None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
        t = t if t.tzinfo else t.replace(tzinfo=timezone.utc)
        year = t.astimezone(timezone.utc).year
    except (ValueError, OverflowError):
        return None
    return t if YEARS[0] <= year <= YEARS[1] else None


def iso(t: datetime | None) -> str | None:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if t else None


def hms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(round(seconds))
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def usd(x: float | None) -> str:
    return "?" if x is None else f"${x:,.2f}"


# --------------------------------------------------------------------------- the hf CLI


class HfFailed(Exception):
    """One hf call failed; the message is one line."""


@dataclass
class LiveHf:
    """Runs the real `hf` CLI, bounded in time. dry_run: prints each call and runs none."""

    timeout: float = 60.0
    dry_run: bool = False
    printed: list[str] = field(default_factory=list)

    def __call__(self, *args: str) -> str:
        line = shlex.join(["hf", *args])
        if self.dry_run:
            self.printed.append(line)
            click.echo(line)
            raise HfFailed("dry run")
        env = {**os.environ, "HF_HUB_DISABLE_UPDATE_CHECK": "1"}
        try:
            p = subprocess.run(["hf", *args], capture_output=True, text=True, timeout=self.timeout, env=env)
        except subprocess.TimeoutExpired:
            raise HfFailed(f"{line}: no answer within {self.timeout:g}s") from None
        except FileNotFoundError:
            raise HfFailed("the hf CLI is not installed (make setup)") from None
        if p.returncode != 0:
            text = re.sub(r"\x1b\[[0-9;]*m", "", p.stderr)
            last = [ln for ln in text.splitlines() if ln.strip()]
            why = next((ln for ln in reversed(last) if re.match(r"^(Error|[A-Za-z_.0-9]+(Error|Exception))", ln)),
                       last[-1] if last else f"exit {p.returncode}")
            raise HfFailed(f"{line}: {why.strip()[:300]}")
        return p.stdout

    @property
    def where(self) -> str:
        return os.environ.get("HF_ENDPOINT") or "https://huggingface.co"


@dataclass
class RecordedHf:
    """Answers the same calls from a recording: {"recorded_at", "calls": {"<argv>": output}}."""

    path: Path
    calls: dict
    recorded_at: str | None

    @classmethod
    def load(cls, path: Path) -> "RecordedHf":
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            # The one line the other verbs give (tools/report_cost.py), not an errno.
            raise CostError(f"no recording: {rel(path)} does not exist (a bundled example never calls HF; "
                            f"examples/make_example_cost.py records one)") from None
        except (OSError, ValueError) as e:
            raise CostError(f"{path}: cannot read the recorded hf answers ({e})") from None
        return cls(path, doc.get("calls") or {}, doc.get("recorded_at"))

    def __call__(self, *args: str) -> str:
        tail = None
        if args[:2] == ("jobs", "logs") and "-n" in args:  # logs are recorded whole; -n N tails them
            i = args.index("-n")
            tail, args = int(args[i + 1]), args[:i] + args[i + 2:]
        key = shlex.join(args)
        if tail is not None and key in self.calls:
            return "".join(line + "\n" for line in str(self.calls[key]).splitlines()[-tail:])
        if key not in self.calls:
            raise HfFailed(f"hf {key}: not in the recording {self.path.name}")
        out = self.calls[key]
        return out if isinstance(out, str) else json.dumps(out)

    @property
    def where(self) -> str:
        return f"recorded {self.recorded_at}: {rel(self.path)}"


def rel(path: str | os.PathLike) -> str:
    p = os.path.abspath(path)
    root = str(REPO_ROOT) + os.sep
    return p[len(root):] if p.startswith(root) else p


def hf_json(hf, *args: str) -> Any:
    out = hf(*args)
    try:
        return json.loads(out)
    except ValueError:
        raise HfFailed(f"hf {shlex.join(args)}: not JSON (an hf version other than the pinned 2.4.0?)") from None


# --------------------------------------------------------------------------- prices


@dataclass
class Prices:
    per_hour: dict[str, float]  # flavor -> USD per hour
    gpu: dict[str, bool]  # flavor -> has an accelerator
    source: str  # hub | cache | recorded | tsv
    label: str  # said beside every figure
    read_at: str | None
    exposed_port: float  # USD per hour per job with an exposed port (only in the TSV)

    def price(self, flavor: str | None) -> float | None:
        return self.per_hour.get(flavor or "")

    def is_gpu(self, flavor: str | None) -> bool:
        if flavor in self.gpu:
            return self.gpu[flavor]
        return bool(flavor) and not str(flavor).startswith("cpu")

    def as_json(self) -> dict:
        return {"source": self.source, "label": self.label, "read_at": self.read_at,
                "exposed_port_usd_per_hour": self.exposed_port,
                "prices": {k: {"usd_per_hour": v, "gpu": self.is_gpu(k)} for k, v in sorted(self.per_hour.items())}}


def parse_hardware(rows: Any) -> tuple[dict[str, float], dict[str, bool]]:
    """`hf jobs hardware --json` rows -> ({flavor: USD/h}, {flavor: gpu?}). "free" is 0."""
    if not isinstance(rows, list):
        raise HfFailed("hf jobs hardware --json: not a JSON list")
    per_hour, gpu = {}, {}
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("name"), str):
            continue
        cost = str(row.get("cost/hour", "")).strip()
        if cost == "free":
            per_hour[row["name"]] = 0.0
        elif (m := re.fullmatch(r"\$([0-9]{1,9}(?:\.[0-9]+)?)", cost.replace(",", ""))) and float(m.group(1)) > 0:
            per_hour[row["name"]] = float(m.group(1))
        else:
            continue
        gpu[row["name"]] = bool(row.get("accelerator"))
    per_hour, _ = valid_prices(per_hour, gpu)  # "free" for a GPU flavor, a price past the cap: left out
    if not per_hour:
        raise HfFailed("hf jobs hardware --json: no flavor with a price (fields name, cost/hour)")
    return per_hour, gpu


def tsv_prices(path: Path | None = None) -> dict[str, float]:
    out = {}
    try:
        for line in (path or TSV_PRICES).read_text(encoding="utf-8").splitlines():
            parts = line.split("\t")
            if line.startswith("#") or len(parts) != 2:
                continue
            try:
                out[parts[0]] = float(parts[1])
            except ValueError:
                continue
    except OSError:
        pass
    exposed = out.pop("exposed-ports", None)
    out, _ = valid_prices(out, {})
    if finite_in(exposed, 0.0, PRICE_CAP) is not None:
        out["exposed-ports"] = exposed
    return out


def read_price_cache(cache: Path | None, where: str, now: float) -> tuple[dict | None, str | None]:
    """(the cache as {prices, gpu, read_at, read_epoch}, or None; why it was discarded, or None).

    A cache is used whole or not at all: a price, a read time or a field that fails its check
    discards it (the Hub is asked again, or the TSV used), and the reason is said beside the figures.
    """
    if cache is None or not cache.is_file():
        return None, None
    try:
        raw = SR.parse_json(SR.read_regular(cache, 1 << 20, what="a price cache"))
    except (OSError, SR.Unreadable) as e:
        return None, f"the price cache {rel(cache)} is unreadable ({SR.clip(str(e), 120)}), not used"
    if not isinstance(raw, dict) or raw.get("endpoint") != where:
        return None, None  # another endpoint's prices (or not ours): not an error, just not used
    gpu = raw.get("gpu") if isinstance(raw.get("gpu"), dict) else {}
    gpu = {k: v for k, v in gpu.items() if isinstance(k, str) and isinstance(v, bool)}
    prices, dropped = valid_prices(raw.get("prices"), gpu)
    read_epoch = finite_in(raw.get("read_epoch"), 0.0, now + CLOCK_SKEW)
    problems = []
    if not isinstance(raw.get("prices"), dict) or not (prices or dropped):
        problems.append("no prices")
    if dropped:
        problems.append("prices that are not 0 to $10,000/h (or a free GPU): " + ", ".join(dropped[:3]))
    if read_epoch is None:
        problems.append(f"read_epoch {SR.clip(repr(raw.get('read_epoch')), 40)} is not a past time")
    if not isinstance(raw.get("read_at"), str):
        problems.append("no read_at")
    if problems:
        return None, f"the price cache {rel(cache)} was discarded ({'; '.join(problems)})"
    return {"prices": prices, "gpu": gpu, "read_at": SR.printable(raw["read_at"])[:40], "read_epoch": read_epoch}, None


def load_prices(hf, cache: Path | None, max_age: float, now: float | None = None) -> Prices:
    """The price list: fresh cache, else the Hub (cached), else a stale cache, else the TSV."""
    now = time.time() if now is None else now
    tsv = tsv_prices()
    exposed = tsv.get("exposed-ports", 0.0)
    where = getattr(hf, "where", "")
    if isinstance(hf, RecordedHf):
        per_hour, gpu = parse_hardware(hf_json(hf, "jobs", "hardware", "--json"))
        return Prices(per_hour, gpu, "recorded", f"hf jobs hardware, {where}", hf.recorded_at, exposed)
    cached, discarded = read_price_cache(cache, where, now)
    if cached and now - cached["read_epoch"] <= max_age:
        return Prices(cached["prices"], cached["gpu"], "cache",
                      f"hf jobs hardware, read {cached['read_at']} (cached in {rel(cache)})", cached["read_at"], exposed)
    try:
        per_hour, gpu = parse_hardware(hf_json(hf, "jobs", "hardware", "--json"))
    except HfFailed as e:
        why = str(e) + (f"; {discarded}" if discarded else "")
        if cached:
            return Prices(cached["prices"], cached["gpu"], "cache",
                          f"hf jobs hardware, read {cached['read_at']} (stale cache: {why})", cached["read_at"], exposed)
        prices = {k: v for k, v in tsv.items() if k != "exposed-ports"}
        return Prices(prices, {}, "tsv", f"env/flavor-prices.tsv, an offline copy (hf jobs hardware unavailable: {why})",
                      None, exposed)
    read_at = iso(datetime.fromtimestamp(now, timezone.utc))
    if cache is not None and not getattr(hf, "dry_run", False):
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            SR.write_atomic(cache, json.dumps({"read_at": read_at, "read_epoch": now, "endpoint": where,
                                               "source": "hf jobs hardware --json", "prices": per_hour,
                                               "gpu": gpu}, indent=1, sort_keys=True) + "\n")
        except OSError:
            pass  # a cache we cannot write costs one more call next time, nothing else
    return Prices(per_hour, gpu, "hub", f"hf jobs hardware, read {read_at}", read_at, exposed)


# --------------------------------------------------------------------------- the run's records


@dataclass
class Launched:
    job_id: str
    namespace: str | None
    role: str
    found: str  # how it was found


def manifest_jobs(path: Path) -> list[Launched]:
    """Every job the manifest says the run launched, once each, in launch order."""
    out: dict[str, Launched] = {}
    for rec in SR.manifest_events(path):
        event, role = rec.get("event"), rec.get("role")
        ids = []
        if rec.get("job_id") not in (None, ""):
            ids = [rec["job_id"]]
        elif event == "launch-cancelled" and isinstance(rec.get("job_ids"), list):
            ids = rec["job_ids"]
        elif event == "supervisor-stop" and isinstance(rec.get("job"), str) and "/" in rec["job"]:
            ids = [rec["job"]]
        for raw in ids:
            ns = rec.get("namespace") if isinstance(rec.get("namespace"), str) else None
            if isinstance(raw, str) and "/" in raw:
                ns, raw = raw.split("/", 1)
            jid = job_id_of(raw)
            if jid is None:
                continue  # not a job's name: nothing to ask HF about
            if role == "bench":
                role = "remote-bench"
            if jid not in out and role in ROLES:
                out[jid] = Launched(jid, ns, role, f"manifest ({event})")
            elif jid in out and out[jid].namespace is None and ns:
                out[jid].namespace = ns
    return list(out.values())


@dataclass
class TrialSpan:
    task: str
    trial: str  # <job dir name>/<trial dir name>
    started: datetime
    finished: datetime | None
    setup: tuple[datetime, datetime | None] | None  # environment_setup: when its sandbox was created
    exception_type: str | None


def trial_spans(report: dict) -> list[TrialSpan]:
    """Every attempt's time range, from its result.json (started_at, finished_at, environment_setup)."""
    spans = []
    for entry in report.get("per_task", []):
        for t in entry.get("trials", []):
            path = os.path.join(t["trial_dir"], "result.json")
            try:
                r = SR.read_json_object(path)
            except (OSError, SR.Unreadable, ValueError):
                continue
            start = parse_time(r.get("started_at"))
            if start is None:
                continue
            env = r.get("environment_setup") if isinstance(r.get("environment_setup"), dict) else {}
            setup_start = parse_time(env.get("started_at"))
            spans.append(TrialSpan(
                entry["task"], f"{os.path.basename(t['job_dir'])}/{os.path.basename(t['trial_dir'])}", start,
                parse_time(r.get("finished_at")),
                (setup_start, parse_time(env.get("finished_at"))) if setup_start else None,
                t.get("exception_type")))
    return sorted(spans, key=lambda s: (s.started, s.trial))


def run_tally(jobs_dir: str, job_name: str, run: str, verdicts: str | None, model: str | None = None) -> dict:
    """The run's tally, from its job dirs (none yet: an empty one). A job dir of the run's name that
    is another run's (tally_jobs.refuse_foreign_job_dirs) raises tally_jobs.TallyError: its trials and sandboxes are
    not this run's."""
    policy = tally_policy.load_policy()
    v = tally_policy.load_verdicts(verdicts) if verdicts else {}
    try:
        dirs = tally_jobs.run_job_dirs(jobs_dir, job_name)
    except tally_jobs.TallyError:
        dirs = []
    tally_jobs.refuse_foreign_job_dirs(dirs, model)
    return tally_core.tally(dirs, policy, v, run=run, verdicts_path=verdicts)


# --------------------------------------------------------------------------- jobs and their cost


def text_field(value: Any) -> str | None:
    """A name from an hf answer: a short printable string, else None."""
    return SR.printable(value)[:200] if isinstance(value, str) and value else None


def normalise_job(raw: Any) -> dict:
    """inspect's and ps's rows in one shape, every field checked: a wrong type is None."""
    if not isinstance(raw, dict):
        raise TypeError(f"a job is {SR.clip(repr(raw), 60)}, not an object")
    status = raw.get("status")
    stage = status.get("stage") if isinstance(status, dict) else status
    owner = raw.get("owner") if isinstance(raw.get("owner"), dict) else {}
    labels = raw.get("labels") if isinstance(raw.get("labels"), dict) else {}
    return {"id": job_id_of(raw.get("id")), "namespace": text_field(owner.get("name")),
            "stage": text_field(stage) or "UNKNOWN",
            "flavor": text_field(raw.get("flavor")),
            "labels": {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)},
            "created_at": parse_time(raw.get("created_at")), "started_at": parse_time(raw.get("started_at")),
            "finished_at": parse_time(raw.get("finished_at")),
            "durations": raw.get("durations") if isinstance(raw.get("durations"), dict) else None,
            "exposed": bool(raw.get("expose")), "image": text_field(raw.get("docker_image")),
            "space": text_field(raw.get("space_id"))}


def running_time(job: dict, now: datetime) -> tuple[float | None, str]:
    """(seconds the job ran, where that figure comes from)."""
    d = job["durations"]
    if d and d.get("running_secs") is not None:
        secs = finite_in(d["running_secs"], 0.0, DURATION_CAP)
        if secs is None:
            return None, f"unknown (durations.running_secs {SR.clip(repr(d['running_secs']), 40)} is not 0 to 10 years)"
        return secs, "durations.running_secs"
    if d and "running_secs" in d and job["stage"] in ("SCHEDULING", "CANCELED", "ERROR"):
        return 0.0, "durations (never ran)"
    if job["started_at"] and job["finished_at"]:
        secs = (job["finished_at"] - job["started_at"]).total_seconds()
        if 0 <= secs <= DURATION_CAP:
            return secs, "started_at..finished_at"
        return None, "unknown (finished_at is not after started_at)"
    if job["started_at"]:
        return min(DURATION_CAP, max(0.0, (now - job["started_at"]).total_seconds())), "started_at..now (local clock)"
    return None, "unknown (no durations, no started_at)"


def run_interval(job: dict, secs: float | None) -> tuple[datetime, datetime] | None:
    start = job["started_at"]
    scheduling = finite_in((job["durations"] or {}).get("scheduling_secs"), 0.0, DURATION_CAP)
    if start is None and job["created_at"] and scheduling is not None:
        start = job["created_at"] + timedelta(seconds=scheduling)
    if start is None or secs is None:
        return None
    return start, start + timedelta(seconds=secs)


def job_row(job: dict, role: str, found: str, prices: Prices, now: datetime) -> dict:
    secs, secs_source = running_time(job, now)
    price = prices.price(job["flavor"])
    port = prices.exposed_port if job["exposed"] else 0.0
    cost = None if price is None or secs is None else secs / 3600 * (price + port)
    return {"job": f"{job['namespace']}/{job['id']}" if job["namespace"] else job["id"], "role": role,
            "stage": job["stage"], "flavor": job["flavor"], "gpu": prices.is_gpu(job["flavor"]),
            "created_at": iso(job["created_at"]), "running_secs": secs, "running_source": secs_source,
            "usd_per_hour": price, "exposed_port_usd_per_hour": port if job["exposed"] else None,
            "cost_usd": None if cost is None else round(cost, 6), "found_by": found,
            "_interval": run_interval(job, secs)}


def subtract(interval: tuple[datetime, datetime], busy: list[tuple[datetime, datetime]]) -> float:
    """Seconds of `interval` covered by none of `busy`."""
    a, b = interval
    covered = 0.0
    cur = a
    for s, e in sorted(busy):
        s, e = max(s, cur), min(e, b)
        if e > s:
            covered += (e - s).total_seconds()
            cur = e
        if cur >= b:
            break
    return max(0.0, (b - a).total_seconds() - covered)


def summarise(rows: list[dict], spans: list[TrialSpan], report: dict, now: datetime) -> dict:
    per_role: dict[str, dict] = {}
    for r in rows:
        g = per_role.setdefault(r["role"], {"jobs": 0, "running_secs": 0.0, "cost_usd": 0.0, "unpriced": 0})
        g["jobs"] += 1
        g["running_secs"] += r["running_secs"] or 0
        if r["cost_usd"] is None:
            g["unpriced"] += 1
        else:
            g["cost_usd"] += r["cost_usd"]
    total = sum(g["cost_usd"] for g in per_role.values())
    gpu_secs = sum(r["running_secs"] or 0 for r in rows if r["gpu"])
    busy = [(s.started, s.finished or now) for s in spans]
    idle_secs = idle_usd = 0.0
    for r in rows:
        if r["role"] == "server" and r["gpu"] and r["_interval"]:
            idle = subtract(r["_interval"], busy)
            idle_secs += idle
            if r["usd_per_hour"] is not None:
                idle_usd += idle / 3600 * (r["usd_per_hour"] + (r["exposed_port_usd_per_hour"] or 0))
    starts = [parse_time(r["created_at"]) for r in rows if r["created_at"]] + [s.started for s in spans]
    ends = [r["_interval"][1] for r in rows if r["_interval"]] + [s.finished or now for s in spans]
    wall = (max(ends) - min(starts)).total_seconds() if starts and ends else None
    scored, passed = report.get("scored", 0), report.get("passed", 0)
    return {
        "per_role": {k: {**v, "cost_usd": round(v["cost_usd"], 6)} for k, v in sorted(per_role.items(), key=lambda kv: ROLES.index(kv[0]))},
        "total_usd": round(total, 6), "unpriced_jobs": sum(g["unpriced"] for g in per_role.values()),
        "gpu_hours": round(gpu_secs / 3600, 6), "wall_clock_secs": wall,
        "first_start": iso(min(starts)) if starts else None, "last_end": iso(max(ends)) if ends else None,
        "scored": scored, "passed": passed, "trials": len(spans),
        "usd_per_scored_attempt": round(total / scored, 6) if scored else None,
        "usd_per_passed_task": round(total / passed, 6) if passed else None,
        "idle_gpu_minutes": round(idle_secs / 60, 3), "idle_gpu_usd": round(idle_usd, 6),
    }


def list_sandboxes(hf, namespace: str | None) -> tuple[list[dict], list[str]]:
    """Every sandbox job (label hf-sandbox=1) of the namespace, and what was wrong with the answer."""
    args = ["jobs", "ps", "-a", "--json", "--limit", "0", "-l", SANDBOX_LABEL]
    if namespace:
        args += ["--namespace", namespace]
    try:
        listing = hf_json(hf, *args)
    except HfFailed as e:
        return [], [str(e)]
    jobs, bad = {}, 0
    for raw in listing if isinstance(listing, list) else []:
        job = normalise_job(raw) if isinstance(raw, dict) else {"id": None}
        if job["id"] is None:
            bad += 1
        else:
            jobs.setdefault(job["id"], job)
    problems = [f"hf {shlex.join(args)}: {bad} job(s) whose id is not a plain name, left out"] if bad else []
    return list(jobs.values()), problems


def sandbox_name(job: dict) -> str:
    return f"{job['namespace']}/{job['id']}" if job["namespace"] else job["id"]


def collect(hf, *, run: str, project_label: str, namespace: str | None, manifest: Path, claims: list[CS.Claim],
            since: datetime | None = None, until: datetime | None = None,
            ) -> tuple[list[tuple[dict, str, str]], list[str], list[dict]]:
    """([(job, role, found_by)], problems, others). The manifest's jobs (inspected), the run's
    labelled jobs (listed), the sandboxes its trials prove its own (listed); others: the sandboxes
    created while the run ran that none of its trials proves its own (attribute's since, until)."""
    problems: list[str] = []
    launched = manifest_jobs(manifest)
    ns = namespace or next((j.namespace for j in launched if j.namespace), None)
    found: dict[str, tuple[dict, str, str]] = {}
    for j in launched:
        target = f"{j.namespace or ns}/{j.job_id}" if (j.namespace or ns) else j.job_id
        try:
            rows = hf_json(hf, "jobs", "inspect", "--json", target)
            found[j.job_id] = (normalise_job(rows[0]), j.role, j.found)
        except (HfFailed, IndexError, KeyError, TypeError) as e:
            problems.append(f"{target} ({j.role}, {j.found}): {e}")
    args = ["jobs", "ps", "-a", "--json", "--limit", "0", "-l", f"project={project_label}", "-l", f"run={run}"]
    if ns:
        args += ["--namespace", ns]
    try:
        listing = hf_json(hf, *args)
        bad = 0
        for raw in listing if isinstance(listing, list) else []:
            job = normalise_job(raw) if isinstance(raw, dict) else {"id": None}
            if job["id"] is None:
                bad += 1
            elif job["id"] not in found:  # one job, whether the answer spelt its id 123 or "123"
                role = ROLE_OF_LABEL.get(job["labels"].get("role", ""), "server")
                found[job["id"]] = (job, role, f"label run={run}")
        if bad:
            problems.append(f"hf {shlex.join(args)}: {bad} job(s) whose id is not a plain name, left out")
    except HfFailed as e:
        problems.append(str(e))
    sandboxes, trouble = list_sandboxes(hf, ns)
    problems += trouble
    split = CS.attribute([j for j in sandboxes if j["id"] not in found], claims, since=since, until=until)
    for job, _, why in split.mine:
        found[job["id"]] = (job, "sandbox", why)
    return list(found.values()), problems, split.others


def cost_report(hf, prices: Prices, *, run: str, project_label: str, namespace: str | None, manifest: Path,
                report: dict, now: datetime | None = None) -> dict:
    now = now or datetime.now(timezone.utc)
    spans = trial_spans(report)
    claims = CS.run_claims(report, manifest.parent)
    jobs, problems, others = collect(hf, run=run, project_label=project_label, namespace=namespace,
                                     manifest=manifest, claims=claims,
                                     # the caller read the trial dirs a moment before `now`
                                     until=now - timedelta(seconds=SLACK_SECS))
    rows = [job_row(j, role, found, prices, now) for j, role, found in jobs]
    rows.sort(key=lambda r: (ROLES.index(r["role"]), r["created_at"] or "", r["job"]))
    summary = summarise(rows, spans, report, now)
    for r in rows:
        r.pop("_interval")
    return {"run": run, "prices": {"source": prices.source, "label": prices.label, "read_at": prices.read_at},
            "manifest": rel(manifest), "jobs": rows, **summary,
            "unattributed_sandboxes": len(others), "unattributed_sandbox_jobs": [sandbox_name(j) for j in others],
            "problems": problems}


def render_cost(doc: dict) -> str:
    out = [f"Run {doc['run']}: what it cost. Prices: {doc['prices']['label']}.", ""]
    head = ("ROLE", "JOB", "STAGE", "FLAVOR", "RUNNING", "$/H", "COST", "FOUND BY")
    rows = [head]
    for r in doc["jobs"]:
        per_h = "?" if r["usd_per_hour"] is None else f"{r['usd_per_hour'] + (r['exposed_port_usd_per_hour'] or 0):.2f}"
        rows.append((r["role"], r["job"], r["stage"], r["flavor"] or "?", hms(r["running_secs"]), per_h,
                     usd(r["cost_usd"]), r["found_by"]))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(head) - 1)]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)) + "  " + str(row[-1]) for row in rows]
    out.append("")
    if not doc["jobs"]:
        out += ["No job found: the manifest records no launch, and no job carries the run's label.", ""]
    for role, g in doc["per_role"].items():
        extra = f", {g['unpriced']} without a price" if g["unpriced"] else ""
        out.append(f"{role + ':':<14} {usd(g['cost_usd']):>10}  {g['jobs']} job(s), {hms(g['running_secs'])} running{extra}")
    out.append(f"{'total:':<14} {usd(doc['total_usd']):>10}  GPU hours {doc['gpu_hours']:.2f}, wall-clock {hms(doc['wall_clock_secs'])}"
               + (f" ({doc['first_start']} to {doc['last_end']})" if doc["first_start"] else ""))
    out.append(f"per scored attempt: {usd(doc['usd_per_scored_attempt'])} ({doc['scored']} scored); "
               f"per passed task: {usd(doc['usd_per_passed_task'])} ({doc['passed']} passed)")
    out.append(f"idle GPU: {doc['idle_gpu_minutes']:.0f} min, {usd(doc['idle_gpu_usd'])} "
               f"(a server running while none of the run's {doc['trials']} trial(s) ran)")
    out.append("Running time: HF's durations.running_secs of each job (time billed); cost = running hours × (flavor price "
               "+ exposed port). Sandboxes carry no run label: one counts when a trial of the run proves it its own "
               "(FOUND BY; docs/cost.md §5).")
    if doc["unattributed_sandboxes"]:
        out.append(f"note: {CS.unattributed_note(doc['unattributed_sandbox_jobs'])}")
    if doc["unpriced_jobs"]:
        out.append(f"warning: {doc['unpriced_jobs']} job(s) have a flavor without a price: not in the total.")
    for p in doc["problems"]:
        out.append(f"warning: {p}")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- sandboxes


def idle_shutdown(lines: list[str]) -> int | None:
    """The idle time (ms) of an `sbx-server: idle for <ms>ms, shutting down` line, if any."""
    for line in reversed(lines):
        if m := IDLE_SHUTDOWN.search(line):
            ms = int(m.group(1)) if len(m.group(1)) <= 15 else None
            return ms if ms is not None and ms <= IDLE_CAP_MS else None
    return None


def sandboxes_report(hf, *, run: str, namespace: str | None, manifest: Path, report: dict, task: str | None,
                     tail: int, idle_timeout: str) -> dict:
    spans = trial_spans(report)
    if task:
        tasks = [task]
        if not any(e["task"] == task for e in report.get("per_task", [])):
            raise CostError(f"task '{task}' is not in run '{run}' (make tally RUN={run} lists its tasks)")
    else:
        tasks = [e["task"] for e in report.get("per_task", []) if e["outcome"] == "errored" and not e.get("verdict")]
    launched = manifest_jobs(manifest)
    ns = namespace or next((j.namespace for j in launched if j.namespace), None)
    wanted = [s for s in spans if s.task in tasks]
    listing, problems = list_sandboxes(hf, ns)
    # Every trial of the run competes for the sandboxes, so each shown is the one its trial proves its own.
    proven: dict[str, list[tuple[dict, str]]] = {}
    for job, claim, why in CS.attribute(listing, CS.run_claims(report, manifest.parent)).mine:
        proven.setdefault(claim.trial, []).append((job, why))
    outcome = {e["task"]: e for e in report.get("per_task", [])}
    out_tasks = []
    for name in tasks:
        e = outcome.get(name, {})
        trials = []
        for s in (s for s in wanted if s.task == name):
            boxes = []
            for j, why in sorted(proven.get(s.trial, []), key=lambda p: (iso(p[0]["created_at"]) or "", p[0]["id"])):
                target = sandbox_name(j)
                try:
                    lines = hf("jobs", "logs", "-n", str(tail), target).splitlines()
                    log_error = None
                except HfFailed as err:
                    lines, log_error = [], str(err)
                # Printed to a terminal: a log's own escape sequences are shown, never obeyed.
                lines = [SR.printable(ln)[:2000] for ln in lines if not ln.startswith("===== Job started")][-tail:]
                ms = idle_shutdown(lines)
                boxes.append({"job": target, "stage": j["stage"], "flavor": j["flavor"], "created_at": iso(j["created_at"]),
                              "finished_at": iso(j["finished_at"]), "found_by": f"label {SANDBOX_LABEL}; {why}",
                              "log_tail": lines, "log_error": log_error, "idle_shutdown_ms": ms})
            trials.append({"trial": s.trial, "started_at": iso(s.started), "finished_at": iso(s.finished),
                           "exception_type": s.exception_type, "sandboxes": boxes,
                           "ambiguous": len(boxes) > 1})
        out_tasks.append({"task": name, "outcome": e.get("outcome"), "exception_type": e.get("exception_type"),
                          "trials": trials})
    return {"run": run, "task": task, "idle_timeout": idle_timeout, "tasks": out_tasks, "problems": problems}


def seconds_of(value: str) -> float | None:
    """An hf-style duration (90, 90s, 10m, 2h, 1d) in seconds; None when unset or not one."""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([smhd]?)", (value or "").strip())
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)] if m else None


def idle_advice(ms: int, idle_timeout: str, run: str) -> list[str]:
    """Plain words for a sandbox that shut itself down for idleness, and the fix."""
    idle = hms(ms / 1000)
    lines = [f"=> IDLE SHUTDOWN: the sandbox stopped itself after {idle} with no command running (sbx-server's idle "
             f"timeout), so harbor lost it mid-trial. An infrastructure error, not the model's."]
    setting = seconds_of(idle_timeout)
    if setting and setting > ms / 1000 + 60:
        lines.append(f"   SANDBOX_IDLE_TIMEOUT is {idle_timeout}, longer than that: this sandbox did not get it (a run "
                     f"before the setting, or a job started by hand). Check the bench command passes --ek "
                     f"job_timeout={idle_timeout} (make print RUN={run}), then make mopup RUN={run}.")
    else:
        now = f"now {idle_timeout}" if idle_timeout else "unset: harbor's default, 10 minutes"
        lines.append(f"   Fix: SANDBOX_IDLE_TIMEOUT ({now}; harbor's --ek job_timeout, see env/defaults.env) longer than "
                     f"a trial's longest silence (a long LLM call, a slow verifier), e.g. SANDBOX_IDLE_TIMEOUT=2h in "
                     f"runs/{run}.env; then make mopup RUN={run} retries the task.")
    return lines


def render_sandboxes(doc: dict) -> str:
    run = doc["run"]
    out = []
    if not doc["tasks"]:
        out.append(f"run '{run}' has no infra-errored task: nothing to look up (TASK=<task> looks at any task).")
    for t in doc["tasks"]:
        out.append(f"{t['task']} ({t['outcome']}{': ' + t['exception_type'] if t['exception_type'] else ''})")
        if not t["trials"]:
            out.append("  no finished trial: no time to match a sandbox by")
        for tr in t["trials"]:
            out.append(f"  trial {tr['trial']}  {tr['started_at']} to {tr['finished_at']}  {tr['exception_type'] or 'no exception'}")
            if not tr["sandboxes"]:
                out.append(f"    no sandbox job found that this trial proves its own (label {SANDBOX_LABEL}; docs/cost.md §5)")
            if tr["ambiguous"]:
                out.append(f"    {len(tr['sandboxes'])} sandboxes: the trial created more than one (its trial.log says so)")
            for b in tr["sandboxes"]:
                out.append(f"    sandbox {b['job']}  {b['stage']}  {b['flavor']}  created {b['created_at']}  ({b['found_by']})")
                if b["log_error"]:
                    out.append(f"      logs unavailable: {b['log_error']}")
                elif b["log_tail"]:
                    out.append(f"      last {len(b['log_tail'])} log line(s) (hf jobs logs -n N {b['job']}):")
                    out += [f"      | {ln}" for ln in b["log_tail"]]
                if b["idle_shutdown_ms"] is not None:
                    out += ["      " + line for line in idle_advice(b["idle_shutdown_ms"], doc["idle_timeout"], run)]
        out.append("")
    for p in doc["problems"]:
        out.append(f"warning: {p}")
    return "\n".join(out).rstrip() + "\n"


# --------------------------------------------------------------------------- CLI


def make_hf(recorded: str | None, dry_run: bool, call_timeout: float):
    if recorded:
        return RecordedHf.load(Path(recorded))
    return LiveHf(timeout=call_timeout, dry_run=dry_run)


common = [
    click.option("--recorded", type=click.Path(dir_okay=False), help="Answer hf calls from this recording (bundled examples)."),
    click.option("--dry-run", is_flag=True, help="Print the hf calls; run none, write nothing."),
    click.option("--call-timeout", type=float, default=60.0, show_default=True, help="Seconds each hf call may take."),
    click.option("--json", "as_json", is_flag=True, help="Print JSON (fields: docs/cost.md §4)."),
]


def with_common(f):
    for opt in reversed(common):
        f = opt(f)
    return f


run_options = [
    click.option("--run", required=True), click.option("--state-dir", required=True, type=click.Path(file_okay=False)),
    click.option("--jobs-dir", required=True), click.option("--job-name", required=True),
    click.option("--verdicts", type=click.Path(dir_okay=False)), click.option("--namespace", default=""),
    click.option("--model", default="", help="The run's MODEL: a job dir of the run's name that records another is refused."),
]


def with_run(f):
    for opt in reversed(run_options):
        f = opt(f)
    return f


@click.group(epilog="Exit codes: 0 done, 1 a user-facing error, 2 usage.")
def cli() -> None:
    """cost: what a run cost, the sandbox behind an infra error, and the HF Jobs price list."""


@cli.command()
@with_common
@click.option("--cache", type=click.Path(dir_okay=False), help="The price cache (state/prices.json).")
@click.option("--max-age", type=float, default=86400, show_default=True, help="Seconds a cached price list is reused.")
def prices(recorded, dry_run, call_timeout, as_json, cache, max_age):
    """The price per hour of every flavor, and where it came from."""
    hf = make_hf(recorded, dry_run, call_timeout)
    p = load_prices(hf, Path(cache) if cache else None, max_age)
    if dry_run:
        return
    if as_json:
        click.echo(json.dumps(p.as_json(), indent=1))
    else:
        click.echo(f"Prices: {p.label}")
        for k, v in sorted(p.per_hour.items()):
            click.echo(f"  {k:<18} ${v:.2f}/h")


def _prices_for(hf, dry_run: bool, cache: str | None, max_age: float) -> Prices:
    return load_prices(hf, Path(cache) if cache and not dry_run else None, max_age)


@cli.command()
@with_common
@with_run
@click.option("--project-label", default="terminal-bench-harness", show_default=True)
@click.option("--cache", type=click.Path(dir_okay=False))
@click.option("--max-age", type=float, default=86400, show_default=True)
def cost(recorded, dry_run, call_timeout, as_json, run, state_dir, jobs_dir, job_name, verdicts, namespace, model,
         project_label, cache, max_age):
    """Every job the run launched and every sandbox its trials used, with what each cost."""
    hf = make_hf(recorded, dry_run, call_timeout)
    try:
        report = run_tally(jobs_dir, job_name, run, verdicts, model or None)
    except tally_jobs.TallyError as e:
        raise CostError(str(e)) from None
    prices_ = _prices_for(hf, dry_run, cache, max_age)
    doc = cost_report(hf, prices_, run=run, project_label=project_label, namespace=namespace or None,
                      manifest=Path(state_dir) / "manifest.jsonl", report=report)
    if dry_run:
        return
    click.echo(json.dumps(doc, indent=1) if as_json else render_cost(doc), nl=as_json)


@cli.command()
@with_common
@with_run
@click.option("--task", default="")
@click.option("--tail", type=click.IntRange(1, 10000), default=20, show_default=True)
@click.option("--idle-timeout", default="", help="The run's SANDBOX_IDLE_TIMEOUT, for the advice.")
def sandboxes(recorded, dry_run, call_timeout, as_json, run, state_dir, jobs_dir, job_name, verdicts, namespace,
              model, task, tail, idle_timeout):
    """The sandbox job(s) behind a task's trials (default: every infra-errored task)."""
    hf = make_hf(recorded, dry_run, call_timeout)
    try:
        report = run_tally(jobs_dir, job_name, run, verdicts, model or None)
    except tally_jobs.TallyError as e:
        raise CostError(str(e)) from None
    doc = sandboxes_report(hf, run=run, namespace=namespace or None, manifest=Path(state_dir) / "manifest.jsonl",
                           report=report, task=task or None, tail=tail, idle_timeout=idle_timeout)
    if dry_run:
        return
    click.echo(json.dumps(doc, indent=1) if as_json else render_sandboxes(doc), nl=as_json)


if __name__ == "__main__":
    cli()
