"""A campaign's record and its lock: state/campaigns/<name>/campaign.json and .../lock.

campaign.json is the supervisor's memory across crashes: each run's status (pending, running,
done, failed, interrupted, ceiling) with the N_CONCURRENT it is benched with, each group's
server (its owner run, its job and endpoint, whether it is up or stopped), the budget, the
ceiling, why the campaign ended, and the comparison. Replaced atomically (safe_read.write_atomic):
a kill at any instant leaves the old file or the new one. The lock (flock on .../lock, held for
the supervisor's whole life) keeps two campaign supervisors of one campaign from ever running at
once; each run keeps its own lock besides (state/<run>/lock, held by its make reproduce).
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from tools import fmt
from tools import safe_read

RUN_STATUSES = ("pending", "running", "done", "failed", "interrupted", "ceiling")
FINISHED = ("done", "failed")


class StateError(Exception):
    """campaign.json is not what the supervisor writes, or the campaign is busy: one line."""


def campaign_dir(state_root: Path, name: str) -> Path:
    return state_root / "campaigns" / name


def new_state(name: str) -> dict:
    return {"campaign": name, "created_at": fmt.stamp(), "updated_at": fmt.stamp(), "outcome": None,
            "runs": {}, "servers": {}, "budget": None, "ceiling": None, "invocations": [], "comparison": None}


# campaign.json holds a few lines per run, server and invocation: 4 MiB is far past any real one.
STATE_CAP = safe_read.STATE_CAP


def load(path: Path, name: str) -> dict:
    try:
        # The project's one bounded reader: a regular file (no FIFO, no link out), at most STATE_CAP bytes.
        state = safe_read.read_json_object(path, STATE_CAP, "the campaign's record")
    except FileNotFoundError:
        return new_state(name)
    except (OSError, safe_read.Unreadable) as e:
        raise StateError(f"{path} cannot be read ({e}): it is the campaign's record; move it aside to start the "
                         "campaign afresh (each run's own state/<run>/reproduce.json still resumes it)") from None
    fresh = new_state(name)
    if not isinstance(state, dict) or state.get("campaign") != name or any(
            not isinstance(state.get(k), type(fresh[k])) for k in ("runs", "servers", "invocations")):
        raise StateError(f"{path} is not a record of campaign {name} (its shape is not the supervisor's): move it "
                         "aside to start the campaign afresh")
    for run, record in state["runs"].items():
        if not isinstance(record, dict) or record.get("status") not in RUN_STATUSES:
            raise StateError(f"{path}: run {run!r} has no known status: move the file aside to start afresh")
    return state


def save(path: Path, state: dict) -> None:
    state["updated_at"] = fmt.stamp()
    path.parent.mkdir(parents=True, exist_ok=True)
    safe_read.write_atomic(path, json.dumps(state, indent=2) + "\n")


# lock.json is one line (operation, pid, time): 4 KiB is far past it. A pid is at most Linux's PID_MAX_LIMIT.
HOLDER_CAP = safe_read.SMALL_CAP
PID_MAX = 1 << 22


class CampaignLock:
    """The campaign's lock, held from take() until the process ends (or release())."""

    def __init__(self, directory: Path):
        self.path = directory / "lock"
        self.holder = directory / "lock.json"
        self.fd: int | None = None

    def take(self, operation: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StateError(f"campaign '{self.path.parent.name}' is busy: {self.who()}. One supervisor per "
                             "campaign: wait for it, or stop it (make stop CAMPAIGN=…), then run this again. "
                             "Nothing was changed.") from None
        self.fd = fd
        safe_read.write_atomic(self.holder, json.dumps({"operation": operation, "pid": os.getpid(),
                                                        "since": fmt.stamp()}) + "\n")

    def holder_record(self) -> dict | None:
        """What lock.json says of the holder (take() writes it), read bounded; None when it cannot be read."""
        try:
            return safe_read.read_json_object(self.holder, HOLDER_CAP, "the lock's holder record")
        except (OSError, safe_read.Unreadable):
            return None

    def holder_pid(self) -> int | None:
        """The holder's pid: a whole number that can be a process's (1..PID_MAX), else None."""
        pid = (self.holder_record() or {}).get("pid")
        return pid if isinstance(pid, int) and not isinstance(pid, bool) and 1 <= pid <= PID_MAX else None

    def who(self) -> str:
        doc, pid = self.holder_record(), self.holder_pid()
        if doc is None or pid is None:
            return "another supervisor holds it"
        operation, since = (safe_read.clip(safe_read.printable(str(doc.get(k))), 80) for k in ("operation", "since"))
        return f"{operation} (pid {pid}) has held it since {since}"

    def held_by_other(self) -> bool:
        """Whether a live supervisor holds the lock (asked without taking it for long)."""
        if not self.path.exists():
            return False
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)


def run_lock_free(state_dir: Path) -> bool:
    """Whether a run's own lock (state/<run>/lock, flock) is free: its make reproduce, or a harbor it
    left, is gone. Asked by taking and dropping it at once: only this supervisor starts the run."""
    lock = state_dir / "lock"
    if not lock.exists():
        return True
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
