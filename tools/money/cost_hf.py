"""cost_hf: the hf CLI the cost tools ask, and the checked facts of its answers.

Every fact about a job comes from the real `hf` CLI (huggingface_hub 2.4.0) with a pinned output
format (`--json`; logs are raw lines), HF_HUB_DISABLE_UPDATE_CHECK=1, and each call bounded in
time (LiveHf); a bundled example answers the same calls from a recording (RecordedHf). What an
answer may hold is checked here, once: a job id is a plain name, a time is of the years YEARS, a
number is finite and in range (tools/money/cost.py's docstring lists the facts relied on).
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from tools import fmt, hf_client
from tools import safe_read

REPO_ROOT = Path(__file__).resolve().parents[2]
SANDBOX_LABEL = "hf-sandbox=1"  # huggingface_hub 2.4.0 _sandbox.py: SANDBOX_LABEL = "hf-sandbox", value "1"


# What a price, a duration and a time may be, read from a cache anyone could edit or an hf answer:
# outside these they are left out with a note, never priced with. A negative price or duration
# made a $50 spend read as far under a $10 ceiling, and make cost total -$2.9M; 1e308 s or a NaN
# made no sense of any total; a time in year 1 or 9999 overflowed. (The price cap: tools/money/cost_prices.py.)
DURATION_CAP = 10 * 365 * 86400.0     # seconds: no job runs ten years
YEARS = (2000, 2199)
# A job id is a plain name (HF's are 24 hex digits); the shell verbs check the same shape.
JOB_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")


def job_id_of(value: Any) -> str | None:
    """A job id from an hf answer or a file, as the one type it is compared in: a plain name. A
    whole number is the same name (an answer that gave the id as 123 and the manifest's "123" are
    one job, not two); anything else (a bool, a float, a path, a control character) is None."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        value = str(value)
    return value if isinstance(value, str) and JOB_ID.fullmatch(value) else None


def finite_in(value: Any, low: float, high: float) -> float | None:
    """`value` as a float when it is a real number (not a bool, a NaN or an infinity) in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        x = float(value)
    except OverflowError:  # an int past float's range
        return None
    return x if math.isfinite(x) and low <= x <= high else None


class CostError(click.ClickException):
    """A user-facing error: one line saying what and how to fix."""


# --------------------------------------------------------------------------- time


def parse_time(value: Any) -> datetime | None:
    """An ISO-8601 time of the years YEARS, else None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
        t = t if t.tzinfo else t.replace(tzinfo=timezone.utc)
        year = t.astimezone(timezone.utc).year
    except (ValueError, OverflowError):
        return None
    return t if YEARS[0] <= year <= YEARS[1] else None


def iso(t: datetime | None) -> str | None:
    """t as the manifest writes a time (fmt.stamp); None stays None."""
    return fmt.stamp(t) if t else None


# --------------------------------------------------------------------------- the hf CLI


class HfFailed(Exception):
    """One hf call failed; the message is one line."""


@dataclass
class LiveHf:
    """Runs the real `hf` CLI, bounded in time. dry_run: prints each call and runs none."""

    timeout: float = field(default_factory=hf_client.call_timeout)  # HF_CALL_TIMEOUT, else 60
    dry_run: bool = False
    printed: list[str] = field(default_factory=list)

    def __call__(self, *args: str) -> str:
        line = shlex.join(["hf", *args])
        if self.dry_run:
            self.printed.append(line)
            click.echo(line)
            raise HfFailed("dry run")
        env = {**os.environ, "HF_HUB_DISABLE_UPDATE_CHECK": "1"}
        try:
            p = subprocess.run(["hf", *args], capture_output=True, text=True, timeout=self.timeout, env=env)
        except subprocess.TimeoutExpired:
            raise HfFailed(f"{line}: no answer within {self.timeout:g}s") from None
        except FileNotFoundError:
            raise HfFailed("the hf CLI is not installed (make setup)") from None
        if p.returncode != 0:
            text = re.sub(r"\x1b\[[0-9;]*m", "", p.stderr)
            last = [ln for ln in text.splitlines() if ln.strip()]
            why = next((ln for ln in reversed(last) if re.match(r"^(Error|[A-Za-z_.0-9]+(Error|Exception))", ln)),
                       last[-1] if last else f"exit {p.returncode}")
            raise HfFailed(f"{line}: {why.strip()[:300]}")
        return p.stdout

    @property
    def where(self) -> str:
        return os.environ.get("HF_ENDPOINT") or "https://huggingface.co"


@dataclass
class RecordedHf:
    """Answers the same calls from a recording: {"recorded_at", "calls": {"<argv>": output}}."""

    path: Path
    calls: dict
    recorded_at: str | None

    @classmethod
    def load(cls, path: Path) -> "RecordedHf":
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            # The one line the other verbs give (tools/report/report_cost.py), not an errno.
            raise CostError(f"no recording: {rel(path)} does not exist (a bundled example never calls HF; "
                            f"examples/make_example_cost.py records one)") from None
        except (OSError, ValueError) as e:
            raise CostError(f"{path}: cannot read the recorded hf answers ({e})") from None
        return cls(path, doc.get("calls") or {}, doc.get("recorded_at"))

    def __call__(self, *args: str) -> str:
        tail = None
        if args[:2] == ("jobs", "logs") and "-n" in args:  # logs are recorded whole; -n N tails them
            i = args.index("-n")
            tail, args = int(args[i + 1]), args[:i] + args[i + 2:]
        key = shlex.join(args)
        if tail is not None and key in self.calls:
            return "".join(line + "\n" for line in str(self.calls[key]).splitlines()[-tail:])
        if key not in self.calls:
            raise HfFailed(f"hf {key}: not in the recording {self.path.name}")
        out = self.calls[key]
        return out if isinstance(out, str) else json.dumps(out)

    @property
    def where(self) -> str:
        return f"recorded {self.recorded_at}: {rel(self.path)}"


def rel(path: str | os.PathLike) -> str:
    p = os.path.abspath(path)
    root = str(REPO_ROOT) + os.sep
    return p[len(root):] if p.startswith(root) else p


def hf_json(hf, *args: str) -> Any:
    out = hf(*args)
    try:
        return json.loads(out)
    except ValueError:
        raise HfFailed(f"hf {shlex.join(args)}: not JSON (an hf version other than the pinned 2.4.0?)") from None


# --------------------------------------------------------------------------- prices


def text_field(value: Any) -> str | None:
    """A name from an hf answer: a short printable string, else None."""
    return safe_read.printable(value)[:200] if isinstance(value, str) and value else None


def normalise_job(raw: Any) -> dict:
    """inspect's and ps's rows in one shape, every field checked: a wrong type is None."""
    if not isinstance(raw, dict):
        raise TypeError(f"a job is {safe_read.clip(repr(raw), 60)}, not an object")
    status = raw.get("status")
    stage = status.get("stage") if isinstance(status, dict) else status
    owner = raw.get("owner") if isinstance(raw.get("owner"), dict) else {}
    labels = raw.get("labels") if isinstance(raw.get("labels"), dict) else {}
    return {"id": job_id_of(raw.get("id")), "namespace": text_field(owner.get("name")),
            "stage": text_field(stage) or "UNKNOWN",
            "flavor": text_field(raw.get("flavor")),
            "labels": {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)},
            "created_at": parse_time(raw.get("created_at")), "started_at": parse_time(raw.get("started_at")),
            "finished_at": parse_time(raw.get("finished_at")),
            "durations": raw.get("durations") if isinstance(raw.get("durations"), dict) else None,
            "exposed": bool(raw.get("expose")), "image": text_field(raw.get("docker_image")),
            "space": text_field(raw.get("space_id"))}


def list_sandboxes(hf, namespace: str | None) -> tuple[list[dict], list[str]]:
    """Every sandbox job (label hf-sandbox=1) of the namespace, and what was wrong with the answer."""
    args = ["jobs", "ps", "-a", "--json", "--limit", "0", "-l", SANDBOX_LABEL]
    if namespace:
        args += ["--namespace", namespace]
    try:
        listing = hf_json(hf, *args)
    except HfFailed as e:
        return [], [str(e)]
    jobs, bad = {}, 0
    for raw in listing if isinstance(listing, list) else []:
        job = normalise_job(raw) if isinstance(raw, dict) else {"id": None}
        if job["id"] is None:
            bad += 1
        else:
            jobs.setdefault(job["id"], job)
    problems = [f"hf {shlex.join(args)}: {bad} job(s) whose id is not a plain name, left out"] if bad else []
    return list(jobs.values()), problems


def sandbox_name(job: dict) -> str:
    return f"{job['namespace']}/{job['id']}" if job["namespace"] else job["id"]
