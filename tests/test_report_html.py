"""The HTML report opens in headless Chromium with the network cut off and shows every run;
and the bundled examples compare, end to end through tools/tally.py, to a golden."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tools.report import report
from tools.results import report_load
from tools.results import report_stats

REPO = Path(__file__).resolve().parent.parent

GOLDEN = REPO / "tests" / "golden" / "report"
REGEN = os.environ.get("REPORT_REGEN") == "1"

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    # No network at all: every host unresolvable, every proxied request to a dead port.
    "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
]


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: apt-get install -y chromium (.ci/run installs it)")
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    return exe


def dump_dom(html_file: Path, profile: Path) -> str:
    proc = subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", html_file.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_html_report_opens_offline_and_shows_every_run(tmp_path, monkeypatch):
    monkeypatch.chdir(GOLDEN)
    out = tmp_path / "report.html"
    result = CliRunner().invoke(report.cli, ["html", "alpha.json", "beta.json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text()
    # Self-contained: nothing fetched from anywhere.
    assert not re.search(r'(src|href)="(?!data:)', page)
    dom = dump_dom(out, tmp_path / "profile")
    for run in ("alpha", "beta"):
        assert f"<th>{run}</th>" in dom  # a matrix column per run
        assert re.search(rf"<td>{run}</td><td>", dom)  # a summary row per run
    # Both pictures decoded by the browser (the onload handler records their width).
    widths = re.findall(r'id="fig-(\w+)"[^>]*data-rendered="(\d+)"', dom)
    assert sorted(w[0] for w in widths) == ["heatmap", "outcomes"]
    assert all(int(w[1]) > 300 for w in widths)
    assert dom.count('<td class="passed"') == 7  # alpha 4 + beta 3
    assert "≠ t-a-only-1" in dom


def test_html_report_for_one_run(tmp_path, monkeypatch):
    monkeypatch.chdir(GOLDEN)
    out = tmp_path / "alpha.html"
    result = CliRunner().invoke(report.cli, ["html", "alpha.json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    dom = dump_dom(out, tmp_path / "profile")
    assert "<h1>Terminal-Bench report: alpha</h1>" in dom and "Flips" not in dom


# --- end to end over the bundled examples, through the real tally -------------------------------


needs_examples = pytest.mark.skipif(
    not (REPO / "tools" / "tally.py").exists()
    or not (REPO / "examples" / "jobs" / "example-terminus2-tb21").is_dir()
    or not (REPO / "examples" / "jobs" / "example-mswea-tb21").is_dir(),
    reason="needs tools/tally.py and both bundled examples")


@needs_examples
def test_compare_bundled_examples_by_run_name_golden(monkeypatch):
    monkeypatch.chdir(REPO)
    for fmt, name in (("md", "compare-examples.md"), ("json", "compare-examples.json")):
        result = CliRunner().invoke(report.cli, ["compare", "example-terminus2", "example-mswea",
                                                 "--format", fmt])
        assert result.exit_code == 0, result.output
        if REGEN:
            (GOLDEN / name).write_text(result.output)
        assert result.output == (GOLDEN / name).read_text(), f"differs from {GOLDEN / name}"


@needs_examples
def test_golden_tallies_agree_with_the_real_tally(monkeypatch):
    """alpha.json/beta.json (hand-written) say what tools/tally.py says of tests/golden/report/jobs."""
    import json
    monkeypatch.chdir(GOLDEN)
    for name in ("alpha", "beta"):
        real = report_load.run_tally(GOLDEN / "jobs", name, False, name)
        mine = json.loads((GOLDEN / f"{name}.json").read_text())
        keys = ("tasks", "passed", "failed", "errored", "unclassified", "unfinished", "scored", "pass_rate")
        assert {k: real[k] for k in keys} == {k: mine[k] for k in keys}
        assert ({(r["task"], r["outcome"], r["exception_type"], r["attempts"]) for r in real["per_task"]}
                == {(r["task"], r["outcome"], r["exception_type"], r["attempts"]) for r in mine["per_task"]})


@needs_examples
def test_mswea_example_is_reproducible(tmp_path):
    subprocess.run([sys.executable, str(REPO / "examples" / "make_example_mswea.py"), str(tmp_path)],
                   check=True, capture_output=True)
    made, kept = tmp_path / "example-mswea-tb21", REPO / "examples" / "jobs" / "example-mswea-tb21"
    files = sorted(p.relative_to(made) for p in made.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(kept) for p in kept.rglob("*") if p.is_file())
    for rel in files:
        assert (made / rel).read_bytes() == (kept / rel).read_bytes(), rel
    size = sum((made / rel).stat().st_size for rel in files)
    assert size < 500_000


@needs_examples
def test_check_submission_on_the_bundled_example_by_run_name(monkeypatch):
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(report.cli, ["check-submission", "example-terminus2"])
    assert result.exit_code == 1
    out = result.output
    # The run as make submission would submit it: what it leaves out, said with why, is no problem.
    job = "examples/jobs/example-terminus2-tb21"
    assert re.search(rf"^left out {job}/schemelike-metacircular-eval__\w+/: no result.json \(a trial harbor never "
                     r"finished\)$", out, re.M)
    assert re.search(rf"^left out {job}/sqlite-with-gcov__\w+/: unreadable result.json \(truncated JSON: a string "
                     r"starting at line 3 column 5 never ends\)$", out, re.M)
    verdict = out[out.index("run example-terminus2: "):]
    assert verdict.startswith("run example-terminus2: does NOT meet the Terminal-Bench leaderboard rules (6 problems):")
    assert "no result.json" not in verdict and "not a valid TrialResult" not in verdict
    # Given by run name, the advice names its run file.
    assert (f"{job}/config.json: agent_timeout_multiplier is 4; the leaderboard requires 1.0 "
            f"(set AGENT_TIMEOUT_MULTIPLIER=1 in runs/example-terminus2.env)") in verdict
    assert f"{job}-retry-1/config.json: agent_timeout_multiplier is 4" in verdict
    assert "13 of 13 tasks have fewer than 5 valid trials: build-pov-ray (1), circuit-fibsqrt (1)" in verdict
    # A bundled example is never benched: the advice names no verb the project refuses.
    assert ("(+3 more); run example-terminus2 is a bundled example, shipped to show this refusal, and is "
            "never benched: a run of your own sets it in its run file (as runs/qwen-t2-leaderboard.env "
            "does)") in out
    assert "make bench" not in out


@pytest.mark.parametrize("runs", [["example-leaderboard"], ["example-terminus2"], ["example-terminus2", "example-mswea"]])
def test_every_text_of_every_picture_is_inside_its_figure(runs):
    """One run's heatmap is narrower than its title and caption: measured with matplotlib's own
    renderer, no text may run past the figure's edges (a clipped title, a cut caption)."""
    from matplotlib.text import Text

    from tools.report import report_html
    from tools.results import report_load
    cmp = report_stats.compare([report_load.load_run(run) for run in runs])
    for make in (report_html.heatmap_figure, report_html.outcome_bar_figure):
        fig = make(cmp)
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        width, height = fig.bbox.width, fig.bbox.height
        texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
        assert any("Per-task" in t.get_text() or "Outcome per" in t.get_text() for t in texts)
        for t in texts:
            box = t.get_window_extent(renderer)
            assert box.x0 >= -0.5 and box.y0 >= -0.5 and box.x1 <= width + 0.5 and box.y1 <= height + 0.5, (
                f"{make.__name__} of {runs}: {t.get_text()!r} at {box} outside the figure ({width} × {height})")
        import matplotlib.pyplot as plt
        plt.close(fig)


def test_wrap_to_width_measures_the_drawn_text():
    from tools.report import report_html
    text = "Per-task pass fraction per run (≠: the runs disagree; listed first)"
    one = report_html.text_width_in(text, 10, "bold")
    assert 4.0 < one < 6.5  # about 70 characters at 10 pt bold
    wrapped = report_html.wrap_to_width(text, one / 2 + 0.3, 10, "bold")
    assert wrapped.count("\n") == 1 and wrapped.replace("\n", " ") == text
    assert all(report_html.text_width_in(line, 10, "bold") <= one / 2 + 0.3 for line in wrapped.split("\n"))
    assert report_html.wrap_to_width(text, 100, 10) == text
