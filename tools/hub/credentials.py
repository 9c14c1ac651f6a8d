"""credentials: find what looks like a credential in files about to leave the machine.

make publish, make submission (whose tree is what gets uploaded) and the checkout a remote job
gets (tools/hub/stage.py) scan every file first and refuse, naming the file and line, when one holds:

- the literal value of a token this machine has: the HF token huggingface_hub would use, and
  every environment variable named like a secret (*_TOKEN, *_KEY, *_SECRET, *_PASSWORD), at
  least MIN_SECRET characters long, so a trajectory that echoed one is caught whatever its shape;
- the shape of a common credential: an HF token, an OpenAI or Anthropic key, a GitHub token, an
  AWS access key id, a Google API key, a Slack token, a private key block.

The shapes ask for what random keys have and names do not (mixed case and digits, no word
character just before), so a task called disk-usage-... is not an sk- key. A file larger than
SCAN_CAP cannot be read whole and is refused as unscanned. Nothing found is ever printed whole:
its first and last four characters only.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from tools import hf_client

MIN_SECRET = 8
SCAN_CAP = 256 << 20
SECRET_NAME = re.compile(r"(TOKEN|_KEY|SECRET|PASSWORD)$")
_MIXED = r"(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[a-z])"
# (what it looks like, its pattern, the literals one of which every match holds): a file holding
# none of them is not searched by the pattern at all. A search for a literal is a memchr; a pattern
# that opens with a lookbehind is tried at every byte (the checkout a remote job gets, some 5 MB,
# took 0.4 s).
SHAPES = [
    ("an HF token", rb"(?<![A-Za-z0-9_])hf_" + _MIXED.encode() + rb"[A-Za-z0-9]{30,}", (b"hf_",)),
    ("an OpenAI or Anthropic key", rb"(?<![A-Za-z0-9_-])sk-" + _MIXED.encode() + rb"[A-Za-z0-9_-]{32,}", (b"sk-",)),
    ("a GitHub token", rb"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})",
     (b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_")),
    ("an AWS access key id", rb"(?<![A-Z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Z0-9])", (b"AKIA", b"ASIA")),
    ("a Google API key", rb"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}", (b"AIza",)),
    ("a Slack token", rb"(?<![A-Za-z0-9_-])xox[abprs]-[A-Za-z0-9-]{10,}", (b"xoxa-", b"xoxb-", b"xoxp-", b"xoxr-", b"xoxs-")),
    ("a private key", rb"-----BEGIN [A-Z ]*PRIVATE KEY-----", (b"PRIVATE KEY-----",)),
]


@dataclass(frozen=True)
class Finding:
    path: str
    line: int          # 1-based; 0 when the file could not be scanned
    kind: str          # what it looks like, or why the file could not be scanned
    excerpt: str       # first and last four characters, never the whole value

    def text(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.kind}" + (f" ({self.excerpt})" if self.excerpt else "")


def machine_secrets() -> dict[str, bytes]:
    """{where it comes from: its value} for every token this machine holds."""
    found: dict[str, bytes] = {}
    for name, value in os.environ.items():
        if SECRET_NAME.search(name.upper()) and len(value) >= MIN_SECRET:
            found[f"the value of ${name}"] = value.encode()
    try:
        token = hf_client.token()
    except Exception:  # noqa: BLE001  (no token, an unreadable token file: nothing to look for)
        token = None
    if token and len(token) >= MIN_SECRET and token.encode() not in found.values():  # one value, named once
        found["this machine's HF token"] = token.encode()
    return found


def excerpt(value: bytes) -> str:
    text = value.decode("utf-8", "replace")
    return f"{text[:4]}…{text[-4:]}" if len(text) > 10 else "…"


def scan_bytes(path: str, data: bytes, secrets: dict[str, bytes]) -> list[Finding]:
    hits: list[tuple[int, str, bytes]] = []
    for what, value in secrets.items():
        start = data.find(value)
        if start >= 0:
            hits.append((start, what, value))
    for kind, pattern, literals in SHAPES:
        if not any(literal in data for literal in literals):
            continue
        for m in re.finditer(pattern, data):
            hits.append((m.start(), f"what looks like {kind}", m.group()))
    return [Finding(path, data.count(b"\n", 0, start) + 1, kind, excerpt(value)) for start, kind, value in sorted(hits)]


def scan_files(paths: list[str], secrets: dict[str, bytes] | None = None) -> list[Finding]:
    """Every finding in the regular files `paths` (symlinks and special files are never read)."""
    secrets = machine_secrets() if secrets is None else secrets
    findings: list[Finding] = []
    for path in paths:
        try:
            st = os.lstat(path)
            if not os.path.isfile(path) or os.path.islink(path):
                continue
            if st.st_size > SCAN_CAP:
                findings.append(Finding(path, 0, f"larger than {SCAN_CAP >> 20} MiB, not scanned for credentials", ""))
                continue
            with open(path, "rb") as f:
                data = f.read(SCAN_CAP + 1)
        except OSError as e:
            findings.append(Finding(path, 0, f"cannot be read to scan it ({e.strerror or e})", ""))
            continue
        findings.extend(scan_bytes(path, data, secrets))
    return findings


REDACT_IN_RUN = ("Redact each one in place (e.g. replace the value with REDACTED in that file) or move the file out "
                 "of the job dir")


def refusal(findings: list[Finding], verb: str, nothing: str = "uploaded", fix: str = REDACT_IN_RUN) -> str:
    """The one message of a refusal: what was found where, and how to go on."""
    shown = "; ".join(f.text() for f in findings[:5]) + (f"; and {len(findings) - 5} more" if len(findings) > 5 else "")
    return (f"{verb} refused: a credential may be in the files it would upload: {shown}. Nothing was {nothing}. "
            f"{fix}, then run {verb} again.")
