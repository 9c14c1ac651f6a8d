#!/usr/bin/env python3
"""Regenerate what `make cost` and `make sandboxes` read for every bundled example run (deterministic).

    .venv/bin/python examples/make_example_cost.py   (writes examples/state/<run>/ of each example)

A bundled example is never served, so it has no real HF jobs to ask about. Instead, it ships
what a real run leaves behind, and the exact answers the `hf` CLI (huggingface_hub 2.4.0,
`--json` output) would have given, recorded once, for each of runs/example-*.env:

    manifest.jsonl     the run's launches, as scripts/lib.sh's append_manifest writes them: a
                       server (serve), a relaunched server the next morning, a remote mop-up
    hf-recorded.json   {"recorded_at", "calls": {"<hf argv>": <its output>}}: hf jobs hardware,
                       hf jobs inspect of each launched job, hf jobs ps of the run's label and of
                       the sandboxes (label hf-sandbox=1), and each sandbox's log lines

tools/money/cost.py reads the recording with the same code that reads the live CLI (RecordedHf vs
LiveHf), so `make cost RUN=example-…` works offline and its figures never move. The sandboxes
are one per trial attempt, created while the trial set up its environment (as harbor's
hf-sandbox environment does, through huggingface_hub's Sandbox.create). The runs' stories:

    example-terminus2     a server, its relaunch the next morning, a remote mop-up; two infra
                          errors' sandboxes end with sbx-server's idle shutdown, the reference's
                          worst infra error
    example-mswea         a server and harbor as a remote bench job (Run 3's way), one session
    example-leaderboard   a server for the -k 5 bench, another the next morning for its retry job
    example-leaderboard-complete   the same, and a third session for its second retry job

Every job's times are the example's own trials' (its server up from before its first trial to
after its last), so each run's cost, per role, matches its job dirs.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUN = "example-terminus2"
JOBS = HERE / "jobs"
NS = "alice"
PROJECT = "terminal-bench-harness"
RECORDED_AT = "2026-09-04T09:10:00Z"

# hf jobs hardware --json rows (huggingface_hub 2.4.0 cli/jobs.py jobs_hardware), trimmed to the
# flavors this example uses and a few more.
HARDWARE = [
    {"name": "cpu-basic", "pretty name": "CPU Basic", "cpu": "2 vCPU", "ram": "16 GB", "storage": "50 GB",
     "accelerator": "", "cost/min": "$0.0002", "cost/hour": "$0.01"},
    {"name": "cpu-upgrade", "pretty name": "CPU Upgrade", "cpu": "8 vCPU", "ram": "32 GB", "storage": "50 GB",
     "accelerator": "", "cost/min": "$0.0005", "cost/hour": "$0.03"},
    {"name": "l40sx1", "pretty name": "1x Nvidia L40S", "cpu": "8 vCPU", "ram": "62 GB", "storage": "380 GB",
     "accelerator": "1x L40S (48 GB)", "cost/min": "$0.0300", "cost/hour": "$1.80"},
    {"name": "h200", "pretty name": "1x Nvidia H200", "cpu": "23 vCPU", "ram": "256 GB", "storage": "3000 GB",
     "accelerator": "1x H200 (141 GB)", "cost/min": "$0.0833", "cost/hour": "$5.00"},
]


def t(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def hf_time(d: datetime) -> str:
    return d.astimezone(timezone.utc).isoformat()  # as hf --json prints them: 2026-09-03T08:00:00+00:00


def job(job_id, *, flavor, created, sched, running, stage, labels, port=None, image="lmsysorg/sglang:latest",
        command=()):
    c = t(created)
    started = c + timedelta(seconds=sched)
    row = {"id": job_id, "created_at": hf_time(c), "started_at": hf_time(started),
           "finished_at": hf_time(started + timedelta(seconds=running)), "docker_image": image,
           "command": list(command), "arguments": [], "flavor": flavor, "labels": labels,
           "status": {"stage": stage},
           "durations": {"scheduling_secs": sched, "running_secs": running, "total_secs": sched + running},
           "owner": {"id": "5e9ecfc04957053f60648a3e", "name": NS, "type": "user"},
           "endpoint": "https://huggingface.co", "url": f"https://huggingface.co/jobs/{NS}/{job_id}"}
    if port:
        row["status"]["expose_urls"] = [f"https://{job_id}--{port}.hf.jobs"]
        row["expose"], row["expose_public"] = [port], []
    return row


def as_ps_row(row: dict) -> dict:
    """hf jobs ps --json: the same object with status a plain string, plus the table's columns."""
    out = {**row, "status": row["status"]["stage"]}
    out.update({"job_id": row["id"], "name": row["labels"].get("name", "N/A"), "image/space": row["docker_image"],
                "command": " ".join(row["command"]) or "N/A", "created": row["created_at"][:19].replace("T", " ")})
    return out


def run_labels(role: str, launch: str, run: str = RUN) -> dict:
    return {"project": PROJECT, "model": "qwen3_8-27b-fp8", "run": run, "role": role, "launch": launch}


SERVERS = [
    job("68b7f1a0c0ffee0000000001", flavor="h200", created="2026-09-03T08:00:00Z", sched=300, running=28800,
        stage="CANCELED", labels=run_labels("server", "1f0e2d3c4b5a6978"), port=30000,
        command=["sglang", "serve", "--model-path", "Qwen/Qwen3.8-27B-FP8"]),
    job("68b94b10c0ffee0000000002", flavor="h200", created="2026-09-04T07:50:00Z", sched=240, running=3960,
        stage="CANCELED", labels=run_labels("server", "2a3b4c5d6e7f8091"), port=30000,
        command=["sglang", "serve", "--model-path", "Qwen/Qwen3.8-27B-FP8"]),
]
MOPUP = job("68b94f20c0ffee0000000003", flavor="cpu-upgrade", created="2026-09-04T08:05:00Z", sched=30, running=3180,
            stage="COMPLETED", labels=run_labels("mopup", "3c4d5e6f708192a3"), image="python:3.12",
            command=["bash", "-c", "make mopup"])

# The sandbox log tails: what each trial's sandbox said last.
IDLE = ["sbx-server: exec pid=412 exited 0", "sbx-server: idle for 601917ms, shutting down"]
LOGS = {
    "feal-linear-cryptanalysis__bebbb61": IDLE,
    "circuit-fibsqrt__cbca3c8": IDLE,
    "feal-linear-cryptanalysis__eebb294": ["sbx-server: exec pid=377 started", "sbx-server: connection reset by peer"],
    "query-optimize__becf473": ["sbx-server: exec pid=290 started", "sbx-server: received SIGTERM, shutting down"],
    "qemu-startup__fcfc12f": ["sbx-server: exec pid=118 exited 100"],
    # example-mswea: apt-get against the expired mirror, and a sandbox that dropped its connection.
    "qemu-startup__5wY63c4": ["sbx-server: exec pid=118 exited 100"],
    "schemelike-metacircular-eval__AyZ8TAX": ["sbx-server: exec pid=377 started", "sbx-server: connection reset by peer"],
    # example-leaderboard(-complete): a sandbox that dropped its connection; the model's endpoint timing out.
    "build-pov-ray__eabd531": ["sbx-server: exec pid=377 started", "sbx-server: connection reset by peer"],
    "build-pov-ray__abeb667": ["sbx-server: exec pid=377 started", "sbx-server: connection reset by peer"],
    **{trial: ["sbx-server: exec pid=233 started", "sbx-server: received SIGTERM, shutting down"]
       for trial in ("cobol-modernization__ceed3c1", "cobol-modernization__fbab890", "cobol-modernization__ebbdeb8",
                     "cobol-modernization__fceb381")},
}


def sandboxes(job_name: str = "example-terminus2-tb21", prefix: str = "68b8") -> tuple[list[dict], dict[str, list[str]]]:
    rows, logs = [], {}
    for n, result in enumerate(sorted(JOBS.glob(f"{job_name}*/*/result.json"))):
        try:
            r = json.loads(result.read_text())
        except ValueError:
            continue  # the deliberately corrupt one
        setup = t(r["environment_setup"]["started_at"])
        created = setup + timedelta(seconds=5)
        finished = t(r["finished_at"]) + timedelta(seconds=10)
        sched = 10
        running = int((finished - created).total_seconds()) - sched
        jid = f"{prefix}{n:04x}5a0dbox{n:012d}"
        rows.append(job(jid, flavor="cpu-upgrade", created=created.strftime("%Y-%m-%dT%H:%M:%SZ"), sched=sched,
                        running=running, stage="CANCELED", port=49983, image="python:3.12",
                        labels={"hf-sandbox": "1", "hf-sandbox-mode": "dedicated", "hf-sandbox-nonce": f"{n:032x}"},
                        command=["/bin/sh", "-c", "sbx-server"]))
        trial = result.parent.name
        logs[jid] = ["sbx-server 0.7.0 listening on :49983", *LOGS.get(trial, ["sbx-server: exec pid=201 exited 0"])]
    return rows, logs


def manifest_line(at: str, event: str, extra: dict, run: str = RUN) -> str:
    base = {"at": at, "event": event, "run": run, "commit": "example", "lock_sha256": None,
            "tools": {"harbor": "0.26.0", "huggingface_hub": "2.4.0"}}
    return json.dumps({**base, **extra, "settings": {"SERVER_FLAVOR": "h200", "BENCH_FLAVOR": "cpu-upgrade",
                                                     "SANDBOX_FLAVOR": "cpu-upgrade", "N_CONCURRENT": "3"}},
                      separators=(",", ":"))


def recording(run: str, jobs: list[dict], boxes: list[dict], logs: dict[str, list[str]],
              recorded_at: str = RECORDED_AT) -> str:
    """hf-recorded.json of a run: the hardware list, inspect of each launched job, ps of the run's
    label and of the sandboxes, each sandbox's log."""
    calls = {"jobs hardware --json": HARDWARE}
    for row in jobs:
        calls[f"jobs inspect --json {NS}/{row['id']}"] = [row]
    calls[f"jobs ps -a --json --limit 0 -l project={PROJECT} -l run={run} --namespace {NS}"] = [
        as_ps_row(r) for r in jobs]
    calls[f"jobs ps -a --json --limit 0 -l hf-sandbox=1 --namespace {NS}"] = [as_ps_row(r) for r in boxes]
    for jid, lines_ in logs.items():
        calls[f"jobs logs {NS}/{jid}"] = "\n".join(lines_) + "\n"
    what = "the bundled example" if run == RUN else f"the bundled example {run}"
    doc = {"recorded_at": recorded_at,
           "note": f"hf CLI answers (huggingface_hub 2.4.0, --json) for {what}; written by "
                   "examples/make_example_cost.py. tools/money/cost.py reads them instead of calling HF.",
           "calls": calls}
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def main() -> None:
    write_terminus2()
    for spec in SESSIONS:
        write_sessions(*spec)


def write_terminus2() -> None:
    out = HERE / "state" / RUN
    out.mkdir(parents=True, exist_ok=True)
    s1, s2 = SERVERS
    lines = [
        manifest_line("2026-09-03T07:59:58Z", "launch-intent", {"role": "server", "launch_id": s1["labels"]["launch"]}),
        manifest_line("2026-09-03T08:00:01Z", "serve", {"role": "server", "job_id": s1["id"], "namespace": NS,
                                                        "endpoint": f"https://{s1['id']}--30000.hf.jobs/v1",
                                                        "launch_id": s1["labels"]["launch"]}),
        manifest_line("2026-09-03T08:29:40Z", "bench", {"role": "bench", "job_name": "example-terminus2-tb21",
                                                        "jobs_dir": "examples/jobs",
                                                        "endpoint": f"https://{s1['id']}--30000.hf.jobs/v1"}),
        manifest_line("2026-09-03T16:05:02Z", "server-stop", {"role": "server", "job_id": s1["id"], "namespace": NS}),
        manifest_line("2026-09-04T07:49:58Z", "launch-intent", {"role": "server", "launch_id": s2["labels"]["launch"]}),
        manifest_line("2026-09-04T07:50:01Z", "serve", {"role": "server", "job_id": s2["id"], "namespace": NS,
                                                        "endpoint": f"https://{s2['id']}--30000.hf.jobs/v1",
                                                        "launch_id": s2["labels"]["launch"]}),
        manifest_line("2026-09-04T08:04:58Z", "launch-intent", {"role": "remote-mopup", "launch_id": MOPUP["labels"]["launch"]}),
        manifest_line("2026-09-04T08:05:01Z", "mopup", {"role": "remote-mopup", "job_id": MOPUP["id"], "bucket": "alice/tb",
                                                        "endpoint": f"https://{s2['id']}--30000.hf.jobs/v1",
                                                        "launch_id": MOPUP["labels"]["launch"]}),
        manifest_line("2026-09-04T09:00:03Z", "server-stop", {"role": "server", "job_id": s2["id"], "namespace": NS}),
    ]
    (out / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    boxes, logs = sandboxes()
    (out / "hf-recorded.json").write_text(recording(RUN, [*SERVERS, MOPUP], boxes, logs))


def iso(d: datetime) -> str:
    return d.strftime("%Y-%m-%dT%H:%M:%SZ")


def trial_window(job_dir: Path) -> tuple[datetime, datetime]:
    """(the first trial's environment setup, the last trial's end) of one job dir."""
    starts, ends = [], []
    for result in job_dir.glob("*/result.json"):
        r = json.loads(result.read_text())
        starts.append(t(r["environment_setup"]["started_at"]))
        ends.append(t(r["finished_at"]))
    return min(starts), max(ends)


# The other examples, one serving session per job dir (the bench, then each retry job the next
# morning): run, job name, the id prefix of its jobs, and whether harbor ran as a remote job.
SESSIONS = [
    ("example-mswea", "example-mswea-tb21", "68c1", True),
    ("example-leaderboard", "example-leaderboard-tb21", "68c2", False),
    ("example-leaderboard-complete", "example-leaderboard-complete-tb21", "68c3", False),
]
LOAD_SECS = 1800   # the server launched this long before its session's first trial (load, smoke, probe)
LINGER_SECS = 600  # and stopped this long after its last (AUTO_STOP's tally, the stop itself)


def write_sessions(run: str, job_name: str, prefix: str, remote_bench: bool) -> None:
    """A run's recording: per job dir one server session (a remote bench job beside the first when
    harbor ran as an HF Job), launched before its first trial and stopped after its last."""
    out = HERE / "state" / run
    out.mkdir(parents=True, exist_ok=True)
    jobs, lines, stopped = [], [], []
    job_dirs = sorted(d for d in JOBS.glob(f"{job_name}*") if d.name == job_name or d.name.startswith(job_name + "-retry-"))
    for i, job_dir in enumerate(job_dirs):
        first, last = trial_window(job_dir)
        created = first - timedelta(seconds=LOAD_SECS)
        running = int((last - created).total_seconds()) + LINGER_SECS - 300
        server = job(f"{prefix}a0c0ffee{i:016d}", flavor="h200", created=iso(created), sched=300, running=running,
                     stage="CANCELED", labels=run_labels("server", f"{prefix}{i:012x}", run), port=30000,
                     command=["sglang", "serve", "--model-path", "Qwen/Qwen3.8-27B-FP8"])
        endpoint = f"https://{server['id']}--30000.hf.jobs/v1"
        jobs.append(server)
        lines += [manifest_line(iso(created - timedelta(seconds=2)), "launch-intent",
                                {"role": "server", "launch_id": server["labels"]["launch"]}, run),
                  manifest_line(iso(created + timedelta(seconds=1)), "serve",
                                {"role": "server", "job_id": server["id"], "namespace": NS, "endpoint": endpoint,
                                 "launch_id": server["labels"]["launch"]}, run)]
        bench_at = first - timedelta(seconds=20)
        if i == 0 and remote_bench:
            bench = job(f"{prefix}b0c0ffee{i:016d}", flavor="cpu-upgrade", created=iso(bench_at - timedelta(seconds=40)),
                        sched=30, running=int((last - bench_at).total_seconds()) + 60, stage="COMPLETED",
                        labels=run_labels("bench", f"{prefix}b{i:011x}", run), image="python:3.12",
                        command=["bash", "-c", "make bench"])
            jobs.append(bench)
            lines += [manifest_line(iso(bench_at - timedelta(seconds=42)), "launch-intent",
                                    {"role": "remote-bench", "launch_id": bench["labels"]["launch"]}, run),
                      manifest_line(iso(bench_at - timedelta(seconds=39)), "bench",
                                    {"role": "remote-bench", "job_id": bench["id"], "job_name": job_dir.name,
                                     "bucket": "alice/tb", "endpoint": endpoint,
                                     "launch_id": bench["labels"]["launch"]}, run)]
        else:
            lines.append(manifest_line(iso(bench_at), "bench" if i == 0 else "mopup",
                                       {"role": "bench" if i == 0 else "mopup", "job_name": job_dir.name,
                                        "jobs_dir": "examples/jobs", "endpoint": endpoint}, run))
        stopped.append(created + timedelta(seconds=300 + running + 2))
        lines.append(manifest_line(iso(stopped[-1]), "server-stop",
                                   {"role": "server", "job_id": server["id"], "namespace": NS}, run))
    (out / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    boxes, logs = sandboxes(job_name, prefix)
    # Recorded once the run was over (make cost after its last session), as example-terminus2's was.
    recorded_at = iso((max(stopped) + timedelta(minutes=10)).replace(second=0))
    (out / "hf-recorded.json").write_text(recording(run, jobs, boxes, logs, recorded_at))


if __name__ == "__main__":
    main()
