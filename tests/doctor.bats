#!/usr/bin/env bats
# make doctor (scripts/doctor.sh): the token checked with HF itself through the real `hf`
# (a loopback fake of the HF API that accepts it, one that answers 401, and no HF at all),
# and a Docker engine for a run on ENV_TYPE=docker (runs/qwen-tb3-smoke.env). No output
# may ever hold the token.

setup() {
  load test_helper
  load fakes/fakes
  common_setup
  fakes_setup
  # git-lfs need only be found (its filter is configured by common_setup): a stub stands in.
  export STUB_LOG="$BATS_TEST_TMPDIR/stub.log"
  mkdir -p "$BATS_TEST_TMPDIR/bin"
  ln -s "$REPO/tests/stubs/record-argv" "$BATS_TEST_TMPDIR/bin/git-lfs"
  export PATH="$BATS_TEST_TMPDIR/bin:$REPO/.venv/bin:$PATH"
}

teardown() { stop_fakes; }

# The token, and no HF to check it with: the path a machine without network takes.
use_unreachable_hf() { export HF_TOKEN=$FAKE_TOKEN HF_ENDPOINT=http://127.0.0.1:1; }

readonly DOCKER_FIX="        fix: install Docker and start it, or use ENV_TYPE=hf-sandbox"

# PATH without any directory that holds a docker.
path_without_docker() {
  local dir dirs out=""
  IFS=: read -ra dirs <<<"$PATH"
  for dir in "${dirs[@]}"; do
    [[ -x "$dir/docker" ]] || out+="${out:+:}$dir"
  done
  printf '%s' "$out"
}

# stub_docker RC [STDERR]: a docker whose `docker info` exits RC, saying STDERR.
stub_docker() {
  printf '#!/usr/bin/env bash\nprintf "%%s\\n" "$*" >>"%s/docker.calls"\nprintf "%%s\\n" %q >&2\nexit %s\n' \
    "$BATS_TEST_TMPDIR" "${2:-}" "$1" >"$BATS_TEST_TMPDIR/bin/docker"
  chmod +x "$BATS_TEST_TMPDIR/bin/docker"
}

@test "doctor: a token HF accepts is ok, with the account it belongs to" {
  start_fake_hf_jobs '{"namespace": "alice"}'
  run "$REPO/scripts/doctor.sh"
  assert_success
  assert_line "  ok    HF token present (HF_TOKEN)"
  assert_line "  ok    HF token accepted (whoami: alice)"
  refute_output --partial "$FAKE_TOKEN"
  # The real hf asked HF, once, with the token in its Authorization header.
  [ "$(count_requests "$FAKE_HF_RECORD" GET /api/whoami-v2)" = 1 ]
  [ "$(jq -r 'select(.path == "/api/whoami-v2") | .auth' "$FAKE_HF_RECORD")" = true ]
}

@test "doctor: a token HF rejects (401) fails with its fix" {
  start_fake_hf_jobs '{"reject_token": true}'
  run "$REPO/scripts/doctor.sh"
  assert_failure
  assert_output --partial $'  FAIL  HF rejected the token (401/403): it is invalid, expired or revoked\n        fix: hf auth login\n'
  refute_line --partial "HF token accepted"
  assert_line "doctor: 1 check(s) failed; fix them and run make doctor again"
  refute_output --partial "$FAKE_TOKEN"
  [ "$(count_requests "$FAKE_HF_RECORD" GET /api/whoami-v2)" = 1 ]
}

@test "doctor: HF unreachable is a note, not a failure" {
  use_unreachable_hf
  run "$REPO/scripts/doctor.sh"
  assert_success
  assert_line "  note  could not check the token: HF unreachable (httpx2.ConnectError: [Errno 111] Connection refused, at http://127.0.0.1:1)"
  refute_output --partial "FAIL"
  refute_output --partial "Traceback"
  refute_output --partial "$FAKE_TOKEN"
}

@test "doctor: no token, no whoami: the missing token is the one failure" {
  start_fake_hf_jobs '{"namespace": "alice"}'
  HF_TOKEN='' run "$REPO/scripts/doctor.sh"
  assert_failure
  assert_line "  FAIL  no HF token: the server job, the endpoint and the sandboxes need one"
  refute_line --partial "whoami"
  assert_line "doctor: 1 check(s) failed; fix them and run make doctor again"
  [ "$(count_requests "$FAKE_HF_RECORD" GET /api/whoami-v2)" = 0 ]
}

@test "doctor: a docker run without docker fails with the fix" {
  use_unreachable_hf
  local path
  path=$(path_without_docker)
  run env PATH="$path" bash -c 'command -v docker'
  assert_failure
  PATH=$path RUN=qwen-tb3-smoke run "$REPO/scripts/doctor.sh"
  assert_failure
  assert_line --index 0 "doctor (all, run qwen-tb3-smoke):"
  assert_line "  FAIL  run 'qwen-tb3-smoke' uses ENV_TYPE=docker, and docker is not installed"
  assert_line "$DOCKER_FIX"
  assert_line "doctor: 1 check(s) failed; fix them and run make doctor again"
  refute_output --partial "$FAKE_TOKEN"
}

@test "doctor: a docker run whose engine does not answer fails, saying what docker said" {
  use_unreachable_hf
  stub_docker 1 "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"
  RUN=qwen-tb3-smoke run "$REPO/scripts/doctor.sh" bench
  assert_failure
  assert_line "  FAIL  run 'qwen-tb3-smoke' uses ENV_TYPE=docker, and no Docker engine answers (docker info: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?)"
  assert_line "$DOCKER_FIX"
  [ "$(cat "$BATS_TEST_TMPDIR/docker.calls")" = info ]
}

@test "doctor: a docker run with an engine that answers is ok; the run comes from state/last-run" {
  use_unreachable_hf
  stub_docker 0
  mkdir -p "$STATE_ROOT"
  echo qwen-tb3-smoke >"$STATE_ROOT/last-run"
  run "$REPO/scripts/doctor.sh"
  assert_success
  assert_line "doctor: RUN not given; using the last run, qwen-tb3-smoke (state/last-run)"
  assert_line "  ok    Docker engine answers (run 'qwen-tb3-smoke' uses ENV_TYPE=docker)"
}

@test "doctor: the fix works: ENV_TYPE=hf-sandbox on the command line needs no docker" {
  use_unreachable_hf
  PATH=$(path_without_docker) RUN=qwen-tb3-smoke ENV_TYPE=hf-sandbox run "$REPO/scripts/doctor.sh"
  assert_success
  refute_output --partial "Docker"
}

@test "doctor without a run keeps its general checks: no docker check" {
  use_unreachable_hf
  PATH=$(path_without_docker) run "$REPO/scripts/doctor.sh"
  assert_success
  assert_line --index 0 "doctor (all):"
  refute_output --partial "Docker"
  refute_output --partial "docker"
}

@test "doctor with an unknown RUN says so in one line and checks nothing" {
  RUN=no-such-run run "$REPO/scripts/doctor.sh"
  assert_failure
  assert_equal "${#lines[@]}" 1
  assert_output --partial "doctor: unknown run 'no-such-run'. Known runs: "
  assert [ ! -e "$STATE_ROOT/last-run" ]
}

@test "bench of a docker run without docker stops at the doctor before harbor runs" {
  use_stubs
  export HF_TOKEN=$FAKE_TOKEN
  PATH=$(path_without_docker) RUN=qwen-tb3-smoke API_BASE=$TEST_ENDPOINT run "$REPO/scripts/bench.sh"
  assert_failure
  assert_line "  FAIL  run 'qwen-tb3-smoke' uses ENV_TYPE=docker, and docker is not installed"
  assert_line "$DOCKER_FIX"
  run grep -c -x '== harbor' "$STUB_LOG"
  assert_output 0
  # Nothing recorded: no manifest line, and the failed bench is not the remembered run.
  assert [ ! -e "$STATE_ROOT/qwen-tb3-smoke/manifest.jsonl" ]
  assert [ ! -e "$STATE_ROOT/last-run" ]
}

# gateway_line: the doctor's line about the run's gateway, ok or FAIL with its fix.
gateway_line() { grep -A1 -E "^  (ok|FAIL) .*(gateway|SMG)" <<<"$output"; }

@test "doctor: a data-parallel run's gateway wheel is checked offline against its recorded contents, for nothing" {
  use_unreachable_hf
  run env RUN=qwen-t2-leaderboard-h200x4 "$REPO/scripts/doctor.sh"
  assert_line "  ok    run 'qwen-t2-leaderboard-h200x4' serves SERVER_DP=4 replicas through SMG's gateway: the job's command installs smg 1.13.0 (sha256 cfae8171dac6…, hash-checked, no dependency pulled) and the recorded wheel holds smg/launch_router.py smg/router_args.py smg/smg_rs.abi3.so (python3 -m smg.launch_router, SMG as a router only): checked offline against env/gateway-smg.json, recorded from PyPI; no job launched, \$0"
  # A one-GPU run has no gateway to check.
  run env RUN=qwen-t2 "$REPO/scripts/doctor.sh"
  refute_output --partial gateway
  # Nothing was launched or asked beyond the token's check.
  refute grep -qs "jobs" "$STUB_LOG"
}

@test "doctor: a recorded gateway wheel without the module the command runs, or no record, fails with the fix" {
  use_unreachable_hf
  local record="$BATS_TEST_TMPDIR/gateway.json"
  # The wheel as a release that dropped smg/launch_router.py would be (as 1.13.0 has no smg/launch_server.py).
  jq '.files -= ["smg/launch_router.py"]' "$REPO/env/gateway-smg.json" >"$record"
  run env RUN=qwen-t2-leaderboard-h200x4 GATEWAY_RECORD="$record" "$REPO/scripts/doctor.sh"
  assert_failure
  run gateway_line
  assert_output "  FAIL  run 'qwen-t2-leaderboard-h200x4': the gateway wheel recorded in $record lacks smg/launch_router.py, so python3 -m smg.launch_router would fail in the job after the GPUs are paid for
        fix: restore it (git checkout env/gateway-smg.json), or record the wheel again as docs/data-parallel.md §2 says"
  # A record with no sha256 of 64 hex digits is no pin.
  jq '.sha256 = "cfae"' "$REPO/env/gateway-smg.json" >"$record"
  run env RUN=qwen-t2-leaderboard-h200x4 GATEWAY_RECORD="$record" "$REPO/scripts/doctor.sh"
  assert_failure
  assert_line "  FAIL  run 'qwen-t2-leaderboard-h200x4' serves SERVER_DP=4 replicas through SMG's gateway, and $record is not its record (package, version, sha256)"
}

# check_timeout CAP: make doctor CHECK_TIMEOUT=1 for qwen-t2 (SERVER_TIMEOUT=4d), HF recording a
# job's timeout as at most CAP seconds (none: as asked).
check_timeout() {
  start_fake_hf_jobs "$(jq -n --argjson cap "${1:-null}" '{namespace: "alice", new_job: {id: "probe1"}} + (if $cap then {timeout_cap: $cap} else {} end)')"
  RUN=qwen-t2 CHECK_TIMEOUT=1 run "$REPO/scripts/doctor.sh"
}

@test "doctor CHECK_TIMEOUT=1: the cheapest job asks for the run's SERVER_TIMEOUT, what HF kept is read back, and it is cancelled" {
  check_timeout
  assert_success
  assert_line "  ...   launching cpu-basic to read back its --timeout 4d (cancelled at once; under a cent)"
  assert_line "  ok    HF kept --timeout 4d (345600 s) on a test job (SERVER_TIMEOUT of run 'qwen-t2')"
  refute_output --partial "$FAKE_TOKEN"
  run jq -c 'select(.method == "POST" and .path == "/api/jobs/alice") | .body | [.flavor, .timeoutSeconds, .labels.role, .labels.project, (.labels | has("run")), .command]' "$FAKE_HF_RECORD"
  assert_output '["cpu-basic",345600,"doctor","terminal-bench-harness",false,["sleep","600"]]'
  [ "$(count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice/probe1/cancel)" -eq 1 ]
  # A paid launch like any other: its intent in the run's manifest before the call, its cancel after,
  # both by its launch label, which the job carries with the run's instance.
  run jq -c '[.event, .role, (.launch_id | test("^[0-9a-f]{16}$")), .job_ids]' "$STATE_ROOT/qwen-t2/manifest.jsonl"
  assert_output $'["launch-intent","doctor",true,null]\n["launch-cancelled","doctor",true,["probe1"]]'
  run jq -r 'select(.method == "POST" and .path == "/api/jobs/alice") | .body.labels | [.launch == $id, .instance == $i] | @tsv' \
    --arg id "$(jq -r .launch_id "$STATE_ROOT/qwen-t2/manifest.jsonl" | head -n1)" --arg i "$(<"$STATE_ROOT/qwen-t2/instance")" "$FAKE_HF_RECORD"
  assert_output $'true\ttrue'
}

@test "doctor CHECK_TIMEOUT=1 DRY_RUN=1 shows the job it would launch and launches, cancels and writes nothing" {
  start_fake_hf_jobs '{"namespace": "alice", "new_job": {"id": "probe1"}}'
  RUN=qwen-t2 CHECK_TIMEOUT=1 DRY_RUN=1 run "$REPO/scripts/doctor.sh"
  assert_line "  ...   dry run: would launch cpu-basic to read back its --timeout 4d, then cancel it (under a cent): hf jobs run --label 'launch=<unique per launch>' --label 'instance=<run instance id>' --detach -q --flavor cpu-basic --timeout 4d --label project=terminal-bench-harness --label role=doctor python:3.12-slim -- sleep 600"
  [ "$(count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice)" -eq 0 ]
  run jq -r 'select(.method != "GET") | .path' "$FAKE_HF_RECORD"
  assert_output ""
  [ ! -e "$STATE_ROOT/qwen-t2" ]
}

@test "doctor CHECK_TIMEOUT=1 refuses while another verb holds the run, and launches nothing" {
  start_fake_hf_jobs '{"namespace": "alice", "new_job": {"id": "probe1"}}'
  mkdir -p "$STATE_ROOT/qwen-t2"
  exec 8>>"$STATE_ROOT/qwen-t2/lock"
  flock -n 8
  RUN=qwen-t2 CHECK_TIMEOUT=1 run "$REPO/scripts/doctor.sh"
  exec 8>&-
  assert_failure 1
  assert_output --partial "doctor: run 'qwen-t2' is busy:"
  [ "$(count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice)" -eq 0 ]
}

@test "doctor CHECK_TIMEOUT=1: a timeout HF cut short fails, with what to plan for" {
  check_timeout 86400
  assert_failure
  assert_line "  FAIL  HF recorded --timeout 4d as 86400 s (24.0 h): the server of run 'qwen-t2' would stop sooner than asked"
  assert_line "        fix: plan for it: SERVER_TIMEOUT=86400s in runs/qwen-t2.env states what HF keeps; make reproduce relaunches a server that ends (MAX_RELAUNCHES) and mop-up retries its unfinished trials"
  [ "$(count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice/probe1/cancel)" -eq 1 ]
}

@test "doctor without CHECK_TIMEOUT launches nothing; CHECK_TIMEOUT=1 without a run says which run it needs" {
  start_fake_hf_jobs '{"namespace": "alice"}'
  RUN=qwen-t2 run "$REPO/scripts/doctor.sh"
  [ "$(count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice)" -eq 0 ]
  CHECK_TIMEOUT=1 run "$REPO/scripts/doctor.sh"
  assert_failure
  assert_line "  FAIL  CHECK_TIMEOUT=1 checks a run's SERVER_TIMEOUT, and no run is named"
  assert_line "        fix: make doctor CHECK_TIMEOUT=1 RUN=<run>"
  [ "$(count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice)" -eq 0 ]
}
