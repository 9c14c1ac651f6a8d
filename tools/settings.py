"""A run's settings: declared once, read as data, checked in one place (docs/settings.md).

`env/defaults.env` is the catalogue. Each of its lines declares one setting with its default, its
type in brackets and its meaning:

    N_CONCURRENT=3          # [int 1..1000; identity] --n-concurrent: ...

A run resolves four layers, later wins: the catalogue's defaults < `env/servers/<SERVER>.env` <
`runs/<RUN>.env` < the command line. The files are read by `read_file` below, as data: nothing in
them is ever run, and a line that is not a statement (docs/settings.md §1 says which are) is
refused by file and line, its text never shown (it may be a secret).

The checks are the catalogue's types (tools/settings_types.py) and one flat list of rules across
settings (tools/settings_rules.py): every verb runs the same ones on the same resolved values.
The scripts ask for a run's settings once per verb (`python -m tools.settings resolve`, by
scripts/lib-settings.sh) and get them back as NUL-separated records, values as data; the Python
tools get the same resolved settings as one JSON document in TB_SETTINGS (`current()`).

Standard library only: it runs before .venv exists (make stop with an hf of the user's own).
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from tools import settings_rules as rules, settings_types as types

# The checkout whose files are read: this one, or the one `--root` names (a verb's REPO_ROOT, which
# may be a checkout whose tools/ is a link to this one's).
REPO = Path(__file__).resolve().parent.parent

# Variables a verb reads that are not settings: what a run is (RUN, RUNS), how a verb prints (JSON,
# TIMEOUTS, OUT, HTML), one verb's argument (JOB_DIR, TASK), where state lives (STATE_ROOT), the
# Python make setup builds .venv with (PYTHON), and what a remote job of the run is told (SERVER_JOB,
# RUN_INSTANCE); a campaign's name (CAMPAIGN). Any other name on a command line must be a setting.
NON_SETTINGS = ("RUN", "RUNS", "JSON", "TIMEOUTS", "JOB_DIR", "PYTHON", "STATE_ROOT", "OUT", "TASK",
                "SERVER_JOB", "RUN_INSTANCE", "HTML", "CAMPAIGN")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
SECRET_NAME = re.compile(r".*(TOKEN|KEY|SECRET.*|PASSWORD.*)$")
MAX_FILE_BYTES = 64 * 1024
INCLUDE = re.compile(r'source "\$\{BASH_SOURCE\[0\]%/\*\}/([A-Za-z0-9._-]+\.env)"')
ASSIGN = re.compile(r"([A-Z][A-Z0-9_]*)(\+?)=")
REFERENCE = re.compile(r"\$(?:([A-Z][A-Z0-9_]*)|\{([A-Z][A-Z0-9_]*)\})")
TOKEN = re.compile(r"(hf_|sk-)[A-Za-z0-9_-]{20,}")


class SettingsError(Exception):
    """A refusal: one line that names the problem and the fix."""


@dataclass(frozen=True)
class Setting:
    name: str
    default: str
    type: types.Type
    meaning: str
    identity: bool


# --- reading a settings file as data ----------------------------------------------------------------

@dataclass
class Line:
    """One statement of a settings file: an assignment (name, op, value) or an include (file)."""
    number: int
    name: str = ""
    op: str = "="
    value: tuple = ()  # the value's parts: ("", text) literal, ("$", NAME) a setting's value
    include: str = ""
    comment: str = ""


def _refuse(path: Path, number: int, why: str) -> SettingsError:
    return SettingsError(f"{rel(path)} line {number} {why}. A settings file is read as settings, never run; "
                         "that line's text is not shown (it may hold a secret)")


def rel(path: Path) -> str:
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)


def read_text(path: Path, root: Path) -> str:
    """The file's text, bounded, from a real file inside `root` (a link out of the tree is refused)."""
    if path.is_symlink() or not path.resolve().is_relative_to(root.resolve()):
        raise SettingsError(f"{rel(path)} is a link: a settings file is read only as a file of its own "
                            f"inside {rel(root)}/, never where a link leads (it could be the token). Copy the file itself")
    if not path.is_file():
        raise SettingsError(f"{rel(path)} is not a file")
    data = path.read_bytes()
    if len(data) > MAX_FILE_BYTES:
        raise SettingsError(f"{rel(path)} is over {MAX_FILE_BYTES // 1024} KiB: a settings file is a few lines")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _refuse(path, data[:err.start].count(b"\n") + 1, "is not UTF-8 text") from None


def read_file(path: Path, root: Path, includes: bool = False) -> list[Line]:
    """Every statement of a settings file, or SettingsError at its first line that is not one."""
    text = read_text(path, root)
    lines, pos, number = [], 0, 1
    while pos < len(text):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        raw = text[pos:end]
        start_number = number
        if TOKEN.search(raw):
            raise _refuse(path, number, "holds what looks like a token (hf_… or sk-…): a run file or profile is "
                          "committed, and copied into remote jobs; keep tokens out of it: export HF_TOKEN, or hf auth login")
        stripped = raw.strip(" \t")
        if not stripped or stripped.startswith("#"):
            pos, number = end + 1, number + 1
            continue
        include = INCLUDE.fullmatch(raw)
        if include and includes:
            lines.append(Line(number, include=include.group(1)))
            pos, number = end + 1, number + 1
            continue
        assign = ASSIGN.match(text, pos)
        if not assign:
            raise _refuse(path, number, "is not a setting (NAME=value), a comment or a blank line")
        value, pos, comment = _word(text, assign.end(), path, start_number)
        number = start_number + text.count("\n", assign.end(), pos)
        lines.append(Line(start_number, assign.group(1), assign.group(2) + "=", value, comment=comment))
        if TOKEN.search("".join(text for _, text in value)):
            raise _refuse(path, start_number, "holds what looks like a token (hf_… or sk-…): keep tokens out of it")
        pos, number = pos + 1, number + 1
    return lines


def _word(text: str, i: int, path: Path, number: int) -> tuple[tuple, int, str]:
    """The value starting at text[i] as bash reads one word of an assignment, as parts (a `$NAME`
    is resolved against the layers by `expand`); the index of the line's end; its comment."""
    out: list = []
    quote = ""
    while i < len(text):
        c = text[i]
        if quote == "'":
            if c == "'":
                quote = ""
            else:
                out.append(("", c))
            i += 1
            continue
        if c == "\\":
            nxt = text[i + 1:i + 2]
            if nxt == "\n":  # a continued line
                i += 2
                continue
            if quote == '"' and nxt not in ('"', "\\", "$", "`"):
                out.append(("", c))
                i += 1
                continue
            out.append(("", nxt))
            i += 2
            continue
        if c == "`" or text.startswith("$(", i):
            raise _refuse(path, number, "holds a command substitution ($(…) or `…`), which would run code")
        if c == "$":
            ref = REFERENCE.match(text, i)
            if not ref:
                raise _refuse(path, number, "holds a $ that names no setting ($NAME or ${NAME} may name a setting "
                              "read before it; a literal $ is \\$)")
            out.append(("$", ref.group(1) or ref.group(2)))
            i = ref.end()
            continue
        if quote == '"':
            if c == '"':
                quote = ""
            else:
                out.append(("", c))
            i += 1
            continue
        if c in "'\"":
            quote = c
            i += 1
            continue
        if c in " \t\n":
            break
        if c in ";&|<>()":
            raise _refuse(path, number, f"holds a shell operator ({c}) outside quotes, which would run code: quote the value")
        out.append(("", c))
        i += 1
    if quote:
        raise _refuse(path, number, "ends inside a quoted value: close its quote")
    end = text.find("\n", i)
    end = len(text) if end < 0 else end
    rest = text[i:end].strip(" \t")
    if rest and not rest.startswith("#"):
        raise _refuse(path, number, "holds more than one NAME=value (a second word would run as a command): "
                      "quote a value with spaces")
    return tuple(out), end, rest[1:].strip()


def expand(parts: tuple, values: dict[str, str], path: Path, number: int) -> str:
    """A read value's text: each `$NAME` the setting's value so far."""
    out = []
    for kind, text in parts:
        if kind == "$" and text not in values:
            raise _refuse(path, number, f"names ${text}, which is not a setting")
        out.append(values[text] if kind == "$" else text)
    return "".join(out)


# --- the catalogue ------------------------------------------------------------------------------------

def catalogue(path: Path | None = None) -> dict[str, Setting]:
    """Every setting, from the catalogue's lines: NAME=default  # [type; identity] meaning."""
    path = path or REPO / "env" / "defaults.env"
    found: dict[str, Setting] = {}
    for line in read_file(path, path.parent):
        spec = re.fullmatch(r"\[([^\]]+)\]\s*(.*)", line.comment, re.S)
        if not spec or line.op != "=":
            raise SettingsError(f"{rel(path)} line {line.number}: {line.name} declares no type: write "
                                f"'{line.name}=<default>  # [<type>] <meaning>' (types: {types.GRAMMAR})")
        parts = [p.strip() for p in spec.group(1).split(";")]
        try:
            kind = types.parse(parts[0])
        except ValueError as err:
            raise SettingsError(f"{rel(path)} line {line.number}: {line.name}: {err}") from None
        if line.name in found:
            raise SettingsError(f"{rel(path)} line {line.number}: {line.name} is declared twice")
        found[line.name] = Setting(line.name, expand(line.value, {}, path, line.number), kind, spec.group(2), "identity" in parts[1:])
    return found


# --- resolving a run ----------------------------------------------------------------------------------

@dataclass
class Resolved:
    run: str
    values: dict[str, str]
    command_line: list[tuple[str, str]]
    job_name_given: bool


def known(name: str, settings: dict[str, Setting], path: Path, number: int) -> None:
    if name not in settings:
        hint = closest(name, list(settings))
        raise _refuse(path, number, f"sets {name}, which is not a setting" + (f": did you mean {hint}?" if hint else
                      " (every setting is in env/defaults.env)"))


def apply(path: Path, root: Path, values: dict[str, str], settings: dict[str, Setting],
          includes: bool = False, seen: tuple[Path, ...] = ()) -> dict[str, str]:
    """Layer the file at `path` over `values` (its includes first, at their line), in order; the
    names it assigns, for the MODEL_LABEL rule."""
    if path in seen:
        raise SettingsError(f"{rel(path)} includes itself (through {' → '.join(rel(p) for p in seen)})")
    assigned: dict[str, str] = {}
    names_here: set[str] = set()
    for line in read_file(path, root, includes):
        if line.include:
            target = path.parent / line.include
            if not target.is_file():
                raise SettingsError(f"{rel(path)} includes {line.include}, which is not in {rel(path.parent)}/")
            assigned.update(apply(target, root, values, settings, True, seen + (path,)))
            continue
        known(line.name, settings, path, line.number)
        if line.op == "=" and line.name in names_here:
            raise _refuse(path, line.number, f"sets {line.name} a second time: one line per setting (NAME+=… appends)")
        names_here.add(line.name)
        value = expand(line.value, values, path, line.number)
        values[line.name] = values.get(line.name, "") + value if line.op == "+=" else value
        assigned[line.name] = values[line.name]
    return assigned


def run_path(run: str) -> Path:
    return REPO / "runs" / f"{run}.env"


def list_runs() -> list[str]:
    # In the order of their file names, as bash's glob lists them (example-x-y.env before example-x.env).
    return [p.stem for p in sorted((REPO / "runs").glob("*.env"), key=lambda p: p.name)]


def resolve(run: str, overrides: dict[str, str], settings: dict[str, Setting]) -> dict[str, str]:
    """RUN's settings: the catalogue < its server profile < its run file < `overrides`."""
    values = {name: s.default for name, s in settings.items()}
    run_file = run_path(run)
    read_only_run = dict(values)
    apply(run_file, REPO / "runs", read_only_run, settings)
    server = overrides.get("SERVER", read_only_run["SERVER"])
    if not (NAME.fullmatch(server) and (REPO / "env" / "servers" / f"{server}.env").is_file()):
        have = " ".join(sorted(p.stem for p in (REPO / "env" / "servers").glob("*.env")))
        raise SettingsError(f"run '{run}' names server profile '{server}', which is not in env/servers/ (have: {have} )")
    apply(REPO / "env" / "servers" / f"{server}.env", REPO / "env" / "servers", values, settings, includes=True)
    profile_model, profile_label = values["MODEL"], values["MODEL_LABEL"]
    apply(run_file, REPO / "runs", values, settings)
    values.update(overrides)
    # A profile's MODEL_LABEL names the profile's model: a run that serves another MODEL without
    # naming its label gets the label of its own model, never the profile's.
    if values["MODEL"] != profile_model and values["MODEL_LABEL"] == profile_label:
        values["MODEL_LABEL"] = ""
    values["JOB_NAME"] = values["JOB_NAME"] or run
    # A remote harbor job needs the server for as long as the server lives; an hf-sandbox outlasts the agent.
    values["BENCH_TIMEOUT"] = values["BENCH_TIMEOUT"] or values["SERVER_TIMEOUT"]
    values["SANDBOX_IDLE_TIMEOUT"] = rules.sandbox_idle_default(values)
    return values


def closest(name: str, candidates: list[str]) -> str:
    """The candidate nearest `name` (case-insensitive edit distance, a swap of two letters counting
    one), when it is near enough to be a typo of it; ties go to the candidate of the same length."""
    def distance(a: str, b: str) -> int:
        d = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
        for i in range(len(a) + 1):
            d[i][0] = i
        for j in range(len(b) + 1):
            d[0][j] = j
        for i in range(1, len(a) + 1):
            for j in range(1, len(b) + 1):
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
                if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
        return d[len(a)][len(b)]
    best, best_key = "", None
    for candidate in candidates:
        key = (distance(name.upper(), candidate.upper()), abs(len(candidate) - len(name)))
        if best_key is None or key < best_key:
            best, best_key = candidate, key
    return best if best_key is not None and best_key[0] <= 1 + len(name) // 5 else ""


# --- the command line ---------------------------------------------------------------------------------

# Settings the shell's environment sets as well as make's command line: a dry run never harms, and
# how long a call to HF may take is the network's, not the run's (a slow link exports it once).
FROM_SHELL = ("DRY_RUN", "HF_CALL_TIMEOUT")


def command_line(environ: dict[str, str], settings: dict[str, Setting], verb: str) -> tuple[dict[str, str], list[str]]:
    """The settings given on the command line, and a note for each the shell exported that is not.

    Under make, CLI_SETTINGS names what make's command line set: only those count, and FROM_SHELL's
    from the shell as well. A script run directly (the tests, a verb's own children) has no CLI_SETTINGS: its
    whole environment is its command line."""
    under_make = "CLI_SETTINGS" in environ
    given = environ.get("CLI_SETTINGS", "").split()
    for name in given:
        if SECRET_NAME.fullmatch(name.upper()):
            raise SettingsError(f"{name} on make's command line sits in make's argv, which every local user can read (ps): "
                                f"export it in your shell instead (export {name}=…), or for the HF token run 'hf auth login'")
        if name in settings or name in NON_SETTINGS:
            continue
        hint = closest(name, list(settings) + list(NON_SETTINGS))
        if hint:
            raise SettingsError(f"unknown setting {name}: did you mean {hint}? (settings: env/defaults.env)")
        raise SettingsError(f"unknown setting {name}: neither a setting nor one of {' '.join(NON_SETTINGS)} (settings: env/defaults.env)")
    overrides, ignored = {}, []
    for name in settings:
        if name not in environ:
            continue
        if not under_make or name in FROM_SHELL or name in given:
            overrides[name] = environ[name]
        else:
            ignored.append(name)
    return overrides, ignored


def quote_word(word: str) -> str:
    """`word` as bash reads it back: bare when plain, else in single quotes (scripts/lib-print.sh's)."""
    if re.fullmatch(r"[A-Za-z0-9_./:=@,+%-]+", word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


# --- checking, once, for every verb -------------------------------------------------------------------

def shown(value: str) -> str:
    """A value as a refusal quotes it: never one that looks like a token, never a control character."""
    if TOKEN.search(value):
        return "<a value that looks like a token, not shown>"
    return value.encode("unicode_escape").decode("ascii") if types.CONTROL.search(value) or "\n" in value else value


def file_job_names(runs: list[str], settings: dict[str, Setting]) -> dict[str, str]:
    """Each run's JOB_NAME as its files alone resolve it; a run whose files do not read is left out
    (its own verbs say why)."""
    found = {}
    for other in runs:
        try:
            found[other] = resolve(other, {}, settings)["JOB_NAME"]
        except SettingsError:
            continue
    return found


def suggestion(setting: Setting, value: str) -> str:
    """For a value of a type with named choices: the one it looks like a typo of, and for an
    environment the whole list (it is long, and harbor's own)."""
    choices = {"enum": setting.type.choices, "envtype": tuple(types.HARBOR_ENV_TYPES)}
    names = choices.get(setting.type.kind, ())
    hint = closest(value, list(names)) if names else ""
    if setting.type.kind == "envtype":
        return (f": did you mean {hint}?" if hint else "") + f" (known: {' '.join(names)})"
    return f": did you mean {hint}?" if hint else ""


def wrong_type(name: str, setting: Setting, value: str) -> str:
    """A value its type refuses, as every verb words it (a run's refusal adds the run)."""
    return f"setting {name} must be {setting.type.requirement()}, got '{shown(value)}'{suggestion(setting, value)}"


def shell_notes(verb: str, ignored: list[str], environ: dict[str, str], values: dict[str, str]) -> list[str]:
    """A note for each setting the shell exported that differs from what counts (equal is no news)."""
    return [f"ignoring {name}={quote_word(environ[name])} from your shell's environment: only settings on make's "
            f"command line count (make {verb} {name}=…)" for name in ignored
            if name in values and environ[name] != values[name]]


def check(run: str, values: dict[str, str], settings: dict[str, Setting], verb: str, job_name_given: bool) -> list[str]:
    """Every refusal the values earn, in one order for every verb: the types, the rules across
    settings, what a command needs (COMMAND_VERBS only), the job name's own."""
    found = []
    for name, setting in settings.items():
        if not setting.type.valid(values[name]):
            if values[name] == "":
                found.append(f"setting {name} is empty for run '{run}': it must be {setting.type.phrase()}. "
                             f"Set it in runs/{run}.env, or on the command line: {name}=…")
            else:
                found.append(f"{wrong_type(name, setting, values[name])} (run '{run}')")
    if found:
        return found  # the rules read the values as their types
    for rule in rules.RULES + (rules.COMMANDS if verb in rules.COMMAND_VERBS else ()):
        why = rule(values, run)
        if why:
            found.append(why)
    owner = ("on the command line" if job_name_given else
             f"the run's name: runs/{run}.env sets no JOB_NAME" if values["JOB_NAME"] == run else f"runs/{run}.env")
    why = rules.job_name_ending(values, run, owner)
    if not why and not job_name_given:
        others = [r for r in list_runs() if r != run and NAME.fullmatch(r)]
        why = rules.job_name_owned(run, values["JOB_NAME"], file_job_names(others, settings))
    return found + ([why] if why else [])


# --- what the scripts and the tools get ---------------------------------------------------------------

# The verbs a bad setting never stops: stopping a server, listing jobs. They are told, and go on.
LENIENT_VERBS = ("stop", "jobs")


def resolve_for_verb(run: str, verb: str, environ: dict[str, str]) -> tuple[dict[str, str], list[tuple[str, str]], list[str]]:
    """(the resolved values, the command line's pairs, the notes to say) for `verb` on `run`, or
    SettingsError with the first refusal."""
    settings = catalogue()
    if not (NAME.fullmatch(run) and run_path(run).is_file()):
        raise SettingsError(f"unknown run '{run}' (runs/<name>.env)")
    overrides, ignored = command_line(environ, settings, verb)
    values = resolve(run, overrides, settings)
    notes = shell_notes(verb, ignored, environ, values)
    problems = check(run, values, settings, verb, "JOB_NAME" in overrides)
    if problems and verb not in LENIENT_VERBS:
        raise SettingsError(problems[0])
    notes += [f"warning: {why}; going on: a setting never stops make {verb}" for why in problems]
    return values, [(n, overrides[n]) for n in settings if n in overrides], notes


def runless(verb: str, names: list[str], environ: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """For a verb that acts on no run (make jobs, make report): (the settings `names` as the catalogue
    declares them or the command line gives them, each checked by its type; the notes to say), or
    SettingsError. A lenient verb is told of a bad value and goes on with the default."""
    settings = catalogue()
    overrides, ignored = command_line(environ, settings, verb)
    values, notes = {}, []
    for name in names:
        if name not in settings:
            raise SettingsError(f"{name} is not a setting (env/defaults.env)")
        value = overrides.get(name, settings[name].default)
        if not settings[name].type.valid(value):
            why = wrong_type(name, settings[name], value)
            if verb not in LENIENT_VERBS:
                raise SettingsError(why)
            notes.append(f"warning: {why}; going on with {name}={quote_word(settings[name].default)}: "
                         f"a setting never stops make {verb}")
            value = settings[name].default
        values[name] = value
    return values, notes + shell_notes(verb, ignored, environ, values)


def records(run: str, values: dict[str, str], pairs: list[tuple[str, str]]) -> bytes:
    """The NUL-separated records scripts/lib-settings.sh reads: S NAME VALUE for each setting, and
    C NAME=VALUE for each given on the command line."""
    out = []
    for name, value in values.items():
        out += ["S", name, value]
    for name, value in pairs:
        out += ["C", f"{name}={value}"]
    return ("\0".join(out) + "\0").encode()


class Settings:
    """A run's resolved settings as the tools read them: `s["N_CONCURRENT"]` typed by the catalogue
    (an int, seconds, a list of words, a bool; None for an empty optional), `s.raw(name)` as written."""

    def __init__(self, run: str, values: dict[str, str], settings: dict[str, Setting] | None = None):
        self.run = run
        self._values = values
        self._settings = settings or catalogue()

    def raw(self, name: str) -> str:
        return self._values[name]

    def __getitem__(self, name: str):
        return self._settings[name].type.convert(self._values[name])


def current(environ: dict[str, str] | None = None) -> Settings:
    """The settings the verb that started this tool resolved (TB_SETTINGS, set by scripts/lib.sh's `tool`)."""
    document = (environ if environ is not None else os.environ).get("TB_SETTINGS")
    if not document:
        raise SettingsError("no run's settings given (TB_SETTINGS): run this through its make verb")
    data = json.loads(document)
    settings = catalogue()
    values = data["settings"]
    missing = [name for name in settings if not isinstance(values.get(name), str)]
    if missing:
        raise SettingsError(f"TB_SETTINGS lacks {missing[0]}: run this through its make verb")
    return Settings(data["run"], {name: values[name] for name in settings}, settings)


def documentation(settings: dict[str, Setting]) -> str:
    """docs/settings.md's table of every setting (tests/test_settings.py holds the page to it)."""
    rows = ["| setting | default | type | run identity | meaning |", "| --- | --- | --- | --- | --- |"]
    for s in settings.values():
        default = f"`{s.default}`" if s.default else ""
        rows.append(f"| `{s.name}` | {default} | {s.type.spec} | {'yes' if s.identity else ''} | "
                    f"{s.meaning.replace('|', '&#124;')} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str]) -> int:
    global REPO
    if argv[:1] == ["--root"] and len(argv) > 1:
        REPO, argv = Path(argv[1]), argv[2:]
    command = argv[0] if argv else ""
    script = os.environ.get("SCRIPT_NAME", "settings")
    try:
        if command == "resolve" and len(argv) == 3:
            run, verb = argv[1], argv[2]
            values, pairs, notes = resolve_for_verb(run, verb, dict(os.environ))
            for note in notes:
                print(f"{script}: {note}", file=sys.stderr)
            sys.stdout.buffer.write(records(run, values, pairs))
            return 0
        if command == "runless" and len(argv) >= 2:
            values, notes = runless(argv[1], argv[2:], dict(os.environ))
            for note in notes:
                print(f"{script}: {note}", file=sys.stderr)
            sys.stdout.buffer.write(records("", values, []))
            return 0
        if command == "command-line" and len(argv) == 2:
            # Before a verb knows its run: a mistyped RUN (RNU=x) is named, not hidden by "no RUN given".
            command_line(dict(os.environ), catalogue(), argv[1])
            return 0
        if command == "unknown-run" and len(argv) == 2:
            runs = list_runs()
            hint = closest(argv[1], runs)
            if hint:
                raise SettingsError(f"unknown run '{argv[1]}': did you mean {hint}? (RUN={hint}; known runs: "
                                    f"{' '.join(runs)}, files in runs/)")
            raise SettingsError(f"unknown run '{argv[1]}'. Known runs: {' '.join(runs)} (files in runs/; your own: "
                                "runs/<name>.env)")
        if command == "doc" and len(argv) == 1:
            sys.stdout.write(documentation(catalogue()))
            return 0
        if command == "identity" and len(argv) == 1:
            # Each real run file's SERVER, JOB_NAME and identity settings as its files alone resolve
            # them, one JSON line each (make plan names the run made for the server it recommends).
            settings = catalogue()
            keep = ["SERVER", "JOB_NAME"] + [n for n, s in settings.items() if s.identity]
            for run in list_runs():
                if run.startswith("example-"):
                    continue
                try:
                    values = resolve(run, {}, settings)
                except SettingsError:
                    continue
                print(json.dumps({"run": run, "settings": {n: values[n] for n in keep}}))
            return 0
    except SettingsError as err:
        print(f"{script}: {err}", file=sys.stderr)
        return 1
    print("usage: python -m tools.settings [--root DIR] resolve RUN VERB | command-line VERB | unknown-run RUN | doc | "
          "identity | runless VERB NAME...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
