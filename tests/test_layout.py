"""The code as a map: tools/ is grouped by stage and its imports point one way; one definition per
rule and per formatter; no routine or module too long to read (docs/design.md, "Layout").

Each check reads the tree as it is (ast for Python, the text for bash), so a new module, a new
import or a new copy of a formatter is judged the day it lands.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TOOLS = REPO / "tools"
SCRIPTS = REPO / "scripts"

# The floors, lowest first. A module may import its own package and any package below it, never
# one above: the tally does not know about mop-up, mop-up does not know about the report, and only
# the run's supervision sees everything. The floor modules (fmt, safe_read, the settings model)
# import no stage.
FLOORS = {
    "base": 0,       # tools/fmt.py, tools/safe_read.py, tools/settings*.py, tools/hf_client.py
    "results": 1,
    "mopup": 2,
    "money": 2,
    "hub": 3,
    "report": 4,
    "run": 5,
    "campaign": 6,   # several runs under one supervisor: it drives each run's own supervision
    "cli": 7,        # tools/tally.py, the tally's command line
}
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600
# Command-line modules that are also a library by design: the settings model is the scripts' command
# (resolve) and the one way a tool reads its run's settings (tools.settings.current, TB_SETTINGS).
LIBRARY_COMMANDS = {"tools.settings"}


def modules() -> list[Path]:
    return sorted(p for p in TOOLS.rglob("*.py") if "__pycache__" not in p.parts)


def dotted(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def package_of(name: str) -> str:
    parts = name.split(".")
    if len(parts) <= 2:  # tools.fmt, tools.safe_read, tools.tally
        return "cli" if parts[-1] == "tally" else "base"
    return parts[1]


def tools_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every tools module `path` imports, at any depth of the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tools":
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.append((node.lineno, sub if importable(sub) else node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "tools"]
    return found


def importable(name: str) -> bool:
    rel = Path(*name.split("."))
    return (REPO / rel.with_suffix(".py")).is_file() or (REPO / rel / "__init__.py").is_file()


def is_cli(path: Path) -> bool:
    return '__name__ == "__main__"' in path.read_text()


def test_every_module_lives_in_a_stage_package_or_is_one_of_the_floor_or_the_tally_cli():
    loose = [p.name for p in TOOLS.glob("*.py")]
    assert sorted(loose) == ["__init__.py", "fmt.py", "hf_client.py", "safe_read.py", "settings.py",
                             "settings_rules.py", "settings_types.py", "tally.py"]
    packages = sorted(p.name for p in TOOLS.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert packages == sorted(k for k in FLOORS if k not in ("base", "cli"))
    for package in packages:
        assert (TOOLS / package / "__init__.py").read_text().startswith('"""'), f"{package} says what it holds"


def test_imports_point_down_the_floors_never_up():
    wrong = []
    for path in modules():
        here = package_of(dotted(path))
        for line, name in tools_imports(path):
            there = package_of(name) if name != "tools" else "base"
            if FLOORS[there] > FLOORS[here]:
                wrong.append(f"{path.relative_to(REPO)}:{line} ({here}) imports {name} ({there})")
    assert wrong == []


def test_no_command_line_module_is_imported_as_a_library():
    clis = {dotted(p) for p in modules() if is_cli(p)} - LIBRARY_COMMANDS
    wrong = [f"{p.relative_to(REPO)}:{line} imports {name}" for p in modules()
             for line, name in tools_imports(p) if name in clis and name != dotted(p)]
    assert clis and wrong == []


def test_no_module_over_600_lines_and_no_function_over_80():
    long_modules = [f"{p.relative_to(REPO)}: {n}" for p in modules()
                    if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES]
    long_functions = []
    for p in modules():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long_functions.append(f"{p.relative_to(REPO)}:{node.lineno} {node.name}: {n}")
    assert (long_modules, long_functions) == ([], [])


def test_no_shell_function_over_80_lines():
    long = []
    for path in sorted(SCRIPTS.glob("*.sh")):
        start = name = None
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if m := re.match(r"^([A-Za-z_][\w-]*)\(\) *\{", line):
                start, name = i, m.group(1)
            elif line == "}" and name:
                if i - start + 1 > MAX_FUNCTION_LINES:
                    long.append(f"{path.name}:{start} {name}: {i - start + 1}")
                name = None
    assert long == []


# One definition of each: (what, a pattern of its definition, the one file allowed to hold it).
ONE_DEFINITION = [
    ("a percent", r"^def _?(pct|percent|share)\(", "tools/fmt.py"),
    ("dollars", r"^def _?(usd|dollars|money)\(", "tools/fmt.py"),
    ("a clock-like duration", r"^def _?(duration|elapsed)\(", "tools/fmt.py"),
    ("hours", r"^def _?hours\(", "tools/fmt.py"),
    ("now in UTC", r"^\s*def _?(now|now_iso|now_utc|utc_now|stamp)\(", "tools/fmt.py"),
    ("an hf-style duration parsed",
     r"^def _?(parse_duration|seconds_of|duration_seconds)\(", "tools/fmt.py"),
    ("an atomic write", r"^def _?write_atomic(ally)?\(", "tools/safe_read.py"),
    ("whether a trial settles its slot", r"^def _?(is_settled|unsettled|settles)\(", None),
]


@pytest.mark.parametrize("what, pattern, home", ONE_DEFINITION, ids=[w for w, _, _ in ONE_DEFINITION])
def test_one_definition_of_each_rule_and_formatter(what, pattern, home):
    # tools/run/watchdog.py runs on HF alone, from its bundle: it keeps its own duration parser,
    # checked equal to fmt's in tests/test_watchdog.py.
    where = sorted({str(p.relative_to(REPO)) for p in modules() for line in p.read_text().splitlines()
                   if re.match(pattern, line) and p.name != "watchdog.py"})
    if home is None:
        assert len(where) == 1, f"{what}: {where}"
    else:
        assert where == [home], f"{what}: {where}"


def test_no_script_over_600_lines():
    long_scripts = [f"{p.relative_to(REPO)}: {n}" for p in sorted(SCRIPTS.glob("*.sh"))
                    if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES]
    assert long_scripts == []


def test_every_shell_library_is_sourced_by_a_script_or_library():
    """A lib-*.sh (and argv.sh) nobody sources is dead code; one sourced by a path that does not
    exist fails only when that script runs."""
    texts = {p.name: p.read_text() for p in SCRIPTS.glob("*.sh")}
    sourced = set(re.findall(r'^\s*source "\$(?:REPO_ROOT|\(dirname "\$0"\))/(?:scripts/)?([a-z-]+\.sh)"', "\n".join(texts.values()), re.M))
    libraries = {name for name in texts if name.startswith("lib") or name == "argv.sh"}
    assert sorted(libraries - sourced) == []
    assert sorted(sourced - set(texts)) == []


def test_no_run_file_or_profile_is_sourced():
    """Run files and profiles are data, read by tools/settings.py: no script sources or evaluates one."""
    found = [f"{p.name}:{i}" for p in sorted(SCRIPTS.glob("*.sh"))
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r'^\s*(source|\.|eval)\s.*(RUNS_DIR|ENV_DIR|\.env\b)', line)]
    assert found == []


def test_one_duration_parser_in_bash():
    where = [f"{p.name}" for p in sorted(SCRIPTS.glob("*.sh")) for line in p.read_text().splitlines()
             if re.match(r"^(duration_seconds|seconds_of|parse_duration)\(\)", line)]
    assert where == ["lib-settings.sh"]
