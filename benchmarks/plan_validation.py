#!/usr/bin/env python3
"""How far make plan's queue model is from what job dirs recorded: each bundled example job
replayed through the simulator with its own settings.

    .venv/bin/python benchmarks/plan_validation.py [--jobs-dir examples/jobs] [--json]

For every job dir under --jobs-dir: its finished trials' recorded lengths (result.json
started_at to finished_at, errored ones included at their recorded length, read through
tally_trials' scan and tools/money/cost_jobs.py's trial_spans), queued in the order they started and run
--n-concurrent (its config.json's n_concurrent_trials) at a time by tools/money/plan.py's
pass_makespan, with no infra draw (the record holds its infra errors already), no server
loading and no mop-up pass (a retry job is a job of its own here). The prediction is compared
with two recorded wall-clocks: the job's result.json started_at to finished_at (what the brief
asks for; harbor writes them naive, read as UTC as the tally reads them), and the trials' own
span, the first trial's start to the last one's end (no time before the first trial). Prints a
Markdown table and the largest error of each; docs/plan.md §5 quotes them. Reads only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

from tools.money import cost_hf
from tools.money import cost_jobs
from tools.money import plan_sim
from tools.money import plan_evidence
from tools import safe_read
from tools.results import tally_core
from tools.results import tally_policy
from tools.results import tally_trials

REPO = Path(__file__).resolve().parent.parent


def job_span(job_dir: Path) -> float | None:
    """Seconds from the job's result.json started_at to its finished_at, or None."""
    try:
        r = safe_read.read_json_object(job_dir / "result.json")
    except (OSError, safe_read.Unreadable):
        return None
    start, _ = tally_trials.parse_timestamp(r.get("started_at"))
    end, _ = tally_trials.parse_timestamp(r.get("finished_at"))
    return (end - start).total_seconds() if start and end and end >= start else None


def replay(job_dir: Path) -> dict | None:
    """One job dir: its recorded trials through the simulator at its own concurrency."""
    notes: list[str] = []
    _, conc = plan_evidence.job_settings(str(job_dir), notes)
    if not conc:
        return None
    report = tally_core.tally([job_dir], tally_policy.load_policy(), run=job_dir.name)
    spans = [s for s in cost_jobs.trial_spans(report) if s.finished and s.finished >= s.started]
    if not spans:
        return None
    lengths = np.array([(s.finished - s.started).total_seconds() for s in spans])  # in start order
    predicted = float(plan_sim.pass_makespan(lengths[None, None, :], conc)[0])
    recorded_job = job_span(job_dir)
    recorded_trials = (max(s.finished for s in spans) - min(s.started for s in spans)).total_seconds()
    overlap = max_overlap(spans)
    return {
        "job": cost_hf.rel(job_dir), "n_concurrent": conc, "trials": len(spans),
        "max_overlap": overlap, "predicted_secs": predicted, "job_secs": recorded_job,
        "trials_secs": recorded_trials,
        "error_vs_job": (predicted - recorded_job) / recorded_job if recorded_job else None,
        "error_vs_trials": (predicted - recorded_trials) / recorded_trials,
    }


def max_overlap(spans) -> int:
    """The most trials the record shows running at once (above n_concurrent: not a real queue)."""
    events = sorted([(s.started, 1) for s in spans] + [(s.finished, -1) for s in spans], key=lambda e: (e[0], e[1]))
    now = most = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def hours(secs: float | None) -> str:
    return "-" if secs is None else f"{secs / 3600:.2f} h"


def pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.0%}"


def render(rows: list[dict]) -> str:
    out = ["| job | -n | trials | most at once | predicted | recorded (job result.json) | error | "
           "recorded (trials' span) | error |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['job']} | {r['n_concurrent']} | {r['trials']} | {r['max_overlap']} | "
                   f"{hours(r['predicted_secs'])} | {hours(r['job_secs'])} | {pct(r['error_vs_job'])} | "
                   f"{hours(r['trials_secs'])} | {pct(r['error_vs_trials'])} |")
    job_errs = [abs(r["error_vs_job"]) for r in rows if r["error_vs_job"] is not None]
    trial_errs = [abs(r["error_vs_trials"]) for r in rows]
    out.append("")
    out.append(f"largest error: {max(job_errs):.0%} against the jobs' result.json wall-clock, "
               f"{max(trial_errs):.0%} against the trials' span ({len(rows)} job dirs)")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs-dir", type=Path, default=REPO / "examples" / "jobs")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    dirs = sorted(p for p in args.jobs_dir.iterdir() if p.is_dir() and (p / "config.json").is_file())
    rows = [r for r in (replay(d) for d in dirs) if r]
    if not rows:
        print(f"plan_validation: no job dir with finished trials under {args.jobs_dir}", file=sys.stderr)
        return 1
    print(json.dumps(rows, indent=1) if args.json else render(rows), end="" if not args.json else "\n")
    return 0


if __name__ == "__main__":
    os.chdir(REPO)
    sys.exit(main())
