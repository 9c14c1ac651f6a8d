"""submission_meta: a submission's metadata.yaml (the leaderboard's own fields, derived from a run's
settings where the run file does not say), and where the submission goes
(OUT/submissions/terminal-bench/<version>/<agent>__<model>/). make submission and make submit both
build it from the same settings options (settings_options)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import click
import yaml

from tools import safe_read
from tools.results import report_load

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
        """Every field is required by the leaderboard: the empty ones, by setting name. The
        provider is not among them: when MODEL_PROVIDER is empty it is what the trials recorded
        (with_recorded_provider), never empty."""
        settings = {"agent_url": "AGENT_URL", "agent_display_name": "AGENT_DISPLAY_NAME",
                    "agent_org_display_name": "AGENT_ORG_DISPLAY_NAME", "model_name": "MODEL",
                    "model_display_name": "MODEL_DISPLAY_NAME", "model_org_display_name": "MODEL_ORG_DISPLAY_NAME"}
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
    "claude-code": ("Claude Code", "Anthropic", "https://github.com/anthropics/claude-code"),
    "codex": ("Codex CLI", "OpenAI", "https://github.com/openai/codex"),
}
# harbor writes in each trial's result.json the provider the agent called the model through
# (agent_info.model_info.provider: harbor/agents/base.py to_agent_info). It follows the protocol the
# agent speaks to the run's server: "openai" for terminus-2 or codex (--model openai/<model>),
# "anthropic" for claude-code on the engine's Anthropic route (--model anthropic/<model>).
# metadata.yaml says what its trials say; "openai" only when no trial says anything.
DEFAULT_MODEL_PROVIDER = "openai"
PROVIDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


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
        model_provider=model_provider.strip(),
        model_display_name=model_display_name or name,
        model_org_display_name=model_org_display_name or namespace,
    )


def recorded_provider(trials: Iterable[Path]) -> str:
    """The provider the trials recorded for the model (result.json agent_info.model_info.provider),
    DEFAULT_MODEL_PROVIDER when none records one. Refused, naming a trial and the fix, when two
    trials disagree or one records something that is not a provider's name."""
    seen: dict[str, Path] = {}
    for trial in trials:
        try:
            result = safe_read.read_json_object(trial / "result.json")
        except (OSError, safe_read.Unreadable):
            continue  # a trial the submission holds was read by its check already; nothing to add
        info = result.get("agent_info")
        model_info = info.get("model_info") if isinstance(info, dict) else None
        provider = model_info.get("provider") if isinstance(model_info, dict) else None
        if provider is None:
            continue
        if not isinstance(provider, str) or not PROVIDER_NAME.fullmatch(provider):
            report_load.fail(f"{safe_read.shown(str(trial))}/result.json records model provider "
                             f"{safe_read.shown(repr(provider))[:80]}, not a provider's name: set MODEL_PROVIDER")
        seen.setdefault(provider, trial)
    if len(seen) > 1:
        named = ", ".join(f"{p} ({safe_read.shown(str(t))})" for p, t in sorted(seen.items()))
        report_load.fail(f"the run's trials record different model providers: {named}; set MODEL_PROVIDER "
                         f"to the one metadata.yaml should say")
    return next(iter(seen), DEFAULT_MODEL_PROVIDER)


def with_recorded_provider(meta: Metadata, trials: Iterable[Path]) -> Metadata:
    """META with its provider: MODEL_PROVIDER when set, else what the trials recorded."""
    return meta if meta.model_provider else replace(meta, model_provider=recorded_provider(trials))


def version_of(dataset_repo: str) -> str:
    """The leaderboard version dir from the dataset's name: .../terminal-bench-2.1 gives 2.1."""
    m = re.search(r"terminal-bench-([0-9]+(?:\.[0-9]+)*)(?:\.git)?/*$", dataset_repo or "")
    if not m:
        report_load.fail(f"cannot tell the Terminal-Bench version from DATASET_REPO {dataset_repo!r}: "
                         f"set LEADERBOARD_VERSION (e.g. 2.0)")
    return m[1]


def name_part(text: str) -> str:
    """A display name as one path component: spaces become '-', only [A-Za-z0-9._-] stay."""
    part = re.sub(r"[^A-Za-z0-9._-]", "", re.sub(r"\s+", "-", text.strip()))
    return part.strip(".") or "unnamed"


def submission_dir(out: Path, version: str, meta: Metadata) -> Path:
    """OUT/submissions/terminal-bench/<version>/<agent>__<model>/."""
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)*", version):
        report_load.fail(f"leaderboard version must look like 2.0 or 2.1, got {version!r} "
                         f"(set LEADERBOARD_VERSION)")
    name = f"{name_part(meta.agent_display_name)}__{name_part(meta.model_display_name)}"
    return out / "submissions" / "terminal-bench" / version / name


def settings_options(f):
    """The run's settings the metadata comes from (empty: derived, see resolve_metadata)."""
    for name, help_text in reversed([
        ("--agent", "harbor's agent name (AGENT)"), ("--model", "the HF model id served (MODEL)"),
        ("--dataset-repo", "the dataset's URL (DATASET_REPO)"),
        ("--dataset", "the registry dataset, org/name[@version] (DATASET)"),
        ("--agent-display-name", "AGENT_DISPLAY_NAME"), ("--agent-org-display-name", "AGENT_ORG_DISPLAY_NAME"),
        ("--agent-url", "AGENT_URL"), ("--model-provider", "MODEL_PROVIDER"),
        ("--model-display-name", "MODEL_DISPLAY_NAME"), ("--model-org-display-name", "MODEL_ORG_DISPLAY_NAME"),
        ("--version", "LEADERBOARD_VERSION"),
    ]):
        f = click.option(name, default="", help=help_text)(f)
    return f
