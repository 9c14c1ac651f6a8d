"""Every engine command this repository builds, parsed by the engine's own parser (tests/engines/).

The server command is the costliest this repository runs: an argument the engine refuses, or
takes to mean something else, is found only once the GPUs bill. Here each one-engine command
(SERVER_DP=1), as scripts/argv.sh builds it for every profile and every run, goes through the real
entry point of the engine the profile names, at the version tests/engines.lock.json pins: sglang
0.5.23, vLLM 0.34.0, and SMG 1.13.0's router. Offline once the wheels are fetched.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from tests.engines import (
    Rejected, fetch, parse_sglang_serve, parse_smg_router, parse_smg_serve, parse_vllm_serve, parse_with_stubs,
    stubbed,
)
from tests.engines.child import STUBBED

REPO = Path(__file__).resolve().parent.parent
ARGV_OF = REPO / "tests" / "bin" / "argv-of"

# One worker imports each engine once (sglang about 1 s of CPU, vLLM 3 s) for every test here.
pytestmark = pytest.mark.xdist_group("engines")

PARSE = {"sglang": parse_sglang_serve, "vllm": parse_vllm_serve}


def plain(path: Path, name: str) -> str | None:
    """A profile's or run file's own NAME=value line (make plan reads profiles by these too)."""
    found = re.findall(rf"^{name}=(\S*)$", path.read_text(), re.M)
    return found[-1] if found else None


def one_engine_profiles() -> list[str]:
    return sorted(p.stem for p in (REPO / "env" / "servers").glob("*.env")
                  if (plain(p, "SERVER_DP") or "1") == "1")


def one_engine_runs() -> list[str]:
    runs = []
    for path in sorted((REPO / "runs").glob("*.env")):
        profile = REPO / "env" / "servers" / f"{plain(path, 'SERVER')}.env"
        if (plain(path, "SERVER_DP") or plain(profile, "SERVER_DP") or "1") == "1":
            runs.append(path.stem)
    return runs


def argv_of(mode: str, **settings) -> bytes:
    done = subprocess.run([str(ARGV_OF), mode], env={**os.environ, **settings}, capture_output=True, cwd=REPO)
    assert done.returncode == 0, f"argv-of {mode} {settings}: {done.stderr.decode()}"
    return done.stdout


def resolved(**settings) -> dict[str, str]:
    """The run's resolved settings (argv-of settings: NAME=value, a value may span lines)."""
    values, name = {}, None
    for line in argv_of("settings", **settings).decode().splitlines():
        if match := re.match(r"([A-Z][A-Z0-9_]*)=(.*)", line):
            name, values[match[1]] = match[1], match[2]
        else:
            values[name] += "\n" + line
    return values


def engine_command(**settings) -> list[str]:
    """The command the server job runs: the words after `--` of make serve's hf jobs run."""
    words = argv_of("serve-dry-run", **settings).decode().split("\0")[:-1]
    return words[words.index("--") + 1:]


def given_options(command: list[str], options: dict) -> dict[str, str | bool]:
    """Each dest the command's options set, to the last word given for it (True for a flag): the
    value the engine must hold. Every option must be one of the engine's own option strings, whole:
    argparse would also take a unique prefix (vLLM's --enable-prefix), which only works until the
    engine adds a flag it is a prefix of."""
    given, i = {}, 2
    while i < len(command):
        word = command[i]
        if not word.startswith("-"):
            i += 1  # vLLM's positional model
            continue
        assert word in options, f"{word} is not an option of the engine (an abbreviation, or unknown)"
        dest, nargs = options[word]["dest"], options[word]["nargs"]
        assert nargs in (0, None), f"{word} takes nargs={nargs!r}, which this walk does not read"
        given[dest] = True if nargs == 0 else command[i + 1]
        i += 1 if nargs == 0 else 2
    return given


def means(value, word) -> bool:
    """Whether the engine's value is what the command's word says, read as the engine's type."""
    if word is True or isinstance(value, bool):
        return value is word
    if isinstance(value, (int, float)):
        return float(word) == value
    if isinstance(value, (dict, list)):
        return json.loads(word) == value
    return value == word


def profile_case(profile: str) -> dict[str, str]:
    """A profile's command as the run of its engine that adds no server flags of its own builds it."""
    return {"RUN": "gptoss-t2" if profile.startswith("gpt-oss") else "qwen-t2", "SERVER": profile}


def what_is_wrong(settings: dict[str, str]) -> dict:
    """How the engine's parse of the command differs from what the settings mean; {} when it does not."""
    s = resolved(**settings)
    engine, command = s["SERVER_ENGINE"], engine_command(**settings)
    try:
        parsed = PARSE[engine](command)
    except Rejected as refused:
        return {"refused": str(refused)}
    v = parsed.values
    if engine == "sglang":
        meant = {"program": ["sglang", "serve"], "model_path": s["MODEL"], "tp_size": int(s["SERVER_TP"]), "dp_size": 1}
        got = {"program": command[:2], "model_path": v["model_path"], "tp_size": v["tp_size"], "dp_size": v["dp_size"]}
    else:
        meant = {"program": ["vllm", "serve"], "model_tag": s["MODEL"], "tensor_parallel_size": int(s["SERVER_TP"]),
                 "data_parallel_size": 1}
        got = {"program": command[:2], "model_tag": v["model_tag"], "tensor_parallel_size": v["tensor_parallel_size"],
               "data_parallel_size": v["data_parallel_size"]}
    meant |= {"SERVER_DP": "1", "host": "0.0.0.0", "port": int(s["PORT"])}
    got |= {"SERVER_DP": s["SERVER_DP"], "host": v["host"], "port": v["port"]}
    wrong = {key: (meant[key], got[key]) for key in meant if meant[key] != got[key]}
    try:
        given = given_options(command, parsed.options)
    except AssertionError as error:
        return wrong | {"options": str(error)}
    return wrong | {dest: (word, v[dest]) for dest, word in given.items() if not means(v[dest], word)}


def test_every_one_engine_profile_is_what_its_engine_parses():
    # One test for every profile, so that one test worker imports each engine (about 1 s of CPU for
    # sglang, 3 s for vLLM), not each worker a case would land on. With them qwen-mswea, the run that
    # adds server flags of its own (SERVER_EXTRA_ARGS); every run file: the next test (make test).
    # No vLLM profile splits its engine: SERVER_TP=4 on four L40S, as make's command line sets it,
    # takes server_command's vLLM --tensor-parallel-size.
    cases = {f"profile {p}": profile_case(p) for p in one_engine_profiles()} | {
        "run qwen-mswea": {"RUN": "qwen-mswea"},
        "run gptoss-t2 SERVER_FLAVOR=l40sx4 SERVER_TP=4": {"RUN": "gptoss-t2", "SERVER_FLAVOR": "l40sx4", "SERVER_TP": "4"}}
    assert list(cases) == [
        "profile gpt-oss-20b-vllm-l40s", "profile qwen3.8-27b-fp8-sglang-h200",
        "profile qwen3.8-27b-fp8-sglang-h200x2-tp2", "profile qwen3.8-27b-fp8-sglang-h200x2-tp2-dflash",
        "profile qwen3.8-27b-fp8-sglang-h200x4-tp4", "run qwen-mswea", "run gptoss-t2 SERVER_FLAVOR=l40sx4 SERVER_TP=4"]
    assert {label: what_is_wrong(settings) for label, settings in cases.items()} == {label: {} for label in cases}
    # Every stub the two engines' processes list was imported on the way to their parsers.
    left_over = {engine: [stub for stub in STUBBED[engine]
                          if not any(m == stub or m.startswith(stub + ".") for m in stubbed(engine))]
                 for engine in ("sglang", "vllm")}
    assert left_over == {"sglang": [], "vllm": []}


@pytest.mark.full  # every run file; make check takes qwen-mswea with the profiles, above
def test_every_one_engine_run_files_command_is_what_its_engine_parses():
    runs = one_engine_runs()
    assert runs == ["example-leaderboard-complete", "example-leaderboard", "example-mswea", "example-terminus2",
                    "gptoss-t2", "qwen-claude-code", "qwen-mswea", "qwen-t2-leaderboard", "qwen-t2",
                    "qwen-tb3-smoke"]
    assert {run: what_is_wrong({"RUN": run}) for run in runs} == {run: {} for run in runs}


def test_the_reference_profile_means_the_reference_flags_and_dflash_adds_its_own():
    # The one-H200 profile every sglang profile sources (Runs 1 and 3), read by sglang 0.5.23.
    flags = ("trust_remote_code", "kv_cache_dtype", "mem_fraction_static", "attention_backend",
             "chunked_prefill_size", "max_prefill_tokens", "reasoning_parser", "tool_call_parser",
             "mamba_full_memory_ratio", "mamba_radix_cache_strategy", "mamba_ssm_dtype", "enable_metrics",
             "speculative_algorithm", "speculative_draft_model_path", "tp_size", "default_chat_template_kwargs")
    reference = parse_sglang_serve(engine_command(RUN="qwen-t2")).values
    assert {f: reference[f] for f in flags} == {
        "trust_remote_code": True, "kv_cache_dtype": "fp8_e4m3", "mem_fraction_static": 0.85,
        "attention_backend": "flashinfer", "chunked_prefill_size": 32768, "max_prefill_tokens": 32768,
        "reasoning_parser": "qwen3", "tool_call_parser": "qwen3_coder", "mamba_full_memory_ratio": 3.67,
        "mamba_radix_cache_strategy": "extra_buffer_lazy", "mamba_ssm_dtype": "float32", "enable_metrics": True,
        "speculative_algorithm": None, "speculative_draft_model_path": None, "tp_size": 1,
        "default_chat_template_kwargs": None}
    # Over two H200s: DFLASH and its draft, and the repeated --mamba-full-memory-ratio's last value
    # (the profile's comment: "a repeated sglang flag: the last one counts").
    dflash = parse_sglang_serve(engine_command(RUN="qwen-t2", SERVER="qwen3.8-27b-fp8-sglang-h200x2-tp2-dflash")).values
    assert {f: dflash[f] for f in flags} == {f: reference[f] for f in flags} | {
        "speculative_algorithm": "DFLASH", "speculative_draft_model_path": "z-lab/Qwen3.8-27B-DFlash2",
        "mamba_full_memory_ratio": 11.01, "tp_size": 2}
    # mini-swe-agent's run turns thinking off through the chat template, as a JSON object.
    mswea = parse_sglang_serve(engine_command(RUN="qwen-mswea")).values
    assert mswea["default_chat_template_kwargs"] == {"enable_thinking": False}


def test_each_engine_refuses_a_flag_it_does_not_have_with_its_own_message():
    sglang = ["sglang", "serve", "--model-path", "M", "--host", "0.0.0.0", "--port", "30000"]
    vllm = ["vllm", "serve", "M", "--host", "0.0.0.0", "--port", "8000"]
    router = ["python3", "-m", "smg.launch_router", "--worker-urls", "http://127.0.0.1:31000"]
    refusals = {}
    for label, parse, argv in [
        ("sglang, unknown", parse_sglang_serve, sglang + ["--no-such-flag"]),
        ("sglang, a value not among its choices", parse_sglang_serve,
         sglang + ["--mamba-radix-cache-strategy", "extra_buffer_eager"]),
        ("sglang, a prefix of two flags", parse_sglang_serve, sglang + ["--enable-metric"]),
        ("vllm, sglang's data-parallel flag", parse_vllm_serve, vllm + ["--dp-size", "2"]),
        ("vllm, sglang's tensor-parallel flag", parse_vllm_serve, vllm + ["--tp-size", "2"]),
        ("router, smg serve's prefixed form", parse_smg_router, router + ["--router-policy", "cache_aware"]),
        ("router, not a policy", parse_smg_router, router + ["--policy", "cache-aware"]),
    ]:
        with pytest.raises(Rejected) as refused:
            parse(argv)
        refusals[label] = str(refused.value)
    assert refusals == {
        "sglang, unknown": "sglang serve: error: unrecognized arguments: --no-such-flag",
        "sglang, a value not among its choices": "sglang serve: error: argument --mamba-radix-cache-strategy: "
            "invalid choice: 'extra_buffer_eager' (choose from 'auto', 'no_buffer', 'extra_buffer', 'extra_buffer_lazy')",
        "sglang, a prefix of two flags": "sglang serve: error: ambiguous option: --enable-metric could match "
            "--enable-metrics, --enable-metrics-for-all-schedulers",
        "vllm, sglang's data-parallel flag": "vllm: error: unrecognized arguments: --dp-size 2",
        "vllm, sglang's tensor-parallel flag": "vllm: error: unrecognized arguments: --tp-size 2",
        "router, smg serve's prefixed form": "launch_router.py: error: unrecognized arguments: --router-policy cache_aware",
        "router, not a policy": "launch_router.py: error: argument --policy: invalid choice: 'cache-aware' (choose from "
            "'random', 'round_robin', 'passthrough', 'cache_aware', 'power_of_two', 'least_load', 'manual', "
            "'consistent_hashing', 'prefix_hash')",
    }
    # vLLM takes --enable-prefix for --enable-prefix-caching today, and would refuse it (or take it
    # for another flag) the day a second flag starts with it: the commands must use whole names.
    command = vllm + ["--enable-prefix"]
    parsed = parse_vllm_serve(command)
    assert parsed.values["enable_prefix_caching"] is True
    with pytest.raises(AssertionError, match="--enable-prefix is not an option of the engine"):
        given_options(command, parsed.options)


def test_the_router_argv_means_what_it_says_to_smg_1_13():
    parsed = parse_smg_router([
        "python3", "-m", "smg.launch_router", "--host", "0.0.0.0", "--port", "30000",
        "--worker-urls", "http://127.0.0.1:31000", "http://127.0.0.1:31001", "--policy", "cache_aware",
        "--disable-retries", "--request-timeout-secs", "14400", "--worker-startup-timeout-secs", "2700"])
    fields = ("host", "port", "worker_urls", "policy", "disable_retries", "retry_max_retries",
              "request_timeout_secs", "worker_startup_timeout_secs", "pd_disaggregation", "enable_igw")
    assert {f: parsed.values[f] for f in fields} == {
        "host": "0.0.0.0", "port": 30000, "worker_urls": ["http://127.0.0.1:31000", "http://127.0.0.1:31001"],
        "policy": "cache_aware",
        # --disable-retries is its own field; retry_max_retries keeps its default, and SMG reads the
        # flag as "equivalent to retry_max_retries=1" (smg/router_args.py, --disable-retries' help).
        "disable_retries": True, "retry_max_retries": 5,
        "request_timeout_secs": 14400, "worker_startup_timeout_secs": 2700,
        "pd_disaggregation": False, "enable_igw": False}


def test_smg_serve_1_13_loses_its_own_dp_size_to_sglang_0_5_23s_parser():
    # The data-parallel command as docs/data-parallel.md §2 has it: smg serve builds its parser from
    # its own flags and then sglang's, with conflict_handler="resolve" (smg/serve.py,
    # parse_serve_args), and sglang >= 0.5.14 has --dp-size and --data-parallel-size of its own. So
    # the words parse, but SMG's data_parallel_size is gone from the namespace that
    # ServeOrchestrator._launch_workers reads first (smg/serve.py): the job would stop with an
    # AttributeError once its GPUs bill. Replicas started apart behind `smg.launch_router` avoid it.
    parsed = parse_smg_serve([
        "python3", "-m", "smg", "serve", "--backend", "sglang", "--connection-mode", "http", "--host", "0.0.0.0",
        "--port", "30000", "--dp-size", "4", "--worker-startup-timeout", "2700", "--model-path", "Qwen/Qwen3.8-27B-FP8",
        "--enable-metrics", "--router-policy", "cache_aware", "--router-disable-retries"])
    v = parsed.values
    assert ("data_parallel_size" in v, v["dp_size"], v["backend_args"], v["router_policy"], v["router_disable_retries"]) \
        == (False, 4, ["--model-path", "Qwen/Qwen3.8-27B-FP8", "--enable-metrics"], "cache_aware", True)
    assert [s for s in STUBBED["smg-serve"] if not any(m == s or m.startswith(s + ".") for m in stubbed("smg-serve"))] == []


def test_a_stub_that_reaches_a_parser_fails_the_parse():
    # SMG's one stub, setproctitle, is imported on the way (sglang's and vLLM's are checked with
    # their commands above).
    router = ["python3", "-m", "smg.launch_router", "--worker-urls", "http://127.0.0.1:31000"]
    parse_smg_router(router)
    assert stubbed("smg-router") == ["setproctitle"]
    # SMG's parser takes its parsers' names from its compiled module: stubbed, the choices would be
    # a stand-in's, and the parse fails naming them instead of accepting any word.
    with pytest.raises(Rejected) as refused:
        parse_with_stubs("smg-router", ("smg.smg_rs",), router)
    assert str(refused.value) == "stub reached the parser: --reasoning-parser's choices, --tool-call-parser's choices"


def test_the_lock_pins_the_gateways_own_wheel_for_this_python_from_pypi():
    lock = fetch.lock()
    gateway = json.loads((REPO / "env" / "gateway-smg.json").read_text())
    smg = fetch.entry("smg")
    assert [smg[k] for k in ("version", "wheel", "sha256", "size")] == \
        [gateway[k] for k in ("version", "wheel", "sha256", "size")]
    # msgspec's native module is CPython 3.12's, the Python make setup builds .venv with.
    assert lock["python"] == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert [w["name"] for w in lock["wheels"]] == ["sglang", "vllm", "smg", "msgspec"]
    for wheel in lock["wheels"]:
        assert wheel["wheel"].startswith(f"{wheel['name']}-{wheel['version']}-")
        assert wheel["url"].startswith("https://files.pythonhosted.org/packages/")
        assert wheel["url"].endswith("/" + wheel["wheel"])
        assert re.fullmatch(r"[0-9a-f]{64}", wheel["sha256"])


def test_every_profile_names_and_pins_the_release_its_command_is_proven_against():
    """Each server profile's SERVER_ENGINE_VERSION is the release whose parser these tests run its command
    through (tests/engines.lock.json), and its image is that release's own tag (docs/hf-jobs.md §5, §6):
    what the server runs is what was proven, and make status warns when the server says otherwise."""
    image = {"sglang": "lmsysorg/sglang:v{}", "vllm": "vllm/vllm-openai:v{}"}
    wrong = {}
    for profile in sorted((REPO / "env" / "servers").glob("*.env")):
        settings = json.loads(subprocess.run(
            ["bash", "-c", 'source scripts/lib.sh; load_settings; jq -n --arg e "$SERVER_ENGINE" '
                           '--arg v "$SERVER_ENGINE_VERSION" --arg i "$SERVER_IMAGE" \'{e: $e, v: $v, i: $i}\''],
            cwd=REPO, env={**os.environ, "RUN": "qwen-t2" if "qwen" in profile.stem else "gptoss-t2",
                           "SERVER": profile.stem}, capture_output=True, text=True, check=True, timeout=60).stdout)
        version = fetch.entry(settings["e"])["version"]
        if (settings["v"], settings["i"]) != (version, image[settings["e"]].format(version)):
            wrong[profile.stem] = settings
    assert wrong == {}


def test_only_what_a_parser_imports_is_extracted_from_the_engines_wheels():
    natives = {}
    for wheel in fetch.lock()["wheels"]:
        tree = fetch.ensure(wheel)
        natives[wheel["name"]] = sorted(str(p.relative_to(tree)) for p in tree.rglob("*.so"))
        assert not [p for p in tree.rglob("*") if p.is_file() and p.suffix not in (".py", ".so")
                    and ".dist-info" not in p.parts[len(tree.parts)] and p.name != fetch.STAMP]
    # vLLM's 300 MB of CUDA kernels and sglang's Rust extensions stay in their zips.
    assert natives == {"sglang": [], "vllm": [], "smg": ["smg/smg_rs.abi3.so"],
                       "msgspec": ["msgspec/_core.cpython-312-x86_64-linux-gnu.so"]}


def demo_wheel(directory: Path, members: dict[str, str], **changes) -> dict:
    """A small wheel written here, and the lock entry that would fetch it (a file:// url)."""
    path = directory / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return {"name": "demo", "version": "1.0", "wheel": path.name, "url": path.as_uri(),
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "size": path.stat().st_size,
            "native": ["demo/_native.so"], **changes}


DEMO = {"demo/__init__.py": "", "demo/data.json": "{}", "demo/_native.so": "ELF", "demo/_kernels.so": "ELF",
        "demo-1.0.dist-info/METADATA": "Name: demo", "demo-1.0.dist-info/entry_points.txt": ""}


def files_under(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file())


def test_a_wheel_is_fetched_once_extracted_as_the_parsers_need_and_again_when_its_tree_is_unfinished(tmp_path, capsys):
    entry = demo_wheel(tmp_path, DEMO)
    cache = tmp_path / "cache"
    tree = fetch.ensure(entry, cache)
    assert files_under(tree) == [".sha256", "demo-1.0.dist-info/METADATA", "demo-1.0.dist-info/entry_points.txt",
                                 "demo/__init__.py", "demo/_native.so"]
    assert (tree / ".sha256").read_text() == f"{entry['sha256']} demo/_native.so\n"
    assert capsys.readouterr().err == f"engines: fetching {entry['wheel']} (0.0 MB) from PyPI, once\n"
    # A tree whose stamp is missing (a fetch killed half way) is extracted again from the kept
    # wheel, without fetching it again; a complete one is left as it is.
    (tree / ".sha256").unlink()
    (tree / "demo" / "stray.py").write_text("")
    assert fetch.ensure(entry, cache) == tree
    assert "demo/stray.py" not in files_under(tree) and (tree / ".sha256").is_file()
    assert fetch.ensure(entry, cache) == tree
    assert capsys.readouterr().err == ""


def test_a_wheel_whose_sha256_is_not_the_locks_is_refused_in_one_line_and_nothing_kept(tmp_path):
    entry = demo_wheel(tmp_path, DEMO, sha256="0" * 64)
    real = hashlib.sha256((tmp_path / entry["wheel"]).read_bytes()).hexdigest()
    cache = tmp_path / "cache"
    with pytest.raises(fetch.Refused) as refused:
        fetch.ensure(entry, cache)
    assert str(refused.value) == (f"engines: refused {entry['wheel']} from {entry['url']}: its sha256 is {real}, "
                                  f"tests/engines.lock.json records {'0' * 64}; nothing kept")
    assert files_under(cache) == [".lock"]
    # A name that climbs out of the tree is refused too, and nothing is written outside it.
    entry = demo_wheel(tmp_path, {**DEMO, "demo/../../escape.py": ""})
    with pytest.raises(fetch.Refused, match=r"holds 'demo/\.\./\.\./escape\.py', outside its tree"):
        fetch.ensure(entry, cache)
    assert not (tmp_path / "escape.py").exists() and not (cache / "escape.py").exists()
    assert not fetch.tree(entry, cache).exists()


def blocked_on(lock_file: Path, pids: set[int]) -> set[int]:
    """The pids among `pids` waiting for the flock on lock_file (/proc/locks: "N: -> FLOCK …")."""
    inode = lock_file.stat().st_ino
    waiting = set()
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) > 6 and fields[1] == "->" and fields[2] == "FLOCK" and fields[6].endswith(f":{inode}"):
            waiting.add(int(fields[5]))
    return waiting & pids


def test_workers_asking_at_once_fetch_the_wheel_once_and_all_find_it_whole(tmp_path):
    entry = demo_wheel(tmp_path, DEMO)
    cache = tmp_path / "cache"
    cache.mkdir()
    script = "import json, sys; from pathlib import Path; from tests.engines import fetch; " \
             "print(fetch.ensure(json.loads(sys.argv[1]), Path(sys.argv[2])))"
    with open(cache / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        workers = [subprocess.Popen([sys.executable, "-c", script, json.dumps(entry), str(cache)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
        pids = {w.pid for w in workers}
        deadline = time.monotonic() + 600
        while blocked_on(cache / ".lock", pids) != pids:
            assert all(w.poll() is None for w in workers), "a worker ended before it waited for the lock"
            assert time.monotonic() < deadline, "the workers never waited for the lock"
            time.sleep(0.01)
    results = [w.communicate(timeout=600) for w in workers]
    assert [w.returncode for w in workers] == [0, 0, 0]
    assert {out.strip() for out, _ in results} == {str(fetch.tree(entry, cache))}
    assert sum(err.count("engines: fetching") for _, err in results) == 1
    assert (fetch.tree(entry, cache) / ".sha256").is_file()
