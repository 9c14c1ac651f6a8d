#!/usr/bin/env bash
# Usage: make submit RUN=<run> [OUT=dir] [HUB_ORG=org] [DRY_RUN=1]
# The run to the Terminal-Bench leaderboard through Harbor Hub, in three steps:
#   1. make submission: the leaderboard's tree of the run (scripts/submission.sh), checked; a
#      refusal stops here. OUT defaults to state/<run>/submission (rebuilt by every make submit).
#      Before it, two job dirs of one job id are refused: both would go up under that one id.
#   2. harbor upload of each job dir in that tree (private, harbor's default; HUB_ORG: --org),
#      each job id it prints recorded in state/<run>/submit.json and the manifest. Before the
#      uploads and again before step 3, what the Hub holds under each job id is compared with the
#      tree: a trial the tree does not hold (a raw job dir uploaded once) stops it, named, since
#      the Hub never deletes one and the board would count it (tools/hub/submit.py hub-check).
#   3. harbor leaderboard submit --leaderboard HUB_LEADERBOARD --job-id ... --metadata ...,
#      when this harbor has that command (0.26.0 has not): otherwise the exact command to run
#      once it does, with the recorded ids.
# The credential is harbor's own: HARBOR_API_KEY or `harbor auth login`, read by harbor from its
# environment or ~/.harbor/credentials.json; never in an argv, never printed. Uploads are
# idempotent (harbor uploads only what the Hub lacks), so after a failure run it again.
# DRY_RUN=1 shows the submission's own dry run and every harbor call, and writes nothing.
# The Python half is tools/hub/submit.py.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=lib-run.sh
source "$REPO_ROOT/scripts/lib-run.sh"

# submission_args VAR DEST_OUT: tools.hub.submit plan's arguments: where make submission puts the
# tree, from the same settings scripts/submission.sh hands tools/hub/submission.py.
submission_args() {
  local -n _args=$1
  _args=(--out "$2" --jobs-dir "$JOBS_DIR" --job-name "$JOB_NAME"
    --agent "$AGENT" --model "$MODEL" --dataset-repo "${DATASET_REPO:-$DATASET_PATH}" --dataset "$DATASET"
    --agent-display-name "$AGENT_DISPLAY_NAME" --agent-org-display-name "$AGENT_ORG_DISPLAY_NAME"
    --agent-url "$AGENT_URL" --model-provider "$MODEL_PROVIDER"
    --model-display-name "$MODEL_DISPLAY_NAME" --model-org-display-name "$MODEL_ORG_DISPLAY_NAME"
    --version "$LEADERBOARD_VERSION")
}

# upload_argv VAR JOB_DIR: harbor upload of one job dir. No visibility flag: a new job is
# private, harbor's default (cli/upload.py), and a re-upload keeps what the Hub has.
upload_argv() {
  local -n _up=$1
  _up=(harbor upload "$2")
  [[ -z "$HUB_ORG" ]] || _up+=(--org "$HUB_ORG")
}

# leaderboard_argv VAR METADATA JOB_ID...: the leaderboard step, one --job-id per job dir.
leaderboard_argv() {
  local -n _lb=$1
  local metadata=$2 id
  shift 2
  _lb=(harbor leaderboard submit --leaderboard "$HUB_LEADERBOARD")
  for id in "$@"; do
    _lb+=(--job-id "$id")
  done
  _lb+=(--metadata "$metadata")
}

# has_leaderboard_submit: this harbor has `harbor leaderboard submit` (0.25.0 and 0.26.0 have
# not: `No such command 'leaderboard'`, exit 2); asked of the CLI itself, so an upgrade is seen.
has_leaderboard_submit() {
  harbor leaderboard submit --help >/dev/null 2>&1
}

harbor_version() {
  harbor --version 2>/dev/null | head -n1 || printf 'unknown'
}

# credential_source: where harbor's API key is (tools/hub/submit.py credential), or stop with the fix.
credential_source() {
  tool hub.submit credential 2>/dev/null ||
    die "no Harbor Hub credential: run 'harbor auth login', or export HARBOR_API_KEY=<your key> in your shell (never on make's command line). Nothing was built or uploaded"
}

# warn_several_ids N: a submission of more than one job (a sharded run, retry jobs) names each id.
# Whether the Hub's leaderboard takes several --job-id in one submission is not known (no harbor has
# the command yet): said, never assumed (docs/submission.md §4).
warn_several_ids() {
  (($1 > 1)) || return 0
  warn "this submission names $1 job ids, one --job-id each: whether the Hub's leaderboard accepts several in one submission is not verified (no harbor has 'leaderboard submit' yet; docs/submission.md §4). If it takes one job only, bench the run as one job: N_SHARDS=1, in-run retries (MAX_RETRIES), mop-up in place"
}

dry_run() {
  local out=$1 default_out=$2 args paths dest job argv ids=() source rc=0
  # As the real one: two job dirs of one job id are refused first (refuse_shared_job_id).
  submission_args args "$out"
  tool hub.submit plan "${args[@]}" >/dev/null || exit 1
  [[ "$default_out" != 1 || ! -e "$out" ]] || say "would remove $out (an earlier make submit's tree) and build it again with make submission"
  # make submission's dry run, asked as make submit asks it: a refusal (or a tree check-submission
  # would reject) is this dry run's exit code, and nothing after it is shown as if it would run.
  RUN=$RUN OUT=$out DRY_RUN=1 "$REPO_ROOT/scripts/submission.sh" --for-submit || rc=$?
  if ((rc != 0)); then
    say "make submission would refuse the run (above): a real make submit stops there, uploading nothing"
    exit "$rc"
  fi
  mapfile -d '' -t paths < <(tool hub.submit plan "${args[@]}") || true
  ((${#paths[@]} > 1)) || die "cannot tell which job dirs the submission would hold (above)"
  dest=${paths[0]}
  if source=$(tool hub.submit credential 2>/dev/null); then
    say "the Harbor Hub credential harbor would use: $source"
  else
    say "note: no Harbor Hub credential yet; a real make submit refuses without one: run 'harbor auth login', or export HARBOR_API_KEY=<your key>"
  fi
  say "then, once make submission has built and accepted the tree:"
  local names=()
  for job in "${paths[@]:1}"; do
    names+=("${job##*/}")
  done
  printf "would check %s against the metadata_schema of the leaderboard %s when Harbor Hub gives it, else against its documented fields (tools/hub/submit.py metadata-check)\n" \
    "$dest/metadata.yaml" "$HUB_LEADERBOARD"
  printf 'would check that Harbor Hub holds no trial under the job ids of %s that the tree does not (tools/hub/submit.py hub-check), before the uploads and again after them\n' "${names[*]}"
  for job in "${paths[@]:1}"; do
    upload_argv argv "$job"
    printf 'would run: %s\n' "$(show_cmd -- "${argv[@]}")"
    ids+=("<job id of ${job##*/}>")
  done
  leaderboard_argv argv "$dest/metadata.yaml" "${ids[@]}"
  warn_several_ids "${#ids[@]}"
  if has_leaderboard_submit; then
    printf 'would run: %s\n' "$(show_cmd -- "${argv[@]}")"
  else
    printf 'would print, for later (harbor %s has no leaderboard submit): %s\n' "$(harbor_version)" "$(show_cmd -- "${argv[@]}")"
  fi
  say "dry run: nothing built, uploaded or written"
}

# upload_job JOB_DIR LOG: harbor upload of one job dir, its output shown and kept in LOG.
upload_job() {
  local job=$1 log=$2 argv
  upload_argv argv "$job"
  say "uploading: $(show_cmd -- "${argv[@]}")"
  "${argv[@]}" </dev/null 2>&1 | tee "$log" >&2
}

# upload_all DEST JOB_DIR...: harbor upload of each job dir, the job first; each id harbor prints
# (checked against the job's result.json) goes into submit.json as it comes (UPLOADED, IDS). The
# manifest's submit-upload then says what went up, also when one stops the rest: an upload whose
# id cannot be read is named there (id_not_read), never left unrecorded.
upload_all() {
  local dest=$1 job log id stopped="" why=""
  shift
  UPLOADED=() IDS=()
  for job in "$@"; do
    log="$(run_state_dir)/submit-logs/${job##*/}.upload.log"
    if ! upload_job "$job" "$log"; then
      why="harbor upload of ${job##*/} failed (above; its output is in ${log#"$REPO_ROOT"/})"
      break
    fi
    if ! id=$(tool hub.submit job-id --log "$log" --job-dir "$job"); then
      stopped=${job##*/}
      why="harbor upload of $stopped went up, but its job id could not be read from its output (above; kept in ${log#"$REPO_ROOT"/}), so it is recorded as id_not_read in the manifest"
      break
    fi
    say "uploaded ${job##*/}: job id $id"
    IDS+=("$id")
    UPLOADED+=(--upload "$job" "$id")
    record uploading "$dest" >/dev/null
  done
  if ((${#UPLOADED[@]})) || [[ -n "$stopped" ]]; then
    # submit.json holds this make submit's uploads (none of an earlier one), even when none has an id.
    [[ -z "$stopped" ]] || record uploading "$dest" >/dev/null
    append_manifest submit-upload "$(jq -c --arg stopped "$stopped" '{role: "submit", submission: .submission,
      jobs: [.uploads[] | {job, job_id}]} + (if $stopped == "" then {} else {id_not_read: $stopped} end)' \
      "$(run_state_dir)/submit.json")"
  fi
  [[ -z "$why" ]] ||
    die "$why. Uploads are idempotent: run make submit RUN=$RUN again to upload what is missing and record every id"
}

# record STATUS DEST [ARGV...]: state/<run>/submit.json, from the uploads so far (UPLOADED).
record() {
  local status=$1 dest=$2
  shift 2
  tool hub.submit record --state "$(run_state_dir)/submit.json" --run "$RUN" --dest "$dest" \
    --leaderboard "$HUB_LEADERBOARD" "${UPLOADED[@]}" --status "$status" -- "$@"
}

# leaderboard_step DEST JOB_ID...: submit, or print the command for when harbor has it.
leaderboard_step() {
  local dest=$1 argv json
  shift
  leaderboard_argv argv "$dest/metadata.yaml" "$@"
  warn_several_ids "$#"
  if ! has_leaderboard_submit; then
    json=$(record pending "$dest" "${argv[@]}")
    append_manifest submit "$(jq -c '{role: "submit", status: .leaderboard.status, leaderboard: .leaderboard.name,
      jobs: [.uploads[] | {job, job_id}], argv: .leaderboard.argv}' <<<"$json")"
    say "uploaded; harbor $(harbor_version) has no 'harbor leaderboard submit' yet, so the run is not on the leaderboard. Once your harbor has it, run:"
    show_cmd -- "${argv[@]}"
    say "(the ids are in $(run_state_dir)/submit.json)"
    return 0
  fi
  say "submitting: $(show_cmd -- "${argv[@]}")"
  local rc=0
  "${argv[@]}" </dev/null || rc=$?
  local status=submitted
  ((rc == 0)) || status=failed
  json=$(record "$status" "$dest" "${argv[@]}")
  append_manifest submit "$(jq -c --argjson rc "$rc" '{role: "submit", status: .leaderboard.status, exit: $rc,
    leaderboard: .leaderboard.name, jobs: [.uploads[] | {job, job_id}], argv: .leaderboard.argv}' <<<"$json")"
  ((rc == 0)) || die "harbor leaderboard submit exited $rc (above); the uploads stand, and their ids are in $(run_state_dir)/submit.json: run the command again, or make submit RUN=$RUN"
  say "submitted run $RUN to $HUB_LEADERBOARD"
}

main() {
  needs_setup python harbor
  resolve_run
  load_settings
  # The three steps' settings (their values checked by load_settings, as every verb's are).
  require JOBS_DIR JOB_NAME AGENT MODEL HUB_LEADERBOARD
  cd "$REPO_ROOT"
  local out=${OUT:-} default_out=0
  if [[ -z "$out" ]]; then
    out="$(run_state_dir)/submission"
    default_out=1
  fi
  if is_dry_run; then
    dry_run "$out" "$default_out"
    return 0
  fi
  [[ "$RUN" != example-* ]] ||
    die "run '$RUN' is a bundled example: its job dirs are made up, so it is never submitted. make submit RUN=$RUN DRY_RUN=1 shows what a submission looks like"
  local source
  source=$(credential_source)
  say "Harbor Hub credential: $source"
  # Two job dirs of one job id would both go up under it, and the Hub keeps every trial uploaded
  # under a job id: refused here, in its own one line, before the tree is built or the lock taken,
  # so nothing is written (tools/hub/submit.py plan, refuse_shared_job_id).
  local args paths dest
  submission_args args "$out"
  tool hub.submit plan "${args[@]}" >/dev/null || exit 1
  # One writer: the tree and submit.json are the run's state.
  hold_run_lock "make submit"
  if [[ "$default_out" == 1 && -e "$out" ]]; then
    # This verb's own tree from an earlier make submit: the run may have changed since.
    say "removing $out (the tree of an earlier make submit) to build it again"
    rm -rf -- "$out"
  fi
  local rc=0
  RUN=$RUN OUT=$out "$REPO_ROOT/scripts/submission.sh" || rc=$?
  if ((rc != 0)); then
    say "make submission refused the run (above): nothing was uploaded"
    exit "$rc"
  fi

  mapfile -d '' -t paths < <(tool hub.submit plan --built "${args[@]}") || true
  ((${#paths[@]} > 1)) || die "cannot find the job dirs of the built submission (above)"
  dest=${paths[0]}
  mkdir -p "$(run_state_dir)/submit-logs"
  # metadata.yaml against the board's own schema when the Hub gives it, else the documented fields.
  tool hub.submit metadata-check --leaderboard "$HUB_LEADERBOARD" --metadata "$dest/metadata.yaml" ||
    die "stopped at the metadata check (above): nothing was uploaded or submitted"
  # The append-only Hub: a job id that already holds trials the tree does not is refused before
  # anything goes up, and checked again before the leaderboard is given the ids.
  tool hub.submit hub-check --run "$RUN" "${paths[@]:1}" ||
    die "stopped at the Harbor Hub check (above): nothing was uploaded or submitted"
  upload_all "$dest" "${paths[@]:1}"
  tool hub.submit hub-check --run "$RUN" "${paths[@]:1}" ||
    die "stopped at the Harbor Hub check (above): the leaderboard step did not run; the uploads are recorded in $(run_state_dir)/submit.json"
  leaderboard_step "$dest" "${IDS[@]}"
}

main "$@"
