"""tools/hub/credentials.py: what it finds in files about to leave the machine, and what it must not.

Every secret-looking value here is built when the test runs, by joining pieces, so that no
credential-shaped string sits in the repository (the scan of a remote job's checkout, and any
other secret scanner, would find the test itself). One positive per shape docs/guarantees.md
lists (HF, OpenAI/Anthropic, GitHub, AWS, Google, Slack, a private key), a negative for each
guard the shapes have (a name is not a key: no mixed case, a word character just before, the
wrong case), the scan for this machine's own values, and the files never read.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import pytest

from tools.hub import credentials

MIXED = "Ab1" * 12  # mixed case and digits, as random keys have: 36 characters


def key(*parts: str) -> str:
    """A credential-shaped value, joined only now."""
    return "".join(parts)


SHAPES = {
    "an HF token": key("hf", "_", MIXED[:34]),
    "an OpenAI or Anthropic key": key("sk", "-", "proj-", MIXED),
    "a GitHub token": key("gh", "p_", "A1b2" * 9),
    "an AWS access key id": key("AK", "IA", "ABCDEFGH23456789"),
    "a Google API key": key("AI", "za", "Sy", MIXED[:33]),
    "a Slack token": key("xo", "xb-", "1234567890-", MIXED[:12]),
    "a private key": key("-----BEGIN ", "RSA ", "PRIVATE KEY-----"),
}
MORE_SHAPES = {  # the other spellings a shape's pattern covers
    "an OpenAI or Anthropic key": key("sk", "-ant-api03-", MIXED),
    "a GitHub token": key("github", "_pat_", "A1_b" * 10),
    "an AWS access key id": key("AS", "IA", "ABCDEFGH23456789"),
    "a private key": key("-----BEGIN ", "PRIVATE KEY-----"),
}
NOT_KEYS = {
    "a task named sk-learn-…": key("sk", "-learn-", "linear-regression-with-many-features-01"),
    "a task named disk-usage-…": key("disk", "-usage-", "Report2024ForTheWholeClusterA1b2"),
    "a lowercase akia…": key("ak", "ia", "abcdefgh23456789"),
    # The scan looks for the uppercase AKIA before it tries the pattern: this one reaches the pattern.
    "AKIA with a lowercase body": key("AK", "IA", "abcdefgh23456789"),
    "AKIA with a 17th character": key("AK", "IA", "ABCDEFGH23456789", "X"),
    "an hf_ name": key("hf", "_", "downloadedmodelweightsfromthehub"),  # one case, no digit
    "a Slack-like word": key("xo", "xo-", MIXED),
}


def findings_in(tmp_path: Path, text: str, secrets: dict[str, bytes] | None = None) -> list[credentials.Finding]:
    path = tmp_path / "trajectory.json"
    path.write_text(text)
    return credentials.scan_files([str(path)], {} if secrets is None else secrets)


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_each_shape_is_found_by_line_and_never_shown_whole(tmp_path, kind):
    value = SHAPES[kind]
    [found] = findings_in(tmp_path, f'{{"step": 1}}\n{{"output": "the key is {value} here"}}\n')
    assert (found.path, found.line, found.kind) == (str(tmp_path / "trajectory.json"), 2, f"what looks like {kind}")
    assert found.excerpt == f"{value[:4]}…{value[-4:]}"
    assert value not in found.text()


@pytest.mark.parametrize("kind", sorted(MORE_SHAPES))
def test_the_other_spellings_of_a_shape_are_found(tmp_path, kind):
    [found] = findings_in(tmp_path, f"x = {MORE_SHAPES[kind]}\n")
    assert found.kind == f"what looks like {kind}"


# Every prefix a shape's alternation accepts, each spelled out: the scan searches a file by a shape's
# pattern only when the file holds one of its literals, so a prefix without its literal would be missed.
EVERY_PREFIX = list(SHAPES.items()) + list(MORE_SHAPES.items()) + [
    ("a GitHub token", key("gh", letter, "_", "A1b2" * 9)) for letter in "pousr"] + [
    ("a Slack token", key("xo", "x", letter, "-1234567890-", MIXED[:12])) for letter in "abprs"]


@pytest.mark.parametrize("kind,value", EVERY_PREFIX, ids=[f"{k}:{v[:6]}" for k, v in EVERY_PREFIX])
def test_every_prefix_a_shape_accepts_is_searched_for(tmp_path, kind, value):
    [found] = findings_in(tmp_path, f"x = {value}\n")
    assert found.kind == f"what looks like {kind}"
    [(pattern, literals)] = [(p, lits) for k, p, lits in credentials.SHAPES if k == kind]
    assert re.search(pattern, value.encode()) and any(lit in value.encode() for lit in literals)


@pytest.mark.parametrize("what", sorted(NOT_KEYS))
def test_names_that_only_resemble_a_shape_are_not_keys(tmp_path, what):
    assert findings_in(tmp_path, f"task: {NOT_KEYS[what]}\n") == []


def test_a_value_this_machine_holds_is_found_wherever_it_is_even_first(tmp_path):
    value = key("plain", "-words-", "0001")  # no shape at all: only its value gives it away
    secrets = {"the value of $MY_TOKEN": value.encode()}
    assert findings_in(tmp_path, "nothing here\n", secrets) == []
    [first] = findings_in(tmp_path, f"{value} at the very start\n", secrets)
    assert (first.line, first.kind, first.excerpt) == (1, "the value of $MY_TOKEN", "plai…0001")
    [third] = findings_in(tmp_path, f"a\nb\necho {value}\n", secrets)
    assert third.line == 3


def test_the_machines_secrets_are_its_secret_named_variables_and_hf_token(monkeypatch, tmp_path):
    for name in [n for n in os.environ if credentials.SECRET_NAME.search(n.upper())]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no token file: the environment's token only
    monkeypatch.setenv("HF_TOKEN", key("hf", "_", MIXED[:34]))
    monkeypatch.setenv("MY_API_KEY", "8" * credentials.MIN_SECRET)            # just long enough
    monkeypatch.setenv("SHORT_SECRET", "7" * (credentials.MIN_SECRET - 1))    # too short to look for
    monkeypatch.setenv("db_password", key("pass", "word1"))            # the name in any case
    monkeypatch.setenv("KEYBOARD", key("layout", "-us-intl"))          # not a secret's name
    found = credentials.machine_secrets()
    # HF's token is the $HF_TOKEN value huggingface_hub reads: named once.
    assert found == {"the value of $HF_TOKEN": os.environ["HF_TOKEN"].encode(),
                     "the value of $MY_API_KEY": b"8" * credentials.MIN_SECRET,
                     "the value of $db_password": b"password1"}


def test_links_directories_and_special_files_are_never_read(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text(SHAPES["an HF token"] + "\n")
    link = tmp_path / "link.txt"
    link.symlink_to(secret)
    folder = tmp_path / "folder"
    folder.mkdir()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    paths = [str(p) for p in (link, folder, fifo)] + ["/dev/null"]
    done: list = []
    scan = threading.Thread(target=lambda: done.append(credentials.scan_files(paths, {})), daemon=True)
    scan.start()
    scan.join(10)
    if scan.is_alive():  # a reader blocked on the FIFO: give it an end, then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        scan.join(10)
        pytest.fail("the scan opened a FIFO")
    assert done == [[]]
    assert [f.kind for f in credentials.scan_files([str(secret)], {})] == ["what looks like an HF token"]


def test_a_file_too_large_to_read_whole_is_refused_as_unscanned(tmp_path, monkeypatch):
    monkeypatch.setattr(credentials, "SCAN_CAP", 64)
    big, small = tmp_path / "big.json", tmp_path / "small.json"
    big.write_text("x" * 65)
    small.write_text("x" * 64)
    assert credentials.scan_files([str(big), str(small)], {}) == [
        credentials.Finding(str(big), 0, "larger than 0 MiB, not scanned for credentials", "")]


def test_a_refusal_names_five_findings_and_counts_the_rest():
    findings = [credentials.Finding(f"f{n}.json", n + 1, "what looks like an HF token", "hf_A…1Ab1") for n in range(7)]
    text = credentials.refusal(findings, "make publish")
    assert text.startswith("make publish refused: a credential may be in the files it would upload: "
                           "f0.json:1: what looks like an HF token (hf_A…1Ab1); ")
    assert "f4.json:5" in text and "f5.json" not in text and "; and 2 more. Nothing was uploaded. " in text
    assert text.endswith(f"{credentials.REDACT_IN_RUN}, then run make publish again.")
