"""The engines' wheels, fetched once and extracted for their parsers (tests/engines.lock.json).

Each wheel is downloaded from the url the lock records, its sha256 checked while it streams, and
kept under tests/.engines/ (git-ignored) only when it matches; a mismatch is refused in one line
and nothing of it is kept. Only what a parser can import is extracted: every .py file, the
dist-info (vLLM reads its own version from it), and the native modules the lock names (SMG's
parser takes its choices from smg_rs.abi3.so). vLLM's 300 MB of CUDA kernels stay in the zip.

The first test that needs an engine fetches it, not make setup: a user who never runs the tests
never downloads 315 MB, and a fresh clone's `make test` (CI) fetches it all the same. Several
pytest-xdist workers may ask at once: one holds tests/.engines/.lock (flock) and fetches, the
others wait for it and then find the tree complete. A tree is complete when its stamp, written
last, holds the wheel's sha256 and the natives the lock lists; a tree without it (a fetch killed
half way, or a lock that changed) is extracted again.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOCK_FILE = REPO / "tests" / "engines.lock.json"
CACHE = REPO / "tests" / ".engines"
STAMP = ".sha256"
# A read that makes no progress for this long is a dead connection, not a slow one.
READ_TIMEOUT = 60
CHUNK = 1 << 20


class Refused(Exception):
    """The wheel fetched is not the one the lock records (or could not be read): one line."""


class Unreachable(Exception):
    """PyPI could not be reached: the wheel is not here and cannot be fetched now."""


def lock(path: Path = LOCK_FILE) -> dict:
    return json.loads(path.read_text())


def entry(name: str, path: Path = LOCK_FILE) -> dict:
    """The lock's record of the wheel called `name`."""
    for wheel in lock(path)["wheels"]:
        if wheel["name"] == name:
            return wheel
    raise KeyError(f"{path.name} has no wheel called {name!r}")


def tree(wheel: dict, cache: Path = CACHE) -> Path:
    """Where the wheel's extracted files are: the directory to put on sys.path."""
    return cache / f"{wheel['name']}-{wheel['version']}"


def ensure(wheel: dict, cache: Path = CACHE) -> Path:
    """The wheel's extracted tree, fetched and extracted first if it is not complete yet."""
    target = tree(wheel, cache)
    if _complete(target, wheel):
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        # Another process may have finished it while this one waited.
        if not _complete(target, wheel):
            _extract(_download(wheel, cache), wheel, target)
    return target


def _stamp(wheel: dict) -> str:
    """What a complete tree's stamp holds: the wheel's sha256 and the natives extracted with it."""
    return " ".join([wheel["sha256"], *wheel["native"]]) + "\n"


def _complete(target: Path, wheel: dict) -> bool:
    stamp = target / STAMP
    return stamp.is_file() and stamp.read_text() == _stamp(wheel)


def _download(wheel: dict, cache: Path) -> Path:
    """The wheel's file in the cache, downloaded unless a copy with the lock's sha256 is there."""
    path = cache / wheel["wheel"]
    if path.is_file() and _sha256(path) == wheel["sha256"]:
        return path
    partial = path.with_name(path.name + ".part")
    print(f"engines: fetching {wheel['wheel']} ({wheel['size'] / 1e6:.1f} MB) from PyPI, once",
          file=sys.stderr)
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(wheel["url"], timeout=READ_TIMEOUT) as answer, open(partial, "wb") as out:
            while chunk := answer.read(CHUNK):
                digest.update(chunk)
                out.write(chunk)
    except (urllib.error.URLError, OSError) as error:
        partial.unlink(missing_ok=True)
        reason = getattr(error, "reason", error)
        raise Unreachable(f"engines: cannot fetch {wheel['wheel']} from {wheel['url']}: {reason}") from None
    if digest.hexdigest() != wheel["sha256"]:
        partial.unlink()
        raise Refused(
            f"engines: refused {wheel['wheel']} from {wheel['url']}: its sha256 is {digest.hexdigest()}, "
            f"{LOCK_FILE.relative_to(REPO)} records {wheel['sha256']}; nothing kept")
    os.replace(partial, path)
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def wanted(member: str, wheel: dict) -> bool:
    """Whether a member of the wheel is extracted: its .py files, its dist-info, its listed natives."""
    top = member.split("/", 1)[0]
    return (member.endswith(".py") or top.endswith(".dist-info") or member in wheel["native"]) \
        and not member.endswith("/")


def _extract(path: Path, wheel: dict, target: Path) -> None:
    """Extract into a fresh directory beside the target, then put it in the target's place."""
    fresh = target.with_name(target.name + ".new")
    shutil.rmtree(fresh, ignore_errors=True)
    try:
        _unzip(path, wheel, fresh)
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    (fresh / STAMP).write_text(_stamp(wheel))
    shutil.rmtree(target, ignore_errors=True)
    os.replace(fresh, target)


def _unzip(path: Path, wheel: dict, fresh: Path) -> None:
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            missing = sorted(set(wheel["native"]) - set(names))
            if missing:
                raise Refused(f"engines: {wheel['wheel']} lacks {', '.join(missing)}, which the lock lists")
            for member in names:
                if not wanted(member, wheel):
                    continue
                # A wheel is a zip: a name that climbs out of the tree is refused, never followed.
                if member.startswith("/") or ".." in member.split("/"):
                    raise Refused(f"engines: {wheel['wheel']} holds {member!r}, outside its tree")
                archive.extract(member, fresh)
    except zipfile.BadZipFile as error:
        raise Refused(f"engines: {path} is not a wheel ({error})") from None


if __name__ == "__main__":
    # python -m tests.engines.fetch [NAME...]: fetch and extract now (every wheel by default).
    for record in lock()["wheels"]:
        if len(sys.argv) == 1 or record["name"] in sys.argv[1:]:
            print(ensure(record))
