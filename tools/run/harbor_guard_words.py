"""What harbor_guard says and records: its lines on stderr and its events (tools/run/harbor_guard.py
lists the events' fields)."""

from __future__ import annotations

import json
import os
import signal
import stat

from tools import fmt
from tools.run.harbor_guard_job import Cancelled

# After KILL the kernel ends a process at once, unless it is stuck in the kernel (D state).
KILL_WAIT_S = 10.0
EVENT = "harbor-lingered"
FAILED_EVENT = "watch-failed"
INTERRUPTED_EVENT = "harbor-interrupted"
PREFIX = "harbor_guard:"


def trials_note(missing: list[str] | None, job_dir: str) -> str:
    if missing is None:
        return f"{job_dir} could not be listed to check the trials; run make tally to see them."
    if not missing:
        return "Every trial had its result.json; nothing was lost."
    shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    return (f"{len(missing)} trial dir(s) had no result.json ({shown}): make tally lists them as unfinished "
            f"and make mopup re-runs them.")


def linger_message(finish: str | Cancelled, grace: float, last_signal: str, term_wait: float, survived: bool,
                   note: str) -> str:
    how = "terminated it (TERM)" if last_signal == "TERM" else \
        f"terminated it (KILL: it was still running {fmt.span(term_wait)} after TERM)"
    if survived:
        how = (f"sent TERM, then KILL, and it was still there {fmt.span(KILL_WAIT_S)} later "
               f"(stuck in the kernel?): check it with ps and stop it by hand")
    if isinstance(finish, Cancelled):
        done = (f"harbor was interrupted and every trial had ended (the last, {finish.trial}, in CancelledError at "
                f"{finish.finished_at}; the job's finished_at stays null)")
    else:
        done = f"harbor's job finished at {finish}"
    return f"{PREFIX} {done} but harbor was still running {fmt.span(grace)} later; {how}. {note}"


def interrupt_message(signum: int, forwarded: bool, returncode: int | None,
                      escalated: tuple[str, ...] = (), term_wait: float = 0.0) -> str:
    name = signal.Signals(signum).name
    how = "passed it on to harbor once" if forwarded else "Ctrl-C at the terminal reached harbor directly"
    ended = f"harbor exited with {returncode}" if returncode is not None else \
        f"harbor is still running (stuck in the kernel?): check it with ps and stop it by hand"
    if escalated:
        ended = (f"harbor was still running {fmt.span(term_wait)} later, so it was sent {', then '.join(escalated)}; "
                 f"{ended}")
    return f"{PREFIX} interrupted by {name}; {how}; {ended}."


def _grace_s(grace: float) -> float | int:
    return int(grace) if float(grace).is_integer() else grace


def linger_event(job_dir: str, finish: str | Cancelled, grace: float, last_signal: str, at: str) -> dict:
    event = {"event": EVENT, "job_dir": os.path.abspath(job_dir),
             "finished_at": None if isinstance(finish, Cancelled) else finish,
             "grace_s": _grace_s(grace), "signal": last_signal, "at": at}
    if isinstance(finish, Cancelled):
        event.update(cancelled_trial=finish.trial, cancelled_at=finish.finished_at)
    return event


def interrupt_event(job_dir: str, signum: int, sent: list[tuple[str, str]], term_wait: float,
                    outcome) -> dict:
    """What the watch did after an interrupt: every signal it sent harbor (the one passed on first),
    and whether harbor exited (outcome: harbor_guard.Outcome)."""
    return {"event": INTERRUPTED_EVENT, "job_dir": os.path.abspath(job_dir),
            "received": signal.Signals(signum).name.removeprefix("SIG"),
            "signals": [{"signal": name, "at": at} for name, at in sent], "grace_s": _grace_s(term_wait),
            "exited": not outcome.survived, "returncode": outcome.returncode, "at": fmt.stamp()}


def append_event(path: str, event: dict) -> str | None:
    """Append one JSON line; the error as a sentence when that fails (the stderr line says it all anyway)."""
    # Non-blocking, and only to a regular file: a FIFO in the manifest's place must not hang the
    # guard (opening it for writing with no reader would wait for ever), nor a dangling link make a
    # file wherever it points.
    if os.path.islink(path) and not os.path.exists(path):
        return f"{PREFIX} could not append the event to {path}: a symlink to nothing"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "a", encoding="utf-8") as out:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return f"{PREFIX} could not append the event to {path}: not a regular file"
            out.write(json.dumps(event) + "\n")
    except OSError as err:
        return f"{PREFIX} could not append the event to {path}: {err.strerror or err}"
    return None
