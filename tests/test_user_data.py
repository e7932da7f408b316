"""Your own data through `datasets`: the image families and T-JEPA train on local files the tests write (an imagefolder
of PNGs, parquet with other column names, text files), in memory and streamed (DataLoader workers, two processes with
disjoint shares, exact resume)."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from datasets import Dataset
from PIL import Image
from safetensors.torch import load_file

from hf_jepa.data.images import ImageSplits, load_image_splits
from hf_jepa.data.streaming import StreamedBatches, stream_batches
from hf_jepa.modeling.bro_jepa import BroJepaConfig
from hf_jepa.modeling.i_jepa import IJepaConfig
from hf_jepa.modeling.t_jepa import TJepaConfig
from hf_jepa.recipes.bro_jepa import BroJepaDataArguments, BroJepaRecipe
from hf_jepa.recipes.i_jepa import IJepaDataArguments, IJepaRecipe
from hf_jepa.recipes.t_jepa import TJepaDataArguments, TJepaRecipe
from hf_jepa.testing.harness import run_in_two_processes, train_quickly

WORDS = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega river stone cloud light".split()


def _digit(label: int, seed: int, size: int = 32) -> np.ndarray:
    rng = np.random.default_rng(seed)
    image = (rng.random((size, size)) * 60).astype(np.uint8)
    image[4 + label : 12 + label, 6:26] = 255  # a bar whose height encodes the class
    return image


@pytest.fixture
def imagefolder(tmp_path):
    """train/<class>/*.png and test/<class>/*.png, 32x32 (the models read 28x28)."""
    root = tmp_path / "images"
    for split, count in (("train", 4), ("test", 2)):
        for label in range(10):
            folder = root / split / str(label)
            folder.mkdir(parents=True)
            for k in range(count):
                Image.fromarray(_digit(label, 100 * label + k + (0 if split == "train" else 50))).save(
                    folder / f"{k}.png"
                )
    return root


def _sentences(count: int, offset: int = 0) -> list[str]:
    rng = np.random.default_rng(offset)
    return [f"item {offset + i} " + " ".join(rng.choice(WORDS, size=8)) for i in range(count)]


def test_imagefolder_trains_i_jepa_and_bro_jepa_in_memory(imagefolder, tmp_path):
    splits = load_image_splits(str(imagefolder), image_size=28)
    assert isinstance(splits, ImageSplits)
    assert splits.train_images.shape == (40, 28, 28) and splits.train_images.dtype == torch.uint8
    assert splits.test_images.shape == (20, 28, 28)
    assert sorted(splits.train_labels.tolist()) == sorted(list(range(10)) * 4)
    # decoding = PIL grayscale + bilinear resize of the very file on disk
    first = Image.open(imagefolder / "train" / "0" / "0.png").convert("L").resize((28, 28), Image.BILINEAR)
    assert any(torch.equal(torch.from_numpy(np.array(first)), image) for image in splits.train_images)

    i_args = IJepaDataArguments(data=str(imagefolder), diagnostics_images=8, probe_images=20, plot=False)
    result = train_quickly(IJepaRecipe(IJepaConfig.tiny(), i_args), tmp_path / "i", max_steps=2)
    assert np.isfinite(result.history[-1]["loss"]) and "probe_accuracy" in result.metrics
    assert str(imagefolder) in result.metrics["data_source"]
    b_args = BroJepaDataArguments(data=str(imagefolder), plot=False)
    result = train_quickly(BroJepaRecipe(BroJepaConfig.tiny(), b_args), tmp_path / "b", max_steps=2)
    assert np.isfinite(result.history[-1]["loss"])


def test_parquet_with_own_column_names(tmp_path):
    rows = {"picture": [], "digit": [], "caption": []}
    for i in range(30):
        rows["picture"].append(_digit(i % 10, i, size=28))
        rows["digit"].append(i % 10)
        rows["caption"].append(f"image {i}")
    Dataset.from_dict(rows).to_parquet(str(tmp_path / "digits.parquet"))
    source = str(tmp_path / "digits.parquet")
    splits = load_image_splits(source, image_column="picture", label_column="digit")
    assert len(splits.train_images) + len(splits.test_images) == 30  # a seeded 10% test split
    images = {bytes(image.numpy()): int(label) for image, label in zip(splits.train_images, splits.train_labels)}
    assert images[bytes(_digit(3, 3, size=28))] == 3 or images.get(bytes(_digit(3, 13, size=28))) == 3
    with pytest.raises(ValueError, match=r"image_column='image'.*columns are \['picture', 'digit', 'caption'\]"):
        load_image_splits(source)
    with pytest.raises(ValueError, match="label_column='class'"):
        load_image_splits(source, image_column="picture", label_column="class")
    # T-JEPA reads the caption column as its text
    (tmp_path / "text.parquet").unlink(missing_ok=True)
    Dataset.from_dict({"body": _sentences(60), "id": list(range(60))}).to_parquet(str(tmp_path / "text.parquet"))
    args = TJepaDataArguments(
        data=str(tmp_path / "text.parquet"), text_column="body", diagnostics_sentences=8, downstream=False, plot=False
    )
    recipe = TJepaRecipe(TJepaConfig.tiny(), args)
    assert len(recipe.text.train_texts) == 48 and all(t.startswith("item ") for t in recipe.text.train_texts)
    with pytest.raises(ValueError, match="text_column='text'"):
        TJepaRecipe(TJepaConfig.tiny(), TJepaDataArguments(data=str(tmp_path / "text.parquet")))


def test_text_files_folder_trains_t_jepa(tmp_path):
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "a.txt").write_text("\n".join(_sentences(40)) + "\n\n")
    (folder / "b.txt").write_text("\n".join(_sentences(40, offset=40)))
    args = TJepaDataArguments(data=str(folder), diagnostics_sentences=8, downstream=False, plot=False)
    recipe = TJepaRecipe(TJepaConfig.tiny(), args)
    texts = recipe.text.train_texts + recipe.text.validation_texts + list(recipe.text.corpus["test"]["text"])
    assert sorted(texts) == sorted(_sentences(40) + _sentences(40, offset=40))  # blank lines dropped
    result = train_quickly(recipe, tmp_path / "run", max_steps=2)
    assert np.isfinite(result.history[-1]["loss"])


def _text_parquet(tmp_path, count=200) -> str:
    path = tmp_path / "stream.parquet"
    Dataset.from_dict({"body": _sentences(count)}).to_parquet(str(path))
    return str(path)


def _streaming_recipe(source, workers=0):
    args = TJepaDataArguments(
        data=source,
        text_column="body",
        streaming=True,
        num_workers=workers,
        diagnostics_sentences=8,
        downstream=False,
        plot=False,
    )
    return TJepaRecipe(TJepaConfig.tiny(), args)


def test_streamed_batches_do_not_depend_on_workers_and_restart_at_any_index(tmp_path):
    source = _text_parquet(tmp_path)
    recipe = _streaming_recipe(source)
    # no validation split: the first diagnostics_sentences (8) texts are held out and the training stream skips them
    assert recipe.text.validation_texts == _sentences(200)[:8]
    assert recipe.text.train_texts == _sentences(200)[8:]
    serial = recipe.train_stream(0, 1, 4, start=0)
    first = [next(serial) for _ in range(6)]
    assert [index for index, _ in first] == list(range(6))
    with_workers = _streaming_recipe(source, workers=2).train_stream(0, 1, 4, start=0)
    for (index, batch), (other_index, other) in zip(first, [next(with_workers) for _ in range(6)]):
        assert index == other_index and batch.keys() == other.keys()
        for key in batch:
            assert torch.equal(batch[key], other[key]), key
    resumed = recipe.train_stream(0, 1, 4, start=3)
    for index, batch in first[3:]:
        got_index, got = next(resumed)
        assert got_index == index and all(torch.equal(batch[k], got[k]) for k in batch)


def test_streamed_resume_matches_an_uninterrupted_run(tmp_path):
    source = _text_parquet(tmp_path, count=300)
    common = dict(max_steps=4, per_device_batch_size=4, save_steps=2, logging_steps=1, mixed_precision="no")
    straight = train_quickly(_streaming_recipe(source, workers=2), tmp_path / "straight", **common)
    # A run that stopped after its step-2 checkpoint (its later state is set aside on resume), resumed with 1 worker.
    train_quickly(_streaming_recipe(source, workers=2), tmp_path / "resumed", **common)
    checkpoint = tmp_path / "resumed" / "checkpoints" / "checkpoint-2"
    resumed = train_quickly(
        _streaming_recipe(source, workers=1), tmp_path / "resumed", resume_from_checkpoint=str(checkpoint), **common
    )
    assert [r["loss"] for r in resumed.history] == [r["loss"] for r in straight.history]
    a = load_file(str(tmp_path / "straight" / "model.safetensors"))
    b = load_file(str(tmp_path / "resumed" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _two_rank_worker(source, output_dir):
    import torch.distributed as dist

    from hf_jepa.data.user_sources import open_source

    rank = dist.get_rank()
    stream = open_source(source, streaming=True)["train"]
    batches = StreamedBatches(stream, lambda raw, index, r: {"ids": torch.tensor(raw["id"])}, 5, rank, 2, start=0)
    seen = [batch["ids"].tolist() for _, (_, batch) in zip(range(4), stream_batches(batches, num_workers=2))]
    result = train_quickly(
        _streaming_recipe(source.replace("ids", "stream"), workers=1),
        Path(output_dir) / "run",
        max_steps=2,
        per_device_batch_size=4,
        mixed_precision="no",
    )
    info = {"seen": seen, "loss": result.history[-1]["loss"]}
    (Path(output_dir) / f"rank{rank}.json").write_text(json.dumps(info))


def test_two_processes_stream_disjoint_shares(tmp_path):
    Dataset.from_dict({"id": list(range(40))}).to_parquet(str(tmp_path / "ids.parquet"))
    _text_parquet(tmp_path, count=300)
    run_in_two_processes(_two_rank_worker, str(tmp_path / "ids.parquet"), str(tmp_path))
    infos = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    seen = [sum(info["seen"], []) for info in infos]
    assert set(seen[0]).isdisjoint(seen[1])
    assert sorted(seen[0] + seen[1]) == list(range(40))  # each rank: 20 ids = 4 batches of 5, together all 40
    assert seen[0] == list(range(0, 40, 2)) and seen[1] == list(range(1, 40, 2))  # one file: example striding
    assert infos[0]["loss"] == pytest.approx(infos[1]["loss"], abs=1e-6)  # the logged loss is the mean over ranks


def test_streaming_settings_are_validated():
    with pytest.raises(ValueError, match="streaming=true needs data="):
        TJepaDataArguments(streaming=True)
    with pytest.raises(ValueError, match="ambiguity corpus is generated"):
        TJepaDataArguments(streaming=True, corpus="ambiguity", data="x.txt")
    with pytest.raises(ValueError, match="need a source of your own"):
        load_image_splits(None, streaming=True)
