"""The governor's decisions (tools/run/governor.py): exact figures on hand-made trials, and the
trials it reads from job dirs written with harbor 0.25's own models (tests/fixtures/harbor_jobs.py).
The governor acting on a real sharded bench: tests/test_shards.py."""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests.fixtures.harbor_jobs import T0, TrialSpec, rewrite_result, trial_name, write_job
from tools.run import governor

S = governor.Settings(max_rate=0.3, window_s=600, min_trials=3, quiet_s=300)
NOW = datetime(2026, 9, 3, 12, 0, 0, tzinfo=timezone.utc).timestamp()


def done(kinds: str, at: float = NOW - 10) -> list[governor.Finished]:
    """One finished trial per letter, "i" an infra error, "s" settled, a second apart from `at` back."""
    return [governor.Finished(at=at - n, infra=k == "i", shard=None, trial=f"t{n}") for n, k in enumerate(kinds)]


def figures(d: governor.Decision) -> tuple:
    return d.action, d.shard, d.infra, d.finished, d.rate


# --------------------------------------------------------------------------- decide


def test_too_few_trials_decide_nothing():
    assert governor.decide(NOW, done("ii"), [1, 2, 3], [], None, S) is None
    assert figures(governor.decide(NOW, done("iii"), [1, 2, 3], [], None, S)) == ("stop", 3, 3, 3, 1.0)


def test_above_the_rate_the_newest_running_shard_is_stopped_with_its_figures():
    d = governor.decide(NOW, done("iisi"), [1, 3, 2], [], None, S)  # shard 2 was (re)started last
    assert figures(d) == ("stop", 2, 3, 4, 0.75)
    assert d.since == NOW - 600
    assert d.reason == ("sandbox infra errors 3 of 4 trials (75%) finished since 11:50:00 UTC, above MAX_INFRA_RATE 30%: "
                        "interrupting shard 2, the newest running")
    assert d.as_event(S) == {"event": "governor-stop", "shard": 2, "rate": 0.75, "infra": 3, "finished": 4,
                             "server_errors": 0, "since": "2026-09-03T11:50:00Z", "max_rate": 0.3, "window_s": 600, "min_trials": 3,
                             "quiet_s": 300, "reason": d.reason}


def test_model_server_errors_are_named_but_never_stop_a_shard():
    # Five InternalServerErrors of six trials: the server failing, not the sandboxes strained.
    server = [governor.Finished(at=NOW - 10 - n, infra=False, shard=None, trial=f"s{n}", server=True) for n in range(5)]
    assert governor.decide(NOW, server + done("s"), [1, 2, 3], [], None, S) is None
    # With sandbox errors above the rate, the stop says how many server errors it left out.
    # Two sandbox errors of eight trials (25%): at or below the rate, whatever the server did.
    assert governor.decide(NOW, server + done("iis"), [1, 2], [], None, S) is None
    d = governor.decide(NOW, server[:1] + done("iis"), [1, 2], [], None, S)
    assert figures(d) == ("stop", 2, 2, 4, 0.5) and d.server == 1
    assert d.reason == ("sandbox infra errors 2 of 4 trials (50%) finished since 11:50:00 UTC (and 1 model-server "
                        "error, not counted: the server's problem, which a stopped shard does not ease), above "
                        "MAX_INFRA_RATE 30%: interrupting shard 2, the newest running")
    assert d.as_event(S)["server_errors"] == 1


def test_exactly_the_rate_is_not_above_it():
    assert governor.decide(NOW, done("iii" + "s" * 7), [1, 2], [], None, S) is None  # 3 of 10: 30%
    assert figures(governor.decide(NOW, done("iiii" + "s" * 6), [1, 2], [], None, S)) == ("stop", 2, 4, 10, 0.4)


def test_the_last_running_shard_is_never_stopped_only_held_with_its_figures():
    d = governor.decide(NOW, done("iis"), [1], [2], NOW - 1000, S)
    assert figures(d) == ("hold", 1, 2, 3, 2 / 3)
    assert d.reason == ("sandbox infra errors 2 of 3 trials (67%) finished since 11:50:00 UTC, above MAX_INFRA_RATE 30%: "
                        "shard 1 is the only one running and is left running (one shard is the least load)")
    assert d.as_event(S)["event"] == "governor-hold" and d.as_event(S)["rate"] == 0.6667


def test_trials_before_the_last_decision_are_not_counted_so_a_stop_does_not_cascade():
    old = done("iiii", at=NOW - 100)     # the burst that made the stop at NOW - 50
    since = done("ssis", at=NOW - 10)    # under the lighter load: 1 of 4
    assert figures(governor.decide(NOW, old + since, [1, 2], [3], None, S)) == ("stop", 2, 5, 8, 5 / 8)  # without it
    assert governor.decide(NOW, old + since, [1, 2], [3], NOW - 50, S) is None
    # Right after the stop, too few new trials to judge, however bad they are.
    assert governor.decide(NOW, old + done("ii"), [1, 2], [3], NOW - 50, S) is None


def test_trials_outside_the_window_or_after_now_are_not_counted():
    stale = done("iii", at=NOW - 600)    # at NOW - 600 and before: the window is (NOW - 600, NOW]
    future = done("iii", at=NOW + 100)
    assert governor.decide(NOW, stale + future + done("ss"), [1, 2], [], None, S) is None
    assert figures(governor.decide(NOW, done("iii", at=NOW - 597) + done("ss"), [1, 2], [], None, S)) == (
        "stop", 2, 3, 5, 0.6)


def test_a_stopped_shard_starts_again_after_the_quiet_period_at_or_below_the_rate():
    calm = done("sssi", at=NOW - 5)      # 25%
    assert governor.decide(NOW, calm, [1], [3, 2], NOW - 299, S) is None  # 299 s < GOVERNOR_QUIET 300 s
    d = governor.decide(NOW, calm, [1], [3, 2], NOW - 300, S)
    assert figures(d) == ("start", 2, 1, 4, 0.25)
    assert d.reason == ("sandbox infra errors 1 of 4 trials (25%) finished since 11:55:00 UTC, at or below MAX_INFRA_RATE "
                        "30%, and 5 min since the last decision: starting shard 2 again, the most recently stopped")
    assert d.as_event(S)["event"] == "governor-start"
    assert governor.decide(NOW, calm, [1, 3], [], NOW - 300, S) is None  # nothing stopped: nothing to start


def test_with_nothing_running_a_stopped_shard_starts_at_once():
    d = governor.decide(NOW, [], [], [3, 2], NOW - 1, S)
    assert figures(d) == ("start", 2, 0, 0, None)
    assert d.reason == ("no shard runs any more (sandbox infra errors 0 of 0 trials (n/a) finished since 11:59:59 UTC): "
                        "starting shard 2 again, the most recently stopped")
    assert d.as_event(S)["rate"] is None
    assert figures(governor.decide(NOW, done("iiii"), [], [2], NOW - 1000, S)) == ("start", 2, 4, 4, 1.0)  # even above
    assert governor.decide(NOW, done("iiii"), [], [], None, S) is None  # every shard done: the run is over


def test_a_window_past_what_a_date_holds_is_still_said():
    huge = governor.Settings(max_rate=0.3, window_s=1e20, min_trials=1, quiet_s=60)
    d = governor.decide(NOW, done("i"), [1, 2], [], None, huge)
    assert figures(d) == ("stop", 2, 1, 1, 1.0)
    assert d.as_event(huge)["since"] == "0001-01-01T00:00:00Z"


def test_describe_says_what_the_governor_does():
    assert governor.describe(governor.Settings(0.3, 1800, 6, 1800)) == (
        "governor: interrupts the newest shard while more than 30% of the trials finished in the last 30 min are "
        "sandbox infra errors (at least 6 trials; model-server errors are named, not acted on); starts one again "
        "after 30 min at or below")
    assert governor.describe(governor.Settings(0.25, 90, 1, 45.5)).endswith(
        "last 90 s are sandbox infra errors (at least 1 trials; model-server errors are named, not acted on); "
        "starts one again after 45.5 s at or below")
    assert "more than 0.5% of the trials" in governor.describe(governor.Settings(0.005, 1800, 6, 1800))  # not "0%"


# --------------------------------------------------------------------------- settings


@pytest.mark.parametrize("settings, message", [
    (governor.Settings(math.nan, 600, 3, 300), "MAX_INFRA_RATE must be a fraction from 0 to 1, got nan"),
    (governor.Settings(1.5, 600, 3, 300), "MAX_INFRA_RATE must be a fraction from 0 to 1, got 1.5"),
    (governor.Settings(True, 600, 3, 300), "MAX_INFRA_RATE must be a fraction from 0 to 1, got True"),
    (governor.Settings(0.3, 0, 3, 300), "GOVERNOR_WINDOW must be a number of seconds above 0, got 0"),
    (governor.Settings(0.3, 600, 3, math.inf), "GOVERNOR_QUIET must be a number of seconds above 0, got inf"),
    (governor.Settings(0.3, 600, 0, 300), "GOVERNOR_MIN_TRIALS must be a whole number of at least 1, got 0"),
    (governor.Settings(0.3, 600, 2.5, 300), "GOVERNOR_MIN_TRIALS must be a whole number of at least 1, got 2.5"),
])
def test_settings_are_checked(settings, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        settings.validate()


def test_usable_settings_pass():
    for ok in (S, governor.Settings(0, 1, 1, 1), governor.Settings(1, 1800.5, 6, 1800)):
        ok.validate()


# --------------------------------------------------------------------------- reading the trials


@pytest.mark.parametrize("name, shard", [
    ("run-shard-2", 2), ("a-shard-1-shard-12", 12), ("run", None), ("run-shard-0", None), ("run-shard-x", None),
    ("run-shard-", None), ("run-shard-2-retry-1", None), ("run-shard-\u0662", None), ("run-shard-2\n", None)])
def test_the_shard_number_is_read_from_the_job_dir_name(name, shard):
    assert governor.shard_of(Path("/jobs") / name) == shard


def test_finished_trials_read_as_the_tally_reads_them(tmp_path):
    jobs = tmp_path / "jobs"
    job = write_job(jobs, "run-shard-2", [
        TrialSpec("a", 1.0, finished=1),                                           # passed
        TrialSpec("b", 0.0, finished=2),                                           # failed
        TrialSpec("c", None, "SandboxError", "Sandbox API error (503)", finished=3),   # infra by type
        TrialSpec("d", None, "RuntimeError", "HF Sandbox is not running", finished=4),  # infra by message
        TrialSpec("e", 0.0, "AgentTimeoutError", "agent timed out", finished=5),   # a limit: scored, settled
        TrialSpec("f", None, "CancelledError", "", finished=6),    # an interruption's: left out
        TrialSpec("g", finished=None),                             # running: no result.json
        TrialSpec("h", raw_result="{not json"),                    # unreadable: no crash, left out
        TrialSpec("i", 1.0, finished=8),                           # finished_at without a zone: UTC
        TrialSpec("j", None, "ReadTimeout", "timed out", finished=9),  # finished_at garbage: left out
    ])
    rewrite_result(job / trial_name("i", "run-shard-2") / "result.json", finished_at="2026-09-03T08:08:00")
    rewrite_result(job / trial_name("j", "run-shard-2") / "result.json", finished_at="yesterday")
    write_job(jobs, "run", [TrialSpec("k", None, "ReadTimeout", "timed out", finished=10)])
    (jobs / "run-shard-3").symlink_to(job)  # a link is never followed: its trials are not read twice
    found = governor.finished_trials([job, jobs / "run", jobs / "run-shard-3", jobs / "run-shard-4"])
    by_minute = sorted(((f.at - T0.timestamp()) / 60, Path(f.trial).name.split("__")[0], f.infra, f.shard)
                       for f in found)
    assert by_minute == [(1, "a", False, 2), (2, "b", False, 2), (3, "c", True, 2), (4, "d", True, 2),
                         (5, "e", False, 2), (8, "i", False, 2), (10, "k", True, None)]
    assert found[0].trial == str(job / trial_name("a", "run-shard-2"))
    assert datetime.fromtimestamp(found[0].at, timezone.utc) == T0 + timedelta(minutes=1)


def test_finished_trials_tell_the_model_server_s_errors_from_the_sandboxes(tmp_path):
    jobs = tmp_path / "jobs"
    job = write_job(jobs, "run-shard-1", [
        TrialSpec("a", None, "InternalServerError", "litellm.InternalServerError: 500", finished=1),
        TrialSpec("b", None, "APIConnectionError", "connection refused", finished=2),
        TrialSpec("c", None, "ReadTimeout", "timed out", finished=3),
        TrialSpec("d", 1.0, finished=4),
    ])
    found = sorted(governor.finished_trials([job]), key=lambda f: f.at)
    assert [(Path(f.trial).name.split("__")[0], f.infra, f.server) for f in found] == [
        ("a", False, True), ("b", False, True), ("c", True, False), ("d", False, False)]
    # Two server errors and one sandbox error of four: 25%, at or below the rate: no stop.
    now = (T0 + timedelta(minutes=5)).timestamp()
    assert governor.decide(now, found, [1, 2], [], None, governor.Settings(0.3, 3600, 3, 300)) is None


def test_finished_trials_feed_the_decision(tmp_path):
    """End to end through the files: the cancelled trials of a stop do not make the next one."""
    jobs = tmp_path / "jobs"
    write_job(jobs, "run-shard-1", [TrialSpec("a", 1.0, finished=61), TrialSpec("b", 0.0, finished=62)])
    write_job(jobs, "run-shard-2", [TrialSpec(f"c{n}", None, "CancelledError", "", finished=63) for n in range(5)]
              + [TrialSpec("d", None, "SandboxError", "Sandbox API error (503)", finished=64)])
    found = governor.finished_trials([jobs / "run-shard-1", jobs / "run-shard-2"])
    assert sorted((f.shard, f.infra) for f in found) == [(1, False), (1, False), (2, True)]
    now = (T0 + timedelta(minutes=65)).timestamp()
    half = governor.Settings(max_rate=0.5, window_s=600, min_trials=3, quiet_s=300)
    assert governor.decide(now, found, [1, 2], [], now - 600, half) is None  # 1 of 3; counted, the 5 would make 6 of 8


# --------------------------------------------------------------------------- carried out (tools/run/shard_run.py)


def sharded_run(tmp_path: Path, second: list[TrialSpec]) -> tuple[dict, list]:
    """A run of two shards written with harbor's models: shard 1 three finished trials ending just
    now, shard 2 `second`; shard_run's spec (manifest, logs) under tmp_path."""
    from tools.run import shard_run
    now = datetime.now(timezone.utc)
    jobs = tmp_path / "jobs"
    first = [TrialSpec(f"a{n}", None, "SandboxError", "Sandbox API error (503)", finished=now - timedelta(seconds=n + 1))
             for n in range(3)]
    write_job(jobs, "run-shard-1", first)
    write_job(jobs, "run-shard-2", second)
    spec = {"run": "run", "event_file": str(tmp_path / "manifest.jsonl"), "log_dir": str(tmp_path / "logs"),
            "watch": ["--grace", "1"]}
    shards = [shard_run.Shard(index=i, job_dir=str(jobs / f"run-shard-{i}"), tasks=3, argv=["harbor", "run"])
              for i in (1, 2)]
    return spec, shards


def manifest(spec: dict) -> list[dict]:
    path = Path(spec["event_file"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def started(monkeypatch):
    """The shards shard_run.start would start (no process is started)."""
    from tools.run import shard_run
    calls = []
    monkeypatch.setattr(shard_run, "start", lambda shard, watch, log_dir: calls.append((shard.index, watch, log_dir)))
    return calls


def test_govern_stops_the_newest_running_shard_above_the_rate(tmp_path, started):
    from tools.run import shard_run
    spec, shards = sharded_run(tmp_path, [TrialSpec("b", 1.0, finished=datetime.now(timezone.utc))])
    shards[0].state, shards[0].started_at = "running", 2.0
    shards[1].state, shards[1].started_at = "running", 1.0  # started first: shard 1 is the newest
    last: list = [None]
    shard_run.govern(spec, shards, S, last, grace=5)
    assert [s.state for s in shards] == ["stopping", "running"] and started == []
    assert last[0] is not None
    [event] = manifest(spec)
    assert (event["event"], event["shard"], event["infra"], event["finished"], event["run"]) == \
        ("governor-stop", 1, 3, 4, "run")


def test_govern_starts_a_stopped_shard_again_when_none_runs(tmp_path, started):
    from tools.run import shard_run
    spec, shards = sharded_run(tmp_path, [TrialSpec("b", 1.0, finished=datetime.now(timezone.utc))])
    shards[0].state, shards[1].state = "done", "stopped"
    shard_run.govern(spec, shards, S, [None], grace=5)
    assert started == [(2, ["--grace", "1"], tmp_path / "logs")]
    [event] = manifest(spec)
    assert (event["event"], event["shard"]) == ("governor-start", 2)


def test_govern_parks_a_stopped_shard_whose_resume_would_delete_a_trial(tmp_path, started):
    # Shard 2 was stopped with a trial dir that has no result.json: harbor's resume would delete
    # it, so the shard is parked (never started again; make mopup runs what it left) and said so.
    from tools.run import shard_run
    spec, shards = sharded_run(tmp_path, [TrialSpec("b", 1.0, finished=datetime.now(timezone.utc)),
                                          TrialSpec("c", finished=None)])
    shards[0].state, shards[1].state = "done", "stopped"
    shard_run.govern(spec, shards, S, [None], grace=5)
    assert started == [] and [s.state for s in shards] == ["done", "parked"]
    [event] = manifest(spec)
    assert (event["event"], event["shard"], event["trials_without_result"]) == \
        ("governor-park", 2, [trial_name("c", "run-shard-2")])
    shard_run.govern(spec, shards, S, [None], grace=5)  # parked: never a candidate again
    assert started == [] and len(manifest(spec)) == 1
