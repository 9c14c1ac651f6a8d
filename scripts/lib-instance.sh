# shellcheck shell=bash
# Sourced by lib.sh: the run's instance, its identity on HF. Not executable on its own.

# --- the run's instance: its identity on HF ---------------------------------------------------
#
# A run's name is not unique on HF: two checkouts of this repository (two people in one org, or one
# person on two machines) both have runs/qwen-t2.env. What finds a run's jobs on HF (the watchdog,
# the heartbeat, make stop, the server lookup, make cost) selects by the run's instance, label
# instance=<16 hex digits>, drawn once per state/<run>/ (state/<run>/instance) and carried by every
# job the run launches (launch_job), its watchdog and the remote jobs its verbs start (which are
# told it as RUN_INSTANCE). A second live server of the same run name in the namespace is refused
# (make serve, refuse_other_servers).

readonly INSTANCE_SYNTAX='^[0-9a-f]{16}$'
# What a dry run or make print shows before the run's first locked verb has drawn it.
readonly INSTANCE_PLACEHOLDER="<run instance id>"

run_instance_file() { printf '%s/instance' "$(run_state_dir)"; }

# load_run_instance: RUN_INSTANCE, this run's instance: RUN_INSTANCE from the environment (a remote
# job of the run is told it; a checkout that takes over a run names it), else state/<run>/instance;
# empty before the run's first locked verb (ensure_run_instance) draws it.
load_run_instance() {
  local file recorded=""
  file=$(run_instance_file)
  if [[ -f "$file" ]]; then
    recorded=$(head -c 64 "$file" | tr -d '[:space:]')
    [[ "$recorded" =~ $INSTANCE_SYNTAX ]] ||
      die "state/$RUN/instance is not a run instance id (16 hex digits): it is how HF tells this checkout's jobs of run '$RUN' from another's. Put back the id its jobs carry (make jobs shows their instance= label), or remove the file when the run has no job left"
  fi
  RUN_INSTANCE=${RUN_INSTANCE:-}
  if [[ -n "$RUN_INSTANCE" ]]; then
    [[ "$RUN_INSTANCE" =~ $INSTANCE_SYNTAX ]] ||
      die "RUN_INSTANCE must be a run instance id, 16 hex digits (the instance= label of the run's jobs), got '$RUN_INSTANCE'"
    [[ -z "$recorded" || "$recorded" == "$RUN_INSTANCE" ]] ||
      die "RUN_INSTANCE=$RUN_INSTANCE is not the instance of run '$RUN' recorded here (state/$RUN/instance holds $recorded): two instances would share one state. Use this state's instance, or another STATE_ROOT"
  else
    RUN_INSTANCE=$recorded
  fi
}

# ensure_run_instance: draw the run's instance when it has none yet, and record it: by the verb that
# has just taken the run's lock (try_run_lock), so two verbs never draw two.
ensure_run_instance() {
  local file
  file=$(run_instance_file)
  [[ ! -f "$file" ]] || return 0
  [[ -n "${RUN_INSTANCE:-}" ]] || RUN_INSTANCE=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
  printf '%s\n' "$RUN_INSTANCE" >"$file.tmp"
  mv -f "$file.tmp" "$file"
}

# instance_label: the label value of the run's instance, or the placeholder where a dry run or make
# print shows a command before the instance is drawn.
instance_label() { printf '%s' "${RUN_INSTANCE:-$INSTANCE_PLACEHOLDER}"; }
