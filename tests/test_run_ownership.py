"""A live run is never marked FAILED by a process that cannot see its owner (issue 33).

Real processes in two PID namespaces (``unshare --pid``: containers sharing the host name): a run created
by a live process in a new namespace, whose pid means nothing (or another process) here, must survive
ragexp's clean-up of orphaned runs; runs of this namespace are still closed as before
(tests/test_tracking_failures.py, kill -9). Skipped where unprivileged namespaces are not allowed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import pytest

OWNER = textwrap.dedent("""
    import sys, time
    from mlflow.tracking import MlflowClient
    from ragexp.tracking.store import owner_tags
    client = MlflowClient(sys.argv[1])
    exp = client.create_experiment("ownership")
    run = client.create_run(exp, tags=owner_tags())
    print(run.info.run_id, flush=True)
    sys.stdin.readline()  # alive until the test closes our stdin
""")
CLEANUP = "import sys; from mlflow.tracking import MlflowClient; from ragexp.tracking.store import fail_orphaned_runs; " \
          "print(len(fail_orphaned_runs(MlflowClient(sys.argv[1]))))"


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.integration
@pytest.mark.slow
def test_a_run_owned_in_another_pid_namespace_is_never_marked_failed(tmp_path):
    if not _unshare_works():
        pytest.skip("no PID namespaces here (unshare --pid is not permitted)")
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    owner = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", OWNER, uri],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        run_id = owner.stdout.readline().strip()
        assert run_id, "the owner did not start its run"
        # this host's clean-up: the owner's pid (1 or 2 in its namespace) is no process of ours, or another one
        closed = subprocess.run([sys.executable, "-c", CLEANUP, uri], capture_output=True, text=True, check=True)
        assert closed.stdout.strip() == "0", closed.stderr
        assert MlflowClient(uri).get_run(run_id).info.status == "RUNNING"
    finally:
        owner.stdin.close()
        owner.wait(timeout=60)
