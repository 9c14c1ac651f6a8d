"""submission_plan: what make submission writes, decided before anything is (every refusal changes
nothing), and the build that writes it: the run's job dirs copied with only their slot-filling
trial dirs (tools/hub/submission_verdict.py check_run, the same check make check-submission makes),
into a temp dir beside the destination, then renamed into place."""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from tools.results import report_load
from tools import safe_read
from tools.hub.submission_meta import Metadata, metadata_yaml, submission_dir, with_recorded_provider
from tools.hub.submission_verdict import RunCheck, check_run, run_job_dirs, skipped


@dataclass(frozen=True)
class Plan:
    dest: Path                        # the <agent>__<model> dir
    metadata: str                     # metadata.yaml's text
    copies: list[tuple[Path, Path]]   # (job dir of the run, its copy in dest)
    check: RunCheck                   # what the copies hold and leave out, and the verdict on it

    @property
    def trials(self) -> list[Path]:
        return self.check.trials

    @property
    def k(self) -> int:
        return self.check.k

    @property
    def tasks(self) -> int:
        return self.check.tasks

    @property
    def problems(self) -> list[str]:
        """Why nothing is written: make submission's refusals (the verdict may say more)."""
        return self.check.refusals


def check_out(out: Path) -> None:
    """OUT is a directory of the user's: not a file, a device, a pseudo filesystem, or /."""
    real = Path(os.path.realpath(out))
    if real == Path("/") or any(real == Path(p) or Path(p) in real.parents for p in ("/proc", "/sys", "/dev")):
        report_load.fail(f"OUT={out} is {'the filesystem root' if real == Path('/') else 'a system directory'}: give a "
                         f"directory of your own (OUT=. builds ./submissions/...)")
    if os.path.lexists(out) and not out.is_dir():
        report_load.fail(f"OUT={out} exists and is not a directory: give a directory (OUT=. builds ./submissions/...)")


def run_dirs(jobs_dir: Path, job_name: str, out: Path, dest: Path, run: str | None = None,
             model: str | None = None) -> tuple[list[Path], list[Path]]:
    """(the run's job dirs to submit, those whose name is a symlink: submission_verdict.run_job_dirs);
    refusals change nothing. OUT may not overlap them."""
    job_dirs, linked = run_job_dirs(jobs_dir, job_name, run, model)
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
    job_dirs, linked = run_dirs(jobs_dir, job_name, out, dest, run, model)
    if os.path.lexists(dest) and not rebuild:
        report_load.fail(f"{dest} already exists; nothing was changed. Remove it (rm -r -- {shlex.quote(str(dest))}) "
                         f"or give another OUT=dir")
    check = check_run(job_dirs, linked, run, where, shard_plan, dataset)
    meta = with_recorded_provider(meta, check.trials)
    return Plan(dest=dest, metadata=metadata_yaml(meta), copies=[(d, dest / d.name) for d in job_dirs], check=check)


def build(plan: Plan) -> None:
    """Write the tree: into a temp dir beside it, then renamed into place (all or nothing)."""
    tmp = plan.dest.with_name(f".{plan.dest.name}.tmp-{os.getpid()}")
    try:
        plan.dest.parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        (tmp / "metadata.yaml").write_text(plan.metadata, encoding="utf-8")
        left_out = skipped(plan.check)
        for src, dst in plan.copies:
            # symlinks=True: a link is copied as a link, never followed out of the job.
            # shutil refuses a FIFO or device (SpecialFileError) instead of hanging on it.
            shutil.copytree(src, tmp / dst.name, symlinks=True,
                            ignore=lambda where, names: [n for n in names if Path(where) / n in left_out])
        os.rename(tmp, plan.dest)
    except (OSError, shutil.Error) as e:
        shutil.rmtree(tmp, ignore_errors=True)  # only the temp dir this call made
        report_load.fail(f"cannot build {plan.dest}: {safe_read.clip(str(e), 500)}; nothing was written there")

