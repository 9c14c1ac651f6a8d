"""The engines' own command lines, as functions the tests call (docs/tests.md §2).

    from tests.engines import parse_sglang_serve, parse_vllm_serve, parse_smg_router, Rejected
    (and parse_smg_serve, the data-parallel command `smg serve` as it was: tests/test_engines.py)

    parsed = parse_sglang_serve(["sglang", "serve", "--model-path", "M", "--tp-size", "2"])
    parsed.values["tp_size"]            # 2
    parsed.options["--tp-size"]         # {"dest": "tp_size", "nargs": None}

Each takes the whole command as the job runs it, program words included (`sglang serve …`,
`vllm serve MODEL …`, `python3 -m smg.launch_router …`, `python3 -m smg serve …`), and runs it through the engine's real
entry point at the version tests/engines.lock.json pins (tests/engines/child.py), stopping where
the server would start. `values` is what the server would have been given: sglang's ServerArgs
fields, vLLM's parsed namespace (the model stays in `model_tag`, as argparse leaves it; serve's
`cmd` copies it to `model`), SMG's RouterArgs fields; JSON values, an enum as its value.
`options` maps every option string the engine's parsers know to its dest and argparse's nargs
(0 for a flag that takes no value). A command the engine
refuses raises Rejected with the engine's own message, e.g. argparse's last line
`sglang serve: error: unrecognized arguments: --nope`.

Each engine runs in a process of its own, started at its first parse and kept for the test
process's life: its stubs never reach this process or another engine, and its import (about 1 s
of CPU for sglang, 3 s for vLLM, 0.1 s for SMG) is paid once. The first call fetches the wheels
(tests/engines/fetch.py); when PyPI cannot be reached the test is skipped with why, and fails in CI.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.engines import fetch
from tests.engines.child import WHEELS

# Bounds only a hang reaches: an engine's import on a loaded machine takes seconds, a parse less.
START_TIMEOUT = 300
PARSE_TIMEOUT = 120


class Rejected(Exception):
    """The engine refused the command: its own message."""


@dataclasses.dataclass(frozen=True)
class Parsed:
    values: dict
    options: dict


def parse_sglang_serve(argv: list[str]) -> Parsed:
    """`sglang serve …` through sglang 0.5.23's sglang.cli.main:main, up to run_server."""
    return _child("sglang", ()).parse(argv)


def parse_vllm_serve(argv: list[str]) -> Parsed:
    """`vllm serve …` through vLLM 0.34.0's vllm.entrypoints.cli.main:main, up to serve's cmd."""
    return _child("vllm", ()).parse(argv)


def parse_smg_router(argv: list[str]) -> Parsed:
    """`python3 -m smg.launch_router …` through SMG 1.13.0's main, up to launch_router."""
    return _child("smg-router", ()).parse(argv)


def parse_smg_serve(argv: list[str]) -> Parsed:
    """`python3 -m smg serve …` through SMG 1.13.0's smg.cli:main with sglang 0.5.23's parser in it,
    up to ServeOrchestrator.run; values hold the orchestrator's backend and backend_args too."""
    return _child("smg-serve", ()).parse(argv)


def stubbed(engine: str, extra_stubs: tuple[str, ...] = ()) -> list[str]:
    """The modules the engine's process has answered with stand-ins so far (tests/engines/stubs.py):
    its import's, and its entry point's since (vLLM's main imports its subcommands when it runs)."""
    return _child(engine, extra_stubs).stubbed


def parse_with_stubs(engine: str, extra_stubs: tuple[str, ...], argv: list[str]) -> Parsed:
    """The engine's parse with more modules stubbed than it needs: the tests' proof that a stub
    reaching the parser fails the parse."""
    return _child(engine, extra_stubs).parse(argv)


def fetch_wheels(engine: str) -> list[Path]:
    """The engine's extracted wheels, fetched first if need be; a test is skipped (failed in CI)
    when PyPI cannot be reached."""
    try:
        return [fetch.ensure(fetch.entry(name)) for name in WHEELS[engine]]
    except fetch.Unreachable as error:
        if os.environ.get("CI"):
            raise
        import pytest
        pytest.skip(f"{error} (CI fails here)")


class _Child:
    def __init__(self, engine: str, extra_stubs: tuple[str, ...]):
        fetch_wheels(engine)
        self.engine = engine
        # The engine's home: its caches and logs are written here, never in the user's.
        self.scratch = Path(tempfile.mkdtemp(prefix=f"engine-{engine}-"))
        self.log = self.scratch / "stderr.log"
        env = {**os.environ, "HOME": str(self.scratch), "XDG_CACHE_HOME": str(self.scratch / "cache"),
               "HF_HOME": str(self.scratch / "hf"), "PYTHONDONTWRITEBYTECODE": "1"}
        stubs = [word for name in extra_stubs for word in ("--stub", name)]
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.engines.child", engine, *stubs],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=self.scratch, env=env, text=True)
        atexit.register(self.close)
        ready = self._answer(START_TIMEOUT)
        if not ready.get("ready"):
            raise RuntimeError(f"engines: {engine}'s parser did not import:\n{ready.get('error')}")
        self.stubbed = ready["stubbed"]

    def parse(self, argv: list[str]) -> Parsed:
        self.process.stdin.write(json.dumps({"argv": list(argv)}) + "\n")
        self.process.stdin.flush()
        answer = self._answer(PARSE_TIMEOUT)
        self.stubbed = answer["stubbed"]
        if not answer["ok"]:
            raise Rejected(answer["error"])
        return Parsed(answer["values"], answer["options"])

    def _answer(self, timeout: float) -> dict:
        readable, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if readable else ""
        if not line:
            state = "exited" if self.process.poll() is not None else f"gave no answer in {timeout} s"
            tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
            self.close()
            raise RuntimeError(f"engines: {self.engine}'s parser {state}; its last words:\n{tail}")
        return json.loads(line)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.scratch, ignore_errors=True)


@functools.cache
def _child(engine: str, extra_stubs: tuple[str, ...]) -> _Child:
    return _Child(engine, extra_stubs)
