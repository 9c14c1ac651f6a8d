"""What harbor_guard reads of a job: its result.json and its trial dirs (tools/run/harbor_guard.py says why)."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from datetime import datetime, timezone

# Harbor writes its job result without trial_results: a few KB. The same cap as
# tools/safe_read.py's RESULT_CAP; anything bigger is not harbor's and is ignored.
RESULT_CAP = 64 << 20
# The exception type harbor 0.25.0 records for a trial it cancelled (harbor/job.py CANCELLED_ERROR_TYPE).
CANCELLED = "CancelledError"


def read_job_result(path: str) -> dict | None:
    """The job's result.json as a dict; None when it is absent, partial, oversized or not a plain file.

    Harbor rewrites the file in place (truncate, then write) while it runs, so a read can
    catch it half-written: that is simply "no answer this time".
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)  # O_NONBLOCK: a FIFO in its place never blocks the open
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > RESULT_CAP:
            return None
        data = _read_capped(fd, RESULT_CAP)
    except OSError:
        return None
    finally:
        os.close(fd)
    if data is None:
        return None
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):  # partial JSON, bad UTF-8, absurd nesting
        return None
    return value if isinstance(value, dict) else None


def _read_capped(fd: int, cap: int) -> bytes | None:
    """At most `cap` bytes of fd; None when the file grew past the cap while being read."""
    chunks, total = [], 0
    while chunk := os.read(fd, 1 << 20):
        total += len(chunk)
        if total > cap:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def finished_at(result: dict | None) -> str | None:
    """The job's finished_at as harbor wrote it, or None while the job is not finished."""
    value = (result or {}).get("finished_at")
    return value if isinstance(value, str) and value else None


def new_finish(result: dict | None, baseline: str | None) -> str | None:
    """finished_at of a finish written since harbor started (not the stale one of an earlier run)."""
    done = finished_at(result)
    return done if done is not None and done != baseline else None


def trial_dirs(job_dir: str) -> dict[str, bool] | None:
    """The job's trial dirs (they hold a config.json), each with whether it has its result.json;
    None when the job dir cannot be listed."""
    trials = {}
    try:
        with os.scandir(job_dir) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False) and _exists(entry.path, "config.json"):
                    trials[entry.name] = _is_file(entry.path, "result.json")
    except OSError:
        return None
    return trials


def trials_without_result(job_dir: str) -> list[str] | None:
    """Trial dirs of the job (they hold a config.json) with no result.json; None when unlistable."""
    trials = trial_dirs(job_dir)
    return None if trials is None else sorted(name for name, done in trials.items() if not done)


@dataclass(frozen=True)
class Cancelled:
    """harbor was interrupted and every trial has ended: what the linger watch fires on when the
    job's finished_at is null (an interrupted harbor never writes it)."""
    trial: str          # the trial dir that ended last
    finished_at: str    # its own finished_at, as harbor wrote it (UTC)


class Trials:
    """The linger watch's view of the job's trials: was harbor interrupted, with every trial ended?

    Yes when every trial dir has its result.json and the one that finished last, of those written
    since harbor started, ended in CancelledError: harbor 0.25.0 records a cancelled trial so
    (harbor/trial/trial.py Trial.run: `except asyncio.CancelledError` → `_record_exception`, whose
    ExceptionInfo.from_exception keeps `type(e).__name__`; `_finalize` then writes
    `paths.result_path`, the trial's result.json). A trial dir that had its result.json before
    harbor started (a resumed job's earlier cancellations) does not count. A result.json is read
    once, when it has its finished_at (harbor writes it whole, once, at the trial's end).
    """

    def __init__(self, job_dir: str):
        self.job_dir = job_dir
        self.before = {name for name, done in (trial_dirs(job_dir) or {}).items() if done}
        self._ended: dict[str, tuple[datetime, str, str | None]] = {}

    def cancelled(self) -> Cancelled | None:
        trials = trial_dirs(self.job_dir)
        if not trials or not all(trials.values()):
            return None  # nothing ran yet, or a trial is still running
        new = [name for name in trials if name not in self.before]
        if not new:
            return None
        for name in new:
            if name not in self._ended:
                ended = trial_end(read_job_result(os.path.join(self.job_dir, name, "result.json")))
                if ended is None:
                    return None  # being written, or not harbor's: no answer this time
                self._ended[name] = ended
        last = max(new, key=lambda name: self._ended[name][0])
        _, written, exception = self._ended[last]
        return Cancelled(last, written) if exception == CANCELLED else None


def trial_end(result: dict | None) -> tuple[datetime, str, str | None] | None:
    """A trial result's finished_at (parsed, and as written) and its exception type; None when it
    has no finished_at that parses."""
    written = (result or {}).get("finished_at")
    if not isinstance(written, str) or not 0 < len(written) <= 64 or not written.isprintable():
        return None
    try:
        at = datetime.fromisoformat(written)
    except ValueError:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    info = result.get("exception_info")
    exception = info.get("exception_type") if isinstance(info, dict) else None
    return at, written, exception if isinstance(exception, str) else None


def _exists(folder: str, name: str) -> bool:
    return os.path.lexists(os.path.join(folder, name))


def _is_file(folder: str, name: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(os.path.join(folder, name)).st_mode)
    except OSError:
        return False
