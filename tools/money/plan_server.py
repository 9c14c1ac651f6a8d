"""plan_server: the server half of make plan: the candidate servers, and how fast each decodes.

A candidate is a bundled server profile (env/servers/<name>.env) that serves the run's model, read
by its plain MODEL=, SERVER_FLAVOR=, SERVER_DP= and SERVER_TP= lines. How fast it decodes is a
roofline: decode on an H200 is bound by streaming the weights (the reference's measurement, docs/
plan.md §3), so one decode step of a replica takes

    step = (weights / TP + sequences × (context × KV bytes per token + 2 × state bytes) / TP) / bandwidth

seconds: every step reads each GPU's share of the weights once, and each running sequence's KV
cache (its full-attention layers) and recurrent state (its linear-attention layers, read and
written). A trial's agent time is part decode (its output tokens × the step) and part everything
else (the sandbox's commands, prefill, the agent's own work), so a server whose step is r times
the source's makes a trial (1 - f) + f × r times as long, f the decode share at the source
(speed_factor). Every constant below says where it comes from: the reference (docs/reference-
runs.md, and the measurement the reference notes record), the model's published dimensions, or
an assumption, named as one. A calibration (make calibrate, state/<run>/calibration.json) measures
the step on the run's live server; with one, every step is scaled by what it measured against
what this roofline says for that server (calibration_scale).
"""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from tools import safe_read

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVERS_DIR = REPO_ROOT / "env" / "servers"

# --------------------------------------------------------------------------- the constants

# One H200's decode step streaming 27 GB: 7.0 ms at batch 3 (the reference's -n 3), measured with
# torch on an H200 as a stand-in for the 27B FP8 weights, KV reads not included; with half the
# bytes (a TP = 2 share) 3.5 ms, the same bandwidth (the reference notes, "Decode on one H200 is
# weight-streaming bound": 7.1 / 7.0 / 6.9 / 7.2 ms at batch 1 / 3 / 8 / 64; 11.4 ms at 256,
# where compute starts to count). So the bytes a step reads over 3.86 TB/s, flat up to 64
# sequences. TP's all-reduces were not in the measurement: a TP step here is a lower bound.
REFERENCE_STEP_BYTES = 27e9
REFERENCE_STEP_SECS = 7.0e-3
MAX_ROOFLINE_SEQUENCES = 64  # the measured flat range; more sequences per replica are not planned


@dataclass(frozen=True)
class Gpu:
    """What a GPU family streams: the rate a decode step reaches (the roofline's, measured) and the
    most its memory can deliver (a calibration's floor: no step reads its bytes faster)."""

    bandwidth: float       # bytes/s
    peak_bandwidth: float  # bytes/s


# The H200: 3.86 TB/s is the reference's measurement above. Its peak, 4.8 TB/s of HBM3e, is
# NVIDIA's published figure (the H200 datasheet, nvidia.com/en-us/data-center/h200): not a
# measurement, but the one number that bounds every kernel, where any measurement is only what one
# kernel reached (the reference's copies ran at 3.7 to 4.3 TB/s, its decode step at 3.86).
GPUS = {"h200": Gpu(bandwidth=REFERENCE_STEP_BYTES / REFERENCE_STEP_SECS, peak_bandwidth=4.8e12)}


@dataclass(frozen=True)
class ModelNumbers:
    """What one decode step of a model reads besides its weights, per token and per sequence."""

    weight_bytes: float          # streamed once per step (over TP GPUs)
    kv_bytes_per_token: float    # full-attention KV per token of context
    state_bytes_per_sequence: float  # linear-attention recurrent state, read and written per step
    source: str


# Qwen3.8-27B-FP8 (docs/data-parallel.md §5, where each dimension is sourced and what is not
# verified): 27 GB of FP8 weights (the reference's stand-in); 16 full-attention layers of 64, 4 KV
# heads of 256, K and V, at 1 byte (the profile's --kv-cache-dtype fp8_e4m3): 32,768 B a token; 48
# linear-attention layers, 48 value heads of 128 × 128 state at 4 bytes (--mamba-ssm-dtype
# float32): 151 MB a sequence.
MODELS = {
    "Qwen/Qwen3.8-27B-FP8": ModelNumbers(
        weight_bytes=REFERENCE_STEP_BYTES,
        kv_bytes_per_token=16 * 2 * 4 * 256 * 1,
        state_bytes_per_sequence=48 * 48 * 128 * 128 * 4,
        source="docs/data-parallel.md §5 (64 layers, 16 of them full attention with 4 KV heads of 256 at fp8; "
               "48 linear-attention layers of 48 × 128 × 128 float32 state)"),
}

# An agent turn's context: terminus-2 resends its whole conversation every turn, so the KV a step
# reads grows with the trial. An assumption, not a measurement: 32,768 tokens, an eighth of the
# model's 262,144 (the mid-trial context of a conversation that reaches a few tens of thousands of
# tokens). make calibrate's prompts are this long too.
AGENT_CONTEXT_TOKENS = 32_768

# The reference's one per-trial token count: its smoke trial (Qwen3.8-27B-FP8, terminus-2, one
# H200 at -n 1) decoded about 681K output tokens in 3 h 06 min (docs/reference-runs.md §2).
SMOKE_OUTPUT_TOKENS = 681_000
SMOKE_SECS = 3 * 3600 + 6 * 60
# A decode share is a fraction of a trial: kept below this, so that (1 - f) never vanishes.
MAX_DECODE_SHARE = 0.95


# --------------------------------------------------------------------------- profiles

PROFILE_LINE = re.compile(r"^(?P<name>MODEL|SERVER_FLAVOR|SERVER_DP|SERVER_TP)=(?P<value>[^\s#]*)")
GPU_SUFFIX = re.compile(r"x([0-9]{1,9})$")


def gpus_of(flavor: str) -> int:
    """GPUs of an HF Jobs flavor by its name: `<family>x<N>` has N, a bare family one."""
    m = GPU_SUFFIX.search(flavor)
    return int(m.group(1)) if m else 1


def family_of(flavor: str) -> str:
    return GPU_SUFFIX.sub("", flavor)


@dataclass(frozen=True)
class Profile:
    """A server profile as make plan reads it."""

    name: str
    model: str
    flavor: str
    dp: int            # replicas (independent engines behind the gateway)
    tp: int            # GPUs per replica
    speculative: bool  # speculative decoding: its speed-up is measured, not modelled

    @property
    def gpus(self) -> int:
        return self.dp * self.tp

    @property
    def suffix(self) -> str:
        """What a run file on this server is named after: h200x4, h200x2-tp2, h200x4-tp2-dp2."""
        parallel = f"-tp{self.tp}" + (f"-dp{self.dp}" if self.dp > 1 else "") if self.tp > 1 else ""
        return f"{self.flavor}{parallel}"


def _count(text: str | None) -> int | None:
    return int(text) if text and text.isascii() and text.isdigit() and len(text) <= 3 and int(text) >= 1 else None


def read_profile(path: Path) -> Profile | None:
    """A profile by its plain lines; None when it is unreadable or states no model and flavor."""
    try:
        text = safe_read.read_regular(path, 1 << 16, "a server profile").decode("utf-8", "replace")
    except (OSError, safe_read.Unreadable):
        return None
    found = {m["name"]: m["value"] for m in map(PROFILE_LINE.match, text.splitlines()) if m}
    dp, tp = _count(found.get("SERVER_DP", "1")), _count(found.get("SERVER_TP", "1"))
    if not found.get("MODEL") or not found.get("SERVER_FLAVOR") or dp is None or tp is None:
        return None
    if dp * tp != gpus_of(found["SERVER_FLAVOR"]) and dp * tp > 1:
        return None  # make serve refuses it (tools/settings_rules.py replicas_fill_flavor): no candidate
    return Profile(path.stem, found["MODEL"], found["SERVER_FLAVOR"], dp, tp,
                   "--speculative-algorithm" in text)


def profiles_for(model: str, servers_dir: Path = SERVERS_DIR) -> list[Profile]:
    """Every bundled profile serving `model`, by name."""
    if not servers_dir.is_dir():
        return []
    return [p for p in (read_profile(f) for f in sorted(servers_dir.glob("*.env"))) if p and p.model == model]


# --------------------------------------------------------------------------- the roofline


@dataclass(frozen=True)
class Roofline:
    """Decode steps of one model on one GPU family; None of it when either is not known here."""

    numbers: ModelNumbers
    gpu: Gpu
    context: float = AGENT_CONTEXT_TOKENS
    scale: float = 1.0  # a calibration's measured step over this roofline's (1: none)

    @property
    def bandwidth(self) -> float:
        return self.gpu.bandwidth

    def step_secs(self, tp: int, sequences: float) -> float:
        """One decode step of a replica over `tp` GPUs running `sequences` sequences."""
        n = self.numbers
        per_sequence = self.context * n.kv_bytes_per_token + 2 * n.state_bytes_per_sequence
        return self.scale * (n.weight_bytes + sequences * per_sequence) / tp / self.bandwidth

    def floor_secs(self, tp: int) -> float:
        """The shortest a decode step can be on `tp` GPUs: each reads its share of the weights once,
        at its memory's peak. A lower bound of the true one (the KV and state reads left out)."""
        return self.numbers.weight_bytes / tp / self.gpu.peak_bandwidth


def roofline_for(model: str, flavor: str) -> Roofline | None:
    numbers, gpu = MODELS.get(model), GPUS.get(family_of(flavor))
    return Roofline(numbers, gpu) if numbers and gpu else None


def smoke_decode_share(roofline: Roofline) -> float:
    """The reference's smoke trial's decode share: its output tokens at one H200's step with one
    sequence, over its length."""
    return min(MAX_DECODE_SHARE, SMOKE_OUTPUT_TOKENS * roofline.step_secs(1, 1) / SMOKE_SECS)


def shift_share(share: float, ratio: float) -> float:
    """A decode share f at one step, at a step `ratio` times as long: f r / (1 - f + f r)."""
    return min(MAX_DECODE_SHARE, share * ratio / (1 - share + share * ratio))


def speed_factor(share: float, step: float, source_step: float) -> float:
    """How many times as long a trial is on a server whose step is `step`, against the source's:
    the decode part scales with the step, the rest does not."""
    return (1 - share) + share * step / source_step


def timeout_share(mean_secs: float, factor: float, cap_secs: float) -> float:
    """The share of trials that hit their timeout: natural agent times exponential with mean
    `mean_secs` at the source's speed, `factor` times as long on this server (docs/plan.md §4)."""
    return math.exp(-cap_secs / (mean_secs * factor))


# --------------------------------------------------------------------------- calibration

# A calibration is read as data: at most this big, at most this many levels, finite figures.
CALIBRATION_CAP = 64 * 1024
MAX_LEVELS = 32
# The slowest time per output token a calibration may say: past it a server is stalled (swapping,
# queueing behind a hung request), not decoding, and no roofline is scaled by it. 10 s is 1,400
# times one H200's step, and at it one of make calibrate's replies (1,024 tokens by default) would
# take 2.8 h, past the 1,800 s CALIBRATE_TIMEOUT that bounds each request: no level of a default
# calibration can have succeeded that slowly.
MAX_TPOT_SECS = 10.0


@dataclass(frozen=True)
class Calibration:
    profile: str                 # the server profile it measured
    levels: list[tuple[float, float]]  # (concurrency, time per output token in seconds)
    measured_at: str
    path: str


def read_calibration(path: Path) -> tuple[Calibration | None, str | None]:
    """(the run's calibration, None) or (None, why it is not used): a missing file is no note."""
    try:
        if not path.exists():
            return None, None
    except OSError as e:  # a path the system cannot look up (too long a name): no calibration to read
        return None, f"{safe_read.clip(str(path), 200)} cannot be read ({e.strerror or e}); not used"
    try:
        doc = json.loads(safe_read.read_regular(path, CALIBRATION_CAP, "a calibration").decode("utf-8"))
    except (OSError, safe_read.Unreadable, UnicodeDecodeError, ValueError, RecursionError) as e:
        return None, f"{safe_read.shown(str(path))} is not a calibration make calibrate writes ({safe_read.clip(str(e), 120)}); not used"
    levels = doc.get("levels") if isinstance(doc, dict) else None
    server = doc.get("server") if isinstance(doc, dict) else None
    profile = server.get("profile") if isinstance(server, dict) else None
    if not isinstance(levels, list) or not 0 < len(levels) <= MAX_LEVELS or not isinstance(profile, str):
        return None, f"{safe_read.shown(str(path))} has no levels or no server profile; not used"
    out = []
    for level in levels:
        c = level.get("concurrency") if isinstance(level, dict) else None
        tpot = level.get("tpot_ms") if isinstance(level, dict) else None
        if (isinstance(c, (int, float)) and not isinstance(c, bool) and 0 < c <= 10_000
                and isinstance(tpot, (int, float)) and not isinstance(tpot, bool) and math.isfinite(tpot)
                and tpot > 0):  # how slow a level may be is calibration_refused's to say, in a line
            out.append((float(c), tpot / 1000))
    if not out:
        return None, f"{safe_read.shown(str(path))} has no level with a concurrency and a time per output token; not used"
    return Calibration(safe_read.printable(profile)[:100], out, safe_read.printable(str(doc.get("measured_at", "?")))[:40],
                       safe_read.shown(str(path))), None


def calibration_refused(cal: Calibration, roofline: Roofline, profile: Profile) -> str | None:
    """Why `cal` cannot be a measurement of `profile`'s decode (None: it can): a level slower than
    MAX_TPOT_SECS a token, or faster than the step's floor (its weights streamed at the GPUs' peak).
    A speculative profile decodes several tokens a step, as many as its drafts get accepted, which
    no number here bounds: only the ceiling holds for it."""
    floor = roofline.floor_secs(profile.tp)
    for c, tpot in cal.levels:
        measured = f"at concurrency {c:g} it measured {tpot * 1000:g} ms per output token on {cal.profile}"
        if tpot > MAX_TPOT_SECS:
            return f"{measured}, over the {MAX_TPOT_SECS:g} s a token past which a server is stalled, not decoding"
        if tpot < floor and not profile.speculative:
            n = roofline.numbers
            return (f"{measured}, under the {floor * 1000:.1f} ms a decode step takes at the least "
                    f"({n.weight_bytes / 1e9:g} GB of {profile.model}'s weights streamed over {profile.tp} GPU"
                    f"{'s' * (profile.tp > 1)} at the {family_of(profile.flavor)}'s peak "
                    f"{roofline.gpu.peak_bandwidth / 1e12:g} TB/s): no server decodes that fast")
    return None


def calibration_scale(cal: Calibration, roofline: Roofline, profile: Profile) -> float:
    """The calibration's measured step over the roofline's at each level (per replica, as the
    gateway spreads a level's requests over its replicas), the median of them."""
    ratios = [tpot / roofline.step_secs(profile.tp, c / profile.dp) for c, tpot in cal.levels]
    return statistics.median(ratios)
