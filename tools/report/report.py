#!/usr/bin/env python3
"""report: compare tallied runs, draw them, and check them against the leaderboard rules.

Usage:
  python -m tools.report.report compare [--timeouts-unscored] [--format md|json] [-o FILE] RUN...
  python -m tools.report.report render  [--timeouts-unscored] [--out-dir DIR] [--dry-run] RUN...
  python -m tools.report.report html    [--timeouts-unscored] [-o FILE] [--dry-run] RUN...
  python -m tools.report.report results [--timeouts-unscored] [--readme README.md] [--figures-dir DIR] [--dry-run] RUN...
  python -m tools.report.report check-submission [--format md|json] [RUN...]

RUN is any of:
  * a tally JSON file (`python -m tools.tally tally ... --json > FILE.json`),
  * a harbor job dir (tallied as `--jobs-dir PARENT --job-name BASENAME`),
  * a run name from runs/ (its JOBS_DIR and JOB_NAME resolved by scripts/lib.sh, then tallied).
check-submission with no RUN acts on the last run used (state/last-run), like `make`. A run (a name,
a tally file) is checked as make submission would submit it (tools/hub/submission_verdict.py: each
task's k slot-filling trials, what is left out said with why, the verdict make submission prints);
a job dir given by path (a built submission's) is checked dir by dir.

Every number comes from a tally, and every tally row names the trial dir whose result.json
decided it; the JSON output keeps those paths, so any cell can be traced to its file. A run
with k > 1 attempts per task is compared by its tasks' pass fractions (a paired bootstrap over
tasks); a named run's cost comes from tools/money/cost.py's library (tools/report/report_cost.py).

The parts, by responsibility: report_load.py (reading and tallying runs, through the tally's
library tools/results/tally_core.py), report_stats.py (the comparison and its statistics),
report_text.py (Markdown, the README's results section), report_html.py (pictures, the HTML
page), report_cost.py (dollars), report_submission.py (check-submission), report_output.py
(printing and atomic writes). This file is only the command line: no module imports it; each
caller imports what it uses from the part that holds it.

Every file is written atomically (a temp file beside it, then a rename): an interrupted or
failed write leaves the old file as it was. `--dry-run` prints each file it would write
(and whether the README's results section would change) and writes nothing.
Files are read through tools/safe_read.py: a FIFO is never opened, a tally file over
512 MiB or a result.json over 64 MiB is refused with its size.

Exit codes: 0 success (check-submission: the run meets the rules); 1 a user error, with a
message naming the problem and the fix (check-submission: the run does not meet the rules).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Iterable

import click

from tools import safe_read
from tools.report.report_cost import attach_costs
from tools.report.report_html import cost_figure_svg, html_report, render_figures, slug
from tools.results.report_load import REPO_ROOT, fail, known_runs, load_run, run_settings
from tools.results.report_output import echo, write_files, write_or_echo
from tools.results.report_stats import compare
from tools.hub.report_submission import check_submission, submission_markdown
from tools.hub.submission_verdict import check_run, report_lines, run_job_dirs, verdict_label
from tools.report.report_text import compare_markdown, replace_results_section, results_markdown


# --- CLI ------------------------------------------------------------------------------------------------

unscored_option = click.option(
    "--timeouts-unscored", is_flag=True,
    help="Tally with agent timeouts set aside as unscored (the reference's Run 1 table).")


def comparison_of(runs: Iterable[str], timeouts_unscored: bool, with_cost: bool = True) -> dict:
    """The comparison of RUNS; with_cost: each named run's dollars too (never under --dry-run)."""
    tallies = [load_run(r, timeouts_unscored) for r in runs]
    cmp = compare(tallies)
    if with_cost:
        attach_costs(cmp, tallies)
    return cmp


dry_run_option = click.option(
    "--dry-run", is_flag=True,
    help="Print each file that would be written, and write nothing (no dir is created either).")

FIGURE_NAMES = ("outcomes.png", "outcomes.svg", "heatmap.png", "heatmap.svg")  # render_figures' keys


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
    cmp = comparison_of(runs, timeouts_unscored, with_cost=False)  # the pictures show no dollars
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
    cmp = comparison_of(runs, timeouts_unscored, with_cost=not dry_run)
    output = output or REPO_ROOT / "reports" / slug(cmp) / "report.html"
    if dry_run:
        echo(f"would write {output}")
        return
    figures = render_figures(cmp)
    cost_svg = cost_figure_svg(cmp)  # only with two or more runs whose cost is known
    if cost_svg is not None:
        figures["cost.svg"] = cost_svg
    write_or_echo(html_report(cmp, figures), output)


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
    # The cost only reads (a recording, hf jobs inspect/ps, a fresh price cache), so the dry run
    # can say truly whether the section would change.
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
        return safe_read.read_regular(readme, safe_read.TALLY_CAP, "a README").decode("utf-8")
    except FileNotFoundError:
        fail(f"no README at {readme}; pass --readme PATH")
    except safe_read.Unreadable as e:
        fail(f"{readme}: {e}; pass --readme PATH")
    except UnicodeDecodeError as e:
        fail(f"{readme}: not UTF-8 text (byte at offset {e.start}); save it as UTF-8")


@cli.command("check-submission")
@click.argument("runs", nargs=-1)
@click.option("--format", "fmt", type=click.Choice(["md", "json"]), default="md", show_default=True)
def check_submission_cmd(runs, fmt):
    """Does each RUN meet the Terminal-Bench leaderboard rules? Exit 1 when one does not."""
    verdicts, said = {}, {}
    for arg in runs or ("",):
        if arg and Path(arg).is_dir():
            # A job dir by path (a built submission's): every dir in it is checked.
            label, verdict, lines = arg, check_submission([Path(arg)]), []
        else:
            label, verdict, lines = run_check(arg)
        verdicts[safe_read.shown(label)] = verdict
        said[safe_read.shown(label)] = lines
    if fmt == "json":
        echo(json.dumps(verdicts, indent=2))
    else:
        for label, verdict in verdicts.items():
            for line in said[label]:
                echo(line)
            echo(submission_markdown(label, verdict), nl=False)
    if not all(v["ok"] for v in verdicts.values()):
        sys.exit(1)


def run_check(arg: str) -> tuple[str, dict, list[str]]:
    """A run (by name; "" the last run used; a tally file) as make submission would submit it:
    (the verdict's label, the verdict, what it leaves out and the dataset's coverage)."""
    if not arg or arg in known_runs():
        s = run_settings(arg)
        dirs, linked = run_job_dirs(s.jobs_dir, s.job_name, s.run, s.model or None)
        shards = s.state_dir / "shards.json"
        check = check_run(dirs, linked, s.run, s.where, shards if shards.is_file() else None, s.dataset)
        label = verdict_label(s.run, s.job_name)
    else:
        tally = load_run(arg)
        dirs = [Path(d) for d in tally.get("job_dirs") or []]
        if not dirs:
            fail(f"run {tally['run']}: the tally names no job dirs; pass the job dir itself")
        check = check_run(dirs, [])
        label = verdict_label(None, tally["run"])
    lines = report_lines(check)
    return label, {**check.verdict, "left_out": lines[:-1], "coverage": check.coverage}, lines


if __name__ == "__main__":
    cli()
