"""One engine's own command line, run in a process of its own up to the moment it would serve.

    python -m tests.engines.child sglang|vllm|smg-router|smg-serve [--stub MODULE]...

The engine's wheel (tests/engines/fetch.py) is put first on sys.path, the modules it imports
but never parses with are stubbed (tests/engines/stubs.py), and its real entry point runs on
each argv it is sent: the console script's function (`sglang`, `vllm`) or the module's main
(`python3 -m smg.launch_router`, `python3 -m smg serve`). The function that would start the server
is replaced by one that hands back what it was given, so everything before it runs as the job
would run it: the subcommand, the engine's own rewriting of its argv, its parser, its checks.

The protocol, one JSON object a line: the parent writes {"argv": [...]}, the child answers
{"ok": true, "values": {...}, "options": {...}} or {"ok": false, "error": "<the engine's own
message>"}, each with "stubbed", the modules stand-ins have answered so far. Its first line says
it is ready (or why it is not). Anything the engine prints goes to the child's stderr: its stdout
is taken for the protocol before the engine is imported.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import enum
import io
import json
import os
import sys
import traceback
import types

from tests.engines import fetch, stubs

# What each engine's path to its parser imports and does not parse with: each entry is imported on
# the way (tests/test_engines.py holds that none is left over), and every parse proves that no
# option or value comes from one of them (stub_leaks). Without any one of sglang's or SMG's the
# import fails, none being installed here; vLLM's are the same but for transformers and scipy.
STUBBED = {
    # torch, triton: tensors and kernels; psutil: process trees (sglang serve's `finally` kills
    # its own children through it, which must stay a no-op here); zmq: the scheduler's sockets;
    # orjson, pybase64: the HTTP server's encoders; IPython: sglang.utils' notebook display.
    "sglang": ("torch", "triton", "psutil", "zmq", "orjson", "pybase64", "IPython"),
    # torch, zmq, psutil, pybase64 as for sglang; prometheus_client: the server's metrics;
    # openai_harmony: gpt-oss's message format in the request models; cbor2, cpuinfo,
    # partial_json_parser: request encoding, CPU detection, tool-call streaming. transformers and
    # scipy are installed in .venv, at other versions than the image's, and cost seconds to import:
    # the parser reads neither. vllm._C_stable_libtorch is a compiled op library needing libtorch.
    # The vllm modules are the server's own processes that serve.py imports for `cmd` (launchers,
    # the executor) and three of the other subcommands main() registers, whose modules import the
    # engine core at their top (launch, preload, run_batch): they never see a `vllm serve` argv,
    # which argparse hands to the serve subparser alone.
    "vllm": ("torch", "zmq", "psutil", "pybase64", "prometheus_client", "openai_harmony", "cbor2",
             "cpuinfo", "partial_json_parser", "transformers", "scipy", "vllm._C_stable_libtorch",
             "vllm.entrypoints.launchers.api_server.entry", "vllm.entrypoints.launchers.dp_supervisor",
             "vllm.entrypoints.launchers.launcher", "vllm.v1.executor",
             "vllm.entrypoints.cli.launch", "vllm.entrypoints.cli.preload", "vllm.entrypoints.cli.run_batch"),
    # setproctitle: the process's name in ps; launch_router imports it at its top.
    "smg-router": ("setproctitle",),
    # smg serve builds its parser from sglang's own (smg/serve.py, _add_sglang_args).
    "smg-serve": ("setproctitle", "torch", "triton", "psutil", "zmq", "orjson", "pybase64"),
}
WHEELS = {"sglang": ("sglang", "msgspec"), "vllm": ("vllm", "msgspec"), "smg-router": ("smg",),
          "smg-serve": ("smg", "sglang", "msgspec")}
# The function each command's program words name, and that runs here.
ENTRY = {"sglang": "sglang.cli.main:main", "vllm": "vllm.entrypoints.cli.main:main",
         "smg-router": "smg.launch_router:main", "smg-serve": "smg.cli:main"}
# The commands run as python3 -m MODULE WORDS: the words that name them.
MODULE_WORDS = {"smg-router": ["smg.launch_router"], "smg-serve": ["smg", "serve"]}


class Served(Exception):
    """Raised in place of starting the server: carries what the server would have been given."""


def served(*args, **kwargs):
    raise Served(args[0] if args else kwargs)


def plain_sglang_package():
    # sglang/__init__.py is its public Python API (sglang.lang, Runtime, transformers patches),
    # which `sglang serve` imports but never parses with: the package is made a plain directory.
    package = types.ModuleType("sglang")
    package.__path__ = [str(fetch.tree(fetch.entry("sglang")) / "sglang")]
    sys.modules["sglang"] = package


def setup_sglang():
    plain_sglang_package()
    import sglang.launch_server
    from sglang.cli.main import main
    from sglang.srt.arg_groups.arg_utils import record_fields
    from sglang.srt.server_args import ServerArgs

    # sglang/cli/serve.py, _run_llm: prepare_server_args(argv), then run_server(server_args).
    sglang.launch_server.run_server = served

    def values(server_args):
        return {f.name: getattr(server_args, f.name) for f in record_fields(ServerArgs)}

    return main, values


def setup_vllm():
    import vllm.entrypoints.cli.serve
    import vllm.platforms
    import vllm.platforms.cuda
    from vllm.entrypoints.cli.main import main

    # The images run vLLM on CUDA GPUs; here none is found, and vLLM would refuse to build its
    # config's defaults on an unknown platform (vllm/config/device.py). Its CUDA platform is set
    # as the image's would be detected (vllm/platforms/__init__.py, current_platform).
    vllm.platforms.current_platform = vllm.platforms.cuda.CudaPlatform()
    # vllm/entrypoints/cli/main.py: cmd.validate(args), then args.dispatch_function(args), which
    # is ServeSubcommand.cmd (serve.py) bound when the subparser is made.
    vllm.entrypoints.cli.serve.ServeSubcommand.cmd = staticmethod(served)

    def values(namespace):
        return {k: v for k, v in vars(namespace).items() if k != "dispatch_function"}

    return main, values


def setup_smg_router():
    import smg.launch_router

    # smg/launch_router.py, main: launch_router(parse_router_args(sys.argv[1:])).
    smg.launch_router.launch_router = served

    def values(router_args):
        return {f.name: getattr(router_args, f.name) for f in dataclasses.fields(router_args)}

    return smg.launch_router.main, values


def setup_smg_serve():
    plain_sglang_package()
    import smg.cli
    import smg.serve

    # smg/serve.py, serve_main: parse_serve_args, then ServeOrchestrator(...).run() starts the
    # workers and the gateway.
    smg.serve.ServeOrchestrator.run = served

    def values(orchestrator):
        return {"backend": orchestrator.backend, "backend_args": orchestrator.backend_args, **vars(orchestrator.args)}

    return smg.cli.main, values


SETUP = {"sglang": setup_sglang, "vllm": setup_vllm, "smg-router": setup_smg_router, "smg-serve": setup_smg_serve}


def console_script(engine: str) -> dict[str, str]:
    """The wheel's console scripts, name to target, from its own entry_points.txt."""
    wheel = fetch.entry(WHEELS[engine][0])
    text = (fetch.tree(wheel) / f"{wheel['name']}-{wheel['version']}.dist-info" / "entry_points.txt").read_text()
    scripts, section = {}, None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[console_scripts]" and "=" in line:
            name, target = (part.strip() for part in line.split("=", 1))
            scripts[name] = target
    return scripts


def program_argv(engine: str, argv: list[str], entry: str) -> list[str]:
    """sys.argv as the entry point sees it, after checking the argv's program words name it."""
    if engine in MODULE_WORDS:
        words = MODULE_WORDS[engine]
        if argv[:1] not in (["python3"], ["python"]) or argv[1:2 + len(words)] != ["-m", *words]:
            raise ValueError(f"not a python3 -m {' '.join(words)} command: {argv[:2 + len(words)]}")
        # python -m sets sys.argv[0] to the module's file, which argparse names itself after.
        module = words[0].replace(".", "/") + ("/__main__.py" if words[0] == "smg" else ".py")
        return [str(fetch.tree(fetch.entry("smg")) / module), *argv[3:]]
    if console_script(engine).get(argv[0] if argv else "") != entry:
        raise ValueError(f"{argv[:1]} is not the wheel's console script for {entry}")
    return list(argv)


@contextlib.contextmanager
def parsers_parsing():
    """Every argument parser that parses meanwhile, in order (the engine's and its subparsers)."""
    seen = []
    original = argparse.ArgumentParser.parse_known_args

    def recording(self, *args, **kwargs):
        seen.append(self)
        return original(self, *args, **kwargs)

    argparse.ArgumentParser.parse_known_args = recording
    try:
        yield seen
    finally:
        argparse.ArgumentParser.parse_known_args = original


def stub_in(value, depth=0) -> bool:
    """Whether `value` is a stand-in or holds one (in a dict, list, tuple or set)."""
    if stubs.is_stub(value):
        return True
    if depth > 4:
        return False
    if isinstance(value, dict):
        return any(stub_in(k, depth + 1) or stub_in(v, depth + 1) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(stub_in(v, depth + 1) for v in value)
    return False


def stub_leaks(parsers, values) -> list[str]:
    """Each option whose type, default, choices or const, and each value, that is a stand-in."""
    leaks = []
    for parser in parsers:
        for action in parser._actions:
            for field in ("type", "default", "choices", "const"):
                if stub_in(getattr(action, field, None)):
                    leaks.append(f"{'/'.join(action.option_strings) or action.dest}'s {field}")
    leaks += [f"the value of {name}" for name, value in values.items() if stub_in(value)]
    return leaks


def as_json(value, depth=0):
    """The value as JSON: an enum as its value, containers as lists and objects, anything else its repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return as_json(value.value, depth + 1)
    if depth < 8 and isinstance(value, dict):
        return {str(k): as_json(v, depth + 1) for k, v in value.items()}
    if depth < 8 and isinstance(value, (list, tuple, set, frozenset)):
        return [as_json(v, depth + 1) for v in value]
    return repr(value)


def parse(engine, main, values, argv):
    """One command through the engine's entry point: what the server would get, or the refusal."""
    captured = io.StringIO()
    saved = sys.argv
    try:
        sys.argv = program_argv(engine, argv, ENTRY[engine])
        with parsers_parsing() as parsers, contextlib.redirect_stderr(captured):
            main()
        return {"ok": False, "error": "the entry point returned without starting the server"}
    except Served as handed:
        parsed = values(handed.args[0])
        leaks = stub_leaks(parsers, parsed)
        if leaks:
            return {"ok": False, "error": f"stub reached the parser: {', '.join(leaks)}"}
        options = {option: {"dest": action.dest, "nargs": action.nargs}
                   for p in parsers for action in p._actions for option in action.option_strings}
        return {"ok": True, "values": as_json(parsed), "options": options}
    except SystemExit as exited:
        lines = [line for line in captured.getvalue().splitlines() if line.strip()]
        return {"ok": False, "error": lines[-1] if lines else f"exit status {exited.code}"}
    except Exception as error:
        first = (str(error).strip().splitlines() or [""])[0]
        return {"ok": False, "error": f"{type(error).__name__}: {first}"}
    finally:
        sys.argv = saved


# Nothing the engines do on the way to their parser reaches a network: sglang serve asks the Hub
# whether the model is a diffusion model (sglang/cli/utils.py, get_is_diffusion_model), which
# offline is "no", as it is for every model here; vLLM's usage report and the Hub's telemetry off.
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}


def main() -> None:
    engine, extra = sys.argv[1], sys.argv[2:]
    os.environ.update(OFFLINE)
    extra_stubs = [extra[i + 1] for i, word in enumerate(extra) if word == "--stub"]
    # The protocol keeps the real stdout; whatever the engine prints lands on stderr.
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.path[:0] = [str(fetch.tree(fetch.entry(name))) for name in WHEELS[engine]]
    finder = stubs.install([*STUBBED[engine], *extra_stubs])
    try:
        entry, values = SETUP[engine]()
    except Exception:
        print(json.dumps({"ready": False, "error": traceback.format_exc()}), file=protocol, flush=True)
        return
    print(json.dumps({"ready": True, "stubbed": sorted(finder.imported)}), file=protocol, flush=True)
    for line in sys.stdin:
        answer = parse(engine, entry, values, json.loads(line)["argv"])
        answer["stubbed"] = sorted(finder.imported)
        print(json.dumps(answer), file=protocol, flush=True)


if __name__ == "__main__":
    main()
