"""make watch's words: a frame as plain lines, as make status's one line, and drawn live.

On a terminal the frame is redrawn with rich every --every seconds until Ctrl-C; a pipe or a log
gets plain lines, one frame per interval.
"""

from __future__ import annotations

import sys
import textwrap
import time

import click

from tools import fmt
from tools import safe_read
from tools.run.watch_frame import HOUR, Frame


def lines_of(f: Frame) -> list[str]:
    """The frame as plain lines (what a pipe, a log and --once get)."""
    share = f.settled / f.total if f.total else 0.0
    width = 30
    bar = "#" * round(width * share) + "." * (width - round(width * share))
    out = [f"run {f.run}: [{bar}] {f.settled}/{f.total} attempt slots settled ({fmt.percent(share)}; "
           f"{f.total // f.k if f.k else 0} tasks × {f.k})",
           f"  slots: {slot_sums(f)}",
           f"  trials: {f.trial_dirs} trial dir(s); {f.infra} ended in an infra error (every attempt so far: "
           f"{side_text(f.sides)}), {f.running} with no result yet (running, or stopped mid-trial)"]
    if f.final_errors:
        out.append(f"  final errors, not retried (their infra error survived MAX_TASK_RETRIES={f.max_task_retries} "
                   f"attempts in a row; make tally RUN={f.run} says more): {', '.join(f.final_errors)}")
    if len(f.per_job) > 1:
        out += [f"  {name}: {done} settled of {n} trial dir(s)" for name, done, n in f.per_job]
    out.append(f"  pace: {f.pace_hour:.0f} trial(s) settled in the last hour, "
               f"{fmt.UNKNOWN if f.pace_all is None else f'{f.pace_all:.1f}'} per hour over the whole run; infra-error "
               f"rate {fmt.percent(f.infra_rate_hour)} (last hour), {fmt.percent(f.infra_rate_all)} (whole run)")
    if f.finished:
        out.append("  ETA: finished")
    elif f.eta_hours is None:
        out.append("  ETA: unknown (nothing has settled yet)")
    else:
        which = "the last hour's" if f.pace_hour else "the whole run's"
        low, high = (fmt.elapsed(h * HOUR) for h in f.eta_range) if f.eta_range else (None, None)
        span = "" if not f.eta_range else f" (range {low} to {high} by the two paces)"
        out.append(f"  ETA: {fmt.elapsed(f.eta_hours * HOUR)} at {which} pace{span}, {f.total - f.settled} slot(s) left, "
                   f"mop-up's included")
    if f.spend.get("known"):
        proj = "" if f.projected_usd is None else f", projected {fmt.dollars(f.projected_usd)} at the end"
        out.append(f"  spend: {fmt.dollars(f.spend['total_usd'])} so far{proj} ({f.spend['prices']})")
        if f.spend.get("unattributed_note"):
            out.append(f"  note: {f.spend['unattributed_note']}")
    else:
        out.append(f"  spend: unknown ({safe_read.printable(str(f.spend.get('why', '')))})")
    out += [f"  note: {n}" for n in f.notes]
    out += [f"  ALARM: {a}" for a in f.alarms] or ["  alarms: none"]
    return out


def side_text(sides: dict) -> str:
    """The infra errors of each side (tools/tally.py says it the same way)."""
    return (f"sandbox {sides.get('sandbox', 0)}, model server {sides.get('server', 0)}, "
            f"interrupted {sides.get('interrupted', 0)}")


def slot_sums(f: Frame) -> str:
    """The bar's slots, each kind once, as two sums: settled = …; open = … (they add up to the bar)."""
    settled = [("passed", f.passed), ("failed", f.failed), ("unclassified", f.unclassified),
               ("final errors", f.final), ("errored by verdict", f.verdict_errored)]
    open_ = [("infra-errored", f.open_infra), ("no finished trial", f.unfinished), ("not started", f.not_started)]
    shown = [f"{name} {n}" for i, (name, n) in enumerate(settled) if i < 2 or n]
    waiting = [f"{name} {n}" for i, (name, n) in enumerate(open_) if i < 2 or n]
    return (f"settled {f.settled} = {' + '.join(shown)}; open {f.total - f.settled} = {' + '.join(waiting)} "
            "(mop-up fills the open ones)")


def summary_line(f: Frame) -> str:
    """One line for make status: done/total, ETA, spend."""
    eta = "finished" if f.finished else ("ETA unknown" if f.eta_hours is None else f"ETA {fmt.elapsed(f.eta_hours * HOUR)}")
    spend = f"{fmt.dollars(f.spend['total_usd'])} spent" if f.spend.get("known") else "spend unknown"
    alarm = f"; {len(f.alarms)} alarm(s): make watch RUN={f.run}" if f.alarms else ""
    server = (f"; {f.server_hour} model-server error(s) in the last hour: the server's problem (make logs "
              f"RUN={f.run}), not the sandboxes' (the governor leaves them alone)" if f.server_hour else "")
    return f"progress: {f.settled}/{f.total} attempt slots settled, {eta}, {spend}{server}{alarm}"


def wrapped(lines: list[str], width: int) -> list[str]:
    """Lines folded at word boundaries to the terminal's width (read at each redraw, so a resize
    is followed), continuations indented under their line's text."""
    out = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip(" ")) + 2)
        out += textwrap.wrap(line, width=max(width, 20), subsequent_indent=indent, break_long_words=False,
                             break_on_hyphens=False, drop_whitespace=True) or [""]
    return out


def live_view(build, every: float) -> None:
    """Redraw every `every` seconds with rich until Ctrl-C; plain lines when not on a terminal."""
    if not sys.stdout.isatty():
        try:
            while True:  # a log: one frame per interval, until Ctrl-C ends it quietly
                time.sleep(every)
                click.echo("\n".join(lines_of(build())))
        except KeyboardInterrupt:
            return
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    console = Console()

    def view() -> Text:
        # The time of each redraw: a frame that stopped changing still shows the watch is alive.
        stamp = fmt.utc_now().strftime("%H:%M:%S")
        lines = lines_of(build()) + [f"  updated {stamp} UTC (every {every:g} s; Ctrl-C stops)"]
        return Text("\n".join(wrapped(lines, console.width)))

    try:
        with Live(view(), console=console, refresh_per_second=1) as live:
            while True:
                time.sleep(every)
                live.update(view())
    except KeyboardInterrupt:
        pass
