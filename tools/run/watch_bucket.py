"""make watch WHERE=hf: a remote run's job dirs mirrored from its bucket, only the json the frame needs.

tools/run/watch.py's docstring says how and why (huggingface_hub's bucket API, a private temporary
dir, caps on what is listed and read).
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from tools import fmt, hf_client
from tools import safe_read
from tools.results import tally_jobs

BUCKET_JSON = ("config.json", "result.json")  # what the frame reads of a job dir and of a trial dir
BUCKET_LIST_CAP = 500_000       # entries listed per frame (trajectories included: names only)
BUCKET_FILES_CAP = 50_000       # json files mirrored
BUCKET_FILE_CAP = 16 * safe_read.MiB   # bytes of one json file (a result.json is a few KB)
BUCKET_TOTAL_CAP = safe_read.TALLY_CAP  # bytes of them all


class BucketError(Exception):
    """The bucket cannot be read (not found, no access, the network, a cap): one line."""


@dataclass
class Remote:
    """A run's job dirs mirrored from its bucket: only the json files the frame needs."""

    bucket: str
    job_name: str
    root: Path                                   # the private temporary dir
    have: dict[str, str] = field(default_factory=dict)  # bucket path -> xet hash of the local copy
    notes: list[str] = field(default_factory=list)      # this frame's files left out, said as alarms
    refreshed: datetime | None = None


def _safe_part(name: str) -> bool:
    """A path component that is a plain name here (never '..', a separator, a control char)."""
    return name not in ("", ".", "..") and len(name) <= 255 and safe_read.printable(name) == name and \
        "\\" not in name and "/" not in name


def bucket_wanted(job_name: str, path: str) -> bool:
    """<job>/{config,result}.json or <job>/<trial>/{config,result}.json of the run's jobs (the job
    or its -shard-N, and its -retry-N): nothing deeper, so never agent/ and its trajectories."""
    parts = path.split("/")
    return 2 <= len(parts) <= 3 and all(_safe_part(p) for p in parts) and parts[-1] in BUCKET_JSON and \
        tally_jobs.retry_number(job_name, parts[0]) is not None


def bucket_listing(api, remote: Remote) -> tuple[dict[str, object], set[str]]:
    """({path: BucketFile} of the json files wanted, {job and trial dir paths}) of the run, now."""
    from huggingface_hub import BucketFolder

    jobs = [e.path for e in api.list_bucket_tree(remote.bucket, recursive=False)
            if isinstance(e, BucketFolder) and tally_jobs.retry_number(remote.job_name, e.path) is not None]
    files: dict[str, object] = {}
    dirs: set[str] = set(jobs)
    listed = 0
    for job in jobs:
        for entry in api.list_bucket_tree(remote.bucket, prefix=job, recursive=True):
            listed += 1
            if listed > BUCKET_LIST_CAP:
                raise BucketError(f"more than {BUCKET_LIST_CAP:,} entries under the run's jobs: not a run's job dirs")
            parts = entry.path.split("/")
            if parts[0] != job:  # a prefix listing may also match job-retry-1's paths: listed on its own
                continue
            if len(parts) >= 2 and (len(parts) > 2 or isinstance(entry, BucketFolder)) and _safe_part(parts[1]):
                dirs.add(f"{job}/{parts[1]}")  # a trial dir, even with no json yet (running)
            if not isinstance(entry, BucketFolder) and bucket_wanted(remote.job_name, entry.path):
                files[entry.path] = entry
    if len(files) > BUCKET_FILES_CAP:
        raise BucketError(f"{len(files):,} json files in the run's jobs, above the cap of {BUCKET_FILES_CAP:,}")
    return files, dirs


def _drop_gone(remote: Remote, files: dict[str, object], dirs: set[str]) -> None:
    """Forget what the bucket no longer holds (a mop-up archived it, a job was removed)."""
    for path in [p for p in remote.have if p not in files]:
        (remote.root / path).unlink(missing_ok=True)
        del remote.have[path]
    for job in sorted(os.listdir(remote.root)):
        job_dir = remote.root / job
        if job not in dirs:
            shutil.rmtree(job_dir)  # our own dir: made here, never a link
            continue
        for trial in os.listdir(job_dir):
            if (job_dir / trial).is_dir() and f"{job}/{trial}" not in dirs:
                shutil.rmtree(job_dir / trial)


def bucket_refresh(api, remote: Remote) -> None:
    """Bring the mirror to what the bucket holds now: changed files fetched, gone ones dropped."""
    files, dirs = bucket_listing(api, remote)
    _drop_gone(remote, files, dirs)
    for d in sorted(dirs):
        (remote.root / d).mkdir(parents=True, exist_ok=True)
    remote.notes = []
    fetch, total = [], 0
    for path, entry in sorted(files.items()):
        if entry.size > BUCKET_FILE_CAP:
            remote.notes.append(f"bucket: {safe_read.shown(path)} not read: {entry.size:,} bytes, above the cap of "
                                f"{BUCKET_FILE_CAP:,} (its trial shows as having no result)")
            continue
        total += entry.size
        if total > BUCKET_TOTAL_CAP:
            raise BucketError(f"the run's json files hold more than {BUCKET_TOTAL_CAP:,} bytes, above the cap")
        if remote.have.get(path) != entry.xet_hash:
            (remote.root / path).unlink(missing_ok=True)  # a new version: never written into an old file
            fetch.append((entry, str(remote.root / path)))
    if fetch:
        api.download_bucket_files(remote.bucket, fetch, raise_on_missing_files=False)
    for entry, dest in fetch:
        _check_fetched(remote, entry, Path(dest))
    remote.refreshed = fmt.utc_now()


def _check_fetched(remote: Remote, entry, dest: Path) -> None:
    """Keep a downloaded file only when it is a regular file of the size listed."""
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        return  # gone between the listing and the download: the next frame sees it
    if not stat.S_ISREG(st.st_mode) or st.st_size != entry.size:
        dest.unlink()
        remote.notes.append(f"bucket: {safe_read.shown(entry.path)} not read: not the {entry.size:,} bytes listed")
        return
    remote.have[entry.path] = entry.xet_hash


def bucket_api(timeout: float | None = None):
    """huggingface_hub's client from tools/hf_client.py, quiet: its token is the project's one
    reader's (HF_TOKEN or the login), each request bounded by TIMEOUT (the run's HF_CALL_TIMEOUT)."""
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()  # a bar on stderr would tear the live view
    return hf_client.api(timeout)
