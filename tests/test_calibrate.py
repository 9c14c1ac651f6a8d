"""make calibrate's Python side (tools/money/calibrate.py): a key among evalscope's arguments
refused. The real evalscope against a fake endpoint is tests/calibrate.bats'.
"""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from tools.money import calibrate

# A token of the HF shape, made for these tests alone; nothing redacted may hold any part of it.
CANARY = "hf_CANARYcanaryCANARYcanary0123456789"
SECRET = "a-key-of-no-known-shape-0123456789"  # the exact value: what no pattern would find
URL = "http://127.0.0.1:1/v1/chat/completions"
LEVEL_OPTIONS = ["--out", "OUT", "--run", "qwen-t2", "--profile", "p", "--flavor", "h200", "--prompt-tokens", "48",
                 "--shared-prefix-tokens", "32", "--output-tokens", "8"]


# --- the key on evalscope's command line ----------------------------------------------------------

@pytest.mark.parametrize("key_argv", [["--api-key", SECRET], [f"--api-key={SECRET}"], ["--api-ke", SECRET]],
                         ids=["spaced", "joined", "abbreviated"])
def test_a_key_among_evalscope_arguments_is_refused_before_anything_runs(tmp_path, monkeypatch, key_argv):
    # evalscope's parser takes --api-key in any spelling argparse allows (an unambiguous prefix
    # too); each is in every process listing, and is refused before evalscope runs or a file is made.
    import evalscope.perf.main

    ran = []
    monkeypatch.setattr(evalscope.perf.main, "run_perf_benchmark", lambda args: ran.append(args))
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    out = tmp_path / "calibration.json"
    options = [str(out) if word == "OUT" else word for word in LEVEL_OPTIONS]
    result = CliRunner().invoke(calibrate.cli, [*options, "--", "--url", URL, "--api", "openai", "--model", "m",
                                                *key_argv, "--outputs-dir", str(tmp_path / "raw")])
    assert (result.exit_code, result.output) == (
        1, "calibrate: a key on the command line is in every process listing: put it in OPENAI_API_KEY\n")
    assert ran == [] and sorted(os.listdir(tmp_path)) == []
