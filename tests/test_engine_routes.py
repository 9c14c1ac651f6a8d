"""Every protocol a server profile declares (SERVER_PROTOCOLS), in its engine's own route table.

An agent speaks one inference protocol (harbor's ModelApiFormat): claude-code the Anthropic
Messages API, codex the OpenAI Responses API, terminus-2 chat completions. A profile that declares
a protocol its engine does not serve is found, without this test, when the first trial's first
request answers 404 with the GPUs billing. So for every profile in env/servers/, resolved as the
runs resolve it (tools/settings.py), each declared protocol's route must be in the route table of
the engine the profile names, at its SERVER_ENGINE_VERSION, read from that release's own code
(tests/engines/routes.py says how, and why the code is read rather than imported):

- sglang 0.5.23: the module-level `@app.post(PATH)` functions of sglang/srt/entrypoints/http_server.py;
- vLLM 0.34.0: the routers `vllm serve`'s build_app (vllm/entrypoints/launchers/app.py) includes for
  a generate model, followed call by call to each vllm/entrypoints/**/api_router.py;
- SERVER_DP > 1: clients reach SMG 1.13.0's router, not the engines: its compiled router
  (smg/smg_rs.abi3.so) is started on 127.0.0.1 and asked for each route.

The wheels are the ones tests/test_engines.py parses the commands with (tests/engines.lock.json).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.engines import fetch, fetch_wheels
from tests.engines.routes import PROTOCOL_ROUTES, SGLANG_HTTP_SERVER, SmgRouter, sglang_routes, vllm_routes

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.xdist_group("engines")


def resolve(cases: dict[str, tuple[str, str]]) -> dict[str, dict]:
    """Each case's (RUN, SERVER) engine, release, replicas and protocols, as tools/settings.py resolves
    them (includes and defaults applied); an empty SERVER is the run's own."""
    script = ('source scripts/lib.sh; while (($#)); do (export RUN=$2; [[ -n $3 ]] && export SERVER=$3; load_settings; '
              'jq -cn --arg c "$1" --arg e "$SERVER_ENGINE" --arg v "$SERVER_ENGINE_VERSION" --arg dp "$SERVER_DP" '
              '--arg w "$SERVER_PROTOCOLS" \'{($c): {engine: $e, version: $v, dp: ($dp | tonumber), '
              'protocols: ($w | split(" ") | map(select(. != "")))}}\'); shift 3; done')
    words = [word for label, (run, server) in cases.items() for word in (label, run, server)]
    done = subprocess.run(["bash", "-c", script, "resolve", *words], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "STATE_ROOT": os.devnull})  # reads no run state
    assert done.returncode == 0, done.stderr
    found = {}
    for line in done.stdout.splitlines():
        found |= json.loads(line)
    return found


def profiles() -> dict[str, dict]:
    """Every profile, with the run of its engine that changes none of what is checked here."""
    names = sorted(p.stem for p in (REPO / "env" / "servers").glob("*.env"))
    return resolve({name: ("gptoss-t2" if name.startswith("gpt-oss") else "qwen-t2", name) for name in names})


# A run file inherits its profile's protocols, engine, release and replicas unless it sets one.
RUN_SETS = re.compile(r"^(SERVER_PROTOCOLS|SERVER_DP|SERVER_ENGINE|SERVER_ENGINE_VERSION)=", re.M)


def runs_that_change_them() -> list[str]:
    return sorted(p.stem for p in (REPO / "runs").glob("*.env") if RUN_SETS.search(p.read_text()))


def route_table(engine: str, version: str) -> tuple[set, str]:
    """The engine release's POST routes, and where they were read."""
    wheel = fetch.entry(engine)
    assert wheel["version"] == version, \
        f"{engine} {version}: tests/engines.lock.json has {engine} {wheel['version']}, not this release's code"
    (tree,) = [t for t in fetch_wheels(engine) if t.name == f"{engine}-{version}"]
    if engine == "sglang":
        return set(sglang_routes(tree)), SGLANG_HTTP_SERVER
    return set(vllm_routes(tree).routes), "vllm/entrypoints/launchers/app.py build_app, for a generate model"


def smg_table(scratch: Path) -> tuple[set, str]:
    (tree,) = fetch_wheels("smg-router")
    with SmgRouter(tree, scratch) as router:
        return {route for route in PROTOCOL_ROUTES.values() if router.serves(route[1])}, "smg/smg_rs.abi3.so"


def unserved(name: str, profile: dict, tables: dict) -> list[str]:
    """One line per declared protocol the profile's server does not answer: the profile, the
    protocol, the route and the release named."""
    wrong = []
    engine, version = profile["engine"], profile["version"]
    for protocol in profile["protocols"]:
        method, path = PROTOCOL_ROUTES[protocol]
        routes, where = tables[engine, version]
        if (method, path) not in routes:
            wrong.append(f"profile {name} declares {protocol} (SERVER_PROTOCOLS), but {engine} {version} has no "
                         f"{method} {path} ({where}): take it out of SERVER_PROTOCOLS, or pin a release that serves it")
        if profile["dp"] > 1:
            routes, where = tables["smg", fetch.entry("smg")["version"]]
            if (method, path) not in routes:
                wrong.append(f"profile {name} declares {protocol} (SERVER_PROTOCOLS) with SERVER_DP={profile['dp']}, "
                             f"but SMG {fetch.entry('smg')['version']}'s router has no {method} {path} ({where}); "
                             "clients reach the router, not the engines")
    return wrong


ALL = ["openai_chat_completions", "anthropic_messages", "openai_responses"]


def test_every_profile_declares_only_protocols_its_engine_and_router_serve(tmp_path):
    found = profiles()
    # The releases and protocols proven here: a new profile, release or protocol changes this table.
    assert found == {
        "gpt-oss-20b-vllm-l40s": {"engine": "vllm", "version": "0.34.0", "dp": 1, "protocols": ALL},
        "gpt-oss-20b-vllm-l40sx4": {"engine": "vllm", "version": "0.34.0", "dp": 4, "protocols": ALL},
        "qwen3.8-27b-fp8-sglang-h200": {"engine": "sglang", "version": "0.5.23", "dp": 1, "protocols": ALL},
        "qwen3.8-27b-fp8-sglang-h200x2": {"engine": "sglang", "version": "0.5.23", "dp": 2, "protocols": ALL},
        "qwen3.8-27b-fp8-sglang-h200x2-tp2": {"engine": "sglang", "version": "0.5.23", "dp": 1, "protocols": ALL},
        "qwen3.8-27b-fp8-sglang-h200x2-tp2-dflash": {"engine": "sglang", "version": "0.5.23", "dp": 1,
                                                     "protocols": ALL},
        "qwen3.8-27b-fp8-sglang-h200x4": {"engine": "sglang", "version": "0.5.23", "dp": 4, "protocols": ALL},
        "qwen3.8-27b-fp8-sglang-h200x4-tp2-dp2": {"engine": "sglang", "version": "0.5.23", "dp": 2, "protocols": ALL},
        "qwen3.8-27b-fp8-sglang-h200x4-tp4": {"engine": "sglang", "version": "0.5.23", "dp": 1, "protocols": ALL},
        "qwen3.8-27b-fp8-sglang-h200x8": {"engine": "sglang", "version": "0.5.23", "dp": 8, "protocols": ALL},
    }
    # No run file changes them today; one that does is checked as its own case.
    assert runs_that_change_them() == []
    found |= resolve({f"run {run}": (run, "") for run in runs_that_change_them()})
    tables = {(p["engine"], p["version"]): None for p in found.values()}
    tables = {key: route_table(*key) for key in tables}
    if any(p["dp"] > 1 for p in found.values()):
        tables["smg", fetch.entry("smg")["version"]] = smg_table(tmp_path)
    assert {name: unserved(name, p, tables) for name, p in found.items()} == {name: [] for name in found}


def test_each_route_is_where_the_releases_own_code_declares_it():
    # sglang 0.5.23: decorators of module-level functions on the module's `app = FastAPI(...)`.
    (sglang,) = [t for t in fetch_wheels("sglang") if t.name == "sglang-0.5.23"]
    table = sglang_routes(sglang)
    assert {p: table.get(r) for p, r in PROTOCOL_ROUTES.items()} == {
        "openai_chat_completions": "sglang/srt/entrypoints/http_server.py:1870",
        "anthropic_messages": "sglang/srt/entrypoints/http_server.py:2160",
        "openai_responses": "sglang/srt/entrypoints/http_server.py:2066"}
    # vLLM 0.34.0: vllm/entrypoints/openai/api_server.py only re-exports build_app now (deprecated);
    # `vllm serve` builds the app in vllm/entrypoints/launchers/app.py, whose register_api_routers
    # adds the generation routers when the model's tasks include "generate".
    (vllm,) = [t for t in fetch_wheels("vllm") if t.name == "vllm-0.34.0"]
    app = vllm_routes(vllm)
    assert {p: app.routes.get(r) for p, r in PROTOCOL_ROUTES.items()} == {
        "openai_chat_completions": "vllm/entrypoints/openai/chat_completion/api_router.py:43",
        "anthropic_messages": "vllm/entrypoints/anthropic/api_router.py:52",
        "openai_responses": "vllm/entrypoints/openai/responses/api_router.py:48"}
    chain = ["vllm.entrypoints.launchers.app.build_app",
             "vllm.entrypoints.launchers.api_server.routers.register_api_routers",
             "vllm.entrypoints.generate.api_router.register_generate_api_routers"]
    assert {p: app.chain.get(r) for p, r in PROTOCOL_ROUTES.items()} == {
        "openai_chat_completions": chain + ["vllm.entrypoints.openai.chat_completion.api_router.attach_router"],
        "anthropic_messages": chain + ["vllm.entrypoints.anthropic.api_router.attach_router"],
        "openai_responses": chain + ["vllm.entrypoints.openai.responses.api_router.attach_router"]}
    # Cohere's router sits behind `if not <env flag>: return` in its attach_router: the walk does not
    # take a branch it cannot decide, nor anything after a statement that may return.
    assert not [r for r in app.routes if r[1].startswith("/cohere")]


def test_smg_1_13s_router_hands_each_route_to_its_protocols_handler(tmp_path):
    (tree,) = fetch_wheels("smg-router")
    with SmgRouter(tree, tmp_path) as router:
        answers = {path: router.post(path) for path in
                   ["/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/no-such-route",
                    "/v1/messages/no-such-route"]}
        served = {path: router.serves(path) for path in answers}
    # An empty body reaches each protocol's own request type: the field it misses first is the
    # protocol's (chat: messages, Anthropic: model, Responses: input). A route the router lacks
    # answers its fallback.
    assert {path: (code, body.get("error", {}).get("message")) for path, (code, body) in answers.items()} == {
        "/v1/chat/completions": (400, "Invalid JSON data: Failed to deserialize the JSON body into the target type: "
                                      "missing field `messages` at line 1 column 2"),
        "/v1/messages": (400, "Invalid JSON data: Failed to deserialize the JSON body into the target type: "
                              "missing field `model` at line 1 column 2"),
        "/v1/responses": (400, "Invalid JSON data: Failed to deserialize the JSON body into the target type: "
                               "missing field `input` at line 1 column 2"),
        "/v1/no-such-route": (404, "Invalid URL (POST /v1/no-such-route)"),
        "/v1/messages/no-such-route": (404, "Invalid URL (POST /v1/messages/no-such-route)")}
    assert answers["/v1/messages"][1]["type"] == "error"  # Anthropic's error envelope
    assert served == {"/v1/chat/completions": True, "/v1/messages": True, "/v1/responses": True,
                      "/v1/no-such-route": False, "/v1/messages/no-such-route": False}


def test_a_profile_declaring_a_route_its_engine_lacks_fails_naming_profile_protocol_and_release(tmp_path):
    # sglang's server without its /v1/messages decorator (the release before it had none).
    (sglang,) = [t for t in fetch_wheels("sglang") if t.name == "sglang-0.5.23"]
    source = (sglang / SGLANG_HTTP_SERVER).read_text()
    assert source.count('@app.post("/v1/messages", ') == 1
    without = source.replace('@app.post("/v1/messages", ', '@app.post("/v1/messages-gone", ')
    lacking = set(sglang_routes(sglang, without))
    assert ("POST", "/v1/messages") not in lacking and ("POST", "/v1/chat/completions") in lacking
    # vLLM's code with register_generate_api_routers no longer attaching the Anthropic router: a
    # copy of the files the walk reads, one line changed.
    (vllm,) = [t for t in fetch_wheels("vllm") if t.name == "vllm-0.34.0"]
    copy = tmp_path / "vllm"
    for file in vllm_routes(vllm).read:
        (copy / file).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(vllm / file, copy / file)
    generate = copy / "vllm/entrypoints/generate/api_router.py"
    text = generate.read_text()
    assert text.count("    register_anthropic_api_router(app)\n") == 1
    generate.write_text(text.replace("    register_anthropic_api_router(app)\n", "    pass\n"))
    vllm_lacking = set(vllm_routes(copy).routes)
    assert ("POST", "/v1/messages") not in vllm_lacking and ("POST", "/v1/responses") in vllm_lacking
    # And SMG's router with a route table that has only chat completions.
    smg = fetch.entry("smg")["version"]
    tables = {("sglang", "0.5.23"): (lacking, SGLANG_HTTP_SERVER),
              ("vllm", "0.34.0"): (vllm_lacking, "build_app"),
              ("smg", smg): ({("POST", "/v1/chat/completions")}, "smg/smg_rs.abi3.so")}
    one = {"engine": "sglang", "version": "0.5.23", "dp": 1, "protocols": ["openai_chat_completions", "anthropic_messages"]}
    assert unserved("mine", one, tables) == [
        "profile mine declares anthropic_messages (SERVER_PROTOCOLS), but sglang 0.5.23 has no POST /v1/messages "
        "(sglang/srt/entrypoints/http_server.py): take it out of SERVER_PROTOCOLS, or pin a release that serves it"]
    gpt = {"engine": "vllm", "version": "0.34.0", "dp": 1, "protocols": ["anthropic_messages"]}
    assert unserved("gpt", gpt, tables) == [
        "profile gpt declares anthropic_messages (SERVER_PROTOCOLS), but vllm 0.34.0 has no POST /v1/messages "
        "(build_app): take it out of SERVER_PROTOCOLS, or pin a release that serves it"]
    tables["sglang", "0.5.23"] = (set(sglang_routes(sglang)), SGLANG_HTTP_SERVER)
    dp = {"engine": "sglang", "version": "0.5.23", "dp": 2, "protocols": ["openai_chat_completions", "openai_responses"]}
    assert unserved("wide", dp, tables) == [
        f"profile wide declares openai_responses (SERVER_PROTOCOLS) with SERVER_DP=2, but SMG {smg}'s router has no "
        "POST /v1/responses (smg/smg_rs.abi3.so); clients reach the router, not the engines"]
    assert unserved("wide", dict(dp, protocols=["openai_chat_completions"]), tables) == []


def test_the_walk_follows_only_what_runs_for_sure():
    # An `if` on anything but supported_tasks is not taken, and a possible return ends the function.
    from tests.engines.routes import _truth, _may_leave
    known = {"supported_tasks": ("generate",)}
    tests = ['"generate" in supported_tasks', '"generate" in supported_tasks or "render" in supported_tasks',
             '"transcription" in supported_tasks', "envs.VLLM_SERVER_DEV_MODE",
             "any(task in POOLING_TASKS for task in supported_tasks)", "model_config is not None"]
    assert [_truth(ast.parse(t, mode="eval").body, known) for t in tests] == [True, True, False, None, None, None]
    body = ast.parse("if not flag:\n    return\nif x:\n    f(app)\ndef g():\n    return 1\n").body
    assert [_may_leave(node) for node in body] == [True, False, False]
