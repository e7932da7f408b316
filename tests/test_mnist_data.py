import logging

import numpy as np
import pytest
import torch
from datasets import ClassLabel, Dataset, DatasetDict, Features, Image
from PIL import Image as PILImage

from hf_jepa.data import (
    TRAIN_OPERATIONS,
    ModularArithmeticTask,
    images_to_tensor,
    load_mnist,
    mnist_source_description,
    normalize_images,
    random_shift,
    unseen_operations,
)

MNIST_LOGGER = "hf_jepa.data.mnist"


def _tiny_save_to_disk(path, images_per_split=12):
    """A tiny MNIST-layout `save_to_disk` directory (PNG image column, ClassLabel label) with known content."""
    rng = np.random.default_rng(0)
    features = Features({"image": Image(), "label": ClassLabel(names=[str(i) for i in range(10)])})
    splits = {}
    for offset, split in enumerate(("train", "test")):
        arrays = rng.integers(0, 256, (images_per_split, 28, 28), dtype=np.uint8)
        labels = [(i + offset) % 10 for i in range(images_per_split)]
        splits[split] = Dataset.from_dict(
            {"image": [PILImage.fromarray(a) for a in arrays], "label": labels}, features=features
        )
    DatasetDict(splits).save_to_disk(str(path))
    return {split: dataset for split, dataset in splits.items()}


def _pixels_to_uint8(pixel_values, mean=0.1307, std=0.3081):
    """Invert `normalize_images` exactly (to the nearest integer grey level)."""
    return torch.round((pixel_values[:, 0] * std + mean) * 255.0).to(torch.uint8)


def _labels_by_bytes(images, labels):
    table = {}
    for image, label in zip(images.numpy(), labels.tolist()):
        table.setdefault(image.tobytes(), set()).add(label)
    return table


# ------------------------------------------------------------------------------------------------------------ loading


def test_load_shared_parquet_dir(mnist_path, mnist_dataset, caplog):
    assert mnist_dataset["train"].num_rows == 60000
    assert mnist_dataset["test"].num_rows == 10000
    for split in ("train", "test"):
        assert mnist_dataset[split].column_names == ["image", "label"]
        assert mnist_dataset[split].features["label"].num_classes == 10
    assert str(mnist_path) in mnist_source_description(mnist_dataset)
    assert mnist_source_description(mnist_dataset).startswith("local")

    # The source is logged (loading the parquet folder again is cheap: the arrow cache is reused).
    with caplog.at_level(logging.INFO, logger=MNIST_LOGGER):
        again = load_mnist(mnist_path)
    assert any(
        "Loaded MNIST from local" in r.getMessage() and str(mnist_path) in r.getMessage() for r in caplog.records
    )
    assert again["train"].info.description == f"local {mnist_path}"


def test_real_mnist_tensors(mnist_tensors, mnist_dataset):
    images, labels = mnist_tensors["train_images"], mnist_tensors["train_labels"]
    assert images.dtype == torch.uint8 and images.shape == (60000, 28, 28)
    assert labels.dtype == torch.int64 and labels.shape == (60000,)
    assert mnist_tensors["test_images"].shape == (10000, 28, 28)
    assert torch.bincount(labels, minlength=10).min() > 5000  # every digit well represented
    # Row i decodes to the same pixels and label as the dataset's own decoding of row i.
    for index in (0, 12345, 59999):
        row = mnist_dataset["train"][index]
        assert torch.equal(images[index], torch.from_numpy(np.array(row["image"].convert("L"))))
        assert labels[index].item() == row["label"]


def test_load_save_to_disk_dir(tmp_path, monkeypatch, caplog):
    monkeypatch.delenv("HF_JEPA_MNIST", raising=False)
    written = _tiny_save_to_disk(tmp_path / "tiny")
    with caplog.at_level(logging.INFO, logger=MNIST_LOGGER):
        loaded = load_mnist(tmp_path / "tiny")
    assert {k: v.num_rows for k, v in loaded.items()} == {"train": 12, "test": 12}
    assert mnist_source_description(loaded) == f"local {tmp_path / 'tiny'}"
    assert any("Loaded MNIST from local" in r.getMessage() for r in caplog.records)
    images, labels = images_to_tensor(loaded["test"])
    expected, expected_labels = images_to_tensor(written["test"])
    assert torch.equal(images, expected) and torch.equal(labels, expected_labels)


def test_env_var_precedence(tmp_path, monkeypatch):
    _tiny_save_to_disk(tmp_path / "from_env")
    monkeypatch.setenv("HF_JEPA_MNIST", str(tmp_path / "from_env"))
    from_env = load_mnist()
    assert from_env["train"].num_rows == 12
    assert mnist_source_description(from_env) == f"local {tmp_path / 'from_env'}"
    # An explicit source beats the environment variable.
    explicit = load_mnist("embedded")
    assert mnist_source_description(explicit).startswith("embedded")
    # A dangling environment variable is an error, not a silent fallback.
    monkeypatch.setenv("HF_JEPA_MNIST", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_mnist()


def test_offline_falls_back_to_embedded_digits(monkeypatch, caplog):
    monkeypatch.delenv("HF_JEPA_MNIST", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with caplog.at_level(logging.INFO, logger=MNIST_LOGGER):
        dataset = load_mnist()
    description = mnist_source_description(dataset)
    assert "embedded" in description and "offline fallback" in description
    assert any("embedded" in r.getMessage() for r in caplog.records)
    assert set(dataset) == {"train", "test"}
    assert (dataset["train"].num_rows, dataset["test"].num_rows) == (
        1438,
        359,
    )  # scikit-learn's 1,797 digits, 20% per class
    for split in ("train", "test"):
        images, labels = images_to_tensor(dataset[split])
        assert images.dtype == torch.uint8 and images.shape[1:] == (28, 28)
        assert sorted(labels.unique().tolist()) == list(range(10))
        # Digits sit on the centred 20x20 box, MNIST style: the 4-pixel frame is empty.
        assert images[:, :4].sum() == 0 and images[:, 24:].sum() == 0
        assert images[:, :, :4].sum() == 0 and images[:, :, 24:].sum() == 0
        assert images.max() > 200


def test_embedded_split_is_deterministic_and_stratified(embedded_dataset):
    from hf_jepa.data import embedded_digits

    again = embedded_digits()
    assert again["test"]["label"] == embedded_dataset["test"]["label"]
    train_counts = np.bincount(embedded_dataset["train"]["label"], minlength=10)
    test_counts = np.bincount(embedded_dataset["test"]["label"], minlength=10)
    fractions = test_counts / (train_counts + test_counts)
    assert np.all(np.abs(fractions - 0.2) < 0.01)


def test_missing_path_raises(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_JEPA_MNIST", raising=False)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_mnist(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="parquet"):
        load_mnist(tmp_path / "empty")


def test_images_to_tensor_png_and_array_columns():
    rng = np.random.default_rng(1)
    arrays = rng.integers(0, 256, (5, 28, 28), dtype=np.uint8)
    png = Dataset.from_dict(
        {"image": [PILImage.fromarray(a) for a in arrays], "label": [3, 1, 4, 1, 5]},
        features=Features({"image": Image(), "label": ClassLabel(num_classes=10)}),
    )
    from datasets import Array2D, Value

    decoded = Dataset.from_dict(
        {"image": list(arrays), "label": [3, 1, 4, 1, 5]},
        features=Features({"image": Array2D((28, 28), "uint8"), "label": Value("int64")}),
    )
    for dataset in (png, decoded):
        images, labels = images_to_tensor(dataset)
        assert images.dtype == torch.uint8 and images.shape == (5, 28, 28)
        assert labels.dtype == torch.int64 and labels.tolist() == [3, 1, 4, 1, 5]
        assert torch.equal(images, torch.from_numpy(arrays))


def test_normalize_images():
    images = torch.tensor([[[0, 255]]], dtype=torch.uint8)
    out = normalize_images(images, mean=0.5, std=0.25)
    assert out.shape == (1, 1, 1, 2) and out.dtype == torch.float32
    assert torch.allclose(out.flatten(), torch.tensor([-2.0, 2.0]))


# ------------------------------------------------------------------------------------------------- modular arithmetic


def _check_targets(task, images, labels, batch_size, step):
    batch = task.sample_batch(batch_size, step=step)
    table = _labels_by_bytes(images, labels)
    context = _pixels_to_uint8(batch["pixel_values"], task.pixel_mean, task.pixel_std)
    target = _pixels_to_uint8(batch["target_pixel_values"], task.pixel_mean, task.pixel_std)
    for i in range(batch_size):
        context_classes = table[context[i].numpy().tobytes()]  # KeyError: not an image of the split
        target_classes = table[target[i].numpy().tobytes()]
        op = batch["operations"][i].item()
        expected = {(c + op) % task.modulus for c in context_classes}
        assert batch["labels"][i].item() in expected
        # The target image really is an image of class labels[i].
        assert batch["labels"][i].item() in target_classes
    return batch


def test_targets_are_images_of_x_plus_k(embedded_tensors):
    images, labels = embedded_tensors["train_images"], embedded_tensors["train_labels"]
    task = ModularArithmeticTask(images, labels, operations=tuple(range(-9, 10)), seed=3)
    batch = _check_targets(task, images, labels, batch_size=256, step=0)
    assert batch["pixel_values"].shape == (256, 1, 28, 28) and batch["pixel_values"].dtype == torch.float32
    assert batch["target_pixel_values"].shape == (256, 1, 28, 28)
    assert batch["operations"].dtype == torch.int64 and batch["labels"].dtype == torch.int64
    assert batch["labels"].min() >= 0 and batch["labels"].max() <= 9
    assert set(batch["operations"].tolist()) >= {-9, -1, 0, 1, 9}  # negative ops wrap correctly


def test_targets_on_real_mnist(mnist_tensors):
    images, labels = mnist_tensors["train_images"], mnist_tensors["train_labels"]
    task = ModularArithmeticTask(images, labels, seed=0)
    _check_targets(task, images, labels, batch_size=128, step=7)


def test_default_operations_are_plus_minus_one(embedded_tensors):
    task = ModularArithmeticTask(embedded_tensors["train_images"], embedded_tensors["train_labels"])
    assert task.operations == TRAIN_OPERATIONS == (-1, 1)
    ops = torch.cat([task.sample_batch(128, step=s)["operations"] for s in range(4)])
    assert set(ops.tolist()) == {-1, 1}


def test_batches_are_deterministic_per_seed_step_rank(embedded_tensors):
    images, labels = embedded_tensors["train_images"], embedded_tensors["train_labels"]
    task = ModularArithmeticTask(images, labels, seed=5, max_shift=2)
    twin = ModularArithmeticTask(images, labels, seed=5, max_shift=2)

    def same(a, b):
        return all(torch.equal(a[k], b[k]) for k in a)

    reference = task.sample_batch(64, step=3, rank=1)
    task.sample_batch(64, step=4, rank=0)  # drawing other batches in between changes nothing
    assert same(reference, task.sample_batch(64, step=3, rank=1))
    assert same(reference, twin.sample_batch(64, step=3, rank=1))
    assert not torch.equal(reference["pixel_values"], task.sample_batch(64, step=3, rank=0)["pixel_values"])
    assert not torch.equal(reference["pixel_values"], task.sample_batch(64, step=4, rank=1)["pixel_values"])
    other_seed = ModularArithmeticTask(images, labels, seed=6, max_shift=2)
    assert not torch.equal(reference["pixel_values"], other_seed.sample_batch(64, step=3, rank=1)["pixel_values"])


def test_unseen_operations():
    assert unseen_operations(10) == (2, -2, 3, -3, 4, -4, 5, -5, 6, -6, 7, -7, 8, -8, 9, -9)
    assert sorted(unseen_operations(10)) == [k for k in range(-9, 10) if abs(k) >= 2]
    assert unseen_operations(3) == (2, -2)


def test_random_shift_keeps_shape_and_mass(embedded_tensors):
    images = embedded_tensors["train_images"][:64]  # centred digits with an empty 4-pixel frame
    generator = torch.Generator().manual_seed(0)
    shifted = random_shift(images, 3, generator)
    assert shifted.shape == images.shape and shifted.dtype == torch.uint8
    assert torch.equal(shifted.flatten(1).sum(1, dtype=torch.int64), images.flatten(1).sum(1, dtype=torch.int64))
    # Every output is the input translated by some (dy, dx) with |dy|, |dx| <= 3, and the offsets vary.
    offsets = set()
    for original, moved in zip(images, shifted):
        matches = [
            (dy, dx)
            for dy in range(-3, 4)
            for dx in range(-3, 4)
            if torch.equal(torch.roll(original, (dy, dx), dims=(0, 1)), moved)
        ]
        assert matches
        offsets.add(matches[0])
    assert len(offsets) > 5
    assert random_shift(images, 0, generator) is images


def test_random_shift_on_real_mnist(mnist_tensors):
    images = mnist_tensors["test_images"][:500]
    frame_empty = (images[:, :2].sum((1, 2)) == 0) & (images[:, -2:].sum((1, 2)) == 0)
    frame_empty &= (images[:, :, :2].sum((1, 2)) == 0) & (images[:, :, -2:].sum((1, 2)) == 0)
    centred = images[frame_empty]
    assert len(centred) > 400
    shifted = random_shift(centred, 2, torch.Generator().manual_seed(1))
    assert shifted.shape == centred.shape
    assert torch.equal(shifted.flatten(1).sum(1, dtype=torch.int64), centred.flatten(1).sum(1, dtype=torch.int64))
    assert not torch.equal(shifted, centred)


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        (dict(operations=(1, 10)), "operations"),
        (dict(operations=(-10,)), "operations"),
        (dict(operations=()), "operations"),
        (dict(operations=(1, 4), modulus=4), "operations"),
        (dict(images_dtype=torch.float32), "images"),
        (dict(images_dtype=torch.int64), "images"),
        (dict(flat_images=True), "images"),
        (dict(labels_len=5), "labels"),
        (dict(missing_class=True), "class"),
    ],
)
def test_task_rejects_bad_inputs(embedded_tensors, kwargs, argument):
    images, labels = embedded_tensors["train_images"][:200], embedded_tensors["train_labels"][:200]
    kwargs = dict(kwargs)
    if "images_dtype" in kwargs:
        images = images.to(kwargs.pop("images_dtype"))
    if kwargs.pop("flat_images", False):
        images = images.flatten(1)
    if "labels_len" in kwargs:
        labels = labels[: kwargs.pop("labels_len")]
    if kwargs.pop("missing_class", False):
        keep = labels != 7
        images, labels = images[keep], labels[keep]
    with pytest.raises(ValueError, match=argument):
        ModularArithmeticTask(images, labels, **kwargs)


def test_to_dataset_rows_are_consistent(embedded_tensors):
    images, labels = embedded_tensors["train_images"], embedded_tensors["train_labels"]
    task = ModularArithmeticTask(images, labels, seed=2)
    dataset = task.to_dataset(20, batch_size=8)
    assert dataset.num_rows == 20
    assert dataset.column_names == ["image", "operation", "target_image", "label"]
    table = _labels_by_bytes(images, labels)
    for row in dataset.with_format("numpy"):
        context_classes = table[np.asarray(row["image"], dtype=np.uint8).tobytes()]
        target_classes = table[np.asarray(row["target_image"], dtype=np.uint8).tobytes()]
        assert int(row["operation"]) in (-1, 1)
        assert int(row["label"]) in {(c + int(row["operation"])) % 10 for c in context_classes}
        assert int(row["label"]) in target_classes
