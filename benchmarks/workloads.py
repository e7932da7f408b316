"""Training steps of each family at a chosen size, built from the family's own recipe (the batches the trainer
draws), for the efficiency, compile and scaling benchmarks.

`build_workload(family, preset, batch_size, ...)` -> a `Workload` whose `step(bf16)` runs one optimiser step
(forward under autocast when `bf16`, backward, AdamW step), as `JepaTrainer` does minus its bookkeeping."""

import functools
from dataclasses import dataclass

import torch

from hf_jepa.data import MnistSplits
from hf_jepa.data.reasoning import ReasoningData
from hf_jepa.data.text import TextData
from hf_jepa.recipes import load_families
from hf_jepa.recipes.bro_jepa import BroJepaDataArguments
from hf_jepa.recipes.epm_jepa import EpmJepaDataArguments
from hf_jepa.recipes.i_jepa import IJepaDataArguments
from hf_jepa.recipes.jepa_reasoner import JepaReasonerDataArguments
from hf_jepa.recipes.t_jepa import TJepaDataArguments
from hf_jepa.trainers import build_optimizer

# The families whose step is transformer blocks (the issue's >= 50%-of-bf16-peak target applies to them).
TRANSFORMER_FAMILIES = ("t-jepa", "i-jepa", "jepa-reasoner")
FAMILIES = ("t-jepa", "i-jepa", "epm-jepa", "jepa-reasoner", "bro-jepa")
# Enough sentences joined per row that every row fills the longest sequence length swept.
_SENTENCES_PER_LONG_ROW = 48


@dataclass
class Workload:
    family: str
    model: torch.nn.Module
    batch: dict[str, torch.Tensor]
    units: int  # what one step processes, in `unit` (tokens, images, frames, latents, samples)
    unit: str
    shape: str  # the batch's shape in words, for the report

    def __post_init__(self):
        self.model.train()
        self.optimizer = build_optimizer(self.model, 1e-4, 0.05)
        self.forward = self.model  # replaced by the compiled module in `compile()`

    def step(self, bf16: bool = False) -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = self.forward(**self.batch).loss
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def compile(self) -> None:
        """Run the forward through `torch.compile` (inductor), as `TrainingArguments(torch_compile=True)` does."""
        self.forward = torch.compile(self.model)


@functools.cache
def _splits() -> MnistSplits:
    return MnistSplits("embedded")


@functools.cache
def _text(vocab_size: int) -> TextData:
    """The embedded corpus and its tokenizer (trained once per vocabulary size, then shared by every workload)."""
    return TextData("embedded", vocab_size=vocab_size)


@functools.cache
def _reasoning_data(num_train_examples: int) -> ReasoningData:
    return ReasoningData(_reasoning_args(num_train_examples))


def _reasoning_args(num_train_examples: int) -> JepaReasonerDataArguments:
    return JepaReasonerDataArguments(
        task="arithmetic",
        min_operations=1,
        max_operations=2,
        num_train_examples=num_train_examples,
        num_eval_examples=8,
        plot=False,
    )


def build_workload(
    family: str,
    preset: str = "cpu_fast",
    batch_size: int = 32,
    length: int | None = None,
    frames: int | None = None,
    width: int | None = None,
    seed: int = 0,
) -> Workload:
    """One family's training step. `length`: T-JEPA tokens per row (rows of joined sentences, so every row is that
    long); `frames`: EPM-JEPA frames per sequence; `width`: T-JEPA hidden size (MLP 4x, 64-dim heads)."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    spec = load_families()[family]
    torch.manual_seed(seed)
    if family == "t-jepa":
        overrides = {}
        if width is not None:
            overrides.update(hidden_size=width, intermediate_size=4 * width, num_attention_heads=max(1, width // 64))
        if length is not None:
            overrides.update(max_position_embeddings=max(128, length))
        config = spec.make_config(preset, **overrides)
        data_args = TJepaDataArguments(
            data="embedded", max_length=length or 64, diagnostics_sentences=8, downstream=False, plot=False
        )
        recipe = spec.recipe_class(config, data_args, seed=seed, text=_text(config.backbone_config.vocab_size))
        if length is None:
            batch = recipe.train_batch(0, 0, batch_size)
        else:
            texts = recipe.text.train_texts
            rows = [
                " ".join(texts[(i * _SENTENCES_PER_LONG_ROW + j) % len(texts)] for j in range(_SENTENCES_PER_LONG_ROW))
                for i in range(batch_size)
            ]
            batch = recipe._batch_for(rows, step=0, rank=0)
        units, unit = int(batch["attention_mask"].sum()), "tokens"
        shape = f"{batch_size} x {batch['input_ids'].shape[1]} tokens"
    elif family == "i-jepa":
        data_args = IJepaDataArguments(data="embedded", diagnostics_images=8, probe_images=64, plot=False)
        recipe = spec.recipe_class(spec.make_config(preset), data_args, seed=seed, splits=_splits())
        batch = recipe.train_batch(0, 0, batch_size)
        units, unit = batch_size, "images"
        shape = f"{batch_size} images, {recipe.config.grid_size}^2 patches"
    elif family == "epm-jepa":
        data_args = EpmJepaDataArguments(data="embedded", sequence_length=frames or 8, eval_sequences=8, plot=False)
        recipe = spec.recipe_class(spec.make_config(preset, track="epm"), data_args, seed=seed, splits=_splits())
        batch = recipe.train_batch(0, 0, batch_size)
        units, unit = batch["pixel_values"].shape[0] * batch["pixel_values"].shape[1], "frames"
        shape = f"{batch_size} sequences x {batch['pixel_values'].shape[1]} frames"
    elif family == "jepa-reasoner":
        examples = max(batch_size, 64)
        data_args, data = _reasoning_args(examples), _reasoning_data(examples)
        length_needed = data.max_prompt_length + 1 + data.max_answer_length + 8
        config = spec.make_config(
            preset,
            vocab_size=data.vocab_size,
            max_position_embeddings=length_needed,
            num_reasoning_steps=data.max_answer_length,
        )
        recipe = spec.recipe_class(config, data_args, seed=seed, data=data)
        batch = recipe.train_batch(0, 0, batch_size)
        units, unit = int(batch["answer_mask"].sum()), "latents"
        shape = f"{batch_size} problems, {data.max_answer_length} reasoning steps"
    else:
        data_args = BroJepaDataArguments(data="embedded", plot=False, prototype_images=200, eval_images=100)
        recipe = spec.recipe_class(spec.make_config(preset), data_args, seed=seed, splits=_splits())
        batch = recipe.train_batch(0, 0, batch_size)
        units, unit = batch_size, "samples"
        shape = f"{batch_size} image pairs"
    return Workload(family, recipe.build_model(), batch, units, unit, shape)
