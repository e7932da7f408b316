"""Inference speed of every pipeline task on the folders the trainer writes: latency at batch 1 (median of repeats)
and throughput at batch 256, with the model in fp32 and in bf16 (`pipe.model.to(torch.bfloat16)`).

The models are the families' presets after one training step (`hf_jepa.testing.harness.train_quickly`, the save
path `hf-jepa train` uses), so every folder holds its tokenizer / image processor as a user's would; speed does not
depend on how trained the weights are. A pipeline that fails in a precision is reported with its error, not skipped.

Run alone: `python benchmarks/inference.py [--quick]`; `benchmarks/report.py` (`make benchmark`) runs it."""

import argparse
import dataclasses
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from timing import Spread, repeat_times
from transformers import AutoTokenizer, pipeline

import hf_jepa  # noqa: F401  (registers the custom tasks)
from hf_jepa.recipes import load_families
from hf_jepa.testing.harness import train_quickly

# (report name, task, folder key, input kind, call keyword arguments)
PIPELINE_CASES = (
    ("T-JEPA text features", "feature-extraction", "t-jepa", "text", {}),
    ("T-JEPA pooled embedding", "jepa-feature-extraction", "t-jepa", "text", {}),
    ("I-JEPA image features", "image-feature-extraction", "i-jepa", "image", {}),
    ("I-JEPA pooled embedding", "jepa-feature-extraction", "i-jepa", "image", {}),
    ("BRo-JEPA image features", "image-feature-extraction", "bro-jepa", "image", {}),
    ("BRo-JEPA modular arithmetic", "modular-arithmetic", "bro-jepa", "image", {"operation": 1}),
    ("EPM-JEPA frame features", "image-feature-extraction", "epm-jepa", "image", {}),
    ("EPM-JEPA latent world model", "latent-world-model", "epm-jepa", "frames", {}),
    ("JEPA-Reasoner latent features", "feature-extraction", "jepa-reasoner", "prompt", {}),
    ("Reasoner+Talker latent reasoning", "latent-reasoning", "jepa-mono-talker/pair", "prompt", {}),
    ("Reasoner+Talker text generation", "text-generation", "jepa-mono-talker/pair", "prompt", {}),
    ("Coupled LM text generation", "text-generation", "coupled-lm", "prompt", {}),
    ("COCONUT text generation", "text-generation", "coconut", "prompt", {}),
)
TEXT = "The interpreter reads the source file and compiles it to byte code."


@dataclass
class InferenceRow:
    name: str
    task: str
    precision: str
    latency: Spread | None = None  # seconds per call at batch 1
    throughput: Spread | None = None  # items per second at the large batch
    error: str | None = None
    note: str = ""


# `--quick` (the report test): one standard and one custom task, on the two cheapest folders to write.
QUICK_CASES = ("T-JEPA text features", "BRo-JEPA modular arithmetic")
# Tasks that run one input per forward pass by design (sequences may differ in length): their large-batch figure is
# the list of inputs in one call, without `batch_size`.
ONE_INPUT_PER_FORWARD = ("latent-world-model",)
STANDARD_TASKS = ("feature-extraction", "image-feature-extraction", "text-generation")
# Cheap, offline data settings for writing the folders (applied where a family's data arguments have the field).
_LIGHT_DATA = dict(
    data="embedded",
    plot=False,
    downstream=False,
    diagnostics_sentences=8,
    diagnostics_images=8,
    probe_images=64,
    eval_sequences=8,
    eval_every=0,
    prototype_images=200,
    eval_images=100,
    num_train_examples=256,
    num_eval_examples=8,
)


def _light_data_args(data_args_class, **given):
    names = {field.name for field in dataclasses.fields(data_args_class)}
    return data_args_class(**{k: v for k, v in _LIGHT_DATA.items() if k in names}, **given)


def save_models(root: Path, preset: str, keys: set[str]) -> dict[str, Path]:
    """The folders `keys` name (a family, or "jepa-mono-talker/pair"): the family's `preset` after one training
    step, saved as `hf-jepa train` saves it; folder key -> path."""
    families = load_families()
    folders = {}
    needed = set(keys) | ({"jepa-reasoner"} if "jepa-mono-talker/pair" in keys else set())
    for name in ("t-jepa", "i-jepa", "bro-jepa", "epm-jepa", "jepa-reasoner", "coupled-lm", "coconut"):
        if name not in needed:
            continue
        family = families[name]
        recipe = family.make_recipe(family.make_config(preset), _light_data_args(family.data_args_class))
        train_quickly(recipe, root / name, max_steps=1, per_device_batch_size=4)
        folders[name] = root / name
    if "jepa-mono-talker/pair" not in needed:
        return folders
    talker = families["jepa-mono-talker"]
    data_args = _light_data_args(talker.data_args_class, reasoner=str(folders["jepa-reasoner"]))
    train_quickly(talker.make_recipe(talker.make_config(preset), data_args), root / "talker", max_steps=1)
    folders["jepa-mono-talker/pair"] = root / "talker" / "pair"
    return folders


def _digit(side: int) -> Image.Image:
    pixels = np.zeros((side, side), dtype=np.uint8)
    pixels[side // 4 : side // 2, side // 3 : 3 * side // 4] = 200
    return Image.fromarray(pixels, mode="L").convert("RGB")


def _input(kind: str, pipe, folder: Path):
    config = pipe.model.config
    if kind == "text":
        return TEXT
    if kind == "prompt":  # three in-vocabulary words of the folder's word-level tokenizer
        tokenizer = AutoTokenizer.from_pretrained(folder)
        words = [w for w in tokenizer.convert_ids_to_tokens(list(range(len(tokenizer)))) if not w.startswith("[")]
        return " ".join(words[:3])
    side = getattr(config, "image_size", None) or config.backbone_config.image_size
    if kind == "image":
        return _digit(side)
    return [np.asarray(_digit(side).convert("L"), dtype=np.float32) / 255.0 for _ in range(8)]  # 8 frames


def measure_pipeline(case, folder: Path, precision: str, batch: int, repeats: int) -> InferenceRow:
    name, task, _, kind, kwargs = case
    row = InferenceRow(name, task, precision)
    try:
        # The custom tasks are declared in the folder (`custom_pipelines`); loading them runs the folder's copy.
        pipe = pipeline(task, model=str(folder), trust_remote_code=task not in STANDARD_TASKS)
        if precision == "bf16":
            pipe.model.to(torch.bfloat16)
        given = _input(kind, pipe, folder)
        with torch.inference_mode():
            row.latency = Spread.of(repeat_times(lambda: pipe(given, **kwargs), repeats, warmup=1))
            inputs = [given] * batch
            batched = {} if task in ONE_INPUT_PER_FORWARD else {"batch_size": batch}
            if not batched:
                row.note = "one input per forward (the task's design)"
            times = repeat_times(lambda: pipe(inputs, **batched, **kwargs), max(2, repeats // 3), warmup=1)
            row.throughput = Spread.of(times).scaled(batch)
    except Exception as error:  # reported in the table: a benchmark of every pipeline must show which one fails
        row.error = f"{type(error).__name__}: {str(error).splitlines()[0][:160] if str(error) else ''}"
    return row


def measure_all(preset: str, batch: int, repeats: int, quick: bool = False) -> list[InferenceRow]:
    cases = [case for case in PIPELINE_CASES if not quick or case[0] in QUICK_CASES]
    with tempfile.TemporaryDirectory() as temporary:
        folders = save_models(Path(temporary), preset, {case[2] for case in cases})
        return [
            measure_pipeline(case, folders[case[2]], precision, batch, repeats)
            for case in cases
            for precision in ("fp32", "bf16")
        ]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="tiny presets, batch 8 (a smoke test)")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rows = measure_all("tiny" if args.quick else "cpu_fast", 8 if args.quick else 256, args.repeats, args.quick)
    for row in rows:
        if row.error:
            print(f"{row.name:34s} {row.precision}: FAILED {row.error}")
        else:
            print(
                f"{row.name:34s} {row.precision}: batch 1 {1e3 * row.latency.median:8.2f} ms | "
                f"large batch {row.throughput.median:9.1f} items/s"
            )


if __name__ == "__main__":
    main()
