#!/usr/bin/env python3
"""stage: the copy of this checkout a remote job mounts at /repo, with nothing in it that must stay here.

    python -m tools.hub.stage checkout --repo DIR --into EMPTY_DIR --verb 'make bench WHERE=hf' [--also PATH]...

`make bench`, `make mopup` and `make reproduce` with WHERE=hf upload a copy of this checkout
(`hf jobs run -v COPY:/repo` syncs it to a bucket). The copy holds git's tracked files as they
are in the working tree, and the run's own files git does not hold yet (--also: its run file,
verdicts, server profile). Before anything is written:

- every one must be a regular file, reached through real directories: a path git tracks as a
  file that is now a symbolic link (to ~/.cache/huggingface/token, say), a FIFO, a device or a
  directory, or that sits under a directory that is a link, is refused. Links git itself tracks
  (this repository's test stubs) are left out: a job gets files, never where a link leads.
- every byte is scanned for credentials (tools/hub/credentials.py, as make submission and make
  publish do): this machine's own tokens by value and the shapes of common keys.

Either finding refuses the whole copy in one line naming each file (and line), and nothing is
written into EMPTY_DIR; the caller uploads nothing. Exit 0 when the copy is complete, 1 when
refused.
"""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import click

from tools.hub import credentials
from tools import safe_read

GIT_FILE_MODES = ("100644", "100755")  # what git tracks as a file; 120000 is a link, 160000 a submodule
SHOWN = 5  # problems named in the one line; the rest are counted
STAGE_CAP = 1 << 30  # bytes the copy may hold in all: it is read whole, then scanned, before any is written


class NotAFile(Exception):
    """A staged path that is not a regular file reached through real directories; the message says what it is."""


@dataclass
class Stage:
    files: dict[str, tuple[bytes, int]] = field(default_factory=dict)  # path: (bytes, mode)
    not_files: list[str] = field(default_factory=list)
    findings: list[credentials.Finding] = field(default_factory=list)
    over_cap: bool = False


def tracked_files(repo: str) -> list[str]:
    """The paths git tracks as files (not links, not submodules), as git lists them."""
    out = subprocess.run(["git", "-C", repo, "ls-files", "-s", "-z"], capture_output=True, check=True).stdout
    paths = []
    for entry in out.split(b"\0"):
        if entry:
            info, _, path = entry.partition(b"\t")
            if info.split(b" ")[0].decode() in GIT_FILE_MODES:
                paths.append(os.fsdecode(path))
    return paths


def what_is(name: str, dir_fd: int) -> str:
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        return f"a symbolic link (to {safe_read.printable(os.readlink(name, dir_fd=dir_fd))})"
    return safe_read.kind_of_file(st.st_mode)  # safe_read's own words for a kind of file


def read_file(root_fd: int, path: str) -> tuple[bytes, int]:
    """PATH's bytes and mode, opened under ROOT_FD one real directory at a time, never through a link."""
    *dirs, name = path.split("/")
    fd = os.dup(root_fd)
    try:
        for i, part in enumerate(dirs):
            try:
                next_fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                raise NotAFile("missing (git tracks it)") from None
            except OSError:
                raise NotAFile(f"under {'/'.join(dirs[:i + 1])}, which is {what_is(part, fd)}") from None
            os.close(fd)
            fd = next_fd
        try:
            kind = what_is(name, fd)
            file_fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
        except FileNotFoundError:
            raise NotAFile("missing (git tracks it)") from None
        except OSError:
            raise NotAFile(kind) from None
        try:
            st = os.fstat(file_fd)
            if not stat.S_ISREG(st.st_mode):  # checked on what was opened: nothing swapped in between
                raise NotAFile(safe_read.kind_of_file(st.st_mode))
            if st.st_size > credentials.SCAN_CAP:
                raise NotAFile(f"larger than {credentials.SCAN_CAP >> 20} MiB, which cannot be scanned for credentials")
            data = safe_read._read_fd(file_fd, st.st_size, credentials.SCAN_CAP)  # noqa: SLF001  (never allocates the cap)
        finally:
            os.close(file_fd)
    finally:
        os.close(fd)
    return data, 0o755 if st.st_mode & 0o111 else 0o644


def collect(repo: str, paths: list[str], secrets: dict[str, bytes]) -> Stage:
    """Every path read and scanned; nothing written."""
    stage, total = Stage(), 0
    root_fd = os.open(repo, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for path in dict.fromkeys(paths):
            try:
                data, mode = read_file(root_fd, path)
            except NotAFile as e:
                stage.not_files.append(f"{safe_read.printable(path)} is {e}")
                continue
            except OSError as e:
                stage.not_files.append(f"{safe_read.printable(path)} cannot be read ({e.strerror or e})")
                continue
            total += len(data)
            if total > STAGE_CAP:
                stage.over_cap = True
                break
            stage.findings += credentials.scan_bytes(safe_read.printable(path), data, secrets)
            stage.files[path] = (data, mode)
    finally:
        os.close(root_fd)
    return stage


def listed(items: list[str]) -> str:
    return "; ".join(items[:SHOWN]) + (f"; and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def refusal(stage: Stage, verb: str) -> str | None:
    """The one line that refuses STAGE, or None when it may be written and uploaded."""
    if stage.over_cap:
        return (f"{verb} refused: the checkout's files come to more than {STAGE_CAP >> 30} GiB, more than the copy a "
                "remote job gets is made for (tools/hub/stage.py). Nothing was uploaded.")
    if stage.not_files:
        return (f"{verb} refused: a remote job gets regular files only, never where a link leads: "
                f"{listed(stage.not_files)}. Nothing was uploaded. Put each file itself back "
                f"(git checkout -- PATH restores the committed one), then run {verb} again.")
    if stage.findings:
        return credentials.refusal(stage.findings, verb, fix="Redact each one (a key belongs in HF_TOKEN or `hf auth login`, "
                                                    "never in a file of the checkout)")
    return None


def write(stage: Stage, into: Path) -> None:
    made: set[Path] = set()  # each directory made once, not once per file in it (hundreds of mkdir calls)
    for path, (data, mode) in stage.files.items():
        target = into / path
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        with open(target, "xb") as f:
            f.write(data)
        target.chmod(mode)


@click.group(help=__doc__.split("\n\n")[0])
def cli() -> None:
    pass


@cli.command("checkout")
@click.option("--repo", required=True, type=click.Path(file_okay=False, exists=True), help="the checkout")
@click.option("--into", required=True, type=click.Path(file_okay=False, exists=True), help="an empty directory")
@click.option("--verb", required=True, help="what the user ran, for the message (make bench WHERE=hf)")
@click.option("--also", multiple=True, help="a path in the checkout git does not track, staged too")
def checkout_cmd(repo: str, into: str, verb: str, also: tuple[str, ...]) -> None:
    """Copy REPO's tracked files (and --also) into INTO, or refuse and write nothing."""
    if any(Path(into).iterdir()):
        raise click.ClickException(f"{into} is not empty: the copy goes into an empty directory")
    stage = collect(repo, tracked_files(repo) + list(also), credentials.machine_secrets())
    message = refusal(stage, verb)
    if message:
        raise click.ClickException(message)
    write(stage, Path(into))


if __name__ == "__main__":
    cli()
