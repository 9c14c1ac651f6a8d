"""The repository explains itself: every pointer to its documentation resolves inside it.

  (a) every relative Markdown link in README.md and docs/*.md names an existing path;
  (b) every docs/<file>.md mentioned in a tracked file exists;
  (c) every section citation names a section that exists: `docs/<file>.md §N` (also
      `[x.md](x.md) §N` inside docs/, a bare `§N` inside a doc meaning its own section, and
      chains such as `§5, §6` or `§1 and §2`), and `docs/design.md decision N`;
  (d) no tracked file points at the documents the repository was built from, which a clone
      does not have;
  (e) the README's facts hold in the tree: no test count or duration kept by hand, every
      `make reproduce` with a MAX_COST covering the run's estimated server time, the watch's
      remote form the verb's own, the step-by-step flow ending each run with make stop.

Section convention: a section of docs/*.md is a heading that starts with `§N` or `§N.M`
(`## §5 harbor job resume`, `### §1.4 --expose`); design.md's decisions are headings
`### Decision N: …`. Fast and offline: reads files, runs `git ls-files` at most.
Each check is a function over (repository root, files), and the tests at the end prove on a
scratch tree that each one fails when its kind of pointer is broken.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Built from parts so that this file does not match its own check (d).
FORBIDDEN = (
    "../" + "shared",
    "benchmark-runs" + ".md",
    "DESIGN" + ".md",
    "harbor" + "-notes",
    "hf-jobs" + "-notes",
)
FORBIDDEN_RE = re.compile(r"(?<![\w-])reference/[\w.-]+\.md")  # the shared reference/ folder

SKIP_DIRS = {".git", ".venv", "node_modules", ".engines", "__pycache__", ".pytest_cache", "state", "jobs", "reports"}
MAX_BYTES = 4 * 1024 * 1024

LINK_RE = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE_RE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
DOC_PATH_RE = re.compile(r"(?<![\w./-])docs/([\w.-]+)\.md\b")
SECTION_HEADING_RE = re.compile(r"^#{1,6}\s+§(\d+(?:\.\d+)*)(?![\d.]*\d)", re.M)
DECISION_HEADING_RE = re.compile(r"^#{1,6}\s+Decision\s+(\d+)\b", re.M)
# One citation: "§5", then any chain ", §6", " and §7", "; §8", ", and §9".
CHAIN = r"§\d+(?:\.\d+)*(?:\s*(?:,|;|and|,\s*and)\s*§\d+(?:\.\d+)*)*"
# A cross-document citation: docs/<name>.md §N… or, inside docs/, [text](<name>.md) §N….
CITE_DOCS_RE = re.compile(r"(?<![\w./-])docs/([\w.-]+\.md)\s+(" + CHAIN + ")")
CITE_LINK_RE = re.compile(r"\]\(([\w.-]+\.md)\)\s+(" + CHAIN + ")")
SECTION_NUM_RE = re.compile(r"§(\d+(?:\.\d+)*)")
# The design doc's "decision N", also wrapped over a comment line ("…design.md" + newline + "# decision 9").
DECISION_CITE_RE = re.compile(r"(?:docs/design\.md|\]\(design\.md\))(?:[\s#*/]|`)*decision\s+(\d+)", re.I)


# --- what to read ------------------------------------------------------------------------------


def tracked_files(root: Path) -> list[Path]:
    """The repository's files: git's tracked and not-ignored untracked files, else a walk."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True, check=True, timeout=30).stdout
        names = sorted({n for n in out.decode("utf-8", "surrogateescape").split("\0") if n})
        files = [root / n for n in names]
    except (OSError, subprocess.SubprocessError):
        files = [p for p in root.rglob("*") if not SKIP_DIRS.intersection(p.relative_to(root).parts)]
    return [p for p in files if p.is_file() and not p.is_symlink()]


def read_text(path: Path) -> str | None:
    """The file's text, or None for a binary or oversized file."""
    try:
        if path.stat().st_size > MAX_BYTES:
            return None
        raw = path.read_bytes()
    except OSError:
        return None
    if b"\0" in raw:
        return None
    return raw.decode("utf-8", "replace")


def markdown_docs(root: Path) -> list[Path]:
    docs = sorted((root / "docs").glob("*.md"))
    return [root / "README.md", *docs]


def sections(path: Path) -> set[str]:
    return set(SECTION_HEADING_RE.findall(path.read_text(encoding="utf-8")))


def decisions(path: Path) -> set[str]:
    return set(DECISION_HEADING_RE.findall(path.read_text(encoding="utf-8")))


def rel(root: Path, path: Path) -> str:
    return str(path.relative_to(root))


# --- the checks: each returns a list of problems, one line each --------------------------------


def broken_markdown_links(root: Path, md_files: list[Path]) -> list[str]:
    """(a) relative links in Markdown files that name no existing path."""
    problems = []
    for md in md_files:
        text = FENCE_RE.sub("", md.read_text(encoding="utf-8"))
        for target in LINK_RE.findall(text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
                continue  # http(s), mailto, …, or an anchor in the same file
            path = target.split("#", 1)[0].split("?", 1)[0]
            if not path:
                continue
            resolved = (root / path.lstrip("/")) if path.startswith("/") else (md.parent / path)
            if not resolved.exists():
                problems.append(f"{rel(root, md)}: link to {target}: no such path")
    return problems


def missing_doc_paths(root: Path, files: list[Path]) -> list[str]:
    """(b) mentions of docs/<file>.md that do not exist."""
    problems = []
    for path in files:
        text = read_text(path)
        if text is None:
            continue
        for name in sorted(set(DOC_PATH_RE.findall(text))):
            if not (root / "docs" / f"{name}.md").is_file():
                problems.append(f"{rel(root, path)}: mentions docs/{name}.md, which does not exist")
    return problems


def _numeric(section: str) -> list[int]:
    return [int(part) for part in section.split(".")]


def _check_chain(where: str, target: Path, chain: str, root: Path, problems: list[str]) -> None:
    name = rel(root, target)
    if not target.is_file():
        problems.append(f"{where}: cites {name} {chain}, and {name} does not exist")
        return
    have = sections(target)
    for num in SECTION_NUM_RE.findall(chain):
        if num not in have:
            problems.append(f"{where}: cites {name} §{num}; {name} has no heading starting with §{num} "
                            f"(it has {', '.join('§' + s for s in sorted(have, key=_numeric)) or 'none'})")


def bad_section_citations(root: Path, files: list[Path]) -> list[str]:
    """(c) citations of a section or decision that does not exist."""
    problems: list[str] = []
    docs_dir = root / "docs"
    for path in files:
        text = read_text(path)
        if text is None:
            continue
        where = rel(root, path)
        spans = []
        for m in CITE_DOCS_RE.finditer(text):
            _check_chain(where, docs_dir / m.group(1), m.group(2), root, problems)
            spans.append(m.span())
        if path.parent == docs_dir and path.suffix == ".md":
            for m in CITE_LINK_RE.finditer(text):
                _check_chain(where, docs_dir / m.group(1), m.group(2), root, problems)
                spans.append(m.span())
            # A bare §N inside a doc is one of its own sections (headings themselves excepted).
            rest = list(text)
            for start, end in spans:
                rest[start:end] = " " * (end - start)
            rest_text = SECTION_HEADING_RE.sub("", "".join(rest))
            own = sections(path)
            for num in sorted(set(SECTION_NUM_RE.findall(rest_text))):
                if num not in own:
                    problems.append(f"{where}: cites its own §{num}, and it has no heading starting with §{num}")
        for num in DECISION_CITE_RE.findall(text):
            design = docs_dir / "design.md"
            if not design.is_file() or num not in decisions(design):
                problems.append(f"{where}: cites docs/design.md decision {num}, which has no heading 'Decision {num}'")
    return problems


def outside_pointers(root: Path, files: list[Path]) -> list[str]:
    """(d) pointers to documents outside the repository."""
    problems = []
    for path in files:
        text = read_text(path)
        if text is None:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            hits = [s for s in FORBIDDEN if s in line] + FORBIDDEN_RE.findall(line)
            for hit in hits:
                problems.append(f"{rel(root, path)}:{lineno}: points outside the repository ({hit}): {line.strip()[:120]}")
    return problems


# --- the repository ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def files() -> list[Path]:
    return tracked_files(REPO)


def test_the_reference_docs_exist():
    for name in ("reference-runs", "harbor", "hf-jobs", "design"):
        assert (REPO / "docs" / f"{name}.md").is_file(), f"docs/{name}.md is missing"
    for name in ("harbor", "hf-jobs", "reference-runs"):
        assert sections(REPO / "docs" / f"{name}.md"), f"docs/{name}.md has no §N headings"
    assert decisions(REPO / "docs" / "design.md"), "docs/design.md has no 'Decision N' headings"


def test_markdown_links_resolve():
    problems = broken_markdown_links(REPO, markdown_docs(REPO))
    assert not problems, "\n".join(problems)


def test_mentioned_docs_exist(files):
    problems = missing_doc_paths(REPO, files)
    assert not problems, "\n".join(problems)


def test_section_citations_resolve(files):
    problems = bad_section_citations(REPO, files)
    assert not problems, "\n".join(problems)


def test_nothing_points_outside_the_repository(files):
    problems = outside_pointers(REPO, files)
    assert not problems, "\n".join(problems)


# --- each check fails when its kind of pointer breaks (on a scratch tree) ---------------------------

# The scratch tree's paths are spelled with D so that this file does not cite them itself.
D = "docs" + "/"


@pytest.fixture()
def scratch(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\n## §1 One\n\n### §1.2 Sub\n\n## §2 Two, see §1.2\n")
    (tmp_path / "docs" / "design.md").write_text("# D\n\n### Decision 1: x\n")
    (tmp_path / "README.md").write_text(f"[a]({D}a.md#one) [web](https://example.com) [top](#x)\n")
    (tmp_path / "tool.py").write_text(f"# see {D}a.md §1, §1.2 and §2; {D}design.md\n# decision 1\n")
    return tmp_path


def _all(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_scratch_tree_passes(scratch):
    assert broken_markdown_links(scratch, markdown_docs(scratch)) == []
    assert missing_doc_paths(scratch, _all(scratch)) == []
    assert bad_section_citations(scratch, _all(scratch)) == []
    assert outside_pointers(scratch, _all(scratch)) == []


def test_a_broken_link_is_found(scratch):
    (scratch / "docs" / "b.md").write_text("see [gone](../gone.md) and [a](a.md)\n")
    assert broken_markdown_links(scratch, markdown_docs(scratch)) == [f"{D}b.md: link to ../gone.md: no such path"]


def test_a_missing_doc_is_found(scratch):
    (scratch / "x.sh").write_text(f"# details: {D}nowhere.md\n")
    assert missing_doc_paths(scratch, _all(scratch)) == [f"x.sh: mentions {D}nowhere.md, which does not exist"]


@pytest.mark.parametrize("citation, missing", [
    (D + "a.md §3", "§3"),
    (D + "a.md §1, §4", "§4"),
    (D + "a.md §1.1", "§1.1"),
    (D + "a.md §1 and §9", "§9"),
])
def test_a_missing_section_is_found(scratch, citation, missing):
    (scratch / "x.py").write_text(f"# {citation}\n")
    problems = bad_section_citations(scratch, _all(scratch))
    assert len(problems) == 1 and f"§{missing.lstrip('§')};" in problems[0], problems


def test_a_missing_section_inside_docs_is_found(scratch):
    (scratch / "docs" / "b.md").write_text("## §1 B\n\nsee [a](a.md) §7, and our own §2\n")
    problems = bad_section_citations(scratch, _all(scratch))
    assert any(f"cites {D}a.md §7" in p for p in problems), problems
    assert any(f"{D}b.md: cites its own §2" in p for p in problems), problems


def test_a_missing_decision_is_found(scratch):
    (scratch / "x.txt").write_text(f"# why: {D}design.md decision 2\n")
    problems = bad_section_citations(scratch, _all(scratch))
    assert problems == [f"x.txt: cites {D}design.md decision 2, which has no heading 'Decision 2'"]


@pytest.mark.parametrize("pointer", [*FORBIDDEN, "reference" + "/harbor.md"])
def test_an_outside_pointer_is_found(scratch, pointer):
    (scratch / "x.yaml").write_text(f"# see {pointer}\n")
    problems = outside_pointers(scratch, _all(scratch))
    assert len(problems) == 1 and problems[0].startswith("x.yaml:1: points outside"), problems


# --- (e) the README's facts, checked against the tree ---------------------------------------------
#
# What the README and docs state is generated or checked here: no test count or duration kept by
# hand (the suite prints its own), every `make reproduce` carrying a MAX_COST that covers the run's
# estimated server time, the watch's remote form the verb's own, every run of the step-by-step flow
# ending with make stop.

README = REPO / "README.md"


def command_lines(text: str) -> list[str]:
    """The commands of the README's code: fenced blocks and 4-space indented ones, comments dropped."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    "):
            out.append(line.split(" # ")[0].strip())
    return [line for line in out if line]


def test_no_test_count_or_duration_is_kept_by_hand():
    problems = []
    for path in [README, *sorted((REPO / "docs").glob("*.md"))]:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\b\d[\d,]* (bats|pytest)\b", line):
                problems.append(f"{path.name}:{n}: a test count: {line.strip()}")
            if re.search(r"make (test|check)|\.ci/run", line) and re.search(
                    r"\d+(\.\d+)?½?\s*(s|seconds?|minutes?|min)\b|½", line):
                problems.append(f"{path.name}:{n}: a test duration: {line.strip()}")
    assert problems == []


def test_every_make_reproduce_in_the_readme_carries_the_run_file_s_ceiling_or_the_plan_s_line():
    """One ceiling per run (docs/cost.md §2): a make reproduce of a shipped run in the README either
    leaves MAX_COST to its run file (which benchmarks/plan_estimates.py --check holds to make plan's
    figure) or is make plan's own generated line for another configuration (its MAX_COST, a block
    between plan markers); no README line names a ceiling of its own."""
    text = README.read_text()
    generated = "".join(m.group(0) for m in re.finditer(r"<!-- plan:[a-z-]+ -->.*?<!-- /plan:[a-z-]+ -->", text, re.S))
    lines = [line for line in command_lines(text) if re.search(r"(^|&& )make reproduce ", line)]
    assert len(lines) >= 6
    checked = 0
    for line in lines:
        words = dict(w.split("=", 1) for w in line.split() if "=" in w and not w.startswith("<"))
        if not re.fullmatch(r"[a-z0-9-]+", words.get("RUN", "")):
            continue  # a placeholder (<name>): your own run, your own ceiling
        assert (REPO / "runs" / f"{words['RUN']}.env").is_file(), line
        if "MAX_COST" in words:
            assert line.split(" #")[0].strip() in generated, f"a ceiling the plan did not give: {line}"
        checked += 1
    assert checked >= 6


def test_the_readme_watches_a_remote_run_as_the_verb_does_from_its_bucket(tmp_path):
    import os
    text = README.read_text()
    assert "`make pull` first" not in text
    form = re.search(r"`make watch RUN=(\S+) WHERE=hf BUCKET=<ns>/<bucket>`", text)
    assert form, "the README's watch section names no WHERE=hf BUCKET= form"
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "CLI_SETTINGS", "DRY_RUN")}
    proc = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "watch", f"RUN={form.group(1)}",
                           "WHERE=hf", "BUCKET=alice/tb", "DRY_RUN=1"], capture_output=True, text=True, timeout=120,
                          env={**env, "STATE_ROOT": str(tmp_path / "state")})
    assert proc.returncode == 0, proc.stderr
    assert "--where hf --bucket alice/tb" in proc.stdout
    assert "would read, each frame, from hf://buckets/alice/tb:" in proc.stderr


def test_each_run_of_the_readmes_step_by_step_flow_ends_with_make_stop():
    text = README.read_text()
    block = text.split("Or step by step", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    served = re.findall(r"make serve RUN=(\S+)", block)
    assert len(served) >= 4
    for run in served:
        verbs = re.findall(rf"make (\w+) RUN={re.escape(run)}(?=\s|$)", block)
        assert verbs[-1] == "stop", f"{run}'s steps end with make {verbs[-1]}, not make stop"
