#!/usr/bin/env python3
"""The README's and docs/scaling.md's estimates for the reference's Run 1 and the leaderboard run,
and every shipped run file's MAX_COST and SERVER_TIMEOUT, generated from make plan's model (one
estimator: docs/plan.md §1), so no page or run file quotes a figure the plan does not give.

A shipped run file (runs/*.env but the bundled examples) holds MAX_COST= make plan's figure for its
own configuration (the p90 spend + 20%: tools/money/plan_render.py ceiling_of), the one ceiling
make print, make reproduce's plan and make plan give it; and a SERVER_TIMEOUT that covers its p90
wall-clock with the same 20% to spare (plan_render.server_timeout_of: --write raises a short one to
that, in whole hours).

    .venv/bin/python benchmarks/plan_estimates.py           # print the blocks
    .venv/bin/python benchmarks/plan_estimates.py --write   # rewrite them in place
    .venv/bin/python benchmarks/plan_estimates.py --check   # exit 1, naming the file, when a page is stale

Each block sits between `<!-- plan:NAME -->` and `<!-- /plan:NAME -->` in README.md and
docs/scaling.md; everything outside the markers is left as it is. The figures come from
make plan JSON=1 (its own settings resolution, its default PLAN_REPS and PLAN_SEED), run
offline with JOBS_DIR an empty dir: the reference's numbers, whatever job dirs this clone holds. The tests run
--check (tests/test_plan.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGES = (REPO / "README.md", REPO / "docs" / "scaling.md")
from tools.money.plan_render import COST_MARGIN  # noqa: E402  (tools/ is installed into .venv by make setup)
from tools.settings import catalogue  # noqa: E402
from tools.settings_types import strict_duration  # noqa: E402

LEADERBOARD = "qwen-t2-leaderboard"


def shipped_runs() -> list[str]:
    """The run files the repository ships for real runs: every runs/*.env but the bundled examples."""
    return sorted(p.stem for p in (REPO / "runs").glob("*.env") if not p.stem.startswith("example-"))


def seconds(duration: str) -> float:
    """A duration setting's seconds, by the settings catalogue's own duration type."""
    value = strict_duration(duration)
    if value is None:
        raise ValueError(f"not a duration: {duration!r}")
    return value


def setting_line(text: str, name: str) -> re.Match | None:
    return re.search(rf"^{name}=(\S*)(.*)$", text, re.M)


def run_file_problems(run: str, own: dict, write: bool) -> list[str]:
    """How runs/<run>.env stands against make plan's row for its own configuration; with write, fixed."""
    path = REPO / "runs" / f"{run}.env"
    text = path.read_text(encoding="utf-8")
    problems, max_cost = [], own["max_cost"]
    m = setting_line(text, "MAX_COST")
    if m is None or m[1] != str(max_cost):
        problems.append(f"runs/{run}.env: MAX_COST={m[1] if m else '(unset)'}, make plan's figure is {max_cost}")
        line = (f"MAX_COST={max_cost}   # make plan's figure for this configuration: its p90 spend + "
                f"{COST_MARGIN:.0%} (benchmarks/plan_estimates.py)")
        text = text.replace(m[0], line) if m else text.rstrip("\n") + "\n" + line + "\n"
    need, figure = own["server_timeout_need_secs"], own["server_timeout"]
    m = setting_line(text, "SERVER_TIMEOUT")
    have = seconds(m[1]) if m else seconds(catalogue()["SERVER_TIMEOUT"].default)
    if have < need:
        problems.append(f"runs/{run}.env: SERVER_TIMEOUT={m[1] if m else 'the default'} ({have:.0f} s) does not cover "
                        f"make plan's p90 {own['wall_clock_p90_secs']:.0f} s + {COST_MARGIN:.0%} ({need} s)")
        line = f"SERVER_TIMEOUT={figure}"
        text = text.replace(m[0], line + m[2]) if m else text.rstrip("\n") + "\n" + line + "\n"
    if write and problems:
        path.write_text(text, encoding="utf-8")
    return problems


def plan_json(run: str, deadline: str | None = None) -> dict:
    """make plan's whole plan for a run, as JSON, with nothing of this machine's state in it."""
    with tempfile.TemporaryDirectory() as state:
        env = {k: v for k, v in os.environ.items() if k not in ("CLI_SETTINGS", "DRY_RUN", "DEADLINE", "RUN")}
        env["STATE_ROOT"] = state
        argv = ["make", "-C", str(REPO), "--no-print-directory", "plan", f"RUN={run}", "JSON=1",
                f"JOBS_DIR={Path(state) / 'no-jobs'}"] + ([f"DEADLINE={deadline}"] if deadline else [])
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode:
        sys.exit(f"plan_estimates: make plan RUN={run} failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def hours(secs: float) -> str:
    return f"{secs / 3600:.1f} h"


def config_text(r: dict) -> str:
    return (f"`{r['profile']}`, {r['shards']} shard{'s' * (r['shards'] > 1)} × `-n {r['n_concurrent']}` "
            f"({r['at_once']} trials at once)")


def row(run: str, what: str, r: dict) -> str:
    max_cost = r["max_cost"]
    return (f"| `{run}` | {what} | {config_text(r)} | {hours(r['wall_clock_median_secs'])} | "
            f"{hours(r['wall_clock_p90_secs'])} | ${r['usd_median']:,.0f} / ${r['usd_p90']:,.0f} | {max_cost} | "
            f"{r['mopup_passes_mean']:.1f} ({r['mopup_passes_p90']}) | {r['timeout_share']:.0%} | "
            f"{r['infra_rate']:.1%} |")


def blocks() -> dict[str, str]:
    run1 = plan_json("qwen-t2")
    lb48 = plan_json(LEADERBOARD, "48h")
    lb24 = plan_json(LEADERBOARD, "24h")
    rec48, rec24 = lb48["recommendation"], lb24["recommendation"]
    assert rec48["meets"] and not rec24["meets"], "the leaderboard's deadlines no longer read as the pages say"
    lines = [
        "| run | what | configuration | median | p90 | dollars (median / p90) | MAX_COST | mop-up passes (p90) | "
        "attempts at their timeout | infra errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
        row("qwen-t2", "as its run file says (the reference's Run 1, ×4)", run1["own"]),
        row(LEADERBOARD, "as its run file says (×1, 5 attempts)", lb48["own"]),
        row(LEADERBOARD, "`make plan DEADLINE=48h`'s recommendation", rec48["row"]),
        row(LEADERBOARD, f"the fastest within {rec24['infra_ceiling']:.0%} infra errors: misses a 24 h deadline "
                         f"by {hours(rec24['miss_secs'])}", rec24["row"]),
    ]
    b = lb48["binding"]
    lines += ["", f"From launch to the last mop-up pass, server loading (`READY_TIMEOUT`) included; medians and 90th "
                  f"percentiles of {lb48['reps']} simulated runs; MAX_COST is the p90 spend + {COST_MARGIN:.0%}. Fitted "
                  f"to the reference (no job dir of either run yet): {lb48['evidence']['source']}. What binds: the "
                  f"sandboxes, at most {b['at_once_limit']} trials at once within {lb48['infra_ceiling']:.0%} infra "
                  f"errors; the fastest server ({b['fastest_profile']}) would cut the attempts that reach their "
                  f"timeout from {b['baseline_timeout_share']:.0%} to {b['fastest_timeout_share']:.0%}. "
                  f"`make print` and `make reproduce DRY_RUN=1` say the same for a run's own configuration, and "
                  f"`make plan` says it for every configuration ([docs/plan.md](docs/plan.md))."]
    command = rec48["run_with"]["command"]
    return {"estimates": "\n".join(lines), "leaderboard-command": f"```bash\n{command}   # make plan DEADLINE=48h's "
                                                                  f"line\n```"}


MARKER = re.compile(r"(<!-- plan:(?P<name>[a-z-]+) -->\n)(?P<body>(?:.*?\n)?)(<!-- /plan:(?P=name) -->)", re.S)


def rewrite(text: str, generated: dict[str, str], page: Path) -> str:
    def sub(m: re.Match) -> str:
        body = generated[m["name"]]
        if page.parent.name == "docs":  # a page under docs/ links docs/plan.md as plan.md
            body = body.replace("](docs/", "](")
        return m.group(1) + body + "\n" + m.group(4)

    return MARKER.sub(sub, text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    generated = blocks()
    stale = []
    if args.write or args.check:
        for run in shipped_runs():
            stale += run_file_problems(run, plan_json(run)["own"], args.write)
    if not (args.write or args.check):
        for name, body in generated.items():
            print(f"<!-- plan:{name} -->\n{body}\n<!-- /plan:{name} -->\n")
        return 0
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        if not MARKER.search(text):
            stale.append(f"{page.relative_to(REPO)} has no <!-- plan:NAME --> block")
            continue
        new = rewrite(text, generated, page)
        if new != text:
            if args.write:
                page.write_text(new, encoding="utf-8")
            else:
                stale.append(f"{page.relative_to(REPO)} quotes figures make plan no longer gives")
    for line in stale:
        print(f"plan_estimates: {line}: run .venv/bin/python benchmarks/plan_estimates.py --write", file=sys.stderr)
    return 1 if stale and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
