"""EPM-JEPA speed, as ratios against baselines measured in the same run on this machine.

1. Dynamic LoRA: forward + backward of the predictor with per-sample `dW = U diag(d) V^T` applied by scaling peft's
   rank-r LoRA activations (what `EpmJepaModel` does) vs a straightforward reference that materialises each sample's
   dense weight `W + s U diag(d) V^T` and applies it with a batched matmul.
2. Data path: the vectorised Moving-MNIST generator (`MovingMnist.sample_batch`, all sequences, frames and digits at
   once) vs a per-sequence reference (the same physics and renderer called one sequence at a time).
3. Training step: frames/s of the cpu_fast EPM-JEPA step (track C) in fp32 vs bf16 autocast.

Run: `make benchmark` or `python benchmarks/bench_epm_jepa.py [--data PATH]`.
"""

import argparse
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from timing import timed

import hf_jepa  # noqa: F401
from hf_jepa.data import MnistSplits, MovingMnist
from hf_jepa.modeling.epm_jepa import EpmJepaConfig, EpmJepaModel
from hf_jepa.modeling.epm_jepa.modeling_epm_jepa import ADAPTER_NAME
from hf_jepa.trainers import build_optimizer


def dense_reference(model: EpmJepaModel, context: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """Per-sample dense weights: `y_n = (W + s U diag(d_n) V^T) x_n + b`, one `(out, in)` matrix per sample."""
    hidden = context.flatten(1)
    layers = model._lora_layers
    for index, layer in enumerate(layers):
        u, v_t = layer.lora_B[ADAPTER_NAME].weight, layer.lora_A[ADAPTER_NAME].weight
        weights = layer.base_layer.weight + layer.scaling[ADAPTER_NAME] * torch.einsum(
            "or,nr,ri->noi", u, d[:, index], v_t
        )
        hidden = torch.bmm(weights, hidden[:, :, None])[:, :, 0] + layer.base_layer.bias
        if index < len(layers) - 1:
            hidden = F.gelu(hidden)
    return context[:, -1] + hidden


def bench_dynamic_lora(config: EpmJepaConfig, rows: int, repeats: int) -> tuple[float, float]:
    torch.manual_seed(0)
    model = EpmJepaModel(config)
    with torch.no_grad():
        for layer in model._lora_layers:
            layer.lora_B[ADAPTER_NAME].weight.normal_(0, 0.02)
    context = torch.randn(rows, config.context_length, config.latent_dim)
    d = torch.randn(rows, len(model._lora_layers), config.lora_rank, requires_grad=True)
    torch.testing.assert_close(model.predict_next(context, d), dense_reference(model, context, d), rtol=1e-4, atol=1e-4)

    def hooked():
        model.predict_next(context, d).sum().backward()

    def dense():
        dense_reference(model, context, d).sum().backward()

    return rows / timed(hooked, repeats), rows / timed(dense, repeats)


def per_sequence_reference(world: MovingMnist, batch_size: int, step: int) -> torch.Tensor:
    generator = world._generator(step, 0)
    frames = []
    for _ in range(batch_size):
        state = world.simulate(1, generator)
        frames.append(world.render(state["positions"], state["digit_index"], state["digit_mask"]))
    return torch.cat(frames)


def bench_training(model_config: EpmJepaConfig, world: MovingMnist, batch: int, repeats: int, bf16: bool) -> float:
    torch.manual_seed(0)
    model = EpmJepaModel(model_config)
    model.train()
    optimizer = build_optimizer(model, 1e-3, 0.05)
    pixels = world.sample_batch(batch)["pixel_values"]

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(pixels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return batch * pixels.shape[1] / timed(step, repeats)


def main():
    parser = argparse.ArgumentParser()
    default = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mnist"
    parser.add_argument(
        "--data", default=os.environ.get("HF_JEPA_MNIST") or (str(default) if default.exists() else "embedded")
    )
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, data: {args.data}\n")

    print("1. Dynamic LoRA (forward + backward of the predictor, rows = sequences x predicted steps)")
    for name, config, rows in (
        ("cpu_fast", EpmJepaConfig.cpu_fast(), 160),
        ("full", EpmJepaConfig(), 160),
        ("full", EpmJepaConfig(), 1024),
    ):
        hooked, dense = bench_dynamic_lora(config, rows, args.repeats)
        print(
            f"   {name:8s} {rows:5d} rows: peft LoRA + per-sample d {hooked:9.0f} rows/s | dense per-sample dW "
            f"{dense:8.0f} rows/s | ratio {hooked / dense:5.1f}x"
        )

    splits = MnistSplits(args.data)
    world = MovingMnist(images=splits.train_images, labels=splits.train_labels, sequence_length=8, gravity=(0.0, 0.5))
    batch = 64
    assert per_sequence_reference(world, 2, 0).shape == world.sample_batch(2)["pixel_values"].shape
    fast = batch / timed(lambda: world.sample_batch(batch, step=1), args.repeats)
    slow = batch / timed(lambda: per_sequence_reference(world, batch, 1), max(2, args.repeats // 3))
    print(
        f"\n2. Moving MNIST, {batch} sequences x 8 frames: vectorised {fast:8.0f} seq/s | per-sequence reference "
        f"{slow:7.0f} seq/s | ratio {fast / slow:5.1f}x"
    )

    config = EpmJepaConfig.cpu_fast(track="epm")
    fp32 = bench_training(config, world, 32, args.repeats, bf16=False)
    bf16 = bench_training(config, world, 32, args.repeats, bf16=True)
    print(
        f"\n3. Training step, cpu_fast track C, 32 sequences x 8 frames: fp32 {fp32:7.0f} frames/s | bf16 autocast "
        f"{bf16:7.0f} frames/s | ratio {bf16 / fp32:4.2f}x"
    )


if __name__ == "__main__":
    main()
