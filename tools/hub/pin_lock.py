"""pin_lock: what a job recorded of its inputs, read off its own files: the dataset commits of its
lock.json (harbor's JobLock model), the registry dataset versions its config.json resolved, and the
harbor that wrote it; and whether a registry dataset's @ref names one version for good. make pin
(tools/hub/pin.py) writes these back into a run file; make submission (tools/hub/submission_rules.py)
refuses a registry dataset the board could not bind to one version."""

from __future__ import annotations

import re
from pathlib import Path

from tools.safe_read import Unreadable, printable, read_json_object

LOCK_CAP = 64 << 20
# A registry dataset's version as harbor's package reference takes it after @ (harbor/models/package/
# version_ref.py VersionRef.parse): a content digest and a revision number name one version for good;
# anything else is a tag, which its publisher can move (latest is one).
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
REVISION = re.compile(r"[0-9]{1,9}")
REGISTRY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")


def registry_pinned(ref: str | None) -> bool:
    """Whether a registry dataset's @ref names one version for good: a revision or a digest."""
    return bool(ref) and bool(REVISION.fullmatch(ref) or DIGEST.fullmatch(ref))


def split_registry(dataset: str) -> tuple[str, str | None]:
    """DATASET=org/name[@ref] as (org/name, ref or None)."""
    name, _, ref = dataset.partition("@")
    return name, ref or None


class PinError(Exception):
    """One line for the user: what is wrong and what to do."""


def read_lock(job_dir: Path) -> dict | None:
    """The job's lock.json through harbor's own JobLock model; None when the job has none."""
    from harbor.models.job.lock import JobLock  # noqa: PLC0415  (heavy; only when there is a lock)

    path = job_dir / "lock.json"
    if not path.exists():
        return None
    try:
        raw = read_json_object(path, cap=LOCK_CAP, what="a lock.json")
        lock = JobLock.model_validate(raw)
    except Exception as e:  # noqa: BLE001  (any unreadable lock is one line)
        raise PinError(f"{path} is not a lock.json harbor 0.26.0 can read ({str(e).splitlines()[0]}): "
                       "pin by hand with DATASET_REF=<40-hex sha> in the run file") from e
    # Printable from here on: the URL and the commit are printed, and written into the manifest.
    commits = sorted({(printable(t.task.git_url or ""), printable(t.task.git_commit_id)) for t in lock.trials
                      if t.task.type == "git" and t.task.git_commit_id})
    version = printable(lock.harbor.version) if lock.harbor.version else lock.harbor.version
    packages = {printable(t.task.source) for t in lock.trials if t.task.type == "package" and t.task.source}
    return {"job": job_dir.name, "harbor_version": version, "commits": commits,
            "registry": registry_versions(job_dir, packages),
            "tasks": len(lock.trials), "local_tasks": sum(1 for t in lock.trials if t.task.type == "local")}


def registry_versions(job_dir: Path, packages: set[str]) -> list[tuple[str, str]]:
    """[(org/name, the version harbor resolved)] of the job's registry datasets: its config.json's
    datasets[].ref, for each dataset its lock.json holds package tasks of (as harbor recorded them)."""
    try:
        config = read_json_object(job_dir / "config.json", cap=LOCK_CAP, what="a config.json")
    except (OSError, Unreadable):
        return []
    datasets = config.get("datasets") if isinstance(config.get("datasets"), list) else []
    out = []
    for ds in datasets:
        name = ds.get("name") if isinstance(ds, dict) else None
        if isinstance(name, str) and name in packages and not ds.get("repo"):
            ref = ds.get("ref") if isinstance(ds.get("ref"), str) else None
            out.append((printable(name), printable(ref or "(none)")))
    return sorted(set(out))
