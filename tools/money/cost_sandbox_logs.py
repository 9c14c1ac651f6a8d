"""cost_sandbox_logs: the sandbox behind each infra error, the last lines of its log, and the fix.

For a task (or every infra-errored task of the tally), the sandbox job(s) its trials proved their
own (tools/money/cost_sandboxes.py), their stage and the last lines of their logs; a sandbox that shut
itself down for idleness (`sbx-server: idle for 601917ms, shutting down`) is named, with the fix
(SANDBOX_IDLE_TIMEOUT).
"""

from __future__ import annotations

import re
from pathlib import Path

from tools.money import cost_hf
from tools.money import cost_jobs
from tools.money import cost_sandboxes
from tools import fmt
from tools import safe_read

IDLE_SHUTDOWN = re.compile(r"sbx-server: idle for (\d+)ms, shutting down")
IDLE_CAP_MS = 10 * 365 * 86400 * 1000


def idle_shutdown(lines: list[str]) -> int | None:
    """The idle time (ms) of an `sbx-server: idle for <ms>ms, shutting down` line, if any."""
    for line in reversed(lines):
        if m := IDLE_SHUTDOWN.search(line):
            ms = int(m.group(1)) if len(m.group(1)) <= 15 else None
            return ms if ms is not None and ms <= IDLE_CAP_MS else None
    return None


def sandboxes_report(hf, *, run: str, namespace: str | None, manifest: Path, report: dict, task: str | None,
                     tail: int, idle_timeout: str) -> dict:
    spans = cost_jobs.trial_spans(report)
    if task:
        tasks = [task]
        if not any(e["task"] == task for e in report.get("per_task", [])):
            raise cost_hf.CostError(f"task '{task}' is not in run '{run}' (make tally RUN={run} lists its tasks)")
    else:
        tasks = [e["task"] for e in report.get("per_task", []) if e["outcome"] == "errored" and not e.get("verdict")]
    launched = cost_jobs.manifest_jobs(manifest)
    ns = namespace or next((j.namespace for j in launched if j.namespace), None)
    wanted = [s for s in spans if s.task in tasks]
    listing, problems = cost_hf.list_sandboxes(hf, ns)
    # Every trial of the run competes for the sandboxes, so each shown is the one its trial proves its own.
    proven: dict[str, list[tuple[dict, str]]] = {}
    for job, claim, why in cost_sandboxes.attribute(listing, cost_sandboxes.run_claims(report, manifest.parent)).mine:
        proven.setdefault(claim.trial, []).append((job, why))
    outcome = {e["task"]: e for e in report.get("per_task", [])}
    out_tasks = []
    for name in tasks:
        e = outcome.get(name, {})
        trials = []
        for s in (s for s in wanted if s.task == name):
            boxes = []
            for j, why in sorted(proven.get(s.trial, []), key=lambda p: (cost_hf.iso(p[0]["created_at"]) or "", p[0]["id"])):
                target = cost_hf.sandbox_name(j)
                try:
                    lines = hf("jobs", "logs", "-n", str(tail), target).splitlines()
                    log_error = None
                except cost_hf.HfFailed as err:
                    lines, log_error = [], str(err)
                # Printed to a terminal: a log's own escape sequences are shown, never obeyed.
                lines = [safe_read.printable(ln)[:2000] for ln in lines if not ln.startswith("===== Job started")][-tail:]
                ms = idle_shutdown(lines)
                boxes.append({"job": target, "stage": j["stage"], "flavor": j["flavor"],
                              "created_at": cost_hf.iso(j["created_at"]), "finished_at": cost_hf.iso(j["finished_at"]),
                              "found_by": f"label {cost_hf.SANDBOX_LABEL}; {why}",
                              "log_tail": lines, "log_error": log_error, "idle_shutdown_ms": ms})
            trials.append({"trial": s.trial, "started_at": cost_hf.iso(s.started),
                           "finished_at": cost_hf.iso(s.finished), "exception_type": s.exception_type, "sandboxes": boxes,
                           "ambiguous": len(boxes) > 1})
        out_tasks.append({"task": name, "outcome": e.get("outcome"), "exception_type": e.get("exception_type"),
                          "trials": trials})
    return {"run": run, "task": task, "idle_timeout": idle_timeout, "tasks": out_tasks, "problems": problems}


def idle_advice(ms: int, idle_timeout: str, run: str) -> list[str]:
    """Plain words for a sandbox that shut itself down for idleness, and the fix."""
    idle = fmt.elapsed(ms / 1000)
    lines = [f"=> IDLE SHUTDOWN: the sandbox stopped itself after {idle} with no command running (sbx-server's idle "
             f"timeout), so harbor lost it mid-trial. An infrastructure error, not the model's."]
    setting = fmt.parse_duration(idle_timeout)
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
                out.append(f"    no sandbox job found that this trial proves its own (label {cost_hf.SANDBOX_LABEL}; docs/cost.md §5)")
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
