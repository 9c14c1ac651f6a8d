"""env/requirements.lock agrees with the top-level pins in env/requirements.txt.

`make lock` (scripts/lock.sh) writes the lock from the pins; `make setup` installs the lock
with hash checking. These tests fail when someone changes a pin and forgets `make lock`, or
hand-edits the lock: every `name==version` of requirements.txt is in the lock at exactly
that version, and every package the lock names is pinned with `==` and has a sha256 hash.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
REQUIREMENTS = REPO / "env" / "requirements.txt"
LOCK = REPO / "env" / "requirements.lock"

PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(?P<version>[^\s;]+)")
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}$")


def normalize(name: str) -> str:
    """A project name as PyPI compares names (PEP 503): case and -_. runs do not matter."""
    return re.sub(r"[-_.]+", "-", name).lower()


def logical_lines(path: Path) -> list[str]:
    """The requirement lines of a requirements file: comments dropped, continuations joined."""
    lines, current = [], ""
    for raw in path.read_text().splitlines():
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        if current.strip():
            lines.append(" ".join(current.split()))
        current = ""
    if current.strip():
        lines.append(" ".join(current.split()))
    return lines


def top_level_pins(path: Path = REQUIREMENTS) -> dict[str, str]:
    pins = {}
    for line in logical_lines(path):
        match = PIN.match(line)
        assert match, f"env/requirements.txt: {line!r} is not a name==version pin"
        pins[normalize(match["name"])] = match["version"]
    return pins


def lock_entries() -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) for every package the lock names."""
    entries = {}
    for line in logical_lines(LOCK):
        words = line.split()
        match = PIN.match(words[0])
        assert match, f"env/requirements.lock: {words[0]!r} is not pinned with == (run make lock)"
        name = normalize(match["name"])
        assert name not in entries, f"env/requirements.lock names {name} twice"
        entries[name] = (match["version"], [w for w in words[1:] if w.startswith("--hash")])
    return entries


def test_every_top_level_pin_is_in_the_lock_at_its_version():
    pins, lock = top_level_pins(), lock_entries()
    assert pins, "env/requirements.txt pins nothing"
    wrong = {
        name: f"{version} in requirements.txt, {lock[name][0] if name in lock else 'missing'} in the lock"
        for name, version in pins.items()
        if name not in lock or lock[name][0] != version
    }
    assert not wrong, f"env/requirements.lock disagrees with env/requirements.txt, run make lock: {wrong}"


def test_every_locked_package_has_a_hash():
    lock = lock_entries()
    assert len(lock) > len(top_level_pins()), "the lock holds no transitive package"
    missing = sorted(name for name, (_, hashes) in lock.items() if not hashes)
    assert not missing, f"env/requirements.lock names packages without a hash (run make lock): {missing}"
    bad = sorted(name for name, (_, hashes) in lock.items() if not all(HASH.match(h) for h in hashes))
    assert not bad, f"env/requirements.lock has malformed hashes for: {bad}"


def test_the_lock_says_what_it_was_resolved_for():
    header = "".join(LOCK.read_text().splitlines(keepends=True)[:10])
    assert "--python-version 3.12" in header and "--python-platform x86_64-manylinux_2_28" in header
    assert "make lock" in header


@pytest.mark.parametrize("text, wanted", [
    ("harbor[hf-sandbox]==0.25.0\n", {"harbor": "0.25.0"}),
    ("# c\nHuggingFace_Hub==2.4.0  # the hf CLI\n", {"huggingface-hub": "2.4.0"}),
])
def test_pins_are_read_as_pip_reads_them(tmp_path, text, wanted):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(text)
    assert top_level_pins(requirements) == wanted


def locked_versions() -> dict[str, str]:
    return {normalize(m["name"]): m["version"] for m in (PIN.match(line) for line in logical_lines(LOCK)) if m}


@pytest.mark.e2e
def test_make_setup_on_a_fresh_copy_installs_exactly_the_locked_versions(tmp_path):
    """A fresh clone's `make setup` (scripts/setup.sh on a copy of the tracked files, a new .venv):
    hash-checked, from this machine's registries, and nothing but the lock in the venv."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    clone = tmp_path / "clone"
    subprocess.run(["tar", "--null", "-T", "-", "-cf", str(tmp_path / "t.tar")], cwd=REPO, input=tracked, check=True)
    clone.mkdir()
    subprocess.run(["tar", "-xf", str(tmp_path / "t.tar"), "-C", str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("DRY_RUN", "CLI_SETTINGS", "INSTALLER")}
    proc = subprocess.run(["bash", str(clone / "scripts/setup.sh")], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert "hash-checked" in proc.stderr
    listed = subprocess.run([str(clone / ".venv/bin/python"), "-m", "pip", "list", "--format", "json",
                             "--disable-pip-version-check"], capture_output=True, text=True, check=True).stdout
    installed = {normalize(p["name"]): p["version"] for p in json.loads(listed)}
    installed.pop("pip", None)  # the venv's own installer, not a requirement
    assert installed == locked_versions()
    # tools/ is importable by name from the fresh .venv, whatever the working directory, and it
    # is the clone's own (tools.pth names the clone); the packages are compiled to bytecode.
    where = subprocess.run([str(clone / ".venv/bin/python"), "-c", "import tools.tally; print(tools.tally.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()
    assert where == str(clone / "tools" / "tally.py")
    site = Path(subprocess.run([str(clone / ".venv/bin/python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    assert (site / "tools.pth").read_text() == f"{clone}\n"
    assert list((site / "harbor" / "cli").glob("__pycache__/jobs.cpython-*.pyc"))
