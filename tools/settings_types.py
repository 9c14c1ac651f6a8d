"""The types a setting can have, as env/defaults.env declares them in brackets (`[int 1..1000]`).

Each type says what a value must be in one phrase (the refusal reads "setting N must be <phrase>,
got '<value>'") and turns a good value into what the tools use (an int, seconds, a list of words).
A trailing `?` lets the value be empty. Standard library only (tools/settings.py).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from tools.fmt import parse_duration

GRAMMAR = ("text, words, int LO..HI, number LO..HI (>0: above zero), flag, duration, every, port, "
           "enum A|B|…, name, flavor, image, sha, namespace, bucket, dataset, url, version, envtype, leaderboard, org; "
           "a trailing ? allows an empty value")
BILLION = 1_000_000_000
# The intervals HF's cron scheduler runs evenly through the hour or the day (WATCHDOG_EVERY).
EVERY = ("5m", "6m", "10m", "12m", "15m", "20m", "30m", "1h", "2h", "3h", "4h", "6h", "8h", "12h")
# The --env names harbor 0.26.0 knows: harbor.models.environment_type.EnvironmentType (a test
# compares this list with that enum, so an upgrade that changes it fails loudly).
HARBOR_ENV_TYPES = ("docker sbx podman daytona e2b modal runloop langsmith ec2 gke ack openshift novita "
                    "apple-container singularity islo tensorlake cwsandbox use-computer cua-cloud blaxel "
                    "opensandbox beam skypilot hf-sandbox hyperbrowser vercel runta prime kata mosaic smol "
                    "sail kernel snowflake boxd superserve aca-sandbox").split()
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
MAX_LENGTH = 4096

# A pattern and its phrase, for the types that are one regular expression.
PATTERNS = {
    "name": (r"[A-Za-z0-9][A-Za-z0-9._-]*", "letters, digits, '.', '_' and '-'"),
    "flavor": (r"[a-z0-9][a-z0-9-]*", "an hf jobs flavor such as cpu-basic"),
    "image": (r"[A-Za-z0-9][A-Za-z0-9._/:@-]*", "an image name such as python:3.12-slim"),
    "sha": (r"[0-9a-f]{40}", "a full 40-hex commit sha"),
    # harbor reads an --ek value as JSON first, so a name of digits only, or true/false/null, would
    # reach hf-sandbox as another type.
    "namespace": (r"(?!(?:[0-9]+|true|false|null|True|False|None)$)[A-Za-z0-9][A-Za-z0-9._-]{0,95}",
                  "a Hub user or organization name (letters, digits, '.', '_', '-'; not only digits)"),
    "bucket": (r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", "NAMESPACE/NAME of an HF bucket"),
    # harbor's `-d org/name[@version]` (a Harbor registry package; PackageReference).
    "dataset": (r"(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*(@[A-Za-z0-9][A-Za-z0-9._:+-]*)?",
                "a Harbor registry dataset org/name[@version] (harbor run -d), e.g. terminal-bench/terminal-bench-2-1"),
    "url": (r"(?![^<>{}\s]*\.\.\.)https?://[^/<>{}\s]+(/[^<>{}\s]*)?/v1/?",
            "the server's http(s) URL ending in /v1, with no placeholder left in it (e.g. https://abc123--30000.hf.jobs/v1)"),
    "version": (r"[0-9][0-9A-Za-z.+-]{0,40}", "an engine release such as 0.5.23 (the one the profile's command is proven against)"),
    # As harbor reads a leaderboard (cli/hub_leaderboards.py _parse_ref; tools/hub/submit.py board_ref):
    # a UUID, or the package's org/name and the board's name. A package alone names no board.
    "leaderboard": (r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*|"
                    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
                    "a Harbor Hub leaderboard as harbor names one: org/package/name (terminal-bench/terminal-bench-2-1/main) or its UUID"),
    "org": (r"[A-Za-z0-9][A-Za-z0-9._ -]*", "a Harbor Hub organization's name"),
    "envtype": (r"[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*|" + "|".join(map(re.escape, HARBOR_ENV_TYPES)),
                "an environment harbor 0.26.0 knows or a module:Class import path"),
}


def strict_duration(value: str) -> float | None:
    """tools/fmt.py's hf-style duration, refusing the spaces around it that fmt forgives."""
    return parse_duration(value) if value == value.strip() else None


def split_words(value: str) -> list[str]:
    """Shell-quoted words, quotes honoured and nothing evaluated (ValueError: unbalanced quotes)."""
    lexer = shlex.shlex(value, posix=True, punctuation_chars=False)
    lexer.whitespace_split = True
    lexer.commenters = ""
    return list(lexer)


def number_text(x: float) -> str:
    """A bound as the catalogue writes it: 100, not 100.0; 0.01 as itself."""
    return str(int(x)) if x == int(x) else str(x)


@dataclass(frozen=True)
class Type:
    kind: str
    optional: bool = False
    low: float = 0
    high: float = 0
    choices: tuple[str, ...] = ()

    @property
    def spec(self) -> str:
        """The declaration, as env/defaults.env writes it."""
        number = number_text
        args = {"int": f"{number(self.low)}..{number(self.high)}", "number": f"{number(self.low)}..{number(self.high)}",
                "enum": "|".join(self.choices)}.get(self.kind, "")
        if self.kind == "number" and (self.low, self.high) == (0, BILLION):
            args = ">0"
        return self.kind + ("?" if self.optional else "") + (f" {args}" if args else "")

    def phrase(self) -> str:
        if self.kind == "int":
            if self.low == 1 and self.high == BILLION - 1:
                return "a positive whole number below 1000000000"
            return f"a whole number from {int(self.low)} to {int(self.high)}"
        if self.kind == "number":
            if (self.low, self.high) == (0, 1):
                return "a fraction from 0 to 1 (e.g. 0.3)"
            if (self.low, self.high) == (0, BILLION):
                return "a positive number below 1000000000"
            return f"a number from {number_text(self.low)} to {number_text(self.high)}"
        return {
            "flag": "0 or 1",
            "duration": "a number with an optional unit s, m, h or d (e.g. 4h), more than zero",
            "every": "one a cron runs evenly: one of " + " ".join(EVERY),
            "port": "a port number, 1 to 65535",
            "enum": "one of " + ", ".join(self.choices),
            "words": "shell-quoted words with balanced quotes",
            "text": f"one line of text (at most {MAX_LENGTH} characters, no control characters)",
        }.get(self.kind) or PATTERNS[self.kind][1]

    def requirement(self) -> str:
        """What a value must be, as a refusal says it: the phrase, and that empty will do when it will."""
        return self.phrase() + (", or empty" if self.optional else "")

    def valid(self, value: str) -> bool:
        if value == "":
            return self.optional or self.kind in ("text", "words")
        if len(value) > MAX_LENGTH:
            return False
        if self.kind == "words":
            if CONTROL.search(value):
                return False
            try:
                split_words(value)
            except ValueError:
                return False
            return True
        if CONTROL.search(value) or "\n" in value or "\t" in value:
            return False
        if self.kind == "text":
            return True
        if self.kind == "int":
            return bool(re.fullmatch(r"0|[1-9][0-9]{0,9}", value)) and self.low <= int(value) <= self.high
        if self.kind == "number":
            if not re.fullmatch(r"[0-9]{1,9}(\.[0-9]+)?|\.[0-9]+", value):
                return False
            number = float(value)
            return (number > 0 if self.low == 0 and self.high == BILLION else self.low <= number <= self.high)
        if self.kind == "flag":
            return value in ("0", "1")
        if self.kind == "duration":
            seconds = strict_duration(value)
            return seconds is not None and seconds > 0
        if self.kind == "every":
            return value in EVERY
        if self.kind == "port":
            return bool(re.fullmatch(r"[1-9][0-9]{0,4}", value)) and int(value) <= 65535
        if self.kind == "enum":
            return value in self.choices
        return bool(re.fullmatch(PATTERNS[self.kind][0], value))

    def convert(self, value: str):
        """A valid value as the tools use it: int, float, seconds, a list of words, a bool; None when empty."""
        if value == "" and self.kind not in ("text", "words"):
            return None
        if self.kind in ("int", "port"):
            return int(value)
        if self.kind == "number":
            return float(value)
        if self.kind == "flag":
            return value == "1"
        if self.kind in ("duration", "every"):
            return strict_duration(value)
        if self.kind == "words":
            return split_words(value)
        return value


def parse(spec: str) -> Type:
    """A type from its declaration: `int 1..1000`, `duration?`, `enum local|hf`, `number >0`."""
    head, _, args = spec.strip().partition(" ")
    optional = head.endswith("?")
    kind = head.rstrip("?")
    args = args.strip()
    if kind in ("int", "number"):
        if kind == "number" and args == ">0":
            return Type(kind, optional, 0, BILLION)
        m = re.fullmatch(r"([0-9.]+)\.\.([0-9.]+)", args)
        if not m:
            raise ValueError(f"type {spec!r} needs a range LO..HI")
        return Type(kind, optional, float(m.group(1)), float(m.group(2)))
    if kind == "enum":
        if not args:
            raise ValueError(f"type {spec!r} needs its choices, A|B")
        return Type(kind, optional, choices=tuple(args.split("|")))
    if kind not in ("text", "words", "flag", "duration", "every", "port", *PATTERNS) or args:
        raise ValueError(f"unknown type {spec!r} (types: {GRAMMAR})")
    return Type(kind, optional)
