"""tools/cost.py's pure parts, and the huggingface_hub / harbor facts it relies on, pinned."""

from __future__ import annotations

import inspect
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tools import cost

REPO = Path(__file__).resolve().parent.parent


def test_sandboxes_are_found_by_the_label_huggingface_hub_sets():
    """harbor 0.25.0's hf-sandbox environment uses huggingface_hub's Sandbox.create, which labels
    every sandbox job hf-sandbox=1 (dedicated mode) and gives it no run or task label."""
    from huggingface_hub import _sandbox
    from harbor.environments import hf_sandbox

    assert (_sandbox.SANDBOX_LABEL, _sandbox.MODE_LABEL, _sandbox.MODE_DEDICATED) == ("hf-sandbox", "hf-sandbox-mode", "dedicated")
    assert cost.SANDBOX_LABEL == f"{_sandbox.SANDBOX_LABEL}=1"
    create = inspect.getsource(_sandbox.Sandbox.create)
    assert 'SANDBOX_LABEL: "1"' in create
    start = inspect.getsource(hf_sandbox.HFSandboxEnvironment.start)
    assert "Sandbox.create" in start and "labels=" not in start  # so: no run label to find them by


def test_job_durations_field_names():
    from huggingface_hub._jobs_api import JobDurations, JobInfo

    d = JobDurations(schedulingSecs=5, runningSecs=60, totalSecs=65)
    assert (d.scheduling_secs, d.running_secs, d.total_secs) == (5, 60, 65)
    info = JobInfo(id="j", owner={"id": "u", "name": "alice", "type": "user"}, status={"stage": "RUNNING", "exposeUrls": ["https://j--1.hf.jobs"]},
                   durations={"runningSecs": 60})
    assert info.durations.running_secs == 60 and info.status.expose_urls == ["https://j--1.hf.jobs"]


def test_parse_hardware_reads_the_cli_rows():
    per_hour, gpu = cost.parse_hardware([
        {"name": "h200", "accelerator": "1x H200 (141 GB)", "cost/hour": "$5.00"},
        {"name": "cpu-basic", "accelerator": "", "cost/hour": "free"},
        {"name": "odd", "cost/hour": "n/a"},
    ])
    assert per_hour == {"h200": 5.0, "cpu-basic": 0.0} and gpu == {"h200": True, "cpu-basic": False}
    with pytest.raises(cost.HfFailed):
        cost.parse_hardware({"not": "a list"})


def test_idle_time_is_the_server_interval_minus_the_trials():
    t = lambda h, m: datetime(2026, 1, 1, h, m, tzinfo=timezone.utc)  # noqa: E731
    busy = [(t(0, 10), t(0, 40)), (t(0, 30), t(1, 0)), (t(1, 30), t(1, 45)), (t(3, 0), t(4, 0))]
    assert cost.subtract((t(0, 5), t(2, 5)), busy) == 55 * 60
    assert cost.subtract((t(0, 5), t(0, 6)), []) == 60


def test_manifest_jobs_every_role_once_and_a_torn_line_skipped(tmp_path):
    m = tmp_path / "manifest.jsonl"
    lines = [
        {"event": "serve", "role": "server", "job_id": "s1", "namespace": "alice"},
        {"event": "bench", "role": "remote-bench", "job_id": "b1"},
        {"event": "bench", "role": "bench", "job_name": "local"},  # a local bench: no job
        {"event": "reproduce", "role": "supervisor", "job_id": "p1", "namespace": "alice"},
        {"event": "reproduce-relaunch", "role": "server", "job_id": "s2", "namespace": "alice"},
        {"event": "launch-cancelled", "role": "remote-mopup", "job_ids": ["m1"]},
        {"event": "server-stop", "role": "server", "job_id": "s1", "namespace": "alice"},
    ]
    m.write_text("\n".join(json.dumps(x) for x in lines) + '\n{"event": "serve", "job_id": "to')
    got = [(j.job_id, j.namespace, j.role, j.found) for j in cost.manifest_jobs(m)]
    assert got == [("s1", "alice", "server", "manifest (serve)"), ("b1", None, "remote-bench", "manifest (bench)"),
                   ("p1", "alice", "supervisor", "manifest (reproduce)"), ("s2", "alice", "server", "manifest (reproduce-relaunch)"),
                   ("m1", None, "remote-mopup", "manifest (launch-cancelled)")]


def test_idle_advice_names_the_fix():
    assert "Fix: SANDBOX_IDLE_TIMEOUT (unset: harbor's default, 10 minutes;" in "\n".join(cost.idle_advice(601917, "", "r"))
    assert cost.idle_shutdown(["x", "sbx-server: idle for 601917ms, shutting down"]) == 601917
    assert cost.idle_shutdown(["sbx-server: exec pid=1 exited 0"]) is None
