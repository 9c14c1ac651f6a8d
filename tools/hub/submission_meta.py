"""submission_meta: a submission's metadata.yaml (the leaderboard's own fields, derived from a run's
settings where the run file does not say), and where the submission goes
(OUT/submissions/terminal-bench/<version>/<agent>__<model>/). make submission and make submit both
build it from the same settings options (settings_options)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import click
import yaml

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
