"""Mop-up's moves and writes, made to survive a kill at any instant, a full disk and a live writer.

tools/mopup/mopup.py decides what to do; this module does it and keeps the books:

  moves     A trial dir leaves a job only by one rename into
            state/<run>/archive/<batch>/<job-name>/<trial>, with a manifest record before
            ("moving") and after ("moved"). A kill between the rename and the second record
            leaves a dir the manifest does not call moved, so the archive listing and restore
            read the disk as well as the manifest: such a dir is listed and restorable.
  writes    Every file mop-up rewrites (a job's config.json and lock.json, their backups) is
            written to <file>.mopup-tmp beside it, fsync'd and os.replace'd, then the directory
            fsync'd (safe_read.write_atomic). A kill leaves at most that temp file; the next
            prepare removes temp files of exactly those names.
  manifest  state/<run>/manifest.jsonl is append-only. A line cut short by a kill is skipped
            when read, and the next record starts on a line of its own.
  writers   Before anything moves, no other process may hold a file (or its cwd) inside a
            trial dir that moves, and no harbor may be working on the job (Linux /proc;
            without /proc the check is skipped with a note).
  failures  An OSError while writing (ENOSPC above all) becomes WriteFailed, which the
            commands turn into one line that also says what was moved so far.

Test hook: MOPUP_TEST_KILL_AT=<point>[#n] SIGKILLs this process the n-th time (default: the
first) it reaches that point, so a test kills mop-up at the exact instant it wants
(tests/test_mopup_hostile.py). Points: after-moving-record, after-rename, after-temp-write,
after-restore-rename. Unset, it costs one environment lookup.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import click

from tools import safe_read

TEMP_SUFFIX = ".mopup-tmp"
# The only files mop-up rewrites, in a job dir and as backups: the only temp names it cleans.
REWRITTEN = ("config.json", "lock.json")
JOB_FILES_SUFFIX = ".job-files"  # <batch>/<job>.job-files/: backups and the job's result.json
PROC = Path("/proc")
KILL_ENV = "MOPUP_TEST_KILL_AT"
NOT_IN_MANIFEST = "not in manifest: moved by an interrupted mop-up"
# Every message that suggests another mop-up says when: never while this one still runs.
AGAIN = "run make mopup again once this one has finished"


_kill_hits: dict[str, int] = {}


def kill_point(name: str) -> None:
    """Die here, as a power cut would, when a test asks for it (MOPUP_TEST_KILL_AT=name[#n])."""
    point, _, nth = os.environ.get(KILL_ENV, "").partition("#")
    if point != name:
        return
    _kill_hits[name] = _kill_hits.get(name, 0) + 1
    if _kill_hits[name] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)


def shown(path: Path | str) -> str:
    """A path as the user typed it: relative to the current dir when inside it."""
    text = os.path.abspath(path)
    here = os.getcwd() + os.sep
    return text[len(here):] if text.startswith(here) else text


# --- failures while writing -------------------------------------------------------------------


class WriteFailed(Exception):
    """An OSError while mop-up wrote or moved something; `no_space` for ENOSPC and EDQUOT."""

    def __init__(self, doing: str, path: Path | str, exc: OSError):
        super().__init__(f"{doing} {path}: {exc}")
        self.doing, self.path = doing, path
        self.no_space = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        self.reason = exc.strerror or str(exc)

    def message(self, what_moved: str, verb: str = "make mopup") -> str:
        if self.no_space:
            return (f"no space left on device while {self.doing} {shown(self.path)}: "
                    f"free space and run {verb} again; {what_moved}")
        return f"{self.reason} while {self.doing} {shown(self.path)}: fix that and run {verb} again; {what_moved}"


@contextmanager
def writing(doing: str, path: Path | str):
    """Turn an OSError raised inside into WriteFailed(doing, path)."""
    try:
        yield
    except OSError as exc:
        raise WriteFailed(doing, path, exc) from None


def what_moved(moved: list[str], manifest: Path) -> str:
    if not moved:
        return "nothing was moved"
    return (f"{len(moved)} trial dir(s) were moved to the archive before that, each recorded in "
            f"{shown(manifest)} (make mopup-archive lists them)")


# --- files: never open a FIFO, write beside and replace -----------------------------------------


def file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "an unknown kind of file"


def special_file(path: Path) -> str | None:
    """'a FIFO' etc. when path is neither a regular file nor a dir (reading it could hang), else None."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else file_kind(mode)


def regular_or_absent(path: Path, role: str) -> bool:
    """True for a regular file, False when absent; a click error for anything else."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(mode):
        raise click.ClickException(f"{shown(path)} ({role}) is {file_kind(mode)}, not a file, and mop-up never opens "
                                   "one: move it away, then run make mopup again")
    return True


def _write_all(fd: int, data: bytes) -> None:
    """Write all of data to fd (os.write may write less), then fsync."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)


def replace_file(path: Path, data: str | bytes, copy_stat_from: Path | None = None) -> None:
    """path gets data or keeps its old content, never half of it; only path's temp file
    (<path>.mopup-tmp) is left on a kill. safe_read.write_atomic writes it; an OSError becomes
    WriteFailed."""
    with writing("writing", path):
        safe_read.write_atomic(path, data, copy_stat_from=copy_stat_from, temp_suffix=TEMP_SUFFIX,
                               before_replace=lambda: kill_point("after-temp-write"))


def copy_atomically(src: Path, dest: Path) -> None:
    """A backup of src at dest (content and times), written like every other file."""
    if not regular_or_absent(src, "the job's settings"):
        raise click.ClickException(f"{shown(src)} is gone: nothing to back up")
    with writing("creating", dest.parent):
        dest.parent.mkdir(parents=True, exist_ok=True)
    replace_file(dest, src.read_bytes(), copy_stat_from=src)


def remove_stale_temps(job_dir: Path, state_dir: Path) -> list[Path]:
    """Delete the temp files an interrupted mop-up left: <config|lock>.json.mopup-tmp, nothing else.

    They sit in the job dir (the concurrency patch) and in the archive's *.job-files dirs
    (the backups); a temp file is never the only copy of anything.
    """
    dirs = [job_dir, *sorted((state_dir / "archive").glob(f"*/*{JOB_FILES_SUFFIX}"))]
    removed = []
    for directory in dirs:
        for name in REWRITTEN:
            tmp = directory / (name + TEMP_SUFFIX)
            try:
                if not stat.S_ISREG(os.lstat(tmp).st_mode):
                    continue
            except FileNotFoundError:
                continue
            with writing("removing", tmp):
                tmp.unlink()
            removed.append(tmp)
    return removed


# --- the manifest -----------------------------------------------------------------------------


def manifest_path(state_dir: Path) -> Path:
    return state_dir / "manifest.jsonl"


def _append_line(path: Path, line: str) -> None:
    """Append one line, fsync'd; the one place the manifest is written."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        # A kill mid-append leaves a line without its newline: start on a fresh line.
        if os.fstat(fd).st_size and not _ends_with_newline(path):
            line = "\n" + line
        _write_all(fd, line.encode())
    finally:
        os.close(fd)


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def append_manifest(state_dir: Path, record: dict) -> None:
    path = manifest_path(state_dir)
    regular_or_absent(path, "mop-up's records")
    line = json.dumps({"at": datetime.now(timezone.utc).isoformat(), **record}) + "\n"
    with writing("writing", path):
        state_dir.mkdir(parents=True, exist_ok=True)
        _append_line(path, line)


def read_manifest_lines(state_dir: Path) -> tuple[list[dict], int]:
    """(the manifest's records, how many lines were not records: cut short by a kill)."""
    path = manifest_path(state_dir)
    if not regular_or_absent(path, "mop-up's records"):
        return [], 0
    records, broken = [], 0
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line.decode())
        except ValueError:
            broken += 1
            continue
        if isinstance(record, dict):
            records.append(record)
        else:
            broken += 1
    return records, broken


def read_manifest(state_dir: Path) -> list[dict]:
    return read_manifest_lines(state_dir)[0]


# --- moving dirs --------------------------------------------------------------------------------

_rename = os.rename  # the one place mop-up moves anything (a seam for the disk-full tests)


def ensure_free(dest: Path) -> None:
    if os.path.lexists(dest):
        raise click.ClickException(f"{shown(dest)} already exists; not overwriting it (move it away by hand)")


def move_dir(src: Path, dest: Path) -> None:
    """A rename, never copy-and-delete: the dir (or file) is either here or there."""
    ensure_free(dest)
    with writing("creating", dest.parent):
        dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        _rename(src, dest)
    except OSError as exc:
        if exc.errno == errno.EXDEV:
            raise click.ClickException(
                f"cannot move {shown(src)} to {shown(dest)}: different filesystems. Put state/ on the jobs dir's "
                "filesystem (STATE_ROOT=<dir next to the jobs dir>); mop-up never copies-then-deletes.")
        raise WriteFailed(f"moving {shown(src)} to", dest, exc) from None


def archive_trials(plan: dict, state_dir: Path, moved: list[str] | None = None) -> int:
    """Move the plan's trial dirs to the archive; a rerun of the plan skips (and records) what is done.

    `moved` collects each dir moved, so a failure can say what was moved before it.
    """
    moved = [] if moved is None else moved
    recorded = {os.path.abspath(r["dest"]) for r in read_manifest(state_dir)
                if r.get("event") == "archive" and r.get("state") == "moved" and isinstance(r.get("dest"), str)}
    count = 0
    for item in plan["archive"]:
        src = Path(item["src"])
        dest = state_dir / "archive" / plan["batch"] / item["job"] / src.name
        if not os.path.lexists(src) and dest.exists():
            # Done by an earlier attempt at this plan; record it if that attempt died first.
            if os.path.abspath(dest) not in recorded:
                append_manifest(state_dir, {"event": "archive", "state": "moved", "src": str(src), "dest": str(dest),
                                            "task": item["task"], "batch": plan["batch"],
                                            "why": "recorded by a rerun: the first attempt died after its rename"})
            continue
        if not os.path.lexists(src):
            raise click.ClickException(f"{shown(src)} is gone and not in the archive: the plan is out of date. "
                                       f"{AGAIN.capitalize()} (it plans afresh)")
        ensure_free(dest)
        append_manifest(state_dir, {"event": "archive", "state": "moving", "src": str(src), "dest": str(dest),
                                    "task": item["task"], "finished": item["finished"], "batch": plan["batch"]})
        kill_point("after-moving-record")
        move_dir(src, dest)
        moved.append(str(src))
        kill_point("after-rename")
        append_manifest(state_dir, {"event": "archive", "state": "moved", "src": str(src), "dest": str(dest),
                                    "task": item["task"], "batch": plan["batch"]})
        count += 1
    return count


def patch_concurrency(job_dir: Path, n: int, backup_dir: Path, state_dir: Path) -> list[str]:
    """Set n_concurrent_trials to n in config.json and lock.json, both or neither.

    Harbor locks the value in both files (docs/harbor.md §5). Both new texts are built and
    validated before either file is replaced, and the originals are copied to the archive
    first. Each file is replaced atomically; should the process die between the two
    replacements, the next mop-up finds one file still at the old value and patches it.
    """
    from harbor.models.job.config import JobConfig
    from pydantic import ValidationError

    texts = {}
    for name in REWRITTEN:
        path = job_dir / name
        if not regular_or_absent(path, "the job's settings"):
            continue
        try:
            data = json.loads(path.read_bytes().decode())
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            if data.get("n_concurrent_trials") == n:
                continue
            data["n_concurrent_trials"] = n
            if name == "config.json":
                JobConfig.model_validate(data)
        except (ValueError, ValidationError) as exc:
            raise click.ClickException(
                f"{shown(path)} became unreadable since the plan ({type(exc).__name__}): nothing was patched. "
                f"{AGAIN.capitalize()} (it plans afresh)")
        texts[name] = json.dumps(data, indent=4)
    if not texts:
        return []
    for name in texts:
        # A rerun after a kill finds the first backup: that one holds the original, keep it.
        if not os.path.lexists(backup_dir / name):
            copy_atomically(job_dir / name, backup_dir / name)
    for name, text in texts.items():
        replace_file(job_dir / name, text)
    append_manifest(state_dir, {"event": "concurrency", "job_dir": str(job_dir), "to": n, "files": list(texts),
                                "backups": str(backup_dir)})
    return list(texts)


# --- live writers ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Writer:
    pid: int
    command: str
    path: str  # the trial dir (or job dir) it is using


def _inside(path: str, roots: list[str]) -> str | None:
    return next((r for r in roots if path == r or path.startswith(r + os.sep)), None)


def _names_job(argv: list[str], cwd: str, job: str) -> bool:
    """Whether a harbor command line names the job dir: a path in it, or --jobs-dir/-o and --job-name."""
    jobs_dir, job_name = "jobs", None  # harbor's defaults
    for i, arg in enumerate(argv):
        flag, _, inline = arg.partition("=")
        value = inline or (argv[i + 1] if i + 1 < len(argv) else "")
        if flag in ("--jobs-dir", "-o"):
            jobs_dir = value
        elif flag == "--job-name":
            job_name = value
        if arg and _inside(os.path.realpath(os.path.join(cwd, arg)), [job]):
            return True
    return job_name == os.path.basename(job) and os.path.realpath(os.path.join(cwd, jobs_dir)) == os.path.dirname(job)


def _process_view(proc_dir: Path) -> tuple[str, list[str], list[str]]:
    """(cwd, argv, paths of open fds) of one process; OSError when it is gone or not ours."""
    cwd = os.readlink(proc_dir / "cwd")
    argv = [a.decode(errors="replace") for a in (proc_dir / "cmdline").read_bytes().split(b"\0") if a]
    fds = []
    for fd in os.listdir(proc_dir / "fd"):
        try:
            fds.append(os.readlink(proc_dir / "fd" / fd))
        except OSError:
            continue  # closed while we looked
    return cwd, argv, fds


def live_writers(trial_dirs: list[Path], job_dir: Path) -> list[Writer] | None:
    """Other processes using a trial dir about to move, or a harbor working on the job; None without /proc.

    A process counts when its cwd or an open file is inside one of trial_dirs. A harbor
    process (argv[0..2] named harbor) counts for the whole job dir: by cwd, an open file
    (its job.log), or a command line naming the job. Processes we may not inspect (another
    user's) are skipped: they cannot write our trial dirs either.
    """
    if not (PROC / "self" / "fd").is_dir():
        return None
    roots = [os.path.realpath(d) for d in trial_dirs]
    job = os.path.realpath(job_dir)
    me, found = os.getpid(), []
    for entry in sorted(os.listdir(PROC), key=lambda n: (len(n), n)):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            cwd, argv, fds = _process_view(PROC / entry)
            command = (PROC / entry / "comm").read_text().strip()
        except OSError:
            continue
        hit = next((h for h in (_inside(p, roots) for p in [cwd, *fds]) if h), None)
        harbor = any(os.path.basename(a) == "harbor" for a in argv[:3])
        if not hit and harbor and (_inside(cwd, [job]) or any(_inside(p, [job]) for p in fds)
                                   or _names_job(argv, cwd, job)):
            hit = job
        if hit:
            found.append(Writer(int(entry), command or "?", hit))
    return found


def refuse_live_writers(trial_dirs: list[Path], job_dir: Path) -> None:
    """Stop before anything moves while another process still uses what would move."""
    writers = live_writers(trial_dirs, job_dir)
    if writers is None:
        click.echo(f"note: cannot check that no process is still writing {shown(job_dir)} ({PROC} is not available "
                   "on this system); make sure no harbor of this run is running", err=True)
        return
    if writers:
        w = writers[0]
        more = f" ({len(writers) - 1} more process(es) too)" if len(writers) > 1 else ""
        raise click.ClickException(
            f"nothing moved: pid {w.pid} ({w.command}) is still using {shown(w.path)}{more}. "
            "Wait for it to finish (or stop it), then run make mopup again")


# --- the archive, from the manifest and the disk --------------------------------------------------


@dataclass
class Archived:
    batch: str
    job: str
    trial: str
    dest: Path          # where it is in the archive
    src: Path | None    # where it came from (None: no record says)
    task: str | None
    in_manifest: bool   # a "moved" record exists

    def status(self) -> str:
        if self.dest.is_dir():
            return "archived"
        if self.src is not None and self.src.is_dir():
            return "restored"
        return "MISSING"


def _plan_sources(state_dir: Path, batch: str) -> dict[str, dict]:
    """The archive items of a batch's saved plan (state/<run>/mopup-plans/<batch>.json), by trial dir name."""
    path = state_dir / "mopup-plans" / f"{batch}.json"
    try:
        if special_file(path) or not path.is_file():
            return {}
        items = json.loads(path.read_bytes().decode()).get("archive") or []
        return {Path(i["src"]).name: i for i in items if isinstance(i, dict) and isinstance(i.get("src"), str)}
    except (OSError, ValueError, AttributeError):
        return {}


def archive_inventory(state_dir: Path) -> list[Archived]:
    """Every trial dir mop-up archived: the manifest's "moved" records, and every dir on disk.

    A dir on disk that no "moved" record names was moved by a mop-up killed before its
    record: where it came from is read from its "moving" record, else from its batch's plan.
    """
    records = read_manifest(state_dir)
    entries: dict[str, Archived] = {}
    moving: dict[str, dict] = {}
    for r in records:
        if r.get("event") != "archive" or not isinstance(r.get("dest"), str) or not isinstance(r.get("src"), str):
            continue
        key = os.path.abspath(r["dest"])
        if r.get("state") == "moving":
            moving[key] = r
        elif r.get("state") == "moved":
            dest = Path(r["dest"])
            entries[key] = Archived(str(r.get("batch") or dest.parent.parent.name), dest.parent.name, dest.name,
                                    dest, Path(r["src"]), r.get("task"), True)
    # A dir moved by a mop-up killed before its "moved" record, and restored since.
    restored = {os.path.abspath(r["src"]) for r in records
                if r.get("event") == "restore" and isinstance(r.get("src"), str)}
    for key, r in moving.items():
        if key not in entries and key in restored:
            dest = Path(r["dest"])
            entries[key] = Archived(str(r.get("batch") or dest.parent.parent.name), dest.parent.name, dest.name,
                                    dest, Path(r["src"]), r.get("task"), False)
    root = state_dir / "archive"
    for batch in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        for job in sorted(p for p in batch.iterdir() if p.is_dir() and not p.name.endswith(JOB_FILES_SUFFIX)):
            for trial in sorted(p for p in job.iterdir() if p.is_dir()):
                key = os.path.abspath(trial)
                if key in entries:
                    continue
                record = moving.get(key) or _plan_sources(state_dir, batch.name).get(trial.name) or {}
                src = Path(record["src"]) if isinstance(record.get("src"), str) else None
                entries[key] = Archived(batch.name, job.name, trial.name, trial, src, record.get("task"), False)
    return sorted(entries.values(), key=lambda a: (a.batch, a.job, a.trial))


def describe_archived(a: Archived) -> str:
    line = f"{a.status():<9} {a.batch}  {a.job}/{a.trial}  task={a.task or '?'}  from {a.src or '?'}"
    if not a.in_manifest:
        line += f"  ({NOT_IN_MANIFEST})"
    elif a.status() == "MISSING":
        line += "  (in the manifest, but neither in the archive nor back in its job)"
    return line


def restore_one(state_dir: Path, a: Archived) -> None:
    """Move one archived dir back to where it came from, recorded like the move out."""
    assert a.src is not None
    ensure_free(a.src)
    append_manifest(state_dir, {"event": "restore", "state": "moving", "src": str(a.dest), "dest": str(a.src)})
    move_dir(a.dest, a.src)
    kill_point("after-restore-rename")
    append_manifest(state_dir, {"event": "restore", "state": "moved", "src": str(a.dest), "dest": str(a.src)})
