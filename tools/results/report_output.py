"""report_output: how the report's commands (tools/report/report.py, tools/hub/submission.py, tools/hub/publish.py)
print and write. Text prints as UTF-8 bytes, so a hostile name prints escaped, never crashes;
every file is written atomically, so a failed write leaves the old file as it was."""

from __future__ import annotations

from pathlib import Path

import click

from tools import safe_read
from tools.results.report_load import fail


def echo(text: str, nl: bool = True, err: bool = False) -> None:
    """Print as UTF-8 bytes: a stray surrogate from a hostile file prints escaped, never crashes."""
    click.echo(safe_read.shown(text).encode("utf-8", "backslashreplace"), nl=nl, err=err)


def write_files(files: dict[Path, bytes | str]) -> None:
    """Write each file atomically (its dir created first); a failure is one line, old file kept."""
    for path, data in files.items():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            safe_read.write_atomic(path, data)
        except OSError as e:
            fail(safe_read.write_error(path, e))


def write_or_echo(text: str, output: Path | None) -> None:
    if output is None:
        echo(text, nl=False)
    else:
        write_files({output: text})
        echo(f"report: wrote {output}", err=True)
