"""Writing a command's outputs without harming what is there (docs/guarantees.md, "Your files"):

* an output is written to a temporary file beside it and renamed into place once whole, so a full disk
  or a kill leaves the earlier file (or none), never a truncated one;
* an output that is one of the command's inputs (the same file, by any path or link) is refused before
  any work, in one line;
* a write that fails (``No space left on device``, a read-only folder) is one line naming the file, exit
  status :data:`SAVE_FAILED` (docs/errors.md), not the bad-input status.

    >>> import tempfile; d = Path(tempfile.mkdtemp()); f = d / "out.txt"
    >>> write_atomic(f, lambda fh: fh.write("whole\\n")); f.read_text(), sorted(p.name for p in d.iterdir())
    ('whole\\n', ['out.txt'])
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from ragexp.errors import ConfigError, RagexpError, SaveError

#: the exit status of a command whose output could not be written (a full disk, a read-only folder)
SAVE_FAILED = 4


def exit_status(exc: RagexpError) -> int:
    """The exit status of a command stopped by ``exc``: :data:`SAVE_FAILED` for an output that could not be
    written, else 2 (bad input or config)."""
    return SAVE_FAILED if isinstance(exc, SaveError) else 2


#: What a write that failed for want of room or permission raises (not the user's input being wrong)
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG)


def write_failure(exc: BaseException) -> str | None:
    """The one line for an OSError of a write that found no room (a full disk, a quota, a read-only file
    system) — e.g. Hydra saving a job's ``config.yaml`` — naming the file; None for any other error.

    >>> write_failure(OSError(errno.ENOSPC, "No space left on device", "/data/out/config.yaml"))
    'could not write /data/out/config.yaml: No space left on device'
    """
    if not isinstance(exc, OSError) or exc.errno not in WRITE_ERRNOS:
        return None
    return f"could not write {exc.filename or _file_being_written(exc) or 'a file'}: {exc.strerror or exc}"


def _file_being_written(exc: BaseException) -> str | None:
    """The name of the file open for writing nearest to where ``exc`` was raised (a write or close that
    fails carries no file name): a local variable of the failing frames that is an open file."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        for value in frame.f_locals.values():
            name, mode = getattr(value, "name", None), getattr(value, "mode", "")
            if isinstance(name, str) and isinstance(mode, str) and any(m in mode for m in "wax+"):
                return name
    return None


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file (equal resolved paths, or one inode through a hard link)."""
    try:
        if a.resolve() == b.resolve():
            return True
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def refuse_overwriting(outputs: Mapping[str, Path], inputs: Iterable[Path]) -> None:
    """One line (a :class:`ConfigError`, before any work) when an output would replace an input, or two
    outputs are one file; ``outputs``: setting name → path."""
    inputs = [Path(p) for p in inputs]
    for key, out in outputs.items():
        for given in inputs:
            if same_file(Path(out), given):
                raise ConfigError(f"{key}={out} is an input of this command ({given}); it would be overwritten: "
                                  f"choose another {key}")
    names = list(outputs.items())
    for i, (key, out) in enumerate(names):
        for other, path in names[i + 1:]:
            if same_file(Path(out), Path(path)):
                raise ConfigError(f"{key} and {other} are the same file ({out}): choose two different files")


def write_atomic(path: Path, write: Callable[[Any], Any], *, what: str = "") -> None:
    """``write(fh)`` into a temporary file beside ``path`` (UTF-8 text), flushed to disk, then renamed over
    ``path``; on any OSError the temporary file is removed, ``path`` is left as it was, and a
    :class:`SaveError` names the file and the reason."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise SaveError(f"could not write {what or 'the file'} {path}: {reason}; "
                        f"{'the earlier file is as it was' if path.exists() else 'nothing was written there'}"
                        ) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)  # gone already once renamed


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (one of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid > 0
    return True


def remove_leftovers(folder: Path, prefix: str) -> list[Path]:
    """Remove what a process killed with ``kill -9`` left in ``folder`` (it could not clean up): entries named
    ``<prefix><pid>`` followed by ``.`` or ``_`` whose process is gone. An entry of a live process is kept.

    >>> import tempfile; d = Path(tempfile.mkdtemp()); _ = (d / f".t.parquet.{os.getpid()}.part0").write_bytes(b"")
    >>> _ = (d / ".t.parquet.999999999.part0").write_bytes(b""); [p.name for p in remove_leftovers(d, ".t.parquet.")]
    ['.t.parquet.999999999.part0']
    """
    gone: list[Path] = []
    pattern = re.compile(re.escape(prefix) + r"(\d+)[._]")
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return gone
    for entry in entries:
        m = pattern.match(entry.name)
        if m is None or pid_alive(int(m.group(1))):
            continue
        with contextlib.suppress(OSError):
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
            gone.append(entry)
    return gone


__all__ = ["SAVE_FAILED", "WRITE_ERRNOS", "write_failure", "exit_status", "same_file", "refuse_overwriting", "write_atomic", "pid_alive",
           "remove_leftovers"]
