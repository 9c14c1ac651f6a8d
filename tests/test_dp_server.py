"""A data-parallel server's job (scripts/lib-dp.sh, DP_SCRIPT), run here as HF runs it: the command the
scripts build for each data-parallel profile, under bash, with the engines and SMG's router replaced
by recorders that answer HTTP on 127.0.0.1 (tests/stubs/dp-server/). What each replica and the router
were started with is what the job would start, and each is handed to the real parser of the engine's
release the image is pinned to, and of SMG's (tests/engines).

Every wait is on an event (a record written, a process gone), bounded only against a hang.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
STUBS = REPO / "tests" / "stubs" / "dp-server"
HANG_S = 120  # a bound only a hang reaches

# The data-parallel profiles, with the one-GPU profile whose engine each replica is.
DP_PROFILES = {
    "qwen3.8-27b-fp8-sglang-h200x2": 2, "qwen3.8-27b-fp8-sglang-h200x4": 4, "qwen3.8-27b-fp8-sglang-h200x8": 8,
    "qwen3.8-27b-fp8-sglang-h200x4-tp2-dp2": 4, "gpt-oss-20b-vllm-l40sx4": 4,
}
# The positions of the script's own arguments in the command (bash -c SCRIPT dp-server …).
READY, POLL, BASE, PORT = 9, 11, 7, 8


def server_command(server: str, **settings: str) -> list[str]:
    """The job's command for SERVER, as make serve builds it (server_command, scripts/argv.sh)."""
    env = {k: v for k, v in os.environ.items() if k not in ("RUN", "CLI_SETTINGS", "DRY_RUN")}
    env.update(RUN="qwen-t2" if "qwen" in server else "gptoss-t2", SERVER=server, **settings)
    out = subprocess.run(["bash", "-c", 'source scripts/lib.sh; source scripts/argv.sh; load_settings; '
                                        'server_command cmd; printf "%s\\0" "${cmd[@]}"'],
                         cwd=REPO, env=env, capture_output=True, check=True, timeout=60).stdout
    return out.decode().split("\0")[:-1]


def one_gpu_engine(server: str) -> list[str]:
    """The engine command of the one-GPU server the profile's replicas are, --host and --port left out."""
    base = {"gpt-oss-20b-vllm-l40sx4": "gpt-oss-20b-vllm-l40s"}.get(server, "qwen3.8-27b-fp8-sglang-h200")
    cmd = server_command(base)
    assert cmd[-4:-2] == ["--host", "0.0.0.0"]
    return cmd[:-4]


def free_ports(n: int) -> int:
    """The first of n consecutive free ports on 127.0.0.1 (the test's replicas), tried until bound."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            first = s.getsockname()[1]
        if first + n >= 65535:
            continue
        try:
            held = []
            for p in range(first, first + n):
                t = socket.socket()
                held.append(t)
                t.bind(("127.0.0.1", p))
            return first
        except OSError:
            continue
        finally:
            for t in held:
                t.close()
    raise AssertionError("no free ports")


class Job:
    """The job's command started under bash, as HF starts it, with the stubs first on PATH."""

    def __init__(self, tmp: Path, cmd: list[str], replicas: int, *, ready: str = "600", die: int | None = None,
                 pip_exit: int = 0):
        self.record = tmp / "record.jsonl"
        self.gates = tmp / "gates"
        self.gates.mkdir()
        base = free_ports(replicas + 1)
        cmd = list(cmd)
        cmd[BASE], cmd[PORT], cmd[READY], cmd[POLL] = str(base + 1), str(base), ready, "0.05"
        self.base, self.port, self.cmd = base + 1, base, cmd
        self.log = tmp / "job.log"
        environment = {**os.environ, "PATH": f"{STUBS}:{os.environ['PATH']}", "REAL_PYTHON": sys.executable,
                       "DP_RECORD": str(self.record), "DP_GATE_DIR": str(self.gates), "DP_PIP_EXIT": str(pip_exit)}
        if die is not None:  # that replica exits as soon as it starts
            environment["DP_DIE_PORT"] = str(self.base + die)
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(cmd, env=environment, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def records(self) -> list[dict]:
        return [json.loads(line) for line in self.record.read_text().splitlines()] if self.record.exists() else []

    def wait_for(self, what: str, predicate) -> None:
        end = time.monotonic() + HANG_S
        while not predicate():
            assert self.proc.poll() is None or predicate(), f"the job ended ({self.proc.returncode}) before {what}: " \
                                                            f"{self.log.read_text()}"
            assert time.monotonic() < end, f"waited {HANG_S} s for {what}: a hang"
            time.sleep(0.02)

    def open_gates(self, *indexes: int) -> None:
        for i in indexes:
            (self.gates / str(self.base + i)).touch()

    def end(self) -> int:
        end = time.monotonic() + HANG_S
        while self.proc.poll() is None:
            assert time.monotonic() < end, f"the job did not end: {self.log.read_text()}"
            time.sleep(0.02)
        return self.proc.returncode

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def wait_until(what: str, predicate) -> None:
    """Wait for an event that comes after the job itself has ended (its processes gone)."""
    end = time.monotonic() + HANG_S
    while not predicate():
        assert time.monotonic() < end, f"waited {HANG_S} s for {what}: a hang"
        time.sleep(0.02)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()


@pytest.fixture
def job(tmp_path):
    made = []

    def start(cmd, replicas, **kw):
        made.append(Job(tmp_path, cmd, replicas, **kw))
        return made[-1]

    yield start
    for j in made:
        j.stop()


@pytest.mark.parametrize("server", sorted(DP_PROFILES))
def test_each_replica_is_the_one_gpu_engine_on_its_own_gpus_and_port_and_smg_only_routes(job, server):
    cmd = server_command(server)
    gpus = DP_PROFILES[server]
    replicas, tp = int(cmd[5]), int(cmd[6])
    assert replicas * tp == gpus
    j = job(cmd, replicas)
    j.wait_for("every replica", lambda: len(j.records()) == replicas)
    j.open_gates(*range(replicas))
    j.wait_for("the router", lambda: any(r["role"] == "router" for r in j.records()))
    engines = [r for r in j.records() if r["role"] == "engine"]
    tp_flag = {"sglang": ["--tp-size", str(tp)], "vllm": ["--tensor-parallel-size", str(tp)]}
    engine = one_gpu_engine(server)
    expected_tp = tp_flag[engine[0]] if tp > 1 else []
    by_port = {int(r["argv"][-1]): r for r in engines}
    assert sorted(by_port) == [j.base + i for i in range(replicas)]
    for i in range(replicas):
        r = by_port[j.base + i]
        # The one-GPU engine's exact command, its tensor parallelism, on its own port on 127.0.0.1 ...
        assert r["argv"] == [*engine, *expected_tp, "--host", "127.0.0.1", "--port", str(j.base + i)]
        # ... and its own GPUs: replica i has i×TP to i×TP+TP-1.
        assert r["cuda"] == ",".join(str(g) for g in range(i * tp, (i + 1) * tp))
    assert sorted(int(g) for r in engines for g in r["cuda"].split(",")) == list(range(gpus))
    router = next(r for r in j.records() if r["role"] == "router")
    urls = [f"http://127.0.0.1:{j.base + i}" for i in range(replicas)]
    assert router["argv"] == ["python3", "-m", "smg.launch_router", "--host", "0.0.0.0", "--port", str(j.port),
                              "--worker-urls", *urls, "--policy", "cache_aware", "--disable-retries",
                              "--request-timeout-secs", cmd[10], "--worker-startup-timeout-secs", "600",
                              "--health-check-timeout-secs", "30", "--disable-circuit-breaker",
                              "--disable-worker-overload-protection"]
    record = json.loads((REPO / "env" / "gateway-smg.json").read_text())
    assert (j.record.parent / "record.jsonl.requirement").read_text() == \
        f"smg=={record['version']} --hash=sha256:{record['sha256']}\n"
    assert (j.record.parent / "record.jsonl.pip").read_text() == \
        "-m pip install --quiet --no-cache-dir --no-deps --require-hashes -r /dev/stdin\n"


def test_the_router_starts_only_once_every_replica_answers_health_itself(job):
    cmd = server_command("qwen3.8-27b-fp8-sglang-h200x4")
    j = job(cmd, 4)
    j.wait_for("every replica", lambda: len(j.records()) == 4)
    j.open_gates(0, 1, 3)  # replica 2 still loading: its /health 503
    log_says = lambda text: text in j.log.read_text()  # noqa: E731
    j.wait_for("replicas 0 and 1 ready", lambda: log_says("dp-server: replica 1 answers /health"))
    assert not any(r["role"] == "router" for r in j.records()) and j.proc.poll() is None
    j.open_gates(2)
    j.wait_for("the router", lambda: any(r["role"] == "router" for r in j.records()))
    assert [line for line in j.log.read_text().splitlines() if "answers /health" in line] == \
        [f"dp-server: replica {i} answers /health" for i in range(4)]


def test_a_replica_that_exits_while_loading_ends_the_job_and_no_router_starts(job):
    cmd = server_command("qwen3.8-27b-fp8-sglang-h200x4")
    j = job(cmd, 4, die=2)
    assert j.end() == 1
    # Replica 2 started (and exited at once); the others may or may not have recorded themselves
    # before the script ended them: whichever did is gone.
    assert any(r["argv"][-1] == str(j.base + 2) for r in j.records())
    pids = [r["pid"] for r in j.records()]
    assert j.log.read_text().splitlines()[-1] == \
        "dp-server: a replica exited before every replica answered /health: stopping"
    assert not any(r["role"] == "router" for r in j.records())
    for pid in pids:
        wait_until(f"process {pid} to end", lambda pid=pid: not alive(pid))


def test_a_replica_that_dies_once_served_ends_the_job_and_every_other_process(job):
    cmd = server_command("qwen3.8-27b-fp8-sglang-h200x2")
    j = job(cmd, 2)
    j.wait_for("every replica", lambda: len(j.records()) == 2)
    j.open_gates(0, 1)
    j.wait_for("the router", lambda: any(r["role"] == "router" for r in j.records()))
    pids = [r["pid"] for r in j.records()]
    (j.gates / f"die-{j.base + 1}").touch()
    assert j.end() == 1
    assert j.log.read_text().splitlines()[-1] == "dp-server: a replica or the router exited: stopping the server"
    for pid in pids:
        wait_until(f"process {pid} to end", lambda pid=pid: not alive(pid))


def test_not_every_replica_ready_within_ready_timeout_ends_the_job(job):
    cmd = server_command("qwen3.8-27b-fp8-sglang-h200x2")
    j = job(cmd, 2, ready="1")
    # Nothing here waits for the recorders: under load one may not have written its record before the
    # job, its second up, ends it. The job's own lines say each replica was started.
    assert j.end() == 1
    lines = j.log.read_text().splitlines()
    assert [line for line in lines if line.startswith("dp-server: replica ")] == [
        f"dp-server: replica 0 on GPUs 0 at 127.0.0.1:{j.base}",
        f"dp-server: replica 1 on GPUs 1 at 127.0.0.1:{j.base + 1}"]
    assert lines[-1] == "dp-server: not every replica answered /health within 1s: stopping"
    assert not any(r["role"] == "router" for r in j.records())


def test_a_router_wheel_that_does_not_install_starts_nothing(job):
    # pip --require-hashes refuses a wheel whose hash differs: nothing starts, the job ends.
    j = job(server_command("qwen3.8-27b-fp8-sglang-h200x2"), 2, pip_exit=1)
    assert j.end() == 1
    assert j.records() == []


@pytest.mark.parametrize("server", sorted(DP_PROFILES))
def test_each_replica_and_the_router_are_what_the_engines_and_smg_own_parsers_read(job, server):
    """Every replica's command, as the job started it, means to the engine's own parser (sglang 0.5.23,
    vLLM 0.34.0) one engine of SERVER_TP GPUs on its own port of 127.0.0.1, and the router's means to
    SMG 1.13.0's parse_router_args what DP_SCRIPT says: the replicas' urls, cache-aware, retries off."""
    from tests.engines import parse_sglang_serve, parse_smg_router, parse_vllm_serve

    cmd = server_command(server)
    replicas, tp = int(cmd[5]), int(cmd[6])
    j = job(cmd, replicas)
    j.wait_for("every replica", lambda: len(j.records()) == replicas)
    j.open_gates(*range(replicas))
    j.wait_for("the router", lambda: any(r["role"] == "router" for r in j.records()))
    problems = {}
    for r in (r for r in j.records() if r["role"] == "engine"):
        port = int(r["argv"][-1])
        if r["argv"][0] == "sglang":
            v = parse_sglang_serve(r["argv"]).values
            got = (v["tp_size"], v["dp_size"], v["host"], v["port"])
        else:
            v = parse_vllm_serve(r["argv"]).values
            got = (v["tensor_parallel_size"], v["data_parallel_size"], v["host"], v["port"])
        if got != (tp, 1, "127.0.0.1", port):
            problems[port] = got
    assert problems == {}
    router = parse_smg_router(next(r for r in j.records() if r["role"] == "router")["argv"]).values
    assert (router["worker_urls"], router["policy"], router["disable_retries"], router["host"], router["port"],
            router["request_timeout_secs"], router["worker_startup_timeout_secs"], router["health_check_timeout_secs"],
            router["disable_circuit_breaker"], router["worker_overload_protection"]) == \
        ([f"http://127.0.0.1:{j.base + i}" for i in range(replicas)], "cache_aware", True, "0.0.0.0", j.port,
         int(cmd[10]), 600, 30, True, False)
