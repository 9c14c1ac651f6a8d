"""The tally, the reports and check-submission against any file a job dir can hold.

Each test plants one hostile thing in an otherwise good harbor job dir (written with
harbor's own models): a symlink loop, a FIFO or device where result.json should be, a
trial dir that is a symlink to its job, a name that is not UTF-8, a result.json that is
not an object or is 200 MB. Every one must be reported per file (path and a one-line
reason) while the rest of the run is still tallied, and nothing the tools write may be
left half-written.

The tools run as subprocesses where the old behaviour was a hang or an unbounded read:
each has a timeout (so a regression fails instead of hanging the suite) and an address
space limit (so it fails instead of eating the machine). No assertion is about time.
"""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.fixtures.harbor_jobs import TrialSpec as S
from tests.fixtures.harbor_jobs import rewrite_result, trial_name, write_job
from tools.report import report
from tools.hub import report_submission
from tools import safe_read
from tools import tally as tally_cli
from tools.results import tally_core
from tools.results import tally_jobs
from tools.results import tally_policy

REPO = Path(__file__).resolve().parent.parent

TOOL_TIMEOUT = 120  # seconds; a guard against a hang, never an assertion
ADDRESS_SPACE = 2 << 30  # 2 GiB: a tool reading /dev/zero dies instead of the machine


@pytest.fixture(scope="module")
def policy():
    return tally_policy.load_policy()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return tmp_path_factory.mktemp("ds")


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def run_tool(tool: str, *args, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The module tools.<tool> in a child with a strict UTF-8 stdout, a timeout and a memory limit."""
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    return subprocess.run([sys.executable, "-m", f"tools.{tool}", *[os.fspath(a) for a in args]],
                          capture_output=True, timeout=TOOL_TIMEOUT, env=env, cwd=cwd,
                          preexec_fn=_limit_memory)


def no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert b"Traceback" not in proc.stderr, proc.stderr.decode(errors="replace")[-3000:]


def outcomes(doc: dict) -> dict[str, str]:
    return {e["task"]: e["outcome"] for e in doc["per_task"]}


def by_path(items: list[dict]) -> list[dict]:
    return sorted(items, key=lambda u: u["path"])


def trial(job: Path, task: str) -> Path:
    return job / trial_name(task, job.name)


# --------------------------------------------------------------------------- 1. symlink loops


def test_symlink_loops_are_unreadable_and_the_tally_goes_on(tmp_path, dataset):
    job = write_job(tmp_path / "jobs", "j", [S("a", 1.0), S("c", 0.0), S("d", finished=None)], dataset=dataset)
    os.symlink(job / "loop", job / "loop")            # a loop at the job level
    os.symlink("loop2__x", job / "loop2__x")          # a relative one, with a trial dir's name
    c = trial(job, "c")
    (c / "result.json").unlink()
    os.symlink(c / "result.json", c / "result.json")  # result.json pointing at itself
    d = trial(job, "d")
    (d / "config.json").unlink()
    os.symlink("config.json", d / "config.json")      # a crashed trial whose config.json loops
    os.symlink(".", trial(job, "a") / "self")         # inside a trial dir: never walked

    proc = run_tool("tally", "tally", job, "--json")
    no_traceback(proc)
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)
    assert outcomes(doc) == {"a": "passed", "c": "unfinished", "d": "unfinished"}
    assert doc["trial_dirs"] == 3
    assert by_path(doc["unreadable"]) == by_path([
        {"path": str(c / "result.json"), "error": "cannot read: Too many levels of symbolic links"},
        {"path": str(job / "loop"), "error": f"symlink to {job / 'loop'}, not followed"},
        {"path": str(job / "loop2__x"), "error": "symlink to loop2__x, not followed"},
    ])
    assert f"{job / 'loop'}: symlink to {job / 'loop'}, not followed; not counted" in doc["warnings"]


def test_a_looping_retry_job_dir_is_reported_and_keeps_its_number(tmp_path, dataset, policy):
    jobs = tmp_path / "jobs"
    write_job(jobs, "j", [S("a", 1.0)], dataset=dataset)
    os.symlink("j-retry-1", jobs / "j-retry-1")
    dirs = tally_jobs.run_job_dirs(jobs, "j")
    assert [d.name for d in dirs] == ["j", "j-retry-1"]
    assert tally_jobs.next_retry_job_name(jobs, "j") == "j-retry-2"  # mop-up never reuses the looping name
    doc = tally_core.tally(dirs, policy)
    assert outcomes(doc) == {"a": "passed"}
    assert doc["unreadable"] == [{"path": str(jobs / "j-retry-1"), "error": "symlink to j-retry-1, not followed"}]


def test_a_job_dir_that_is_a_symlink_is_never_followed(tmp_path, dataset, policy):
    # jobs/<job>-retry-1 -> ~/.cache/huggingface once brought the HF token into a submission;
    # <job>-retry-2 -> . brought in every other run's job dirs.
    jobs = tmp_path / "jobs"
    write_job(jobs, "j", [S("a", 1.0)], dataset=dataset)
    secrets = tmp_path / "home" / ".cache" / "huggingface"
    write_job(secrets.parent, "huggingface", [S("b", 0.0)], dataset=dataset)  # what a followed link would count
    (secrets / "token").write_text("hf_" + "x" * 34 + "\n")
    os.symlink(secrets, jobs / "j-retry-1")
    os.symlink(".", jobs / "j-retry-2")
    dirs = tally_jobs.run_job_dirs(jobs, "j")
    assert [d.name for d in dirs] == ["j", "j-retry-1", "j-retry-2"]  # the names are the run's: never reused
    assert tally_jobs.next_retry_job_name(jobs, "j") == "j-retry-3"
    doc = tally_core.tally(dirs, policy)
    assert outcomes(doc) == {"a": "passed"}  # nothing of what the links point at
    assert doc["unreadable"] == [{"path": str(jobs / "j-retry-1"), "error": f"symlink to {secrets}, not followed"},
                                 {"path": str(jobs / "j-retry-2"), "error": "symlink to ., not followed"}]


# --------------------------------------------------------------------------- 2. FIFO, socket, device, dir


def _plant_special_files(job: Path) -> dict[str, str]:
    """Replace result.json (or config.json) of some trials; return {path: expected error}."""
    expected = {}
    for task, make, kind in (
        ("fifo", os.mkfifo, "a FIFO"),
        ("sock", lambda p: os.mknod(p, stat.S_IFSOCK | 0o600), "a socket"),
        ("dev", lambda p: os.symlink("/dev/zero", p), "a character device"),
        ("dir", os.mkdir, "a directory"),
    ):
        path = trial(job, task) / "result.json"
        path.unlink()
        make(path)
        expected[str(path)] = f"not a regular file ({kind}); not opened"
    cfg = trial(job, "cfg") / "config.json"
    cfg.unlink()
    os.mkfifo(cfg)  # a crashed trial: only its config.json would name the task
    for name in ("result.json", "config.json"):  # the job's own files, read for the planned count
        (job / name).unlink()
        os.mkfifo(job / name)
    return expected


def test_fifo_socket_device_or_dir_as_result_json_is_never_opened(tmp_path, dataset):
    tasks = ["a", "fifo", "sock", "dev", "dir"]
    job = write_job(tmp_path / "jobs", "f", [S(t, 1.0) for t in tasks] + [S("cfg", finished=None)], dataset=dataset)
    expected = _plant_special_files(job)

    proc = run_tool("tally", "tally", job, "--json")
    no_traceback(proc)
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)
    assert outcomes(doc) == {"a": "passed", "cfg": "unfinished", "dev": "unfinished", "dir": "unfinished",
                             "fifo": "unfinished", "sock": "unfinished"}
    assert by_path(doc["unreadable"]) == by_path([{"path": p, "error": e} for p, e in expected.items()])


def test_a_fifo_as_the_policy_file_is_refused(tmp_path):
    os.mkfifo(tmp_path / "policy.yaml")
    proc = run_tool("tally", "policy", "check", "--policy", tmp_path / "policy.yaml")
    no_traceback(proc)
    assert proc.returncode == 1
    assert proc.stderr.decode() == (f"Error: policy {tmp_path / 'policy.yaml'}: not a regular file (a FIFO); "
                                    f"not opened (pass --policy, default {tally_policy.DEFAULT_POLICY})\n")


# check-submission's fix for a built tree's unreadable result.json: never "delete it by hand".
UNREADABLE_FIX = ("re-run the trial; make submission RUN=<run> leaves it out of the tree it builds when the tally "
                  "cannot read it either")


def test_check_submission_never_opens_a_fifo_or_device(tmp_path, dataset):
    job = write_job(tmp_path / "jobs", "f", [S(t, 1.0) for t in ("a", "fifo", "sock", "dev", "dir")]
                    + [S("cfg", finished=None)], dataset=dataset)
    expected = _plant_special_files(job)
    proc = run_tool("report.report", "check-submission", job, "--format", "json")
    no_traceback(proc)
    assert proc.returncode == 1
    problems = json.loads(proc.stdout)[str(job)]["problems"]
    assert problems[0] == (f"{job}/config.json: unreadable (not a regular file (a FIFO); not opened); "
                           f"the job's settings cannot be checked")
    for path, error in expected.items():
        assert (f"{path}: not a valid TrialResult ({error}); {UNREADABLE_FIX}"
                in problems)
    assert f"{trial(job, 'cfg')}: no result.json (an unfinished or crashed trial), which the leaderboard cannot " \
           f"count; make submission RUN=<run> leaves it out of the tree it builds" in problems


# --------------------------------------------------------------------------- 3. symlinked trial dirs


def test_symlinked_trial_dirs_are_not_followed(tmp_path, dataset, policy):
    jobs = tmp_path / "jobs"
    a = write_job(jobs, "A", [S("a", 1.0)], dataset=dataset)
    b = write_job(jobs, "B", [S("b", 0.0)], dataset=dataset)
    links = {
        a / "evil__abc": str(a),                # the job dir itself (its result.json is the job's)
        a / "up__abc": "..",                    # the jobs dir
        a / "b__stolen": str(trial(b, "b")),    # another job's trial: would count it twice
        a / "jobB__x": str(b),                  # another job dir
    }
    for link, target in links.items():
        os.symlink(target, link)

    report_a = tally_core.tally([a], policy)
    assert outcomes(report_a) == {"a": "passed"}
    assert report_a["trial_dirs"] == 1
    assert by_path(report_a["unreadable"]) == by_path(
        [{"path": str(link), "error": f"symlink to {target}, not followed"} for link, target in links.items()])

    both = tally_core.tally([a, b], policy)
    assert outcomes(both) == {"a": "passed", "b": "failed"}
    assert [e["attempts"] for e in both["per_task"]] == [1, 1]
    assert both["trial_dirs"] == 2


# --------------------------------------------------------------------------- 4. names that are not UTF-8


def test_non_utf8_trial_dir_names_are_escaped_and_the_markdown_survives(tmp_path, dataset):
    job = write_job(tmp_path / "jobs", "u", [S("a", 1.0)], dataset=dataset)
    os.mkdir(os.fsencode(job) + b"/task\xff__abc")  # crashed, the name is all there is
    md = tmp_path / "tally.md"
    md.write_text("the previous tally\n")

    proc = run_tool("tally", "tally", job, "--json", "--markdown", md)
    no_traceback(proc)
    assert proc.returncode == 0
    text = proc.stdout.decode("utf-8")  # strict: valid UTF-8
    assert "\\udc" not in text  # no lone surrogate escapes either
    doc = json.loads(text)
    assert outcomes(doc) == {"a": "passed", "task\\xff": "unfinished"}
    assert f"{job}/task\\xff__abc: the name is not valid UTF-8, shown with \\x escapes " \
           f"(rename the dir for mop-up to act on it)" in doc["warnings"]
    written = md.read_bytes().decode("utf-8")
    assert "| task\\xff | unfinished | - | - | 0 |" in written

    proc = run_tool("tally", "tally", job)
    no_traceback(proc)
    assert proc.returncode == 0
    assert "  task\\xff: -: 1 trial dir(s), none with a readable result.json" in proc.stdout.decode("utf-8")


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "tally.md"
    target.write_text("old\n")
    os.chmod(target, 0o640)

    def no_space(*_):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", no_space)
    with pytest.raises(OSError):
        safe_read.write_atomic(target, "new\n")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tally.md"]
    monkeypatch.undo()
    safe_read.write_atomic(target, "new \udcff\n")  # a stray surrogate is escaped, never a crash
    assert target.read_bytes() == b"new \\udcff\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # the file keeps its mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tally.md"]


def test_write_atomic_backs_up_with_a_named_temp_and_fsyncs_the_dir(tmp_path, monkeypatch):
    """mop-up's writes: a temp of a name a later run finds after a kill, the source's mode and
    times on a backup, a hook between the two steps, and the directory fsync'd after the rename."""
    source, backup = tmp_path / "config.json", tmp_path / "backup.json"
    source.write_text("{}\n")
    os.chmod(source, 0o604)
    os.utime(source, (1_000_000_000, 1_000_000_000))
    synced = []
    monkeypatch.setattr(safe_read, "_fsync_dir", synced.append)
    seen = []

    def between():  # the temp is whole, the target not yet replaced
        seen.append(((tmp_path / "backup.json.mopup-tmp").read_text(), backup.exists()))

    safe_read.write_atomic(backup, source.read_bytes(), copy_stat_from=source, temp_suffix=".mopup-tmp",
                    before_replace=between)
    assert seen == [("{}\n", False)]
    assert (backup.read_text(), stat.S_IMODE(backup.stat().st_mode), backup.stat().st_mtime) == \
        ("{}\n", 0o604, 1_000_000_000)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["backup.json", "config.json"]
    assert synced == [str(tmp_path)]


def test_a_planted_link_at_the_temp_name_is_not_written_through(tmp_path):
    outside = tmp_path / "outside"
    outside.write_text("theirs\n")
    (tmp_path / "config.json.mopup-tmp").symlink_to(outside)
    with pytest.raises(OSError):
        safe_read.write_atomic(tmp_path / "config.json", "ours\n", temp_suffix=".mopup-tmp")
    assert outside.read_text() == "theirs\n" and not (tmp_path / "config.json").exists()


def test_safe_read_holds_the_one_atomic_writer():
    """Every tool that replaces a file does it through safe_read.write_atomic (with its directory
    fsync), never with an os.replace of its own."""
    tools = REPO / "tools"
    own = sorted(p.name for p in tools.rglob("*.py") if p.name != "safe_read.py" and "os.replace(" in p.read_text())
    assert own == []


def test_tally_markdown_write_failure_is_one_line_and_keeps_the_old_file(tmp_path, dataset, monkeypatch):
    job = write_job(tmp_path / "jobs", "w", [S("a", 1.0)], dataset=dataset)
    md = tmp_path / "tally.md"
    md.write_text("the previous tally\n")
    monkeypatch.setattr(os, "replace", lambda *_: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    r = CliRunner().invoke(tally_cli.cli, ["tally", str(job), "--markdown", str(md)])
    assert r.exit_code == 1
    assert r.stderr == f"Error: cannot write {md}: No space left on device (free some space, or pass another path)\n"
    assert md.read_text() == "the previous tally\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs", "tally.md"]


def test_results_write_failure_keeps_the_readme(tmp_path, monkeypatch):
    golden = REPO / "tests" / "golden" / "report"
    monkeypatch.chdir(golden)
    readme = tmp_path / "README.md"
    readme.write_text("# x\n<!-- results:start -->\nold\n<!-- results:end -->\n")
    monkeypatch.setattr(os, "replace", lambda *_: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    r = CliRunner().invoke(report.cli, ["results", "alpha.json", "beta.json", "--readme", str(readme)])
    assert r.exit_code == 1
    assert r.output.endswith(f"Error: cannot write {readme}: No space left on device "
                             f"(free some space, or pass another path)\n")
    assert readme.read_text() == "# x\n<!-- results:start -->\nold\n<!-- results:end -->\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md"]


# --------------------------------------------------------------------------- 5. check-submission, not UTF-8


def test_check_submission_reports_a_non_utf8_result_and_goes_on(tmp_path, dataset):
    job = write_job(tmp_path / "jobs", "n", [S("a", 1.0), S("bad", 1.0), S("c", 0.0)], dataset=dataset)
    bad = trial(job, "bad") / "result.json"
    raw = bad.read_bytes()
    bad.write_bytes(raw.replace(b'"task_name": "bad"', b'"task_name": "b\xffd"'))
    offset = bad.read_bytes().index(b"\xff")
    proc = run_tool("report.report", "check-submission", job, "--format", "json")
    no_traceback(proc)
    assert proc.returncode == 1
    verdict = json.loads(proc.stdout)[str(job)]
    assert verdict["trials"] == 3 and verdict["tasks"] == 3
    assert (f"{bad}: not a valid TrialResult (not UTF-8 text: byte 0xff at offset {offset}); "
            f"{UNREADABLE_FIX}") in verdict["problems"]
    assert verdict["problems"][-1].startswith("3 of 3 tasks have fewer than 5 valid trials: a (1), bad (0), c (1);")


# --------------------------------------------------------------------------- 6. not a TrialResult object

SHAPES = [
    ("[]", "not a JSON object (a JSON array)"),
    ("null", "not a JSON object (JSON null)"),
    ("42", "not a JSON object (a JSON number)"),
    ('"done"', "not a JSON object (a JSON string)"),
    ('{"task_name": "x", "finis', "truncated JSON: a string starting at line 1 column 20 never ends"),
    ('{"task_name": "x",', "truncated JSON at line 1 column 19 (Expecting property name enclosed in double quotes)"),
    ('{"task_name": "x"} trailing', "invalid JSON at line 1 column 20 (Extra data)"),
    ("{}", "a JSON object with none of TrialResult's fields (task_name, finished_at, ...)"),
    ('{"stats": {}}', "a JSON object with none of TrialResult's fields (task_name, finished_at, ...)"),
    ("[" * 100_000, "JSON nested too deeply"),
    ("\n  \n", "empty file"),
]


@pytest.mark.parametrize("text,error", SHAPES)
def test_tally_names_what_is_wrong_with_a_result_json(tmp_path, dataset, policy, text, error):
    job = write_job(tmp_path / "jobs", "s", [S("a", 1.0), S("bad", 1.0)], dataset=dataset)
    bad = trial(job, "bad") / "result.json"
    bad.write_text(text)
    doc = tally_core.tally([job], policy)
    assert outcomes(doc) == {"a": "passed", "bad": "unfinished"}
    assert doc["unreadable"] == [{"path": str(bad), "error": error}]


@pytest.mark.parametrize("text,error", SHAPES)
def test_check_submission_names_what_is_wrong_with_a_result_json(tmp_path, dataset, text, error):
    job = write_job(tmp_path / "jobs", "s", [S("a", 1.0), S("bad", 1.0)], dataset=dataset)
    bad = trial(job, "bad") / "result.json"
    bad.write_text(text)
    verdict = report_submission.check_submission([job])
    assert verdict["trials"] == 2
    assert (f"{bad}: not a valid TrialResult ({error}); {UNREADABLE_FIX}"
            in verdict["problems"])


@pytest.mark.parametrize("content,error", [
    (b"[]", "t.json: not a tally (a JSON object was expected)"),
    (b"null", "t.json: not a tally (a JSON object was expected)"),
    (b"42", "t.json: not a tally (a JSON object was expected)"),
    (b'{"run": "x", "acc', "t.json: not valid JSON (truncated JSON: a string starting at line 1 column 14 never ends)"),
    (b"{}", "t.json: tally JSON lacks run, accounting"),
    (b'{"run": "\xff"}', "t.json: not valid JSON (not UTF-8 text: byte 0xff at offset 9)"),
    (b"[" * 100_000, "t.json: not valid JSON (JSON nested too deeply)"),
])
def test_compare_names_what_is_wrong_with_a_tally_file(tmp_path, monkeypatch, content, error):
    monkeypatch.chdir(tmp_path)
    Path("t.json").write_bytes(content)
    r = CliRunner().invoke(report.cli, ["compare", "t.json"])
    assert r.exit_code == 1
    assert r.exception is None or isinstance(r.exception, SystemExit)
    assert r.output.startswith(f"Error: {error}")
    assert r.output.count("\n") == 1


def test_compare_refuses_a_tally_that_is_a_fifo_or_has_bad_rows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.mkfifo("f.json")
    r = CliRunner().invoke(report.cli, ["compare", "f.json"])
    assert r.exit_code == 1 and r.output == "Error: f.json: not a regular file (a FIFO); not opened\n"
    good = json.loads((REPO / "tests" / "golden" / "report" / "alpha.json").read_text())
    for change, error in (({"per_task": {"a": 1}}, "per_task is not a list of task rows"),
                          ({"per_task": [3]}, "per_task[0] is not an object"),
                          ({"passed": "4"}, "passed is not a whole number")):
        Path("t.json").write_text(json.dumps({**good, **change}))
        r = CliRunner().invoke(report.cli, ["compare", "t.json"])
        assert r.exit_code == 1 and r.output.startswith(f"Error: t.json: {error}"), r.output


# --------------------------------------------------------------------------- 7. a 200 MB result.json

BIG = 200 << 20


def _huge_result(path: Path) -> None:
    """A TrialResult-shaped result.json carrying a 200 MiB exception message, written in chunks."""
    chunk = b"x" * (1 << 20)
    with open(path, "wb") as f:
        f.write(b'{"task_name": "huge", "finished_at": "2026-09-03T09:00:00Z", "verifier_result": null, '
                b'"agent_result": null, "agent_execution": null, '
                b'"exception_info": {"exception_type": "RuntimeError", "exception_message": "')
        for _ in range(BIG >> 20):
            f.write(chunk)
        f.write(b'"}}')


def test_a_200_mb_result_json_is_refused_by_size(tmp_path, dataset):
    job = write_job(tmp_path / "jobs", "h", [S("a", 1.0), S("huge", 1.0)], dataset=dataset)
    big = trial(job, "huge") / "result.json"
    try:
        _huge_result(big)
        size = big.stat().st_size
        cap = f"over the 64 MiB cap for a result.json ({size:,} bytes); not read"
        proc = run_tool("tally", "tally", job, "--json")
        no_traceback(proc)
        assert proc.returncode == 0
        doc = json.loads(proc.stdout)
        assert outcomes(doc) == {"a": "passed", "huge": "unfinished"}
        assert doc["unreadable"] == [{"path": str(big), "error": cap}]
        assert len(proc.stdout) < 100_000  # the message was never carried into the output

        proc = run_tool("report.report", "check-submission", job, "--format", "json")
        no_traceback(proc)
        assert proc.returncode == 1
        assert (f"{big}: not a valid TrialResult ({cap}); {UNREADABLE_FIX}"
                in json.loads(proc.stdout)[str(job)]["problems"])
    finally:
        big.unlink(missing_ok=True)


def test_a_long_message_is_classified_whole_and_carried_capped(tmp_path, dataset, policy):
    apt = ("stderr: E: Release file for http://security.debian.org/debian-security/dists/bullseye-security/"
           "InRelease is expired (invalid since 12d 4h 3min 11s).")
    long = "Command failed (exit 100): apt-get update\nstdout: " + "y" * (1 << 20) + apt
    job = write_job(tmp_path / "jobs", "m", [S("a", 0.0, "NonZeroAgentExitCodeError", long)], dataset=dataset)
    md = tmp_path / "m.md"
    r = CliRunner().invoke(tally_cli.cli, ["tally", str(job), "--json", "--markdown", str(md)])
    assert r.exit_code == 0, r.output
    (entry,) = json.loads(r.stdout)["per_task"]
    assert (entry["outcome"], entry["rule"]) == ("errored", "infra-message")  # the pattern at the very end
    assert entry["exception_message"] == long[:500] + f"… (truncated, {len(long):,} chars)"
    assert len(r.stdout) < 20_000 and md.stat().st_size < 20_000


# --------------------------------------------------------------------------- numbers out of range

def test_non_finite_and_absurd_numbers_are_left_out_with_a_note_by_every_reader(tmp_path, dataset, policy):
    # Each once ended a verb in a traceback (OverflowError, "date value out of range") or grew the
    # tally to 3.4 GB (n_attempts 100000000).
    job = write_job(tmp_path / "jobs", "n", [S("ok", 1.0), S("inf", 1.0), S("nan", 0.0), S("neg", 1.0),
                                             S("late", 0.0), S("early", exc="SandboxError")], dataset=dataset)
    for task, old, new in (("inf", '"n_input_tokens": 120000', '"n_input_tokens": 1e999'),
                           ("nan", '"n_output_tokens": 9000', '"n_output_tokens": NaN'),
                           ("neg", '"n_cache_tokens": 80000', '"n_cache_tokens": -Infinity')):
        path = trial(job, task) / "result.json"
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new))
    rewrite_result(trial(job, "late") / "result.json", finished_at="9999-12-31T23:59:59-14:00")
    rewrite_result(trial(job, "early") / "result.json", finished_at="0001-01-01T00:00:00+14:00")
    config = json.loads((job / "config.json").read_text())
    (job / "config.json").write_text(json.dumps({**config, "n_attempts": 100000000}))

    proc = run_tool("tally", "tally", job, "--json")
    no_traceback(proc)
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)
    assert outcomes(doc) == {"ok": "passed", "inf": "passed", "nan": "failed", "neg": "passed", "late": "failed",
                             "early": "errored"}
    assert "n_attempts" not in doc and doc["tasks"] == 6  # k = 1: one slot per task, not 100000000
    # The token totals hold every readable count and nothing else: 6 trials' worth, less the three left out.
    assert doc["tokens"] == {"input": 5 * 120_000, "cache": 5 * 80_000, "output": 5 * 9_000}
    shown = lambda task: str(trial(job, task) / "result.json")  # noqa: E731
    for line in (f"{shown('inf')}: n_input_tokens inf is not a token count (0 to 1e+15); left out of the token totals",
                 f"{shown('nan')}: n_output_tokens nan is not a token count (0 to 1e+15); left out of the token totals",
                 f"{shown('neg')}: n_cache_tokens -inf is not a token count (0 to 1e+15); left out of the token totals",
                 f"{shown('late')}: finished_at '9999-12-31T23:59:59-14:00' is not an ISO-8601 time of the years "
                 f"2000-2199; this trial ranks below every timestamped attempt of its task",
                 f"{job / 'config.json'}: n_attempts 100000000 is not a number of attempts (1 to 100); the tally "
                 f"counts 1 per task"):
        assert line in doc["warnings"]
    # The other readers of the same files: the leaderboard check and mop-up's selection.
    no_traceback(run_tool("report.report", "check-submission", job, "--format", "json"))
    from tools.mopup import mopup_plan
    assert sorted(mopup_plan.left_to_retry(tally_core.tally([job], policy), [])) == ["early"]
