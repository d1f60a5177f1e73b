"""Real services for tests and benchmarks, started on 127.0.0.1 and stopped again.

* :class:`Postgres` — a throw-away PostgreSQL cluster from the system's own binaries: ``initdb`` into a
  fresh temporary folder (trust authentication, so no password exists anywhere), ``pg_ctl start`` on a
  free port listening on 127.0.0.1 only, its unix socket inside that folder; ``pg_ctl stop -m fast`` and
  the folder removed at the end. PostgreSQL refuses to run as root; when the tests run as root the
  server's commands run as an unprivileged system user (``postgres`` if it exists, else ``nobody``)
  through ``runuser -u USER --``, and the folder is handed to that user. Client connections need no
  such care: they log in as the cluster's superuser ``ragexp`` over TCP.
* :class:`MlflowServer` — ``mlflow server`` with that PostgreSQL as its backend store and artifacts served
  by the server itself (``--serve-artifacts --artifacts-destination``), so clients need no shared disk.
  ``stop()`` / ``start()`` restart it on the same port, database and artifacts (for fault tests).

A benchmark can use them too: ``sys.path.insert(0, "tests"); from services import Postgres, MlflowServer``.
When ``initdb`` / ``pg_ctl`` are not installed, :func:`pg_bin_dir` returns None and the pytest fixtures
skip with that reason (:data:`MISSING_POSTGRES`).
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from cli import free_port, start_mlflow_server
from ragexp.cli.ui import stop_process_group

#: The cluster's superuser, the name clients log in with (trust authentication: no password).
PG_USER = "ragexp"
MISSING_POSTGRES = ("PostgreSQL's server binaries (initdb, pg_ctl) are not installed: "
                    "apt-get install postgresql (or put their folder on PATH)")


def pg_bin_dir() -> Path | None:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``: PATH first, then Debian's versioned folders."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(os.path.realpath(found)).parent
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):  # newest version first
        if Path(folder, "initdb").is_file() and Path(folder, "pg_ctl").is_file():
            return Path(folder)
    return None


def _server_user() -> str | None:
    """The unprivileged user PostgreSQL's server runs as when we are root; None when we are not root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise RuntimeError("running as root and neither the 'postgres' nor the 'nobody' user exists: "
                       "PostgreSQL refuses to run as root")


class Postgres:
    """A PostgreSQL cluster of its own on 127.0.0.1:``port``; ``uri`` names its database ``ragexp``."""

    def __init__(self, database: str = "ragexp"):
        bindir = pg_bin_dir()
        if bindir is None:
            raise RuntimeError(MISSING_POSTGRES)
        self.bin = bindir
        self.user = _server_user()
        self.port = free_port()
        self.database = database
        self.root = Path(tempfile.mkdtemp(prefix="ragexp-pg-"))  # not under pytest's root-only tmp folders
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        self._databases = 0

    # --- commands, as the server's user when we are root ------------------------------------------------
    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        cmd = [str(self.bin / args[0]), *args[1:]]
        if self.user is not None:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=self.root,
                              env={**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"})
        if proc.returncode != 0:
            log = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}\n{log}")
        return proc

    def start(self) -> "Postgres":
        if self.user is not None:
            shutil.chown(self.root, user=self.user)
        if not (self.data / "PG_VERSION").exists():
            self._run("initdb", "-D", str(self.data), "-U", PG_USER, "--auth=trust", "-E", "UTF8", "--no-sync")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60",
                  "-o", f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.data} -c fsync=off", "start")
        if not getattr(self, "_created", False):
            atexit.register(self.close)  # a benchmark or session that ends early leaves no server behind
            self.create_database(self.database)
            self._created = True
        return self

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def close(self) -> None:
        """Stop the server and remove its folder."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    # --- databases -------------------------------------------------------------------------------------
    def uri_of(self, database: str, driver: str = "") -> str:
        """``postgresql://ragexp@127.0.0.1:PORT/<database>`` (``driver="psycopg"`` → ``postgresql+psycopg://``)."""
        scheme = f"postgresql+{driver}" if driver else "postgresql"
        return f"{scheme}://{PG_USER}@127.0.0.1:{self.port}/{database}"

    @property
    def uri(self) -> str:
        return self.uri_of(self.database)

    def create_database(self, name: str | None = None) -> str:
        """A new empty database (a fresh name when none is given); returns its ``postgresql://`` URI."""
        if name is None:
            self._databases += 1
            name = f"db{self._databases}"
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", PG_USER, name)
        return self.uri_of(name)

    def sql(self, statement: str, database: str | None = None) -> str:
        """Run one SQL statement with ``psql``; its unaligned, tuples-only output."""
        return self._run("psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", PG_USER, "-d",
                         database or self.database, "-At", "-v", "ON_ERROR_STOP=1", "-c", statement).stdout

    def __enter__(self) -> "Postgres":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


class MlflowServer:
    """``mlflow server`` on 127.0.0.1:``port`` over a database of ``postgres``, serving its own artifacts.

    ``uri`` is ``http://127.0.0.1:PORT``; ``stop()`` ends it (the process group: uvicorn's workers too) and
    ``start()`` brings it back on the same port, database and artifact folder.
    """

    def __init__(self, postgres: Postgres, folder: Path, database: str | None = None, workers: int = 2):
        self.postgres = postgres
        self.folder = Path(folder)
        self.backend = postgres.create_database(database).replace("postgresql://", "postgresql+psycopg://", 1)
        self.port = free_port()
        self.workers = workers
        self.proc: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "MlflowServer":
        if self.proc is None or self.proc.poll() is not None:
            env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
            self.proc = start_mlflow_server(self.folder, self.port, env=env, backend_uri=self.backend,
                                            workers=self.workers)
            atexit.register(self.stop)
        return self

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        stop_process_group(proc, term_wait=20)
        deadline = time.time() + 10  # the port is free again once uvicorn's workers are gone
        while time.time() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)

    def __enter__(self) -> "MlflowServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
