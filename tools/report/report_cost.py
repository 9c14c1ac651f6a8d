"""report_cost: a run's dollars for compare, report and results, through the cost library (tools/money/cost_jobs.py).

The figures are make cost's own (cost_jobs.cost_report: every job the run's manifest launched and
every sandbox its trials used, priced from hf jobs hardware), computed here over the tally the
comparison already holds. A bundled example (example-*) answers from its recording
(examples/state/<run>/hf-recorded.json), so it works offline; another run asks the real `hf` CLI,
each call bounded by HF_CALL_TIMEOUT, and reads the price cache (state/prices.json) only while it
is fresh: the report never writes it. A cost that cannot be known (no manifest, no recording, an
hf call that failed, a flavor with no price) is `unknown`, with why in one line; it never stops
the report. The CLI skips the cost under --dry-run.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tools import safe_read
from tools.results.report_load import REPO_ROOT, RunSettings

EXAMPLES_STATE = REPO_ROOT / "examples" / "state"


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def unknown(why: str) -> dict:
    return {"known": False, "why": safe_read.clip(why, 400)}


def fresh_cache(settings: RunSettings, now: float | None = None) -> Path | None:
    """state/prices.json when it is fresh enough to be read as it is (so cost_prices never rewrites it)."""
    cache = settings.state_root / "prices.json"
    try:
        doc = json.loads(safe_read.read_regular(cache, safe_read.TALLY_CAP, "a price cache"))
        age = (time.time() if now is None else now) - float(doc.get("read_epoch", 0))
    except (OSError, safe_read.Unreadable, ValueError, TypeError, AttributeError):
        return None
    return cache if age <= settings.prices_max_age else None


def run_cost(settings: RunSettings, tally: dict, state_dir: Path | None = None,
             recorded: Path | None = None) -> dict:
    """{known, total_usd, usd_per_pass (per passed attempt; at k = 1 per passed task, the same count),
    usd_per_scored_attempt, per_role, prices, price_source} and, when sandboxes created while the
    run ran are not counted (another's, docs/cost.md §5), also
    {unattributed_sandboxes, unattributed_note}; or {known: false, why}. state_dir/recorded default
    as make cost's (scripts/cost.sh)."""
    # heavy (the hf calls' code): loaded only when a cost is asked for
    from tools.money import cost_hf
    from tools.money import cost_jobs
    from tools.money import cost_prices
    from tools.money import cost_sandboxes  # noqa: PLC0415
    example = settings.run.startswith("example-")
    if state_dir is None:
        state_dir = EXAMPLES_STATE / settings.run if example else settings.state_dir
    if recorded is None and example:
        recorded = state_dir / "hf-recorded.json"
    manifest = state_dir / "manifest.jsonl"
    # Absent means nothing was launched from this clone. Anything else at that path (a FIFO, a
    # directory, a file past its cap) is cost_jobs' to name: it is never taken for "no manifest".
    if not os.path.lexists(manifest) and example:
        return unknown(f"a bundled example with no recorded jobs ({_rel(manifest)} does not exist)")
    if not os.path.lexists(manifest):
        return unknown(f"no manifest at {_rel(manifest)} (no job of this run was launched from this clone)")
    if recorded is not None and not recorded.is_file():
        return unknown(f"no recorded hf answers at {_rel(recorded)} (a bundled example never calls HF)")
    try:
        hf = cost_hf.RecordedHf.load(recorded) if recorded else cost_hf.LiveHf(timeout=settings.call_timeout)
        prices = cost_prices.load_prices(hf, None if recorded else fresh_cache(settings), settings.prices_max_age)
        doc = cost_jobs.cost_report(hf, prices, run=settings.run, project_label=settings.project_label,
                                    namespace=settings.namespace or None, manifest=manifest, report=tally)
    except (cost_hf.HfFailed, cost_hf.CostError, OSError, ValueError, KeyError, TypeError) as e:
        return unknown(f"{getattr(e, 'message', None) or e}")
    if doc["problems"]:
        more = f" (and {len(doc['problems']) - 1} more)" if len(doc["problems"]) > 1 else ""
        return unknown(f"{doc['problems'][0]}{more}; make cost RUN={settings.run} shows every job")
    if doc["unpriced_jobs"]:
        return unknown(f"{doc['unpriced_jobs']} job(s) ran on a flavor with no price ({prices.label})")
    if not doc["jobs"]:
        return unknown(f"no job found for the run ({_rel(manifest)} lists none)")
    known = {"known": True, "total_usd": doc["total_usd"], "usd_per_pass": doc["usd_per_passed_attempt"],
             "usd_per_scored_attempt": doc["usd_per_scored_attempt"],
             "per_role": {role: v["cost_usd"] for role, v in doc["per_role"].items()},
             "gpu_hours": doc["gpu_hours"], "prices": doc["prices"]["label"], "price_source": doc["prices"]["source"]}
    if doc["unattributed_sandboxes"]:
        known.update(unattributed_sandboxes=doc["unattributed_sandboxes"],
                     unattributed_note=cost_sandboxes.unattributed_note(doc["unattributed_sandbox_jobs"]))
    return known


def attach_costs(cmp: dict, tallies: list[dict]) -> None:
    """Each named run's cost into its comparison row (a tally file or job dir keeps cost None)."""
    for row, tally in zip(cmp["runs"], tallies):
        settings = tally.get("_settings")
        if settings is not None:
            row["cost"] = run_cost(settings, tally)
