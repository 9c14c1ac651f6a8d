"""The inference routes each engine serves, read from its own code at the pinned release.

    from tests.engines.routes import PROTOCOL_ROUTES, sglang_routes, vllm_routes, SmgRouter

    sglang_routes(tree)          # {("POST", "/v1/messages"): "sglang/srt/entrypoints/http_server.py:2160", ...}
    vllm_routes(tree).routes     # the same shape, for a generate model, with .chain: how build_app reaches each
    with SmgRouter(tree, tmp) as router:
        router.serves("/v1/messages")   # True: SMG's compiled router has the route

Read, not imported, for the engines: sglang's http_server.py and vLLM's routers import FastAPI,
torch and the serving runtime at their top; torch and the runtime are not installed here (torch is
gigabytes), and a route table built behind stand-ins would prove only the stand-ins. What
FastAPI serves is what these files declare: a decorator `@app.post(PATH)` on a module-level
function registers PATH on `app` when the module is imported; `app.include_router(router)` adds
every `@router.post(PATH)` of the router's module. So each table is read from the files' syntax
tree (ast), following only code that runs whatever the server's flags and environment are.

SMG's routes are compiled into smg/smg_rs.abi3.so (Rust, axum): no source of them ships in the
wheel, and a string search of the binary cannot tell `/v1/messages` from `/v1/messages/count_tokens`
(its literals are packed without separators). So the compiled router itself is asked: it is
started on 127.0.0.1 with no reachable worker, and each route is sent one POST. A route it has
answers through its handler (for an empty body, its protocol's 400: a missing field of its request
type); a route it lacks answers its fallback, HTTP 404 "Invalid URL (POST <path>)" (smg 1.13.0, in
the OpenAI error envelope, or Anthropic's under /v1/messages/), which the tests read off a route no
server has.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

# harbor's ModelApiFormat names (tools/settings_rules.py SERVED_PROTOCOLS) and the route a client of
# each sends its requests to.
PROTOCOL_ROUTES = {
    "openai_chat_completions": ("POST", "/v1/chat/completions"),
    "anthropic_messages": ("POST", "/v1/messages"),
    "openai_responses": ("POST", "/v1/responses"),
}

SGLANG_HTTP_SERVER = "sglang/srt/entrypoints/http_server.py"
# vLLM 0.34.0: `vllm serve` builds its app with build_app (vllm/entrypoints/launchers/app.py; the
# vllm/entrypoints/openai/api_server.py of earlier releases now only re-exports it, deprecated).
VLLM_BUILD_APP = ("vllm.entrypoints.launchers.app", "build_app")
# What a generate model's server is given: vLLM registers its generation routers when its engine
# reports the task (vllm/entrypoints/launchers/api_server/routers.py). Every other condition
# (environment, flags, the model config) is left unknown, and an unknown branch is not followed.
GENERATE_MODEL = {"supported_tasks": ("generate",)}


def _decorator_routes(decorator: ast.expr, target: str) -> list[tuple[str, str]]:
    """(method, path) for `@TARGET.post(PATH, ...)` or `@TARGET.api_route(PATH, methods=[...])`."""
    if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)
            and isinstance(decorator.func.value, ast.Name) and decorator.func.value.id == target
            and decorator.args and isinstance(decorator.args[0], ast.Constant)
            and isinstance(decorator.args[0].value, str)):
        return []
    verb, path = decorator.func.attr, decorator.args[0].value
    if verb in ("get", "post", "put", "delete", "patch"):
        return [(verb.upper(), path)]
    if verb == "api_route":
        methods = next((k.value for k in decorator.keywords if k.arg == "methods"), None)
        if isinstance(methods, (ast.List, ast.Tuple)):
            return [(m.value, path) for m in methods.elts if isinstance(m, ast.Constant)]
    return []


def module_routes(source: str, target: str, where: str) -> dict[tuple[str, str], str]:
    """The routes module-level functions register on TARGET by decorator: {(method, path): "file:line"}.
    Functions inside an `if` or another function are left out: they exist only on some runs."""
    routes = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                for route in _decorator_routes(decorator, target):
                    routes.setdefault(route, f"{where}:{decorator.lineno}")
    return routes


def sglang_routes(tree: Path, source: str | None = None) -> dict[tuple[str, str], str]:
    """sglang's HTTP server's routes: the module's FastAPI `app` (assigned `app = FastAPI(...)` at its
    top level) and its decorated functions. `source` replaces the file's text (the tests' proof that
    a missing route is seen)."""
    text = (tree / SGLANG_HTTP_SERVER).read_text() if source is None else source
    apps = [n for n in ast.parse(text).body if isinstance(n, ast.Assign)
            and [getattr(t, "id", None) for t in n.targets] == ["app"]
            and isinstance(n.value, ast.Call) and getattr(n.value.func, "id", None) == "FastAPI"]
    assert apps, f"{SGLANG_HTTP_SERVER} no longer assigns app = FastAPI(...): read its routes anew"
    return module_routes(text, "app", SGLANG_HTTP_SERVER)


@dataclasses.dataclass
class VllmApp:
    routes: dict[tuple[str, str], str]  # (method, path) -> "file:line" of its decorator
    chain: dict[tuple[str, str], list[str]]  # (method, path) -> the calls from build_app that add it
    read: list[str]  # the files read, in order


class _Unknown(Exception):
    pass


def _truth(test: ast.expr, known: dict) -> bool | None:
    """An `if` test's value when it depends only on what is known (e.g. "generate" in
    supported_tasks); None when it reads anything else (envs, args, the model config)."""
    names = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
    if not names <= set(known) or any(isinstance(n, (ast.Call, ast.Attribute)) for n in ast.walk(test)):
        return None
    return bool(eval(compile(ast.Expression(test), "<test>", "eval"), {"__builtins__": {}}, dict(known)))  # noqa: S307


def _may_leave(node: ast.stmt) -> bool:
    """Whether a compound statement may return or raise (not counting functions defined in it)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    stack = [node]
    while stack:
        here = stack.pop()
        if isinstance(here, (ast.Return, ast.Raise)):
            return True
        stack.extend(c for c in ast.iter_child_nodes(here)
                     if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)))
    return False


def _module_file(module: str, tree: Path | None = None) -> str:
    """The file of MODULE in the wheel: a module's .py, or a package's __init__.py."""
    plain = module.replace(".", "/")
    if tree is not None and (tree / plain / "__init__.py").is_file():
        return f"{plain}/__init__.py"
    return plain + ".py"


def _resolve(module: str, node: ast.ImportFrom, package: bool) -> str:
    """The absolute name `from .x import y` means in MODULE (a package's __init__ is its own base)."""
    if not node.level:
        return node.module
    parts = module.split(".")
    parts = parts[:len(parts) - node.level + package]
    return ".".join(parts + ([node.module] if node.module else []))


class _VllmWalk:
    def __init__(self, tree: Path):
        self.tree, self.routes, self.chain, self.read, self.parsed = tree, {}, {}, [], {}

    def module(self, name: str) -> ast.Module:
        if name not in self.parsed:
            path = self.tree / _module_file(name, self.tree)
            if not path.is_file():
                raise _Unknown(f"{_module_file(name, self.tree)} is not in the wheel")
            self.read.append(_module_file(name, self.tree))
            self.parsed[name] = ast.parse(path.read_text())
        return self.parsed[name]

    def imports(self, module: str, body: list[ast.stmt]) -> dict[str, tuple[str, str]]:
        """Names bound by `from X import a as b` among these statements: {b: (X, a)}."""
        bound = {}
        for node in body:
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    package = _module_file(module, self.tree).endswith("/__init__.py")
                    bound[alias.asname or alias.name] = (_resolve(module, node, package), alias.name)
        return bound

    def call(self, module: str, function: str, path: list[str]) -> None:
        """Follow FUNCTION of MODULE: every statement that runs for a generate model."""
        tree = self.module(module)
        found = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function]
        if not found:
            raise _Unknown(f"{_module_file(module, self.tree)} has no function {function}")
        here = path + [f"{module}.{function}"]
        self.statements(module, found[0].body, self.imports(module, tree.body), here)

    def statements(self, module: str, body: list[ast.stmt], bound: dict, path: list[str]) -> None:
        """Statements that run for sure: an `if` whose test is known takes its branch; any other
        compound statement is skipped, and once one may return or raise, nothing after it is sure."""
        bound = {**bound, **self.imports(module, body)}
        for node in body:
            if isinstance(node, ast.If) and (truth := _truth(node.test, GENERATE_MODEL)) is not None:
                self.statements(module, node.body if truth else node.orelse, bound, path)
            calls = [node.value] if isinstance(node, (ast.Expr, ast.Assign)) else []
            for call in calls:
                if not isinstance(call, ast.Call):
                    continue
                func = call.func
                if isinstance(func, ast.Attribute) and func.attr == "include_router" and \
                        isinstance(func.value, ast.Name) and func.value.id == "app":
                    self.include(module, call, bound, path)
                elif isinstance(func, ast.Name) and func.id in bound and \
                        any(isinstance(a, ast.Name) and a.id == "app" for a in call.args):
                    target_module, name = bound[func.id]
                    if target_module.startswith("vllm."):
                        self.call(target_module, name, path)
            if not isinstance(node, (ast.Expr, ast.Assign, ast.ImportFrom, ast.Import)) and _may_leave(node):
                return


    def include(self, module: str, call: ast.Call, bound: dict, path: list[str]) -> None:
        """`app.include_router(router)`: the routes the router's module declares with `@router.X(PATH)`
        (the router made by APIRouter(...) at that module's top, or imported from another module)."""
        if not (call.args and isinstance(call.args[0], ast.Name)):
            raise _Unknown(f"{_module_file(module, self.tree)}: include_router of something not a name")
        module, name = bound.get(call.args[0].id, (module, call.args[0].id))
        file = _module_file(module, self.tree)
        tree = self.module(module)
        made = [n.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                and [getattr(t, "id", None) for t in n.targets] == [name]
                and getattr(n.value.func, "id", None) == "APIRouter"]
        if not made:
            raise _Unknown(f"{file}: {name} is not made by APIRouter(...) at the module's top")
        prefix = next((k.value for k in made[0].keywords if k.arg == "prefix"), ast.Constant(""))
        if not isinstance(prefix, ast.Constant):
            raise _Unknown(f"{file}: {name}'s prefix is not a literal")
        for (method, route), where in module_routes((self.tree / file).read_text(), name, file).items():
            self.routes.setdefault((method, prefix.value + route), where)
            self.chain.setdefault((method, prefix.value + route), path)


def vllm_routes(tree: Path) -> VllmApp:
    """The routes vLLM's build_app puts on the app of a generate model (GENERATE_MODEL)."""
    walk = _VllmWalk(tree)
    walk.call(*VLLM_BUILD_APP, [])
    return VllmApp(walk.routes, walk.chain, walk.read)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SmgRouter:
    """SMG's compiled router (smg.launch_router), on 127.0.0.1 with one worker URL nothing answers."""

    # Bounds only a hang reaches: the router starts in well under a second.
    START_TIMEOUT = 120

    def __init__(self, tree: Path, scratch: Path):
        self.tree, self.scratch = tree.resolve(), scratch.resolve()

    def __enter__(self) -> SmgRouter:
        stub = self.scratch / "stub"
        stub.mkdir(parents=True, exist_ok=True)
        # launch_router names its process with setproctitle, which .venv lacks.
        (stub / "setproctitle.py").write_text("def setproctitle(title):\n    pass\n")
        self.port = free_port()
        argv = [sys.executable, "-m", "smg.launch_router", "--host", "127.0.0.1", "--port", str(self.port),
                "--worker-urls", f"http://127.0.0.1:{free_port()}", "--policy", "round_robin",
                "--worker-startup-timeout-secs", "600", "--prometheus-host", "127.0.0.1",
                "--prometheus-port", str(free_port())]
        # PYTHONDONTWRITEBYTECODE: the extracted wheel holds only what a parser imports (tests/test_engines.py
        # checks it), so the router writes no __pycache__ into it.
        env = {**os.environ, "PYTHONPATH": f"{self.tree}{os.pathsep}{stub}", "HOME": str(self.scratch),
               "NO_COLOR": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        self.log = open(self.scratch / "router.log", "wb")
        self.process = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=self.scratch)
        deadline = time.monotonic() + self.START_TIMEOUT
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    log = (self.scratch / "router.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"smg's router did not listen:\n{log}")
                time.sleep(0.05)  # a poll for the socket: the event is the router's listen()

    def post(self, path: str) -> tuple[int, dict]:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=b"{}", method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return answer.status, json.loads(answer.read() or b"{}")
        except urllib.error.HTTPError as error:
            body = error.read()
            try:
                return error.code, json.loads(body)
            except ValueError:
                return error.code, {"raw": body.decode(errors="replace")}

    def serves(self, path: str) -> bool:
        """Whether a POST to PATH reaches a handler rather than the router's fallback."""
        code, body = self.post(path)
        # The fallback's message, in the OpenAI envelope or (under /v1/messages) Anthropic's.
        fallback = code == 404 and (body.get("error") or {}).get("message") == f"Invalid URL (POST {path})"
        return not fallback and code != 405

    def __exit__(self, *exc) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
