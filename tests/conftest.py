"""Shared fixtures: the real MNIST (decoded once per session, when present), the embedded offline digits, the loopback
Hub, and running code where hf_jepa is not importable. Every test runs offline (set here, before any import)."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"

import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

# One intra-op thread unless told otherwise: the 2-core machine is shared, and oversubscribed OpenMP threads are far
# slower than one thread each.
if "OMP_NUM_THREADS" not in os.environ:
    torch.set_num_threads(1)


REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_MNIST = REPO_ROOT.parent / "shared" / "data" / "mnist"


def mnist_dir() -> Path | None:
    """The real MNIST folder: `$HF_JEPA_MNIST` if set, else `../shared/data/mnist` next to the repository."""
    configured = os.environ.get("HF_JEPA_MNIST")
    path = Path(configured).expanduser() if configured else SHARED_MNIST
    if (path / "train.parquet").exists() or (path / "dataset_dict.json").exists() or any(path.glob("**/train-*")):
        return path
    return None


def run_without_hf_jepa(
    code: str, *, cwd: Path, extra_env: dict | None = None, timeout: int = 120
) -> subprocess.CompletedProcess:
    """Run `code` where hf_jepa is NOT importable (what a trust_remote_code user sees):
    `hf_jepa.testing.remote_code.run_without_hf_jepa` (imported here on first use, so collecting the suite does not
    import hf_jepa)."""
    from hf_jepa.testing.remote_code import run_without_hf_jepa as run

    return run(code, cwd=cwd, extra_env=extra_env, timeout=timeout)


def run_in_terminal(code: str, *, cwd: Path, timeout: int = 240) -> tuple[int, str]:
    """Run `code` in a Python whose stdin, stdout and stderr are a pseudo-terminal, as a user at a shell prompt has
    (with stdin closed or piped, transformers skips its "Do you wish to run the custom code? [y/N]" question, so a
    prompt that blocks a real user would go unseen). Returns (exit status, everything printed). A process still
    running after `timeout` s is killed and reported as status -9."""
    import pty
    import select
    import signal
    import time

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(torch.get_num_threads())}
    pid, fd = pty.fork()
    if pid == 0:  # the child: the terminal is its stdin/stdout/stderr
        os.chdir(cwd)
        os.execve(sys.executable, [sys.executable, "-c", textwrap.dedent(code)], env)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if not ready:
            if os.waitpid(pid, os.WNOHANG) != (0, 0):
                break
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:  # the child closed the terminal (it exited)
            break
        if not data:
            break
        chunks.append(data)
    else:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), b"".join(chunks).decode(errors="replace")


def _skip_reason() -> str:
    configured = os.environ.get("HF_JEPA_MNIST")
    where = f"$HF_JEPA_MNIST={configured!r}" if configured else str(SHARED_MNIST)
    return (
        f"real MNIST not found in {where}: put train.parquet + test.parquet (ylecun/mnist layout) there, "
        "or point HF_JEPA_MNIST at a parquet/arrow/save_to_disk MNIST folder"
    )


@pytest.fixture(scope="session")
def mnist_path() -> Path:
    path = mnist_dir()
    if path is None:
        pytest.skip(_skip_reason())
    return path


@pytest.fixture(scope="session")
def mnist_dataset(mnist_path):
    from hf_jepa.data import load_mnist

    return load_mnist(str(mnist_path))


def _decoded(dataset_dict) -> dict:
    """Both splits decoded once: uint8 images (N, 28, 28) and int64 labels."""
    from hf_jepa.data import images_to_tensor

    train_images, train_labels = images_to_tensor(dataset_dict["train"])
    test_images, test_labels = images_to_tensor(dataset_dict["test"])
    return {
        "train_images": train_images,
        "train_labels": train_labels,
        "test_images": test_images,
        "test_labels": test_labels,
    }


@pytest.fixture(scope="session")
def mnist_tensors(mnist_dataset) -> dict:
    """Real MNIST decoded once: uint8 images (N, 28, 28) and int64 labels for both splits."""
    return _decoded(mnist_dataset)


@pytest.fixture(scope="session")
def embedded_dataset():
    from hf_jepa.data import load_mnist

    return load_mnist("embedded")


@pytest.fixture(scope="session")
def embedded_tensors(embedded_dataset) -> dict:
    return _decoded(embedded_dataset)


@pytest.fixture(scope="session")
def embedded_splits(embedded_dataset):
    """`MnistSplits` on the embedded digits, shared by every trainer test (decoded once)."""
    from hf_jepa.data import MnistSplits

    return MnistSplits("embedded")


@dataclass(frozen=True)
class DigitSplits:
    """`MnistSplits` for tests of headline results: the real MNIST when it is present, else the embedded digits (a
    fresh clone, CI). `real` says which, so a test can pick the thresholds measured on that data."""

    splits: Any
    real: bool
    data: str  # what a recipe's `data` argument names: the MNIST folder, or "embedded"

    @property
    def name(self) -> str:
        return "real MNIST" if self.real else "embedded digits"


@pytest.fixture(scope="session")
def digits_splits() -> DigitSplits:
    """Real MNIST (`mnist_dir()`) if present, else the embedded digits: never skips."""
    from hf_jepa.data import MnistSplits

    path = mnist_dir()
    data = str(path) if path else "embedded"
    return DigitSplits(MnistSplits(data), real=path is not None, data=data)


# ------------------------------------------------------------------------------------------- make test's two workers


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which reads the groups into the test ids
def pytest_collection_modifyitems(config, items):
    """Under `--dist loadgroup` (make test: `-n 2`) a module's tests run on one worker, in order, so its module- and
    class-scoped fixtures (the trained tiny models most modules share) are built once, not once per worker. Modules
    marked `independent` (the docs pages: each runs in a fresh folder) are spread test by test."""
    if not config.getoption("loadgroup", False):  # set in xdist's workers when the controller has --dist loadgroup
        return
    for item in items:
        if not item.get_closest_marker("independent") and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


# ------------------------------------------------------------------------------------------------ loopback Hub


@pytest.fixture(scope="module")
def hub():
    """A loopback Hub server (../shared/docs/hub-protocol.md) for one test module; the suite itself stays offline."""
    from hf_jepa.testing.hub_server import LoopbackHub

    with LoopbackHub() as hub:
        yield hub


@pytest.fixture
def online(hub, tmp_path):
    """Inside this fixture huggingface_hub and transformers talk to `hub`, with a fresh cache; the cache dir."""
    from hf_jepa.testing.hub_server import use_loopback_hub

    with use_loopback_hub(hub, cache_dir=tmp_path / "hf-cache") as cache_dir:
        yield cache_dir
