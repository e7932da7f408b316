"""Shared fixtures: the real MNIST (decoded once per session, when present) and the embedded offline digits."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"

from pathlib import Path

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


@pytest.fixture(scope="session")
def mnist_tensors(mnist_dataset) -> dict:
    """Real MNIST decoded once: uint8 images (N, 28, 28) and int64 labels for both splits."""
    from hf_jepa.data import images_to_tensor

    train_images, train_labels = images_to_tensor(mnist_dataset["train"])
    test_images, test_labels = images_to_tensor(mnist_dataset["test"])
    return {
        "train_images": train_images,
        "train_labels": train_labels,
        "test_images": test_images,
        "test_labels": test_labels,
    }


@pytest.fixture(scope="session")
def embedded_dataset():
    from hf_jepa.data import load_mnist

    return load_mnist("embedded")


@pytest.fixture(scope="session")
def embedded_tensors(embedded_dataset) -> dict:
    from hf_jepa.data import images_to_tensor

    train_images, train_labels = images_to_tensor(embedded_dataset["train"])
    test_images, test_labels = images_to_tensor(embedded_dataset["test"])
    return {
        "train_images": train_images,
        "train_labels": train_labels,
        "test_images": test_images,
        "test_labels": test_labels,
    }


@pytest.fixture(scope="session")
def embedded_splits(embedded_dataset):
    """`MnistSplits` on the embedded digits, shared by every trainer test (decoded once)."""
    from hf_jepa.trainers.bro_jepa import MnistSplits

    return MnistSplits("embedded")
