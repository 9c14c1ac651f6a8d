"""submission_verdict: the one verdict on a run, said alike by make check-submission and make submission.

What a submission of the run would hold (per task its k slot-filling trials, tools/hub/submission_select.py),
what it leaves out and why, and whether that meets the leaderboard rules: make submission's refusals
(tools/hub/submission_rules.py: open slots, trajectories, timeout and resource overrides, tasks never run,
an unpinned registry dataset) and check-submission's rules on the trials it holds
(tools/hub/report_submission.py: a valid TrialResult, at least MIN_TRIALS valid trials per task). A trial
dir the submission leaves out is never a problem. A tree make submission built is checked dir by dir
(report_submission.check_submission).
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tools import safe_read
from tools.hub import credentials
from tools.hub import report_submission
from tools.hub import submission_rules
from tools.hub.submission_select import select_trials, tally_name
from tools.results import report_load
from tools.results import tally_jobs


@dataclass(frozen=True)
class RunCheck:
    """A run as a submission would hold it, and the verdict on that."""

    job_dirs: list[Path]              # the run's job dirs a submission copies
    linked: list[Path]                # job dir names that are symlinks: never followed, not copied
    k: int                            # attempts per task (the first job's n_attempts)
    tasks: int
    trials: list[Path]                # the trial dirs a submission holds: every task's k slot-filling trials
    left_out: list[tuple[Path, str]]  # dirs of the job dirs not copied (other trials, other dirs), and why
    outside: list[tuple[Path, str]]   # what could lead out of the run's tree, not copied, and why
    coverage: str                     # how much of the dataset the run covers, or why that is unknown
    refusals: list[str]               # why make submission writes nothing (submission_rules.py)
    verdict: dict                     # check_submission's shape: ok, tasks, trials, problems, ...


def run_job_dirs(jobs_dir: Path, job_name: str, run: str | None = None,
                 model: str | None = None) -> tuple[list[Path], list[Path]]:
    """(the run's job dirs a submission copies, those whose name is a symlink); a refusal is a click error.
    A job dir of the run's name that is another run's (its config.json names another job, or records
    another model than `model`, the run's MODEL) is refused: its trials are not the run's."""
    try:
        job_dirs = tally_jobs.run_job_dirs(jobs_dir, job_name) if Path(jobs_dir).is_dir() else []
        tally_jobs.refuse_foreign_job_dirs(job_dirs, model)
    except tally_jobs.TallyError as e:
        report_load.fail(str(e))
    # A job dir name that is a symlink could lead anywhere (~/.cache/huggingface, another run):
    # never followed, never copied, listed.
    linked = [d for d in job_dirs if d.is_symlink()]
    job_dirs = [d for d in job_dirs if not d.is_symlink()]
    if not job_dirs:
        report_load.fail(report_load.no_job_dir(run, jobs_dir, job_name))
    seen: dict[str, Path] = {}
    for d in job_dirs:
        if d.name in seen:
            report_load.fail(f"two job dirs named {d.name}: {seen[d.name]} and {d}; a submission holds each "
                             f"job folder once. Move one aside, then run make submission again")
        seen[d.name] = d
    return job_dirs, linked


def job_entries(job_dir: Path, kept_names: set[str], left_out: dict[str, str]) -> tuple[list[Path], list[tuple[Path, str]]]:
    """(the trial dirs of a job that fill slots, every other dir in it with why it is left out).
    Files at the job's top (config.json, result.json, lock.json, job.log) are copied."""
    try:
        trials, refused, others = safe_read.trial_dir_entries(str(job_dir))
    except safe_read.Unreadable as e:
        report_load.fail(f"{job_dir}: {e}; nothing was written")
    kept, left = [], []
    for t in map(Path, trials):
        name = tally_name(t)
        if name in kept_names:
            kept.append(t)
        else:
            left.append((t, left_out.get(name, "not read by the tally")))
    left += [(Path(p), why) for p, why in refused]
    left += [(Path(p), "not a trial dir (no result.json, config.json or <task>__<id> name)") for p in others]
    return kept, left


def leads_outside(job_dir: Path, skip: set[Path] = frozenset()) -> list[tuple[Path, str]]:
    """What in a job dir (less `skip`, what is left out anyway) could carry something from outside
    the run into the submission, and why: a symlink whose target is absolute or leaves the job dir
    (an upload reads through it: the HF token, /etc/passwd), and a file with a second hard link
    (its other name may be a token file). Symlinks inside the job are copied as links; nothing is
    ever followed."""
    found = []
    root = os.path.realpath(job_dir)
    for where, dirs, files in os.walk(job_dir):
        dirs[:] = [d for d in dirs if Path(where) / d not in skip]
        for name in sorted(dirs + [f for f in files if Path(where) / f not in skip]):
            path = Path(where) / name
            try:
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    target = os.readlink(path)
                    resolved = os.path.realpath(os.path.join(where, target))
                    if os.path.isabs(target) or os.path.commonpath([root, resolved]) != root:
                        found.append((path, f"a symlink to {safe_read.link_target(path)}, out of the job dir"))
                elif stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                    found.append((path, "a hard link: its other name may be outside the run"))
            except (OSError, ValueError) as e:
                found.append((path, f"cannot be inspected ({getattr(e, 'strerror', None) or e})"))
    return found


def check_run(job_dirs: list[Path], linked: list[Path], run: str | None = None, where: str = "local",
              shard_plan: Path | None = None, dataset: str = "") -> RunCheck:
    """What a submission of the run would hold and leave out, and the verdict on it."""
    run = run or "<run>"
    try:
        sel = select_trials(job_dirs)
    except tally_jobs.TallyError as e:
        report_load.fail(str(e))
    trials, left_out = [], []
    for d in job_dirs:
        kept, left = job_entries(d, sel.kept, sel.left_out)
        trials += kept
        left_out += left
    skip = {p for p, _ in left_out}
    outside = [found for d in job_dirs for found in leads_outside(d, skip)]
    passing = set(sel.passed)
    passed = [t for t in trials if tally_name(t) in passing]
    note, missing = submission_rules.coverage(sel, job_dirs, run, shard_plan)
    refusals = (submission_rules.open_slot_problem(sel, run)
                + submission_rules.trajectory_problems(passed, {p for p, _ in outside}, run, where)
                + submission_rules.override_problems(job_dirs, trials, run) + missing
                + submission_rules.registry_problems(dataset, job_dirs, run))
    # check-submission's rules on the trials it holds (its config rules are override_problems'):
    # a valid TrialResult each, at least MIN_TRIALS valid ones per task.
    valid: Counter = Counter()
    checks = []
    for t in trials:
        task, ok, problem = report_submission.trial_problem(t, run, counted=True)
        valid[task] += ok
        checks += [problem] if problem else []
    # A task with an open slot is said once, with mop-up's fix (open_slot_problem).
    checks += report_submission.short_problem(valid, set(sel.tasks) - (set(sel.open) if sel.k >= report_submission.MIN_TRIALS else set()),
                                              report_submission.MIN_TRIALS,
                                              run, k=sel.k)
    if not sel.tasks:
        checks.append("no trial dirs found: nothing to submit")
    verdict = report_submission.verdict_of(job_dirs, set(sel.tasks), len(trials), valid, refusals + checks)
    check = RunCheck(job_dirs=job_dirs, linked=linked, k=sel.k, tasks=len(sel.tasks), trials=trials,
                     left_out=left_out, outside=outside, coverage=note, refusals=refusals, verdict=verdict)
    if not refusals:
        # The tree is for upload: nothing in it may hold a credential (tools/hub/credentials.py).
        findings = credentials.scan_files([str(p) for p in copied_files(check)])
        if findings:
            report_load.fail(credentials.refusal(findings, "make submission", nothing="written"))
    return check


def skipped(check: RunCheck) -> set[Path]:
    return {p for p, _ in check.left_out} | {p for p, _ in check.outside}


def copied_files(check: RunCheck) -> list[Path]:
    """The regular files a build copies: the job dirs less what is left out."""
    skip = skipped(check)
    files = []
    for src in check.job_dirs:
        for where, dirs, names in os.walk(src):
            dirs[:] = [d for d in dirs if Path(where) / d not in skip]
            files += [Path(where) / n for n in names if Path(where) / n not in skip]
    return files


def left_out_line(path: Path, why: str) -> str:
    return f"left out {safe_read.shown(str(path))}/: {why}"


def linked_job_line(job: Path) -> str:
    return (f"left out {safe_read.shown(str(job))}: a symlink to {safe_read.link_target(job)}, never followed (a job dir is "
            f"copied only where it is)")


def outside_line(path: Path, why: str) -> str:
    return f"left out {safe_read.shown(str(path))}: {why}"


def report_lines(check: RunCheck) -> list[str]:
    """What is left out and why, and the dataset's coverage: said by check-submission, build and a dry run."""
    lines = ([left_out_line(p, why) for p, why in check.left_out] + [linked_job_line(j) for j in check.linked]
             + [outside_line(p, why) for p, why in check.outside] + [check.coverage])
    return [report_submission.display_path_in(line) for line in lines]


def verdict_label(run: str | None, job_name: str) -> str:
    """Who the verdict is on: the run by name (runs/<run>.env), else its job."""
    return f"run {run or job_name}"
