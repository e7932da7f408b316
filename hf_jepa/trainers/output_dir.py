"""The output folder of a run: checked before any training, claimed with a lock file, cleared only when asked.

Rules (main process only; the trainer makes the other processes wait and raises the same error on every rank):
- `output_dir` must be a folder (or not exist yet) and writable: checked before the model is built.
- A second writer fails at start: `output_dir/.hf-jepa.lock` (JSON: pid, host, start time, command) names the holder.
  A lock left by a dead process on this host (a crash, kill -9) is taken over with a warning.
- A non-empty folder is refused unless the run resumes or `overwrite_output_dir=True` (which clears it first).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import sys
import time
from pathlib import Path

logger = logging.getLogger(__name__)

LOCK_NAME = ".hf-jepa.lock"


class OutputLock:
    """The lock file of one run in `folder`; `release()` removes it (only if it is still this run's)."""

    def __init__(self, folder: Path, token: str):
        self.path = folder / LOCK_NAME
        self.token = token

    def release(self) -> None:
        try:
            if json.loads(self.path.read_text()).get("token") == self.token:
                self.path.unlink()
        except (OSError, ValueError):
            pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _describe(holder: dict) -> str:
    started = holder.get("start_time")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if isinstance(started, (int, float)) else "?"
    return f"pid {holder.get('pid')} on {holder.get('host')}, started {when}: {holder.get('command', '?')}"


def acquire_lock(folder: Path) -> OutputLock:
    """Create `folder/.hf-jepa.lock` atomically; refuse if a live process holds it, take over a dead one's."""
    token = f"{socket.gethostname()}:{os.getpid()}:{time.time_ns()}"
    holder = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "start_time": time.time(),
        "command": " ".join(sys.argv) or sys.executable,
        "token": token,
    }
    lock = folder / LOCK_NAME
    draft = folder / f"{LOCK_NAME}.{os.getpid()}.{time.time_ns()}"
    draft.write_text(json.dumps(holder))  # complete before it becomes the lock: the lock is never half-written
    try:
        for _ in range(3):
            try:
                os.link(draft, lock)  # atomic; fails if a lock exists
                return OutputLock(folder, token)
            except FileExistsError:
                pass
            try:
                current = json.loads(lock.read_text())
            except FileNotFoundError:
                continue  # released meanwhile: try again
            except (OSError, ValueError):
                current = {}
            same_host = current.get("host") == socket.gethostname()
            pid = current.get("pid")
            if same_host and isinstance(pid, int) and pid != os.getpid() and not _pid_alive(pid):
                logger.warning("Taking over the stale lock of a dead run in %s (%s)", folder, _describe(current))
                lock.unlink(missing_ok=True)
                continue
            raise ValueError(
                f"output_dir {folder} is in use by another run ({_describe(current)}). Wait for it to finish, use "
                f"another output_dir, or delete {lock} if that run is gone."
            )
        raise ValueError(f"could not lock output_dir {folder}: the lock file {lock} keeps changing")
    finally:
        draft.unlink(missing_ok=True)


def _clear(folder: Path) -> None:
    """Delete everything in `folder` but the lock. Refuses folders that hold the working directory or home."""
    resolved = folder.resolve()
    protected = {Path.cwd().resolve(), *Path.cwd().resolve().parents, Path.home().resolve()}
    if resolved in protected:
        raise ValueError(
            f"overwrite_output_dir refuses to clear {folder}: it is the working directory, one of its parents or the "
            "home folder. Use a dedicated output_dir."
        )
    for child in folder.iterdir():
        if child.name == LOCK_NAME:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def prepare_output_dir(output_dir: str, *, resuming: bool, overwrite: bool) -> OutputLock:
    """Check, create and lock `output_dir` before any training; clear it when `overwrite`. Returns the lock."""
    folder = Path(output_dir)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"output_dir {folder} is a file, not a folder: choose a folder path")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = acquire_lock(folder)
    except OSError as error:
        raise ValueError(
            f"output_dir {folder} is not writable ({error.strerror or error}): choose a folder you can write to"
        ) from error
    try:
        contents = sorted(child.name for child in folder.iterdir() if child.name != LOCK_NAME)
        if contents and not resuming:
            if not overwrite:
                shown = ", ".join(contents[:5]) + (", ..." if len(contents) > 5 else "")
                raise ValueError(
                    f"output_dir {folder} is not empty ({shown}): choose a new folder, resume the run in it with "
                    "resume_from_checkpoint=latest, or set overwrite_output_dir=True (--overwrite) to clear it first"
                )
            logger.warning("overwrite_output_dir: clearing %s (%d entries)", folder, len(contents))
            _clear(folder)
    except BaseException:
        lock.release()
        raise
    return lock
