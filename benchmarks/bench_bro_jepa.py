"""BRo-JEPA speed, as ratios against baselines measured in the same run on this machine.

1. Data path: whole-batch tensor sampling (`ModularArithmeticTask.sample_batch`) vs a straightforward per-sample
   reference (index a `datasets` split row by row, decode, pick a target image of class (x+k) mod 10 in Python).
2. Training step: samples/s of the cpu_fast BRo-JEPA step in fp32 vs bf16 autocast (the `mixed_precision` lever).
3. Compute efficiency: achieved FLOP/s of the training step vs this machine's measured dense matmul peak
   (fp32 and bf16 2048x2048 matmuls), using a FLOP count of the encoder's forward pass from torch's FLOP counter.

Run: `make benchmark` or `python benchmarks/bench_bro_jepa.py [--data PATH]` (default ../shared/data/mnist if present,
else the embedded digits).
"""

import argparse
import os
import random
from pathlib import Path

import torch
from timing import matmul_peak, timed
from torch.utils.flop_counter import FlopCounterMode

import hf_jepa  # noqa: F401
from hf_jepa.data import ModularArithmeticTask, images_to_tensor, load_mnist
from hf_jepa.modeling.bro_jepa import BroJepaConfig, BroJepaModel
from hf_jepa.trainers import build_optimizer


def reference_batch(split, labels_by_class, batch_size, rng):
    """Per-sample reference: row access and decode through `datasets`, target chosen in Python."""
    import numpy as np

    context, targets, ops = [], [], []
    for _ in range(batch_size):
        row = split[rng.randrange(len(split))]
        k = rng.choice((-1, 1))
        target_class = (row["label"] + k) % 10
        target_row = split[rng.choice(labels_by_class[target_class])]
        context.append(np.asarray(row["image"], dtype=np.float32) / 255.0)
        targets.append(np.asarray(target_row["image"], dtype=np.float32) / 255.0)
        ops.append(k)
    return torch.tensor(np.stack(context)), torch.tensor(np.stack(targets)), torch.tensor(ops)


def main():
    parser = argparse.ArgumentParser()
    default = Path(__file__).resolve().parents[2] / "shared" / "data" / "mnist"
    parser.add_argument("--data", default=str(default) if default.exists() else "embedded")
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} cores, data: {args.data}")

    dataset = load_mnist(args.data)
    images, labels = images_to_tensor(dataset["train"])
    task = ModularArithmeticTask(images, labels)
    batch = args.batch_size

    # 1. data path
    labels_by_class = {c: [] for c in range(10)}
    for index, label in enumerate(dataset["train"]["label"]):
        labels_by_class[label].append(index)
    rng = random.Random(0)
    reference_s = timed(lambda: reference_batch(dataset["train"], labels_by_class, batch, rng), repeats=3, warmup=1)
    steps = iter(range(10**9))
    fast_s = timed(lambda: task.sample_batch(batch, step=next(steps)), repeats=50)
    print(f"\n1. data path (samples/s, batch {batch})")
    print(f"   per-sample datasets reference : {batch / reference_s:12,.0f}")
    print(f"   whole-batch tensor sampling   : {batch / fast_s:12,.0f}   ratio {reference_s / fast_s:,.0f}x")

    # 2. training step fp32 vs bf16
    config = BroJepaConfig.cpu_fast()
    results = {}
    for precision in ("fp32", "bf16"):
        torch.manual_seed(0)
        model = BroJepaModel(config).train()
        optimizer = build_optimizer(model, 1e-3, 0.05)
        data = task.sample_batch(batch, step=0)

        def step():
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
                loss = model(**data).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        results[precision] = timed(step, repeats=15, warmup=3)
    print("\n2. training step, cpu_fast BRo-JEPA (samples/s)")
    for precision, seconds in results.items():
        print(f"   {precision:4s}: {batch / seconds:10,.0f}")
    print(f"   bf16 / fp32 speed-up: {results['fp32'] / results['bf16']:.2f}x")

    # 3. achieved FLOP/s vs measured matmul peak
    model = BroJepaModel(config).train()
    data = task.sample_batch(batch, step=0)
    with FlopCounterMode(display=False) as counter:
        model(**data).loss.backward()
    step_flops = counter.get_total_flops()
    peaks = {"fp32": matmul_peak(torch.float32), "bf16": matmul_peak(torch.bfloat16)}
    print("\n3. compute efficiency (counted FLOPs of forward + backward, incl. target encoder forward)")
    print(f"   FLOPs per training step: {step_flops / 1e9:.2f} GFLOP")
    for precision in ("fp32", "bf16"):
        achieved = step_flops / results[precision]
        print(
            f"   {precision}: {achieved / 1e9:7.1f} GFLOP/s achieved vs {peaks[precision] / 1e9:7.1f} GFLOP/s "
            f"matmul peak = {100 * achieved / peaks[precision]:.1f}% of peak"
        )


if __name__ == "__main__":
    main()
