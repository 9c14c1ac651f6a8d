#!/usr/bin/env bats
# Settings that can't surprise: only make's command line overrides the files, an unknown or
# secret KEY=value is refused, every value is checked before anything runs, and nothing a
# user types on make's command line reaches a shell unquoted.

setup() {
  load test_helper
  common_setup
}

# mk ARGS...: make in the repository, as a user types it.
mk() {
  make -C "$REPO" --no-print-directory "$@"
}

# Checksums of what make results and make report write, to prove a dry run wrote nothing.
written_files() {
  (cd "$REPO" && find README.md docs reports -type f 2>/dev/null | LC_ALL=C sort | xargs md5sum)
}

# in_lib CODE: run CODE in bash with lib.sh and argv.sh sourced, from the repository.
in_lib() {
  (cd "$REPO" && bash -c "source scripts/lib.sh; source scripts/argv.sh; $1")
}

# --- 1. only make's command line counts -----------------------------------------------------

@test "under make, a setting your shell exports is ignored, with one note naming it" {
  PORT=1234 JOB_NAME=mine run mk print RUN=qwen-t2
  assert_success
  assert_line "print: ignoring PORT=1234 from your shell's environment: only settings on make's command line count (make print PORT=…)"
  assert_line "print: ignoring JOB_NAME=mine from your shell's environment: only settings on make's command line count (make print JOB_NAME=…)"
  run grep -c "ignoring" <<<"$output"
  assert_output 2
  PORT=1234 JOB_NAME=mine run mk print RUN=qwen-t2
  assert_line "    --expose 30000 \\"
  assert_line "    --job-name qwen3_8-27b-fp8-terminus2-tb21-full-v2 \\"
}

@test "make print's header states which layers count" {
  run mk print RUN=qwen-t2
  assert_success
  assert_line --index 0 "# settings: env/defaults.env < env/servers/qwen3.8-27b-fp8-sglang-h200.env < runs/qwen-t2.env < make's command line (your shell's exported settings are ignored, except DRY_RUN)"
}

@test "under make, the command line wins over the shell, and a shell value equal to the files' is no news" {
  PORT=1234 run mk print RUN=qwen-t2 PORT=2345
  assert_success
  assert_line "    --expose 2345 \\"
  refute_output --partial "ignoring"
  PORT=30000 run mk print RUN=qwen-t2
  assert_success
  refute_output --partial "ignoring"
}

@test "under make, DRY_RUN exported by the shell still counts: a dry run never harms" {
  use_stubs
  DRY_RUN=1 HF_TOKEN=$TEST_TOKEN run mk serve RUN=qwen-t2
  assert_success
  assert_output --partial "hf jobs run --label 'launch=<unique per launch>' --label 'instance=<run instance id>' --detach -q --flavor h200"
  run grep -c -x run "$STUB_LOG"
  assert_output 0
  assert [ ! -e "$STATE_ROOT" ]
}

@test "run directly, a script takes its environment as its command line" {
  PORT=4242 RUN=qwen-t2 run "$REPO/scripts/print.sh"
  assert_success
  assert_line "    --expose 4242 \\"
  refute_output --partial "ignoring"
}

@test "a child a verb starts under make gets exactly the values its parent passes it" {
  # load_settings under make, then a child with a VAR=value prefix, as bench starts probe.sh.
  run in_lib 'export CLI_SETTINGS="RUN"; RUN=qwen-t2; load_settings
    printf "CLI_SETTINGS in the environment: %s\n" "$(env | grep -c "^CLI_SETTINGS=")"
    PORT=4242 RUN=qwen-t2 scripts/print.sh'
  assert_success
  assert_line "CLI_SETTINGS in the environment: 0"
  assert_line "    --expose 4242 \\"
  refute_output --partial "ignoring"
}

# --- 2. unknown and secret names on make's command line -------------------------------------

@test "an unknown KEY=value on make's command line names the closest setting" {
  run mk print RUN=qwen-t2 N_CONCURENT=1
  assert_failure
  assert_line --index 0 "print: unknown setting N_CONCURENT: did you mean N_CONCURRENT? (settings: env/defaults.env)"
  refute_output --partial "# qwen-t2"
  run mk print RUN=qwen-t2 n_concurrent=1
  assert_failure
  assert_line --index 0 "print: unknown setting n_concurrent: did you mean N_CONCURRENT? (settings: env/defaults.env)"
  run mk print RNU=qwen-t2
  assert_failure
  assert_line --index 0 "print: unknown setting RNU: did you mean RUN? (settings: env/defaults.env)"
  run mk print RUN=qwen-t2 COLOUR=red
  assert_failure
  assert_line --index 0 "print: unknown setting COLOUR: neither a setting nor one of RUN RUNS JSON TIMEOUTS JOB_DIR PYTHON STATE_ROOT OUT TASK SERVER_JOB RUN_INSTANCE HTML CAMPAIGN (settings: env/defaults.env)"
}

@test "every verb that loads settings checks the command line, report's verbs too" {
  run mk tally RUN=example-terminus2 TIMEOUT=unscored
  assert_failure
  assert_line --index 0 "tally: unknown setting TIMEOUT: did you mean TIMEOUTS? (settings: env/defaults.env)"
  run mk compare RUSN="example-terminus2 example-mswea"
  assert_failure
  assert_line --index 0 "report: unknown setting RUSN: did you mean RUNS? (settings: env/defaults.env)"
}

@test "a token or key on make's command line is refused: make's argv is visible in ps" {
  run mk print RUN=qwen-t2 HF_TOKEN="$TEST_TOKEN"
  assert_failure
  assert_line --index 0 "print: HF_TOKEN on make's command line sits in make's argv, which every local user can read (ps): export it in your shell instead (export HF_TOKEN=…), or for the HF token run 'hf auth login'"
  refute_output --partial "$TEST_TOKEN"
  run mk print RUN=qwen-t2 OPENAI_API_KEY=sk-not-a-key
  assert_failure
  assert_output --partial "print: OPENAI_API_KEY on make's command line sits in make's argv"
}

@test "the documented non-setting variables pass the command-line check" {
  run mk print RUN=qwen-t2 RUNS=a JSON=0 TIMEOUTS=scored JOB_DIR=x PYTHON=python3 \
    STATE_ROOT="$STATE_ROOT" OUT=o TASK=t
  assert_success
}

# --- 3. values -------------------------------------------------------------------------------

@test "a port outside 1-65535 is refused" {
  RUN=qwen-t2 PORT=70000 run "$REPO/scripts/print.sh"
  assert_failure
  assert_output "print: setting PORT must be a port number, 1 to 65535, or empty, got '70000' (run 'qwen-t2')"
}

@test "every timeout and seconds setting must be more than zero" {
  local name
  for name in READY_TIMEOUT READY_POLL PROBE_TIMEOUT IDLE_WARN_AFTER LOG_TAIL PROBE_MAX_TOKENS; do
    run env RUN=qwen-t2 "$name=0" "$REPO/scripts/print.sh"
    assert_failure
    assert_output "print: setting $name must be a positive whole number below 1000000000, got '0' (run 'qwen-t2')"
    # Past bash's arithmetic it would wrap: READY_TIMEOUT's deadline went negative, the server was cancelled.
    run env RUN=qwen-t2 "$name=99999999999999999999" "$REPO/scripts/print.sh"
    assert_failure
    assert_output "print: setting $name must be a positive whole number below 1000000000, got '99999999999999999999' (run 'qwen-t2')"
  done
  # BENCH_TIMEOUT may be empty: the server's SERVER_TIMEOUT then.
  local -A either=([SERVER_TIMEOUT]="" [BENCH_TIMEOUT]=", or empty")
  for name in SERVER_TIMEOUT BENCH_TIMEOUT; do
    run env RUN=qwen-t2 "$name=0h" "$REPO/scripts/print.sh"
    assert_failure
    assert_output "print: setting $name must be a number with an optional unit s, m, h or d (e.g. 4h), more than zero${either[$name]}, got '0h' (run 'qwen-t2')"
  done
}

@test "duration_seconds is the shell's one duration parser: whole seconds, or nothing and status 1" {
  # A whole number is read in base 10 (0900 is not octal), a fraction rounded to whole seconds.
  run in_lib 'for v in 90 90s 10m 2h 1d 1.5h 2.5m 0 999999999d 0900 010m; do duration_seconds "$v"; echo " $v"; done'
  assert_success
  assert_output $'90 90\n90 90s\n600 10m\n7200 2h\n86400 1d\n5400 1.5h\n150 2.5m\n0 0\n86399999913600 999999999d\n900 0900\n600 010m'
  # Not a duration: nothing printed, status 1 (an awk fallback once read '90min' as 90 and 'abc' as 0).
  run in_lib 'for v in "" h 1w -1h 1e3 "1 h" 1,5h 1111111111 1.5.5 1. 90min " 1h"; do
    out=$(duration_seconds "$v") && echo "accepted '\''$v'\''"; [[ -z "$out" ]] || echo "printed $out for '\''$v'\''"; done; echo checked'
  assert_success
  assert_output checked
}

@test "the shell and the Python tools read a duration alike (scripts/lib-settings.sh, tools/fmt.py)" {
  local v shell python
  for v in 90 90s 10m 2h 1d 1.5h 0 0.25m "" h 1w -1h 1e3 1,5h 1111111111 1. 90min 5M; do
    shell=$(in_lib "duration_seconds '$v'") || shell=none
    python=$(cd "$REPO" && .venv/bin/python -c 'import sys; from tools import fmt; s = fmt.parse_duration(sys.argv[1]); print("none" if s is None else round(s))' "$v")
    [[ "$shell" == "$python" ]] || fail "'$v': the shell reads $shell, tools/fmt.py $python"
  done
}

@test "the manifest and the settings document hold every resolved setting exactly, the last and the empty ones too" {
  # jq 1.6 (Debian 12's) drops the empty strings a split ends with: the NUL-separated pairs once lost
  # the catalogue's last setting, an empty one, from every manifest line.
  local expected
  expected=$(cd "$REPO" && .venv/bin/python -c 'import json
from tools import settings
print(json.dumps(settings.resolve("qwen-t2", {}, settings.catalogue())))')
  assert_equal "$(jq -r 'length' <<<"$expected")" "$(grep -c '^[A-Z][A-Z0-9_]*=' "$REPO/env/defaults.env")"
  run env RUN=qwen-t2 bash -c 'source "$0/scripts/lib.sh"; resolve_run; load_settings; append_manifest test "{}"; settings_document' "$REPO"
  assert_success
  assert_equal "$(jq -cS '.settings' <<<"$output")" "$(jq -cS . <<<"$expected")"
  assert_equal "$(jq -r '.run' <<<"$output")" qwen-t2
  assert_equal "$(jq -cS '.settings' "$STATE_ROOT/qwen-t2/manifest.jsonl")" "$(jq -cS . <<<"$expected")"
}

@test "venv_version reads an installed package's version from its METADATA, as importlib.metadata does, and nothing else" {
  # .venv's own packages: what its Python says; a package not installed: nothing.
  run in_lib 'printf "%s|" "$(venv_version harbor)" "$(venv_version huggingface_hub)" "$(venv_version not_installed)"'
  assert_output "$(cd "$REPO" && .venv/bin/python -c 'import importlib.metadata as m; print(m.version("harbor"), m.version("huggingface_hub"), "", sep="|", end="|")')"
  # Only a Version line among the headers, and only a version: never a control character, never
  # more than 64 characters (what it reads goes into the manifest and the doctor's lines).
  local site="$BATS_TEST_TMPDIR/root/.venv/lib/python3.12/site-packages"
  mkdir -p "$site"/{good,escape,long,body}-1.dist-info
  printf 'Metadata-Version: 2.1\nName: good\nVersion: 1.2.3rc1+local\n\nVersion: 9\n' >"$site/good-1.dist-info/METADATA"
  printf 'Name: escape\nVersion: 1.0\033[2J\n' >"$site/escape-1.dist-info/METADATA"
  printf 'Name: long\nVersion: %s\n' "$(printf '1%.0s' {1..65})" >"$site/long-1.dist-info/METADATA"
  printf 'Name: body\n\nVersion: 1.0\n' >"$site/body-1.dist-info/METADATA"
  # lib.sh and the libraries it sources itself.
  mkdir "$BATS_TEST_TMPDIR/root/scripts" && cp "$REPO"/scripts/lib{,-print,-settings,-instance,-manifest}.sh "$BATS_TEST_TMPDIR/root/scripts/"
  run bash -c 'source "$1/scripts/lib.sh"; for p in good escape long body; do printf "%s|" "$(venv_version "$p")"; done' _ "$BATS_TEST_TMPDIR/root"
  assert_output '1.2.3rc1+local||||'
}

@test "MAX_INFRA_RATE is a fraction from 0 to 1, both ends included" {
  # Its type in env/defaults.env, number 0..1, checked by load_settings for every verb.
  local value
  for value in 0 1 0.3 .5 1.0 0.999; do
    MAX_INFRA_RATE=$value run in_lib 'RUN=qwen-t2; load_settings && echo accepted'
    assert_success
    assert_output accepted
  done
  for value in 1.5 1.01 2 -0 30% 0,3; do
    MAX_INFRA_RATE=$value run in_lib 'RUN=qwen-t2; load_settings && echo accepted'
    assert_failure
    assert_output "bash: setting MAX_INFRA_RATE must be a fraction from 0 to 1 (e.g. 0.3), got '$value' (run 'qwen-t2')"
  done
  MAX_INFRA_RATE='' run in_lib 'RUN=qwen-t2; load_settings && echo accepted'
  assert_failure
  assert_output "bash: setting MAX_INFRA_RATE is empty for run 'qwen-t2': it must be a fraction from 0 to 1 (e.g. 0.3). Set it in runs/qwen-t2.env, or on the command line: MAX_INFRA_RATE=…"
}

@test "flags are 0 or 1, and WHERE is local or hf" {
  local name
  for name in AUTO_STOP KEEP_SERVER PROBE FOLLOW ALL DRY_RUN; do
    run env RUN=qwen-t2 "$name=yes" "$REPO/scripts/print.sh"
    assert_failure
    assert_output "print: setting $name must be 0 or 1, got 'yes' (run 'qwen-t2')"
  done
  RUN=qwen-t2 WHERE=mars run "$REPO/scripts/print.sh"
  assert_failure
  assert_output "print: setting WHERE must be one of local, hf, got 'mars' (run 'qwen-t2')"
}

@test "ENV_TYPE must be an environment the pinned harbor knows, or a module:Class path" {
  RUN=qwen-t2 ENV_TYPE=dokcer run "$REPO/scripts/print.sh"
  assert_failure
  assert_output --partial "print: setting ENV_TYPE must be an environment harbor 0.26.0 knows or a module:Class import path, got 'dokcer': did you mean docker? (known: docker "
  RUN=qwen-t2 ENV_TYPE=tests.harbor_env.scripted_env:ScriptedEnv run "$REPO/scripts/print.sh"
  assert_success
  assert_line "    --env tests.harbor_env.scripted_env:ScriptedEnv \\"
}

@test "the ENV_TYPE list is harbor's own EnvironmentType enum (a harbor upgrade that changes it fails here)" {
  local ours harbors
  ours=$(cd "$REPO" && .venv/bin/python -c 'from tools.settings_types import HARBOR_ENV_TYPES; print("\n".join(HARBOR_ENV_TYPES))' | LC_ALL=C sort)
  harbors=$("$REPO/.venv/bin/python" -c '
from harbor.models.environment_type import EnvironmentType
print("\n".join(e.value for e in EnvironmentType))' | LC_ALL=C sort)
  assert [ -n "$ours" ]
  assert_equal "$ours" "$harbors"
}

@test "REASONING_EFFORT must be one the agent accepts" {
  RUN=qwen-t2 REASONING_EFFORT=hgih run "$REPO/scripts/print.sh"
  assert_failure
  assert_output "print: setting REASONING_EFFORT must be one of none minimal low medium high xhigh max default (what terminus-2 accepts), got 'hgih' (run 'qwen-t2')"
  RUN=qwen-mswea REASONING_EFFORT=hgih run "$REPO/scripts/print.sh"
  assert_failure
  assert_output --partial "(what mini-swe-agent accepts), got 'hgih'"
  RUN=qwen-t2 AGENT=oracle run "$REPO/scripts/print.sh"
  assert_failure
  assert_output "print: setting REASONING_EFFORT must be empty for AGENT=oracle: it calls no model, and harbor refuses the kwarg, got 'low' (run 'qwen-t2')"
  RUN=qwen-mswea REASONING_EFFORT=high run "$REPO/scripts/print.sh"
  assert_success
  assert_output --partial "--ak reasoning_effort=high"
}

@test "the REASONING_EFFORT list is what the pinned harbor's agents accept" {
  local ours theirs
  ours=$(cd "$REPO" && .venv/bin/python -c 'from tools.settings_rules import REASONING_EFFORTS; print(" ".join(REASONING_EFFORTS))')
  theirs=$("$REPO/.venv/bin/python" -c '
import typing, inspect, litellm
from harbor.agents.terminus_2.terminus_2 import Terminus2Options
from harbor.agents.installed.mini_swe_agent import MiniSweAgentOptions
from harbor.agents.oracle import OracleAgent

def literal(annotation):
    (lit,) = [a for a in typing.get_args(annotation) if typing.get_origin(a) is typing.Literal]
    return list(typing.get_args(lit))

t2 = literal(Terminus2Options.model_fields["reasoning_effort"].annotation)
# mini-swe-agent types it str and hands it to LiteLLM completion(reasoning_effort=...).
assert MiniSweAgentOptions.model_fields["reasoning_effort"].annotation == (str | None)
llm = literal(inspect.signature(litellm.completion).parameters["reasoning_effort"].annotation)
assert llm == t2, (llm, t2)
assert not OracleAgent.capabilities.reasoning_effort
print(" ".join(t2))')
  assert_equal "$ours" "$theirs"
}

@test "API_BASE must be an http(s) URL ending in /v1 with no placeholder, for every verb that takes it" {
  local bad
  for bad in 'https://<job_id>--30000.hf.jobs/v1' 'https://x--30000.hf.jobs' 'ftp://x--30000.hf.jobs/v1' \
    'https://x--30000.hf.jobs/.../v1' 'https://{job}--30000.hf.jobs/v1' 'https://x y/v1'; do
    RUN=qwen-t2 API_BASE=$bad run "$REPO/scripts/print.sh"
    assert_failure
    assert_output "print: setting API_BASE must be the server's http(s) URL ending in /v1, with no placeholder left in it (e.g. https://abc123--30000.hf.jobs/v1), or empty, got '$bad' (run 'qwen-t2')"
  done
  run in_lib "unset API_BASE; RUN=qwen-t2; load_settings && API_BASE=$TEST_ENDPOINT/ load_settings && echo ok"
  assert_success
  assert_output ok
}

# --- 4. mini-swe-agent on local Docker -------------------------------------------------------

# make check: tests/test_no_secret_in_argv.py's refusals, by class and by default (docs/tests.md §1).
# bats test_tags=full
@test "mini-swe-agent on an environment that puts its key in a local argv is refused, by class not by name" {
  local env_type cls argv
  while IFS='|' read -r env_type cls argv; do
    RUN=qwen-mswea ENV_TYPE=$env_type run "$REPO/scripts/print.sh"
    assert_failure
    assert_output "print: run 'qwen-mswea': mini-swe-agent on ENV_TYPE=$env_type is refused: $cls runs '$argv', so its key (OPENAI_API_KEY=<token>) would sit in a local process's argv, readable by every local user (ps). Use ENV_TYPE=hf-sandbox, or AGENT=terminus-2 (it calls the model from harbor's own process)"
  done <<'ENVS'
docker|harbor.environments.docker.docker:DockerEnvironment (a DockerEnvironment)|docker compose ... exec -e KEY=value
podman|harbor.environments.podman:PodmanEnvironment (a DockerEnvironment)|docker compose ... exec -e KEY=value
kata|harbor.environments.kata:KataEnvironment (a DockerEnvironment)|docker compose ... exec -e KEY=value
harbor.environments.docker.docker:DockerEnvironment|harbor.environments.docker.docker:DockerEnvironment (a DockerEnvironment)|docker compose ... exec -e KEY=value
sbx|harbor.environments.sbx.environment:DockerSandboxesEnvironment (a DockerSandboxesEnvironment)|docker sandbox exec --env KEY=value
apple-container|harbor.environments.apple_container:AppleContainerEnvironment (a AppleContainerEnvironment)|container exec -e KEY=value
ec2|harbor.environments.ec2:EC2Environment (a EC2Environment)|ssh ... docker compose exec -e KEY=value
openshift|harbor.environments.openshift:OpenshiftEnvironment (a OpenshiftEnvironment)|oc exec POD ... -- bash -c 'export KEY=value && ...'
ENVS
  # Default-deny: an environment not read and found to keep the key out of argv is refused too.
  RUN=qwen-mswea ENV_TYPE=modal run "$REPO/scripts/print.sh"
  assert_failure
  assert_output "print: run 'qwen-mswea': mini-swe-agent on ENV_TYPE=modal is refused: harbor.environments.modal:ModalEnvironment is not an environment known to keep its key (OPENAI_API_KEY=<token>) out of every local process's argv (only ENV_TYPE=hf-sandbox is: tools/hub/environments.py says why). Use ENV_TYPE=hf-sandbox, or AGENT=terminus-2 (it calls the model from harbor's own process)"
  # An import path that cannot be loaded cannot be checked: refused too, naming why.
  RUN=qwen-mswea ENV_TYPE=no_such_module:Env run "$REPO/scripts/print.sh"
  assert_failure
  assert_output "print: run 'qwen-mswea': cannot load the environment class of ENV_TYPE=no_such_module:Env: Failed to import module 'no_such_module': No module named 'no_such_module'. mini-swe-agent runs inside the environment with its key, so an environment that cannot be checked is refused"
  # terminus-2 keeps its key in harbor's own process: local Docker is fine for it.
  RUN=qwen-tb3-smoke run "$REPO/scripts/print.sh"
  assert_success
  RUN=qwen-mswea run "$REPO/scripts/print.sh"
  assert_success
}

# --- 5. make print WHERE=hf, and a pipe that closes early ------------------------------------

# printed_block RUN VERB ENV...: the `make print` block of VERB, evaluated by bash with the
# command replaced by printf: the words bash reads back.
printed_block() {
  local run=$1 verb=$2 block
  shift 2
  block=$(env "$@" RUN="$run" "$REPO/scripts/print.sh" 2>/dev/null | awk -v v="$verb" '
    /^# / { take = ($0 ~ (": " v)) ; next } take && NF { print } take && !NF { exit }')
  [[ -n "$block" ]] || return 1
  block=$(sed -E '1s/(^|[[:space:]])(hf jobs run|harbor run)/\1printf "%s\\n" \2/' <<<"$block")
  bash -c "hf() { :; }; $block"
}

@test "print WHERE=hf shows the hf jobs run line bench launches, word for word" {
  local run
  load golden
  # benchable_runs: the bundled examples are never benched (refuse_bundled_example).
  for run in $(tier_runs $(benchable_runs)); do
    run printed_block "$run" bench WHERE=hf BUCKET=alice/tb-results API_BASE="$TEST_ENDPOINT"
    assert_success
    # The launch label is unique to each launch: print shows the golden's placeholder for it.
    assert_output "$(sed -e '1s/^== //' "$REPO/tests/golden/argv/$run.remote-bench")"
  done
  RUN=qwen-t2 WHERE=hf BUCKET=alice/tb-results run "$REPO/scripts/print.sh"
  assert_line "# qwen-t2: smoke test as an HF Job (one task: task fix-git (SMOKE_TASK); job qwen3_8-27b-fp8-terminus2-tb21-full-v2-smoke, writing into alice/tb-results)"
  assert_line "# qwen-t2: bench as an HF Job (harbor writing into alice/tb-results)"
}

@test "print WHERE=hf without a bucket names BUCKET" {
  RUN=qwen-t2 WHERE=hf run "$REPO/scripts/print.sh"
  assert_failure
  assert_output "print: setting BUCKET is empty for run 'qwen-t2', and WHERE=hf keeps the run's job dirs in an HF bucket: set BUCKET=NAMESPACE/NAME in runs/qwen-t2.env or on the command line"
}

@test "make print into a pipe that closes early ends quietly" {
  cd "$REPO"
  run bash -c 'set -o pipefail; make --no-print-directory print RUN=qwen-t2 | head -n 3 >"$0"' "$BATS_TEST_TMPDIR/head"
  assert_success
  assert_output ""
  run wc -l <"$BATS_TEST_TMPDIR/head"
  assert_output 3
  # The reader is gone before the first write: SIGPIPE as inherited, then ignored. The reader
  # closes its end, then says so through a FIFO; make starts once it has read that.
  local gone="$BATS_TEST_TMPDIR/reader-gone" trap_pipe
  for trap_pipe in : "trap '' PIPE"; do
    rm -f "$gone"
    mkfifo "$gone"
    run bash -c 'set -o pipefail
      (eval "$1"; read -r _ <"$0"
       exec make --no-print-directory print RUN=qwen-t2) | { exec 0<&-; echo gone >"$0"; }' "$gone" "$trap_pipe"
    assert_success
    assert_output ""
  done
}

# --- 6. nothing from make's command line reaches a shell unquoted ----------------------------

@test "RUNS and RUN reach tools/report/report.py as words, never as shell code" {
  local pwned="$BATS_TEST_TMPDIR/pwned" verb
  for verb in compare report results; do
    run mk "$verb" "RUNS=example-terminus2 \`touch $pwned\`"
    assert_failure
    assert [ ! -e "$pwned" ]
  done
  run mk check-submission "RUN=example-terminus2 \`touch $pwned\`"
  assert_failure
  assert [ ! -e "$pwned" ]
}

@test "a command-line value is its literal text: make never expands a make function in it" {
  # make exported a command-line variable by expanding it: RUNS='$(shell ...)' ran the command.
  local pwned="$BATS_TEST_TMPDIR/pwned"
  run mk compare "RUNS=\$(shell touch $pwned)"
  assert_failure
  assert_output --partial "'\$(shell' is neither a tally JSON file, a job dir, nor a run."
  assert [ ! -e "$pwned" ]
  run mk print RUN=qwen-t2 "SERVER_JOB=\$(shell touch $pwned)" "MODEL=org/m\$\$x"
  assert [ ! -e "$pwned" ]
  assert_output --partial "run 'qwen-t2' sets MODEL=org/m\$\$x, but"  # what was typed, not make's $$ -> $
}

@test "no recipe pastes a make variable of user input" {
  run grep -nE '\$\((RUN|RUNS|JSON|TIMEOUTS|JOB_DIR|PYTHON|STATE_ROOT|OUT|TASK|TRIALS|PULL)\)' "$REPO/Makefile"
  assert_failure
}

@test "compare and check-submission still work on the default runs" {
  run mk compare
  assert_success
  assert_line "## Comparison: example-terminus2-tb21 vs example-mswea-tb21"
  run mk check-submission RUN=example-terminus2
  assert_failure
  assert_line "run example-terminus2: does NOT meet the Terminal-Bench leaderboard rules (6 problems):"
}

@test "a bare make check-submission says which remembered run it checks, and that its job has not run yet" {
  mkdir -p "$STATE_ROOT"
  echo qwen-t2 >"$STATE_ROOT/last-run"
  run mk check-submission
  assert_failure
  assert_equal "${lines[0]}" "report: RUN not given; using the last run, qwen-t2 (state/last-run)"
  assert_equal "${lines[1]}" "Error: run qwen-t2 has no job dir yet (looked for JOBS_DIR/JOB_NAME, jobs/qwen3_8-27b-fp8-terminus2-tb21-full-v2, and its -shard-N and -retry-N jobs): run make bench RUN=qwen-t2 first, or make pull RUN=qwen-t2 for a run benched as an HF Job"
  # It names where it looked; the fix is a verb, not a setting or a harbor flag.
  refute_output --partial "set JOBS_DIR"
  refute_output --partial "--jobs-dir"
}

# --- 7. DRY_RUN writes nothing ---------------------------------------------------------------

@test "make results and make report DRY_RUN=1 print the commands and write nothing" {
  local before
  before=$(written_files)
  run mk results DRY_RUN=1
  assert_success
  assert_line "report: would run: .venv/bin/python -m tools.report.report results --figures-dir docs/results example-terminus2 example-mswea"
  run mk report DRY_RUN=1
  assert_success
  assert_line "report: would run: .venv/bin/python -m tools.report.report render example-terminus2 example-mswea"
  assert_line "report: would run: .venv/bin/python -m tools.report.report html example-terminus2 example-mswea"
  assert_equal "$(written_files)" "$before"
}

@test "make compare DRY_RUN=1 only reads, so it runs" {
  run mk compare DRY_RUN=1
  assert_success
  assert_line "## Comparison: example-terminus2-tb21 vs example-mswea-tb21"
}

@test "make test and make check DRY_RUN=1 list their suites, TEST_JOBS at a time, and run none" {
  command -v parallel >/dev/null || fail "GNU parallel is not installed (apt-get install parallel): bats --jobs needs it"
  run mk test DRY_RUN=1 TEST_JOBS=3
  assert_success
  assert_equal "${#lines[@]}" 3
  assert_line --index 0 --regexp '^test: would run: \.venv/bin/shellcheck -x .*scripts/argv\.sh scripts/bench\.sh .*tests/test_helper\.bash'
  assert_line --index 1 "test: would run: .venv/bin/bats --tap --jobs 3 tests/"
  assert_line --index 2 "test: would run: .venv/bin/python -m pytest -q -n 3 --dist loadgroup tests/"
  refute_line --index 0 --partial "--extended-analysis"
  # The fast tier: the same suites without the tests tagged e2e or full, shellcheck without its
  # dataflow analysis.
  run mk check DRY_RUN=1 TEST_JOBS=3
  assert_success
  assert_equal "${#lines[@]}" 3
  assert_line --index 0 --regexp '^test: would run: \.venv/bin/shellcheck -x -f gcc --extended-analysis=false \.ci/run '
  # Its bats files three at a time, each one's tests in turn (scripts/test.sh says why).
  assert_line --index 1 "test: would run: .venv/bin/bats --tap --jobs 3 --no-parallelize-within-files --filter-tags '!e2e,!full' tests/"
  assert_line --index 2 "test: would run: .venv/bin/python -m pytest -q -n 3 --dist loadgroup -m 'not e2e and not full' tests/"
  # One at a time, and a bad count refused.
  run mk test DRY_RUN=1 TEST_JOBS=1
  assert_line --index 1 "test: would run: .venv/bin/bats --tap tests/"
  assert_line --index 2 "test: would run: .venv/bin/python -m pytest -q tests/"
  run mk check DRY_RUN=1 TEST_JOBS=1
  assert_line --index 1 "test: would run: .venv/bin/bats --tap --filter-tags '!e2e,!full' tests/"
  run mk check DRY_RUN=1 TEST_JOBS=two
  assert_failure
  assert_output --partial "TEST_JOBS must be a positive whole number, got 'two'"
}

@test "make check's bats files take their tests in turn because the pinned bats polls for a free slot once a second" {
  # bats-core 1.14.0 starts a file's next test beside the others once bats_semaphore_acquire_slot
  # finds a slot free, and it looks once a second: longer than most fast-tier tests. A bats that
  # waits on the slot instead would let scripts/test.sh run them side by side again.
  assert_equal "$("$REPO/.venv/bin/bats" --version)" "Bats 1.14.0"
  local semaphore=("$REPO"/.venv/lib/python3*/site-packages/bats_core/_bats/lib/bats-core/semaphore.bash)
  run sed -n '/^bats_semaphore_acquire_slot() {$/,/^}$/p' "${semaphore[0]}"
  assert_line "    sleep 1"
}

# scratch_suites SHELLCHECK BATS PYTEST: a scratch copy of scripts/test.sh whose three suites are
# stand-ins, each "EXIT|OUTPUT" (OUTPUT printed with printf %b), so the runner's counting is
# tested on outputs chosen here, not on the real suites.
scratch_suites() {
  local root="$BATS_TEST_TMPDIR/repo" tool spec
  mkdir -p "$root/scripts" "$root/.venv/bin" "$root/tests/node_modules/bats-assert"
  cp "$REPO/scripts/test.sh" "$REPO"/scripts/lib{,-print,-settings,-instance,-manifest}.sh "$root/scripts/"
  : >"$root/tests/node_modules/bats-assert/load.bash"
  for tool in shellcheck bats python; do
    spec=$1
    shift
    printf '#!/bin/bash\nprintf %%b %q\nexit %s\n' "${spec#*|}" "${spec%%|*}" >"$root/.venv/bin/$tool"
    chmod +x "$root/.venv/bin/$tool"
  done
  ln -s python "$root/.venv/bin/pytest"
  printf '%s' "$root"
}

@test "make test runs every suite even after one fails, and ends with one line counting across all" {
  local root
  root=$(scratch_suites \
    '1|scripts/lib.sh:3:1: warning: unused [SC2034]\n' \
    '1|1..3\nok 1 a\nnot ok 2 b\nok 3 c\n' \
    '1|..F\n1 failed, 2 passed in 0.10s\n')
  run env -u DRY_RUN TEST_JOBS=1 "$root/scripts/test.sh" all
  assert_failure
  # Each suite ran, though the first failed; six shell files are checked (test.sh, lib.sh and the four
  # libraries lib.sh sources), one with a finding.
  assert_line "test: bats: tests/*.bats"
  assert_line "test: pytest: tests/"
  # shellcheck runs beside bats, so nothing waits for it: its output is shown once bats has ended,
  # before pytest starts.
  assert_line --index 0 "test: shellcheck: 6 files: beside the next suite; its output follows that one's"
  local i order=""
  for i in "${!lines[@]}"; do
    case "${lines[$i]}" in
      "ok 3 c" | "scripts/lib.sh:3:1: warning: unused [SC2034]" | "test: pytest: tests/") order+="${lines[$i]}|" ;;
    esac
  done
  assert_equal "$order" "ok 3 c|scripts/lib.sh:3:1: warning: unused [SC2034]|test: pytest: tests/|"
  assert_line --index $((${#lines[@]} - 1)) \
    "test: 9 passed, 3 failed (shellcheck 5 passed, 1 failed; bats 2 passed, 1 failed; pytest 2 passed, 1 failed)"
  # All passing: exit 0, the same line with nothing failed.
  root=$(scratch_suites '0|' '0|1..2\nok 1 a\nok 2 b # skip why\n' '0|..\n2 passed, 3 deselected in 0.10s\n')
  run env -u DRY_RUN TEST_JOBS=1 "$root/scripts/test.sh" check
  assert_success
  assert_line --index $((${#lines[@]} - 1)) \
    "test: 10 passed, 0 failed (shellcheck 6 passed, 0 failed; bats 2 passed, 0 failed; pytest 2 passed, 0 failed)"
  # A suite that fails with no test failed in its output (a crash, a collection error) is one failure.
  root=$(scratch_suites '0|' '0|1..1\nok 1 a\n' '4|ERROR: file or directory not found: tests/\n')
  run env -u DRY_RUN TEST_JOBS=1 "$root/scripts/test.sh" all
  assert_failure
  assert_line --index $((${#lines[@]} - 1)) \
    "test: 7 passed, 1 failed (shellcheck 6 passed, 0 failed; bats 1 passed, 0 failed; pytest 0 passed, 1 failed)"
}

@test "the suites never see make's command line: make check TEST_JOBS=3 passes no TEST_JOBS to the makes the tests start" {
  local root
  root=$(scratch_suites '0|' '0|' '0|1 passed in 0.10s\n')
  # The bats stand-in says what a make started by a test would inherit.
  printf '#!/bin/bash\nprintf "1..1\\nok 1 MAKEFLAGS=%%s MAKEOVERRIDES=%%s\\n" "${MAKEFLAGS-unset}" "${MAKEOVERRIDES-unset}"\n' \
    >"$root/.venv/bin/bats"
  run env -u DRY_RUN MAKEFLAGS=" -- TEST_JOBS=1" MAKEOVERRIDES='${-*-command-variables-*-}' TEST_JOBS=1 \
    "$root/scripts/test.sh" check
  assert_success
  assert_line "ok 1 MAKEFLAGS=unset MAKEOVERRIDES=unset"
}

# --- 8. the bundled examples are never served or benched -------------------------------------

@test "refuse_bundled_example stops serve, bench, smoke and mop-up of an example run" {
  run in_lib 'RUN=example-terminus2 refuse_bundled_example serve'
  assert_failure
  assert_output "bash: run 'example-terminus2' is a bundled example: its job dirs are shipped under examples/ for make tally, compare and report; it is never served or benched. Pick a real run: make serve RUN=<one of: gptoss-t2 qwen-claude-code qwen-mswea qwen-t2-leaderboard-h200x4 qwen-t2-leaderboard qwen-t2 qwen-tb3-smoke>"
  run in_lib 'RUN=qwen-t2 refuse_bundled_example bench && echo ok'
  assert_success
  assert_output ok
}

# --- 9. a run's job name is its own -----------------------------------------------------------

v2=qwen3_8-27b-fp8-terminus2-tb21-full-v2 # qwen-t2's JOB_NAME
fix_ending="Give run 'qwen-t2' a JOB_NAME of its own that does not end in -shard-<N>, -retry-<N> or -smoke"

@test "a JOB_NAME that discovery would read as another run's shard, retry or smoke job is refused on the command line, by every verb" {
  run mk print RUN=qwen-t2 JOB_NAME=a-shard-1
  assert_failure
  assert_line --index 0 "print: JOB_NAME a-shard-1 (on the command line) is the name of shard 1 of the run whose JOB_NAME is a: that run would count this one's trials as its own. $fix_ending"
  run mk print RUN=qwen-t2 JOB_NAME=a-retry-02
  assert_failure
  assert_line --index 0 "print: JOB_NAME a-retry-02 (on the command line) is the name of mop-up retry job 02 of the run whose JOB_NAME is a: that run would count this one's trials as its own. $fix_ending"
  run mk print RUN=qwen-t2 JOB_NAME=a-smoke
  assert_failure
  assert_line --index 0 "print: JOB_NAME a-smoke (on the command line) is the name of the smoke job of the run whose JOB_NAME is a: that run would count this one's trials as its own. $fix_ending"
  run mk print RUN=qwen-t2 JOB_NAME=jobs
  assert_failure
  assert_line --index 0 "print: JOB_NAME jobs (on the command line) is where harbor nests job dirs (JOBS_DIR/jobs/), which discovery searches: every job there would be read as this run's. $fix_ending"
  local verb name
  for verb in $(tier_cases "bench tally" bench smoke mopup tally submission reproduce plan watch cost); do
    run mk "$verb" RUN=qwen-t2 JOB_NAME="$v2-shard-2" DRY_RUN=1
    assert_failure
    assert_line --index 0 "$verb: JOB_NAME $v2-shard-2 (on the command line) is the name of shard 2 of the run whose JOB_NAME is $v2: that run would count this one's trials as its own. $fix_ending"
  done
  # What discovery never takes for another run's job is accepted: -shard-0, -retry-x, -smoketest.
  for name in a-shard-0 a-retry-x a-smoketest a-shard-1a; do
    run mk print RUN=qwen-t2 JOB_NAME="$name"
    assert_success
    assert_line "    --job-name $name \\"
  done
  # A smoke's own job (<job>-smoke) is the run's: make smoke is not refused.
  run mk smoke RUN=qwen-t2 DRY_RUN=1
  assert_success
  assert_output --partial "--job-name $v2-smoke "
  [[ ! -e "$STATE_ROOT" ]]
}

@test "a run file whose job name is another run's shard, retry or smoke job is refused, naming the file" {
  linked_checkout
  grep -v '^JOB_NAME=' "$SCRATCH/runs/qwen-t2.env" >"$SCRATCH/runs/mine-smoke.env"
  RUN=mine-smoke run "$SCRATCH/scripts/tally.sh"
  assert_failure
  assert_output "tally: JOB_NAME mine-smoke (the run's name: runs/mine-smoke.env sets no JOB_NAME) is the name of the smoke job of the run whose JOB_NAME is mine: that run would count this one's trials as its own. Give run 'mine-smoke' a JOB_NAME of its own that does not end in -shard-<N>, -retry-<N> or -smoke"
  rm "$SCRATCH/runs/mine-smoke.env"
  # Run 'other' names its job as qwen-t2's first shard: refused for other, and for qwen-t2, whose
  # discovery would count other's trials.
  sed "s/^JOB_NAME=.*/JOB_NAME=$v2-shard-1/" "$SCRATCH/runs/qwen-t2.env" >"$SCRATCH/runs/other.env"
  RUN=other run "$SCRATCH/scripts/print.sh"
  assert_failure
  assert_output "print: JOB_NAME $v2-shard-1 (runs/other.env) is the name of shard 1 of the run whose JOB_NAME is $v2: that run would count this one's trials as its own. Give run 'other' a JOB_NAME of its own that does not end in -shard-<N>, -retry-<N> or -smoke"
  RUN=qwen-t2 run "$SCRATCH/scripts/tally.sh"
  assert_failure
  assert_output "tally: runs/other.env's JOB_NAME $v2-shard-1 is the name of shard 1 of run 'qwen-t2' (runs/qwen-t2.env, JOB_NAME $v2): run 'qwen-t2' would count its trials as its own. Give runs/other.env a JOB_NAME of its own that does not end in -shard-<N>, -retry-<N> or -smoke"
  [[ ! -e "$STATE_ROOT" ]]
}

@test "a copied run file keeps the original's JOB_NAME: both runs are refused, naming both files, until it has its own" {
  linked_checkout
  cp "$SCRATCH/runs/qwen-t2.env" "$SCRATCH/runs/mine.env"
  local verb
  for verb in print tally bench mopup submission reproduce; do
    RUN=mine DRY_RUN=1 run "$SCRATCH/scripts/$verb.sh"
    assert_failure
    assert_output "$verb: runs/mine.env and runs/qwen-t2.env both resolve to JOB_NAME $v2: the two runs would count, retry and submit each other's trials (a copied run file keeps the original's JOB_NAME). Give the new one its own JOB_NAME=… in its run file"
  done
  RUN=qwen-t2 run "$SCRATCH/scripts/tally.sh"
  assert_failure
  assert_output "tally: runs/qwen-t2.env and runs/mine.env both resolve to JOB_NAME $v2: the two runs would count, retry and submit each other's trials (a copied run file keeps the original's JOB_NAME). Give the new one its own JOB_NAME=… in its run file"
  [[ ! -e "$STATE_ROOT" ]]
  # A JOB_NAME on the command line is this command's own choice of job dirs: its model is checked by
  # the verbs that read them (tests/tally.bats).
  RUN=mine JOB_NAME=mine-job run "$SCRATCH/scripts/print.sh"
  assert_success
  # Its own JOB_NAME: both runs work.
  sed -i 's/^JOB_NAME=.*/JOB_NAME=mine-job/' "$SCRATCH/runs/mine.env"
  RUN=mine run "$SCRATCH/scripts/print.sh"
  assert_success
  assert_line "    --job-name mine-job \\"
  RUN=qwen-t2 run "$SCRATCH/scripts/print.sh"
  assert_success
  assert_line "    --label model=qwen3_8-27b-fp8 \\"
}

@test "a bad watchdog or make reproduce setting gets the same one-line refusal from every verb, JOB_NAME on the command line or not" {
  local setting expected verb job
  local -A refusal=(
    [WATCHDOG_EVERY=7m]="setting WATCHDOG_EVERY must be one a cron runs evenly: one of 5m 6m 10m 12m 15m 20m 30m 1h 2h 3h 4h 6h 8h 12h, got '7m' (run 'qwen-t2')"
    [WATCHDOG_GRACE=abc]="setting WATCHDOG_GRACE must be a number with an optional unit s, m, h or d (e.g. 4h), more than zero, got 'abc' (run 'qwen-t2')"
    [WATCHDOG_GRACE=1m]="setting WATCHDOG_GRACE=1m must be longer than HEARTBEAT_EVERY=5m: a run that is held would look abandoned between two heartbeats (e.g. WATCHDOG_GRACE=1h HEARTBEAT_EVERY=5m) (run 'qwen-t2')"
    [WATCHDOG=yes]="setting WATCHDOG must be 0 or 1, got 'yes' (run 'qwen-t2')"
    [MOPUP_PASSES=x]="setting MOPUP_PASSES must be a whole number from 0 to 1000, got 'x' (run 'qwen-t2')"
    [MAX_RELAUNCHES=-1]="setting MAX_RELAUNCHES must be a whole number from 0 to 1000, got '-1' (run 'qwen-t2')"
    [HEALTH_POLL=0]="setting HEALTH_POLL must be a positive whole number below 1000000000, got '0' (run 'qwen-t2')"
    [LINGER_GRACE=1.5]="setting LINGER_GRACE must be a whole number from 0 to 999999999, got '1.5' (run 'qwen-t2')"
  )
  for setting in "${!refusal[@]}"; do
    expected=${refusal[$setting]}
    for verb in $(tier_cases "serve reproduce" print serve bench mopup reproduce plan status cost); do
      # A JOB_NAME on the command line once let the job-name check return before the watchdog's checks.
      for job in "" JOB_NAME=mine; do
        run mk "$verb" RUN=qwen-t2 "$setting" $job DRY_RUN=1
        assert_failure
        # The one line, then make's own "Error 1".
        assert_line --index 0 "$verb: $expected"
        assert_equal "${#lines[@]}" 2
      done
    done
  done
  # MOPUP_PASSES=0 (no mop-up pass) is one answer too: make plan and make reproduce both take it.
  run mk plan RUN=qwen-t2 MOPUP_PASSES=0 DRY_RUN=1
  assert_success
  run mk reproduce RUN=qwen-t2 MOPUP_PASSES=0 DRY_RUN=1
  assert_success
  assert_output --partial "at most 0 pass(es)"
  [[ ! -e "$STATE_ROOT" ]]
}

# --- a settings file is settings, never code ---------------------------------------------------

@test "a run file line that is not a setting is refused by its number, its text never shown, and nothing of it runs" {
  linked_checkout
  local token="hf_pasted${RANDOM}aloneByMistake0123456789" marker="$BATS_TEST_TMPDIR/ran"
  cp "$SCRATCH/runs/qwen-t2.env" "$SCRATCH/runs/mine.env"
  sed -i 's/^JOB_NAME=.*/JOB_NAME=mine-job/' "$SCRATCH/runs/mine.env"
  local -A why=(
    ["$token"]="holds what looks like a token (hf_… or sk-…): a run file or profile is committed, and copied into remote jobs; keep tokens out of it: export HF_TOKEN, or hf auth login"
    ["touch $marker"]="is not a setting (NAME=value), a comment or a blank line"
    ["N_TASKS=1 touch $marker"]="holds more than one NAME=value (a second word would run as a command): quote a value with spaces"
    ["N_TASKS=\$(touch $marker)"]='holds a command substitution ($(…) or `…`), which would run code'
    ["N_TASKS=\"\`touch $marker\`\""]='holds a command substitution ($(…) or `…`), which would run code'
    ["N_TASKS=1;touch $marker"]="holds a shell operator (;) outside quotes, which would run code: quote the value"
    ["N_TASKS=1>$marker"]="holds a shell operator (>) outside quotes, which would run code: quote the value"
    ["SUBMITTER=$token"]="holds what looks like a token (hf_… or sk-…): a run file or profile is committed, and copied into remote jobs; keep tokens out of it: export HF_TOKEN, or hf auth login"
    ["N_TASKS=\"1"]="ends inside a quoted value: close its quote"
  )
  local line count
  for line in "${!why[@]}"; do
    cp "$SCRATCH/runs/mine.env" "$SCRATCH/runs/bad.env"
    printf '%s\n' "$line" >>"$SCRATCH/runs/bad.env"
    count=$(wc -l <"$SCRATCH/runs/bad.env")
    RUN=bad run "$SCRATCH/scripts/print.sh"
    assert_failure
    assert_output "print: runs/bad.env line $count ${why[$line]}. A settings file is read as settings, never run; that line's text is not shown (it may hold a secret)"
    [[ ! -e "$marker" ]] || fail "a line of runs/bad.env ran: $line"
    # Another run's verbs read every run file's JOB_NAME: they skip this one, and run none of it.
    RUN=mine run "$SCRATCH/scripts/print.sh"
    assert_success
    [[ ! -e "$marker" ]] || fail "reading the other run files ran a line of runs/bad.env: $line"
  done
  # A run file that links to the token file: its one line is the token, never printed.
  printf '%s\n' "$token" >"$BATS_TEST_TMPDIR/token"
  ln -sf "$BATS_TEST_TMPDIR/token" "$SCRATCH/runs/bad.env"
  RUN=bad run "$SCRATCH/scripts/print.sh"
  assert_failure
  assert_output "print: runs/bad.env is a link: a settings file is read only as a file of its own inside runs/, never where a link leads (it could be the token). Copy the file itself"
  [[ ! -e "$STATE_ROOT" ]]
}

@test "a server profile is checked as settings too, and so is every profile it includes" {
  linked_checkout
  rm "$SCRATCH/env"
  cp -r "$REPO/env" "$SCRATCH/env"
  local marker="$BATS_TEST_TMPDIR/ran"
  printf 'touch %s\n' "$marker" >>"$SCRATCH/env/servers/qwen3.8-27b-fp8-sglang-h200.env"
  local n
  n=$(wc -l <"$SCRATCH/env/servers/qwen3.8-27b-fp8-sglang-h200.env")
  RUN=qwen-t2 run "$SCRATCH/scripts/print.sh"
  assert_failure
  assert_output "print: env/servers/qwen3.8-27b-fp8-sglang-h200.env line $n is not a setting (NAME=value), a comment or a blank line. A settings file is read as settings, never run; that line's text is not shown (it may hold a secret)"
  # The data-parallel profile includes it: refused for its include.
  RUN=qwen-t2 SERVER=qwen3.8-27b-fp8-sglang-h200x2 run "$SCRATCH/scripts/print.sh"
  assert_failure
  assert_output "print: env/servers/qwen3.8-27b-fp8-sglang-h200.env line $n is not a setting (NAME=value), a comment or a blank line. A settings file is read as settings, never run; that line's text is not shown (it may hold a secret)"
  [[ ! -e "$marker" ]]
  # An include line is a profile's alone: in a run file it is not a setting.
  cp "$REPO/env/servers/qwen3.8-27b-fp8-sglang-h200.env" "$SCRATCH/env/servers/"
  # shellcheck disable=SC2016  # the include line as the profiles spell it
  printf 'source "${BASH_SOURCE[0]%%/*}/x.env"\n' >>"$SCRATCH/runs/qwen-t2.env"
  n=$(wc -l <"$SCRATCH/runs/qwen-t2.env")
  RUN=qwen-t2 run "$SCRATCH/scripts/print.sh"
  assert_failure
  assert_output "print: runs/qwen-t2.env line $n is not a setting (NAME=value), a comment or a blank line. A settings file is read as settings, never run; that line's text is not shown (it may hold a secret)"
}
