#!/usr/bin/env bash
# Usage: make print RUN=<run> [setting=value ...]
# Print, shell-quoted and with no secret in them, the exact commands serve, smoke and bench
# would run: the copy-paste reproduction of a run. Works offline, before any server exists
# (the endpoint is then a placeholder).
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=argv.sh
source "$(dirname "$0")/argv.sh"

main() {
  resolve_run
  load_settings
  validate_settings
  local argv env_display base
  base=$(display_endpoint)
  mapfile -t env_display < <(bench_env_display "$base")

  printf '# %s: serve (%s on %s)\n' "$RUN" "$MODEL" "$SERVER_FLAVOR"
  serve_argv argv launch
  show_cmd_wrapped -- "${argv[@]}"
  printf '\n# %s: smoke test (one task, job %s-smoke)\n' "$RUN" "$JOB_NAME"
  (
    apply_smoke_settings
    bench_argv argv
    show_cmd_wrapped "${env_display[@]}" -- "${argv[@]}"
  )
  printf '\n# %s: bench\n' "$RUN"
  bench_argv argv
  show_cmd_wrapped "${env_display[@]}" -- "${argv[@]}"
  if [[ -z "$DATASET_PATH" && -z "$DATASET_REF" ]]; then
    printf '\n# note: the dataset is not pinned (DATASET_REF); every resume re-resolves its HEAD.\n'
  fi
}

main "$@"
