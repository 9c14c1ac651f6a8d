"""watchdog_bundle: what the run's watchdog job runs on HF, packed at make serve as one line.

The scheduled job (tools/run/watchdog.py, `check`) runs only what this packs: tools/run/watchdog.py
and the three modules of the repository it imports (tools/safe_read.py, tools/fmt.py, and
tools/hf_client.py, through which every tool reaches HF), and
huggingface_hub's requirements with their hashes from env/requirements.lock (pip --require-hashes
input), as a gzipped tar whose bytes are the same for the same inputs: its sha256 names the code
(label code=…). The job never imports this module.

  python -m tools.run.watchdog_bundle     prints '<sha256> <base64>' (scripts/lib-watchdog.sh)
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import re
import tarfile
from pathlib import Path

import click

# What the bundle packs: the code the check runs, and its requirements (requirements.txt).
BUNDLE_FILES = ("tools/__init__.py", "tools/fmt.py", "tools/hf_client.py", "tools/safe_read.py",
                "tools/run/__init__.py", "tools/run/watchdog.py")
REPO_ROOT = Path(__file__).resolve().parents[2]
# The platform the scheduled job runs on (the image python:3.12, as env/requirements.lock is
# resolved for): the markers of huggingface_hub's requirements are read for it.
JOB_PLATFORM = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
                "os_name": "posix", "python_version": "3.12", "python_full_version": "3.12.0",
                "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}


def lock_entries(lock_text: str) -> dict[str, str]:
    """env/requirements.lock's entries by normalised name: `name==version \\` and its hash lines."""
    entries: dict[str, str] = {}
    name, lines = None, []
    for line in lock_text.splitlines():
        if m := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", line):
            if name:
                entries[name] = "\n".join(lines)
            name, lines = normalise(m.group(1)), [line]
        elif name and line.lstrip().startswith("--hash="):
            lines.append(line)
    if name:
        entries[name] = "\n".join(lines)
    return entries


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(root: str) -> list[str]:
    """ROOT and every package it needs on the job's platform, by the installed metadata."""
    import importlib.metadata as md  # noqa: PLC0415

    from packaging.requirements import Requirement  # noqa: PLC0415

    seen: set[str] = set()
    todo = [root]
    while todo:
        name = normalise(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        for text in md.requires(name) or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate(JOB_PLATFORM):
                todo.append(req.name)
    return sorted(seen)


def requirements(lock_text: str, root: str = "huggingface_hub") -> str:
    """The lock's entries (hashes and all) of ROOT and what it needs: pip --require-hashes input."""
    entries = lock_entries(lock_text)
    names = closure(root)
    missing = [n for n in names if n not in entries]
    if missing:
        raise click.ClickException(f"env/requirements.lock has no entry for {' '.join(missing)}, which {root} "
                                   "needs: run make lock")
    return "\n".join(entries[n] for n in names) + "\n"


def bundle(repo: Path) -> bytes:
    """A gzipped tar of BUNDLE_FILES and requirements.txt, the same bytes for the same inputs."""
    files = {name: (repo / name).read_bytes() for name in BUNDLE_FILES}
    files["requirements.txt"] = requirements((repo / "env" / "requirements.lock").read_text()).encode()
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w",
                                                                             format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(files[name]), 0o644, 0
            tar.addfile(info, io.BytesIO(files[name]))
    return raw.getvalue()


@click.command()
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=REPO_ROOT)
def cli(repo):
    """Print '<sha256> <base64>' of what the scheduled job runs."""
    data = bundle(repo)
    click.echo(f"{hashlib.sha256(data).hexdigest()} {base64.b64encode(data).decode()}")


if __name__ == "__main__":
    cli()
