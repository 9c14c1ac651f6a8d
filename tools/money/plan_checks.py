"""plan_checks: what make plan takes, and each refusal in one line.

Its one numeric option (--own, make print's configuration; the settings are TB_SETTINGS's, checked
by tools/settings.py), its usage errors in one line (make print and make reproduce keep that line as
the reason their estimate is missing), the price list (a regular file of at most PRICES_CAP, read by make cost's own
parser) and the flavors it prices, with the closest one when a flavor is not among them. The plan:
tools/money/plan.py; docs/plan.md §1 and §7.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from pathlib import Path

import click

from tools.money import cost_hf
from tools.money import cost_prices
from tools.money import plan_server
from tools import safe_read

# A price list is a table of a few dozen flavors (env/flavor-prices.tsv: 1.3 KB); it is read as a
# regular file of at most this size, never a FIFO or a device.
PRICES_CAP = 64 * 1024


# --------------------------------------------------------------------------- the errors and the command line


class PlanError(click.ClickException):
    """A user-facing error: one line saying what and how to fix."""

    def show(self, file=None) -> None:  # in the verb's voice, not click's "Error: "
        click.echo(f"plan: {self.message}", file=file, err=True)


class PlanUsageError(PlanError):
    """A command line the tool cannot take: exit 2, as click's own usage errors, but one line."""

    exit_code = 2


class OutOfRange(click.BadParameter):
    """A value outside what make plan takes, its message already naming the setting."""


def number_text(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


class Bounded(click.ParamType):
    """A whole number, or a finite one, from `lo` to `hi`, refused as the settings' own checks word
    it ("setting N_SHARDS or N_CONCURRENT must be a whole number from 1 to 1,000, got '0'"): --own's
    values are settings make print hands over as they are. click's
    ranges let nan through (every comparison with it is false)."""

    name = "number"

    def __init__(self, lo: float, hi: float, subject: str, whole: bool = True):
        self.lo, self.hi, self.subject, self.whole = lo, hi, subject, whole

    def convert(self, value, param, ctx):
        number = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = value  # a default
        else:
            try:
                number = int(value) if self.whole else float(value)
            except (TypeError, ValueError):
                pass
        if number is None or not math.isfinite(number) or not self.lo <= number <= self.hi:
            raise OutOfRange(f"{self.subject} must be {'a whole number' if self.whole else 'a number'} from "
                             f"{number_text(self.lo)} to {number_text(self.hi)}, got "
                             f"'{safe_read.clip(safe_read.printable(str(value)), 40)}' ({param.opts[0]})",
                             ctx=ctx, param=param)
        return number


class PlanCommand(click.Command):
    """click's usage errors on one line, in the verb's voice: make print and make reproduce keep the
    tool's output after "plan: " as the reason their estimate is missing (scripts/argv.sh,
    plan_estimate), and click's own is five lines ("Usage: …", "Try …", "Error: …")."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:
            message = e.message if isinstance(e, OutOfRange) else e.format_message()
            raise PlanUsageError(" ".join(message.splitlines())) from None


# --------------------------------------------------------------------------- the settings and the flavors


def flavor_word(flavor: str) -> str:
    """A flavor as a message shows it: printable, and quoted as a shell would need it (`'h200 '`)."""
    return shlex.quote(safe_read.clip(safe_read.printable(flavor), 60))


def flavor_distance(a: str, b: str) -> int:
    """Edit distance, case-insensitive, a swap of two neighbours counting one (scripts/lib.sh's
    tools/settings.py closest, the rule every other "did you mean" here follows)."""
    a, b = a.casefold(), b.casefold()
    d = [[i + j if not i * j else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]


def closest_flavor(flavor: str, known: list[str]) -> str | None:
    """The known flavor `flavor` most likely meant: one of its family (any case) with the nearest
    count of GPUs (h200x3: h200x2, the first of the two as near), else the nearest by name when it
    is near enough to be a typo of it (as tools/settings.py closest: at most 1 + a fifth of its length apart;
    ties to the same length, then the list's order)."""
    name = flavor.strip()[:60]  # a flavor name is short: a long value is no typo of one, and costs no more
    if not name:
        return None
    family = plan_server.family_of(name).casefold()
    same = [k for k in known if family and plan_server.family_of(k).casefold() == family]
    if same:
        return min(same, key=lambda k: abs(plan_server.gpus_of(k) - plan_server.gpus_of(name)))
    best = min(known, key=lambda k: (flavor_distance(name, k), abs(len(k) - len(name))), default=None)
    return best if best is not None and flavor_distance(name, best) <= 1 + len(name) // 5 else None


def require_priced(setting: str, flavor: str, costs: Costs) -> None:
    """A flavor the price list prices, else one line: where the prices come from, the closest
    priced flavor, and the fix. Every dollar of the plan is a price from that list."""
    if flavor in costs.gpu_usd:
        return
    guess = closest_flavor(flavor, list(costs.gpu_usd))
    raise PlanError(f"{setting}={flavor_word(flavor)} has no price in {costs.source}, the price list make plan reads "
                    f"({costs.origin})." + (f" Did you mean {guess}?" if guess else "")
                    + f" Set {setting} to a flavor it lists, or add {flavor_word(flavor)}'s hourly price to it if HF "
                      f"Jobs offers it (hf jobs hardware)")


def require_gpus(flavor: str, costs: Costs, profiles: list[plan_server.Profile]) -> None:
    """A server flavor holds at least one GPU: `h200x0` would plan zero replicas. The examples are
    the priced flavors of its family, else the flavors the model's own profiles are served on."""
    if plan_server.gpus_of(flavor) == 0:
        family = plan_server.family_of(flavor)
        examples = [f for f in costs.gpu_usd if family and plan_server.family_of(f) == family] or \
            list(dict.fromkeys(p.flavor for p in sorted(profiles, key=lambda p: (p.gpus, p.flavor))))
        fix = f"e.g. {' or '.join(examples[:2])}" if examples else f"one {costs.source} prices"
        raise PlanError(f"SERVER_FLAVOR={flavor_word(flavor)} names no GPU (x0): name the flavor the model is "
                        f"served on, {fix}")


# --------------------------------------------------------------------------- the price list


@dataclass
class Costs:
    gpu_usd: dict[str, float]  # flavor -> USD/h
    port_usd: float
    sandbox_usd: float
    sandbox_flavor: str
    label: str
    source: str = "env/flavor-prices.tsv"  # the price list, as messages name it
    origin: str = "copied from HF's Jobs pricing page"  # where its prices come from


class _ReadPrices:
    """A price list already read here (a regular file under PRICES_CAP), in the one form
    tools/money/cost_prices.py's tsv_prices reads a path: read_text. So the bytes checked are the bytes
    parsed, by the same parser as make cost's offline prices."""

    def __init__(self, data: bytes):
        self.data = data

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.data.decode(encoding, "replace")


def read_price_list(path: Path) -> _ReadPrices:
    """The price list's bytes: a regular file of at most PRICES_CAP (a FIFO or a device would
    hang the plan, /dev/zero never ends), else one line saying which."""
    try:
        return _ReadPrices(safe_read.read_regular(path, PRICES_CAP, "a price list"))
    except FileNotFoundError:
        raise PlanError(f"the price list {safe_read.printable(str(path))} does not exist: pass an existing file "
                        f"(the default is env/flavor-prices.tsv)") from None
    except safe_read.Unreadable as e:
        raise PlanError(f"the price list {safe_read.printable(str(path))} is refused: {e} (a price list is a "
                        f"regular file of at most {PRICES_CAP // 1024} KiB, as env/flavor-prices.tsv)") from None


def load_costs(path: Path, sandbox_flavor: str) -> Costs:
    prices = cost_prices.tsv_prices(read_price_list(path))
    port = prices.pop("exposed-ports", 0.0)
    source = safe_read.printable(cost_hf.rel(path))
    # The bundled list is make cost's offline one (its header names the Hub page it was copied
    # from); any other is the user's own, named as itself.
    default = Path(path).resolve() == cost_prices.TSV_PRICES.resolve()
    costs = Costs(prices, port, prices.get(sandbox_flavor, 0.0), sandbox_flavor,
                  f"{source} (tools/money/cost.py's offline price list)" if default else f"{source} (--prices)",
                  source, "copied from HF's Jobs pricing page" if default else "--prices")
    require_priced("SANDBOX_FLAVOR", sandbox_flavor, costs)
    return costs
