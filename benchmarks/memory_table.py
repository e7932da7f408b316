"""Per-device training memory of the full-size models: parameters, gradients, AdamW state, EMA target copy and
activations, for DDP and for FSDP2/ZeRO-3 over N devices, with and without gradient checkpointing.

Parameters, gradients, optimizer state and the EMA copy are counted on the meta device (exact). Activations are the
bytes autograd keeps for backward (`saved_tensors_hooks`, unique storages, parameters excluded), measured on this CPU
under bf16 autocast at the full width and sequence length with 1 and 2 blocks and batch 1 and 2, and extrapolated to
the full depth and the stated batch (every block saves the same tensors; the part that does not grow with the batch is
chiefly autocast's bf16 weight copies). With checkpointing on, a block keeps its input only; the recomputation of one
block at a time during backward is not in the figure.
What this measures differs from a GPU in two ways: the CPU's SDPA kernel keeps the attention matrix for backward
(GPU flash / memory-efficient kernels do not, so the no-checkpointing column overstates that part), and allocator
fragmentation and temporary buffers are not counted. Check against `torch.cuda.max_memory_allocated` on a GPU
(`benchmarks/device_check.py`).

    python benchmarks/memory_table.py [--devices 8] [--out research/speed/memory_table/memory_table.md]
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

import torch

from hf_jepa.modeling.jepa_reasoner import JepaReasonerConfig, JepaReasonerModel, MonoTalkerConfig, MonoTalkerModel
from hf_jepa.modeling.t_jepa import TJepaConfig, TJepaModel

GIB = 1024**3


@contextlib.contextmanager
def saved_bytes(model: torch.nn.Module):
    """Bytes of the distinct storages autograd saves for backward inside the block (parameters excluded)."""
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages: dict[int, int] = {}
    result = {"bytes": 0}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        yield result
    result["bytes"] = sum(storages.values())


def _t_jepa(layers: int | None):
    config = TJepaConfig.full() if layers is None else TJepaConfig.full(num_hidden_layers=layers)
    return TJepaModel, config


def _reasoner(layers: int | None):
    if layers is None:
        return JepaReasonerModel, JepaReasonerConfig.full()
    # The token encoder and the reasoning stack have the same blocks: scale both together.
    return JepaReasonerModel, JepaReasonerConfig.full(num_hidden_layers=layers, num_encoder_layers=layers)


def _talker(layers: int | None):
    config = MonoTalkerConfig.full() if layers is None else MonoTalkerConfig.full(num_hidden_layers=layers)
    return MonoTalkerModel, config


def _depth(name: str, config) -> int:
    if name == "reasoner":
        return config.num_hidden_layers + config.num_encoder_layers
    if name == "t-jepa":  # the BERT backbone's layers (the small predictor is counted in the base)
        return config.backbone_config.num_hidden_layers
    return config.num_hidden_layers


def _batch(name: str, config, batch: int, length: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    if name == "t-jepa":
        vocab = config.backbone_config.vocab_size
        input_ids = torch.randint(5, vocab, (batch, length), generator=generator)
        target_mask = torch.zeros(batch, length, dtype=torch.bool)
        target_mask[:, length // 4 : length // 4 + length // 7] = True  # ~15% of the tokens
        return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "target_mask": target_mask}
    half = length // 2
    ids = torch.randint(5, config.vocab_size, (batch, half), generator=generator)
    mask = torch.ones_like(ids)
    if name == "reasoner":
        return {"prompt_ids": ids, "prompt_mask": mask, "answer_ids": ids.flip(1), "answer_mask": mask}
    return {"answer_ids": ids, "answer_mask": mask, "latents": torch.randn(batch, half, config.latent_size)}


def _saved(name: str, build, layers: int, batch: int, length: int, checkpointing: bool) -> int:
    model_class, config = build(layers)
    torch.manual_seed(0)
    model = model_class(config).train()
    if checkpointing:
        model.gradient_checkpointing_enable()
    inputs = _batch(name, config, batch, length)
    with saved_bytes(model) as saved, torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(**inputs).loss
    del loss
    return saved["bytes"]


def measure_activations(name: str, build, length: int, checkpointing: bool) -> tuple[float, float]:
    """(bytes per sample, fixed bytes) saved for backward at the full depth and `length` tokens per sample.

    From 1- and 2-block models (every block saves the same tensors) at batch 1 and 2: the fixed part is what does not
    grow with the batch, chiefly autocast's bf16 copies of the weights, kept until backward."""
    _, full_config = build(None)
    depth = _depth(name, full_config)
    at_depth = {}
    for batch in (1, 2):
        one, two = (_saved(name, build, layers, batch, length, checkpointing) for layers in (1, 2))
        at_depth[batch] = one + (two - one) * (depth - 1)
    per_sample = at_depth[2] - at_depth[1]
    return per_sample, at_depth[1] - per_sample


def count_parameters(build) -> tuple[int, int]:
    """(trainable, frozen EMA-target) parameter counts of the full model, on the meta device."""
    model_class, config = build(None)
    with torch.device("meta"):
        model = model_class(config)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    return trainable, frozen


MODELS = {
    # name: (builder, per-device batch, sequence length, description)
    "t-jepa": (_t_jepa, 8, 512, "T-JEPA, BERT-Large backbone"),
    "reasoner": (_reasoner, 4, 1024, "JEPA-Reasoner 0.9B"),
    "talker": (_talker, 8, 1024, "Mono-Talker 198M"),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, default=8, help="devices the sharded columns divide by")
    parser.add_argument("--out", default="research/speed/memory_table/memory_table.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    lines = [
        f"Per-device training memory (GiB), AdamW, fp32 master weights, bf16 autocast; sharded = FSDP2 / ZeRO-3 over "
        f"{args.devices} devices. Activations: bytes saved for backward at the stated per-device batch "
        "(measured on CPU, extrapolated from 1- and 2-block models; the CPU attention kernel keeps the attention matrix, "
        "GPU kernels do not; allocator overhead not counted).",
        "",
        "| model | trainable / EMA params | batch x tokens | weights | grads | AdamW | EMA copy | activations | "
        "activations, checkpointing | DDP total | sharded total | sharded total, checkpointing |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, (build, batch, length, label) in MODELS.items():
        trainable, frozen = count_parameters(build)
        weights, grads, adam, ema = 4 * trainable / GIB, 4 * trainable / GIB, 8 * trainable / GIB, 4 * frozen / GIB
        per_sample, fixed = measure_activations(name, build, length, checkpointing=False)
        acts = (fixed + batch * per_sample) / GIB
        try:
            per_sample, fixed = measure_activations(name, build, length, checkpointing=True)
            acts_ckpt = (fixed + batch * per_sample) / GIB
        except ValueError as error:  # a model class without gradient checkpointing
            acts_ckpt = float("nan")
            print(f"{name}: no gradient checkpointing ({error})")
        states = weights + grads + adam + ema
        shard = states / args.devices
        lines.append(
            f"| {label} | {trainable / 1e6:,.0f}M / {frozen / 1e6:,.0f}M | {batch} x {length} | {weights:.2f} | "
            f"{grads:.2f} | {adam:.2f} | {ema:.2f} | {acts:.2f} | {acts_ckpt:.2f} | {states + acts:.2f} | "
            f"{shard + acts:.2f} | {shard + acts_ckpt:.2f} |"
        )
        print(lines[-1], flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
