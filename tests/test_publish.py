"""make publish: the eval-results YAML, the pull request and the bucket push, through the real
huggingface_hub client against a loopback fake of exactly the Hub endpoints it uses
(tests/fakes/fake_hub.py: the model repo's preupload and commit, the bucket's xet token, xet's
CAS and the bucket batch). The YAML is asserted word for word; the PR call by its path,
create_pr and commit message; the bucket by every path pushed. Under DRY_RUN=1 the fake sees
no request at all. The token is never printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tools.hub import publish
from tools.results import report_load

REPO = Path(__file__).resolve().parent.parent
FAKES = REPO / "tests" / "fakes"
TOKEN = "hf_fake-token-that-must-never-be-printed"
EXAMPLE_JOBS = REPO / "examples" / "jobs"
EVAL_PATH = ".eval_results/terminal-bench-2.1_terminus-2.yaml"


def expected_yaml(endpoint: str) -> str:
    # The bundled example: 4 passed of 8 scored (13 tasks, 3 errored), last trial 2026-09-04.
    return f"""\
# Evaluation result (format: https://huggingface.co/docs/hub/eval-results). Written by make publish from the tally.
- dataset:
    id: harborframework/terminal-bench-2.1
    task_id: terminalbench_2_1
  value: 50.0
  date: '2026-09-04'
  source:
    url: {endpoint}/buckets/alice/tb-runs
    name: 'Terminal-Bench run example-terminus2: job dirs and README'
    user: alice
  notes: 'agent: terminus-2; k = 1 attempt per task; accounting: timeouts-scored (pass rate = passed / scored attempts: 4/8, 3 errored, unscored)'
"""


class FakeHub:
    """tests/fakes/fake_hub.py on a free loopback port, accepting only `token`; its requests recorded."""

    def __init__(self, tmp: Path, *extra: str, token: str = TOKEN, lifetime: int = 60):
        self.record = tmp / "hub-requests.jsonl"
        self.record.write_text("")
        port_file = tmp / "hub-port"
        self.proc = subprocess.Popen(
            [sys.executable, str(FAKES / "fake_hub.py"), "--record", str(self.record), "--port-file", str(port_file),
             "--max-lifetime", str(lifetime), "--token", token, *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not port_file.exists() or not port_file.read_text().strip():
            assert self.proc.poll() is None, "fake_hub.py exited before listening"
            assert time.monotonic() < deadline, "fake_hub.py did not write its port in 10 s"
            time.sleep(0.05)
        self.endpoint = f"http://127.0.0.1:{int(port_file.read_text())}"

    def requests(self) -> list[dict]:
        return [json.loads(line) for line in self.record.read_text().splitlines() if line.strip()]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture
def hub(tmp_path):
    fake = FakeHub(tmp_path)
    yield fake
    fake.stop()


def client_env(tmp_path: Path, endpoint: str, token: str | None = TOKEN) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_TOKEN", "RUN", "DRY_RUN", "BUCKET", "MAKEFLAGS", "MFLAGS")}
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(tmp_path / "hf-home"), HF_HUB_DISABLE_PROGRESS_BARS="1",
               HF_HUB_DISABLE_UPDATE_CHECK="1", HF_HUB_DISABLE_TELEMETRY="1", STATE_ROOT=str(tmp_path / "state"))
    if token:
        env["HF_TOKEN"] = token
    return env


def publish_argv(*extra: str) -> list[str]:
    return [sys.executable, "-m", "tools.hub.publish", "publish", "--jobs-dir", str(EXAMPLE_JOBS),
            "--job-name", "example-terminus2-tb21", "--run", "example-terminus2", "--model-repo", "Qwen/Qwen3.8-27B-FP8",
            "--dataset-repo", "https://huggingface.co/datasets/harborframework/terminal-bench-2.1",
            "--task-id", "terminalbench_2_1", "--agent", "terminus-2", "--k", "1", "--bucket", "alice/tb-runs",
            "--submitter", "alice", *extra]


def example_files() -> list[str]:
    return sorted(str(p.relative_to(EXAMPLE_JOBS)) for job in ("example-terminus2-tb21", "example-terminus2-tb21-retry-1")
                  for p in (EXAMPLE_JOBS / job).rglob("*") if p.is_file())


def test_publish_pushes_the_bucket_then_opens_the_pull_request(tmp_path, hub):
    proc = subprocess.run(publish_argv(), capture_output=True, text=True, env=client_env(tmp_path, hub.endpoint),
                          cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert TOKEN not in proc.stdout + proc.stderr
    assert f"opened {hub.endpoint}/Qwen/Qwen3.8-27B-FP8/discussions/1" in proc.stdout
    reqs = hub.requests()
    assert all(r["auth"] for r in reqs if not r["path"].startswith("/api/agent-harnesses"))

    # The bucket first: README.md and every file of both job dirs (retry job included), at its root.
    batches = [r for r in reqs if r["method"] == "POST" and r["path"] == "/api/buckets/alice/tb-runs/batch"]
    assert len(batches) == 1
    pushed = [line["path"] for line in batches[0]["body"]]
    assert {line["type"] for line in batches[0]["body"]} == {"addFile"}
    assert pushed[0] == "README.md"
    assert sorted(pushed[1:]) == example_files()

    # Then the pull request: one commit, to main, with create_pr, exactly the YAML.
    commits = [r for r in reqs if r["method"] == "POST" and r["path"].startswith("/api/models/")]
    assert [(r["path"], r["query"]) for r in commits] == [
        ("/api/models/Qwen/Qwen3.8-27B-FP8/preupload/main", {"create_pr": ["1"]}),
        ("/api/models/Qwen/Qwen3.8-27B-FP8/commit/main", {"create_pr": ["1"]}),
    ]
    header, *files = commits[1]["body"]
    assert header["value"]["summary"] == "Add Terminal-Bench result (harborframework/terminal-bench-2.1, terminus-2): 50.0"
    assert f"Job dirs and README: {hub.endpoint}/buckets/alice/tb-runs" in header["value"]["description"]
    assert [f["value"]["path"] for f in files] == [EVAL_PATH]
    assert files[0]["value"]["text"] == expected_yaml(hub.endpoint)
    assert reqs.index(batches[0]) < reqs.index(commits[1])
    # Then read back: the Hub parsed the file it got, and model_info lists the entry.
    (info,) = [r for r in reqs if r["method"] == "GET" and r["path"] == "/api/models/Qwen/Qwen3.8-27B-FP8"]
    assert info["query"] == {"expand": ["evalResults"]} and reqs.index(commits[1]) < reqs.index(info)
    assert ("publish: the Hub parsed it: model_info(expand=['evalResults']) lists harborframework/terminal-bench-2.1 "
            "/ terminalbench_2_1 = 50.0 (1 eval result(s) on Qwen/Qwen3.8-27B-FP8)") in proc.stderr.splitlines()


def test_a_result_the_hub_has_not_parsed_is_said_and_is_no_failure(tmp_path):
    fake = FakeHub(tmp_path, "--no-parse")
    try:
        proc = subprocess.run(publish_argv(), capture_output=True, text=True, env=client_env(tmp_path, fake.endpoint),
                              cwd=REPO, timeout=120)
    finally:
        fake.stop()
    assert proc.returncode == 0, proc.stderr
    assert ("publish: the Hub does not list harborframework/terminal-bench-2.1 / terminalbench_2_1 = 50.0 among "
            "Qwen/Qwen3.8-27B-FP8's 0 eval result(s) yet: it reads the file once parsed; check the pull request's page"
            ) in proc.stderr.splitlines()


def test_the_entry_is_huggingface_hubs_own_and_round_trips(tmp_path):
    """The YAML is what huggingface_hub's EvalResultEntry serialises, and parses back to the same
    entry: dataset id, task id, revision (DATASET_REF), value, date, source and notes."""
    import yaml
    from huggingface_hub import EvalResultEntry, parse_eval_result_entries

    tally = report_load.run_tally(EXAMPLE_JOBS, "example-terminus2-tb21", False, "run example-terminus2")
    rev = "0123456789abcdef0123456789abcdef01234567"
    text = publish.eval_result_yaml(tally, run="example-terminus2", dataset_id="harborframework/terminal-bench-2.1",
                              task_id="terminalbench_2_1", agent="terminus-2", k=1, source_url="https://h/buckets/a/b",
                              submitter="alice", dataset_revision=rev)
    (entry,) = parse_eval_result_entries(yaml.safe_load(text))
    assert entry == EvalResultEntry(
        dataset_id="harborframework/terminal-bench-2.1", task_id="terminalbench_2_1", value=50.0, dataset_revision=rev,
        date="2026-09-04", source_url="https://h/buckets/a/b", source_name="Terminal-Bench run example-terminus2: job "
        "dirs and README", source_user="alice", notes="agent: terminus-2; k = 1 attempt per task; accounting: "
        "timeouts-scored (pass rate = passed / scored attempts: 4/8, 3 errored, unscored)")
    assert "    revision: " + rev in text.splitlines()


def test_a_k_run_publishes_the_boards_figure_and_never_a_provisional_one(tmp_path, hub):
    """k > 1: the value is passed / (tasks × k); with slots open (the bundled k = 5 example has
    two) a real publish is refused with the mop-up command, and a dry run says so."""
    argv = [sys.executable, "-m", "tools.hub.publish", "publish", "--jobs-dir", str(EXAMPLE_JOBS),
            "--job-name", "example-leaderboard-tb21", "--run", "mine", "--model-repo", "Qwen/Qwen3.8-27B-FP8",
            "--dataset-repo", "https://huggingface.co/datasets/harborframework/terminal-bench-2.1",
            "--task-id", "terminalbench_2_1", "--agent", "terminus-2", "--k", "5", "--bucket", "alice/tb-runs"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=client_env(tmp_path, hub.endpoint), cwd=REPO,
                          timeout=120)
    assert proc.returncode == 1
    assert ("run mine: 2 of 30 attempt slots are open, so its leaderboard figure (43.33%) is provisional: fill them "
            "first, make mopup RUN=mine") in proc.stderr
    assert hub.requests() == []
    proc = subprocess.run([*argv, "--dry-run"], capture_output=True, text=True, env=client_env(tmp_path, hub.endpoint),
                          cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "      value: 43.33" in proc.stdout.splitlines()  # 13 passed of 6 tasks × 5
    assert ("leaderboard resolution rate = passed / (tasks × k): 13/30 (6 tasks × 5)") in proc.stdout
    # Every slot filled: the same figure, not provisional.
    rows = [{"task": t, "outcome": "passed", "slots": s, "slot_trials": ["x"] * 2, "verdict": None}
            for t, s in (("a", ["passed", "failed"]), ("b", ["passed", "passed"]))]
    tally = {"n_attempts": 2, "per_task": rows, "pass_rate": 0.5, "passed": 3, "scored": 4}
    assert publish.score_of(tally) == 75.0 and not publish.board_of(tally)["provisional"]


def test_dry_run_shows_the_yaml_and_every_call_and_calls_nothing(tmp_path, hub):
    env = client_env(tmp_path, hub.endpoint, token=None)  # no token is needed for a dry run
    proc = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "publish", "RUN=example-terminus2",
                           "DRY_RUN=1", "BUCKET=alice/tb-runs", "EVAL_TASK_ID=terminalbench_2_1", "SUBMITTER=alice"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    yaml_lines = [f"    {line}" for line in expected_yaml(hub.endpoint).splitlines()]
    assert "\n".join(yaml_lines) in proc.stdout
    assert (f"HfApi().create_commit('Qwen/Qwen3.8-27B-FP8', [CommitOperationAdd('{EVAL_PATH}', <the YAML>)], "
            f"commit_message='Add Terminal-Bench result (harborframework/terminal-bench-2.1, terminus-2): 50.0', "
            f"commit_description=<below>, create_pr=True)") in proc.stdout
    assert "HfApi().batch_bucket_files('alice/tb-runs', add=[(<bytes>, 'README.md'), ... 88 job files])" in proc.stdout
    for path in example_files():
        assert f"\n  {path}\n" in proc.stdout
    assert hub.requests() == []
    assert not (tmp_path / "state").exists()


def test_the_bundled_example_is_never_really_published(tmp_path, hub):
    proc = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "publish", "RUN=example-terminus2",
                           "BUCKET=alice/tb-runs", "EVAL_TASK_ID=x"],
                          capture_output=True, text=True, env=client_env(tmp_path, hub.endpoint), timeout=120)
    assert proc.returncode != 0
    assert "bundled example" in proc.stderr
    assert hub.requests() == []


def test_a_job_of_another_model_under_the_run_s_name_is_never_published(tmp_path, hub):
    """The example served with another MODEL (a run file copied from it keeps its JOB_NAME): its job
    dirs are another run's result, refused before any call (the example's dry run; a real publish of
    it is refused as an example)."""
    proc = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "publish", "RUN=example-terminus2",
                           "MODEL=Other/Model-7B", "DRY_RUN=1", "BUCKET=alice/tb-runs", "EVAL_TASK_ID=x",
                           f"STATE_ROOT={tmp_path / 'state'}"],
                          capture_output=True, text=True, env=client_env(tmp_path, hub.endpoint), timeout=120)
    assert proc.returncode != 0
    assert (f"{REPO / 'examples/jobs/example-terminus2-tb21'} ran model 'openai/Qwen/Qwen3.8-27B-FP8' (its "
            f"config.json), not the run's MODEL Other/Model-7B") in proc.stderr
    assert hub.requests() == []
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize("drop, message", [
    ("--task-id", "EVAL_TASK_ID is empty"),
    ("--bucket", "BUCKET is empty"),
])
def test_a_missing_setting_is_refused_before_any_call(tmp_path, hub, drop, message):
    argv = publish_argv()
    argv[argv.index(drop) + 1] = ""
    proc = subprocess.run(argv, capture_output=True, text=True, env=client_env(tmp_path, hub.endpoint), cwd=REPO,
                          timeout=120)
    assert proc.returncode == 1
    assert message in proc.stderr
    assert hub.requests() == []


def test_no_token_is_refused_before_any_call(tmp_path, hub):
    proc = subprocess.run(publish_argv(), capture_output=True, text=True,
                          env=client_env(tmp_path, hub.endpoint, token=None), cwd=REPO, timeout=120)
    assert proc.returncode == 1
    assert "no HF token: set HF_TOKEN or run 'hf auth login'" in proc.stderr
    assert hub.requests() == []


def test_a_refused_pull_request_is_one_line_after_the_bucket_push(tmp_path):
    fake = FakeHub(tmp_path, "--fail-commit")
    try:
        proc = subprocess.run(publish_argv(), capture_output=True, text=True, env=client_env(tmp_path, fake.endpoint),
                              cwd=REPO, timeout=120)
    finally:
        fake.stop()
    assert proc.returncode == 1
    assert "opening the pull request on Qwen/Qwen3.8-27B-FP8 failed" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert TOKEN not in proc.stdout + proc.stderr


def test_a_k1_score_is_passed_over_scored():
    assert publish.score_of({"pass_rate": 0.6235294, "passed": 53, "scored": 85}) == 62.35
    assert publish.score_of({"pass_rate": None, "passed": 53, "scored": 85}) == 62.35


def test_the_dataset_id_comes_from_the_dataset_url():
    assert publish.dataset_id_of("https://huggingface.co/datasets/harborframework/terminal-bench-2.1") == \
        "harborframework/terminal-bench-2.1"
    assert publish.eval_file_path("harborframework/terminal-bench-2.1", "mini-swe-agent") == \
        ".eval_results/terminal-bench-2.1_mini-swe-agent.yaml"


# --- nothing secret leaves ----------------------------------------------------------------------------

# An HF token's shape, built here so that no token-shaped string is tracked in the repository.
LEAKED = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz" + "0123456789"


def hostile_run(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the bundled run, and outside it a token file (as ~/.cache/huggingface/token)."""
    import shutil

    jobs = tmp_path / "jobs"
    for job in ("example-terminus2-tb21", "example-terminus2-tb21-retry-1"):
        shutil.copytree(EXAMPLE_JOBS / job, jobs / job, symlinks=True)
    secrets = tmp_path / "home" / ".cache" / "huggingface"
    secrets.mkdir(parents=True)
    (secrets / "token").write_text(LEAKED + "\n")
    return jobs, secrets


def hostile_publish(tmp_path: Path, jobs: Path, hub, *extra: str) -> subprocess.CompletedProcess:
    argv = [a if a != str(EXAMPLE_JOBS) else str(jobs) for a in publish_argv(*extra)]
    return subprocess.run(argv, capture_output=True, text=True, env=client_env(tmp_path, hub.endpoint), cwd=REPO,
                          timeout=120)


def test_links_and_hard_links_out_of_the_run_are_never_pushed(tmp_path, hub):
    jobs, secrets = hostile_run(tmp_path)
    os.symlink(secrets, jobs / "example-terminus2-tb21-retry-2")  # a job dir that is a link
    trial = next(p for p in (jobs / "example-terminus2-tb21").iterdir() if p.is_dir())
    os.symlink(secrets / "token", trial / "agent" / "token-link")  # an absolute link in a trial
    os.link(secrets / "token", trial / "agent" / "token-hard")    # a second name of the token file
    proc = hostile_publish(tmp_path, jobs, hub, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert f"  not pushed: {jobs}/example-terminus2-tb21-retry-2 (a symlink, never followed)\n" in proc.stdout
    assert f"  not pushed: {trial}/agent/token-link (a symlink, never followed)\n" in proc.stdout
    assert f"  not pushed: {trial}/agent/token-hard (a hard link: its other name may be outside the run)\n" in proc.stdout
    assert "token" not in "".join(line for line in proc.stdout.splitlines(keepends=True) if not line.startswith("  not"))
    assert hub.requests() == []


def test_a_credential_in_a_file_refuses_the_publish_naming_file_and_line(tmp_path, hub):
    jobs, _ = hostile_run(tmp_path)
    trial = next(p for p in (jobs / "example-terminus2-tb21").iterdir() if p.is_dir())
    leaked = trial / "agent" / "trajectory.json"
    leaked.write_text('{\n  "steps": [\n    {"observation": "HF_TOKEN=' + LEAKED + '"}\n  ]\n}\n')
    for extra in (("--dry-run",), ()):
        proc = hostile_publish(tmp_path, jobs, hub, *extra)
        assert proc.returncode == 1
        assert (f"make publish refused: a credential may be in the files it would upload: {leaked}:3: what looks "
                f"like an HF token (hf_A…6789). Nothing was uploaded.") in proc.stderr
        assert LEAKED not in proc.stderr + proc.stdout
    assert hub.requests() == []
    # The literal value of this machine's token is found whatever its shape.
    leaked.write_text(f"the key was {TOKEN}\n")
    proc = hostile_publish(tmp_path, jobs, hub, "--dry-run")
    assert proc.returncode == 1
    assert f"{leaked}:1: the value of $HF_TOKEN (hf_f…nted)" in proc.stderr


def test_settings_reach_the_published_readme_as_text_never_as_markdown_or_html():
    tally = {"passed": 1, "failed": 0, "errored": 0, "unclassified": 0, "unfinished": 0, "tasks": 1, "scored": 1,
             "accounting": "timeouts-scored", "pass_rate": 1.0, "per_task": [{"finished_at": "2026-09-04T10:00:00Z"}]}
    model = "evil](https://x.example) <img src=x onerror=alert(1)> `rm` *b*\n# heading"
    text = publish.readme_text(tally, run="r|x", model_repo=model, agent="terminus-2", k=1, dataset_repo="d",
                         job_dirs=[Path("j`x")], eval_path="e.yaml")
    assert "<img" not in text and "](https://x.example)" not in text and "\n# heading" not in text
    assert ("- Model: [evil\\]\\(https://x.example\\) &lt;img src=x onerror=alert\\(1\\)&gt; \\`rm\\` \\*b\\*\\\\n# "
            "heading](https://huggingface.co/evil%5D%28https%3A//x.example%29%20%3Cimg%20src%3Dx%20onerror%3Dalert"
            "%281%29%3E%20%60rm%60%20%2Ab%2A%0A%23%20heading)") in text
    assert "- j\\`x/" in text and "RUN=r\\|x" in text
