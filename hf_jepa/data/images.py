"""A user's images as uint8 tensors: decoding (PNG/JPEG bytes, file paths, PIL images, arrays) to grayscale at the
model's size, labels as class indices, and `ImageSplits` (train/test tensors from a local folder, a Hub id or the head of
a stream) with the same attributes as `MnistSplits`."""

from __future__ import annotations

import io
import logging
from itertools import islice

import numpy as np
import torch

from .mnist import MnistSplits
from .user_sources import open_source, rename_columns

logger = logging.getLogger(__name__)

TEST_FRACTION = 0.1  # held out (seeded) when a source has no test split
SPLIT_SEED = 0


def _to_pil(value):
    from PIL import Image as PILImage

    if isinstance(value, PILImage.Image):
        return value
    if isinstance(value, dict):  # datasets' undecoded Image: {"bytes", "path"}
        return PILImage.open(io.BytesIO(value["bytes"])) if value.get("bytes") else PILImage.open(value["path"])
    if isinstance(value, (bytes, bytearray)):
        return PILImage.open(io.BytesIO(value))
    array = np.asarray(value)
    if array.dtype != np.uint8:
        array = np.clip(array, 0, 255).astype(np.uint8)
    return PILImage.fromarray(array)


def decode_images(values, size: int) -> torch.Tensor:
    """Images in any form `datasets` yields them, as a uint8 tensor `(N, size, size)`: converted to grayscale (PIL
    "L") and resized (bilinear) where they are not `size` x `size` already."""
    from PIL import Image as PILImage

    arrays = []
    for value in values:
        image = _to_pil(value).convert("L")
        if image.size != (size, size):
            image = image.resize((size, size), PILImage.BILINEAR)
        arrays.append(np.asarray(image, dtype=np.uint8))
    if not arrays:
        return torch.zeros((0, size, size), dtype=torch.uint8)
    return torch.from_numpy(np.stack(arrays))


def label_indices(values, names: list[str] | None = None) -> torch.Tensor:
    """Labels as int64 class indices: integers stay, strings become their index in `names` (default: the sorted
    distinct strings)."""
    values = list(values)
    if values and isinstance(values[0], str):
        names = names or sorted(set(values))
        lookup = {name: index for index, name in enumerate(names)}
        return torch.tensor([lookup[v] for v in values], dtype=torch.int64)
    return torch.tensor([int(v) for v in values], dtype=torch.int64)


class ImageSplits:
    """A user's images decoded into uint8 tensors, with the attributes the image recipes read from `MnistSplits`:
    `source`, `train_images`, `train_labels`, `test_images`, `test_labels` (labels are None without a label column),
    and `stream` (the training `IterableDataset` with columns `image`/`label`, or None in memory).

    In memory (`streaming=False`) every image is decoded once. Streaming, only the first `head` examples of the train
    and test splits are decoded (for evaluation and diagnostics); training reads `stream`. A source without a test
    split gives up a seeded `TEST_FRACTION` of its rows in memory, or its first `head` streamed examples (which the
    training stream then skips)."""

    def __init__(
        self,
        source: str,
        image_column: str = "image",
        label_column: str | None = "label",
        image_size: int = 28,
        streaming: bool = False,
        head: int = 1024,
        labels_required: bool = True,
    ):
        data = open_source(source, streaming=streaming)
        required = ("image", "label") if labels_required else ("image",)
        data = rename_columns(data, {"image": image_column, "label": label_column}, required=required)
        if "train" not in data:
            raise ValueError(f"data={source!r}: no 'train' split (splits: {list(data)})")
        test_name = next((name for name in ("test", "validation") if name in data), None)
        self.stream = None
        kind = "streamed" if streaming else "in memory"
        self.source = f"{source} ({kind})"
        if streaming:
            train = data["train"]
            if test_name is None:
                test = train.take(head)
                train = train.skip(head)
            else:
                test = data[test_name]
            self.stream = train
            self.has_labels = "label" in (train.column_names or [])
            train_head, test_head = list(islice(iter(train), head)), list(islice(iter(test), head))
            self.train_images, self.train_labels = self._from_rows(train_head, image_size)
            self.test_images, self.test_labels = self._from_rows(test_head, image_size)
        else:
            train = data["train"]
            if test_name is None:
                parts = train.train_test_split(test_size=TEST_FRACTION, seed=SPLIT_SEED)
                train, test = parts["train"], parts["test"]
            else:
                test = data[test_name]
            self.has_labels = "label" in train.column_names
            names = (
                train.features["label"].names if self.has_labels and hasattr(train.features["label"], "names") else None
            )
            train_rows, test_rows = train.to_dict(), test.to_dict()
            self.train_images = decode_images(train_rows["image"], image_size)
            self.test_images = decode_images(test_rows["image"], image_size)
            self.train_labels = label_indices(train_rows["label"], names) if self.has_labels else None
            self.test_labels = label_indices(test_rows["label"], names) if self.has_labels else None
        logger.info(
            "Images from %s: %d train / %d test decoded%s",
            self.source,
            len(self.train_images),
            len(self.test_images),
            "" if self.has_labels else " (no labels)",
        )

    def _from_rows(self, rows: list[dict], size: int):
        images = decode_images([row["image"] for row in rows], size)
        labels = label_indices([row["label"] for row in rows]) if self.has_labels else None
        return images, labels


def load_image_splits(
    data: str | None,
    image_column: str = "image",
    label_column: str | None = "label",
    image_size: int = 28,
    streaming: bool = False,
    head: int = 1024,
    labels_required: bool = True,
):
    """The image recipes' data: `MnistSplits` for MNIST's own sources (None, "hub", "embedded", `$HF_JEPA_MNIST`, a
    folder in MNIST's parquet/arrow/save_to_disk layout) with the default columns, in memory; otherwise
    `ImageSplits` over the user's source with the named columns, resized to `image_size`, streamed when asked."""
    mnist_layout = image_column == "image" and label_column == "label" and image_size == 28
    if not streaming and mnist_layout:
        try:
            return MnistSplits(data)
        except FileNotFoundError:
            if data is None or data in ("hub", "embedded"):
                raise
    if data is None or data in ("hub", "embedded"):
        raise ValueError(
            "image_column / label_column / streaming / a model image size other than 28 need a source of your own: "
            "set data= a Hub dataset id or a local folder or file"
        )
    return ImageSplits(data, image_column, label_column, image_size, streaming, head, labels_required)


__all__ = ["ImageSplits", "decode_images", "label_indices", "load_image_splits"]
