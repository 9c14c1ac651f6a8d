"""The bundled example run (examples/jobs/example-terminus2-tb21*): reproducible, and its tally pinned.

The golden Markdown under tests/golden/tally/ is the per-task breakdown `make tally` writes
for it. A failing diff is read, not regenerated blindly; TALLY_REGEN=1 rewrites the goldens.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from tools import tally as tally_cli
from tools.results import tally_core
from tools.results import tally_jobs
from tools.results import tally_policy

REPO = Path(__file__).resolve().parent.parent
JOBS = REPO / "examples" / "jobs"
JOB = "example-terminus2-tb21"
GOLDEN = REPO / "tests" / "golden" / "tally"
REGEN = os.environ.get("TALLY_REGEN") == "1"

EXPECTED = {
    "build-pov-ray": "failed",                 # AgentTimeoutError, reward 0
    "circuit-fibsqrt": "passed",               # SandboxError, then passed in the retry job
    "cobol-modernization": "passed",           # AgentTimeoutError, reward 1
    "feal-linear-cryptanalysis": "errored",    # ReadTimeout twice (job and retry job)
    "fix-git": "passed",
    "git-multibranch": "unclassified",         # VerifierTimeoutError: no rule on purpose
    "password-recovery": "failed",             # NonZeroAgentExitCodeError naming the context window
    "path-tracing": "failed",                  # ContextWindowExceededError with reward 0
    "qemu-startup": "errored",                 # NonZeroAgentExitCodeError: expired Debian mirror
    "query-optimize": "errored",               # CancelledError
    "regex-log": "failed",
    "schemelike-metacircular-eval": "unfinished",  # crashed, no result.json
    "sqlite-with-gcov": "passed",              # truncated result.json, re-run passed
}


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes()
            for name in (JOB, f"{JOB}-retry-1") for p in sorted((root / name).rglob("*")) if p.is_file()}


def test_example_is_what_make_example_writes(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("make_example", REPO / "examples" / "make_example.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.chdir(tmp_path)  # main() changes directory; monkeypatch restores it
    mod.main(tmp_path / "out")
    fresh, committed = _files(tmp_path / "out" / "jobs"), _files(JOBS)
    assert sorted(fresh) == sorted(committed)
    assert [k for k in fresh if fresh[k] != committed[k]] == []
    assert not (tmp_path / "out" / "dataset").exists()


def test_example_is_small():
    total = sum(len(b) for b in _files(JOBS).values())
    assert total < 200_000, total


@pytest.fixture(scope="module")
def policy():
    return tally_policy.load_policy()


def test_example_default_accounting(policy):
    report = tally_core.tally(tally_jobs.run_job_dirs(JOBS, JOB), policy, run="example-terminus2")
    assert {e["task"]: e["outcome"] for e in report["per_task"]} == EXPECTED
    assert [report[k] for k in ("tasks", "passed", "failed", "errored", "unclassified", "unfinished", "scored")] == \
        [13, 4, 4, 3, 1, 1, 8]
    assert report["pass_rate"] == 0.5
    assert [Path(d).name for d in report["job_dirs"]] == [JOB, f"{JOB}-retry-1"]
    assert [t["task"] for t in tally_core.retry_targets(report)] == [
        "feal-linear-cryptanalysis", "qemu-startup", "query-optimize", "schemelike-metacircular-eval"]


def test_example_timeouts_unscored(policy):
    report = tally_core.tally(tally_jobs.run_job_dirs(JOBS, JOB), policy, timeouts_unscored=True)
    assert [report[k] for k in ("passed", "failed", "errored", "unclassified", "unfinished", "scored")] == \
        [3, 3, 5, 1, 1, 6]


@pytest.mark.parametrize("unscored,golden", [(False, "example-terminus2.md"), (True, "example-terminus2-unscored.md")])
def test_example_markdown_golden(policy, unscored, golden):
    report = tally_core.tally(tally_jobs.run_job_dirs(JOBS, JOB), policy, timeouts_unscored=unscored, run="example-terminus2")
    text = tally_cli.render_markdown(report)
    path = GOLDEN / golden
    if REGEN:
        path.write_text(text)
    assert text == path.read_text()
