"""safe_read: read what a job dir holds, and write what the tools produce, without surprises.

A job dir is written by harbor, by a killed harbor, by rsync, by a curious user: any entry
can be a symlink loop, a FIFO, a device, a 200 MB file or a name that is not UTF-8. The
tally, the reports and check-submission read it only through these helpers, which never
block, never follow a trial dir out of its job, never read more than a cap, and turn
every problem into one line (`Unreadable`) that the caller reports per file and goes on.

Caps (documented in docs/guarantees.md, "Every file is read within limits", and docs/tally.md §3):
    RESULT_CAP   64 MiB  one result.json or config.json. harbor writes a few KB; a bigger
                         one (a runaway exception message) is refused with its size.
    TALLY_CAP   512 MiB  one tally JSON file read by tools/report/report.py.
    STATE_CAP     4 MiB  one state file a supervisor writes and reads back (campaign.json,
                         reproduce.json, server.json): a few KiB in real use.
    SMALL_CAP     4 KiB  one small record (a lock holder, a run's instance id).
    MANIFEST_CAP 64 MiB  a run's manifest.jsonl: about 5 KB a launch.
    LOG_TAIL_CAP  1 MiB  the end of a tool's output kept in a log (harbor upload's View line).
    MESSAGE_CAP     500  characters of an exception message carried into JSON/Markdown
                         (classification sees the whole message first).

Names: Python hands undecodable bytes of a file name over as lone surrogates
(surrogateescape). `shown()` turns them into `\\xNN` escapes for everything printed or
put in JSON, so the output is always valid UTF-8; the real path is used for file access.

Writes: `write_atomic()` is the one atomic writer of what the tools produce (a page, a
table, a state file): a temp file created exclusively beside the target, fsync'd and renamed
over it, then the directory fsync'd, so a reader or a crash sees the old file or the new one,
never half of one. It writes only a regular file or a new name (`write_target()`): a device, a
FIFO, a socket, a directory, or anything under /proc, /sys or /dev is refused (`Unwritable`),
never replaced.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import stat
import tempfile
from typing import Any, Callable

MiB = 1 << 20
RESULT_CAP = 64 * MiB
TALLY_CAP = 512 * MiB
STATE_CAP = 4 * MiB
SMALL_CAP = 4096
MANIFEST_CAP = 64 * MiB  # a line of about 5 KB (the settings) per launch: thousands of them fit
LOG_TAIL_CAP = 1 * MiB
MESSAGE_CAP = 500


class Unreadable(Exception):
    """A file that exists but cannot be used; the message is the one-line reason."""


# --------------------------------------------------------------------------- names


def shown(text: str) -> str:
    """`text` safe to print and to put in JSON: undecodable name bytes become `\\xNN`."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that came from JSON (\ud800), not from a name
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with each control character written as its escape (\\x1b, \\n), as shown() writes
    undecodable bytes: safe to print to a terminal and to keep on one line."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], shown(text))


def link_target(path: str | os.PathLike) -> str:
    """Where the symlink `path` points, printable; what went wrong when it cannot be read."""
    try:
        return printable(os.readlink(path))
    except OSError as e:
        return f"(unreadable: {e.strerror or e})"


def clip(text: str | None, limit: int = MESSAGE_CAP) -> str | None:
    """At most `limit` characters, with a marker saying how long the whole was."""
    if text is None or len(text) <= limit:
        return None if text is None else shown(text)
    return shown(text[:limit]) + f"… (truncated, {len(text):,} chars)"


# --------------------------------------------------------------------------- reading

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISLNK, "a symlink that does not resolve"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a file")
kind_of_file = _kind  # public: tools/hub/stage.py words its refusals with it


def _cap_text(cap: int) -> str:
    return f"{cap // MiB} MiB" if cap >= MiB else f"{cap:,} bytes"


def read_regular(path: str | os.PathLike, cap: int = RESULT_CAP, what: str = "a result.json", *,
                 head: bool = False, tail: bool = False) -> bytes:
    """The bytes of a regular file of at most `cap` bytes (head=True: its first `cap` bytes, however
    long it is, as for a log whose start is what is looked for; tail=True: its last `cap` bytes, as
    for a log whose end is).

    Raises FileNotFoundError when nothing is there (the caller's "missing" case), and
    Unreadable for anything else: never opens a FIFO, socket or device (stat first, then
    open non-blocking and check again, in case it was swapped in between).
    """
    size_cap = None if head or tail else cap
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise Unreadable(f"symlink to {shown(os.readlink(path))}, which does not exist") from None
        raise
    except OSError as e:
        raise Unreadable(f"cannot read: {e.strerror or e}") from None
    _check_regular(st, size_cap, what)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise Unreadable(f"cannot read: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        _check_regular(st, size_cap, what)
        if tail and st.st_size > cap:
            os.lseek(fd, st.st_size - cap, os.SEEK_SET)
        data = _read_fd(fd, min(st.st_size, cap), cap)
    except OSError as e:
        raise Unreadable(f"cannot read: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if head or tail:
        return data[:cap]
    if len(data) > cap:  # it grew past the cap after the stat
        raise Unreadable(f"over the {_cap_text(cap)} cap for {what} (more than {cap:,} bytes); not read")
    return data


def _read_fd(fd: int, size: int, cap: int) -> bytes:
    """Up to cap + 1 bytes: asks for the size the file has, never allocates the cap up front."""
    parts, got, limit = [], 0, cap + 1
    while got < limit:
        chunk = os.read(fd, min(max(size + 1 - got, 1 << 16), limit - got))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _check_regular(st: os.stat_result, cap: int | None, what: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise Unreadable(f"not a regular file ({_kind(st.st_mode)}); not opened")
    if cap is not None and st.st_size > cap:
        raise Unreadable(f"over the {_cap_text(cap)} cap for {what} ({st.st_size:,} bytes); not read")


def _json_kind(value: Any) -> str:
    if value is None:
        return "JSON null"
    if isinstance(value, bool):
        return "a JSON boolean"
    if isinstance(value, (int, float)):
        return "a JSON number"
    return {list: "a JSON array", str: "a JSON string"}.get(type(value), "a JSON value")


def describe_json_error(e: json.JSONDecodeError) -> str:
    """`truncated JSON …` when the text ends early (harbor killed mid-write), else `invalid JSON …`."""
    where = f"line {e.lineno} column {e.colno}"
    if e.msg.startswith("Unterminated string"):
        return f"truncated JSON: a string starting at {where} never ends"
    if e.pos >= len(e.doc.rstrip()):
        return f"truncated JSON at {where} ({e.msg})"
    return f"invalid JSON at {where} ({e.msg})"


def parse_json(raw: bytes) -> Any:
    """Parse UTF-8 JSON; every failure is an Unreadable with a one-line reason."""
    if not raw.strip():
        raise Unreadable("empty file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Unreadable(f"not UTF-8 text: byte 0x{raw[e.start]:02x} at offset {e.start}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise Unreadable(describe_json_error(e)) from None
    except RecursionError:
        raise Unreadable("JSON nested too deeply") from None
    except ValueError as e:  # e.g. an integer of more than 4300 digits
        raise Unreadable(f"invalid JSON ({clip(str(e), 200)})") from None


def parse_json_object(raw: bytes) -> dict:
    data = parse_json(raw)
    if not isinstance(data, dict):
        raise Unreadable(f"not a JSON object ({_json_kind(data)})")
    return data


def read_json_object(path: str | os.PathLike, cap: int = RESULT_CAP, what: str = "a result.json") -> dict:
    """read_regular + parse_json_object (FileNotFoundError passes through)."""
    return parse_json_object(read_regular(path, cap, what))


# --------------------------------------------------------------------------- a job dir's entries


def _is_trial_shaped(path: str, name: str) -> bool:
    # harbor names trials `<task>__<id>`; a dir with neither that shape nor a
    # config.json/result.json is someone else's (an archive, a notes dir).
    return "__" in name or os.path.lexists(os.path.join(path, "result.json")) or os.path.lexists(
        os.path.join(path, "config.json"))


def trial_dir_entries(job_dir: str) -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """(trial dirs, refused [(path, reason)], other dirs) directly under job_dir, by name.

    A symlink to a dir (or a looping or dangling one) is refused, never followed: it would
    count a trial twice, or read the job's own result.json as a trial's. Files (the job's
    config.json, lock.json, job.log) are skipped. Raises Unreadable when job_dir cannot be
    listed.
    """
    try:
        with os.scandir(job_dir) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as e:
        raise Unreadable(f"cannot list the job dir: {e.strerror or e}") from None
    trials, refused, others = [], [], []
    for entry in entries:
        try:
            if entry.is_symlink():
                if _link_needs_refusal(entry.path):
                    refused.append((entry.path, f"symlink to {shown(os.readlink(entry.path))}, not followed"))
                continue
            if not entry.is_dir(follow_symlinks=False):
                continue
        except OSError as e:
            refused.append((entry.path, f"cannot inspect: {e.strerror or e}"))
            continue
        (trials if _is_trial_shaped(entry.path, entry.name) else others).append(entry.path)
    return trials, refused, others


def _link_needs_refusal(path: str) -> bool:
    """A symlink that a dir scan would have followed: to a dir, or that cannot be resolved."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError as e:
        return e.errno in (errno.ELOOP, errno.ENOENT, errno.ENOTDIR, errno.EACCES)


# --------------------------------------------------------------------------- writing


def _mode_for(path: str) -> int:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


# Pseudo and device filesystems: a file there is the kernel's, never a page or a table of ours.
SYSTEM_DIRS = ("/proc", "/sys", "/dev")


class Unwritable(OSError):
    """A path write_atomic refuses to replace. An OSError, so every caller's `except OSError`
    reports it in one line with write_error, as it reports a full disk."""


def _system_dir(real: str) -> str | None:
    return next((d for d in SYSTEM_DIRS if real == d or real.startswith(d + os.sep)), None)


def write_target(path: str | os.PathLike) -> str:
    """The file write_atomic(path) replaces: `path` with its symlinks resolved (a write goes where
    a plain write would), when that is a regular file or a new name, outside /proc, /sys and /dev.

    Raises Unwritable for anything else, having opened nothing, and the OSError of a path that
    cannot be looked at (a name too long, a parent that is not a directory).
    """
    shown_path = shown(os.fspath(path))
    target = os.path.realpath(path)
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        mode = None  # a new name
    if mode is not None and not stat.S_ISREG(mode):
        raise Unwritable(errno.EINVAL, f"it is {_kind(mode)}, not a regular file; nothing was written", shown_path)
    system = _system_dir(target)
    if system:
        raise Unwritable(errno.EINVAL, f"it is under {system}, a system directory; nothing was written", shown_path)
    return target


def write_atomic(path: str | os.PathLike, data: bytes | str, *, copy_stat_from: str | os.PathLike | None = None,
                 temp_suffix: str | None = None, before_replace: Callable[[], None] | None = None) -> None:
    """Replace `path` with `data` in one step: a temp file in the same dir, written whole and
    fsync'd, os.replace'd over the target, then an fsync of the dir so the rename survives a crash.

    The temp file is created exclusively (mkstemp: O_CREAT|O_EXCL, an unpredictable name, so no
    file or link already there is written through); with `temp_suffix` it is `<target><suffix>`
    instead, a name a later run can find and remove after a kill (mop-up's .mopup-tmp), opened
    without following a link. `copy_stat_from`: the temp file takes that file's mode and times
    (a backup), else the target's mode. `before_replace` runs between the two steps (a test's
    kill point).

    Only a regular file or a new name is written (write_target); anything else raises
    Unwritable. On any failure (a full disk among them) the temp file is removed and the old
    file is left as it was. Text is encoded as UTF-8; a stray lone surrogate becomes a visible
    escape, never a crash halfway through a file.
    """
    if isinstance(data, str):
        data = data.encode("utf-8", "backslashreplace")
    target = write_target(path)
    directory, name = os.path.split(target)
    if temp_suffix:
        tmp = os.path.join(directory, name + temp_suffix)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    else:
        # The target's first 40 characters name the temp file: a target name near the 255-byte
        # limit still leaves room for the dot, the random part and the suffix.
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name[:40]}.", suffix=".tmp")
    try:
        _write_temp(fd, tmp, data)
        if copy_stat_from is not None:
            shutil.copystat(copy_stat_from, tmp)
        else:
            os.chmod(tmp, _mode_for(target))
        if before_replace is not None:
            before_replace()
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(directory)


def _write_temp(fd: int, tmp: str, data: bytes) -> None:
    """All of `data` into the temp file `tmp` (open as fd), fsync'd, fd closed. A seam: the
    full-disk tests replace it (tmp says which file is being written)."""
    try:
        view = memoryview(data)
        while view:  # os.write may write less than asked
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_error(path: str | os.PathLike, e: OSError) -> str:
    """The one-line message for a failed write, with the likely fix."""
    if isinstance(e, Unwritable):
        fix = "name a regular file or a new one"
    elif e.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = "free some space, or pass another path"
    elif e.errno == errno.EFBIG:
        fix = "the file size limit (ulimit -f) is reached: raise it, or pass another path"
    elif e.errno == errno.ENAMETOOLONG:
        fix = "use a shorter name"
    else:
        fix = "check that its directory exists and is writable, or pass another path"
    return f"cannot write {printable(os.fspath(path))}: {printable(str(e.strerror or e))} ({fix})"


# --------------------------------------------------------------------------- the run manifest


def manifest_events(path: str | os.PathLike) -> list[dict]:
    """The events of a run's state/<run>/manifest.jsonl, in order; none when it is absent. A line
    cut short by a kill (scripts/lib.sh starts the next one on a fresh line) and anything that is
    not a JSON object are skipped. Unreadable when it is not a regular file or is past MANIFEST_CAP:
    its readers count the run's launches from it (make cost), so they say so rather than count none."""
    try:
        raw = read_regular(path, MANIFEST_CAP, "a run's manifest.jsonl")
    except FileNotFoundError:
        return []
    lines = raw.decode("utf-8", errors="replace").splitlines()
    events = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events
