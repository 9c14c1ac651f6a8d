"""tools/money/cost.py's pure parts, and the huggingface_hub / harbor facts it relies on, pinned."""

from __future__ import annotations

import inspect
import subprocess
import os
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tools.money import cost
from tools.money import cost_ceiling
from tools.money import cost_hf
from tools.money import cost_jobs
from tools.money import cost_prices
from tools.money import cost_sandbox_logs
from tools import safe_read
from tests.fixtures import hostile

REPO = Path(__file__).resolve().parent.parent


def test_sandboxes_are_found_by_the_label_huggingface_hub_sets():
    """harbor 0.26.0's hf-sandbox environment uses huggingface_hub's Sandbox.create, which labels
    every sandbox job hf-sandbox=1 (dedicated mode) and gives it no run or task label."""
    from huggingface_hub import _sandbox
    from harbor.environments import hf_sandbox

    assert (_sandbox.SANDBOX_LABEL, _sandbox.MODE_LABEL, _sandbox.MODE_DEDICATED) == ("hf-sandbox", "hf-sandbox-mode", "dedicated")
    assert cost_hf.SANDBOX_LABEL == f"{_sandbox.SANDBOX_LABEL}=1"
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
    per_hour, gpu = cost_prices.parse_hardware([
        {"name": "h200", "accelerator": "1x H200 (141 GB)", "cost/hour": "$5.00"},
        {"name": "cpu-basic", "accelerator": "", "cost/hour": "free"},
        {"name": "odd", "cost/hour": "n/a"},
    ])
    assert per_hour == {"h200": 5.0, "cpu-basic": 0.0} and gpu == {"h200": True, "cpu-basic": False}
    with pytest.raises(cost_hf.HfFailed):
        cost_prices.parse_hardware({"not": "a list"})


def test_idle_time_is_the_server_interval_minus_the_trials():
    t = lambda h, m: datetime(2026, 1, 1, h, m, tzinfo=timezone.utc)  # noqa: E731
    busy = [(t(0, 10), t(0, 40)), (t(0, 30), t(1, 0)), (t(1, 30), t(1, 45)), (t(3, 0), t(4, 0))]
    assert cost_jobs.subtract((t(0, 5), t(2, 5)), busy) == 55 * 60
    assert cost_jobs.subtract((t(0, 5), t(0, 6)), []) == 60


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
    got = [(j.job_id, j.namespace, j.role, j.found) for j in cost_jobs.manifest_jobs(m)]
    assert got == [("s1", "alice", "server", "manifest (serve)"), ("b1", None, "remote-bench", "manifest (bench)"),
                   ("p1", "alice", "supervisor", "manifest (reproduce)"), ("s2", "alice", "server", "manifest (reproduce-relaunch)"),
                   ("m1", None, "remote-mopup", "manifest (launch-cancelled)")]


def test_idle_advice_names_the_fix():
    assert "Fix: SANDBOX_IDLE_TIMEOUT (unset: harbor's default, 10 minutes;" in "\n".join(cost_sandbox_logs.idle_advice(601917, "", "r"))
    assert cost_sandbox_logs.idle_shutdown(["x", "sbx-server: idle for 601917ms, shutting down"]) == 601917
    assert cost_sandbox_logs.idle_shutdown(["sbx-server: exec pid=1 exited 0"]) is None


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
            raise cost_hf.HfFailed("hf jobs hardware --json: no answer within 60s")
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
    got = cost_prices.load_prices(hub, cache, max_age=86400, now=2000.0)
    assert (got.source, got.per_hour["h200"], hub.calls) == ("hub", 5.0, 1)  # the Hub is asked instead
    cache = cache_file(tmp_path, prices, read_epoch)
    offline = cost_prices.load_prices(Hub(up=False), cache, max_age=86400, now=2000.0)
    assert offline.source == "tsv" and offline.per_hour["h200"] > 0
    assert f"the price cache {cache} was discarded ({why})" in offline.label


def test_a_valid_cache_is_used_and_only_a_cpu_flavor_may_be_free(tmp_path):
    cache = cache_file(tmp_path, {"h200": 5.0, "cpu-basic": 0})
    hub = Hub()
    got = cost_prices.load_prices(hub, cache, max_age=86400, now=2000.0)
    assert (got.source, got.per_hour, hub.calls) == ("cache", {"h200": 5.0, "cpu-basic": 0.0}, 0)
    assert cost_prices.parse_hardware(HARDWARE + [{"name": "a100", "accelerator": "A100", "cost/hour": "free"},
                                           {"name": "b", "accelerator": "B", "cost/hour": "$-3"}])[0] == \
        {"h200": 5.0, "cpu-basic": 0.0}


def test_hostile_hf_answers_are_unpriced_with_a_reason_and_never_total_less_than_nothing(tmp_path):
    from tests.test_max_cost import job, recorded
    from tools.money import cost_ceiling

    odd = [job("neg", "h200", "RUNNING", -2_000_000_000), job("huge", "h200", "RUNNING", 1e308),
           job("nan", "h200", "RUNNING", float("nan")), job("ok", "h200", "COMPLETED", 3600)]
    flavor_dict = {**job("dict", "h200", "RUNNING", 3600), "flavor": {"name": "h200"}}
    year_one = {**job("old", "h200", "RUNNING", None), "created_at": "0001-01-01T00:00:00Z",
                "started_at": "0001-01-01T00:00:00+14:00", "durations": {"scheduling_secs": "x"}}
    hf, scope = recorded(tmp_path, [*odd, flavor_dict, year_one])
    hf.calls["jobs inspect --json alice/null"] = [None]
    with (scope.state_dir / "manifest.jsonl").open("a") as manifest:
        manifest.write(json.dumps({"event": "serve", "role": "server", "job_id": "null", "namespace": "alice"}) + "\n")
    spend = cost_ceiling.measure(hf, scope)
    assert spend.spent_usd == pytest.approx(5.0)  # "ok" alone: an hour of h200
    assert sorted(spend.unknown) == sorted([
        "alice/dict (server, flavor n/a): no price for its flavor",
        "alice/huge (server, flavor h200): no running time from HF",
        "alice/nan (server, flavor h200): no running time from HF",
        "alice/neg (server, flavor h200): no running time from HF",
        "alice/old (server, flavor h200): no running time from HF",
        "hf could not be asked: alice/null (server, manifest (serve)): a job is None, not an object",
    ])
    assert cost_sandbox_logs.idle_shutdown(["sbx-server: idle for 1" + "0" * 400 + "ms, shutting down"]) is None
    assert cost_sandbox_logs.idle_shutdown(["sbx-server: idle for 900000ms, shutting down"]) == 900000


def test_the_ceiling_refuses_to_start_when_no_valid_price_is_left(tmp_path, monkeypatch):
    from click.testing import CliRunner

    monkeypatch.setattr(cost_prices, "TSV_PRICES", tmp_path / "prices.tsv")
    (tmp_path / "prices.tsv").write_text("h200\t-5\ncpu-upgrade\tnan\n")
    cache_file(tmp_path, {"h200": -1.0})
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the Hub does not answer
    state = tmp_path / "state"
    state.mkdir()
    scope = json.dumps({"run": "r", "state_dir": str(state), "jobs_dir": str(tmp_path / "jobs"), "job_name": "r",
                        "namespace": "alice", "prices_cache": str(tmp_path / "prices.json"), "call_timeout": 5})
    result = CliRunner().invoke(cost.cli, ["ceiling", "--max-cost", "10", "--scope", scope])
    assert result.exit_code == 1, result.output
    assert "MAX_COST=10 cannot be enforced: no valid price is known (env/flavor-prices.tsv, an offline copy" in \
        result.output


# --- whose sandbox is it (tools/money/cost_sandboxes.py, docs/cost.md §5) --------------------------------


def test_a_sandbox_names_neither_run_nor_trial_and_harbor_logs_each_one_it_creates():
    """The facts the attribution rests on, in the installed huggingface_hub 2.4.0 and harbor 0.26.0."""
    import logging

    from harbor.environments import base, factory, hf_sandbox
    from harbor.models.trial.paths import TrialPaths
    from harbor.trial import trial
    from harbor.utils import logger as harbor_logger
    from huggingface_hub import _jobs_api, _sandbox

    from tools.money import cost_sandboxes

    # Sandbox.create: the job's labels are hf-sandbox=1, the mode and a random nonce; its image is the one asked.
    create = inspect.getsource(_sandbox.Sandbox.create)
    assert "labels={**(labels or {}), SANDBOX_LABEL: \"1\", MODE_LABEL: MODE_DEDICATED, NONCE_LABEL: nonce}" in create
    assert _sandbox.NONCE_LABEL == "hf-sandbox-nonce" and "nonce = token_hex(16)" in create
    assert "job = api.run_job(\n            image=image," in create and "flavor=flavor," in create
    assert cost_sandboxes.SPACE_IMAGE_PREFIXES == _jobs_api._SPACE_IMAGE_PREFIXES
    # harbor's hf-sandbox start: the task's image, no labels, and a DEBUG line before each Sandbox.create,
    # which names the namespace the sandbox is created under (--ek namespace; None: the token's owner).
    start = inspect.getsource(hf_sandbox.HFSandboxEnvironment.start)
    assert "image = self.task_env_config.docker_image" in start
    line = ('f"Creating HF Sandbox: image={image}, flavor={self._flavor}, "\n'
            '            f"idle_timeout={self._idle_timeout}s, namespace={self._namespace}"')
    assert f"self.logger.debug(\n            {line}\n        )" in start
    assert start.index("Creating HF Sandbox") < start.index("Sandbox.create,") and "labels=" not in start
    assert "image=image,\n            flavor=self._flavor," in start and "namespace=self._namespace," in start
    assert "self._namespace = namespace" in inspect.getsource(hf_sandbox.HFSandboxEnvironment.__init__)
    assert hf_sandbox.HFSandboxOptions.model_fields["namespace"].default is None
    # Both harbors' lines are read; "None" is no namespace.
    for text, want in (("Creating HF Sandbox: image=i:1, flavor=cpu-upgrade, idle_timeout=7200s\n", None),
                       ("Creating HF Sandbox: image=i:1, flavor=cpu-upgrade, idle_timeout=7200s, namespace=None\n", None),
                       ("Creating HF Sandbox: image=i:1, flavor=cpu-upgrade, idle_timeout=Nones, namespace=my-org\n",
                        "my-org")):
        assert [(m[0], m[1], m[2] or None if m[2] != cost_sandboxes.NO_NAMESPACE else None)
                for m in cost_sandboxes.SANDBOX_CREATED.findall(text)] == [("i:1", "cpu-upgrade", want)]
    # ... which lands in <trial>/trial.log: the trial's logger (DEBUG) with a DEBUG file handler,
    # and the environment logs through a child of it.
    assert harbor_logger.logger.level == logging.DEBUG
    init_logger = inspect.getsource(trial.Trial._init_logger)
    assert "global_logger.getChild(" in init_logger and "logging.FileHandler(self.paths.log_path)" in init_logger
    assert "file_handler.setLevel(logging.DEBUG)" in init_logger
    assert "logger=self.logger," in inspect.getsource(trial.Trial._init_agent_environment)
    assert "self.logger = (logger or global_logger).getChild(__name__)" in inspect.getsource(base.BaseEnvironment.__init__)
    paths = TrialPaths(trial_dir=Path("t"))
    assert (paths.log_path.name, paths.lock_path.name, paths.config_path.name, paths.result_path.name) == \
        ("trial.log", "lock.json", "config.json", "result.json")
    # A trial starts at most two environments: the agent's, and a separate verifier's.
    source = inspect.getsource(trial)
    assert source.count("self.agent_environment.start(") == 1 and source.count("await env.start(force_build=False)") == 1
    assert source.count(".start(force_build") == 1 and cost_sandboxes.SANDBOXES_PER_TRIAL == 2
    # The factory takes import_path before type: a trial with one runs that class, not hf-sandbox.
    made = inspect.getsource(factory.EnvironmentFactory.create_environment_from_config)
    assert made.index("if config.import_path is not None:") < made.index("elif config.type is not None:")
    # The SandboxErrors about the job Sandbox.create has just started name it, in these words.
    sbx = inspect.getsource(_sandbox)
    for template in ('f"Sandbox job {self.job_id} terminated during startup "',
                     'f"Sandbox job {self.job_id} did not become ready within {start_timeout:.0f}s."',
                     'f"Sandbox job {job_id} runs sbx-server protocol {reported}, but this version of "',
                     'f"Job {job.id} does not expose the sandbox server port {SANDBOX_SERVER_PORT}."'):
        assert template in sbx, template
    named = {"exception_type": "SandboxError"}
    for message in ("Sandbox job 68b7f1 terminated during startup (status: ERROR, message: x).",
                    "Sandbox job 68b7f1 did not become ready within 120s.",
                    "Sandbox job 68b7f1 runs sbx-server protocol 1, but this version of huggingface_hub needs",
                    "Job 68b7f1 does not expose the sandbox server port 49983."):
        assert cost_sandboxes.named_sandbox({"exception_info": {**named, "exception_message": message}}) == ["68b7f1"]
    assert cost_sandboxes.named_sandbox({"exception_info": {"exception_type": "RuntimeError",
                                                "exception_message": "Sandbox job 68b7f1 did not become ready"}}) == []


def test_job_ids_are_one_type_a_plain_name():
    assert [cost_hf.job_id_of(v) for v in (123, "123", "68b7f1a0c0ffee0000000001", "sb-1_x")] == \
        ["123", "123", "68b7f1a0c0ffee0000000001", "sb-1_x"]
    assert [cost_hf.job_id_of(v) for v in (True, 1.5, -3, "", "../x", "a/b", "x\x1b[2J", "a" * 101, None, ["1"])] == \
        [None] * 10


SANDBOX_FLAVOR = "cpu-upgrade"  # the fixtures' trials run hf-sandbox with --ek flavor=cpu-upgrade
IMAGE = "python:3.12-slim"      # the fixtures' tasks' docker_image


def sandbox(job_id: str, created: datetime, image: str = IMAGE, flavor: str = SANDBOX_FLAVOR, secs: float = 1800,
            ident=None) -> dict:
    """A sandbox job as `hf jobs ps --json` prints it (huggingface_hub 2.4.0 JobInfo, status a string)."""
    return {"id": job_id if ident is None else ident, "owner": {"name": "alice"}, "status": "COMPLETED",
            "flavor": flavor, "docker_image": image, "expose": [49983],
            "labels": {"hf-sandbox": "1", "hf-sandbox-mode": "dedicated", "hf-sandbox-nonce": "0" * 32},
            "created_at": created.isoformat(), "started_at": created.isoformat(),
            "durations": {"scheduling_secs": 0, "running_secs": secs}}


def run_with(tmp_path, specs, boxes: list[dict], *, manifest: str = ""):
    """The run "r" (job dir r, its trials written with harbor's models), a manifest, and the
    recorded hf answers: prices, no labelled job, the namespace's sandboxes `boxes`."""
    from tests.fixtures.harbor_jobs import write_job

    job_dir = write_job(tmp_path / "jobs", "r", specs)
    state = tmp_path / "state" / "r"
    state.mkdir(parents=True)
    (state / "manifest.jsonl").write_text(manifest)
    calls = {"jobs hardware --json": [{"name": "cpu-upgrade", "accelerator": "", "cost/hour": "$0.03"},
                                      {"name": "h200", "accelerator": "H200", "cost/hour": "$5.00"}],
             "jobs ps -a --json --limit 0 -l project=terminal-bench-harness -l run=r --namespace alice": [],
             "jobs ps -a --json --limit 0 -l hf-sandbox=1 --namespace alice": boxes}
    return job_dir, state, cost_hf.RecordedHf(tmp_path / "rec.json", calls, "2026-09-03")


def trial_dir(job_dir: Path, task: str) -> Path:
    return next(p for p in job_dir.iterdir() if p.name.startswith(f"{task}__"))


def test_a_sandbox_counts_only_when_a_trial_of_the_run_proves_it_its_own(tmp_path):
    """Three trials of the run; the namespace holds their three sandboxes and eleven of another
    run's, ten of them created while the run ran: each is placed by its trial's proof, the ten
    said and not counted, the one from days before not even said."""
    from tests.fixtures.harbor_jobs import T0, TrialSpec as S

    # Each trial set up its environment in the 20 s after it started: finished - 32 min.
    specs = [S("t0", 1.0, finished=40), S("t1", None, "SandboxError", "Sandbox job sbx-named terminated during startup "
                                                                   "(status: ERROR, message: OOM).", finished=70),
             S("t2", 0.0, finished=100)]
    setup = {s.task: T0 + timedelta(minutes=s.finished - 32) for s in specs}
    t = lambda task, secs: setup[task] + timedelta(seconds=secs)  # noqa: E731
    boxes = [sandbox("mine-t0", t("t0", 6)),
             sandbox("other-image", t("t0", 3), image="ghcr.io/someone/else:1"),  # nearer, but not t0's image
             sandbox("sbx-named", t("t1", 200)),  # outside t1's setup, but named by its SandboxError
             sandbox("mine-t2", t("t2", 4)), sandbox("second-t2", t("t2", 8)),   # t2 created one
             *[sandbox(f"other{i}", t("t0", 300 + 60 * i), flavor="h200", secs=3600) for i in range(1, 9)],
             sandbox("long-before", T0 - timedelta(days=3), flavor="h200", secs=3600)]
    job_dir, state, hf = run_with(tmp_path, specs, boxes)
    with (trial_dir(job_dir, "t0") / "trial.log").open("a") as log:  # what harbor's hf_sandbox logs
        log.write(f"Creating HF Sandbox: image={IMAGE}, flavor={SANDBOX_FLAVOR}, idle_timeout=7200s\n")
    report = cost_jobs.run_tally(str(tmp_path / "jobs"), "r", "r", None)
    doc = cost_jobs.cost_report(hf, cost_prices.load_prices(hf, None, 0), run="r", project_label="terminal-bench-harness",
                           namespace="alice", manifest=state / "manifest.jsonl", report=report)
    name = {s.task: f"r/{trial_dir(job_dir, s.task).name}" for s in specs}
    assert [(r["job"], r["found_by"]) for r in doc["jobs"]] == [
        ("alice/mine-t0", f"trial {name['t0']}: created while it set up its environment, image {IMAGE}, "
                          f"flavor {SANDBOX_FLAVOR} (its trial.log)"),
        ("alice/sbx-named", f"trial {name['t1']}: its result.json names this sandbox job (SandboxError)"),
        ("alice/mine-t2", f"trial {name['t2']}: created while it set up its environment")]
    assert doc["total_usd"] == pytest.approx(3 * 0.5 * (0.03 + cost_prices.tsv_prices()["exposed-ports"]))
    assert doc["unattributed_sandboxes"] == 10  # long-before: not created while the run ran, not said
    assert doc["unattributed_sandbox_jobs"] == ["alice/other-image", *[f"alice/other{i}" for i in range(1, 9)],
                                                "alice/second-t2"]
    text = cost_jobs.render_cost(doc)
    assert ("note: 10 sandbox(es) created while the run ran could not be attributed to it: not counted "
            "(alice/other-image") in text


def test_a_namespace_the_trial_names_makes_a_sandbox_of_another_namespace_not_its_own():
    """harbor 0.26.0 logs the namespace a sandbox is created under (--ek namespace=, what make bench
    passes as HF_NAMESPACE), and the trial's config records it: a sandbox of another namespace,
    though nearer and of the same image and flavor, is never the trial's."""
    from tools.money import cost_sandboxes

    at = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)
    slot = lambda ns: cost_sandboxes.Slot("r/t0__x", at, at + timedelta(minutes=1), at, "while it set up", IMAGE,  # noqa: E731
                              SANDBOX_FLAVOR, ns)
    theirs = {**cost_hf.normalise_job(sandbox("theirs", at + timedelta(seconds=2))), "namespace": "bob"}
    mine = cost_hf.normalise_job(sandbox("mine", at + timedelta(seconds=5)))  # alice's
    assert not cost_sandboxes.fits(slot("alice"), theirs) and cost_sandboxes.fits(slot("alice"), mine)
    assert cost_sandboxes.fits(slot(None), theirs)  # no namespace named: only image, flavor and time decide
    claim = cost_sandboxes.Claim("r/t0__x", "t0", (at, None), [slot("alice")], [])
    assert [j["id"] for j, _, _ in cost_sandboxes.attribute([theirs, mine], [claim]).mine] == ["mine"]
    # Where the namespace comes from: the log line, else the trial's config (--ek namespace=).
    assert cost_sandboxes.configured_namespace({"environment": {"type": "hf-sandbox", "kwargs": {"namespace": "alice"}}}) == "alice"
    assert cost_sandboxes.configured_namespace({"environment": {"kwargs": {"namespace": "a/../b"}}}) is None


def test_an_attempt_harbor_retried_in_the_run_claims_its_sandbox_once(tmp_path):
    """MAX_RETRIES: harbor deleted the SandboxError attempt and ran the trial again in its dir; the copy
    tools/results/retried.py kept (.retried/r/<trial>.<id>) is the run's, so make cost counts its sandbox. A
    copy of an attempt mop-up archived too (a harbor stopped before its job's end kept both) claims once."""
    import shutil

    from tests.fixtures.harbor_jobs import T0, TrialSpec as S, write_job

    from tools.money import cost_sandboxes
    from tools.results import tally_jobs

    boxes = [sandbox("sbx-retried", T0 + timedelta(minutes=5)), sandbox("mine-t0", T0 + timedelta(minutes=8, seconds=5))]
    job_dir, state, hf = run_with(tmp_path, [S("t0", 1.0, finished=40)], boxes)
    # The retried attempt, as harbor wrote it before its retry (another job dir, copied whole beside the job).
    flake = write_job(tmp_path / "flake", "r", [S("t0", None, "SandboxError",
                                                  "Sandbox job sbx-retried did not become ready within 120s.", finished=6,
                                                  attempt=1)])
    attempt = trial_dir(flake, "t0")
    attempt_id = json.loads((attempt / "result.json").read_text())["id"]
    kept = tally_jobs.retried_attempts_dir(job_dir) / f"{trial_dir(job_dir, 't0').name}.{attempt_id}"
    shutil.copytree(attempt, kept)
    report = cost_jobs.run_tally(str(tmp_path / "jobs"), "r", "r", None)
    assert report["retried_in_run"] == 1 and report["trial_dirs"] == 2
    doc = cost_jobs.cost_report(hf, cost_prices.load_prices(hf, None, 0), run="r", project_label="terminal-bench-harness",
                           namespace="alice", manifest=state / "manifest.jsonl", report=report)
    assert sorted(r["job"] for r in doc["jobs"]) == ["alice/mine-t0", "alice/sbx-retried"]
    assert doc["unattributed_sandboxes"] == 0
    # The same attempt in mop-up's archive as well: one claim.
    archived = state / "archive" / "b1" / "r" / attempt.name
    shutil.copytree(attempt, archived)
    claims = cost_sandboxes.run_claims(report, state)
    assert [c.attempt for c in claims].count(attempt_id) == 1 and len(claims) == 2


def test_make_sandboxes_shows_each_trial_the_sandbox_it_proves_its_own(tmp_path):
    from tests.fixtures.harbor_jobs import T0, TrialSpec as S

    specs = [S("t0", None, "SandboxError", "Sandbox API error (503)", finished=40)]
    setup = T0 + timedelta(minutes=8)
    boxes = [sandbox("theirs", setup + timedelta(seconds=2), image="other:1"), sandbox("mine", setup + timedelta(seconds=5))]
    job_dir, state, hf = run_with(tmp_path, specs, boxes)
    (trial_dir(job_dir, "t0") / "trial.log").write_text(
        f"Creating HF Sandbox: image={IMAGE}, flavor={SANDBOX_FLAVOR}, idle_timeout=600s\n")
    hf.calls["jobs logs alice/mine"] = "sbx-server: idle for 601917ms, shutting down\n"
    report = cost_jobs.run_tally(str(tmp_path / "jobs"), "r", "r", None)
    doc = cost_sandbox_logs.sandboxes_report(hf, run="r", namespace="alice", manifest=state / "manifest.jsonl", report=report,
                                task=None, tail=5, idle_timeout="")
    [trial] = doc["tasks"][0]["trials"]
    assert [b["job"] for b in trial["sandboxes"]] == ["alice/mine"] and not trial["ambiguous"]
    assert trial["sandboxes"][0]["idle_shutdown_ms"] == 601917


def test_a_trial_without_result_claims_from_when_its_dir_was_written(tmp_path):
    """A trial harbor runs now claims the sandbox created since it began; one stopped mid-trial
    (no result.json, not of the harbor running now) only until its files were last written.
    A trial of mop-up's archive is the run's too."""
    from tests.fixtures.harbor_jobs import TrialSpec as S

    from tools.money import cost_sandboxes

    began = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)
    at = lambda secs: began + timedelta(seconds=secs)  # noqa: E731
    job_dir, state, _ = run_with(tmp_path, [S("t0", finished=None), S("t1", finished=None)], [])
    for task, begun in (("t0", 0), ("t1", -600)):
        d = trial_dir(job_dir, task)
        (d / "trial.log").write_text(f"Creating HF Sandbox: image={IMAGE}, flavor={SANDBOX_FLAVOR}, idle_timeout=600s\n")
        for f, secs in (("config.json", begun), ("trial.log", begun + 10)):
            os.utime(d / f, (at(secs).timestamp(),) * 2)
    # t1 began ten minutes earlier, under a harbor that was stopped: mop-up archived it since.
    archived = state / "archive" / "b1" / "r" / trial_dir(job_dir, "t1").name
    archived.parent.mkdir(parents=True)
    trial_dir(job_dir, "t1").rename(archived)
    report = cost_jobs.run_tally(str(tmp_path / "jobs"), "r", "r", None)
    jobs = [cost_hf.normalise_job(sandbox(j, at(s))) for j, s in
            (("t0-own", 5), ("t1-own", -597), ("later", 600), ("much-later", 3000))]
    running = cost_sandboxes.attribute(jobs, cost_sandboxes.run_claims(report, state, running_since=at(-1)), since=at(-1))
    assert sorted((j["id"], c.trial.split("/")[1][:2]) for j, c, _ in running.mine) == [("t0-own", "t0"), ("t1-own", "t1")]
    assert [j["id"] for j in running.others] == ["later", "much-later"]
    # Not running now: t0 stopped mid-trial; its window ends 30 s after its last write.
    stopped = cost_sandboxes.attribute(jobs, cost_sandboxes.run_claims(report, state))
    assert sorted(j["id"] for j, _, _ in stopped.mine) == ["t0-own", "t1-own"] and stopped.others == []


def test_a_hostile_trial_log_is_read_within_limits(tmp_path):
    """trial.log is read from its start, 64 KiB at most, never opened when it is not a regular
    file; at most two sandboxes per trial, however many lines claim more."""
    from tools.money import cost_sandboxes

    line = f"Creating HF Sandbox: image={IMAGE}, flavor={SANDBOX_FLAVOR}, idle_timeout=600s\n"
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "trial.log").write_text(line + "x" * (3 << 20) + "\n" + line)
    assert cost_sandboxes.sandbox_creations(str(tmp_path / "big")) == [(IMAGE, SANDBOX_FLAVOR, None)]  # the second is past the head
    (tmp_path / "many").mkdir()
    (tmp_path / "many" / "trial.log").write_text(line * 5 + "Creating HF Sandbox: image=a,b, flavor=x, idle_timeout=1s\n")
    assert cost_sandboxes.sandbox_creations(str(tmp_path / "many")) == [(IMAGE, SANDBOX_FLAVOR, None)] * 2
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / "trial.log")  # opened for reading, it would block for ever
    assert cost_sandboxes.sandbox_creations(str(tmp_path / "fifo")) == []
    (tmp_path / "link").mkdir()
    (tmp_path / "link" / "trial.log").symlink_to("/dev/zero")
    assert cost_sandboxes.sandbox_creations(str(tmp_path / "link")) == []


def test_an_hf_answer_with_an_id_that_is_not_a_plain_name_is_left_out_and_said(tmp_path):
    from tests.test_max_cost import job, recorded

    hf, scope = recorded(tmp_path, [job("srv", "h200", "COMPLETED", 3600)])
    hf.calls["jobs ps -a --json --limit 0 -l project=terminal-bench-harness -l run=r --namespace alice"] = [
        {**job("x", "h200", "RUNNING", 3600), "id": "../../etc"}, {**job("x", "h200", "RUNNING", 3600), "id": True}]
    hf.calls["jobs ps -a --json --limit 0 -l hf-sandbox=1 --namespace alice"] = [{**job("x", "h200", "RUNNING", 3600),
                                                                                 "id": 1.5}]
    jobs, problems, others = cost_jobs.collect(hf, run="r", project_label="terminal-bench-harness", namespace="alice",
                                          manifest=scope.state_dir / "manifest.jsonl", claims=[])
    assert [j["id"] for j, _, _ in jobs] == ["srv"] and others == []
    assert problems == [
        "hf jobs ps -a --json --limit 0 -l project=terminal-bench-harness -l run=r --namespace alice: 2 job(s) whose id "
        "is not a plain name, left out",
        "hf jobs ps -a --json --limit 0 -l hf-sandbox=1 --namespace alice: 1 job(s) whose id is not a plain name, left out"]


def test_a_job_of_another_checkouts_run_of_the_same_name_is_not_this_runs_spend(tmp_path):
    from tests.test_max_cost import job, recorded

    hf, scope = recorded(tmp_path, [job("srv", "h200", "COMPLETED", 3600)])
    labels = {"project": "terminal-bench-harness", "run": "r"}
    hf.calls["jobs ps -a --json --limit 0 -l project=terminal-bench-harness -l run=r --namespace alice"] = [
        {**job("theirs", "h200", "RUNNING", 7200), "labels": {**labels, "instance": "ffffffffffffffff"}},
        {**job("mine", "cpu-upgrade", "COMPLETED", 60), "labels": {**labels, "instance": "0a1b2c3d4e5f6789"}},
        {**job("legacy", "cpu-upgrade", "COMPLETED", 60), "labels": labels}]
    jobs, problems, _ = cost_jobs.collect(hf, run="r", project_label="terminal-bench-harness", namespace="alice",
                                          manifest=scope.state_dir / "manifest.jsonl", claims=[],
                                          instance="0a1b2c3d4e5f6789")
    # Labelled with this instance, or with none (launched before instances were labelled): counted.
    assert sorted(j["id"] for j, _, _ in jobs) == ["legacy", "mine", "srv"] and problems == []
    # MAX_COST's measure (the scope make bench and mop-up send) leaves it out the same way.
    scope.instance = "0a1b2c3d4e5f6789"
    spend = cost_ceiling.measure(hf, scope, now=datetime(2026, 12, 1, 12, tzinfo=timezone.utc))
    assert spend.spent_usd == pytest.approx(5.0 + 2 * 0.03 / 60)


@pytest.mark.e2e
def test_a_real_harbor_trial_on_hf_sandbox_leaves_the_proof_the_attribution_reads(tmp_path, monkeypatch):
    """The real harbor (--env hf-sandbox) and the real huggingface_hub Sandbox.create against the
    loopback Jobs API, whose job dies during startup: the trial dir holds harbor's "Creating HF
    Sandbox" line, the SandboxError naming the job and its hf-sandbox config; the job carries only
    the sandbox labels. Listed through the real hf CLI, that job is the trial's, by its id."""
    import shutil
    import subprocess

    from test_reproduce import TOKEN, JobsAPI

    from tools.money import cost_sandboxes

    api = JobsAPI(tmp_path, {"new_job": {"id": "sbx0mine", "stages": ["ERROR"], "message": "exit 1",
                                         # loopback, closed: the sandbox server never answers
                                         "expose_url": "http://127.0.0.1:9/sbx0mine--49983.loopback"}})
    try:
        shutil.copytree(REPO / "tests" / "datasets" / "mopup", tmp_path / "dataset")
        hf_home = tmp_path / "hf-home"
        hf_home.mkdir()
        (hf_home / ".agent_harnesses.json").write_text('{"standardEnvVars": [], "harnesses": {}}\n')
        for key, value in dict(HF_ENDPOINT=api.url, HF_TOKEN=TOKEN, HF_HOME=str(hf_home),
                               HF_HUB_DISABLE_UPDATE_CHECK="1", HARBOR_TELEMETRY="0",
                               LITELLM_LOCAL_MODEL_COST_MAP="True",
                               PATH=f"{REPO / '.venv/bin'}:{os.environ['PATH']}").items():
            monkeypatch.setenv(key, value)
        for key in ("HF_HUB_OFFLINE", "HF_NAMESPACE"):
            monkeypatch.delenv(key, raising=False)
        proc = subprocess.run([str(REPO / ".venv/bin/harbor"), "run", "-a", "oracle", "-p", str(tmp_path / "dataset"),
                               "--include-task-name", "t-sandbox", "--env", "hf-sandbox", "--ek", "flavor=cpu-upgrade",
                               "--ek", "namespace=alice", "--jobs-dir", str(tmp_path / "jobs"), "--job-name", "r", "-n", "1", "-y", "-q"],
                              capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        [trial] = [p for p in (tmp_path / "jobs" / "r").iterdir() if p.is_dir()]
        assert (trial / "trial.log").read_text().splitlines()[0] == \
            "Creating HF Sandbox: image=python:3.12-slim, flavor=cpu-upgrade, idle_timeout=600s, namespace=alice"
        claim = cost_sandboxes.trial_claim(str(trial), f"r/{trial.name}", "t-sandbox", None)
        assert [(s.image, s.flavor, s.namespace, s.when) for s in claim.slots] == \
            [("python:3.12-slim", "cpu-upgrade", "alice", "while it set up its environment")]
        assert claim.job_ids == ["sbx0mine"]
        # What the job was created with: the task's image, the sandbox labels and nothing of the run.
        [run] = [r for r in api.requests() if r["method"] == "POST" and r["path"] == "/api/jobs/alice"]
        labels = run["body"]["labels"]
        assert (run["body"]["dockerImage"], run["body"]["flavor"]) == ("python:3.12-slim", "cpu-upgrade")
        assert (labels.pop("hf-sandbox"), labels.pop("hf-sandbox-mode"), len(labels.pop("hf-sandbox-nonce"))) == \
            ("1", "dedicated", 32)
        assert list(labels) == ["name"] and labels["name"].startswith("python-3-12-slim-")  # the image's, not the run's
        assert len(api.cancels("sbx0mine")) == 1  # Sandbox.create cancelled it: billed a moment, still the run's
        jobs, problems = cost_hf.list_sandboxes(cost_hf.LiveHf(timeout=60), "alice")
        assert problems == [] and [j["id"] for j in jobs] == ["sbx0mine"]
        assert cost_sandboxes.fits(claim.slots[0], jobs[0])  # created while the trial set up its environment, its image
        split = cost_sandboxes.attribute(jobs, [claim])
        assert [(j["id"], why) for j, _, why in split.mine] == \
            [("sbx0mine", f"trial r/{trial.name}: its result.json names this sandbox job (SandboxError)")]
    finally:
        api.stop()


# --- every bundled example, through every verb that takes a run -----------------------------------

EXAMPLES = sorted(p.stem for p in (REPO / "runs").glob("example-*.env"))


def recorded_total(run: str) -> tuple[float, int]:
    """(dollars, sandboxes) of an example's recording, computed here: each job of the run's label
    and each sandbox, running hours × (its flavor's recorded price + $0.01 per exposed port)."""
    calls = json.loads((REPO / "examples" / "state" / run / "hf-recorded.json").read_text())["calls"]
    price = {row["name"]: float(row["cost/hour"].lstrip("$")) for row in calls["jobs hardware --json"]}
    ns = "alice"
    jobs = calls[f"jobs ps -a --json --limit 0 -l project=terminal-bench-harness -l run={run} --namespace {ns}"]
    boxes = calls[f"jobs ps -a --json --limit 0 -l hf-sandbox=1 --namespace {ns}"]
    total = sum(j["durations"]["running_secs"] / 3600 * (price[j["flavor"]] + 0.01 * bool(j.get("expose")))
                for j in [*jobs, *boxes])
    return total, len(boxes)


def make_verb(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "DRY_RUN", "CLI_SETTINGS", "MAX_COST", "JOBS_DIR")}
    env.update(STATE_ROOT=str(tmp_path / "state"), HF_ENDPOINT="http://127.0.0.1:1")  # no HF: any call fails
    return subprocess.run(["make", "-C", str(REPO), "--no-print-directory", *argv], capture_output=True, text=True,
                          env=env, timeout=300)


# make check takes one example (the one with a corrupt result.json); make test every one (full).
@pytest.mark.parametrize("run", [pytest.param(run, marks=() if run == "example-terminus2" else pytest.mark.full)
                                 for run in EXAMPLES])
def test_every_bundled_example_works_with_cost_sandboxes_watch_tally_and_report(tmp_path, run):
    """Offline, from the example's recording: the same dollars in make cost, make watch and the
    report, one sandbox per trial that set up its environment, and the tally and sandboxes verbs."""
    assert EXAMPLES == ["example-leaderboard", "example-leaderboard-complete", "example-mswea", "example-terminus2"]
    total, boxes = recorded_total(run)
    job_name = next(line.split("=", 1)[1] for line in (REPO / "runs" / f"{run}.env").read_text().splitlines()
                    if line.startswith("JOB_NAME="))
    setups = 0
    for result in (REPO / "examples" / "jobs").glob(f"{job_name}*/*/result.json"):
        try:
            setups += "environment_setup" in json.loads(result.read_text())
        except ValueError:
            continue  # example-terminus2's deliberately corrupt one
    assert boxes == setups

    proc = make_verb(tmp_path, "cost", f"RUN={run}", "JSON=1")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["total_usd"] == pytest.approx(total, abs=1e-4) and doc["problems"] == []
    assert doc["per_role"]["sandbox"]["jobs"] == boxes and doc["prices"]["source"] == "recorded"

    tally = make_verb(tmp_path, "tally", f"RUN={run}", "JSON=1")
    assert tally.returncode == 0, tally.stderr
    errored = [e["task"] for e in json.loads(tally.stdout)["per_task"]
               if e["outcome"] == "errored" and e["rule"] != "verdict"]

    proc = make_verb(tmp_path, "sandboxes", f"RUN={run}")
    assert proc.returncode == 0, proc.stderr
    if errored:
        assert all(f"{task} (errored: " in proc.stdout for task in errored)
    else:
        assert f"run '{run}' has no infra-errored task: nothing to look up" in proc.stdout + proc.stderr

    proc = make_verb(tmp_path, "watch", f"RUN={run}", "ONCE=1")
    assert proc.returncode == 0, proc.stderr
    spend = next(line for line in proc.stdout.splitlines() if line.startswith("  spend: "))
    assert spend.startswith(f"  spend: ${total:,.2f} so far")

    report = subprocess.run([str(REPO / ".venv/bin/python"), "-m", "tools.report.report", "html", run, "-o",
                             str(tmp_path / "r.html")], capture_output=True, text=True, cwd=REPO, timeout=300,
                            env={**os.environ, "STATE_ROOT": str(tmp_path / "state"), "HF_ENDPOINT": "http://127.0.0.1:1"})
    assert report.returncode == 0, report.stderr
    assert f"${total:,.2f}" in (tmp_path / "r.html").read_text()
    # Nothing of the run written but make tally's tally.md (and the lock it took to write it).
    assert sorted(p.name for p in (tmp_path / "state").rglob("*") if p.is_file()) == ["instance", "lock", "lock.json", "tally.md"]


def test_an_example_with_no_recording_is_one_line_not_an_errno(tmp_path):
    with pytest.raises(cost_hf.CostError) as e:
        cost_hf.RecordedHf.load(tmp_path / "hf-recorded.json")
    assert e.value.args[0] == (f"no recording: {tmp_path / 'hf-recorded.json'} does not exist (a bundled example never "
                               f"calls HF; examples/make_example_cost.py records one)")


@pytest.mark.parametrize("kind", hostile.KINDS)
def test_a_manifest_that_cannot_be_read_stops_the_count_instead_of_counting_nothing(tmp_path, kind):
    """The manifest lists every job the run launched: one that is a FIFO (a hang before), a directory
    or past its cap is named, and nothing is counted as if the run had launched nothing."""
    manifest = tmp_path / "manifest.jsonl"
    reason = hostile.make(manifest, kind, safe_read.MANIFEST_CAP, "a run's manifest.jsonl")
    with pytest.raises(cost_hf.CostError) as raised:
        cost_jobs.manifest_jobs(manifest)
    assert raised.value.message == (f"cannot read {manifest} ({reason}): it lists every job the run launched, so "
                                    f"nothing is counted without it; put the run's own manifest back")
    assert cost_jobs.manifest_jobs(tmp_path / "absent.jsonl") == []  # nothing launched from this clone
