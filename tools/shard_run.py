#!/usr/bin/env python3
"""shard_run: run a sharded bench's harbor jobs side by side, under the concurrency governor.

    shard_run.py run --spec SPEC.json

scripts/bench.sh writes SPEC (tools/shards.py made the split, scripts/argv.sh each shard's argv):
    {"run", "event_file" (the run's manifest.jsonl), "log_dir", "poll_s",
     "watch": [the options every shard's tools/harbor_watch.py gets: --grace, --event-file, the ceiling],
     "governor": null | {"max_rate", "window_s", "min_trials", "quiet_s"},
     "shards": [{"index", "job_dir", "tasks" (how many), "argv": ["harbor", "run", …]}]}

Each shard is its own orchestrator: `python -m tools.harbor_watch run --job-dir D … -- harbor run …`
(the linger watchdog and the spending ceiling, as an unsharded bench has them), in a process group
of its own, its output appended to <log_dir>/<shard job>.log. Harbor reads the key and the
endpoint from the environment this process was given; nothing secret is in SPEC or any argv.

The governor (tools/governor.py decides; this file carries it out), every poll_s seconds:
  - stop: SIGINT to the shard's watch, which passes it to harbor once, as Ctrl-C would: harbor
    cancels its running trials, each writes a result.json with a CancelledError (an infra error
    mop-up retries), and harbor exits. The shard is then stopped, not done.
  - start: the shard's same command again. Harbor resumes a job it finds under the same config
    (docs/harbor.md §1): its finished trials, cancelled ones included, are kept, and only the
    trials it never ran are run; no scored trial is ever re-run. A shard with a trial dir that
    has no result.json is not restarted: harbor would delete that dir, and it is mop-up's.
A "hold" (above the rate, one shard left running) is said and recorded, nothing more. Every
decision is a manifest line with the figures behind it ("governor-stop", "governor-start",
"governor-hold", "governor-park"). Ctrl-C or TERM to this process reaches every running shard once (SIGINT, then
harbor's own cleanup); if this process dies, each shard's watch gets SIGINT from the kernel
(PR_SET_PDEATHSIG), so no harbor runs on unwatched.

Exit codes: 0 every shard ended by itself with 0 (or was stopped by the governor: its cancelled
trials are mop-up's); 75 a shard stopped at the spending ceiling (the others are stopped too);
70 a shard's watch failed; 130 / 143 interrupted; otherwise the first nonzero exit of a shard.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import click

from tools import governor as G
from tools import harbor_watch as HW
from tools import safe_read as SR

SPEC_CAP = 16 << 20
PR_SET_PDEATHSIG = 1
TAIL_LINES = 5


@dataclass
class Shard:
    index: int
    job_dir: str
    tasks: int
    argv: list[str]
    proc: subprocess.Popen | None = None
    state: str = "waiting"      # waiting | running | stopping | stopped | parked | done
    rc: int | None = None
    log: str = ""
    starts: int = 0
    started_at: float = field(default=0.0)
    stopped_at: float = field(default=0.0)

    @property
    def name(self) -> str:
        return os.path.basename(self.job_dir)


def say(msg: str) -> None:
    print(f"shards: {msg}", file=sys.stderr, flush=True)


def _die_with_parent() -> None:
    """In the child, before exec: SIGINT when this supervisor dies, however it dies."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGINT)
    except (OSError, AttributeError):
        pass  # not Linux: Ctrl-C and TERM still reach every shard through this process


def start(shard: Shard, watch: list[str], log_dir: Path) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    shard.log = str(log_dir / f"{shard.name}.log")
    argv = [sys.executable, "-m", "tools.harbor_watch", "run", "--job-dir", shard.job_dir, *watch, "--", *shard.argv]
    with open(shard.log, "ab") as out:
        # A process group of its own: the governor's SIGINT reaches this shard's watch alone, and
        # the watch (not in the terminal's foreground group) passes it on to harbor.
        shard.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                      process_group=0, preexec_fn=_die_with_parent)
    shard.state, shard.rc, shard.starts, shard.started_at = "running", None, shard.starts + 1, time.time()
    again = " again (harbor resumes its job)" if shard.starts > 1 else ""
    say(f"shard {shard.index} ({shard.tasks} tasks) started{again}: {shard.name}, output in {shard.log}")


def interrupt(shard: Shard) -> None:
    if shard.proc is not None and shard.proc.poll() is None:
        try:
            shard.proc.send_signal(signal.SIGINT)
        except ProcessLookupError:
            pass


def tail(path: str) -> list[str]:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    return [SR.clip(line, 300) for line in lines[-TAIL_LINES:]]


def reap(shard: Shard) -> bool:
    """True when the shard's process has just exited (its state then says how it ended)."""
    if shard.proc is None or shard.state not in ("running", "stopping"):
        return False
    rc = shard.proc.poll()
    if rc is None:
        return False
    shard.rc = rc
    if shard.state == "stopping":
        shard.state = "stopped"
        say(f"shard {shard.index} stopped by the governor (harbor exited {rc}); its cancelled trials are mop-up's")
    else:
        shard.state = "done"
        say(f"shard {shard.index} ended: harbor's watch exited {rc}")
        if rc not in (0, HW.CEILING_EXIT):
            for line in tail(shard.log):
                say(f"  | {line}")
    return True


def exit_code(shards: list[Shard]) -> int:
    # A watch ended by a signal N (a kill from outside) exits as a shell says it: 128 + N.
    codes = [s.rc if s.rc > 0 else 128 - s.rc for s in shards if s.state == "done" and s.rc]
    for special in (HW.CEILING_EXIT, HW.WATCH_FAILED_EXIT):
        if special in codes:
            return special
    return codes[0] if codes else 0


def event(spec: dict, doc: dict) -> None:
    error = HW.append_event(spec["event_file"], dict(doc, at=HW.utc_now(), run=spec["run"]))
    if error:
        say(error)


def govern(spec: dict, shards: list[Shard], settings: G.Settings, last: list[float | None]) -> None:
    """One look at the finished trials; carry out what the governor decides."""
    by_index = {s.index: s for s in shards}
    running = [s.index for s in sorted((s for s in shards if s.state == "running"), key=lambda s: s.started_at)]
    stopped = [s.index for s in sorted((s for s in shards if s.state == "stopped"), key=lambda s: s.stopped_at)]
    finished = G.finished_trials([Path(s.job_dir) for s in shards])
    decision = G.decide(time.time(), finished, running, stopped, last[0], settings)
    if decision is None:
        return
    shard = by_index[decision.shard]
    last[0] = time.time()
    if decision.action == "hold":  # above the rate with one shard left: said and recorded, nothing done
        say(f"governor: {decision.reason}")
        event(spec, decision.as_event(settings))
        return
    if decision.action == "stop":
        shard.state, shard.stopped_at = "stopping", time.time()
        interrupt(shard)
        say(f"governor: {decision.reason}")
        event(spec, decision.as_event(settings))
        return
    missing = HW.trials_without_result(shard.job_dir)
    if missing:
        shard.state = "parked"
        say(f"governor: shard {shard.index} is not started again: {len(missing)} trial dir(s) have no result.json, "
            f"which harbor's resume would delete; make mopup runs what it left")
        event(spec, dict(decision.as_event(settings), event="governor-park", trials_without_result=missing[:20]))
        return
    say(f"governor: {decision.reason}")
    event(spec, decision.as_event(settings))
    start(shard, spec["watch"], Path(spec["log_dir"]))


class Stop:
    """Why every shard is being stopped, once: a signal to this process, or the ceiling."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.ceiling = False

    @property
    def any(self) -> bool:
        return self.signum is not None or self.ceiling


def run(spec: dict) -> int:
    shards = [Shard(index=int(s["index"]), job_dir=str(s["job_dir"]), tasks=int(s["tasks"]), argv=list(s["argv"]))
              for s in spec["shards"]]
    settings = G.Settings(**spec["governor"]) if spec.get("governor") else None
    if settings:
        settings.validate()
        say(G.describe(settings))
    poll = float(spec["poll_s"])
    stop = Stop()

    def stop_all() -> None:
        for s in shards:
            interrupt(s)

    def on_signal(signum: int, _frame) -> None:
        if stop.signum is None:
            stop.signum = signum
            say(f"interrupted ({signal.Signals(signum).name}): stopping every shard (SIGINT, as Ctrl-C)")
            stop_all()

    for sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, on_signal)
    waker = HW.Waker()
    last: list[float | None] = [None]

    def active() -> bool:
        return any(s.state in ("running", "stopping") for s in shards) or bool(
            settings and not stop.any and any(s.state == "stopped" for s in shards))

    try:
        for s in shards:
            if not stop.any:
                start(s, spec["watch"], Path(spec["log_dir"]))
        while active():
            for s in shards:
                if reap(s) and s.rc == HW.CEILING_EXIT and not stop.any:
                    # The ceiling is the run's: every other shard's watch would stop it too, later.
                    stop.ceiling = True
                    say("a shard stopped at the spending ceiling: stopping the others")
                    stop_all()
            if settings and not stop.any:
                govern(spec, shards, settings, last)
            if active():
                waker.sleep(poll)
    finally:
        waker.close()
    if stop.signum is not None:
        return 128 + stop.signum
    return HW.CEILING_EXIT if stop.ceiling else exit_code(shards)


@click.group()
def cli() -> None:
    """Run a sharded bench."""


@cli.command("run")
@click.option("--spec", "spec_path", required=True, type=click.Path(path_type=Path))
def run_cmd(spec_path: Path) -> None:
    try:
        spec = SR.read_json_object(spec_path, SPEC_CAP, "a shard spec")
    except (OSError, SR.Unreadable, ValueError) as exc:
        raise click.ClickException(f"cannot read the shard spec {spec_path}: {exc}") from exc
    sys.exit(run(spec))


if __name__ == "__main__":
    cli()
