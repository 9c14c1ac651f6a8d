"""The smoke test's task when a run names none (docs/settings.md §2, "The smoke test's task").

A run file that sets no SMOKE_TASK (and no one-task TASKS) smokes the task that another run file
of the same dataset chose on purpose: the first, in file-name order, of runs/*.env (the bundled
examples left out: they are never benched) whose DATASET_REPO is the run's, or whose registry
DATASET has the same org/name (its version aside), and that sets SMOKE_TASK. So a run written from
scratch for terminal-bench 2.1 smokes fix-git, as the shipped runs do, not whatever harbor's
--n-tasks 1 picks (which may be an hour-long task). A local DATASET_PATH, or a dataset no run file
names a smoke task for, prints nothing: harbor picks, and make print says how to set SMOKE_TASK.

Usage: python -m tools.run.smoke_task [--root DIR] RUN DATASET_REPO DATASET DATASET_PATH
prints "<task><TAB>runs/<other>.env", or nothing. Standard library only, as tools/settings.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tools import settings


def same_dataset(mine: dict[str, str], theirs: dict[str, str]) -> bool:
    if mine["DATASET_PATH"] or theirs["DATASET_PATH"]:
        return False
    if mine["DATASET_REPO"]:
        return not theirs["DATASET"] and theirs["DATASET_REPO"] == mine["DATASET_REPO"]
    name = mine["DATASET"].split("@", 1)[0]
    return bool(name) and theirs["DATASET"].split("@", 1)[0] == name


def choose(run: str, mine: dict[str, str]) -> tuple[str, str] | None:
    """(the task, the run file that chose it), or None when no run file of the dataset names one."""
    catalogue = settings.catalogue()
    for other in settings.list_runs():
        if other == run or other.startswith("example-") or not settings.NAME.fullmatch(other):
            continue
        try:
            theirs = settings.resolve(other, {}, catalogue)
        except settings.SettingsError:
            continue  # its own verbs say why
        if theirs["SMOKE_TASK"] and same_dataset(mine, theirs):
            return theirs["SMOKE_TASK"], f"runs/{other}.env"
    return None


def main(argv: list[str]) -> int:
    if argv[:1] == ["--root"] and len(argv) > 1:
        settings.REPO, argv = Path(argv[1]), argv[2:]
    if len(argv) != 4:
        print("usage: python -m tools.run.smoke_task [--root DIR] RUN DATASET_REPO DATASET DATASET_PATH", file=sys.stderr)
        return 2
    mine = dict(zip(("DATASET_REPO", "DATASET", "DATASET_PATH"), argv[1:]))
    found = choose(argv[0], mine)
    if found:
        print(f"{found[0]}\t{found[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
