"""tools/hub/stage.py, the copy of the checkout a remote job mounts: regular files only, reached
through real directories, or the whole copy is refused in one line and nothing is written.

make test also runs the same refusal through every remote verb against the fake Jobs API
(tests/remote.bats); this is the fast tier's test of it, on a small git checkout of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env=dict(os.environ, GIT_CONFIG_NOSYSTEM="1", HOME=str(root.parent)))


def checkout(tmp_path: Path) -> Path:
    """A git checkout: a.md, notes/b.md, notes/c.md, sub/d.py and a link git tracks (never staged)."""
    root = tmp_path / "repo"
    for path in ("a.md", "notes/b.md", "notes/c.md", "sub/d.py"):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(f"{path}\n")
    (root / "sub/d.py").chmod(0o755)
    (root / "tracked-link").symlink_to("a.md")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    return root


def stage(root: Path, into: Path) -> subprocess.CompletedProcess:
    into.mkdir()
    return subprocess.run([sys.executable, "-m", "tools.hub.stage", "checkout", "--repo", str(root), "--into", str(into),
                           "--verb", "make bench WHERE=hf"], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, HF_TOKEN="", HF_HOME=str(root.parent / "hf-home")))


def test_a_clean_checkout_is_copied_file_for_file_without_the_links_git_tracks(tmp_path):
    root = checkout(tmp_path)
    proc = stage(root, tmp_path / "copy")
    assert (proc.returncode, proc.stderr) == (0, "")
    copied = sorted(str(p.relative_to(tmp_path / "copy")) for p in (tmp_path / "copy").rglob("*") if p.is_file())
    assert copied == ["a.md", "notes/b.md", "notes/c.md", "sub/d.py"]
    assert (tmp_path / "copy/notes/b.md").read_text() == "notes/b.md\n"
    assert os.access(tmp_path / "copy/sub/d.py", os.X_OK) and not os.access(tmp_path / "copy/a.md", os.X_OK)


def test_a_tracked_file_now_a_link_a_fifo_or_under_a_linked_directory_refuses_the_whole_copy(tmp_path):
    root = checkout(tmp_path)
    secrets = tmp_path / "secrets"
    (secrets / "sub").mkdir(parents=True)
    (secrets / "token").write_text("not to be read\n")
    (root / "notes/b.md").unlink()
    (root / "notes/b.md").symlink_to(secrets / "token")
    (root / "notes/c.md").unlink()
    os.mkfifo(root / "notes/c.md")  # read, it would block for ever
    (root / "sub/d.py").unlink()
    (root / "sub").rmdir()
    (root / "sub").symlink_to(secrets / "sub")
    proc = stage(root, tmp_path / "copy")
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "Error: make bench WHERE=hf refused: a remote job gets regular files only, never where a link leads: "
        f"notes/b.md is a symbolic link (to {secrets / 'token'}); notes/c.md is a FIFO; sub/d.py is under sub, which is "
        f"a symbolic link (to {secrets / 'sub'}). Nothing was uploaded. Put each file itself back (git checkout -- PATH "
        "restores the committed one), then run make bench WHERE=hf again."]
    assert list((tmp_path / "copy").iterdir()) == []
