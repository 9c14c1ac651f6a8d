"""retried: keep every attempt harbor retries inside a run, before harbor deletes it (a job plugin).

    harbor run ... --max-retries N --retry-include T ... --plugin tools.results.retried:KeepRetried
    harbor job resume -p JOB_DIR ... --plugin tools.results.retried:KeepRetried

harbor 0.26.0 retries a trial inside its job when every exception it recorded is retryable
(harbor/trial/queue.py TrialQueue._execute_trial_with_retries: RetryConfig.is_retryable over
TrialResult.recorded_exceptions), and before it runs the trial again under the same name it deletes
the failed attempt's dir (`shutil.rmtree(trial.paths.trial_dir)`). This repository loses nothing: the
tally counts every attempt's exception, and make sandboxes and make cost prove a sandbox the run's by
the attempt that made it (its result.json times and exception, its trial.log). So this plugin, which
harbor loads in its own process (`--plugin`, harbor/cli/job_plugins.py), registers a hook on the
job's trial END event. harbor fires END from Trial._finalize after the attempt's result.json is
written and before the queue sees the result (harbor/trial/trial.py), and awaits every hook, so the
attempt is copied whole before the queue can delete it:

    <jobs-dir>/.retried/<job-name>/<trial-name>.<result id>/   (tools/results/tally_jobs.py retried_attempts_dir)

A copy is made of each attempt the queue may retry (the same test as the queue's, on harbor's own
objects), written beside its final name and renamed into place, so a copy is whole or absent. If
it cannot be made (a full disk), the hook raises: the exception leaves Trial.run, so the queue never
reaches its rmtree and the attempt stays where it is; harbor's job then stops (its TaskGroup cancels
the other trials, each written with a CancelledError that mop-up retries), rather than lose it.

The last attempt of a trial that still errs is kept by harbor in the job itself; its copy is then
the same attempt twice. At the job's end, a copy this process made whose trial dir still holds the
same attempt (its result.json has the copy's id) is removed: nothing is lost, the job holds it. A
copy left by a harbor that was stopped first is recognised the same way by its readers (tally_core
reads a kept copy whose id is a trial's of the job as that trial).

Links are copied as links, never followed; FIFOs, sockets and devices are left out (a copy must never
hang). The plugin takes no option.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from tools import safe_read
from tools.results.tally_jobs import retried_attempts_dir


# How harbor is told to load it (--plugin module:Class); scripts/argv.sh's KEEP_RETRIED_PLUGIN too.
PLUGIN = "tools.results.retried:KeepRetried"


class KeepRetriedError(RuntimeError):
    """An attempt harbor may delete could not be kept: harbor stops instead of deleting it."""


def retryable(result: Any, retry: Any) -> bool:
    """Whether harbor's queue may retry this attempt: it recorded an exception, every one retryable
    by the job's RetryConfig, and the job retries at all (the queue's own test, less the attempt count:
    a copy of the last attempt is removed at the job's end)."""
    exceptions = result.recorded_exceptions()
    return (retry.max_retries > 0 and bool(exceptions)
            and all(retry.is_retryable(e.exception_type) for e in exceptions))


def _not_a_plain_entry(where: str, names: list[str]) -> list[str]:
    """copytree's ignore: what is neither a dir, a regular file nor a link (never opened)."""
    out = []
    for name in names:
        try:
            mode = os.lstat(os.path.join(where, name)).st_mode
        except OSError:
            out.append(name)
            continue
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            out.append(name)
    return out


def keep(trial_dir: Path, dest: Path) -> None:
    """Copy trial_dir to dest whole, or not at all (temp beside it, then renamed)."""
    if os.path.lexists(dest):
        return  # this attempt (its id is in the name) is kept already
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(trial_dir, tmp, symlinks=True, ignore=_not_a_plain_entry)
        os.rename(tmp, dest)
    except (OSError, shutil.Error) as e:
        shutil.rmtree(tmp, ignore_errors=True)  # only the temp dir this call made
        raise KeepRetriedError(
            f"tools.results.retried: could not keep {trial_dir} before harbor's retry deletes it ({e}); harbor stops "
            f"here rather than lose it. Free the space (or fix {dest.parent}), then run the same make verb "
            f"again: its trials are resumed") from None


def result_id_of(trial_dir: Path) -> str | None:
    """The id in a trial dir's result.json, or None (no file, a link, a FIFO, not harbor's, too big to be one)."""
    path = trial_dir / "result.json"
    try:
        if path.is_symlink():
            return None
        value = safe_read.read_json_object(path, safe_read.RESULT_CAP, "a result.json").get("id")
    except (OSError, safe_read.Unreadable):
        return None
    return value if isinstance(value, str) else None


class KeepRetried:
    """The job plugin (harbor's JobPlugin protocol: on_job_start, on_job_end)."""

    def __init__(self, **kwargs: Any) -> None:
        if kwargs:
            raise TypeError(f"tools.results.retried takes no option, got {sorted(kwargs)}")
        self._made: list[tuple[Path, Path, str]] = []  # (copy, the trial dir, the attempt's id)

    async def on_job_start(self, job: Any) -> None:
        self._retry = job.config.retry
        self._kept = retried_attempts_dir(job.job_dir)
        job.on_trial_ended(self._keep)

    async def _keep(self, event: Any) -> None:
        result = event.result
        if not retryable(result, self._retry):
            return
        trial_dir = Path(event.config.trials_dir) / event.config.trial_name
        dest = self._kept / f"{event.config.trial_name}.{result.id}"
        await asyncio.to_thread(keep, trial_dir, dest)
        self._made.append((dest, trial_dir, str(result.id)))

    async def on_job_end(self, job_result: Any) -> None:
        # A copy of an attempt harbor did not retry (the last, still errored) is that attempt twice.
        for dest, trial_dir, attempt in self._made:
            if result_id_of(trial_dir) == attempt and result_id_of(dest) == attempt:
                shutil.rmtree(dest, ignore_errors=True)
        try:
            # Only when nothing of this job is kept: an empty dir says nothing. (.retried/ itself stays:
            # a shard's harbor beside this one may be making its own dir in it.)
            self._kept.rmdir()
        except OSError:
            pass
