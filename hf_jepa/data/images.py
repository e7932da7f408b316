"""A user's images as uint8 tensors: decoding (PNG/JPEG bytes, file paths, PIL images, arrays) to the model's channels
(grayscale or RGB) and size, labels as class indices, and `ImageSplits` (train/test tensors from a local folder, a Hub id or the head of
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
# PIL mode of each channel count a model takes.
IMAGE_MODES = {1: "L", 3: "RGB"}


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


def image_mode(channels: int) -> str:
    """The PIL mode of images for a model with `channels` input channels ("L" for 1, "RGB" for 3); `ValueError`
    naming `num_channels` otherwise."""
    if channels not in IMAGE_MODES:
        raise ValueError(f"num_channels must be one of {sorted(IMAGE_MODES)} (grey or RGB images), got {channels!r}")
    return IMAGE_MODES[channels]


def decode_images(values, size: int, channels: int = 1) -> torch.Tensor:
    """Images in any form `datasets` yields them, as a uint8 tensor: `(N, size, size)` for one channel (converted to
    grayscale, PIL "L"), `(N, 3, size, size)` channel-first for three (PIL "RGB"); resized (bilinear) where they are
    not `size` x `size` already."""
    from PIL import Image as PILImage

    mode = image_mode(channels)
    arrays = []
    for value in values:
        image = _to_pil(value).convert(mode)
        if image.size != (size, size):
            image = image.resize((size, size), PILImage.BILINEAR)
        array = np.asarray(image, dtype=np.uint8)
        arrays.append(array if channels == 1 else array.transpose(2, 0, 1))
    if not arrays:
        return torch.zeros((0, size, size) if channels == 1 else (0, channels, size, size), dtype=torch.uint8)
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
    and `stream` (the training `IterableDataset` with columns `image`/`label`, or None in memory). Images are
    `(N, H, W)` grey for `num_channels=1`, `(N, 3, H, W)` RGB for `num_channels=3` (`decode_images`).

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
        num_channels: int = 1,
    ):
        image_mode(num_channels)  # a bad channel count fails before the data is opened
        self.num_channels = num_channels
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
            self.train_images = decode_images(train_rows["image"], image_size, num_channels)
            self.test_images = decode_images(test_rows["image"], image_size, num_channels)
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
        images = decode_images([row["image"] for row in rows], size, self.num_channels)
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
    num_channels: int = 1,
):
    """The image recipes' data: `MnistSplits` for MNIST's own sources (None, "hub", "embedded", `$HF_JEPA_MNIST`, a
    folder in MNIST's parquet/arrow/save_to_disk layout) with the default columns, in memory, for a grey 28 px model;
    otherwise `ImageSplits` over the user's source with the named columns, resized to `image_size`, decoded to
    `num_channels` (1: grey, 3: RGB), streamed when asked."""
    image_mode(num_channels)
    mnist_layout = image_column == "image" and label_column == "label" and image_size == 28 and num_channels == 1
    if not streaming and mnist_layout:
        try:
            return MnistSplits(data)
        except FileNotFoundError:
            if data is None or data in ("hub", "embedded"):
                raise
    if data is None or data in ("hub", "embedded"):
        raise ValueError(
            "image_column / label_column / streaming / a model image size other than 28 / an RGB model (num_channels=3) "
            "need a source of your own: set data= a Hub dataset id or a local folder or file"
        )
    return ImageSplits(data, image_column, label_column, image_size, streaming, head, labels_required, num_channels)


__all__ = ["IMAGE_MODES", "ImageSplits", "decode_images", "image_mode", "label_indices", "load_image_splits"]
