"""One writer per run, end to end: two mop-ups of one run with the real harbor 0.25.0.

Before the run lock, two mop-ups started 0-3 s apart both resumed the same job ("re-ran 8 of 4
planned trials") or both wrote <job>-retry-1, and one started while the other's harbor was
mid-trial archived the live trial dir. Now the second refuses at once, names the first, and
changes nothing; the first finishes as if alone. The harness is tests/test_mopup.py's.
"""

from __future__ import annotations

import subprocess
import time

import pytest

from test_mopup import DEFAULT_PLAN, INFRA, SCORED, Tree, sha256, wasted_work
from test_mopup import report_line, server  # noqa: F401  (pytest fixtures)


def wait_for(predicate, what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.e2e
def test_a_second_mopup_refuses_while_the_first_is_mid_trial(tmp_path, server, report_line):
    plan = {**DEFAULT_PLAN, "t-readtimeout": ["ReadTimeout", "slow-pass"]}
    tree = Tree(tmp_path, plan, server)
    tree.bench()
    before_dirs = tree.trial_dirs()
    hashes = {t: sha256(t / "result.json") for t, r in tree.results().items() if r["task_name"] in SCORED}

    release = tmp_path / "release-the-slow-trial"
    first = subprocess.Popen([str(tree.root / "scripts" / "mopup.sh")], cwd=tree.root,
                             env=tree.env("mopup", SCRIPTED_ENV_RELEASE=str(release)),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # The first mop-up's harbor has started the slow trial, which runs until released: it is
        # writing the job while the second starts, however slow the machine.
        wait_for(lambda: any(r["behaviour"] == "slow-pass" for r in tree.executed("mopup")),
                 "the first mop-up's slow trial")
        second = tree.mopup()
        # The first is still running: the refusal came at once, not after waiting for it.
        assert first.poll() is None
    finally:
        release.touch()
        out_first, _ = first.communicate(timeout=300)

    assert second.returncode == 1, second.stdout + second.stderr
    assert f"run 'mopup-test' is busy: make mopup (pid {first.pid}) has held it since" in second.stderr
    assert "Nothing was changed." in second.stderr
    # The second planned nothing and moved nothing: it stopped before reading the job.
    assert "archive" not in second.stdout + second.stderr
    assert "plan" not in second.stdout + second.stderr
    assert first.returncode == 0, out_first
    assert "re-ran 4 of 4 planned trials" in out_first

    executed = tree.executed("mopup")
    assert sorted(r["task"] for r in executed) == sorted(INFRA)
    assert wasted_work(executed, SCORED, report_line) == 0
    # One job, resumed once: no retry job, and every scored result.json untouched.
    assert [p.name for p in tree.job_dirs()] == ["mopup-e2e"]
    for path, digest in hashes.items():
        assert sha256(path / "result.json") == digest
    assert {str(p) for p in before_dirs - tree.trial_dirs()} == tree.archived()

    # Once the first has finished, the run is free, and there is nothing left to do.
    again = tree.mopup()
    assert again.returncode == 0, again.stdout + again.stderr
    assert "re-ran 0 of 0 planned trials" in again.stdout + again.stderr
