#!/usr/bin/env bats
# make status (scripts/status.sh) through the real hf CLI against the fake HF Jobs API.

# bats file_tags=e2e
setup() {
  load test_helper
  load fakes/fakes
  common_setup
  fakes_setup
  export JOBS_DIR="$BATS_TEST_TMPDIR/jobs"
  # The run's watchdog, as make serve installs it beside the server (scripts/lib-watchdog.sh), with
  # the instance write_server_state records.
  WATCHDOG_JSON="{\"wd1\": {\"labels\": {\"project\": \"terminal-bench-harness\", \"run\": \"qwen-t2\", \"instance\": \"$FAKE_INSTANCE\", \"role\": \"watchdog\"}, \"schedule\": \"*/15 * * * *\"}}"
}

teardown() { stop_fakes; }

readonly JOB_NAME_T2=qwen3_8-27b-fp8-terminus2-tb21-full-v2

ago() { jq -rn --argjson s "$1" 'now - $s | strftime("%Y-%m-%dT%H:%M:%S.000Z")'; }

# jobs_api STAGE UP_SECONDS [EXTRA_JOBS_JSON [JOB1_JSON [SCHEDULED_JSON]]]: job1 is qwen-t2's
# server, up that long, guarded by its watchdog wd1 (or SCHEDULED_JSON's).
jobs_api() {
  start_fake_hf_jobs "$(jq -n --arg stage "$1" --arg created "$(ago "$2")" --argjson extra "${3:-{\}}" \
    --argjson job1 "${4:-{\}}" --argjson scheduled "${5:-$WATCHDOG_JSON}" --arg instance "$FAKE_INSTANCE" \
    '{jobs: ({job1: ({stages: [$stage], flavor: "h200", port: 30000, created_at: $created,
      labels: {project: "terminal-bench-harness", run: "qwen-t2", instance: $instance}} + $job1)} + $extra),
      scheduled_jobs: $scheduled}')"
}

@test "status: a running, ready server: stage, endpoint health, price, time up and cost" {
  jobs_api RUNNING 600
  start_fake_openai
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=qwen-t2 run "$REPO/scripts/status.sh"

  assert_success
  assert_line "run       qwen-t2"
  assert_line "job       alice/job1  $HF_ENDPOINT/jobs/alice/job1"
  assert_line "stage     RUNNING"
  assert_line "endpoint  $FAKE_OPENAI_BASE  (/health 200, ready)"
  assert_line --regexp "^flavor    h200  \\\$5\\.00/h \\+ \\\$0\\.01/h exposed port \\(prices: hf jobs hardware, read [0-9T:-]+Z\\)$"
  assert_line --regexp '^up        10m0[0-9]s running \(HF'"'"'s durations.running_secs\), created .*, about \$0\.8[0-9] so far$'
  assert_line "watchdog  alice/wd1, every 15m (*/15 * * * *): no check yet"
  refute_output --partial warning
  refute_output --partial "$FAKE_TOKEN"
}

@test "status: the server's last heartbeat, and the watchdog's last check and verdict" {
  local beat checked
  beat=$(($(date +%s) - 3000)) checked=$(($(date +%s) - 600))
  jobs_api RUNNING 600 '{}' "$(jq -n --arg hb "$beat" --arg i "$FAKE_INSTANCE" '{labels: {project: "terminal-bench-harness", run: "qwen-t2", instance: $i, role: "server", heartbeat: $hb}}')" \
    "$(jq -n --arg c "$checked" --arg i "$FAKE_INSTANCE" '{wd1: {labels: {project: "terminal-bench-harness", run: "qwen-t2", instance: $i, role: "watchdog", checked: $c, verdict: "held"}, schedule: "*/15 * * * *"}}')"
  start_fake_openai
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=qwen-t2 run "$REPO/scripts/status.sh"

  assert_success
  assert_line --regexp '^held      last heartbeat 5[01]m[0-9]{2}s ago \(written every 5m while a verb holds the run\)$'
  assert_line --regexp '^watchdog  alice/wd1, every 15m \(\*/15 \* \* \* \*\): last check 1[01]m[0-9]{2}s ago: held$'
  refute_output --partial warning
}

@test "status: a server the watchdog cancelled shows the verdict it left on the server's labels" {
  local checked=$(($(date +%s) - 1800))
  jobs_api CANCELED 7200 '{}' "$(jq -n --arg c "$checked" --arg i "$FAKE_INSTANCE" '{labels: {project: "terminal-bench-harness", run: "qwen-t2", instance: $i, role: "server", watchdog_verdict: "cancelled", watchdog_checked: $c}}')" '{}'
  write_server_state qwen-t2 job1 "http://127.0.0.1:9/v1"

  RUN=qwen-t2 run "$REPO/scripts/status.sh"

  assert_success
  assert_line --regexp '^watchdog  cancelled this server 3[01]m[0-9]{2}s ago: nothing had held the run for WATCHDOG_GRACE and no trial was under way \(its last check; then it removed itself\)$'
  assert_line "billing   stopped"
}

@test "status: a live server no watchdog guards is warned of; with WATCHDOG=0 it is said, not warned" {
  jobs_api RUNNING 600 '{}' '{}' '{}'
  start_fake_openai
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=qwen-t2 run "$REPO/scripts/status.sh"
  assert_success
  assert_line "watchdog  none"
  assert_line "status: warning: no watchdog guards this server (its installation failed, or it was removed): if everything that should stop it dies, only its --timeout does. make serve installs one; make stop RUN=qwen-t2 when done"

  RUN=qwen-t2 WATCHDOG=0 run "$REPO/scripts/status.sh"
  assert_success
  assert_line "watchdog  none (WATCHDOG=0)"
  refute_output --partial warning
}

@test "status: a --timeout HF recorded shorter than the one asked for is warned of" {
  # Asked for 4d (server.json); HF's answer about the job holds 24 h.
  jobs_api RUNNING 600 '{}' '{"timeout_secs": 86400}'
  start_fake_openai
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"
  jq '.timeout = "4d"' "$STATE_ROOT/qwen-t2/server.json" >"$BATS_TEST_TMPDIR/s" && mv "$BATS_TEST_TMPDIR/s" "$STATE_ROOT/qwen-t2/server.json"

  RUN=qwen-t2 run "$REPO/scripts/status.sh"
  assert_success
  assert_line "status: warning: HF recorded a --timeout of 24h00m for job alice/job1, less than the 4d (SERVER_TIMEOUT) asked for: HF stops it sooner, and what still runs then fails. make doctor CHECK_TIMEOUT=1 RUN=qwen-t2 checks what HF keeps"

  # What HF kept is no news.
  stop_fakes
  jobs_api RUNNING 600 '{}' '{"timeout_secs": 345600}'
  start_fake_openai
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"
  jq '.timeout = "4d"' "$STATE_ROOT/qwen-t2/server.json" >"$BATS_TEST_TMPDIR/s" && mv "$BATS_TEST_TMPDIR/s" "$STATE_ROOT/qwen-t2/server.json"
  RUN=qwen-t2 run "$REPO/scripts/status.sh"
  assert_success
  refute_output --partial warning
}

@test "status: up past IDLE_WARN_AFTER with no bench activity warns that it bills for nothing" {
  jobs_api RUNNING 7200
  start_fake_openai
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=qwen-t2 run "$REPO/scripts/status.sh"

  assert_success
  assert_output --partial "warning: the server has been up 2h00m and looks idle: nothing under $JOBS_DIR/$JOB_NAME_T2* changed in 30m00s and no other job labelled run=qwen-t2 is running. It bills \$5.00/h until stopped: make stop RUN=qwen-t2"
  [ "$(jq -sc '[.[] | select(.path == "/api/jobs/alice") | .query]' "$FAKE_HF_RECORD")" = "[{\"stage\":[\"RUNNING\",\"SCHEDULING\"],\"label\":[\"project=terminal-bench-harness\",\"run=qwen-t2\",\"instance=$FAKE_INSTANCE\"]}]" ]
}

@test "status: a bench writing under the run's job dir is activity, not idleness" {
  jobs_api RUNNING 7200
  start_fake_openai
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"
  mkdir -p "$JOBS_DIR/$JOB_NAME_T2/task__abc"
  touch "$JOBS_DIR/$JOB_NAME_T2/task__abc/trial.log"

  RUN=qwen-t2 run "$REPO/scripts/status.sh"

  assert_success
  assert_line "bench     files under $JOBS_DIR/$JOB_NAME_T2* changed in the last 30m"
  refute_output --partial "looks idle"
}

@test "status: another running job of the run (a remote bench) is activity" {
  # Another checkout's bench of a run of the same name is not this run's activity.
  jobs_api RUNNING 7200 "{\"bench1\": {\"stages\": [\"RUNNING\"], \"flavor\": \"cpu-upgrade\", \"labels\": {\"project\": \"terminal-bench-harness\", \"run\": \"qwen-t2\", \"instance\": \"$FAKE_INSTANCE\"}},
    \"bench9\": {\"stages\": [\"RUNNING\"], \"flavor\": \"cpu-upgrade\", \"labels\": {\"project\": \"terminal-bench-harness\", \"run\": \"qwen-t2\", \"instance\": \"ffffffffffffffff\"}}}"
  start_fake_openai
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=qwen-t2 run "$REPO/scripts/status.sh"

  assert_success
  assert_line "bench     1 other running job(s) labelled run=qwen-t2"
  refute_output --partial "looks idle"
}

@test "status: a server past its own --timeout is flagged: HF enforces it late" {
  jobs_api RUNNING 7200
  start_fake_openai
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"
  jq '.timeout = "1h"' "$STATE_ROOT/qwen-t2/server.json" >"$BATS_TEST_TMPDIR/s" && mv "$BATS_TEST_TMPDIR/s" "$STATE_ROOT/qwen-t2/server.json"

  RUN=qwen-t2 IDLE_WARN_AFTER=86400 run "$REPO/scripts/status.sh"

  assert_success
  assert_output --partial "warning: job alice/job1 has outlived its timeout (1h): HF enforces job timeouts late, so it keeps billing. make stop RUN=qwen-t2"
  assert_line --regexp '^up        2h00m running .*\(timeout 1h\)$'
}

@test "status: a stopped server says it no longer bills, and its endpoint is not called" {
  jobs_api CANCELED 7200
  start_fake_openai
  write_server_state qwen-t2 job1 "$FAKE_OPENAI_BASE"

  RUN=qwen-t2 run "$REPO/scripts/status.sh"

  assert_success
  assert_line "stage     CANCELED"
  assert_line "billing   stopped"
  [ ! -s "$FAKE_OPENAI_RECORD" ]
}

@test "status: stale state (404), HF unreachable, no token: one clear line each" {
  jobs_api RUNNING 60
  write_server_state qwen-t2 job-gone "http://127.0.0.1:9/v1"
  RUN=qwen-t2 run "$REPO/scripts/status.sh"
  assert_failure 1
  assert_output --partial "the state is stale"

  write_server_state qwen-t2 job1 "http://127.0.0.1:9/v1"
  RUN=qwen-t2 HF_ENDPOINT=http://127.0.0.1:9 run "$REPO/scripts/status.sh"
  assert_failure 1
  assert_output --regexp "^status: hf jobs inspect: cannot reach the HF Jobs API at http://127.0.0.1:9 \(httpx2.ConnectError: .*\): check the network \(or HF_ENDPOINT\), then retry$"

  local calls_before
  calls_before=$(wc -l <"$FAKE_HF_RECORD")
  RUN=qwen-t2 HF_TOKEN= run "$REPO/scripts/status.sh"
  assert_failure 1
  assert_output --partial "no HF token"
  [ "$(wc -l <"$FAKE_HF_RECORD")" -eq "$calls_before" ]
}

@test "status: a remote supervisor shows its stage, where its progress is, and the run's live servers" {
  local labels="\"project\": \"terminal-bench-harness\", \"run\": \"qwen-t2\", \"instance\": \"$FAKE_INSTANCE\""
  start_fake_hf_jobs "{\"jobs\": {
    \"sup1\": {\"stages\": [\"RUNNING\"], \"flavor\": \"cpu-upgrade\", \"labels\": {$labels, \"role\": \"supervisor\"}},
    \"srv1\": {\"stages\": [\"RUNNING\"], \"flavor\": \"h200\", \"labels\": {$labels, \"role\": \"server\"}},
    \"other\": {\"stages\": [\"RUNNING\"], \"flavor\": \"h200\", \"labels\": {\"project\": \"terminal-bench-harness\", \"run\": \"gptoss-t2\", \"role\": \"server\"}}}}"
  mkdir -p "$STATE_ROOT/qwen-t2"
  printf '%s\n' "$FAKE_INSTANCE" >"$STATE_ROOT/qwen-t2/instance"
  jq -n '{run: "qwen-t2", role: "supervisor", job_id: "sup1", namespace: "alice", bucket: "alice/tb",
    state: "hf://buckets/alice/tb/state/qwen-t2"}' >"$STATE_ROOT/qwen-t2/supervisor.json"
  RUN=qwen-t2 run "$REPO/scripts/status.sh"
  assert_success
  assert_line --regexp '^supervisor alice/sup1( |$)'
  assert_line "stage     RUNNING"
  assert_line "progress  hf://buckets/alice/tb/state/qwen-t2/reproduce.json (make pull RUN=qwen-t2 brings the job dirs home; hf jobs logs -f alice/sup1 follows it)"
  assert_line "servers   srv1 "
  assert_line "status: make stop RUN=qwen-t2 stops the supervisor, then its servers"
  [ "$(count_requests "$FAKE_HF_RECORD" POST /api/jobs/alice/sup1/cancel)" -eq 0 ]
}

@test "status: time up is HF's durations.running_secs, not the local clock; the endpoint is HF's expose_urls" {
  start_fake_openai
  # Created 5 h ago, yet HF says it has run 10 minutes (it waited for a GPU); HF reports its
  # endpoint (status.expose_urls), while serve recorded the hand-built one.
  start_fake_hf_jobs "$(jq -n --arg created "$(ago 18000)" --arg url "${FAKE_OPENAI_BASE%/v1}" --argjson wd "$WATCHDOG_JSON" \
    --arg instance "$FAKE_INSTANCE" '{jobs: {job1: {
    stages: ["RUNNING"], flavor: "h200", port: 30000, created_at: $created, running_secs: 600, expose_url: $url,
    labels: {project: "terminal-bench-harness", run: "qwen-t2", instance: $instance}}}, scheduled_jobs: $wd}')"
  write_server_state qwen-t2 job1 "https://job1--30000.hf.jobs/v1"

  RUN=qwen-t2 run "$REPO/scripts/status.sh"

  assert_success
  assert_line --regexp "^up        10m00s running \\(HF's durations.running_secs\\), created .*, about \\\$0\\.8[34] so far$"
  assert_line "endpoint  $FAKE_OPENAI_BASE  (/health 200, ready)"
}
