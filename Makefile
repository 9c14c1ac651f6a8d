# The front door. Each target is one line calling scripts/; `make` prints the menu.
# Settings are overridable on the command line: make bench RUN=qwen-t2 N_CONCURRENT=1.
# Command-line variables reach the scripts through their environment, never through a
# recipe, and as their literal text (make functions and $$ in them are not expanded): no value
# a user gives is ever read as shell code or as make's.

# Strict flags through SHELL itself, so they also hold on GNU Make 3.81 (no .SHELLFLAGS).
SHELL := /bin/bash -euo pipefail
.DEFAULT_GOAL := help
MAKEFLAGS += --no-builtin-rules --no-print-directory

# The names given on make's command line. Only those override a run's files: a setting the
# user's shell happens to export is ignored (scripts/lib.sh, load_settings).
override CLI_SETTINGS := $(strip $(foreach v,$(.VARIABLES),$(if $(filter command line,$(origin $(v))),$(v))))
export CLI_SETTINGS
# Each of them stays its literal text: make exports a command-line variable to the scripts'
# environment by expanding it, which would run RUNS='$(shell ...)' as a command. Redefined as a
# simple variable holding its own unexpanded value (and exported again: a redefined variable no
# longer is by itself), it reaches the scripts as given.
$(foreach v,$(CLI_SETTINGS),$(eval override $(v) := $$(value $(v)))$(eval export $(v)))

# make plan|watch|report|stop CAMPAIGN=<name> acts on every run and server of the campaign
# (scripts/campaign.sh; docs/campaigns.md); without CAMPAIGN on make's command line, on RUN(S).
by_campaign = $(if $(filter CAMPAIGN,$(CLI_SETTINGS)),scripts/campaign.sh $(1),$(2))

.PHONY: help
help: ## this menu
	@printf 'Usage: make <target> [RUN=<run>] [DRY_RUN=1] [SETTING=value ...]\n\nTargets:\n'
	@sed -n 's/^\([a-z][a-z-]*\):.*## \(.*\)/\1|\2/p' $(MAKEFILE_LIST) | awk -F'|' '{ printf "  %-18s %s\n", $$1, $$2 }'
	@printf '\nRuns: %s\n' "$$(ls runs | sed 's/\.env$$//' | tr '\n' ' ')"

# --- set up ------------------------------------------------------------------------------

.PHONY: setup
setup: ## build .venv (Python >= 3.12) from env/requirements.lock, hash-checked; idempotent
	@scripts/setup.sh

.PHONY: lock
lock: ## resolve env/requirements.txt into env/requirements.lock (every package, with hashes), with uv
	@scripts/lock.sh

.PHONY: doctor
doctor: ## preflight checks, each with its fix (CHECK_TIMEOUT=1 RUN=r: what HF keeps of its SERVER_TIMEOUT, under a cent)
	@scripts/doctor.sh

.PHONY: print
print: ## print the exact serve, smoke and bench commands of RUN (no secrets)
	@scripts/print.sh

# --- serve and bench ---------------------------------------------------------------------

.PHONY: serve
serve: ## launch RUN's model server as an HF Job and record it in state/RUN/; install its watchdog (docs/watchdog.md)
	@scripts/serve.sh

.PHONY: probe
probe: ## one real completion through RUN's endpoint, then each other protocol it declares once: the right model? reasoning when it should not? every route?
	@scripts/probe.sh

.PHONY: smoke
smoke: ## one task with RUN's full wiring, job <job-name>-smoke
	@scripts/bench.sh --smoke

.PHONY: bench
bench: ## harbor run against RUN's server, then the tally (WHERE=hf: as an HF Job on BUCKET)
	@scripts/bench.sh

.PHONY: reproduce
reproduce: ## RUN from nothing to its tally, unattended: serve, probe, smoke, bench, mop-up, tally, stop (resumable; DRY_RUN=1: the plan)
	@scripts/reproduce.sh

.PHONY: campaign
campaign: ## CAMPAIGN's runs: each distinct server served once, every run benched on it, one budget, one MAX_COST, one comparison (DRY_RUN=1: the plan)
	@scripts/campaign.sh run

# --- watch the run and its server -----------------------------------------------------------

.PHONY: watch
watch: ## RUN live: slots settled of tasks × k, pace, ETA, spend and alarms, from its files (ONCE=1: one frame; CAMPAIGN=: each run's)
	@$(call by_campaign,watch,scripts/watch.sh)

.PHONY: status
status: ## RUN's server: stage, endpoint health, price, time up and cost so far, its watchdog's last check; warns when idle
	@scripts/status.sh

.PHONY: logs
logs: ## the last LOG_TAIL lines of RUN's server logs; FOLLOW=1 follows
	@scripts/logs.sh

.PHONY: stop
stop: ## cancel RUN's server job so it stops billing, and remove its watchdog (safe to repeat; CAMPAIGN=: every server of it)
	@$(call by_campaign,stop,scripts/stop.sh)

.PHONY: jobs
jobs: ## every live HF Job of this project with its price; ALL=1 includes finished ones
	@scripts/jobs.sh

.PHONY: sandboxes
sandboxes: ## the sandbox job(s) behind RUN's infra-errored tasks (or TASK=<task>): stage, last log lines, idle shutdowns
	@scripts/sandboxes.sh

.PHONY: plan
plan: ## which server, shards and N_CONCURRENT finish RUN by DEADLINE (e.g. 24h), cheapest first, and what binds: a simulation, nothing launched or written (CAMPAIGN=: its schedule)
	@$(call by_campaign,plan,scripts/plan.sh)

.PHONY: calibrate
calibrate: ## load-test RUN's live server (evalscope perf) at a concurrency ladder: TTFT, time per output token, throughput in state/RUN/calibration.json, for make plan
	@scripts/calibrate.sh

.PHONY: calibrate-sandboxes
calibrate-sandboxes: ## measure the namespace's sandbox budget: harbor's oracle (no GPU) at SANDBOX_LEVELS trials at once, infra rate and start times for make plan (cost stated, MAX_COST)
	@scripts/calibrate-sandboxes.sh

# --- results -----------------------------------------------------------------------------

.PHONY: pull
pull: ## bring a remote (WHERE=hf) run's job dirs home from BUCKET (PULL=all: trajectories too)
	@scripts/pull.sh

.PHONY: mopup
mopup: ## retry RUN's infra-errored and unfinished tasks, nothing else; moves, never deletes (DRY_RUN=1: the plan)
	@scripts/mopup.sh

.PHONY: mopup-archive
mopup-archive: ## list the trial dirs mop-up moved out of RUN's jobs into state/RUN/archive/
	@scripts/mopup-archive.sh

.PHONY: mopup-restore
mopup-restore: ## move archived trial dirs back into their job: TRIALS='<trial-dir> ...' or TRIALS=all
	@scripts/mopup-restore.sh

.PHONY: tally
tally: ## the real per-task outcome of RUN (default: the bundled example); ALL=1: every figure of a k > 1 run
	@scripts/tally.sh

.PHONY: cost
cost: ## what RUN cost: every job and sandbox, price, running time, totals per role, $ per passed attempt and task (JSON=1)
	@scripts/cost.sh

.PHONY: compare
compare: ## side-by-side table, flips and per-task matrix of RUNS (default: the two bundled examples)
	@scripts/report.sh compare

.PHONY: report
report: ## pictures (PNG, SVG) and a self-contained HTML report of RUNS, under reports/ (CAMPAIGN=: its runs' comparison)
	@$(call by_campaign,report,scripts/report.sh report)

.PHONY: results
results: ## regenerate README.md's results section from the tallies of RUNS
	@scripts/report.sh results

.PHONY: pin
pin: ## write the dataset commit RUN's jobs ran into runs/RUN.env (DATASET_REF), diff first; DRY_RUN=1: the diff only
	@scripts/pin.sh

.PHONY: check-submission
check-submission: ## does RUN meet the Terminal-Bench leaderboard rules? if not, says why
	@scripts/report.sh check-submission

.PHONY: submission
submission: ## RUN as a leaderboard submission under OUT (default .): metadata.yaml + a copy of its job dirs, then check-submission
	@scripts/submission.sh

.PHONY: submit
submit: ## RUN to the leaderboard via Harbor Hub: make submission, harbor upload of each job (ids in state/RUN/submit.json), leaderboard submit
	@scripts/submit.sh

.PHONY: publish
publish: ## RUN's result as a pull request to the model repo's .eval_results/, its README and job dirs to BUCKET
	@scripts/publish.sh

# --- the project -------------------------------------------------------------------------

.PHONY: check
check: ## the fast tier, for every change: shellcheck, unit and contract tests, no end-to-end run
	@scripts/test.sh check

.PHONY: test
test: ## every test: shellcheck, bats, pytest, end-to-end runs included (what CI runs); TEST_JOBS=n at a time
	@scripts/test.sh
