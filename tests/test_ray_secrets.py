"""A local Ray sweep (issue 33): the secrets its jobs need reach them without Ray writing them to its logs, and
the Ray instance ragexp starts listens on 127.0.0.1 only. One real 2-job sweep on hydra/launcher=ray; while it
runs, every listening TCP socket of its process tree is read from /proc; after it, every file of Ray's
temporary folder is searched for the secrets."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="the Ray launcher needs the .[cluster] extra (ray)")

EXTRA = "rayextra-SECRET-9137"  # a value hydra.launcher.ray.env_vars names
URL_PASSWORD = "raypw-SECRET-5521"  # a password in a URL ragexp forwards
LOOPBACK = ("127.0.0.1", "::1", "::ffff:127.0.0.1")


@pytest.mark.integration
@pytest.mark.services
@pytest.mark.slow
def test_a_local_ray_sweep_logs_no_secret_and_listens_on_loopback_only(tmp_path, data_dir):
    temp = Path(tempfile.mkdtemp(prefix="rx", dir="/tmp"))  # Ray's sockets live under it: a short path
    env = {"RAY_USAGE_STATS_ENABLED": "0", "MY_EXTRA_VAR": EXTRA,
           "RAGEXP_PARENT_TRACKING_URI": f"http://u:{URL_PASSWORD}@127.0.0.1:9"}
    env = {k: v for k, v in {**os.environ, **env}.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    try:
        _sweep_and_check(tmp_path, data_dir, temp, env)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def _sweep_and_check(tmp_path, data_dir, temp, env):
    args = ["-m", "hydra/launcher=ray", "hydra.launcher.ray.init.num_cpus=2",
            f"+hydra.launcher.ray.init._temp_dir={temp}", "hydra.launcher.ray.env_vars=[MY_EXTRA_VAR]",
            f"data_dir={data_dir}", "metric=exact_match", "dataset.system=strong,weak", "progress=false",
            f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}"]
    proc = subprocess.Popen([sys.executable, "-m", "ragexp", *args], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"})
    listening: dict[tuple[str, str], str] = {}  # (process name, address) -> pid, all seen while it ran
    deadline = time.time() + 600
    while proc.poll() is None and time.time() < deadline:
        for pid, name, address in listening_sockets(proc.pid):
            listening[(name, address)] = pid
        time.sleep(0.2)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-3000:]
    assert "Started a local Ray instance" in err
    names = {name for name, _ in listening}
    assert {"gcs_server", "raylet"} <= names, listening  # Ray's servers were seen listening
    exposed = {key: pid for key, pid in listening.items() if key[1].rsplit(":", 1)[0].strip("[]") not in LOOPBACK}
    assert exposed == {}, f"listening beyond 127.0.0.1: {exposed}"
    assert "listens on" not in err  # no warning: the instance was loopback-only

    files = [p for p in temp.rglob("*") if p.is_file() and not p.is_symlink()]
    assert any(p.name == "runtime_env_agent.log" or "raylet" in p.name for p in files)
    leaks = [str(p) for p in files for s in (EXTRA, URL_PASSWORD) if s.encode() in p.read_bytes()]
    assert leaks == []


def listening_sockets(root: int) -> list[tuple[str, str, str]]:
    """(pid, process name, local address) of every listening TCP socket held by ``root`` or a process under it,
    read from /proc (``ss -ltnp`` reads the same)."""
    listen: dict[str, str] = {}  # socket inode -> local address
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A":  # TCP_LISTEN
                listen[fields[9]] = _address(fields[1], v6)
    found = []
    for pid in _tree(root):
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:[") and link[8:-1] in listen:
                found.append((pid, name, listen[link[8:-1]]))
    return found


def _tree(root: int) -> list[str]:
    children: dict[str, list[str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            children.setdefault(stat.rsplit(")", 1)[1].split()[1], []).append(entry)
    out, todo = [], [str(root)]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _address(hex_address: str, v6: bool) -> str:
    """/proc/net/tcp's ``0100007F:1F90`` as ``127.0.0.1:8080`` (IPv6 as its compressed text)."""
    import ipaddress

    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    if v6:  # four 32-bit words, each in host (little-endian) order
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
        ip = ipaddress.IPv6Address(raw)
        text = str(ip.ipv4_mapped and f"::ffff:{ip.ipv4_mapped}" or ip)
    else:
        text = str(ipaddress.IPv4Address(raw[::-1]))
    return f"{text}:{int(port, 16)}"
