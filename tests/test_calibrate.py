"""make calibrate's Python side (tools/money/calibrate.py, tools/money/calibrate_evalscope.py): a key
among evalscope's arguments refused; the token redacted from what evalscope prints, logs and leaves
(as it is produced where evalscope lets it be, in place after it where it does not); a failure said
in one line with its cause, from what evalscope recorded of each failed request. The real evalscope
against a fake endpoint is tests/calibrate.bats'.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from tools.money import calibrate, calibrate_evalscope

# A token of the HF shape, made for these tests alone; nothing redacted may hold any part of it.
CANARY = "hf_" "CANARYcanaryCANARYcanary0123456789"  # in two parts: no tracked file holds a token's shape
SECRET = "a-key-of-no-known-shape-0123456789"  # the exact value: what no pattern would find
URL = "http://127.0.0.1:1/v1/chat/completions"
LEVEL_OPTIONS = ["--out", "OUT", "--run", "qwen-t2", "--profile", "p", "--flavor", "h200", "--prompt-tokens", "48",
                 "--shared-prefix-tokens", "32", "--output-tokens", "8"]


@pytest.fixture
def redactor():
    return calibrate_evalscope.Redactor([SECRET])


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


# --- redaction ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, redacted", [
    # The exact value, whatever its shape; a token of the HF shape, whatever its value.
    (f"key={SECRET}.", "key=[redacted]."),
    (f"token {CANARY} and hf_{'x' * 19}", "token [redacted] and hf_xxxxxxxxxxxxxxxxxxx"),
    # A bearer value, in an echoed error body; an Authorization header's value, in each shape it is
    # written in (a header line, JSON, a Python dict, JSON inside a JSON string).
    ('{"error": "Invalid credentials in Authorization header: Bearer abc.def-ghi"}',
     '{"error": "Invalid credentials in Authorization header: Bearer [redacted]"}'),
    ("authorization: Basic dXNlcjpwYXNz\nnext line", "authorization: [redacted]\nnext line"),
    ('{"Authorization": "**********", "user-agent": "x"}', '{"Authorization": "[redacted]", "user-agent": "x"}'),
    ("{'Authorization': 'Bearer abc', 'x': 1}", "{'Authorization': '[redacted]', 'x': 1}"),
    ('"{\\"authorization\\": \\"Bearer abc\\"}"', '"{\\"authorization\\": \\"[redacted]\\"}"'),
    # Nothing else: the words with no value after them, a short hf_ name.
    ("the Bearer; an authorization header; hf_hub", "the Bearer; an authorization header; hf_hub"),
])
def test_redaction_takes_the_token_its_shape_and_header_values(redactor, text, redacted):
    assert redactor.text(text) == redacted
    assert redactor.text(redacted) == redacted  # again: the same (the tree is redacted after its log)
    assert redactor.bytes(text.encode()) == redacted.encode()


def test_redaction_in_place_keeps_every_length(redactor):
    # A binary file (a SQLite database) is redacted byte for byte: what it was, minus the secrets.
    data = b"\x00\x01" + f"Bearer {CANARY}\x00{SECRET}".encode() + b"\xff"
    assert redactor.bytes(data, keep_length=True) == b"\x00\x01Bearer " + b"*" * 37 + b"\x00" + b"*" * 34 + b"\xff"


def test_short_or_empty_secrets_are_not_searched_for():
    # An unset key, or a few characters that would redact half of every line.
    assert calibrate_evalscope.Redactor(["", None, "abc"]).text("abc def") == "abc def"


# --- evalscope's streams, its log records, its files ----------------------------------------------

def test_the_streams_are_redacted_as_they_are_written_and_never_reach_the_terminal(tmp_path, redactor, capfd,
                                                                                   monkeypatch):
    # sys.stdout and sys.stderr as in calibrate's own process (pytest swaps them): on fds 1 and 2.
    monkeypatch.setattr(sys, "stdout", sys.__stdout__)
    monkeypatch.setattr(sys, "stderr", sys.__stderr__)
    log = tmp_path / "evalscope.log"
    with calibrate_evalscope.captured_output(log, redactor):
        print(f"Bearer {CANARY}")
        sys.stderr.write(f"progress 1\rprogress 2 {SECRET}\r")
        # A token split across two writes is redacted whole; so is what a child process writes.
        os.write(2, b"Authorization header: Bearer hf_CANARYcanary")
        os.write(2, b"CANARYcanary0123456789 (echoed)\n")
        subprocess.run([sys.executable, "-c", f"import sys; sys.stderr.write('child {CANARY}\\n')"], check=True)
        sys.stdout.write("no newline at the end")
    assert log.read_bytes() == (b"Bearer [redacted]\nprogress 1\rprogress 2 [redacted]\r"
                                b"Authorization header: Bearer [redacted] (echoed)\nchild [redacted]\n"
                                b"no newline at the end")
    assert capfd.readouterr() == ("", "")
    print("after")  # the terminal is the terminal again
    sys.stdout.flush()
    assert capfd.readouterr().out == "after\n"


def test_log_records_are_redacted_when_made_so_no_handler_sees_the_token(redactor):
    import io

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger = logging.getLogger("test_calibrate.records")
    logger.addHandler(handler)
    try:
        with calibrate_evalscope.redacted_records(redactor):
            logger.error("sent %s", f"Bearer {CANARY}")
            try:
                raise ValueError(f"the body was {SECRET}")
            except ValueError:
                logger.exception("failed")
        logger.error("after: %s", SECRET)  # the factory is put back
    finally:
        logger.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert lines[:3] == ["ERROR sent Bearer [redacted]", "ERROR failed", "Traceback (most recent call last):"]
    assert lines[-2:] == ["ValueError: the body was [redacted]", f"ERROR after: {SECRET}"]
    assert CANARY not in stream.getvalue() and stream.getvalue().count(SECRET) == 1


def test_the_files_evalscope_wrote_are_redacted_in_place(tmp_path, redactor):
    raw = tmp_path / "raw"
    (raw / "model").mkdir(parents=True)
    (raw / "model" / "benchmark.log").write_text(f"ERROR: Non-retryable error (HTTP 401): Bearer {CANARY}\n")
    (raw / "model" / "benchmark_summary.json").write_text('{"Total Requests": 2}\n')
    db = raw / "model" / "benchmark_data.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE result (response TEXT)")
        con.execute("INSERT INTO result VALUES (?)", (f"echoed {SECRET}",))
    con.close()
    outside = tmp_path / "outside.txt"
    outside.write_text(SECRET)
    (raw / "link").symlink_to(outside)
    clean = (raw / "model" / "benchmark_summary.json").stat()

    rewritten = calibrate_evalscope.redact_tree(raw, redactor)

    assert rewritten == [str(raw / "model" / "benchmark.log"), str(db)]
    assert (raw / "model" / "benchmark.log").read_text() == "ERROR: Non-retryable error (HTTP 401): Bearer [redacted]\n"
    with sqlite3.connect(db) as con:  # still a database: the redaction kept every length
        assert con.execute("SELECT response FROM result").fetchall() == [("echoed " + "*" * len(SECRET),)]
    con.close()
    assert SECRET.encode() not in db.read_bytes()
    assert (raw / "model" / "benchmark_summary.json").stat().st_ino == clean.st_ino  # a clean file is left as it is
    assert outside.read_text() == SECRET  # a link is not followed out of the tree


def test_evalscope_runs_with_all_it_prints_logs_and_leaves_redacted_and_nothing_on_the_terminal(
        tmp_path, redactor, capfd, monkeypatch):
    # evalscope's run, played: it logs through a file handler of its own (its benchmark.log), writes
    # a summary itself, prints and fails. The log file is redacted as it is written (read while the
    # run goes on), the summary once the run has ended, the output on its way to evalscope.log.
    import json

    import evalscope.perf.main

    monkeypatch.setattr(sys, "stdout", sys.__stdout__)
    monkeypatch.setattr(sys, "stderr", sys.__stderr__)
    monkeypatch.delenv("NO_COLOR", raising=False)
    raw, seen = tmp_path / "raw", {}

    def run_perf_benchmark(args):
        out = Path(args.outputs_dir) / "model"
        out.mkdir()
        logger, handler = logging.getLogger("test_calibrate.evalscope"), logging.FileHandler(out / "benchmark.log")
        logger.propagate = False  # as evalscope's own logger
        logger.addHandler(handler)
        try:
            logger.error("Non-retryable error (HTTP 401): %s", f'{{"error": "Bearer {CANARY}"}}')
        finally:
            logger.removeHandler(handler)
            handler.close()
        seen["log while running"] = (out / "benchmark.log").read_text()
        seen["NO_COLOR"] = os.environ.get("NO_COLOR")
        (out / "benchmark_summary.json").write_text(json.dumps({"echo": f"Bearer {CANARY}"}))
        print(f"summary {CANARY}", flush=True)
        os.write(2, f"progress {SECRET}\n".encode())
        raise TimeoutError("Test connection failed")

    monkeypatch.setattr(evalscope.perf.main, "run_perf_benchmark", run_perf_benchmark)
    with pytest.raises(TimeoutError, match="^Test connection failed$"):
        calibrate_evalscope.run_perf(SimpleNamespace(outputs_dir=str(raw)), redactor, raw / "evalscope.log")

    said = 'Non-retryable error (HTTP 401): {"error": "Bearer [redacted]"}\n'
    assert (seen["log while running"], seen["NO_COLOR"]) == (said, "1")
    assert (raw / "model" / "benchmark.log").read_text() == said
    assert (raw / "model" / "benchmark_summary.json").read_text() == '{"echo": "Bearer [redacted]"}'
    assert (raw / "evalscope.log").read_bytes() == b"summary [redacted]\nprogress [redacted]\n"
    assert capfd.readouterr() == ("", "") and "NO_COLOR" not in os.environ


def test_each_request_s_answer_is_redacted_before_evalscope_keeps_it_and_its_failure_is_kept(redactor):
    # evalscope's API plugin is where an answer enters it: what the plugin returns is what evalscope
    # logs, stores (its results database, pickled) and summarises, so it is redacted there.
    from evalscope.perf.plugin.registry import ApiRegistry
    from evalscope.perf.utils.benchmark_util import BenchmarkData

    class Echo:
        def __init__(self, answers):
            self.answers = answers

        async def process_request(self, client_session, url, headers, body):
            return self.answers.pop(0)

    ApiRegistry.register("test-calibrate-echo", Echo)
    failure = calibrate_evalscope.LastFailure()
    calibrate_evalscope.redacting_api("test-calibrate-echo", redactor, failure)
    plugin = ApiRegistry.get_class("test-calibrate-echo")([
        BenchmarkData(success=True, generated_text="4", response_messages=[{"choices": [{"delta": {"content": "4"}}]}]),
        BenchmarkData(success=True, generated_text=f"Bearer {CANARY}",
                      response_messages=[{"choices": [{"delta": {"content": f"Bearer {CANARY}"}}]}]),
        BenchmarkData(success=False, status_code=401, error=f'{{"error": "Authorization: Bearer {CANARY}"}}',
                      response_messages=[{"error": {"message": f"token {SECRET}"}}, f"Bearer {CANARY}"]),
    ])
    ok = asyncio.run(plugin.process_request(None, URL, {}, {}))
    assert (ok.success, ok.generated_text, failure.status, failure.error) == (True, "4", None, None)
    assert ok.response_messages == [{"choices": [{"delta": {"content": "4"}}]}]
    # A successful answer that holds a token (the model's text, were it to repeat one), all of it.
    echoed = asyncio.run(plugin.process_request(None, URL, {}, {}))
    assert (echoed.generated_text, echoed.response_messages) == (
        "Bearer [redacted]", [{"choices": [{"delta": {"content": "Bearer [redacted]"}}]}])
    bad = asyncio.run(plugin.process_request(None, URL, {}, {}))
    assert (bad.status_code, bad.error) == (401, '{"error": "Authorization: [redacted]"}')
    assert bad.response_messages == [{"error": {"message": "token [redacted]"}}, "Bearer [redacted]"]
    assert (failure.status, failure.error) == (401, '{"error": "Authorization: [redacted]"}')


# --- a failure, in one line -----------------------------------------------------------------------

def evalscope_traceback(*chain: str) -> str:
    """A failed request's error as evalscope keeps it (default_api.py: the formatted exception),
    its frames shortened: the exceptions of the chain, in order."""
    frame = '  File "aiohttp/connector.py", line 1322, in _wrap_create_connection\n    sock = await start()\n'
    parts = [f"Traceback (most recent call last):\n{frame}{line}\n" for line in chain]
    return "\nThe above exception was the direct cause of the following exception:\n\n".join(parts)


TIMEOUT, RUN = 1800, "qwen-t2"
CAUSES = {
    "401": (401, '{"error": "Invalid credentials in Authorization header: Bearer [redacted]"}',
            "the endpoint answered 401 Unauthorized: it rejects the HF token (the token needs read access to the "
            "job's namespace): hf auth login, or set HF_TOKEN"),
    "403": (403, "Forbidden", "the endpoint answered 403 Forbidden: it rejects the HF token (the token needs read "
                              "access to the job's namespace): hf auth login, or set HF_TOKEN"),
    "404": (404, '{"detail": "Not Found"}', f"the endpoint answered 404 Not Found: nothing serves {URL} (an API_BASE "
                                            "must be the server's /v1)"),
    # Any other answer: its body on one line, its control characters escaped, clipped.
    "503": (503, "upstream \x1b[31mwarming\x1b[0m up\n" + "x" * 300,
            "the endpoint answered 503 Service Unavailable: upstream \\x1b[31mwarming\\x1b[0m up " + "x" * 165
            + "… (truncated, 335 chars)"),
    "refused": (None, evalscope_traceback(
        "ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 1)",
        "aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host 127.0.0.1:1 ssl:default "
        "[Connect call failed ('127.0.0.1', 1)]"),
        "the connection to 127.0.0.1:1 was refused: nothing listens there (is the server up? make status "
        "RUN=qwen-t2)"),
    "dns": (None, evalscope_traceback(
        "socket.gaierror: [Errno -2] Name or service not known",
        "aiohttp.client_exceptions.ClientConnectorDNSError: Cannot connect to host nonexistent.invalid:8000 "
        "ssl:default [Name or service not known]"),
        "the endpoint's host nonexistent.invalid does not resolve (Name or service not known): is its address "
        "right?"),
    "timeout": (None, evalscope_traceback("asyncio.exceptions.CancelledError", "TimeoutError"),
                "the endpoint sent no answer within CALIBRATE_TIMEOUT (1800 s): the server is up but slow or "
                "stuck (make logs RUN=qwen-t2), or raise CALIBRATE_TIMEOUT"),
    "other": (None, evalscope_traceback("aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected"),
              "the request failed: aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected"),
}


@pytest.mark.parametrize("case", CAUSES)
def test_a_failed_request_is_said_by_its_cause(case):
    # The errors are what evalscope 1.14.1 kept of each failed request against the fake endpoint
    # (a 401 repeating the header, a 404, a refused port, a name that does not resolve, a server
    # that streams slower than the timeout), their frames shortened. evalscope itself says
    # "TimeoutError: Test connection failed" for every one.
    status, error, cause = CAUSES[case]
    failure = calibrate_evalscope.LastFailure(status, error)
    assert calibrate_evalscope.failure_cause(failure, URL.replace("127.0.0.1:1", {
        "dns": "nonexistent.invalid:8000"}.get(case, "127.0.0.1:1")), TIMEOUT, RUN) == cause


def test_a_failure_line_names_its_cause_or_else_evalscope_s_exception_and_the_log_always():
    log = "state/qwen-t2/calibration/evalscope.log"
    failed = calibrate_evalscope.LastFailure(404, "Not Found")
    cause = (f"the endpoint answered 404 Not Found: nothing serves {URL} (an API_BASE must be the server's /v1); "
             f"nothing recorded (evalscope's output: {log})")
    # evalscope's connection check failing (whatever failed it), or a run that measured nothing.
    assert calibrate_evalscope.failure_line(failed, TimeoutError("Test connection failed"), URL, TIMEOUT, RUN,
                                            log) == cause
    assert calibrate_evalscope.failure_line(failed, None, URL, TIMEOUT, RUN, log) == cause
    # Any other exception is evalscope's own (an interrupted run, a tokenizer it could not load),
    # clipped to one line, whatever request failed before it.
    assert calibrate_evalscope.failure_line(failed, OSError("no tokenizer\nat /x"), URL, TIMEOUT, RUN, log) == \
        f"evalscope perf failed against {URL}: OSError: no tokenizer at /x; nothing recorded " \
        f"(evalscope's output: {log})"
    assert calibrate_evalscope.failure_line(calibrate_evalscope.LastFailure(), None, URL, TIMEOUT, RUN, log) == \
        f"evalscope perf measured no time per output token at {URL} (every request failed?); nothing recorded " \
        f"(evalscope's output: {log})"
