#!/usr/bin/env python3
"""submission: a run's job dirs laid out as a Terminal-Bench leaderboard submission.

Usage:
  python -m tools.submission build --jobs-dir D --job-name N --out OUT --version V
      --agent-display-name A --agent-org-display-name O --agent-url U
      --model-name M --model-provider P --model-display-name MD --model-org-display-name MO
      [--run RUN] [--dry-run]

The layout and metadata.yaml are the leaderboard's own, from the README of its Hub dataset
(https://huggingface.co/datasets/harborframework/terminal-bench-2-leaderboard, "Submission
Structure" and "Required: metadata.yaml"):

    submissions/terminal-bench/<version>/<agent>__<model>/
        metadata.yaml         agent_url, agent_display_name, agent_org_display_name,
                              models: [{model_name, model_provider, model_display_name,
                                        model_org_display_name}]
        <job-folder>/         every job dir of the run, with all its contents

The job dirs are the run's, found as the tally finds them (tools/tally.py run_job_dirs: the
job, its retry jobs, both layouts), copied as harbor wrote them: symlinks are copied as
links, never followed; nothing in the run's own dirs is moved or changed. One exception:
a trial dir with no result.json (harbor never finished it) is left out and named, since the
leaderboard reads <trial>/result.json for every trial and the dir holds no outcome. Then the tree is
checked with check-submission (tools/report.py check_submission) and the verdict printed:
the tree stays either way, so a rejected one can be looked at.

Exit codes: 0 the submission is built and meets the rules (or --dry-run printed its plan);
1 it is built and does not meet them (the verdict says why), or a user error, named.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import yaml

from tools import credentials as CR
from tools import report as R
from tools import safe_read as SR
from tools import tally_core as T

LEADERBOARD_README = "https://huggingface.co/datasets/harborframework/terminal-bench-2-leaderboard"


@dataclass(frozen=True)
class Metadata:
    """metadata.yaml's fields, as the leaderboard's README names them (one model)."""

    agent_url: str
    agent_display_name: str
    agent_org_display_name: str
    model_name: str
    model_provider: str
    model_display_name: str
    model_org_display_name: str

    def problems(self) -> list[str]:
        """Every field is required by the leaderboard: the empty ones, by setting name."""
        settings = {"agent_url": "AGENT_URL", "agent_display_name": "AGENT_DISPLAY_NAME",
                    "agent_org_display_name": "AGENT_ORG_DISPLAY_NAME", "model_name": "MODEL",
                    "model_provider": "MODEL_PROVIDER", "model_display_name": "MODEL_DISPLAY_NAME",
                    "model_org_display_name": "MODEL_ORG_DISPLAY_NAME"}
        return [f"{field} is empty (set {setting})" for field, setting in settings.items()
                if not getattr(self, field).strip()]


def metadata_yaml(meta: Metadata) -> str:
    """metadata.yaml's text: a comment saying where the format comes from, then the fields."""
    data = {
        "agent_url": meta.agent_url,
        "agent_display_name": meta.agent_display_name,
        "agent_org_display_name": meta.agent_org_display_name,
        "models": [{
            "model_name": meta.model_name,
            "model_provider": meta.model_provider,
            "model_display_name": meta.model_display_name,
            "model_org_display_name": meta.model_org_display_name,
        }],
    }
    header = (f"# Terminal-Bench leaderboard metadata (format: {LEADERBOARD_README}, README).\n"
              f"# Written by make submission from the run's settings.\n")
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000)


# What the leaderboard shows for the agents this repository runs, when the run file does not
# say: the agent's name as its authors write it, and the repository it ships in.
KNOWN_AGENTS = {
    "terminus-2": ("Terminus 2", "Terminal-Bench", "https://github.com/harbor-framework/harbor"),
    "mini-swe-agent": ("mini-SWE-agent", "SWE-agent", "https://github.com/SWE-agent/mini-swe-agent"),
}
# harbor records the model as litellm's provider/model; this repository's servers are
# OpenAI-compatible, so every trial's model_info.provider is "openai" (harbor run --model openai/...).
DEFAULT_MODEL_PROVIDER = "openai"


def resolve_metadata(agent: str, model: str, agent_display_name: str = "", agent_org_display_name: str = "",
                     agent_url: str = "", model_provider: str = "", model_display_name: str = "",
                     model_org_display_name: str = "") -> Metadata:
    """metadata.yaml's fields from a run's settings: a setting given wins, else it is derived
    from AGENT (KNOWN_AGENTS) and MODEL (its namespace and name); what cannot be derived stays
    empty, and Metadata.problems() names its setting."""
    known = KNOWN_AGENTS.get(agent, ("", "", ""))
    namespace, _, name = model.rpartition("/")
    return Metadata(
        agent_url=agent_url or known[2],
        agent_display_name=agent_display_name or known[0],
        agent_org_display_name=agent_org_display_name or known[1],
        model_name=model,
        model_provider=model_provider or DEFAULT_MODEL_PROVIDER,
        model_display_name=model_display_name or name,
        model_org_display_name=model_org_display_name or namespace,
    )


def version_of(dataset_repo: str) -> str:
    """The leaderboard version dir from the dataset's name: .../terminal-bench-2.1 gives 2.1."""
    m = re.search(r"terminal-bench-([0-9]+(?:\.[0-9]+)*)(?:\.git)?/*$", dataset_repo or "")
    if not m:
        R.fail(f"cannot tell the Terminal-Bench version from DATASET_REPO {dataset_repo!r}: "
               f"set LEADERBOARD_VERSION (e.g. 2.0)")
    return m[1]


def name_part(text: str) -> str:
    """A display name as one path component: spaces become '-', only [A-Za-z0-9._-] stay."""
    part = re.sub(r"[^A-Za-z0-9._-]", "", re.sub(r"\s+", "-", text.strip()))
    return part.strip(".") or "unnamed"


def submission_dir(out: Path, version: str, meta: Metadata) -> Path:
    """OUT/submissions/terminal-bench/<version>/<agent>__<model>/."""
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)*", version):
        R.fail(f"leaderboard version must look like 2.0 or 2.1, got {version!r} "
               f"(set LEADERBOARD_VERSION)")
    name = f"{name_part(meta.agent_display_name)}__{name_part(meta.model_display_name)}"
    return out / "submissions" / "terminal-bench" / version / name


@dataclass(frozen=True)
class Plan:
    dest: Path                        # the <agent>__<model> dir
    metadata: str                     # metadata.yaml's text
    copies: list[tuple[Path, Path]]   # (job dir of the run, its copy in dest)
    left_out: list[Path]              # crashed trial dirs (no result.json), not copied
    linked_jobs: list[Path]           # job dir names that are symlinks: never followed, not copied
    outside: list[tuple[Path, str]]   # what could lead out of the run's tree, not copied, and why


def crashed_trial_dirs(job_dir: Path) -> list[Path]:
    """Trial dirs of a job with no result.json: a trial harbor never finished (killed, crashed).

    The leaderboard reads `<trial>/result.json` for every trial of a job folder, so such a
    dir is only noise that fails its check; it holds no outcome. Its attempt slot is what
    mop-up fills (a retry job), so leaving it out loses nothing the leaderboard counts, and
    the run's own copy stays where it is.
    """
    try:
        trials, _, _ = SR.trial_dir_entries(str(job_dir))
    except SR.Unreadable:
        return []  # check-submission names the unreadable job dir
    return [Path(t) for t in trials if not os.path.lexists(os.path.join(t, "result.json"))]


def leads_outside(job_dir: Path) -> list[tuple[Path, str]]:
    """What in a job dir could carry something from outside the run into the submission, and why:
    a symlink whose target is absolute or leaves the job dir (an upload reads through it: the HF
    token, /etc/passwd), and a file with a second hard link (its other name may be a token file).
    Symlinks inside the job are copied as links; nothing is ever followed."""
    found = []
    root = os.path.realpath(job_dir)
    for where, dirs, files in os.walk(job_dir):
        for name in sorted(dirs + files):
            path = Path(where) / name
            try:
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    target = os.readlink(path)
                    resolved = os.path.realpath(os.path.join(where, target))
                    if os.path.isabs(target) or os.path.commonpath([root, resolved]) != root:
                        found.append((path, f"a symlink to {SR.link_target(path)}, out of the job dir"))
                elif stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                    found.append((path, "a hard link: its other name may be outside the run"))
            except (OSError, ValueError) as e:
                found.append((path, f"cannot be inspected ({getattr(e, 'strerror', None) or e})"))
    return found


def check_out(out: Path) -> None:
    """OUT is a directory of the user's: not a file, a device, a pseudo filesystem, or /."""
    real = Path(os.path.realpath(out))
    if real == Path("/") or any(real == Path(p) or Path(p) in real.parents for p in ("/proc", "/sys", "/dev")):
        R.fail(f"OUT={out} is {'the filesystem root' if real == Path('/') else 'a system directory'}: give a "
               f"directory of your own (OUT=. builds ./submissions/...)")
    if os.path.lexists(out) and not out.is_dir():
        R.fail(f"OUT={out} exists and is not a directory: give a directory (OUT=. builds ./submissions/...)")


def plan_submission(jobs_dir: Path, job_name: str, out: Path, version: str, meta: Metadata) -> Plan:
    """What build writes, decided before anything is: refusals change nothing."""
    problems = meta.problems()
    if problems:
        R.fail("the leaderboard's metadata.yaml needs every field: " + "; ".join(problems))
    check_out(out)
    try:
        job_dirs = T.run_job_dirs(jobs_dir, job_name)
    except T.TallyError as e:
        R.fail(str(e))
    # A job dir name that is a symlink could lead anywhere (~/.cache/huggingface, another run):
    # never followed, never copied, listed.
    linked = [d for d in job_dirs if d.is_symlink()]
    job_dirs = [d for d in job_dirs if not d.is_symlink()]
    if not job_dirs:
        R.fail(f"no job dir of {job_name!r} under {jobs_dir}: nothing to submit (make bench, or make pull)")
    dest = submission_dir(out, version, meta)
    seen: dict[str, Path] = {}
    for d in job_dirs:
        if d.name in seen:
            R.fail(f"two job dirs named {d.name}: {seen[d.name]} and {d}; a submission holds each "
                   f"job folder once. Move one aside, then run make submission again")
        seen[d.name] = d
    resolved_dest = dest.resolve()
    for d in job_dirs:
        src = d.resolve()
        if resolved_dest == src or src in resolved_dest.parents or resolved_dest in src.parents:
            R.fail(f"OUT ({out}) overlaps the run's job dir {d}: pick an OUT outside the jobs dir")
    if os.path.lexists(dest):
        R.fail(f"{dest} already exists; nothing was changed. Remove it (rm -r -- {shlex.quote(str(dest))}) "
               f"or give another OUT=dir")
    plan = Plan(dest=dest, metadata=metadata_yaml(meta), copies=[(d, dest / d.name) for d in job_dirs],
                left_out=[t for d in job_dirs for t in crashed_trial_dirs(d)], linked_jobs=linked,
                outside=[found for d in job_dirs for found in leads_outside(d)])
    # The tree is for upload: nothing in it may hold a credential (tools/credentials.py).
    findings = CR.scan_files([str(p) for p in copied_files(plan)])
    if findings:
        R.fail(CR.refusal(findings, "make submission", nothing="written"))
    return plan


def copied_files(plan: Plan) -> list[Path]:
    """The regular files build copies: the job dirs less what is left out."""
    skip = set(plan.left_out) | {p for p, _ in plan.outside}
    files = []
    for src, _ in plan.copies:
        for where, dirs, names in os.walk(src):
            dirs[:] = [d for d in dirs if Path(where) / d not in skip]
            files += [Path(where) / n for n in names if Path(where) / n not in skip]
    return files


def count_files(root: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(root))


def build(plan: Plan) -> None:
    """Write the tree: into a temp dir beside it, then renamed into place (all or nothing)."""
    tmp = plan.dest.with_name(f".{plan.dest.name}.tmp-{os.getpid()}")
    try:
        plan.dest.parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        (tmp / "metadata.yaml").write_text(plan.metadata, encoding="utf-8")
        left_out = set(plan.left_out) | {p for p, _ in plan.outside}
        for src, dst in plan.copies:
            # symlinks=True: a link is copied as a link, never followed out of the job.
            # shutil refuses a FIFO or device (SpecialFileError) instead of hanging on it.
            shutil.copytree(src, tmp / dst.name, symlinks=True,
                            ignore=lambda where, names: [n for n in names if Path(where) / n in left_out])
        os.rename(tmp, plan.dest)
    except (OSError, shutil.Error) as e:
        shutil.rmtree(tmp, ignore_errors=True)  # only the temp dir this call made
        R.fail(f"cannot build {plan.dest}: {SR.clip(str(e), 500)}; nothing was written there")


def left_out_line(trial: Path) -> str:
    return (f"left out {SR.shown(str(trial))}/: no result.json (a trial harbor never finished; "
            f"its attempt slot is for mop-up to fill)")


def linked_job_line(job: Path) -> str:
    return (f"left out {SR.shown(str(job))}: a symlink to {SR.link_target(job)}, never followed (a job dir is "
            f"copied only where it is)")


def outside_line(path: Path, why: str) -> str:
    return f"left out {SR.shown(str(path))}: {why}"


def dry_run_text(plan: Plan) -> str:
    lines = [f"would create {plan.dest}/",
             f"would write {plan.dest / 'metadata.yaml'}:"]
    lines += [f"    {line}" for line in plan.metadata.splitlines()]
    for src, dst in plan.copies:
        lines.append(f"would copy {src}/ to {dst}/ ({count_files(src)} files, as harbor wrote them)")
    lines += [left_out_line(t) for t in plan.left_out]
    lines += [linked_job_line(j) for j in plan.linked_jobs]
    lines += [outside_line(p, why) for p, why in plan.outside]
    lines.append(f"would then check it: python -m tools.report check-submission {plan.dest}/<job> ...")
    return "\n".join(lines) + "\n"


@click.group(help=__doc__.split("\n\n")[0])
def cli() -> None:
    pass


def settings_options(f):
    """The run's settings the metadata comes from (empty: derived, see resolve_metadata)."""
    for name, help_text in reversed([
        ("--agent", "harbor's agent name (AGENT)"), ("--model", "the HF model id served (MODEL)"),
        ("--dataset-repo", "the dataset's URL (DATASET_REPO)"),
        ("--agent-display-name", "AGENT_DISPLAY_NAME"), ("--agent-org-display-name", "AGENT_ORG_DISPLAY_NAME"),
        ("--agent-url", "AGENT_URL"), ("--model-provider", "MODEL_PROVIDER"),
        ("--model-display-name", "MODEL_DISPLAY_NAME"), ("--model-org-display-name", "MODEL_ORG_DISPLAY_NAME"),
        ("--version", "LEADERBOARD_VERSION"),
    ]):
        f = click.option(name, default="", help=help_text)(f)
    return f


@cli.command("build")
@click.option("--jobs-dir", required=True, type=click.Path(path_type=Path))
@click.option("--job-name", required=True)
@click.option("--out", required=True, type=click.Path(path_type=Path),
              help="The submission goes under OUT/submissions/terminal-bench/<version>/.")
@settings_options
@click.option("--run", default=None, help="The run's name, for check-submission's advice (runs/<run>.env).")
@click.option("--dry-run", is_flag=True, help="Print what would be written, and write nothing.")
def build_cmd(jobs_dir, job_name, out, run, dry_run, **settings):
    """Build the submission tree of a run, then check it against the leaderboard rules."""
    meta = resolve_metadata(**{k: v for k, v in settings.items() if k not in ("dataset_repo", "version")})
    version = settings["version"] or version_of(settings["dataset_repo"])
    plan = plan_submission(jobs_dir, job_name, out, version, meta)
    if dry_run:
        R.echo(dry_run_text(plan), nl=False)
        return
    build(plan)
    R.echo(f"submission: built {plan.dest}/ (metadata.yaml and {len(plan.copies)} job dirs)", err=True)
    for trial in plan.left_out:
        R.echo(f"submission: {left_out_line(trial)}", err=True)
    for job in plan.linked_jobs:
        R.echo(f"submission: {linked_job_line(job)}", err=True)
    for path, why in plan.outside:
        R.echo(f"submission: {outside_line(path, why)}", err=True)
    verdict = R.check_submission([dst for _, dst in plan.copies], run=run)
    R.echo(R.submission_markdown(f"submission {plan.dest}", verdict), nl=False)
    if not verdict["ok"]:
        R.echo("submission: the tree is built, so you can look at it; fix the problems above "
               "and build it again before you open a pull request", err=True)
        sys.exit(1)


if __name__ == "__main__":
    cli()
