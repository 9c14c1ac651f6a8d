"""cost_jobs: what a run cost: every job it launched and every sandbox its trials prove their own.

The jobs come from the run's manifest (state/<run>/manifest.jsonl, inspected one by one), from
its run=<run> label (listed), and the sandboxes from tools/money/cost_sandboxes.py's attribution
(docs/cost.md §5). Each is priced by its flavor and HF's running time; the totals are per role,
with GPU hours, wall-clock, dollars per scored attempt, per passed attempt and per passed task (a task
with at least one passed attempt in its slots: the same count at k = 1), and idle GPU time (a server
running while no trial of the run ran).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from tools.money import cost_hf
from tools.money import cost_prices
from tools.money import cost_sandboxes
from tools import fmt
from tools import safe_read
from tools.results import tally_core
from tools.results import tally_jobs
from tools.results import tally_policy

# watchdog: each check of the run's watchdog is a job of its own, labelled as the run's other jobs
# (scripts/argv.sh, watchdog_argv; docs/watchdog.md).
ROLE_OF_LABEL = {"server": "server", "bench": "remote-bench", "mopup": "remote-mopup", "supervisor": "supervisor",
                 "watchdog": "watchdog"}
ROLES = ("server", "remote-bench", "remote-mopup", "supervisor", "watchdog", "sandbox")


@dataclass
class Launched:
    job_id: str
    namespace: str | None
    role: str
    found: str  # how it was found


def manifest_jobs(path: Path) -> list[Launched]:
    """Every job the manifest says the run launched, once each, in launch order."""
    out: dict[str, Launched] = {}
    try:
        events = safe_read.manifest_events(path)
    except safe_read.Unreadable as e:
        raise cost_hf.CostError(f"cannot read {safe_read.printable(str(path))} ({e}): it lists every job the run "
                                f"launched, so nothing is counted without it; put the run's own manifest back") from e
    for rec in events:
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
            jid = cost_hf.job_id_of(raw)
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
                r = safe_read.read_json_object(path)
            except (OSError, safe_read.Unreadable, ValueError):
                continue
            start = cost_hf.parse_time(r.get("started_at"))
            if start is None:
                continue
            env = r.get("environment_setup") if isinstance(r.get("environment_setup"), dict) else {}
            setup_start = cost_hf.parse_time(env.get("started_at"))
            spans.append(TrialSpan(
                entry["task"], f"{os.path.basename(t['job_dir'])}/{os.path.basename(t['trial_dir'])}", start,
                cost_hf.parse_time(r.get("finished_at")),
                (setup_start, cost_hf.parse_time(env.get("finished_at"))) if setup_start else None,
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


def running_time(job: dict, now: datetime) -> tuple[float | None, str]:
    """(seconds the job ran, where that figure comes from)."""
    d = job["durations"]
    if d and d.get("running_secs") is not None:
        secs = cost_hf.finite_in(d["running_secs"], 0.0, cost_hf.DURATION_CAP)
        if secs is None:
            return None, f"unknown (durations.running_secs {safe_read.clip(repr(d['running_secs']), 40)} is not 0 to 10 years)"
        return secs, "durations.running_secs"
    if d and "running_secs" in d and job["stage"] in ("SCHEDULING", "CANCELED", "ERROR"):
        return 0.0, "durations (never ran)"
    if job["started_at"] and job["finished_at"]:
        secs = (job["finished_at"] - job["started_at"]).total_seconds()
        if 0 <= secs <= cost_hf.DURATION_CAP:
            return secs, "started_at..finished_at"
        return None, "unknown (finished_at is not after started_at)"
    if job["started_at"]:
        return min(cost_hf.DURATION_CAP, max(0.0, (now - job["started_at"]).total_seconds())), "started_at..now (local clock)"
    return None, "unknown (no durations, no started_at)"


def run_interval(job: dict, secs: float | None) -> tuple[datetime, datetime] | None:
    start = job["started_at"]
    scheduling = cost_hf.finite_in((job["durations"] or {}).get("scheduling_secs"), 0.0, cost_hf.DURATION_CAP)
    if start is None and job["created_at"] and scheduling is not None:
        start = job["created_at"] + timedelta(seconds=scheduling)
    if start is None or secs is None:
        return None
    return start, start + timedelta(seconds=secs)


def job_row(job: dict, role: str, found: str, prices: cost_prices.Prices, now: datetime) -> dict:
    secs, secs_source = running_time(job, now)
    price = prices.price(job["flavor"])
    port = prices.exposed_port if job["exposed"] else 0.0
    cost = None if price is None or secs is None else secs / 3600 * (price + port)
    return {"job": f"{job['namespace']}/{job['id']}" if job["namespace"] else job["id"], "role": role,
            "stage": job["stage"], "flavor": job["flavor"], "gpu": prices.is_gpu(job["flavor"]),
            "created_at": cost_hf.iso(job["created_at"]), "running_secs": secs, "running_source": secs_source,
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


def passed_task_count(report: dict) -> int:
    """The tasks passed: with k > 1 those with at least one passed attempt in their slots (re-rolls
    not counted, as the tally counts none), with k = 1 the passed tasks, the same as the passed attempts."""
    if report.get("n_attempts", 1) == 1:
        return report.get("passed", 0)
    return sum(1 for e in report.get("per_task", []) if e.get("passed_attempts", 0) > 0)


def passed_text(doc: dict) -> str:
    """The dollars per passed attempt and per passed task, each with what it counts. k = 1: one
    figure, a task being its one attempt; k > 1: both, as they count different things."""
    if doc["attempts_per_task"] == 1:
        return f"per passed task: {fmt.dollars(doc['usd_per_passed_task'])} ({doc['passed']} passed)"
    k, tasks = doc["attempts_per_task"], doc["tasks"]
    return (f"per passed attempt: {fmt.dollars(doc['usd_per_passed_attempt'])} ({doc['passed']} passed of "
            f"{tasks * k} attempts = {tasks} tasks × {k}); per passed task: {fmt.dollars(doc['usd_per_passed_task'])} "
            f"({doc['passed_tasks']} of {tasks} tasks with at least one passed attempt)")


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
    starts = [cost_hf.parse_time(r["created_at"]) for r in rows if r["created_at"]] + [s.started for s in spans]
    ends = [r["_interval"][1] for r in rows if r["_interval"]] + [s.finished or now for s in spans]
    wall = (max(ends) - min(starts)).total_seconds() if starts and ends else None
    scored, passed = report.get("scored", 0), report.get("passed", 0)
    k, tasks = report.get("n_attempts", 1), report.get("tasks", 0)
    passed_tasks = passed_task_count(report)
    return {
        "per_role": {k: {**v, "cost_usd": round(v["cost_usd"], 6)} for k, v in sorted(per_role.items(), key=lambda kv: ROLES.index(kv[0]))},
        "total_usd": round(total, 6), "unpriced_jobs": sum(g["unpriced"] for g in per_role.values()),
        "gpu_hours": round(gpu_secs / 3600, 6), "wall_clock_secs": wall,
        "first_start": cost_hf.iso(min(starts)) if starts else None,
        "last_end": cost_hf.iso(max(ends)) if ends else None,
        "scored": scored, "passed": passed, "attempts_per_task": k, "tasks": tasks, "passed_tasks": passed_tasks,
        "trials": len(spans),
        "usd_per_scored_attempt": round(total / scored, 6) if scored else None,
        "usd_per_passed_attempt": round(total / passed, 6) if passed else None,
        "usd_per_passed_task": round(total / passed_tasks, 6) if passed_tasks else None,
        "idle_gpu_minutes": round(idle_secs / 60, 3), "idle_gpu_usd": round(idle_usd, 6),
    }


def collect(hf, *, run: str, project_label: str, namespace: str | None, manifest: Path, claims: list[cost_sandboxes.Claim],
            since: datetime | None = None, until: datetime | None = None, instance: str | None = None,
            ) -> tuple[list[tuple[dict, str, str]], list[str], list[dict]]:
    """([(job, role, found_by)], problems, others). The manifest's jobs (inspected), the run's
    labelled jobs (listed), the sandboxes its trials prove its own (listed); others: the sandboxes
    created while the run ran that none of its trials proves its own (attribute's since, until).
    A listed job labelled with another INSTANCE is another checkout's run of the same name (scripts/
    lib.sh): not this run's spend, whatever its run= label. One with no instance label was launched
    before instances were labelled, and is counted as before."""
    problems: list[str] = []
    launched = manifest_jobs(manifest)
    ns = namespace or next((j.namespace for j in launched if j.namespace), None)
    found: dict[str, tuple[dict, str, str]] = {}
    for j in launched:
        target = f"{j.namespace or ns}/{j.job_id}" if (j.namespace or ns) else j.job_id
        try:
            rows = cost_hf.hf_json(hf, "jobs", "inspect", "--json", target)
            found[j.job_id] = (cost_hf.normalise_job(rows[0]), j.role, j.found)
        except (cost_hf.HfFailed, IndexError, KeyError, TypeError) as e:
            problems.append(f"{target} ({j.role}, {j.found}): {e}")
    args = ["jobs", "ps", "-a", "--json", "--limit", "0", "-l", f"project={project_label}", "-l", f"run={run}"]
    if ns:
        args += ["--namespace", ns]
    try:
        listing = cost_hf.hf_json(hf, *args)
        bad = 0
        for raw in listing if isinstance(listing, list) else []:
            job = cost_hf.normalise_job(raw) if isinstance(raw, dict) else {"id": None}
            if job["id"] is None:
                bad += 1
            elif instance and job["labels"].get("instance", instance) != instance:
                continue
            elif job["id"] not in found:  # one job, whether the answer spelt its id 123 or "123"
                role = ROLE_OF_LABEL.get(job["labels"].get("role", ""), "server")
                found[job["id"]] = (job, role, f"label run={run}")
        if bad:
            problems.append(f"hf {shlex.join(args)}: {bad} job(s) whose id is not a plain name, left out")
    except cost_hf.HfFailed as e:
        problems.append(str(e))
    sandboxes, trouble = cost_hf.list_sandboxes(hf, ns)
    problems += trouble
    split = cost_sandboxes.attribute([j for j in sandboxes if j["id"] not in found], claims, since=since, until=until)
    for job, _, why in split.mine:
        found[job["id"]] = (job, "sandbox", why)
    return list(found.values()), problems, split.others


def cost_report(hf, prices: cost_prices.Prices, *, run: str, project_label: str, namespace: str | None, manifest: Path,
                report: dict, now: datetime | None = None, instance: str | None = None) -> dict:
    now = now or fmt.utc_now()
    spans = trial_spans(report)
    claims = cost_sandboxes.run_claims(report, manifest.parent)
    jobs, problems, others = collect(hf, run=run, project_label=project_label, namespace=namespace,
                                     manifest=manifest, claims=claims, instance=instance,
                                     # the caller read the trial dirs a moment before `now`
                                     until=now - timedelta(seconds=cost_sandboxes.SLACK_SECS))
    rows = [job_row(j, role, found, prices, now) for j, role, found in jobs]
    rows.sort(key=lambda r: (ROLES.index(r["role"]), r["created_at"] or "", r["job"]))
    summary = summarise(rows, spans, report, now)
    for r in rows:
        r.pop("_interval")
    return {"run": run, "prices": {"source": prices.source, "label": prices.label, "read_at": prices.read_at},
            "manifest": cost_hf.rel(manifest), "jobs": rows, **summary,
            "unattributed_sandboxes": len(others),
            "unattributed_sandbox_jobs": [cost_hf.sandbox_name(j) for j in others],
            "problems": problems}


def render_cost(doc: dict) -> str:
    out = [f"Run {doc['run']}: what it cost. Prices: {doc['prices']['label']}.", ""]
    head = ("ROLE", "JOB", "STAGE", "FLAVOR", "RUNNING", "$/H", "COST", "FOUND BY")
    rows = [head]
    for r in doc["jobs"]:
        per_h = fmt.UNKNOWN if r["usd_per_hour"] is None else f"{r['usd_per_hour'] + (r['exposed_port_usd_per_hour'] or 0):.2f}"
        rows.append((r["role"], r["job"], r["stage"], r["flavor"] or fmt.UNKNOWN, fmt.elapsed(r["running_secs"]), per_h,
                     fmt.dollars(r["cost_usd"]), r["found_by"]))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(head) - 1)]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)) + "  " + str(row[-1]) for row in rows]
    out.append("")
    if not doc["jobs"]:
        out += ["No job found: the manifest records no launch, and no job carries the run's label.", ""]
    for role, g in doc["per_role"].items():
        extra = f", {g['unpriced']} without a price" if g["unpriced"] else ""
        out.append(f"{role + ':':<14} {fmt.dollars(g['cost_usd']):>10}  {g['jobs']} job(s), {fmt.elapsed(g['running_secs'])} running{extra}")
    out.append(f"{'total:':<14} {fmt.dollars(doc['total_usd']):>10}  GPU hours {doc['gpu_hours']:.2f}, wall-clock {fmt.elapsed(doc['wall_clock_secs'])}"
               + (f" ({doc['first_start']} to {doc['last_end']})" if doc["first_start"] else ""))
    out.append(f"per scored attempt: {fmt.dollars(doc['usd_per_scored_attempt'])} ({doc['scored']} scored); {passed_text(doc)}")
    out.append(f"idle GPU: {doc['idle_gpu_minutes']:.0f} min, {fmt.dollars(doc['idle_gpu_usd'])} "
               f"(a server running while none of the run's {doc['trials']} trial(s) ran)")
    out.append("Running time: HF's durations.running_secs of each job (time billed); cost = running hours × (flavor price "
               "+ exposed port). Sandboxes carry no run label: one counts when a trial of the run proves it its own "
               "(FOUND BY; docs/cost.md §5).")
    if doc["unattributed_sandboxes"]:
        out.append(f"note: {cost_sandboxes.unattributed_note(doc['unattributed_sandbox_jobs'])}")
    if doc["unpriced_jobs"]:
        out.append(f"warning: {doc['unpriced_jobs']} job(s) have a flavor without a price: not in the total.")
    for p in doc["problems"]:
        out.append(f"warning: {p}")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- sandboxes
