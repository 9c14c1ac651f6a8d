#!/usr/bin/env python3
"""report: compare tallied runs, draw them, and check them against the leaderboard rules.

Usage:
  tools/report.py compare [--timeouts-unscored] [--format md|json] [-o FILE] RUN...
  tools/report.py render  [--timeouts-unscored] [--out-dir DIR] [--dry-run] RUN...
  tools/report.py html    [--timeouts-unscored] [-o FILE] [--dry-run] RUN...
  tools/report.py results [--timeouts-unscored] [--readme README.md] [--figures-dir DIR] [--dry-run] RUN...
  tools/report.py check-submission [--format md|json] [RUN...]

RUN is any of:
  * a tally JSON file (`tools/tally.py tally ... --json > FILE.json`),
  * a harbor job dir (tallied as `--jobs-dir PARENT --job-name BASENAME`),
  * a run name from runs/ (its JOBS_DIR and JOB_NAME resolved by scripts/lib.sh, then tallied).
check-submission with no RUN acts on the last run used (state/last-run), like `make`.

Every number comes from a tally, and every tally row names the trial dir whose result.json
decided it; the JSON output keeps those paths, so any cell can be traced to its file.

Every file is written atomically (a temp file beside it, then a rename): an interrupted or
failed write leaves the old file as it was. `--dry-run` prints each file it would write
(and whether the README's results section would change) and writes nothing.
Files are read through tools/safe_read.py: a FIFO is never opened, a tally file over
512 MiB or a result.json over 64 MiB is refused with its size.

Exit codes: 0 success (check-submission: the run meets the rules); 1 a user error, with a
message naming the problem and the fix (check-submission: the run does not meet the rules).
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import json
import math
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

import click

try:
    from tools import safe_read as SR
except ImportError:  # run as tools/report.py, or imported with tools/ on sys.path
    import safe_read as SR

REPO_ROOT = Path(__file__).resolve().parent.parent

OUTCOMES = ("passed", "failed", "errored", "unclassified", "unfinished")
SCORED = ("passed", "failed")
Z95 = 1.959963984540054  # two-sided 95% normal quantile

RESULTS_START = "<!-- results:start -->"
RESULTS_END = "<!-- results:end -->"

ACCOUNTING_TEXT = {
    "timeouts-scored": (
        "timeouts scored (a genuine agent timeout is a scored failure; "
        "infrastructure errors are unscored)"
    ),
    "timeouts-unscored": (
        "timeouts unscored (agent timeouts are set aside, unscored, with the infrastructure "
        "errors: the reference's Run 1 table)"
    ),
}

TALLY_FIELDS = (
    "run", "accounting", "tasks", "passed", "failed", "errored", "unclassified",
    "unfinished", "scored", "pass_rate", "per_task",
)
TASK_FIELDS = ("task", "outcome")


def fail(message: str) -> None:
    """A user error: click prints `Error: message` and exits 1."""
    raise click.ClickException(message)


# --- statistics ------------------------------------------------------------------------


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval for a binomial proportion; None when n == 0."""
    if n == 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes={successes} outside 0..n={n}")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar_exact_p(b: int, c: int) -> float | None:
    """Two-sided exact McNemar p-value: binomial(b + c, 1/2) on the discordant pairs."""
    n = b + c
    if n == 0:
        return None
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


# --- loading tallies -----------------------------------------------------------------------


COUNT_FIELDS = ("tasks", *OUTCOMES, "scored")
REGENERATE = "Regenerate it with: tools/tally.py tally ... --json"


def validate_tally(tally: Any, source: str) -> dict:
    """Check the fields this tool reads, and their types; name what is wrong and the fix."""
    if not isinstance(tally, dict):
        fail(f"{source}: not a tally (a JSON object was expected). "
             f"Make one with: tools/tally.py tally --jobs-dir D --job-name N --json")
    missing = [f for f in TALLY_FIELDS if f not in tally]
    if missing:
        fail(f"{source}: tally JSON lacks {', '.join(missing)}. {REGENERATE}")
    for key in COUNT_FIELDS:
        if isinstance(tally[key], bool) or not isinstance(tally[key], int) or tally[key] < 0:
            fail(f"{source}: {key} is not a whole number ({SR.clip(repr(tally[key]), 60)}). {REGENERATE}")
    if not isinstance(tally["run"], str) or not isinstance(tally["accounting"], str):
        fail(f"{source}: run and accounting must be strings. {REGENERATE}")
    rate = tally["pass_rate"]
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate <= 1):
        fail(f"{source}: pass_rate is not null or a number in [0, 1] ({SR.clip(repr(rate), 60)}). {REGENERATE}")
    if not isinstance(tally["per_task"], list):
        fail(f"{source}: per_task is not a list of task rows. {REGENERATE}")
    for i, row in enumerate(tally["per_task"]):
        if not isinstance(row, dict):
            fail(f"{source}: per_task[{i}] is not an object. {REGENERATE}")
        lacking = [f for f in TASK_FIELDS if f not in row]
        if lacking:
            fail(f"{source}: per_task[{i}] lacks {', '.join(lacking)}")
        if not isinstance(row["task"], str):
            fail(f"{source}: per_task[{i}].task is not a string. {REGENERATE}")
        if row["outcome"] not in OUTCOMES:
            fail(f"{source}: task {SR.clip(repr(row['task']), 80)} has outcome {SR.clip(repr(row['outcome']), 40)}, "
                 f"not one of {', '.join(OUTCOMES)}")
    tally.setdefault("source", source)
    return tally


def load_tally_file(path: Path) -> dict:
    try:
        raw = SR.read_regular(path, SR.TALLY_CAP, "a tally file")
    except FileNotFoundError:
        fail(f"no tally at {path}: the file does not exist. "
             f"Write one with: tools/tally.py tally --jobs-dir D --job-name N --json > {path}")
    except SR.Unreadable as e:
        fail(f"{path}: {e}")
    try:
        data = SR.parse_json(raw)
    except SR.Unreadable as e:
        fail(f"{path}: not valid JSON ({e}). Regenerate the tally.")
    return validate_tally(data, str(path))


def known_runs() -> list[str]:
    return sorted(p.stem for p in (REPO_ROOT / "runs").glob("*.env"))


def resolve_run_settings(name: str) -> tuple[str, Path, str]:
    """(run, jobs dir, job name) of a run, through scripts/lib.sh: one source of truth."""
    script = ('source "$1"; RUN=$2; resolve_run; load_settings; '
              'printf "%s\\n%s\\n%s\\n" "$RUN" "$JOBS_DIR" "$JOB_NAME"')
    proc = subprocess.run(
        ["bash", "-c", script, "report", str(REPO_ROOT / "scripts" / "lib.sh"), name],
        capture_output=True, text=True, cwd=REPO_ROOT,
    )
    if proc.returncode != 0:
        fail(proc.stderr.strip() or f"cannot resolve run {name!r}")
    run, jobs_dir, job_name = proc.stdout.splitlines()[:3]
    jobs = Path(jobs_dir)
    return run, jobs if jobs.is_absolute() else REPO_ROOT / jobs, job_name


def run_tally(jobs_dir: Path, job_name: str, timeouts_unscored: bool, label: str) -> dict:
    """Run tools/tally.py (its JSON contract) and return the parsed tally."""
    tally_py = REPO_ROOT / "tools" / "tally.py"
    if not tally_py.exists():
        fail(f"no tally for {label}: {tally_py} is missing. "
             f"Pass a tally JSON file instead, or restore tools/tally.py.")
    argv = [sys.executable, str(tally_py), "tally", "--jobs-dir", str(jobs_dir),
            "--job-name", job_name, "--json"]
    if timeouts_unscored:
        argv.append("--timeouts-unscored")
    proc = subprocess.run(argv, capture_output=True, text=True, encoding="utf-8", errors="backslashreplace")
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        detail = proc.stderr.strip().removeprefix("Error: ") or f"exit {proc.returncode}, no JSON on stdout"
        fail(f"no tally for {label} ({jobs_dir / job_name}): {detail}")
    return validate_tally(data, label)


def load_run(arg: str, timeouts_unscored: bool = False) -> dict:
    """A tally from a tally JSON file, a job dir, or a run name (see the module doc)."""
    path = Path(arg)
    if os.path.lexists(arg) and not path.is_dir():  # a file, or a FIFO/loop load_tally_file names
        tally = load_tally_file(path)
        if timeouts_unscored and tally["accounting"] != "timeouts-unscored":
            fail(f"{arg}: tally uses {tally['accounting']}, but --timeouts-unscored was "
                 f"given. Re-tally with --timeouts-unscored, or drop the flag.")
        return tally
    if path.is_dir():
        resolved = path.resolve()
        return run_tally(resolved.parent, resolved.name, timeouts_unscored, arg)
    if arg.endswith(".json"):
        fail(f"no tally at {arg}: the file does not exist. Write one with: "
             f"tools/tally.py tally --jobs-dir D --job-name N --json > {arg}")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", arg) or arg not in known_runs():
        fail(f"{arg!r} is neither a tally JSON file, a job dir, nor a run. "
             f"Known runs: {' '.join(known_runs()) or '(none in runs/)'}")
    run, jobs_dir, job_name = resolve_run_settings(arg)
    return run_tally(jobs_dir, job_name, timeouts_unscored, f"run {run}")


# --- the comparison (pure) -------------------------------------------------------------------


def display_path(p: str | None) -> str | None:
    """A path relative to the working directory when it lies under it (stable goldens)."""
    if not p:
        return p
    try:
        return os.path.relpath(p) if Path(p).resolve().is_relative_to(Path.cwd()) else p
    except (OSError, ValueError, RuntimeError):  # RuntimeError: a symlink loop
        return p


def agent_of(tally: dict) -> tuple[str | None, str | None]:
    """Agent and model: from the tally if it says, else the first job's config.json."""
    if tally.get("agent"):
        return tally.get("agent"), tally.get("model")
    for job_dir in tally.get("job_dirs") or []:
        try:
            cfg = SR.read_json_object(Path(job_dir) / "config.json", what="a config.json")
            agent = (cfg.get("agents") or [{}])[0]
            name, model = agent.get("name"), agent.get("model_name")
        except (OSError, SR.Unreadable, AttributeError, IndexError, KeyError, TypeError):
            continue
        return (SR.clip(name, 100) if isinstance(name, str) else None,
                SR.clip(model, 200) if isinstance(model, str) else None)
    return None, None


def policy_text(policy: Any) -> str:
    if policy is None:
        return "unstated"
    if isinstance(policy, str):
        return display_path(policy)
    if isinstance(policy, dict):
        for key in ("path", "file", "name"):
            if policy.get(key):
                return display_path(str(policy[key]))
    return json.dumps(policy, sort_keys=True)[:80]


def run_summary(tally: dict) -> dict:
    """One row of the comparison table: every figure straight from the tally."""
    agent, model = agent_of(tally)
    attempts = [r.get("attempts") for r in tally["per_task"]]
    known = [a for a in attempts if isinstance(a, int)]
    interval = wilson_interval(tally["passed"], tally["scored"])
    tokens = tally.get("tokens") if isinstance(tally.get("tokens"), dict) else {}
    seconds = tally.get("agent_seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        seconds = None
    return {
        "run": tally["run"],
        "agent": agent,
        "model": model,
        "tasks": tally["tasks"],
        **{k: tally[k] for k in OUTCOMES},
        "scored": tally["scored"],
        "pass_rate": tally["pass_rate"],
        "wilson95": list(interval) if interval else None,
        "tokens_in": tokens.get("input"),
        "tokens_cache": tokens.get("cache"),
        "tokens_out": tokens.get("output"),
        "agent_hours": None if seconds is None else seconds / 3600,
        "attempts_per_task": (sum(known) / len(known)) if known else None,
        "exceptions": dict(sorted(tally["exceptions"].items())) if isinstance(tally.get("exceptions"), dict) else {},
        "accounting": tally["accounting"],
        "policy": policy_text(tally.get("policy")),
        "job_dirs": [display_path(d) for d in tally.get("job_dirs") or []],
        "source": display_path(tally.get("source")),
    }


def cell_of(row: dict) -> dict:
    return {
        "outcome": row["outcome"],
        "exception_type": row.get("exception_type"),
        "reward": row.get("reward"),
        "attempts": row.get("attempts"),
        "trial_dir": display_path(row.get("trial_dir")),
    }


def check_same_tasks(tallies: list[dict]) -> None:
    """Every run must cover the same tasks: say which are missing where."""
    sets = [{r["task"] for r in t["per_task"]} for t in tallies]
    union = set().union(*sets)
    problems = []
    for tally, tasks in zip(tallies, sets):
        missing = sorted(union - tasks)
        if missing:
            shown = ", ".join(missing[:10]) + (f" (+{len(missing) - 10} more)" if len(missing) > 10 else "")
            problems.append(f"run {tally['run']} lacks {len(missing)}: {shown}")
    if problems:
        fail("the runs cover different task sets, so their pass rates are not comparable. "
             + "; ".join(problems)
             + ". Tally the same dataset for every run (or finish the missing tasks).")


def pair_flips(name_a: str, name_b: str, outcomes_a: dict, outcomes_b: dict) -> dict:
    """McNemar-style counts over tasks scored in both runs."""
    counts = Counter()
    for task in sorted(outcomes_a):
        a, b = outcomes_a[task], outcomes_b[task]
        if a in SCORED and b in SCORED:
            counts[(a, b)] += 1
        else:
            counts["not_comparable"] += 1
    a_only = counts[("passed", "failed")]
    b_only = counts[("failed", "passed")]
    return {
        "a": name_a,
        "b": name_b,
        "a_passed_b_failed": a_only,
        "a_failed_b_passed": b_only,
        "both_passed": counts[("passed", "passed")],
        "both_failed": counts[("failed", "failed")],
        "not_comparable": counts["not_comparable"],
        "mcnemar_exact_p": mcnemar_exact_p(a_only, b_only),
    }


def compare(tallies: list[dict]) -> dict:
    """The comparison of one or more tallies over the same task set (pure)."""
    if not tallies:
        fail("nothing to compare: give at least one run or tally JSON file")
    names = [t["run"] for t in tallies]
    dupes = sorted(n for n, c in Counter(names).items() if c > 1)
    if dupes:
        fail(f"run {', '.join(dupes)} given more than once; give each run once")
    accountings = {t["accounting"] for t in tallies}
    if len(accountings) > 1:
        fail("the tallies use different accountings ("
             + ", ".join(f"{t['run']}: {t['accounting']}" for t in tallies)
             + "). Tally every run with the same switch (--timeouts-unscored or not).")
    empty = [t["run"] for t in tallies if not t["per_task"]]
    if empty:
        fail(f"empty matrix: run {', '.join(empty)} has no tasks in its tally. "
             f"Check its jobs dir and job name (make tally RUN=...).")
    check_same_tasks(tallies)
    by_run = [{r["task"]: r for r in t["per_task"]} for t in tallies]
    tasks = sorted(by_run[0])

    def disagrees(task: str) -> bool:
        return len({rows[task]["outcome"] for rows in by_run}) > 1

    order = sorted(tasks, key=lambda task: (not disagrees(task), task))
    matrix = [{"task": task, "disagree": disagrees(task),
               "cells": [cell_of(rows[task]) for rows in by_run]} for task in order]
    flips = []
    for i in range(len(tallies)):
        for j in range(i + 1, len(tallies)):
            flips.append(pair_flips(names[i], names[j],
                                    {k: v["outcome"] for k, v in by_run[i].items()},
                                    {k: v["outcome"] for k, v in by_run[j].items()}))
    accounting = accountings.pop()
    return {
        "accounting": accounting,
        "accounting_text": ACCOUNTING_TEXT.get(accounting, accounting),
        "interval": "Wilson score, 95%",
        "runs": [run_summary(t) for t in tallies],
        "flips": flips,
        "matrix": matrix,
        "disagreements": sum(1 for row in matrix if row["disagree"]),
    }


# --- formatting --------------------------------------------------------------------------------


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def interval_text(iv: list[float] | None) -> str:
    return "—" if not iv else f"{100 * iv[0]:.1f}–{100 * iv[1]:.1f}%"


def human(n: int | float | None) -> str:
    """5_680_000 → 5.68M; 681_000 → 681K; None → —."""
    if n is None:
        return "—"
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= div:
            v = n / div
            return f"{v:.3g}{suffix}" if v < 1000 else f"{v:.0f}{suffix}"
    return f"{n:g}"


def num(x: float | None, digits: int) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def p_text(p: float | None) -> str:
    if p is None:
        return "—"
    return f"{p:.3g}" if p >= 0.001 else "<0.001"


def cell_text(cell: dict) -> str:
    return cell["outcome"] + (f" ({cell['exception_type']})" if cell.get("exception_type") else "")


def extra_outcome_columns(runs: list[dict]) -> list[str]:
    return [k for k in ("unclassified", "unfinished") if any(r[k] for r in runs)]


def summary_table(cmp: dict) -> list[str]:
    runs = cmp["runs"]
    extra = extra_outcome_columns(runs)
    head = (["Run", "Agent", "Pass rate (excl. infra)", "95% CI (Wilson)", "Passed / Scored",
             "Errored"] + [e.capitalize() for e in extra]
            + ["Tokens in / out", "Agent hours", "Attempts / task"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in runs:
        cells = ([r["run"], r["agent"] or "—", pct(r["pass_rate"]), interval_text(r["wilson95"]),
                  f"{r['passed']}/{r['scored']}", str(r["errored"])]
                 + [str(r[e]) for e in extra]
                 + [f"{human(r['tokens_in'])} / {human(r['tokens_out'])}",
                    num(r["agent_hours"], 1), num(r["attempts_per_task"], 2)])
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def flips_table(cmp: dict) -> list[str]:
    lines = ["| A | B | A passed, B failed | A failed, B passed | Both passed | Both failed "
             "| Not scored in both | Exact McNemar p |", "|" + "---|" * 8]
    for f in cmp["flips"]:
        lines.append(f"| {f['a']} | {f['b']} | {f['a_passed_b_failed']} | {f['a_failed_b_passed']} "
                     f"| {f['both_passed']} | {f['both_failed']} | {f['not_comparable']} "
                     f"| {p_text(f['mcnemar_exact_p'])} |")
    return lines


def matrix_table(cmp: dict) -> list[str]:
    names = [r["run"] for r in cmp["runs"]]
    lines = ["| Task | " + " | ".join(names) + " |", "|" + "---|" * (len(names) + 1)]
    for row in cmp["matrix"]:
        mark = "≠ " if row["disagree"] else ""
        lines.append(f"| {mark}{row['task']} | "
                     + " | ".join(cell_text(c) for c in row["cells"]) + " |")
    return lines


def caption(cmp: dict) -> str:
    policies = sorted({r["policy"] for r in cmp["runs"]})
    return (f"Accounting: {cmp['accounting_text']}. Pass rate = passed / scored; "
            f"interval: {cmp['interval']}; tokens in include cached tokens. "
            f"Outcome policy: {', '.join(policies)}.")


def compare_markdown(cmp: dict) -> str:
    names = [r["run"] for r in cmp["runs"]]
    out = [f"## Comparison: {' vs '.join(names)}", "", caption(cmp), ""]
    out += summary_table(cmp)
    if cmp["flips"]:
        out += ["", "### Flips (McNemar: tasks scored in both runs)", ""] + flips_table(cmp)
    n = len(cmp["matrix"])
    out += ["", f"### Per-task outcomes ({cmp['disagreements']} of {n} tasks differ, listed first, marked ≠)",
            ""] + matrix_table(cmp)
    out += ["", "Sources: " + "; ".join(
        f"{r['run']}: {', '.join(r['job_dirs']) or r['source']}" for r in cmp["runs"])]
    return "\n".join(out) + "\n"


def outcome_table(run: dict) -> list[str]:
    """The reference's per-run table: Outcome | Count | % of N."""
    n = run["tasks"]
    labels = {"passed": "Passed", "failed": "Failed (scored)", "errored": "Errored (infra, unscored)",
              "unclassified": "Unclassified", "unfinished": "Unfinished"}
    lines = ["| Outcome | Count | % of " + str(n) + " |", "|---|---|---|"]
    for k in OUTCOMES:
        if k in SCORED or k == "errored" or run[k]:
            lines.append(f"| {labels[k]} | {run[k]} | {pct(run[k] / n if n else None)} |")
    return lines


def results_markdown(cmp: dict, figures: dict[str, str] | None = None) -> str:
    """The README's results section: per-run tables, then the comparison."""
    out = [caption(cmp), ""]
    for run in cmp["runs"]:
        label = run["run"] + (f" — {run['agent']}, {run['model']}" if run["agent"] else "")
        out += [f"#### {label}", ""] + outcome_table(run)
        out += ["", f"Pass rate excluding infra errors: **{pct(run['pass_rate'])}** "
                    f"({run['passed']}/{run['scored']}), 95% CI {interval_text(run['wilson95'])}. "
                    f"Source: {', '.join(run['job_dirs']) or run['source']}.", ""]
    if len(cmp["runs"]) > 1:
        out += ["#### Comparison", ""] + summary_table(cmp)
        out += ["", "Tasks scored in both runs that flipped (exact McNemar test):", ""]
        out += flips_table(cmp) + [""]
    for alt, rel in (figures or {}).items():
        out += [f"![{alt}]({rel})", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def replace_results_section(readme: str, section: str) -> str:
    """README text with the part between the results markers replaced (idempotent)."""
    starts, ends = readme.count(RESULTS_START), readme.count(RESULTS_END)
    if starts != 1 or ends != 1:
        fail(f"the README must hold exactly one {RESULTS_START} and one {RESULTS_END} "
             f"(found {starts} and {ends}). Add the pair where the results belong.")
    if readme.index(RESULTS_END) < readme.index(RESULTS_START):
        fail(f"{RESULTS_END} comes before {RESULTS_START} in the README; swap them")
    head, rest = readme.split(RESULTS_START)
    _, tail = rest.split(RESULTS_END)
    return f"{head}{RESULTS_START}\n{section.rstrip()}\n{RESULTS_END}{tail}"


# --- pictures --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Style:
    face: str
    hatch: str | None
    glyph: str
    text: str


# Readable in black and white: a glyph in every cell, dark vs light vs hatched fills.
STYLES = {
    "passed": Style("#1b5e20", None, "✓", "white"),
    "failed": Style("#f3c9c4", None, "✗", "black"),
    "errored": Style("#bdbdbd", "////", "E", "black"),
    "unclassified": Style("#ffffff", "....", "?", "black"),
    "unfinished": Style("#ffffff", None, "…", "black"),
}


def _matplotlib():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle
    matplotlib.rcParams.update({"svg.hashsalt": "report", "font.family": "DejaVu Sans",
                                "hatch.linewidth": 0.8})
    return plt, Patch, Rectangle


def short_exception(name: str | None, limit: int = 26) -> str:
    if not name:
        return ""
    name = name.removesuffix("Error") if len(name) > limit else name
    return name if len(name) <= limit else name[: limit - 1] + "…"


def legend_handles(Patch) -> list:
    return [Patch(facecolor=s.face, hatch=s.hatch, edgecolor="#444444",
                  label=f"{s.glyph} {k}") for k, s in STYLES.items()]


def heatmap_figure(cmp: dict):
    """Task × run grid; each cell an artist with gid cell-<run>-<task>."""
    plt, Patch, Rectangle = _matplotlib()
    runs, rows = cmp["runs"], cmp["matrix"]
    n_runs, n_tasks = len(runs), len(rows)
    col_w, row_h = 2.1, 0.26
    fig_w = 2.6 + col_w * n_runs
    fig_h = 2.05 + row_h * n_tasks
    fig = plt.figure(figsize=(fig_w, fig_h), dpi=150)
    ax = fig.add_axes((2.4 / fig_w, 0.95 / fig_h, col_w * n_runs / fig_w, row_h * n_tasks / fig_h))
    fig.text(0.02, 1 - 0.12 / fig_h, "Per-task outcome per run (≠: the runs disagree; listed first)",
             fontsize=10, weight="bold", va="top")
    for i, row in enumerate(rows):
        for j, cell in enumerate(row["cells"]):
            style = STYLES[cell["outcome"]]
            rect = Rectangle((j, i), 1, 1, facecolor=style.face, hatch=style.hatch,
                             edgecolor="#444444", linewidth=0.6)
            rect.set_gid(f"cell-{j}-{row['task']}")
            ax.add_patch(rect)
            label = style.glyph
            exc = short_exception(cell.get("exception_type"))
            if exc:
                label += f" {exc}"
            ax.text(j + 0.5, i + 0.5, label, ha="center", va="center", fontsize=7,
                    color=style.text,
                    bbox=None if not style.hatch else dict(facecolor="white", edgecolor="none",
                                                           pad=0.6, alpha=0.9))
    ax.set_xlim(0, n_runs)
    ax.set_ylim(n_tasks, 0)
    ax.set_xticks([j + 0.5 for j in range(n_runs)])
    ax.set_xticklabels([f"{r['run']}\n{r['agent'] or ''}\n{pct(r['pass_rate'])} ({r['passed']}/{r['scored']})"
                        for r in runs], fontsize=8)
    ax.xaxis.tick_top()
    ax.set_yticks([i + 0.5 for i in range(n_tasks)])
    ax.set_yticklabels([("≠ " if r["disagree"] else "") + r["task"] for r in rows], fontsize=7.5)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    if cmp["disagreements"] and cmp["disagreements"] < n_tasks:
        ax.axhline(cmp["disagreements"], color="black", linewidth=1.6)
    fig.legend(handles=legend_handles(Patch), loc="lower center", ncol=5, fontsize=7,
               frameon=False, bbox_to_anchor=(0.5, 0.42 / fig_h))
    fig.text(0.5, 0.06 / fig_h, wrap_caption(caption(cmp) + f" ≠: outcomes differ "
             f"({cmp['disagreements']} of {n_tasks} tasks).", 110),
             ha="center", va="bottom", fontsize=6.5)
    return fig


def wrap_caption(text: str, width: int) -> str:
    import textwrap
    return "\n".join(textwrap.wrap(text, width))


def outcome_bar_figure(cmp: dict):
    """One horizontal stacked bar per run: counts of each outcome, pass rate at the right."""
    plt, Patch, _ = _matplotlib()
    runs = cmp["runs"]
    fig_h = 1.7 + 0.55 * len(runs)
    fig = plt.figure(figsize=(9, fig_h), dpi=150)
    ax = fig.add_axes((0.2, 1.05 / fig_h, 0.52, 0.55 * len(runs) / fig_h))
    for y, run in enumerate(runs):
        left = 0
        for k in OUTCOMES:
            n = run[k]
            if not n:
                continue
            s = STYLES[k]
            bar = ax.barh(y, n, left=left, height=0.7, color=s.face, hatch=s.hatch,
                          edgecolor="#444444", linewidth=0.6)
            bar.patches[0].set_gid(f"bar-{y}-{k}")
            if n / max(run["tasks"], 1) > 0.04:
                ax.text(left + n / 2, y, f"{s.glyph} {n}", ha="center", va="center", fontsize=8,
                        color=s.text, bbox=None if not s.hatch else dict(
                            facecolor="white", edgecolor="none", pad=0.8, alpha=0.9))
            left += n
        ax.text(run["tasks"] * 1.02, y,
                f"{pct(run['pass_rate'])} ({run['passed']}/{run['scored']})\n"
                f"95% CI {interval_text(run['wilson95'])}", va="center", fontsize=8)
    ax.set_yticks(range(len(runs)))
    ax.set_yticklabels([f"{r['run']}\n{r['agent'] or ''}" for r in runs], fontsize=8)
    ax.set_ylim(len(runs) - 0.5, -0.5)
    ax.set_xlim(0, max(r["tasks"] for r in runs))
    ax.set_xlabel("tasks", fontsize=8)
    ax.tick_params(labelsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.legend(handles=legend_handles(Patch), loc="lower center", ncol=5, fontsize=7,
               frameon=False, bbox_to_anchor=(0.5, 0.35 / fig_h))
    fig.text(0.5, 0.05 / fig_h, wrap_caption(caption(cmp), 140), ha="center", va="bottom",
             fontsize=6.5)
    fig.text(0.2, 1 - 0.3 / fig_h, "Outcome per run (pass rate = passed / scored)",
             fontsize=10, weight="bold")
    return fig


def figure_bytes(fig, fmt: str) -> bytes:
    buf = io.BytesIO()
    metadata = {"Date": None} if fmt == "svg" else {"Software": None}
    fig.savefig(buf, format=fmt, metadata=metadata)
    return buf.getvalue()


def render_figures(cmp: dict) -> dict[str, bytes]:
    """{'outcomes.png': ..., 'outcomes.svg': ..., 'heatmap.png': ..., 'heatmap.svg': ...}."""
    import matplotlib.pyplot as plt
    out = {}
    for stem, make in (("outcomes", outcome_bar_figure), ("heatmap", heatmap_figure)):
        fig = make(cmp)
        for fmt in ("png", "svg"):
            out[f"{stem}.{fmt}"] = figure_bytes(fig, fmt)
        plt.close(fig)
    return out


def slug(cmp: dict) -> str:
    return "_vs_".join(re.sub(r"[^A-Za-z0-9._-]", "_", r["run"]) for r in cmp["runs"])


# --- HTML ------------------------------------------------------------------------------------------

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#111}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #999;padding:3px 8px;text-align:left}
th{background:#eee}td.passed{background:#1b5e20;color:#fff}td.failed{background:#f3c9c4}
td.errored{background:repeating-linear-gradient(45deg,#bdbdbd 0 4px,#e0e0e0 4px 8px)}
td.unclassified,td.unfinished{background:#fff;font-style:italic}
tr.disagree td:first-child{font-weight:bold}.caption{color:#333;font-size:13px}
img{max-width:100%;border:1px solid #ddd}code{font-size:12px}
"""


def md_table_to_html(lines: list[str]) -> str:
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    body = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    for row in body:
        out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
    return "\n".join(out) + "</table>"


def html_report(cmp: dict, figures: dict[str, bytes]) -> str:
    """A self-contained page: tables, the pictures as data: URIs, the sources."""
    names = [r["run"] for r in cmp["runs"]]
    title = "Terminal-Bench report: " + " vs ".join(names)
    parts = [f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}</title>",
             f"<style>{CSS}</style></head><body>", f"<h1>{html.escape(title)}</h1>",
             f"<p class=caption>{html.escape(caption(cmp))}</p>",
             "<h2>Summary</h2>", md_table_to_html(summary_table(cmp))]
    if cmp["flips"]:
        parts += ["<h2>Flips (tasks scored in both runs)</h2>", md_table_to_html(flips_table(cmp))]
    for stem, alt in (("outcomes", "Stacked outcome bar per run"),
                      ("heatmap", "Per-task outcome heatmap")):
        data = base64.b64encode(figures[f"{stem}.svg"]).decode()
        parts += [f"<h2>{alt}</h2>",
                  f'<img id="fig-{stem}" alt="{html.escape(alt + ": " + ", ".join(names))}" '
                  f'onload="this.dataset.rendered=this.naturalWidth" '
                  f'src="data:image/svg+xml;base64,{data}">']
    parts += [f"<h2>Per-task outcomes ({cmp['disagreements']} of {len(cmp['matrix'])} differ, first)</h2>",
              "<table id=matrix><tr><th>Task</th>"
              + "".join(f"<th>{html.escape(n)}</th>" for n in names) + "</tr>"]
    for row in cmp["matrix"]:
        cls = ' class="disagree"' if row["disagree"] else ""
        cells = "".join(
            f'<td class="{c["outcome"]}" title="{html.escape(c["trial_dir"] or "")}">'
            f'{STYLES[c["outcome"]].glyph} {html.escape(cell_text(c))}</td>' for c in row["cells"])
        parts.append(f"<tr{cls}><td>{'≠ ' if row['disagree'] else ''}{html.escape(row['task'])}</td>{cells}</tr>")
    parts.append("</table><h2>Sources</h2><ul>")
    for r in cmp["runs"]:
        dirs = ", ".join(r["job_dirs"]) or r["source"] or ""
        parts.append(f"<li class=run-source><b>{html.escape(r['run'])}</b>: "
                     f"<code>{html.escape(dirs)}</code> (hover a cell for its trial dir)</li>")
    parts.append("</ul></body></html>")
    return "\n".join(parts) + "\n"


# --- check-submission ------------------------------------------------------------------------------

MULTIPLIERS = ("timeout_multiplier", "agent_timeout_multiplier", "verifier_timeout_multiplier",
               "agent_setup_timeout_multiplier", "environment_build_timeout_multiplier")
ENV_OVERRIDES = ("override_cpus", "override_memory_mb", "override_storage_mb", "override_gpus")
AGENT_OVERRIDES = ("override_timeout_sec", "override_setup_timeout_sec", "max_timeout_sec")
VERIFIER_OVERRIDES = ("override_timeout_sec", "max_timeout_sec")
MIN_TRIALS = 5


def _env_file(run: str | None) -> str:
    return f"runs/{run or '<run>'}.env"


def _not_ours(run: str | None) -> str:
    # harbor flags this repository never passes: the job was started some other way.
    return f"this repository never sets it; start the job with make bench RUN={run or '<run>'}"


def _number_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def config_problems(job_dir: Path, run: str | None = None) -> list[str]:
    """Leaderboard rules read from the job's config.json (harbor's JobConfig).

    The advice names this repository's settings (runs/<run>.env), not harbor's flags.
    """
    path = job_dir / "config.json"
    try:
        cfg = SR.read_json_object(path, what="a config.json")
    except FileNotFoundError:
        return [f"{path}: missing; the job's settings cannot be checked (it is written by harbor run)"]
    except SR.Unreadable as e:
        return [f"{path}: unreadable ({e}); the job's settings cannot be checked"]
    problems = []
    for key in MULTIPLIERS:
        value = cfg.get(key)
        if value is None:
            continue
        number = _number_or_none(value)
        if number is None:
            problems.append(f"{path}: {key} is {SR.clip(repr(value), 60)}, not a number; the leaderboard requires 1.0")
        elif number != 1.0:
            fix = (f"set AGENT_TIMEOUT_MULTIPLIER=1 in {_env_file(run)}" if key == "agent_timeout_multiplier"
                   else _not_ours(run))
            problems.append(f"{path}: {key} is {number:g}; the leaderboard requires 1.0 ({fix})")
    env = _mapping(cfg.get("environment"))
    for key in ENV_OVERRIDES:
        if env.get(key) is not None:
            problems.append(f"{path}: environment.{key} is {SR.clip(str(env[key]), 60)}; resource overrides are "
                            f"not allowed ({_not_ours(run)})")
    agents = cfg.get("agents") if isinstance(cfg.get("agents"), list) else []
    for i, agent in enumerate(agents):
        agent = _mapping(agent)
        for key in AGENT_OVERRIDES:
            if agent.get(key) is not None:
                problems.append(f"{path}: agents[{i}].{key} is {SR.clip(str(agent[key]), 60)}; agent timeout "
                                f"overrides are not allowed ({_not_ours(run)})")
    verifier = _mapping(cfg.get("verifier"))
    for key in VERIFIER_OVERRIDES:
        if verifier.get(key) is not None:
            problems.append(f"{path}: verifier.{key} is {SR.clip(str(verifier[key]), 60)}; verifier timeout "
                            f"overrides are not allowed ({_not_ours(run)})")
    return problems


def _mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def task_of_dir(trial: Path) -> str:
    """Task name of a trial dir without a usable result.json: its config, else its name."""
    try:
        cfg = SR.read_json_object(trial / "config.json", what="a config.json")
        path = (cfg.get("task") or {}).get("path")
        if isinstance(path, str) and path:
            return SR.clip(Path(path).name)
    except (OSError, SR.Unreadable, AttributeError):
        pass
    return SR.shown(trial.name.rsplit("__", 1)[0])


def validation_summary(error: Exception) -> str:
    """The first pydantic error, short: `EOF while parsing a string` / `field required at id`."""
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return str(error)
    errs = errors()
    first = errs[0]
    loc = ".".join(str(p) for p in first.get("loc", ()))
    text = first["msg"] + (f" at {loc}" if loc else "")
    return SR.clip(text, 300) + (f", and {len(errs) - 1} more" if len(errs) > 1 else "")


def read_trial_result(result: Path):
    """A result.json as harbor's TrialResult, or Unreadable with the one-line reason.

    FileNotFoundError passes through (an unfinished trial). The shape is checked first,
    so `[]` or a truncated file reads as such, not as a pydantic error.
    """
    from harbor.models.trial.result import TrialResult
    from pydantic import ValidationError

    raw = SR.read_regular(result)
    data = SR.parse_json_object(raw)
    if not data.keys() & TrialResult.model_fields.keys():
        raise SR.Unreadable("a JSON object with none of TrialResult's fields (task_name, finished_at, ...)")
    try:
        return TrialResult.model_validate_json(raw)
    except ValidationError as e:
        raise SR.Unreadable(validation_summary(e)) from None


def check_submission(job_dirs: list[Path], min_trials: int = MIN_TRIALS, run: str | None = None) -> dict:
    """Does a run (its job dirs) meet the Terminal-Bench leaderboard rules? Pure over the files."""
    problems: list[str] = []
    valid_per_task: Counter = Counter()
    seen_tasks: set[str] = set()
    n_trials = 0
    for job_dir in job_dirs:
        if not job_dir.is_dir():
            problems.append(f"{job_dir}: no such job dir")
            continue
        problems += config_problems(job_dir, run)
        try:
            trials, refused, _ = SR.trial_dir_entries(str(job_dir))
        except SR.Unreadable as e:
            problems.append(f"{job_dir}: {e}")
            continue
        problems += [f"{path}: {why}; remove it from the submission" for path, why in refused]
        for trial in map(Path, trials):
            n_trials += 1
            result = trial / "result.json"
            try:
                res = read_trial_result(result)
            except FileNotFoundError:
                seen_tasks.add(task_of_dir(trial))
                problems.append(f"{trial}: no result.json (an unfinished or crashed trial); "
                                f"finish it or remove it from the submission")
                continue
            except SR.Unreadable as e:
                seen_tasks.add(task_of_dir(trial))
                problems.append(f"{result}: not a valid TrialResult ({e}); "
                                f"re-run the trial or remove it from the submission")
                continue
            task = SR.clip(res.task_name)
            seen_tasks.add(task)
            valid_per_task[task] += 1
    short = sorted(t for t in seen_tasks if valid_per_task[t] < min_trials)
    if short:
        shown = ", ".join(f"{t} ({valid_per_task[t]})" for t in short[:10])
        more = f" (+{len(short) - 10} more)" if len(short) > 10 else ""
        problems.append(f"{len(short)} of {len(seen_tasks)} tasks have fewer than {min_trials} valid "
                        f"trials: {shown}{more}; set N_ATTEMPTS={min_trials} in {_env_file(run)} and bench "
                        f"the run with it (make bench RUN={run or '<run>'})")
    if not n_trials and not any("no such job dir" in p for p in problems):
        problems.append("no trial dirs found: nothing to submit")
    return {"ok": not problems, "job_dirs": [SR.shown(display_path(str(d))) for d in job_dirs],
            "tasks": len(seen_tasks), "trials": n_trials,
            "min_valid_trials_per_task": min(valid_per_task[t] for t in seen_tasks) if seen_tasks else 0,
            "problems": [display_path_in(p) for p in problems]}


def display_path_in(message: str) -> str:
    cwd = str(Path.cwd()) + os.sep
    return SR.shown(message.replace(cwd, ""))


def submission_markdown(label: str, verdict: dict) -> str:
    if verdict["ok"]:
        return (f"{label}: meets the Terminal-Bench leaderboard rules ({verdict['tasks']} tasks, "
                f"{verdict['trials']} trials, at least {verdict['min_valid_trials_per_task']} valid "
                f"trials per task).\n")
    lines = [f"{label}: does NOT meet the Terminal-Bench leaderboard rules "
             f"({len(verdict['problems'])} problems):"]
    lines += [f"  - {p}" for p in verdict["problems"]]
    return "\n".join(lines) + "\n"


# --- CLI ------------------------------------------------------------------------------------------------

unscored_option = click.option(
    "--timeouts-unscored", is_flag=True,
    help="Tally with agent timeouts set aside as unscored (the reference's Run 1 table).")


def comparison_of(runs: Iterable[str], timeouts_unscored: bool) -> dict:
    return compare([load_run(r, timeouts_unscored) for r in runs])


dry_run_option = click.option(
    "--dry-run", is_flag=True,
    help="Print each file that would be written, and write nothing (no dir is created either).")

FIGURE_NAMES = ("outcomes.png", "outcomes.svg", "heatmap.png", "heatmap.svg")  # render_figures' keys


def echo(text: str, nl: bool = True, err: bool = False) -> None:
    """Print as UTF-8 bytes: a stray surrogate from a hostile file prints escaped, never crashes."""
    click.echo(SR.shown(text).encode("utf-8", "backslashreplace"), nl=nl, err=err)


def write_files(files: dict[Path, bytes | str]) -> None:
    """Write each file atomically (its dir created first); a failure is one line, old file kept."""
    for path, data in files.items():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            SR.write_atomic(path, data)
        except OSError as e:
            fail(SR.write_error(path, e))


def write_or_echo(text: str, output: Path | None) -> None:
    if output is None:
        echo(text, nl=False)
    else:
        write_files({output: text})
        echo(f"report: wrote {output}", err=True)


@click.group(help=__doc__.split("\n\n")[0])
def cli() -> None:
    pass


@cli.command("compare")
@click.argument("runs", nargs=-1, required=True)
@unscored_option
@click.option("--format", "fmt", type=click.Choice(["md", "json"]), default="md", show_default=True)
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write here instead of stdout.")
def compare_cmd(runs, timeouts_unscored, fmt, output):
    """Side-by-side table, flips and per-task matrix of RUNS (tally JSON, job dir or run name)."""
    cmp = comparison_of(runs, timeouts_unscored)
    text = compare_markdown(cmp) if fmt == "md" else json.dumps(cmp, indent=2) + "\n"
    write_or_echo(text, output)


@cli.command("render")
@click.argument("runs", nargs=-1, required=True)
@unscored_option
@click.option("--out-dir", type=click.Path(path_type=Path), default=None,
              help="Default: reports/<run>_vs_<run>/")
@dry_run_option
def render_cmd(runs, timeouts_unscored, out_dir, dry_run):
    """Outcome bars and per-task heatmap of RUNS, as PNG and SVG."""
    cmp = comparison_of(runs, timeouts_unscored)
    out_dir = out_dir or REPO_ROOT / "reports" / slug(cmp)
    if dry_run:
        for name in FIGURE_NAMES:
            echo(f"would write {out_dir / name}")
        return
    figures = {out_dir / name: data for name, data in render_figures(cmp).items()}
    write_files(figures)
    for path in figures:
        echo(str(path))


@cli.command("html")
@click.argument("runs", nargs=-1, required=True)
@unscored_option
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Default: reports/<run>_vs_<run>/report.html")
@dry_run_option
def html_cmd(runs, timeouts_unscored, output, dry_run):
    """One self-contained HTML page (no network needed) for one run or a comparison."""
    cmp = comparison_of(runs, timeouts_unscored)
    output = output or REPO_ROOT / "reports" / slug(cmp) / "report.html"
    if dry_run:
        echo(f"would write {output}")
        return
    write_or_echo(html_report(cmp, render_figures(cmp)), output)


@cli.command("results")
@click.argument("runs", nargs=-1, required=True)
@unscored_option
@click.option("--readme", type=click.Path(path_type=Path, dir_okay=False), default=REPO_ROOT / "README.md",
              show_default=True)
@click.option("--figures-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Also write the pictures here and link them from the section.")
@dry_run_option
def results_cmd(runs, timeouts_unscored, readme, figures_dir, dry_run):
    """Regenerate the README's results section (between the results markers) from the tallies."""
    cmp = comparison_of(runs, timeouts_unscored)
    old = read_readme(readme)
    links = {}
    if figures_dir is not None:
        rel = Path(os.path.relpath(figures_dir, readme.resolve().parent))
        links = {"Outcome per run": (rel / "outcomes.png").as_posix(),
                 "Per-task outcomes": (rel / "heatmap.png").as_posix()}
    # The README is checked (markers) before anything is written, so a bad one changes nothing.
    new = replace_results_section(old, results_markdown(cmp, links))
    if dry_run:
        for name in FIGURE_NAMES if figures_dir is not None else ():
            echo(f"would write {figures_dir / name}")
        echo(f"would update the results section of {readme}" if new != old
             else f"would leave {readme} as it is: its results section is already up to date")
        return
    if figures_dir is not None:
        write_files({figures_dir / name: data for name, data in render_figures(cmp).items()})
    if new != old:
        write_files({readme: new})
    echo(f"report: {readme} results section {'updated' if new != old else 'already up to date'}", err=True)


def read_readme(readme: Path) -> str:
    try:
        return SR.read_regular(readme, SR.TALLY_CAP, "a README").decode("utf-8")
    except FileNotFoundError:
        fail(f"no README at {readme}; pass --readme PATH")
    except SR.Unreadable as e:
        fail(f"{readme}: {e}; pass --readme PATH")
    except UnicodeDecodeError as e:
        fail(f"{readme}: not UTF-8 text (byte at offset {e.start}); save it as UTF-8")


@cli.command("check-submission")
@click.argument("runs", nargs=-1)
@click.option("--format", "fmt", type=click.Choice(["md", "json"]), default="md", show_default=True)
def check_submission_cmd(runs, fmt):
    """Does each RUN meet the Terminal-Bench leaderboard rules? Exit 1 when one does not."""
    verdicts = {}
    for arg in runs or ("",):
        path = Path(arg)
        run = None  # the runs/<run>.env the advice can name, when known
        if arg and path.is_dir():
            label, dirs = arg, [path]
        else:
            if arg:
                tally, run = load_run(arg), (arg if arg in known_runs() else None)
            else:
                run, tally = load_run_default()
            label, dirs = f"run {tally['run']}", [Path(d) for d in tally.get("job_dirs") or []]
            if not dirs:
                fail(f"{label}: the tally names no job dirs; pass the job dir itself")
        verdicts[SR.shown(label)] = check_submission(dirs, run=run)
    if fmt == "json":
        echo(json.dumps(verdicts, indent=2))
    else:
        for label, verdict in verdicts.items():
            echo(submission_markdown(label, verdict), nl=False)
    if not all(v["ok"] for v in verdicts.values()):
        sys.exit(1)


def load_run_default() -> tuple[str, dict]:
    """No RUN given: the last run used, as `make` resolves it; (run name, its tally)."""
    run, jobs_dir, job_name = resolve_run_settings("")
    return run, run_tally(jobs_dir, job_name, False, f"run {run}")


if __name__ == "__main__":
    cli()
