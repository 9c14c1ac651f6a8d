#!/usr/bin/env python3
"""How long `make plan` takes and how much memory it holds, at its baseline and at the largest
input it accepts (tools/money/plan.py's ATTEMPTS_CAP and WORK_CAP).

    .venv/bin/python benchmarks/plan_speed.py [--case NAME ...] [--json]

Each case runs tools.money.plan.plan() in a fresh Python process (what `make plan` runs, minus the
printing) and reports the seconds of its plan() call, wall-clock and CPU (the CPU figure is the
one to compare on a loaded machine), and the process's peak resident memory (getrusage's
ru_maxrss, imports included), each also as a ratio to the baseline's, measured in the same run
on the same machine. The cases:

  baseline         the leaderboard run as make plan plans it: 89 tasks × 5 attempts × 200
                   repetitions (PLAN_REPS' default), the one-H200 profile (112 configurations), the
                   reference's agent times and infra-error curve (no job dirs)
  most reps        89 × 5 × the most repetitions WORK_CAP allows (1,123)
  most attempts    ATTEMPTS_CAP attempts (10,000 tasks × 1) × the most repetitions WORK_CAP allows
                   them (50)
  worst curve      most reps, from a job dir whose trials nearly all end in an infra error (39 of
                   40 at -n 8): every configuration runs mop-up passes up to the 30-pass guard
  worst attempts   most attempts, from that job dir

112 configurations: every bundled profile of the model (one to eight H200s, data- and
tensor-parallel) with its shard counts and N_CONCURRENT 1 to 8. Prints a Markdown table
(docs/plan.md §7 quotes it). Writes only under a temporary dir it removes (the worst curve's job
dir). About ten minutes in all.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from tools.money import cost_prices
from tools.money import plan

REPO = Path(__file__).resolve().parent.parent

# One plan() in a child process: its seconds and its peak RSS, as JSON on stdout.
CHILD = """
import json, resource, sys, time
from pathlib import Path
from tools.money import plan
case = json.loads(sys.argv[1])
start, cpu = time.monotonic(), time.process_time()
doc = plan.plan(run="bench", tasks=case["tasks"], k=case["k"], mult=1.0, timeout_estimate=900.0,
                model="Qwen/Qwen3.8-27B-FP8", server="qwen3.8-27b-fp8-sglang-h200", server_flavor="h200",
                sandbox_flavor="cpu-upgrade", jobs_dir=case["jobs_dir"], job_name="bench", deadline=86400.0,
                reps=case["reps"], seed=0, mopup_passes=3, max_infra_rate=0.3, ready_timeout=2700.0,
                prices_path=Path(case["prices"]))
print(json.dumps({"secs": time.monotonic() - start, "cpu_secs": time.process_time() - cpu, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "configurations": len(doc["configurations"]),
                  "mopup_passes_max": max(r["mopup_passes_p90"] for r in doc["configurations"])}))
"""


def erring_job_dir(root: Path) -> Path:
    """A jobs dir whose job `bench` ran at -n 8 and saw 39 infra errors in 40 trials."""
    from tests.fixtures.harbor_jobs import TrialSpec, write_job

    specs = [TrialSpec("t0", 1.0)] + [TrialSpec(f"t{i}", None, "SandboxError", "Sandbox API error (503)")
                                      for i in range(1, 40)]
    job = write_job(root / "jobs", "bench", specs, dataset=root / "dataset", multiplier=1.0)
    config = json.loads((job / "config.json").read_text())
    config["n_concurrent_trials"] = 8
    (job / "config.json").write_text(json.dumps(config, indent=4))
    return root / "jobs"


def cases(root: Path) -> dict[str, dict]:
    most_reps = plan.WORK_CAP // (89 * 5)
    erring = str(erring_job_dir(root))
    base = {"tasks": 89, "k": 5, "reps": 200, "jobs_dir": str(root / "no-jobs"), "prices": str(cost_prices.TSV_PRICES)}
    return {
        "baseline": base,
        "most reps": {**base, "reps": most_reps},
        "most attempts": {**base, "tasks": plan.ATTEMPTS_CAP, "k": 1, "reps": plan.WORK_CAP // plan.ATTEMPTS_CAP},
        "worst curve": {**base, "reps": most_reps, "jobs_dir": erring},
        "worst attempts": {**base, "tasks": plan.ATTEMPTS_CAP, "k": 1, "reps": plan.WORK_CAP // plan.ATTEMPTS_CAP,
                           "jobs_dir": erring},
    }


def measure(case: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(case)], capture_output=True, text=True, cwd=REPO)
    if proc.returncode:
        sys.exit(f"plan_speed: the case {case} failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", action="append", help="only these cases (the baseline is always run)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="plan-speed-") as tmp:
        todo = cases(Path(tmp))
        names = ["baseline"] + [n for n in todo if n != "baseline" and (not args.case or n in args.case)]
        results = {}
        for name in names:
            results[name] = {**todo[name], **measure(todo[name])}
            print(f"plan_speed: {name}: {results[name]['secs']:.1f} s ({results[name]['cpu_secs']:.1f} s CPU), "
                  f"{results[name]['peak_mib']:.0f} MiB",
                  file=sys.stderr)
    if args.json:
        print(json.dumps(results, indent=1))
        return
    base = results["baseline"]
    print("| case | tasks × k × reps | configurations | most mop-up passes (p90) | wall s | CPU s | CPU × baseline | "
          "peak MiB | × baseline |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['tasks']:,} × {r['k']} × {r['reps']:,} = {r['tasks'] * r['k'] * r['reps']:,} | "
              f"{r['configurations']} | {r['mopup_passes_max']} | {r['secs']:.1f} | {r['cpu_secs']:.1f} | "
              f"{r['cpu_secs'] / base['cpu_secs']:.1f} | {r['peak_mib']:.0f} | {r['peak_mib'] / base['peak_mib']:.1f} |")


if __name__ == "__main__":
    main()
