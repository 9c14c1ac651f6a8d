# shellcheck shell=bash
# Sourced by argv.sh: the command of a data-parallel server (SERVER_DP > 1; docs/data-parallel.md).
# Not executable on its own.
#
# The job's own script starts SERVER_DP engines, each exactly as a one-GPU server starts (the
# profile's flags, the engine's own command), on its own group of SERVER_TP GPUs and its own port
# on 127.0.0.1; once every engine answers /health itself it starts SMG, as a router only, in front
# of them on 0.0.0.0:PORT; and it ends the job as soon as any of them exits. No engine flag ever
# passes through SMG's parser: `smg serve` put its own --dp-size and sglang's in one parser, and
# from sglang 0.5.14 sglang's replaced SMG's, so every data-parallel sglang server died at start.

# The SMG wheel the router runs from, recorded from PyPI with its sha256 and file list (make doctor
# checks it offline; tests/engines.lock.json pins the same wheel for the contract tests).
readonly GATEWAY_RECORD_DEFAULT="$ENV_DIR/gateway-smg.json"

# The replicas listen from PORT + DP_PORT_OFFSET on, on 127.0.0.1: only the router's PORT is exposed.
readonly DP_PORT_OFFSET=1000
# Seconds between the script's looks at its replicas while they load.
readonly DP_POLL=5

# gateway_requirement: the pinned wheel as one pip requirement line with its hash; fails when the
# record is not one (a package name, a version, 64 hex digits).
gateway_requirement() {
  jq -er 'select((.package | test("^[A-Za-z0-9_.-]+$")) and (.version | test("^[0-9A-Za-z.+!-]+$"))
    and (.sha256 | test("^[0-9a-f]{64}$"))) | "\(.package)==\(.version) --hash=sha256:\(.sha256)"' \
    "${GATEWAY_RECORD:-$GATEWAY_RECORD_DEFAULT}" 2>/dev/null
}

# DP_SCRIPT: what the job's bash runs. Its arguments are data, never pasted into its text:
#   $1 the SMG requirement (pinned, hash-checked; --no-deps: in http mode the router imports
#      setproctitle besides its own compiled module, and sglang and vLLM both depend on it)
#   $2 replicas  $3 GPUs per replica  $4 the first replica's port  $5 the router's port
#   $6 READY_TIMEOUT  $7 the router's request timeout  $8 seconds between looks  $9 --
#   then the engine's command, without --host and --port, which the script adds per replica.
# Each replica gets CUDA_VISIBLE_DEVICES = its own SERVER_TP GPUs (replica i: i×TP to i×TP+TP-1).
# The router starts only once every replica has answered /health itself: its own /health and its
# worker list then speak for engines that are up, never for a stale entry. Any replica or the
# router exiting ends the job (non-zero): make status and wait-ready see a job that ended, and make
# reproduce relaunches it, where a gateway with a replica gone would serve on half a server.
# shellcheck disable=SC2016  # expanded by the job's bash, not here
readonly DP_SCRIPT='set -euo pipefail
requirement=$1 replicas=$2 tp=$3 base=$4 port=$5 ready=$6 request_timeout=$7 poll=$8
shift 8
[[ "${1:-}" != -- ]] || shift
say() { printf "dp-server: %s\n" "$*"; }
printf "%s\n" "$requirement" | python3 -m pip install --quiet --no-cache-dir --no-deps --require-hashes -r /dev/stdin
pids=() urls=()
trap "kill \"\${pids[@]}\" 2>/dev/null || true" EXIT
trap "exit 143" TERM INT
for ((i = 0; i < replicas; i++)); do
  gpus=$((i * tp))
  for ((g = i * tp + 1; g < (i + 1) * tp; g++)); do gpus+=",$g"; done
  say "replica $i on GPUs $gpus at 127.0.0.1:$((base + i))"
  CUDA_VISIBLE_DEVICES=$gpus "$@" --host 127.0.0.1 --port "$((base + i))" &
  pids+=("$!") urls+=("http://127.0.0.1:$((base + i))")
done
healthy() { python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + \"/health\", timeout=5)" "$1" >/dev/null 2>&1; }
deadline=$((SECONDS + ready))
for i in "${!urls[@]}"; do
  until healthy "${urls[i]}"; do
    for pid in "${pids[@]}"; do
      kill -0 "$pid" 2>/dev/null || { say "a replica exited before every replica answered /health: stopping"; exit 1; }
    done
    ((SECONDS < deadline)) || { say "not every replica answered /health within ${ready}s: stopping"; exit 1; }
    sleep "$poll"
  done
  say "replica $i answers /health"
done
python3 -m smg.launch_router --host 0.0.0.0 --port "$port" --worker-urls "${urls[@]}" --policy cache_aware \
  --disable-retries --request-timeout-secs "$request_timeout" --worker-startup-timeout-secs "$ready" \
  --health-check-timeout-secs 30 --disable-circuit-breaker --disable-worker-overload-protection &
pids+=("$!")
say "router on 0.0.0.0:$port in front of ${#urls[@]} replicas"
wait -n "${pids[@]}" || true
say "a replica or the router exited: stopping the server"
exit 1'

# dp_command VAR ENGINE_COMMAND...: the job's command for SERVER_DP replicas of ENGINE_COMMAND (the
# engine's own command as one GPU runs it, --host and --port left out). SMG's router, each setting
# written out rather than left to a default that does not fit:
#   --policy cache_aware        each agent turn to the replica holding its conversation's prefix
#                               (terminus-2 resends the whole growing conversation every turn);
#   --disable-retries           one attempt per request: the default retries up to 5 times, so a
#                               long generation could run twice, and a retry hides a failing replica;
#   --request-timeout-secs      SERVER_TIMEOUT: SMG's default, 1800 s, would cut a completion a bare
#                               engine finishes under a 3,600 s agent timeout; the agent's own
#                               timeout bounds a completion, and none outlives the server;
#   --worker-startup-timeout-secs READY_TIMEOUT, as make serve waits;
#   --health-check-timeout-secs 30  sglang's /health runs a one-token generation and may take up to
#                               20 s under load (SGLANG_HEALTH_CHECK_TIMEOUT); SMG's 5 s would mark a
#                               busy replica unhealthy;
#   --disable-circuit-breaker   with retries off, an open breaker turns a replica's errors into fast
#                               503s, which harbor counts as infra errors of trials the engine could run;
#   --disable-worker-overload-protection  its defaults (8 waiting, KV 80% full) send a long agent
#                               turn away from the replica holding its prefix; the sandboxes, not the
#                               replicas, bind this load (docs/plan.md).
# SMG 1.13.0's own parser reads this command in the tests (tests/test_dp_server.py). The router
# parses no reasoning or tool call in http mode: the engines do, with the profile's flags.
dp_command() {
  local -n _dp=$1
  shift
  local requirement request_timeout
  requirement=$(gateway_requirement) ||
    die "${GATEWAY_RECORD:-env/gateway-smg.json} is not the gateway record (package, version, sha256) the data-parallel command installs: restore it (git checkout env/gateway-smg.json)"
  request_timeout=$(duration_seconds "$SERVER_TIMEOUT")
  _dp=(bash -c "$DP_SCRIPT" dp-server "$requirement" "$SERVER_DP" "$SERVER_TP" "$((PORT + DP_PORT_OFFSET))" "$PORT"
    "$READY_TIMEOUT" "$request_timeout" "$DP_POLL" -- "$@")
}
