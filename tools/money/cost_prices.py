"""cost_prices: the HF Jobs price list, where it came from, and how far it may be trusted.

`hf jobs hardware --json` is asked and cached in <state-root>/prices.json for max_age seconds;
when the Hub cannot be asked, the last cache (however old), else env/flavor-prices.tsv, the
offline copy make plan also reads. A price is a finite number from 0 to PRICE_CAP, and only a CPU
flavor may be free: anything else is left out, and said.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tools.money import cost_hf
from tools import fmt
from tools import safe_read

TSV_PRICES = cost_hf.REPO_ROOT / "env" / "flavor-prices.tsv"
PRICE_CAP = 10_000.0                  # USD per hour: h200x8 costs $40
CLOCK_SKEW = 300.0                    # seconds a cache's read_epoch may be ahead of this clock


def valid_prices(raw: Any, gpu: dict) -> tuple[dict[str, float], list[str]]:
    """({flavor: USD/h}, what was discarded): a price is a finite number from 0 to PRICE_CAP, and
    only a CPU flavor may be free (a GPU at $0 would make the ceiling inert)."""
    kept, dropped = {}, []
    for flavor, value in (raw.items() if isinstance(raw, dict) else []):
        price = cost_hf.finite_in(value, 0.0, PRICE_CAP)
        is_gpu = gpu.get(flavor) if isinstance(gpu.get(flavor), bool) else not str(flavor).startswith("cpu")
        if not isinstance(flavor, str) or price is None or (price == 0 and is_gpu):
            dropped.append(f"{safe_read.clip(repr(flavor), 60)}: {safe_read.clip(repr(value), 60)}")
        else:
            kept[flavor] = price
    return kept, dropped


@dataclass
class Prices:
    per_hour: dict[str, float]  # flavor -> USD per hour
    gpu: dict[str, bool]  # flavor -> has an accelerator
    source: str  # hub | cache | recorded | tsv
    label: str  # said beside every figure
    read_at: str | None
    exposed_port: float  # USD per hour per job with an exposed port (only in the TSV)

    def price(self, flavor: str | None) -> float | None:
        return self.per_hour.get(flavor or "")

    def is_gpu(self, flavor: str | None) -> bool:
        if flavor in self.gpu:
            return self.gpu[flavor]
        return bool(flavor) and not str(flavor).startswith("cpu")

    def as_json(self) -> dict:
        return {"source": self.source, "label": self.label, "read_at": self.read_at,
                "exposed_port_usd_per_hour": self.exposed_port,
                "prices": {k: {"usd_per_hour": v, "gpu": self.is_gpu(k)} for k, v in sorted(self.per_hour.items())}}


def parse_hardware(rows: Any) -> tuple[dict[str, float], dict[str, bool]]:
    """`hf jobs hardware --json` rows -> ({flavor: USD/h}, {flavor: gpu?}). "free" is 0."""
    if not isinstance(rows, list):
        raise cost_hf.HfFailed("hf jobs hardware --json: not a JSON list")
    per_hour, gpu = {}, {}
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("name"), str):
            continue
        cost = str(row.get("cost/hour", "")).strip()
        if cost == "free":
            per_hour[row["name"]] = 0.0
        elif (m := re.fullmatch(r"\$([0-9]{1,9}(?:\.[0-9]+)?)", cost.replace(",", ""))) and float(m.group(1)) > 0:
            per_hour[row["name"]] = float(m.group(1))
        else:
            continue
        gpu[row["name"]] = bool(row.get("accelerator"))
    per_hour, _ = valid_prices(per_hour, gpu)  # "free" for a GPU flavor, a price past the cap: left out
    if not per_hour:
        raise cost_hf.HfFailed("hf jobs hardware --json: no flavor with a price (fields name, cost/hour)")
    return per_hour, gpu


def tsv_prices(path: Path | None = None) -> dict[str, float]:
    out = {}
    try:
        for line in (path or TSV_PRICES).read_text(encoding="utf-8").splitlines():
            parts = line.split("\t")
            if line.startswith("#") or len(parts) != 2:
                continue
            try:
                out[parts[0]] = float(parts[1])
            except ValueError:
                continue
    except OSError:
        pass
    exposed = out.pop("exposed-ports", None)
    out, _ = valid_prices(out, {})
    if cost_hf.finite_in(exposed, 0.0, PRICE_CAP) is not None:
        out["exposed-ports"] = exposed
    return out


def read_price_cache(cache: Path | None, where: str, now: float) -> tuple[dict | None, str | None]:
    """(the cache as {prices, gpu, read_at, read_epoch}, or None; why it was discarded, or None).

    A cache is used whole or not at all: a price, a read time or a field that fails its check
    discards it (the Hub is asked again, or the TSV used), and the reason is said beside the figures.
    """
    if cache is None or not cache.is_file():
        return None, None
    try:
        raw = safe_read.parse_json(safe_read.read_regular(cache, 1 << 20, what="a price cache"))
    except (OSError, safe_read.Unreadable) as e:
        return None, f"the price cache {cost_hf.rel(cache)} is unreadable ({safe_read.clip(str(e), 120)}), not used"
    if not isinstance(raw, dict) or raw.get("endpoint") != where:
        return None, None  # another endpoint's prices (or not ours): not an error, just not used
    gpu = raw.get("gpu") if isinstance(raw.get("gpu"), dict) else {}
    gpu = {k: v for k, v in gpu.items() if isinstance(k, str) and isinstance(v, bool)}
    prices, dropped = valid_prices(raw.get("prices"), gpu)
    read_epoch = cost_hf.finite_in(raw.get("read_epoch"), 0.0, now + CLOCK_SKEW)
    problems = []
    if not isinstance(raw.get("prices"), dict) or not (prices or dropped):
        problems.append("no prices")
    if dropped:
        problems.append("prices that are not 0 to $10,000/h (or a free GPU): " + ", ".join(dropped[:3]))
    if read_epoch is None:
        problems.append(f"read_epoch {safe_read.clip(repr(raw.get('read_epoch')), 40)} is not a past time")
    if not isinstance(raw.get("read_at"), str):
        problems.append("no read_at")
    if problems:
        return None, f"the price cache {cost_hf.rel(cache)} was discarded ({'; '.join(problems)})"
    return {"prices": prices, "gpu": gpu, "read_at": safe_read.printable(raw["read_at"])[:40], "read_epoch": read_epoch}, None


def load_prices(hf, cache: Path | None, max_age: float, now: float | None = None) -> Prices:
    """The price list: fresh cache, else the Hub (cached), else a stale cache, else the TSV."""
    now = time.time() if now is None else now
    tsv = tsv_prices()
    exposed = tsv.get("exposed-ports", 0.0)
    where = getattr(hf, "where", "")
    if isinstance(hf, cost_hf.RecordedHf):
        per_hour, gpu = parse_hardware(cost_hf.hf_json(hf, "jobs", "hardware", "--json"))
        return Prices(per_hour, gpu, "recorded", f"hf jobs hardware, {where}", hf.recorded_at, exposed)
    cached, discarded = read_price_cache(cache, where, now)
    if cached and now - cached["read_epoch"] <= max_age:
        return Prices(cached["prices"], cached["gpu"], "cache",
                      f"hf jobs hardware, read {cached['read_at']} (cached in {cost_hf.rel(cache)})", cached["read_at"], exposed)
    try:
        per_hour, gpu = parse_hardware(cost_hf.hf_json(hf, "jobs", "hardware", "--json"))
    except cost_hf.HfFailed as e:
        why = str(e) + (f"; {discarded}" if discarded else "")
        if cached:
            return Prices(cached["prices"], cached["gpu"], "cache",
                          f"hf jobs hardware, read {cached['read_at']} (stale cache: {why})", cached["read_at"], exposed)
        prices = {k: v for k, v in tsv.items() if k != "exposed-ports"}
        return Prices(prices, {}, "tsv", f"env/flavor-prices.tsv, an offline copy (hf jobs hardware unavailable: {why})",
                      None, exposed)
    read_at = fmt.stamp(datetime.fromtimestamp(now, timezone.utc))
    if cache is not None and not getattr(hf, "dry_run", False):
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            safe_read.write_atomic(cache, json.dumps({"read_at": read_at, "read_epoch": now, "endpoint": where,
                                               "source": "hf jobs hardware --json", "prices": per_hour,
                                               "gpu": gpu}, indent=1, sort_keys=True) + "\n")
        except OSError:
            pass  # a cache we cannot write costs one more call next time, nothing else
    return Prices(per_hour, gpu, "hub", f"hf jobs hardware, read {read_at}", read_at, exposed)


# --------------------------------------------------------------------------- the run's records
