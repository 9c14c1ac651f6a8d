#!/usr/bin/env python3
"""Regenerate what `make cost` and `make sandboxes` read for the bundled example run (deterministic).

    .venv/bin/python examples/make_example_cost.py   (writes examples/state/example-terminus2/)

A bundled example is never served, so it has no real HF jobs to ask about. Instead, it ships
what a real run leaves behind, and the exact answers the `hf` CLI (huggingface_hub 2.4.0,
`--json` output) would have given, recorded once:

    manifest.jsonl     the run's launches, as scripts/lib.sh's append_manifest writes them: a
                       server (serve), a relaunched server the next morning, a remote mop-up
    hf-recorded.json   {"recorded_at", "calls": {"<hf argv>": <its output>}}: hf jobs hardware,
                       hf jobs inspect of each launched job, hf jobs ps of the run's label and of
                       the sandboxes (label hf-sandbox=1), and each sandbox's log lines

tools/cost.py reads the recording with the same code that reads the live CLI (RecordedHf vs
LiveHf), so `make cost RUN=example-terminus2` works offline and its figures never move. The
sandboxes are one per trial attempt, created while the trial set up its environment (as
harbor's hf-sandbox environment does, through huggingface_hub's Sandbox.create). Two infra
errors' sandboxes end with sbx-server's idle shutdown, the reference's worst infra error.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUN = "example-terminus2"
OUT = HERE / "state" / RUN
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


def run_labels(role: str, launch: str) -> dict:
    return {"project": PROJECT, "model": "qwen3_8-27b-fp8", "run": RUN, "role": role, "launch": launch}


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
}


def sandboxes() -> tuple[list[dict], dict[str, list[str]]]:
    rows, logs = [], {}
    for n, result in enumerate(sorted(JOBS.glob("example-terminus2-tb21*/*/result.json"))):
        try:
            r = json.loads(result.read_text())
        except ValueError:
            continue  # the deliberately corrupt one
        setup = t(r["environment_setup"]["started_at"])
        created = setup + timedelta(seconds=5)
        finished = t(r["finished_at"]) + timedelta(seconds=10)
        sched = 10
        running = int((finished - created).total_seconds()) - sched
        jid = f"68b8{n:04x}5a0dbox{n:012d}"
        rows.append(job(jid, flavor="cpu-upgrade", created=created.strftime("%Y-%m-%dT%H:%M:%SZ"), sched=sched,
                        running=running, stage="CANCELED", port=49983, image="python:3.12",
                        labels={"hf-sandbox": "1", "hf-sandbox-mode": "dedicated", "hf-sandbox-nonce": f"{n:032x}"},
                        command=["/bin/sh", "-c", "sbx-server"]))
        trial = result.parent.name
        logs[jid] = ["sbx-server 0.7.0 listening on :49983", *LOGS.get(trial, ["sbx-server: exec pid=201 exited 0"])]
    return rows, logs


def manifest_line(at: str, event: str, extra: dict) -> str:
    base = {"at": at, "event": event, "run": RUN, "commit": "example", "lock_sha256": None,
            "tools": {"harbor": "0.26.0", "huggingface_hub": "2.4.0"}}
    return json.dumps({**base, **extra, "settings": {"SERVER_FLAVOR": "h200", "BENCH_FLAVOR": "cpu-upgrade",
                                                     "SANDBOX_FLAVOR": "cpu-upgrade", "N_CONCURRENT": "3"}},
                      separators=(",", ":"))


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
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
    (OUT / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    boxes, logs = sandboxes()
    calls = {"jobs hardware --json": HARDWARE}
    for row in (*SERVERS, MOPUP):
        calls[f"jobs inspect --json {NS}/{row['id']}"] = [row]
    calls[f"jobs ps -a --json --limit 0 -l project={PROJECT} -l run={RUN} --namespace {NS}"] = [
        as_ps_row(r) for r in (*SERVERS, MOPUP)]
    calls[f"jobs ps -a --json --limit 0 -l hf-sandbox=1 --namespace {NS}"] = [as_ps_row(r) for r in boxes]
    for jid, lines_ in logs.items():
        calls[f"jobs logs {NS}/{jid}"] = "\n".join(lines_) + "\n"
    doc = {"recorded_at": RECORDED_AT,
           "note": "hf CLI answers (huggingface_hub 2.4.0, --json) for the bundled example; written by "
                   "examples/make_example_cost.py. tools/cost.py reads them instead of calling HF.",
           "calls": calls}
    (OUT / "hf-recorded.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
