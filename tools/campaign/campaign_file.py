"""A campaign file, campaigns/<name>.env: which runs, and the one budget and ceiling over them.

It is read as data, by the settings' own reader (tools/settings.py read_file): never sourced, a
line that is not NAME=value, a comment or a blank line is refused by file and line, and so is a
name that is not one of KEYS below, a value of the wrong type, a run named twice or a run with
no runs/<run>.env. Its text is never shown in a refusal (it may hold a secret).

    RUNS="qwen-t2 gptoss-t2"   # required: the runs, in the order they start
    MAX_COST=150               # required: the campaign's one ceiling, USD, over every run and server
    MAX_AT_ONCE=4              # trials at once over every run (empty: the plan's infra curve)
    DEADLINE=48h               # make plan CAMPAIGN=…: the wall-clock budget (empty: none)
    COST_POLL=60               # seconds between two measures of the campaign's spend
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tools import fmt
from tools import settings as run_settings
from tools import settings_types

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
USD = re.compile(r"[0-9]+(\.[0-9]+)?")
# Each key, what it must be, and the refusal's phrase for it.
KEYS = {
    "RUNS": "the campaign's runs, names of runs/<run>.env separated by spaces",
    "MAX_COST": "a positive number of US dollars",
    "MAX_AT_ONCE": "a whole number of trials at once, 1 to 1000 (empty: the plan's infra curve decides)",
    "DEADLINE": "a duration, <number>[s|m|h|d] (empty: none)",
    "COST_POLL": "a whole number of seconds, 1 to 86400",
}
REQUIRED = ("RUNS", "MAX_COST")


class CampaignError(Exception):
    """A refusal: one line that names the problem and the fix."""


@dataclass(frozen=True)
class Campaign:
    name: str
    path: Path
    runs: tuple[str, ...]
    max_cost: float
    max_at_once: int | None = None
    deadline_secs: float | None = None
    cost_poll: int = 60
    values: dict = field(default_factory=dict)  # every key as written (for the record)


def campaign_path(root: Path, name: str) -> Path:
    return root / "campaigns" / f"{name}.env"


def list_campaigns(root: Path) -> list[str]:
    return sorted(p.stem for p in (root / "campaigns").glob("*.env"))


def where(path: Path, root: Path, number: int) -> str:
    try:
        shown = path.relative_to(root)
    except ValueError:
        shown = path
    return f"{shown}:{number}"


def check_value(key: str, value: str, at: str) -> object:
    """The value of `key` as its type reads it, or CampaignError naming file:line and the fix."""
    def refuse() -> CampaignError:
        return CampaignError(f"{at}: {key} must be {KEYS[key]}")
    if key == "RUNS":
        try:
            runs = settings_types.split_words(value)
        except ValueError:
            raise refuse() from None
        if not runs or any(not NAME.fullmatch(r) for r in runs):
            raise refuse()
        return tuple(runs)
    if key == "MAX_COST":
        if not USD.fullmatch(value.strip()) or float(value) <= 0:
            raise refuse()
        return float(value)
    if key == "MAX_AT_ONCE":
        if value == "":
            return None
        if not value.isdigit() or not 1 <= int(value) <= 1000:
            raise refuse()
        return int(value)
    if key == "DEADLINE":
        if value == "":
            return None
        secs = fmt.parse_duration(value)
        if secs is None or secs <= 0:
            raise refuse()
        return secs
    if not value.isdigit() or not 1 <= int(value) <= 86400:  # COST_POLL
        raise refuse()
    return int(value)


def read(root: Path, name: str) -> Campaign:
    """campaigns/<name>.env under `root`, checked whole, or CampaignError (file:line, the fix)."""
    if not NAME.fullmatch(name or ""):
        raise CampaignError(f"CAMPAIGN={name!r} is not a campaign name (letters, digits, '.', '_', '-'); "
                            f"known: {' '.join(list_campaigns(root)) or 'none'} (campaigns/<name>.env)")
    path = campaign_path(root, name)
    if not path.is_file() and not path.is_symlink():
        raise CampaignError(f"unknown campaign '{name}': no campaigns/{name}.env (known: "
                            f"{' '.join(list_campaigns(root)) or 'none'}); docs/campaigns.md says how to write one")
    try:
        lines = run_settings.read_file(path, root / "campaigns")
    except run_settings.SettingsError as e:
        raise CampaignError(str(e)) from None
    values: dict[str, object] = {}
    raw: dict[str, str] = {}
    for line in lines:
        at = where(path, root, line.number)
        if line.name not in KEYS:
            hint = run_settings.closest(line.name, list(KEYS))
            raise CampaignError(f"{at}: {line.name} is not a campaign key" + (f": did you mean {hint}?" if hint else "")
                                + f" (a campaign file sets {', '.join(KEYS)}; a run's own settings go in its run file)")
        if line.op != "=" or line.name in values:
            raise CampaignError(f"{at}: {line.name} is set {'with +=' if line.op != '=' else 'a second time'}: "
                                "one NAME=value line per key")
        if any(kind == "$" for kind, _ in line.value):
            raise CampaignError(f"{at}: {line.name} names a setting ($…): a campaign file holds plain values")
        text = "".join(part for _, part in line.value)
        values[line.name] = check_value(line.name, text, at)
        raw[line.name] = text
        if line.name == "RUNS":
            check_runs(root, values["RUNS"], at)
    missing = [k for k in REQUIRED if k not in values]
    if missing:
        raise CampaignError(f"{where(path, root, len(path.read_text().splitlines()) or 1)}: the campaign sets no "
                            f"{missing[0]}: add {missing[0]}=… ({KEYS[missing[0]]})")
    return Campaign(name, path, values["RUNS"], values["MAX_COST"], values.get("MAX_AT_ONCE"),
                    values.get("DEADLINE"), values.get("COST_POLL") or 60, raw)


def check_runs(root: Path, runs: tuple[str, ...], at: str) -> None:
    seen = set()
    for run in runs:
        if run in seen:
            raise CampaignError(f"{at}: RUNS names {run} twice: a run is benched once per campaign")
        seen.add(run)
        if not (root / "runs" / f"{run}.env").is_file():
            known = sorted(p.stem for p in (root / "runs").glob("*.env"))
            hint = run_settings.closest(run, known)
            raise CampaignError(f"{at}: RUNS names {run}, which has no runs/{run}.env"
                                + (f": did you mean {hint}?" if hint else ""))
        if run.startswith("example-"):
            raise CampaignError(f"{at}: RUNS names {run}, a bundled example (frozen job dirs, never benched): "
                                "name runs of your own")
