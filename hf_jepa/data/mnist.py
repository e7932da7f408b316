"""MNIST from a local file, the Hub, or an embedded offline fallback, as a `datasets.DatasetDict`."""

import io
import logging
import os
from pathlib import Path

import datasets
import numpy as np
import torch
from datasets import ClassLabel, Dataset, DatasetDict, Features, Image

from .sources import MNIST_HUB_ID, is_offline

logger = logging.getLogger(__name__)

MNIST_ENV_VAR = "HF_JEPA_MNIST"
MNIST_FEATURES = Features({"image": Image(), "label": ClassLabel(names=[str(i) for i in range(10)])})


def _load_local(path: Path) -> DatasetDict:
    if path.is_dir() and (path / "dataset_dict.json").exists():
        return datasets.load_from_disk(str(path))
    for extension, builder in (("parquet", "parquet"), ("arrow", "arrow")):
        files = {split: path / f"{split}.{extension}" for split in ("train", "test")}
        if path.is_dir() and all(f.exists() for f in files.values()):
            return datasets.load_dataset(builder, data_files={k: str(v) for k, v in files.items()})
        if path.is_dir():
            shards = {split: sorted(path.glob(f"**/{split}-*.{extension}")) for split in ("train", "test")}
            if all(shards.values()):
                return datasets.load_dataset(builder, data_files={k: [str(f) for f in v] for k, v in shards.items()})
    raise FileNotFoundError(
        f"MNIST source {str(path)!r} is not a `save_to_disk` directory nor a folder holding train/test "
        "parquet or arrow files (train.parquet + test.parquet, or train-*.parquet + test-*.parquet shards)"
    )


def embedded_digits(seed: int = 0, test_fraction: float = 0.2) -> DatasetDict:
    """scikit-learn's bundled handwritten digits (1,797 real 8x8 scans), upscaled to MNIST's 28x28 layout.

    Each 8x8 image (values 0..16) is resized to 20x20 and centred on a 28x28 canvas, as MNIST centres its 20x20 digits;
    a seeded, class-stratified split keeps `test_fraction` of each class for testing.
    """
    from PIL import Image as PILImage
    from sklearn.datasets import load_digits

    digits = load_digits()
    small = np.clip(digits.images * (255.0 / 16.0), 0, 255).astype(np.uint8)
    canvas = np.zeros((len(small), 28, 28), dtype=np.uint8)
    for index, image in enumerate(small):
        canvas[index, 4:24, 4:24] = np.asarray(PILImage.fromarray(image).resize((20, 20), PILImage.BILINEAR))
    labels = digits.target.astype(np.int64)

    rng = np.random.default_rng(seed)
    test_mask = np.zeros(len(labels), dtype=bool)
    for digit in range(10):
        members = rng.permutation(np.flatnonzero(labels == digit))
        test_mask[members[: int(round(len(members) * test_fraction))]] = True

    def as_dataset(mask):
        pngs = []
        for image in canvas[mask]:
            buffer = io.BytesIO()
            PILImage.fromarray(image).save(buffer, format="PNG")
            pngs.append({"bytes": buffer.getvalue(), "path": None})
        return Dataset.from_dict({"image": pngs, "label": labels[mask].tolist()}, features=MNIST_FEATURES)

    return DatasetDict(train=as_dataset(~test_mask), test=as_dataset(test_mask))


def load_mnist(source: str | os.PathLike | None = None) -> DatasetDict:
    """MNIST as a `DatasetDict` with `train`/`test` splits and `image` / `label` columns.

    Sources, in order of preference: `source` (a local parquet/arrow folder or `save_to_disk` directory; or the
    keywords `"hub"` / `"embedded"`), the `HF_JEPA_MNIST` environment variable, the Hub dataset `ylecun/mnist` (unless
    `HF_HUB_OFFLINE`/`HF_DATASETS_OFFLINE` is set), then the embedded fallback (scikit-learn's real 8x8 digits
    upscaled to 28x28, 1,438 train / 359 test images). The source used is logged and stored in
    `dataset_dict["train"].info.description`.
    """
    if source is None and os.environ.get(MNIST_ENV_VAR):
        source = os.environ[MNIST_ENV_VAR]
        logger.info("MNIST source from $%s", MNIST_ENV_VAR)
    if source == "embedded":
        return _tag(embedded_digits(), "embedded scikit-learn digits upscaled to 28x28")
    if source is not None and source != "hub":
        path = Path(source).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"MNIST source path {str(path)!r} does not exist")
        return _tag(_load_local(path), f"local {path}")
    if source == "hub" or not is_offline():
        try:
            return _tag(datasets.load_dataset(MNIST_HUB_ID), f"Hub {MNIST_HUB_ID}")
        except Exception as error:  # noqa: BLE001 - any network failure means: fall back
            if source == "hub":
                raise
            logger.warning("Could not load %s from the Hub (%s); using the embedded digits", MNIST_HUB_ID, error)
    return _tag(embedded_digits(), "embedded scikit-learn digits upscaled to 28x28 (offline fallback)")


def _tag(dataset_dict: DatasetDict, description: str) -> DatasetDict:
    logger.info("Loaded MNIST from %s: %s", description, {k: v.num_rows for k, v in dataset_dict.items()})
    for split in dataset_dict.values():
        split.info.description = description
    return dataset_dict


def mnist_source_description(dataset_dict: DatasetDict) -> str:
    return next(iter(dataset_dict.values())).info.description or "unknown"


def images_to_tensor(split: Dataset) -> tuple[torch.Tensor, torch.Tensor]:
    """Decode a split once into `(uint8 images (N, 28, 28), int64 labels (N,))` for fast in-memory batching."""
    from PIL import Image as PILImage

    column = split.data.column("image").combine_chunks()
    if column.type.num_fields and column.type.get_field_index("bytes") >= 0:
        blobs = column.field("bytes").to_pylist()
        images = np.stack([np.asarray(PILImage.open(io.BytesIO(blob)).convert("L")) for blob in blobs])
    else:  # already-decoded arrays
        images = np.stack([np.asarray(item, dtype=np.uint8) for item in split.with_format("numpy")["image"]])
    labels = np.asarray(split.data.column("label").to_pylist(), dtype=np.int64)
    return torch.from_numpy(images), torch.from_numpy(labels)


class MnistSplits:
    """MNIST decoded once into uint8 tensors (train/test), shared by several runs of a reproduction."""

    def __init__(self, source: str | None = None):
        dataset = load_mnist(source)
        self.source = mnist_source_description(dataset)
        self.train_images, self.train_labels = images_to_tensor(dataset["train"])
        self.test_images, self.test_labels = images_to_tensor(dataset["test"])
        logger.info(
            "MNIST from %s: %d train / %d test images", self.source, len(self.train_labels), len(self.test_labels)
        )
