"""A local two-node Ray cluster on 127.0.0.1 — a head and a worker started with ``ray start``, as on two
machines — for ``execution=ray``'s test (tests/test_ray_shards.py) and its benchmark (bench_ray_shards.py)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ragexp.cli.ui import stop_process_group

ROOT = Path(__file__).resolve().parents[1]


def start_node(args: list[str], log: Path, cwd: Path, cpus: int = 1) -> subprocess.Popen:
    """``ray start ... --block`` from a bare environment (as on another machine), returned once it says it
    started; RuntimeError with the end of its log when it ends or takes 300 s first."""
    ray = shutil.which("ray") or str(Path(sys.executable).parent / "ray")
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(cwd)), "RAY_USAGE_STATS_ENABLED": "0",
           "PYTHONPATH": str(ROOT),  # the nodes run this checkout's ragexp
           "RAY_AUTH_MODE": "disabled", "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
    with open(log, "w") as out:
        proc = subprocess.Popen([ray, "start", *args, "--node-ip-address=127.0.0.1", f"--num-cpus={cpus}",
                                 "--disable-usage-stats", "--block"], env=env, cwd=cwd, start_new_session=True,
                                stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while "Ray runtime started." not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_process_group(proc, term_wait=30, kill_wait=10)
            raise RuntimeError(f"ray start {' '.join(args)} did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    return proc


@contextmanager
def two_nodes(folder: Path) -> Iterator[str]:
    """A head and one worker, one CPU each, on a free port of 127.0.0.1: yields the head's address, stops both."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    head = start_node(["--head", f"--port={port}", "--include-dashboard=false"], folder / "head.log", folder)
    try:
        worker = start_node([f"--address=127.0.0.1:{port}"], folder / "worker.log", folder)
        try:
            yield f"127.0.0.1:{port}"
        finally:
            stop_process_group(worker, term_wait=30, kill_wait=10)
    finally:
        stop_process_group(head, term_wait=30, kill_wait=10)
