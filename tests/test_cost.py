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


# --- prices, durations and times from a cache or an hf answer are data with limits ----------------

HARDWARE = [{"name": "h200", "accelerator": "H200", "cost/hour": "$5.00"},
            {"name": "cpu-basic", "accelerator": "", "cost/hour": "free"}]


class Hub:
    """hf jobs hardware --json as the live CLI answers it (or fails), for load_prices."""

    where = "https://huggingface.co"
    dry_run = False

    def __init__(self, up: bool = True):
        self.up, self.calls = up, 0

    def __call__(self, *args: str) -> str:
        self.calls += 1
        if not self.up:
            raise cost.HfFailed("hf jobs hardware --json: no answer within 60s")
        return json.dumps(HARDWARE)


def cache_file(tmp_path, prices, read_epoch=1000.0, **extra):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"read_at": "2026-12-01T10:00:00Z", "read_epoch": read_epoch, "endpoint": Hub.where,
                                "prices": prices, "gpu": {"h200": True, "cpu-basic": False}, **extra}))
    return path


@pytest.mark.parametrize("prices, read_epoch, why", [
    ({"h200": -5.0}, 1000.0, "prices that are not 0 to $10,000/h (or a free GPU): 'h200': -5.0"),
    ({"h200": float("nan")}, 1000.0, "prices that are not 0 to $10,000/h (or a free GPU): 'h200': nan"),
    ({"h200": 0}, 1000.0, "prices that are not 0 to $10,000/h (or a free GPU): 'h200': 0"),
    ({"h200": "5"}, 1000.0, "prices that are not 0 to $10,000/h (or a free GPU): 'h200': '5'"),
    ({"h200": 5.0}, 1e300, "read_epoch 1e+300 is not a past time"),
    ({"h200": 5.0}, "soon", "read_epoch 'soon' is not a past time"),
])
def test_a_hostile_price_cache_is_discarded_and_never_prices_a_run(tmp_path, prices, read_epoch, why):
    # Each let a $50 spend pass a $10 ceiling (a negative, NaN or zero price; a cache "read" in the
    # far future never goes stale), or ended the ceiling's check in a traceback.
    cache = cache_file(tmp_path, prices, read_epoch)
    hub = Hub()
    got = cost.load_prices(hub, cache, max_age=86400, now=2000.0)
    assert (got.source, got.per_hour["h200"], hub.calls) == ("hub", 5.0, 1)  # the Hub is asked instead
    cache = cache_file(tmp_path, prices, read_epoch)
    offline = cost.load_prices(Hub(up=False), cache, max_age=86400, now=2000.0)
    assert offline.source == "tsv" and offline.per_hour["h200"] > 0
    assert f"the price cache {cache} was discarded ({why})" in offline.label


def test_a_valid_cache_is_used_and_only_a_cpu_flavor_may_be_free(tmp_path):
    cache = cache_file(tmp_path, {"h200": 5.0, "cpu-basic": 0})
    hub = Hub()
    got = cost.load_prices(hub, cache, max_age=86400, now=2000.0)
    assert (got.source, got.per_hour, hub.calls) == ("cache", {"h200": 5.0, "cpu-basic": 0.0}, 0)
    assert cost.parse_hardware(HARDWARE + [{"name": "a100", "accelerator": "A100", "cost/hour": "free"},
                                           {"name": "b", "accelerator": "B", "cost/hour": "$-3"}])[0] == \
        {"h200": 5.0, "cpu-basic": 0.0}


def test_hostile_hf_answers_are_unpriced_with_a_reason_and_never_total_less_than_nothing(tmp_path):
    from tests.test_max_cost import job, recorded
    from tools import cost_ceiling as CC

    odd = [job("neg", "h200", "RUNNING", -2_000_000_000), job("huge", "h200", "RUNNING", 1e308),
           job("nan", "h200", "RUNNING", float("nan")), job("ok", "h200", "COMPLETED", 3600)]
    flavor_dict = {**job("dict", "h200", "RUNNING", 3600), "flavor": {"name": "h200"}}
    year_one = {**job("old", "h200", "RUNNING", None), "created_at": "0001-01-01T00:00:00Z",
                "started_at": "0001-01-01T00:00:00+14:00", "durations": {"scheduling_secs": "x"}}
    hf, scope = recorded(tmp_path, [*odd, flavor_dict, year_one])
    hf.calls["jobs inspect --json alice/null"] = [None]
    with (scope.state_dir / "manifest.jsonl").open("a") as manifest:
        manifest.write(json.dumps({"event": "serve", "role": "server", "job_id": "null", "namespace": "alice"}) + "\n")
    spend = CC.measure(hf, scope)
    assert spend.spent_usd == pytest.approx(5.0)  # "ok" alone: an hour of h200
    assert sorted(spend.unknown) == sorted([
        "alice/dict (server, flavor ?): no price for its flavor",
        "alice/huge (server, flavor h200): no running time from HF",
        "alice/nan (server, flavor h200): no running time from HF",
        "alice/neg (server, flavor h200): no running time from HF",
        "alice/old (server, flavor h200): no running time from HF",
        "hf could not be asked: alice/null (server, manifest (serve)): a job is None, not an object",
    ])
    assert cost.idle_shutdown(["sbx-server: idle for 1" + "0" * 400 + "ms, shutting down"]) is None
    assert cost.idle_shutdown(["sbx-server: idle for 900000ms, shutting down"]) == 900000


def test_the_ceiling_refuses_to_start_when_no_valid_price_is_left(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from tools import cost_ceiling as CC

    monkeypatch.setattr(cost, "TSV_PRICES", tmp_path / "prices.tsv")
    (tmp_path / "prices.tsv").write_text("h200\t-5\ncpu-upgrade\tnan\n")
    cache_file(tmp_path, {"h200": -1.0})
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the Hub does not answer
    state = tmp_path / "state"
    state.mkdir()
    scope = json.dumps({"run": "r", "state_dir": str(state), "jobs_dir": str(tmp_path / "jobs"), "job_name": "r",
                        "namespace": "alice", "prices_cache": str(tmp_path / "prices.json"), "call_timeout": 5})
    result = CliRunner().invoke(CC.cli, ["check", "--max-cost", "10", "--scope", scope])
    assert result.exit_code == 1, result.output
    assert "MAX_COST=10 cannot be enforced: no valid price is known (env/flavor-prices.tsv, an offline copy" in \
        result.output


def test_job_ids_are_one_type_a_plain_name():
    assert [cost.job_id_of(v) for v in (123, "123", "68b7f1a0c0ffee0000000001", "sb-1_x")] == \
        ["123", "123", "68b7f1a0c0ffee0000000001", "sb-1_x"]
    assert [cost.job_id_of(v) for v in (True, 1.5, -3, "", "../x", "a/b", "x\x1b[2J", "a" * 101, None, ["1"])] == \
        [None] * 10
