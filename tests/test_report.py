"""tools/report/report.py: statistics, compare (golden Markdown/JSON), pictures, results, check-submission.

Goldens live in tests/golden/report/. The tally inputs there (alpha.json, beta.json) follow
tally's JSON contract and describe the job dirs `write_job` builds with harbor's own models;
a failing diff is read, not regenerated blindly (REPORT_REGEN=1 rewrites them).
"""

from __future__ import annotations

import json
import os
import re
import struct
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from uuid import UUID, uuid5

import pytest
from click.testing import CliRunner

import click

from tools.report import report
from tools.report import report_html
from tools.results import report_load
from tools.results import report_stats
from tools.hub import report_submission
from tools.report import report_text

REPO = Path(__file__).resolve().parent.parent

GOLDEN = REPO / "tests" / "golden" / "report"
REGEN = os.environ.get("REPORT_REGEN") == "1"

# alpha (terminus-2) and beta (mini-swe-agent) over the same seven tasks.
# task: (reward, exception type) per attempt, oldest first.
ALPHA = {
    "t-both-pass": [(1.0, None)],
    "t-both-fail": [(0.0, None)],
    "t-a-only-1": [(1.0, None)],
    "t-a-only-2": [(None, "ReadTimeout"), (1.0, None)],
    "t-b-only": [(0.0, "AgentTimeoutError")],
    "t-infra": [(None, "SandboxError")],
    "t-odd": [(1.0, None)],
}
BETA = {
    "t-both-pass": [(1.0, None)],
    "t-both-fail": [(0.0, "AgentTimeoutError")],
    "t-a-only-1": [(None, "ContextWindowExceededError")],
    "t-a-only-2": [(0.0, None)],
    "t-b-only": [(1.0, None)],
    "t-infra": [(1.0, None)],
    "t-odd": [(None, "WeirdError")],
}


def golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if REGEN:
        path.write_text(actual)
    assert actual == path.read_text(), f"differs from {path} (read the diff; REPORT_REGEN=1 rewrites)"


# --- a fixture writer with harbor's own models (docs/harbor.md §8) ---------------------------


def write_job(jobs_dir: Path, job_name: str, agent: str, trials: dict, *, multiplier=4.0,
              environment_extra: dict | None = None) -> Path:
    """A harbor job dir: config.json (JobConfig) and one TrialResult per attempt."""
    from harbor.job_plan import JobPlan
    from harbor.models.agent.context import AgentContext
    from harbor.models.job.config import JobConfig
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig, TaskConfig
    from harbor.models.trial.result import (AgentInfo, ExceptionInfo, ModelInfo, TimingInfo,
                                            TrialResult)
    from harbor.models.verifier.result import VerifierResult

    ns = UUID("00000000-0000-0000-0000-000000000001")
    # Recorded as "jobs" whatever the real location, so the files are the same on every machine.
    cfg = JobConfig(
        job_name=job_name, jobs_dir=Path("jobs"), agent_timeout_multiplier=multiplier,
        environment=EnvironmentConfig(type="hf-sandbox", **(environment_extra or {})),
        agents=[AgentConfig(name=agent, model_name="openai/Qwen/Qwen3.8-27B-FP8")],
        tasks=[TaskConfig(path=Path(t)) for t in sorted(trials)])
    job_dir = jobs_dir / job_name
    job_dir.mkdir(parents=True)
    (job_dir / "config.json").write_text(cfg.model_dump_json(indent=4, exclude_defaults=True))
    t0 = datetime(2026, 9, 1, tzinfo=timezone.utc)
    base = JobPlan.build_trial_configs(cfg, cfg.tasks, job_id=uuid5(ns, job_name))
    for tc in base:
        task = tc.task.get_task_id().get_name()
        for k, (reward, exc) in enumerate(trials[task]):
            name = f"{task}__{k:07d}"
            tdir = job_dir / name
            tdir.mkdir()
            tcfg = tc.model_copy(update={"trial_name": name})
            (tdir / "config.json").write_text(tcfg.model_dump_json(indent=4, exclude_defaults=True))
            if reward == "no-result":
                continue
            start = t0 + timedelta(hours=k)
            res = TrialResult(
                id=uuid5(ns, f"{job_name}/{name}"), task_name=task, trial_name=name,
                trial_uri=f"file:///fixture/{job_name}/{name}", task_id=tc.task.get_task_id(),
                source=None, task_checksum="0" * 64, config=tcfg,
                agent_info=AgentInfo(name=agent, version="1", model_info=ModelInfo(name="m", provider="openai")),
                agent_result=AgentContext(n_input_tokens=100_000, n_cache_tokens=50_000, n_output_tokens=5_000),
                verifier_result=None if reward is None else VerifierResult(rewards={"reward": reward}),
                exception_info=None if exc is None else ExceptionInfo(
                    exception_type=exc, exception_message=f"fixture {exc}", exception_traceback="tb",
                    occurred_at=start + timedelta(minutes=29)),
                started_at=start, finished_at=start + timedelta(minutes=30),
                agent_execution=TimingInfo(started_at=start, finished_at=start + timedelta(minutes=30)))
            (tdir / "result.json").write_text(res.model_dump_json(indent=4))
    return job_dir


@pytest.fixture
def in_golden(monkeypatch):
    """Work in tests/golden/report, where alpha.json/beta.json name jobs/alpha and jobs/beta."""
    monkeypatch.chdir(GOLDEN)
    return GOLDEN


def load(name: str) -> dict:
    return report_load.load_tally_file(Path(name))


# --- statistics: hand-computed values ---------------------------------------------------------


def test_wilson_53_of_69_matches_hand_computation():
    # p = .768116, z²/n = .055673; centre = .795953/1.055673 = .753975;
    # half = 1.959964 * sqrt(.0025814 + .00020172) / 1.055673 = .097944
    lo, hi = report_stats.wilson_interval(53, 69)
    assert lo == pytest.approx(0.65603, abs=5e-5)
    assert hi == pytest.approx(0.85192, abs=5e-5)


def test_wilson_42_of_81_matches_hand_computation():
    # p = .518519, z²/n = .047425; centre = .542231/1.047425 = .517680; half = .106327
    lo, hi = report_stats.wilson_interval(42, 81)
    assert lo == pytest.approx(0.41135, abs=5e-5)
    assert hi == pytest.approx(0.62401, abs=5e-5)


def test_wilson_edges():
    assert report_stats.wilson_interval(0, 0) is None
    lo, hi = report_stats.wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.27753, abs=5e-5)  # z²/(n+z²) = 3.8415/13.8415
    lo, hi = report_stats.wilson_interval(10, 10)
    assert hi == pytest.approx(1.0) and lo == pytest.approx(0.72247, abs=5e-5)
    with pytest.raises(ValueError):
        report_stats.wilson_interval(11, 10)


def test_mcnemar_exact_p_hand_values():
    assert report_stats.mcnemar_exact_p(3, 1) == pytest.approx(10 / 16)  # 2 * (1 + 4) / 16
    assert report_stats.mcnemar_exact_p(0, 5) == pytest.approx(2 / 32)
    assert report_stats.mcnemar_exact_p(2, 1) == 1.0  # 2 * (1 + 3) / 8, capped
    assert report_stats.mcnemar_exact_p(0, 0) is None


def test_flip_counts_by_hand(in_golden):
    cmp = report_stats.compare([load("alpha.json"), load("beta.json")])
    (f,) = cmp["flips"]
    # scored in both: both-pass (P,P), both-fail (F,F), a-only-1 (P,F), a-only-2 (P,F), b-only (F,P);
    # not comparable: t-infra (errored in alpha), t-odd (unclassified in beta)
    assert (f["a_passed_b_failed"], f["a_failed_b_passed"]) == (2, 1)
    assert (f["both_passed"], f["both_failed"], f["not_comparable"]) == (1, 1, 2)
    assert f["mcnemar_exact_p"] == 1.0


# --- compare: goldens and bad input ---------------------------------------------------------------


def test_compare_golden_markdown_and_json(in_golden):
    runner = CliRunner()
    md = runner.invoke(report.cli, ["compare", "alpha.json", "beta.json"])
    assert md.exit_code == 0, md.output
    golden("compare.md", md.output)
    js = runner.invoke(report.cli, ["compare", "alpha.json", "beta.json", "--format", "json"])
    assert js.exit_code == 0, js.output
    golden("compare.json", js.output)


def test_compare_sorts_disagreements_first(in_golden):
    cmp = report_stats.compare([load("alpha.json"), load("beta.json")])
    tasks = [r["task"] for r in cmp["matrix"]]
    assert tasks[-2:] == ["t-both-fail", "t-both-pass"]
    assert cmp["disagreements"] == 5 and all(r["disagree"] for r in cmp["matrix"][:5])
    assert tasks[:5] == sorted(tasks[:5])


def test_compare_traces_every_cell_to_a_trial_dir(in_golden):
    cmp = report_stats.compare([load("alpha.json"), load("beta.json")])
    for row in cmp["matrix"]:
        for cell in row["cells"]:
            assert (Path(cell["trial_dir"]) / "result.json").is_file(), cell


def test_compare_one_run_has_no_flips(in_golden):
    cmp = report_stats.compare([load("alpha.json")])
    assert cmp["flips"] == [] and cmp["disagreements"] == 0
    assert "Flips" not in report_text.compare_markdown(cmp)


def test_compare_different_task_sets_names_missing_tasks(in_golden, tmp_path):
    beta = load("beta.json")
    beta["per_task"] = [r for r in beta["per_task"] if r["task"] not in ("t-odd", "t-infra")]
    (tmp_path / "beta.json").write_text(json.dumps(beta))
    result = CliRunner().invoke(report.cli, ["compare", "alpha.json", str(tmp_path / "beta.json")])
    assert result.exit_code == 1
    assert "run beta lacks 2: t-infra, t-odd" in result.output
    assert "different task sets" in result.output


def test_compare_empty_matrix(in_golden, tmp_path):
    alpha = load("alpha.json")
    alpha["per_task"] = []
    (tmp_path / "alpha.json").write_text(json.dumps(alpha))
    result = CliRunner().invoke(report.cli, ["compare", str(tmp_path / "alpha.json")])
    assert result.exit_code == 1
    assert "empty matrix: run alpha has no tasks" in result.output


def test_compare_refuses_a_run_whose_job_dirs_record_another_model(tmp_path):
    """A run named by its run name is tallied as make tally tallies it: a job dir of its name that ran
    another model than its MODEL (a run file copied from another keeps its JOB_NAME) is refused."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "RUNS", "DRY_RUN", "MAKEFLAGS", "MFLAGS")}
    proc = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "compare",
                           "RUNS=example-terminus2 example-mswea", "MODEL=Other/Model-7B",
                           f"STATE_ROOT={tmp_path / 'state'}"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode != 0
    assert proc.stderr.startswith(
        f"Error: no tally for run example-terminus2 ({REPO / 'examples/jobs/example-terminus2-tb21'}): "
        f"{REPO / 'examples/jobs/example-terminus2-tb21'} ran model 'openai/Qwen/Qwen3.8-27B-FP8' (its config.json), "
        f"not the run's MODEL Other/Model-7B")
    assert proc.stdout == ""


def test_compare_run_without_tally(in_golden):
    result = CliRunner().invoke(report.cli, ["compare", "alpha.json", "missing.json"])
    assert result.exit_code == 1
    assert "no tally at missing.json" in result.output and "python -m tools.tally tally" in result.output


def test_compare_unknown_run_lists_known_runs(in_golden):
    result = CliRunner().invoke(report.cli, ["compare", "no-such-run"])
    assert result.exit_code == 1
    assert "neither a tally JSON file, a job dir, nor a run" in result.output
    assert "qwen-t2" in result.output


def test_compare_rejects_mixed_accountings(in_golden, tmp_path):
    beta = load("beta.json")
    beta["accounting"] = "timeouts-unscored"
    (tmp_path / "beta.json").write_text(json.dumps(beta))
    result = CliRunner().invoke(report.cli, ["compare", "alpha.json", str(tmp_path / "beta.json")])
    assert result.exit_code == 1
    assert "different accountings" in result.output


def test_compare_rejects_tally_without_fields(in_golden, tmp_path):
    (tmp_path / "t.json").write_text(json.dumps({"run": "x", "per_task": []}))
    result = CliRunner().invoke(report.cli, ["compare", str(tmp_path / "t.json")])
    assert result.exit_code == 1
    assert "lacks accounting, tasks, passed" in result.output


def test_human_numbers():
    assert [report_text.human(x) for x in (None, 0, 950, 681_000, 5_680_000, 1_234_567_890)] == \
        ["n/a", "0", "950", "681K", "5.68M", "1.23G"]


# --- pictures ---------------------------------------------------------------------------------------


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_render_writes_png_and_svg_with_one_cell_per_task_and_run(in_golden, tmp_path):
    result = CliRunner().invoke(report.cli, ["render", "alpha.json", "beta.json", "--out-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["heatmap.png", "heatmap.svg", "outcomes.png", "outcomes.svg"]
    heat = (tmp_path / "heatmap.svg").read_text()
    cells = re.findall(r'<g id="cell-(\d)-([a-z0-9-]+)"', heat)
    assert len(cells) == 7 * 2
    assert {t for _, t in cells} == set(ALPHA) and {r for r, _ in cells} == {"0", "1"}
    bars = re.findall(r'<g id="bar-(\d)-(\w+)"', (tmp_path / "outcomes.svg").read_text())
    # alpha: passed, failed, errored; beta: passed, failed, unclassified
    assert sorted(bars) == [("0", "errored"), ("0", "failed"), ("0", "passed"),
                            ("1", "failed"), ("1", "passed"), ("1", "unclassified")]
    w, h = png_size((tmp_path / "heatmap.png").read_bytes())
    assert w >= 900 and h >= 7 * 0.26 * 150  # 150 dpi, a row per task
    w, h = png_size((tmp_path / "outcomes.png").read_bytes())
    assert w == 1350 and h >= 300
    assert (tmp_path / "heatmap.png").stat().st_size > 20_000


def test_pictures_are_deterministic(in_golden):
    cmp = report_stats.compare([load("alpha.json"), load("beta.json")])
    a, b = report_html.render_figures(cmp), report_html.render_figures(cmp)
    assert a["heatmap.svg"] == b["heatmap.svg"] and a["outcomes.png"] == b["outcomes.png"]


def test_caption_states_the_accounting(in_golden):
    cmp = report_stats.compare([load("alpha.json"), load("beta.json")])
    assert "Accounting: timeouts scored" in report_text.caption(cmp)
    assert "env/outcome-policy.yaml" in report_text.caption(cmp)


# --- results: the README section --------------------------------------------------------------------


README = "# Title\n\nIntro.\n\n## Results\n\n<!-- results:start -->\nstale\n<!-- results:end -->\n\n## After\n"


def test_results_rewrites_only_between_markers_and_is_idempotent(in_golden, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(README)
    args = ["results", "alpha.json", "beta.json", "--readme", str(readme)]
    first = CliRunner().invoke(report.cli, args)
    assert first.exit_code == 0, first.output
    once = readme.read_text()
    assert once.startswith("# Title\n\nIntro.\n\n## Results\n\n<!-- results:start -->\n")
    assert once.endswith("<!-- results:end -->\n\n## After\n")
    assert "stale" not in once
    second = CliRunner().invoke(report.cli, args)
    assert second.exit_code == 0 and "already up to date" in second.output
    assert readme.read_text() == once
    golden("results-section.md", once)


def test_results_with_figures_links_them(in_golden, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(README)
    result = CliRunner().invoke(report.cli, ["results", "alpha.json", "beta.json", "--readme", str(readme),
                                             "--figures-dir", str(tmp_path / "docs" / "results")])
    assert result.exit_code == 0, result.output
    assert "![Per-task outcomes](docs/results/heatmap.png)" in readme.read_text()
    assert (tmp_path / "docs" / "results" / "heatmap.png").is_file()


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file and dir under root: (mtime_ns, content), so a dry run that touches anything fails."""
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else b"<dir>")
            for p in sorted(root.rglob("*"))}


def test_results_dry_run_writes_nothing_and_says_what_it_would(in_golden, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(README)
    before = snapshot(tmp_path)
    figs = tmp_path / "docs" / "results"
    r = CliRunner().invoke(report.cli, ["results", "alpha.json", "beta.json", "--readme", str(readme),
                                        "--figures-dir", str(figs), "--dry-run"])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == [f"would write {figs / n}" for n in
                                     ("outcomes.png", "outcomes.svg", "heatmap.png", "heatmap.svg")] + [
        f"would update the results section of {readme}"]
    assert snapshot(tmp_path) == before and not (tmp_path / "docs").exists()
    # Once up to date, the dry run says so, and still writes nothing.
    assert CliRunner().invoke(report.cli, ["results", "alpha.json", "beta.json", "--readme", str(readme)]).exit_code == 0
    before = snapshot(tmp_path)
    r = CliRunner().invoke(report.cli, ["results", "alpha.json", "beta.json", "--readme", str(readme), "--dry-run"])
    assert r.exit_code == 0
    assert r.stdout == f"would leave {readme} as it is: its results section is already up to date\n"
    assert snapshot(tmp_path) == before


def test_results_dry_run_still_refuses_a_readme_without_markers(in_golden, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    r = CliRunner().invoke(report.cli, ["results", "alpha.json", "--readme", str(readme), "--dry-run",
                                        "--figures-dir", str(tmp_path / "figs")])
    assert r.exit_code == 1 and "exactly one <!-- results:start -->" in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md"]


def test_render_and_html_dry_run_write_nothing(in_golden, tmp_path):
    before = snapshot(in_golden)
    out = tmp_path / "out"
    r = CliRunner().invoke(report.cli, ["render", "alpha.json", "beta.json", "--out-dir", str(out), "--dry-run"])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == [f"would write {out / n}" for n in
                                     ("outcomes.png", "outcomes.svg", "heatmap.png", "heatmap.svg")]
    page = tmp_path / "html" / "report.html"
    r = CliRunner().invoke(report.cli, ["html", "alpha.json", "beta.json", "-o", str(page), "--dry-run"])
    assert r.exit_code == 0, r.output
    assert r.stdout == f"would write {page}\n"
    assert list(tmp_path.iterdir()) == []
    assert snapshot(in_golden) == before
    # Without -o/--out-dir the default under reports/ is named, and not created.
    default = report_load.REPO_ROOT / "reports" / "alpha_vs_beta"
    existed = default.exists()
    r = CliRunner().invoke(report.cli, ["html", "alpha.json", "beta.json", "--dry-run"])
    assert r.stdout == f"would write {default / 'report.html'}\n"
    assert default.exists() == existed


@pytest.mark.parametrize("text, found", [
    ("no markers\n", "found 0 and 0"),
    ("<!-- results:start -->\n<!-- results:start -->\n<!-- results:end -->\n", "found 2 and 1"),
])
def test_results_needs_exactly_one_marker_pair(text, found):
    with pytest.raises(click.ClickException, match=found):
        report_text.replace_results_section(text, "x\n")


def test_results_markers_in_wrong_order():
    with pytest.raises(click.ClickException, match="comes before"):
        report_text.replace_results_section("<!-- results:end -->\n<!-- results:start -->\n", "x\n")


# --- check-submission -------------------------------------------------------------------------------


def test_every_resource_override_harbor_has_is_refused(tmp_path):
    """harbor's EnvironmentConfig overrides (harbor 0.26.0 adds override_tpu): each one is a resource
    override the leaderboard refuses; one harbor adds and this list lacks fails here."""
    from harbor.models.trial.config import EnvironmentConfig

    from tools.hub import report_submission

    assert sorted(k for k in EnvironmentConfig.model_fields if k.startswith("override_")) == sorted(report_submission.ENV_OVERRIDES)
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"environment": {"type": "hf-sandbox", "override_tpu": {"type": "v5e", "count": 4}}}))
    assert report_submission.config_file_problems(path, "r") == [
        f"{path}: environment.override_tpu is {{'type': 'v5e', 'count': 4}}; resource overrides are not allowed "
        "(this repository never sets it; start the job with make bench RUN=r)"]


@pytest.mark.parametrize("whose", ["job", "trial"])
def test_an_error_policy_override_is_refused(tmp_path, whose):
    """harbor 0.26.0's override_error_policy (JobConfig and TrialConfig) changes, per exception type,
    whether an errored trial is retried, graded or has a valid reward: the board's figures assume
    harbor's own table, and this repository never sets one. An empty one (harbor's default) passes."""
    from harbor.models.job.config import JobConfig
    from harbor.models.trial.config import TrialConfig

    from tools.hub import report_submission

    model = JobConfig if whose == "job" else TrialConfig
    assert model.model_fields["override_error_policy"].default_factory() == {}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"override_error_policy": {}}))
    assert report_submission.config_file_problems(path, "r", whose) == []
    path.write_text(json.dumps({"override_error_policy": {"SandboxError": {"should_grade": True,
                                                                           "has_valid_reward": True}}}))
    assert report_submission.config_file_problems(path, "r", whose) == [
        f"{path}: override_error_policy is {{'SandboxError': {{'should_grade': True, 'has_valid_reward': True}}}}; "
        "error-policy overrides change which errored trials are graded or retried, and are not allowed "
        "(this repository never sets it; start the job with make bench RUN=r)"]


def test_check_submission_explains_every_broken_rule(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    job = write_job(tmp_path, "ref-like", "terminus-2",
                    {"t-pass": [(1.0, None)], "t-crash": [("no-result", None)], "t-bad": [(0.0, None)]},
                    environment_extra={"override_memory_mb": 4096})
    bad = next(job.glob("t-bad__*")) / "result.json"
    bad.write_text('{"task_name": "t-bad"')
    result = CliRunner().invoke(report.cli, ["check-submission", "ref-like"])
    assert result.exit_code == 1
    out = result.output
    assert "ref-like: does NOT meet the Terminal-Bench leaderboard rules (5 problems)" in out
    # The advice is in this repository's terms: a job dir given by path names no run.
    assert "ref-like/config.json: agent_timeout_multiplier is 4; the leaderboard requires 1.0 " \
           "(set AGENT_TIMEOUT_MULTIPLIER=1 in runs/<run>.env)" in out
    assert "environment.override_memory_mb is 4096; resource overrides are not allowed " \
           "(this repository never sets it; start the job with make bench RUN=<run>)" in out
    assert "ref-like/t-crash__0000000: no result.json" in out
    assert "ref-like/t-bad__0000000/result.json: not a valid TrialResult (truncated JSON at line 1 " \
           "column 22 (Expecting ',' delimiter))" in out
    assert "3 of 3 tasks have fewer than 5 valid trials: t-bad (0), t-crash (0), t-pass (1); " \
           "set N_ATTEMPTS=5 in runs/<run>.env and bench the run with it (make bench RUN=<run>)" in out
    # Every fix in this repository's terms, never a harbor flag.
    assert "--agent-timeout-multiplier" not in out and "-k 5" not in out and "harbor's" not in out


def test_check_submission_passes_a_compliant_job(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_job(tmp_path, "clean", "terminus-2", {"t-a": [(1.0, None)] * 5, "t-b": [(0.0, None)] * 6},
              multiplier=None)
    result = CliRunner().invoke(report.cli, ["check-submission", "clean", "--format", "json"])
    assert result.exit_code == 0, result.output
    verdict = json.loads(result.output)["clean"]
    assert verdict == {"ok": True, "job_dirs": ["clean"], "tasks": 2, "trials": 11,
                       "min_valid_trials_per_task": 5, "problems": []}


def test_check_submission_flags_agent_timeout_override(tmp_path):
    job = write_job(tmp_path, "j", "terminus-2", {"t": [(1.0, None)] * 5}, multiplier=1.0)
    cfg = json.loads((job / "config.json").read_text())
    cfg["agents"][0]["override_timeout_sec"] = 7200
    cfg["timeout_multiplier"] = 2.0
    (job / "config.json").write_text(json.dumps(cfg))
    problems = report_submission.check_submission([job])["problems"]
    assert len(problems) == 2
    assert "timeout_multiplier is 2; the leaderboard requires 1.0 (this repository never sets it; " \
           "start the job with make bench RUN=<run>)" in problems[0]
    assert "agents[0].override_timeout_sec is 7200; agent timeout overrides are not allowed (this repository " \
           "never sets it; start the job with make bench RUN=<run>)" in problems[1]


def test_check_submission_flags_every_override_section_in_order(tmp_path):
    """Resource, agent (singular and listed) and verifier overrides: each named with its section."""
    job = write_job(tmp_path, "j", "terminus-2", {"t": [(1.0, None)] * 5}, multiplier=1.0)
    cfg = json.loads((job / "config.json").read_text())
    cfg["environment"]["override_cpus"] = 8
    cfg["agent"] = {"max_timeout_sec": 60}
    cfg["verifier"] = {"override_timeout_sec": 30, "max_timeout_sec": None}
    (job / "config.json").write_text(json.dumps(cfg))
    problems = report_submission.check_submission([job])["problems"]
    tail = "overrides are not allowed (this repository never sets it; start the job with make bench RUN=<run>)"
    assert [p.split(": ", 1)[1] for p in problems] == [
        f"environment.override_cpus is 8; resource {tail}",
        f"agent.max_timeout_sec is 60; agent timeout {tail}",
        f"verifier.override_timeout_sec is 30; verifier timeout {tail}",
    ]


def test_check_submission_on_the_mswea_example(tmp_path, monkeypatch):
    import runpy
    monkeypatch.setattr(sys, "argv", ["make_example_mswea.py", str(tmp_path)])
    runpy.run_path(str(REPO / "examples" / "make_example_mswea.py"), run_name="__main__")
    verdict = report_submission.check_submission([tmp_path / "example-mswea-tb21"])
    assert not verdict["ok"] and verdict["trials"] == 13 and verdict["tasks"] == 13
    assert any("agent_timeout_multiplier is 4" in p for p in verdict["problems"])
    assert any("13 of 13 tasks have fewer than 5 valid trials" in p for p in verdict["problems"])


# --- the fixtures the goldens describe -----------------------------------------------------------------


def test_golden_jobs_are_what_the_writer_writes(tmp_path):
    """tests/golden/report/jobs/ is exactly write_job's output (harbor's models, deterministic)."""
    for name, agent, trials in (("alpha", "terminus-2", ALPHA), ("beta", "mini-swe-agent", BETA)):
        write_job(tmp_path, name, agent, trials)
    made = {p.relative_to(tmp_path): p.read_text() for p in sorted(tmp_path.rglob("*")) if p.is_file()}
    if REGEN:
        for rel, text in made.items():
            (GOLDEN / "jobs" / rel).parent.mkdir(parents=True, exist_ok=True)
            (GOLDEN / "jobs" / rel).write_text(text)
    kept = {p.relative_to(GOLDEN / "jobs"): p.read_text()
            for p in sorted((GOLDEN / "jobs").rglob("*")) if p.is_file()}
    assert made == kept


def test_golden_tallies_describe_the_golden_jobs():
    """alpha.json/beta.json: per task, the latest attempt's result.json, as a careful human reads it."""
    for name, trials in (("alpha", ALPHA), ("beta", BETA)):
        tally = json.loads((GOLDEN / f"{name}.json").read_text())
        assert tally["job_dirs"] == [f"jobs/{name}"]
        assert sorted(r["task"] for r in tally["per_task"]) == sorted(trials)
        for row in tally["per_task"]:
            last = len(trials[row["task"]]) - 1
            assert row["trial_dir"] == f"jobs/{name}/{row['task']}__{last:07d}"
            result = json.loads((GOLDEN / row["trial_dir"] / "result.json").read_text())
            assert row["attempts"] == len(trials[row["task"]])
            exc = result["exception_info"]
            assert row["exception_type"] == (exc and exc["exception_type"])
            assert row["reward"] == (result["verifier_result"] or {}).get("rewards", {}).get("reward")
        counts = {k: sum(r["outcome"] == k for r in tally["per_task"]) for k in report_load.OUTCOMES}
        assert {k: tally[k] for k in report_load.OUTCOMES} == counts
        assert tally["scored"] == counts["passed"] + counts["failed"]
        assert tally["pass_rate"] == counts["passed"] / tally["scored"]


def test_timeouts_unscored_flag_refuses_a_tally_made_without_it(in_golden):
    result = CliRunner().invoke(report.cli, ["compare", "alpha.json", "--timeouts-unscored"])
    assert result.exit_code == 1
    assert "alpha.json: tally uses timeouts-scored, but --timeouts-unscored was given" in result.output
