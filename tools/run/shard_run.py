#!/usr/bin/env python3
"""shard_run: run a sharded bench's harbor jobs side by side, under the concurrency governor.

    shard_run.py run --spec SPEC.json

scripts/bench.sh writes SPEC (tools/run/shards.py made the split, scripts/argv.sh each shard's argv):
    {"run", "event_file" (the run's manifest.jsonl), "log_dir", "poll_s", "stop_grace_s" (STOP_GRACE),
     "watch": [the options every shard's tools/run/harbor_guard.py gets: --grace, --term-wait, --event-file,
               the ceiling],
     "governor": null | {"max_rate", "window_s", "min_trials", "quiet_s"},
     "shards": [{"index", "job_dir", "tasks" (how many), "argv": ["harbor", "run", …]}]}

Each shard is its own orchestrator: `python -m tools.run.harbor_guard run --job-dir D … -- harbor run …`
(the linger watchdog and the spending ceiling, as an unsharded bench has them), in a process group
of its own, its output appended to <log_dir>/<shard job>.log. Harbor reads the key and the
endpoint from the environment this process was given; nothing secret is in SPEC or any argv.
Every shard's watch and harbor inherit the run's lock (scripts/lib-run.sh, flock on fd 9), as an
unsharded bench's do: the run stays locked while any of them lives, even when this process is
killed, and a make mopup started then refuses, naming them.

Stopping a shard (the governor's stop, Ctrl-C or TERM to this process, another shard at the
ceiling, this process's death) is SIGINT to its watch, as Ctrl-C, however this process was
started: a shard's watch and harbor get SIGINT back at its default even when this process was
started with it ignored (nohup … &; see _shard_preexec for why SIGINT and not TERM). The watch
passes it on to harbor, which cancels its running trials, each writing a result.json with a
CancelledError (an infra error mop-up retries), and exits; harbor that does not gets TERM, then
KILL, each stop_grace_s later, from the watch. A watch still alive 3 × stop_grace_s after the
signal is stuck: its whole process group (the watch, harbor, what harbor started) gets KILL.
What was sent, and when the shard exited, is a "shard-stopped" manifest line:
    {"event": "shard-stopped", "shard", "job_dir", "why": "governor" | "interrupted" | "ceiling",
     "signals": [{"signal": "INT" | "TERM" | "KILL", "to": "watch" | "group", "at"}],
     "exited" (false: it outlived KILL), "exit" (the watch's, as a shell says it), "stop_s"
     (seconds from the first signal to the exit), "at"}
and the watch's own "harbor-interrupted" line says what it sent harbor. Anything left in a
stopped shard's process group after its watch exits is killed, so nothing it started outlives it
holding the run's lock.

The governor (tools/run/governor.py decides; this file carries it out), every poll_s seconds:
  - stop: the shard is stopped, as above. It is then stopped, not done.
  - start: the shard's same command again. Harbor resumes a job it finds under the same config
    (docs/harbor.md §1): its finished trials, cancelled ones included, are kept, and only the
    trials it never ran are run; no scored trial is ever re-run. A shard with a trial dir that
    has no result.json is not restarted: harbor would delete that dir, and it is mop-up's.
A "hold" (above the rate, one shard left running) is said and recorded, nothing more. Every
decision is a manifest line with the figures behind it ("governor-stop", "governor-start",
"governor-hold", "governor-park"). Ctrl-C or TERM to this process stops every running shard, once;
if this process dies, each shard's watch gets SIGINT from the kernel (PR_SET_PDEATHSIG), so no
harbor runs on unwatched.

Exit codes: 0 every shard ended by itself with 0 (or was stopped by the governor: its cancelled
trials are mop-up's); 75 a shard stopped at the spending ceiling (the others are stopped too);
70 a shard's watch failed; 130 / 143 interrupted; otherwise the first nonzero exit of a shard.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import click

from tools import fmt
from tools.run import governor
from tools.run import harbor_guard_job
from tools.run import harbor_guard_signals
from tools.run import harbor_guard_words
from tools import safe_read

SPEC_CAP = 16 << 20
PR_SET_PDEATHSIG = 1
TAIL_LINES = 5
# A stopped shard's watch gives harbor its signal, then TERM, then KILL, each stop_grace_s apart;
# one grace more and the watch itself is taken as stuck.
STUCK_AFTER_GRACES = 3
SIGNALS = {"INT": signal.SIGINT, "TERM": signal.SIGTERM, "KILL": signal.SIGKILL}


@dataclass
class Ending:
    """One shard's stop, from its first signal to its watch's exit: what the manifest records."""
    why: str                    # "governor" | "interrupted" | "ceiling"
    began: float                # time.monotonic() of the first signal
    due: float                  # time.monotonic() when the next step is due: KILL to the group, then giving up
    signals: list[dict] = field(default_factory=list)  # {"signal", "to": "watch" | "group", "at"}


@dataclass
class Shard:
    index: int
    job_dir: str
    tasks: int
    argv: list[str]
    proc: subprocess.Popen | None = None
    state: str = "waiting"      # waiting | running | stopping | stopped | parked | done | lost
    rc: int | None = None
    log: str = ""
    starts: int = 0
    started_at: float = field(default=0.0)
    stopped_at: float = field(default=0.0)
    ending: Ending | None = None

    @property
    def name(self) -> str:
        return os.path.basename(self.job_dir)


def say(msg: str) -> None:
    print(f"shards: {msg}", file=sys.stderr, flush=True)


def _shard_preexec(parent: int):
    """In the child, before exec: SIGINT at its default, and SIGINT again when this supervisor dies,
    however it dies (PR_SET_PDEATHSIG). A supervisor already gone by then would never send it: the
    shard does not start.

    SIGINT is a shard's stop even when this process was started with it ignored (nohup … &, whose
    SIG_IGN every child would inherit): the shard's process group is its own, so no terminal's
    Ctrl-C reaches it, only this process's stop and the kernel's parent-death signal. And SIGINT is
    the stop harbor 0.25.0 survives cleanly: asyncio.run's own handler cancels the main task, and
    the trials are cancelled in order. Its TERM (harbor/cli/jobs.py _handle_sigterm) raises
    KeyboardInterrupt wherever the main thread is, and two of its writers of the job's result.json
    (Job._write_job_result_async, in threads) can then overlap: the file left behind ended in the
    tail of a longer copy ("Invalid JSON: trailing characters"), and harbor refused to start the
    shard again."""
    def preexec() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGINT)
        except (OSError, AttributeError):
            pass  # not Linux: Ctrl-C and TERM still reach every shard through this process
        if os.getppid() != parent:
            os._exit(1)
    return preexec


def start(shard: Shard, watch: list[str], log_dir: Path) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    shard.log = str(log_dir / f"{shard.name}.log")
    argv = [sys.executable, "-m", "tools.run.harbor_guard", "run", "--job-dir", shard.job_dir, *watch, "--", *shard.argv]
    with open(shard.log, "ab") as out:
        # A process group of its own: the stop reaches this shard's watch alone, and the watch (not
        # in the terminal's foreground group) passes it on to harbor.
        # close_fds=False: the watch, and harbor after it (the watch starts harbor the same way),
        # inherit what this process inherited from the verb, the run's lock among it (fd 9,
        # scripts/lib-run.sh), so the run stays locked while any shard lives, even after this
        # process is killed: what an unsharded bench's watch gets from bash. Not pass_fds, which
        # would tie this file to the lock's fd number; and nothing else leaks, since the
        # descriptors Python opens here (the logs, the waker's pipe) are non-inheritable (PEP 446).
        shard.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                      close_fds=False, process_group=0, preexec_fn=_shard_preexec(os.getpid()))
    shard.state, shard.rc, shard.starts, shard.started_at = "running", None, shard.starts + 1, time.time()
    shard.ending = None
    again = " again (harbor resumes its job)" if shard.starts > 1 else ""
    say(f"shard {shard.index} ({shard.tasks} tasks) started{again}: {shard.name}, output in {shard.log}")


def alive(shard: Shard) -> bool:
    """Still running. Never reaps (no poll()): only reap() does, after it has ended what the shard
    left in its group (end_leftovers says why that needs the watch unreaped)."""
    return shard.proc is not None and shard.proc.returncode is None and child_state(shard.proc) == "running"


def signal_shard(shard: Shard, name: str, to: str) -> None:
    """`name` to the shard's watch alone, or to its whole process group; recorded in its ending."""
    try:
        if to == "group":
            os.killpg(shard.proc.pid, SIGNALS[name])
        elif child_state(shard.proc) != "reaped":  # unreaped, its pid is still its own; send_signal would reap it
            os.kill(shard.proc.pid, SIGNALS[name])
        else:
            return
    except ProcessLookupError:
        return
    shard.ending.signals.append({"signal": name, "to": to, "at": fmt.stamp()})


def stop_shard(shard: Shard, why: str, grace: float) -> None:
    """Begin the shard's stop (once): SIGINT to its watch, which passes it on to harbor and ends
    harbor if it does not exit (TERM, then KILL, `grace` seconds apart)."""
    if not alive(shard) or shard.ending is not None:
        return
    now = time.monotonic()
    shard.ending = Ending(why, now, now + STUCK_AFTER_GRACES * grace)
    signal_shard(shard, "INT", "watch")


def overdue(shard: Shard, spec: dict) -> None:
    """A stop past its due time: a watch that outlived its own escalation is stuck, and its whole
    group gets KILL; a group that outlives KILL by harbor_guard_words.KILL_WAIT_S is given up on (said, recorded)."""
    ending = shard.ending
    if ending is None or shard.state not in ("running", "stopping") or not alive(shard) \
            or time.monotonic() < ending.due:
        return
    if not any(s["to"] == "group" for s in ending.signals):
        say(f"shard {shard.index}'s watch (pid {shard.proc.pid}) is still running "
            f"{fmt.span(time.monotonic() - ending.began)} after it was stopped: killing its process group")
        signal_shard(shard, "KILL", "group")
        ending.due = time.monotonic() + harbor_guard_words.KILL_WAIT_S
        return
    shard.state = "lost"
    say(f"shard {shard.index}'s watch (pid {shard.proc.pid}) survived KILL (stuck in the kernel?): check it with ps "
        f"and stop it by hand")
    event(spec, ended_event(shard, exited=False))


def ended_event(shard: Shard, exited: bool) -> dict:
    ending = shard.ending
    return {"event": "shard-stopped", "shard": shard.index, "job_dir": shard.job_dir, "why": ending.why,
            "signals": ending.signals, "exited": exited,
            "exit": None if shard.rc is None else (shard.rc if shard.rc >= 0 else 128 - shard.rc),
            "stop_s": round(time.monotonic() - ending.began, 1)}


def end_leftovers(shard: Shard) -> bool:
    """Kill what is left of a stopped shard's process group once its watch has exited (a process
    harbor started and left behind would hold the run's lock). True when there was something.
    Called only while the watch's zombie is unreaped: it still holds the pid, so the group id
    names this shard's group and no other (a reaped pid, and an emptied group's id, may be reused)."""
    try:
        os.killpg(shard.proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def child_state(proc: subprocess.Popen) -> str:
    """"running", "exited" (a zombie not yet reaped: os.waitid with WNOWAIT leaves it so) or "reaped"
    (poll() then says how it ended)."""
    try:
        return "running" if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None else "exited"
    except ChildProcessError:
        return "reaped"


def tail(path: str) -> list[str]:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    return [safe_read.clip(line, 300) for line in lines[-TAIL_LINES:]]


def reap(shard: Shard, spec: dict) -> bool:
    """True when the shard's process has just exited (its state then says how it ended)."""
    if shard.proc is None or shard.state not in ("running", "stopping"):
        return False
    # One look decides both whether the watch has exited and whether its leftovers can be ended
    # (before it is reaped: end_leftovers says why). A second look could find it exited after the
    # first found it running, and reap it with its leftovers still alive.
    state = child_state(shard.proc)
    if state == "running":
        return False
    leftovers = (state == "exited" and shard.ending is not None
                 and not any(s["to"] == "group" for s in shard.ending.signals) and end_leftovers(shard))
    rc = shard.proc.poll()
    shard.rc = rc
    if shard.ending is not None:
        doc = ended_event(shard, exited=True)
        if leftovers:
            doc["leftovers_killed"] = True
            say(f"shard {shard.index}: processes left in its process group after its watch exited were killed")
        event(spec, doc)
    if shard.state == "stopping":
        shard.state = "stopped"
        say(f"shard {shard.index} stopped by the governor (harbor exited {rc}); its cancelled trials are mop-up's")
    else:
        shard.state = "done"
        say(f"shard {shard.index} ended: harbor's watch exited {rc}")
        if rc not in (0, harbor_guard_signals.CEILING_EXIT):
            for line in tail(shard.log):
                say(f"  | {line}")
    return True


def exit_code(shards: list[Shard]) -> int:
    # A watch ended by a signal N (a kill from outside) exits as a shell says it: 128 + N.
    codes = [s.rc if s.rc > 0 else 128 - s.rc for s in shards if s.state == "done" and s.rc]
    for special in (harbor_guard_signals.CEILING_EXIT, harbor_guard_signals.WATCH_FAILED_EXIT):
        if special in codes:
            return special
    return codes[0] if codes else 0


def event(spec: dict, doc: dict) -> None:
    error = harbor_guard_words.append_event(spec["event_file"], dict(doc, at=fmt.stamp(), run=spec["run"]))
    if error:
        say(error)


def govern(spec: dict, shards: list[Shard], settings: governor.Settings, last: list[float | None],
           grace: float) -> None:
    """One look at the finished trials; carry out what the governor decides."""
    by_index = {s.index: s for s in shards}
    running = [s.index for s in sorted((s for s in shards if s.state == "running"), key=lambda s: s.started_at)]
    stopped = [s.index for s in sorted((s for s in shards if s.state == "stopped"), key=lambda s: s.stopped_at)]
    finished = governor.finished_trials([Path(s.job_dir) for s in shards])
    decision = governor.decide(time.time(), finished, running, stopped, last[0], settings)
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
        stop_shard(shard, "governor", grace)
        say(f"governor: {decision.reason}")
        event(spec, decision.as_event(settings))
        return
    missing = harbor_guard_job.trials_without_result(shard.job_dir)
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

    @property
    def why(self) -> str:
        """The "why" of each shard's shard-stopped line."""
        return "interrupted" if self.signum is not None else "ceiling"


def run(spec: dict) -> int:
    shards = [Shard(index=int(s["index"]), job_dir=str(s["job_dir"]), tasks=int(s["tasks"]), argv=list(s["argv"]))
              for s in spec["shards"]]
    settings = governor.Settings(**spec["governor"]) if spec.get("governor") else None
    if settings:
        settings.validate()
        say(governor.describe(settings))
    poll, grace = float(spec["poll_s"]), float(spec["stop_grace_s"])
    stop = Stop()

    def stop_all() -> None:
        for s in shards:
            stop_shard(s, stop.why, grace)

    def on_signal(signum: int, _frame) -> None:
        # Noted here; the loop, woken by the signal (harbor_guard_signals.Waker), stops the shards.
        if stop.signum is None:
            stop.signum = signum
            say(f"interrupted ({signal.Signals(signum).name}): stopping every shard (SIGINT, as Ctrl-C; TERM, "
                f"then KILL, each {fmt.span(grace)} later, to a harbor still running)")

    for sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, on_signal)
    waker = harbor_guard_signals.Waker()
    last: list[float | None] = [None]

    def active() -> bool:
        return any(s.state in ("running", "stopping") for s in shards) or bool(
            settings and not stop.any and any(s.state == "stopped" for s in shards))

    def next_due() -> float:
        dues = [s.ending.due - time.monotonic() for s in shards
                if s.ending is not None and s.state in ("running", "stopping") and alive(s)]
        return min([poll, *dues])

    try:
        for s in shards:
            if not stop.any:
                start(s, spec["watch"], Path(spec["log_dir"]))
        while active():
            for s in shards:
                if reap(s, spec) and s.rc == harbor_guard_signals.CEILING_EXIT and not stop.any:
                    # The ceiling is the run's: every other shard's watch would stop it too, later.
                    stop.ceiling = True
                    say("a shard stopped at the spending ceiling: stopping the others")
                overdue(s, spec)
            if stop.any:
                stop_all()  # each shard once, the one started as the signal came included
            if settings and not stop.any:
                govern(spec, shards, settings, last, grace)
            if active():
                waker.sleep(next_due())
    finally:
        waker.close()
    if stop.signum is not None:
        return 128 + stop.signum
    return harbor_guard_signals.CEILING_EXIT if stop.ceiling else exit_code(shards)


@click.group()
def cli() -> None:
    """Run a sharded bench."""


@cli.command("run")
@click.option("--spec", "spec_path", required=True, type=click.Path(path_type=Path))
def run_cmd(spec_path: Path) -> None:
    try:
        spec = safe_read.read_json_object(spec_path, SPEC_CAP, "a shard spec")
    except (OSError, safe_read.Unreadable, ValueError) as exc:
        raise click.ClickException(f"cannot read the shard spec {spec_path}: {exc}") from exc
    sys.exit(run(spec))


if __name__ == "__main__":
    cli()
