"""submission_plan: what make submission writes, decided before anything is (every refusal changes
nothing), and the build that writes it: the run's job dirs copied with only their slot-filling
trial dirs, into a temp dir beside the destination, then renamed into place."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from tools.hub import credentials
from tools.results import report_load
from tools import safe_read
from tools.hub import submission_rules
from tools.results import tally_jobs
from tools.hub.submission_meta import Metadata, metadata_yaml, submission_dir
from tools.hub.submission_select import Selection, select_trials, tally_name


@dataclass(frozen=True)
class Plan:
    dest: Path                        # the <agent>__<model> dir
    metadata: str                     # metadata.yaml's text
    copies: list[tuple[Path, Path]]   # (job dir of the run, its copy in dest)
    trials: list[Path]                # the trial dirs copied: every task's k slot-filling trials
    left_out: list[tuple[Path, str]]  # dirs of the job dirs not copied (other trials, other dirs), and why
    linked_jobs: list[Path]           # job dir names that are symlinks: never followed, not copied
    outside: list[tuple[Path, str]]   # what could lead out of the run's tree, not copied, and why
    k: int                            # attempts per task (the first job's n_attempts)
    tasks: int
    coverage: str                     # how much of the dataset the run covers, or why that is unknown
    problems: list[str]               # why the leaderboard would not count it as it stands: a refusal


def job_entries(job_dir: Path, sel: Selection) -> tuple[list[Path], list[tuple[Path, str]]]:
    """(the trial dirs of a job that fill slots, every other dir in it with why it is left out).
    Files at the job's top (config.json, result.json, lock.json, job.log) are copied."""
    try:
        trials, refused, others = safe_read.trial_dir_entries(str(job_dir))
    except safe_read.Unreadable as e:
        report_load.fail(f"{job_dir}: {e}; nothing was written")
    kept, left = [], []
    for t in map(Path, trials):
        name = tally_name(t)
        if name in sel.kept:
            kept.append(t)
        else:
            left.append((t, sel.left_out.get(name, "not read by the tally")))
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


def check_out(out: Path) -> None:
    """OUT is a directory of the user's: not a file, a device, a pseudo filesystem, or /."""
    real = Path(os.path.realpath(out))
    if real == Path("/") or any(real == Path(p) or Path(p) in real.parents for p in ("/proc", "/sys", "/dev")):
        report_load.fail(f"OUT={out} is {'the filesystem root' if real == Path('/') else 'a system directory'}: give a "
                         f"directory of your own (OUT=. builds ./submissions/...)")
    if os.path.lexists(out) and not out.is_dir():
        report_load.fail(f"OUT={out} exists and is not a directory: give a directory (OUT=. builds ./submissions/...)")


def run_dirs(jobs_dir: Path, job_name: str, out: Path, dest: Path,
             model: str | None = None) -> tuple[list[Path], list[Path]]:
    """(the run's job dirs to submit, those whose name is a symlink); refusals change nothing. A job
    dir of the run's name that is another run's (its config.json names another job, or records
    another model than `model`, the run's MODEL) is refused: its trials are not the run's."""
    try:
        job_dirs = tally_jobs.run_job_dirs(jobs_dir, job_name)
        tally_jobs.refuse_foreign_job_dirs(job_dirs, model)
    except tally_jobs.TallyError as e:
        report_load.fail(str(e))
    # A job dir name that is a symlink could lead anywhere (~/.cache/huggingface, another run):
    # never followed, never copied, listed.
    linked = [d for d in job_dirs if d.is_symlink()]
    job_dirs = [d for d in job_dirs if not d.is_symlink()]
    if not job_dirs:
        report_load.fail(f"no job dir of {job_name!r} under {jobs_dir}: nothing to submit (make bench, or make pull)")
    seen: dict[str, Path] = {}
    for d in job_dirs:
        if d.name in seen:
            report_load.fail(f"two job dirs named {d.name}: {seen[d.name]} and {d}; a submission holds each "
                             f"job folder once. Move one aside, then run make submission again")
        seen[d.name] = d
    resolved_dest = dest.resolve()
    for d in job_dirs:
        src = d.resolve()
        if resolved_dest == src or src in resolved_dest.parents or resolved_dest in src.parents:
            report_load.fail(f"OUT ({out}) overlaps the run's job dir {d}: pick an OUT outside the jobs dir")
    return job_dirs, linked


def plan_submission(jobs_dir: Path, job_name: str, out: Path, version: str, meta: Metadata,
                    run: str | None = None, where: str = "local", shard_plan: Path | None = None,
                    model: str | None = None, dataset: str = "", rebuild: bool = False) -> Plan:
    """What build writes, decided before anything is: refusals change nothing. `rebuild`: the
    destination is make submit's own tree, which it removes before building: its being there
    is not a refusal (make submit's dry run plans over it)."""
    problems = meta.problems()
    if problems:
        report_load.fail("the leaderboard's metadata.yaml needs every field: " + "; ".join(problems))
    check_out(out)
    dest = submission_dir(out, version, meta)
    job_dirs, linked = run_dirs(jobs_dir, job_name, out, dest, model)
    if os.path.lexists(dest) and not rebuild:
        report_load.fail(f"{dest} already exists; nothing was changed. Remove it (rm -r -- {shlex.quote(str(dest))}) "
                         f"or give another OUT=dir")
    run = run or "<run>"
    try:
        sel = select_trials(job_dirs)
    except tally_jobs.TallyError as e:
        report_load.fail(str(e))
    trials, left_out = [], []
    for d in job_dirs:
        kept, left = job_entries(d, sel)
        trials += kept
        left_out += left
    skip = {p for p, _ in left_out}
    outside = [found for d in job_dirs for found in leads_outside(d, skip)]
    passing = set(sel.passed)
    passed = [t for t in trials if tally_name(t) in passing]
    note, missing = submission_rules.coverage(sel, job_dirs, run, shard_plan)
    problems = (submission_rules.open_slot_problem(sel, run) + submission_rules.trajectory_problems(passed, {p for p, _ in outside}, run, where)
                + submission_rules.override_problems(job_dirs, trials, run) + missing + submission_rules.registry_problems(dataset, job_dirs, run))
    plan = Plan(dest=dest, metadata=metadata_yaml(meta), copies=[(d, dest / d.name) for d in job_dirs],
                trials=trials, left_out=left_out, linked_jobs=linked, outside=outside, k=sel.k,
                tasks=len(sel.tasks), coverage=note, problems=problems)
    if not problems:
        # The tree is for upload: nothing in it may hold a credential (tools/hub/credentials.py).
        findings = credentials.scan_files([str(p) for p in copied_files(plan)])
        if findings:
            report_load.fail(credentials.refusal(findings, "make submission", nothing="written"))
    return plan


def skipped(plan: Plan) -> set[Path]:
    return {p for p, _ in plan.left_out} | {p for p, _ in plan.outside}


def copied_files(plan: Plan) -> list[Path]:
    """The regular files build copies: the job dirs less what is left out."""
    skip = skipped(plan)
    files = []
    for src, _ in plan.copies:
        for where, dirs, names in os.walk(src):
            dirs[:] = [d for d in dirs if Path(where) / d not in skip]
            files += [Path(where) / n for n in names if Path(where) / n not in skip]
    return files


def build(plan: Plan) -> None:
    """Write the tree: into a temp dir beside it, then renamed into place (all or nothing)."""
    tmp = plan.dest.with_name(f".{plan.dest.name}.tmp-{os.getpid()}")
    try:
        plan.dest.parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        (tmp / "metadata.yaml").write_text(plan.metadata, encoding="utf-8")
        left_out = skipped(plan)
        for src, dst in plan.copies:
            # symlinks=True: a link is copied as a link, never followed out of the job.
            # shutil refuses a FIFO or device (SpecialFileError) instead of hanging on it.
            shutil.copytree(src, tmp / dst.name, symlinks=True,
                            ignore=lambda where, names: [n for n in names if Path(where) / n in left_out])
        os.rename(tmp, plan.dest)
    except (OSError, shutil.Error) as e:
        shutil.rmtree(tmp, ignore_errors=True)  # only the temp dir this call made
        report_load.fail(f"cannot build {plan.dest}: {safe_read.clip(str(e), 500)}; nothing was written there")

