"""Labelled data for `hf-jepa probe`: images through the image recipes' loader (`load_image_splits`: MNIST, its
embedded scikit-learn digits, an imagefolder, a `datasets` folder or Hub id) and text classification sets (the embedded
CPython-documentation topics, or a `datasets` folder / CSV / JSON(L) file with a text and a label column), each cut to
a seeded sample of the train and test splits."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

logger = logging.getLogger(__name__)

EMBEDDED_TOPICS = "embedded CPython documentation sentences, coarse topic classes (hf-jepa)"
MNIST_KEYWORDS = (None, "hub", "embedded")  # the sources `load_image_splits` reads at MNIST's own 28x28 only


@dataclass
class ProbeData:
    """Train and test inputs (uint8 images `(N, H, W)` or lists of texts) with int64 labels, where they came from,
    and the class names when the source has them."""

    kind: str
    source: str
    train_inputs: object
    train_labels: torch.Tensor
    test_inputs: object
    test_labels: torch.Tensor
    label_names: list[str] | None = None

    @property
    def num_classes(self) -> int:
        return int(max(self.train_labels.max(), self.test_labels.max())) + 1

    @property
    def majority_baseline(self) -> float:
        """The test accuracy of always answering the most frequent test class (the floor every probe must beat)."""
        counts = torch.bincount(self.test_labels, minlength=self.num_classes)
        return float(counts.max() / counts.sum())


def _sample(inputs, labels: torch.Tensor, count: int, seed: int):
    """A seeded random `count` of (inputs, labels) (0 or more than there are: all, in a seeded order)."""
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))
    if count:
        order = order[:count]
    if isinstance(inputs, torch.Tensor):
        return inputs[order], labels[order]
    return [inputs[i] for i in order.tolist()], labels[order]


def _image_data(data, image_column: str, label_column: str, image_size: int | None, channels: int) -> ProbeData:
    from ..data.images import load_image_splits

    # MNIST's own sources decode grey at 28x28 only; the model's image processor resizes them (and repeats grey to
    # three channels) afterwards. A user's source is decoded with the model's channels and size.
    mnist = data in MNIST_KEYWORDS
    size = 28 if mnist or image_size is None else image_size
    splits = load_image_splits(
        data, image_column, label_column, image_size=size, labels_required=True, num_channels=1 if mnist else channels
    )
    return ProbeData(
        "image", splits.source, splits.train_images, splits.train_labels, splits.test_images, splits.test_labels
    )


def _text_data(data, text_column: str, label_column: str) -> ProbeData:
    if data in (None, "embedded"):
        from ..data.text.downstream import topic_classification_task

        task = topic_classification_task()
        return ProbeData(
            "text",
            EMBEDDED_TOPICS,
            task.train_texts,
            torch.tensor(task.train_labels),
            task.test_texts,
            torch.tensor(task.test_labels),
            task.label_names,
        )
    from ..data.images import SPLIT_SEED, TEST_FRACTION, label_indices
    from ..data.user_sources import open_source, rename_columns

    splits = rename_columns(open_source(data), {"text": text_column, "label": label_column}, required=("text", "label"))
    if "train" not in splits:
        raise ValueError(f"no 'train' split (splits: {list(splits)})")
    train = splits["train"]
    test_name = next((name for name in ("test", "validation") if name in splits), None)
    if test_name is None:  # a seeded held-out share, as the image loader does
        parts = train.train_test_split(test_size=TEST_FRACTION, seed=SPLIT_SEED)
        train, test = parts["train"], parts["test"]
    else:
        test = splits[test_name]
    feature = train.features["label"]
    names = list(feature.names) if hasattr(feature, "names") else None
    if names is None and train.num_rows and isinstance(train[0]["label"], str):  # one index per name in both splits
        names = sorted(set(train["label"]) | set(test["label"]))
    train_labels, test_labels = label_indices(train["label"], names), label_indices(test["label"], names)
    return ProbeData(
        "text", f"{data} (in memory)", list(train["text"]), train_labels, list(test["text"]), test_labels, names
    )


def load_probe_data(
    data: str | None,
    kind: str,
    *,
    train_examples: int,
    test_examples: int,
    seed: int,
    image_column: str = "image",
    text_column: str = "text",
    label_column: str = "label",
    image_size: int | None = None,
    num_channels: int = 1,
) -> ProbeData:
    """`ProbeData` of `kind` ("image" or "text") from `data`, cut to seeded samples of `train_examples` /
    `test_examples` (0: all). Image sources: as `hf_jepa.data.images.load_image_splits` (None: `$HF_JEPA_MNIST`, the
    Hub, else the embedded digits), decoded at `image_size` with `num_channels` (grey 28 px for MNIST's own sources). Text sources: None or
    "embedded" for the embedded topic classes, else a folder or file with the named columns (the `test` or
    `validation` split, else a seeded 10% of `train`). Raises `ValueError` for a source without the columns."""
    loaded = (
        _image_data(data, image_column, label_column, image_size, num_channels)
        if kind == "image"
        else _text_data(data, text_column, label_column)
    )
    loaded.train_inputs, loaded.train_labels = _sample(loaded.train_inputs, loaded.train_labels, train_examples, seed)
    loaded.test_inputs, loaded.test_labels = _sample(loaded.test_inputs, loaded.test_labels, test_examples, seed + 1)
    logger.info(
        "Probe data from %s: %d train / %d test examples, %d classes",
        loaded.source,
        len(loaded.train_labels),
        len(loaded.test_labels),
        loaded.num_classes,
    )
    return loaded


__all__ = ["EMBEDDED_TOPICS", "ProbeData", "load_probe_data"]
