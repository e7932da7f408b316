"""T-JEPA speed, as ratios against baselines measured in the same run on this machine.

1. Training step: tokens/s of the cpu_fast T-JEPA step (context encoder + predictor forward/backward, target encoder
   forward) in fp32 vs bf16 autocast, on batches from the span-masking collator over the embedded corpus.
2. Compute efficiency: achieved FLOP/s of that step (torch's FLOP counter) vs this machine's measured matmul peak.
3. Span masking: the collator's batch (tokenise + sample spans) vs the model step it feeds (share of step time).

Run: `make benchmark` or `python benchmarks/bench_t_jepa.py`.
"""

import argparse

import torch
from timing import matmul_peak, timed
from torch.utils.flop_counter import FlopCounterMode

from hf_jepa.data.text import TextData
from hf_jepa.modeling.t_jepa import TJepaConfig, TJepaModel
from hf_jepa.recipes.t_jepa import TJepaDataArguments, TJepaRecipe
from hf_jepa.trainers import build_optimizer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, data: embedded CPython documentation\n")

    config = TJepaConfig.cpu_fast()
    text = TextData("embedded", vocab_size=config.backbone_config.vocab_size)
    recipe = TJepaRecipe(config, TJepaDataArguments(diagnostics_sentences=8, downstream=False), text=text)
    batch = recipe.train_batch(0, 0, args.batch_size)
    tokens = int(batch["attention_mask"].sum())
    torch.manual_seed(0)
    model = TJepaModel(config).train()
    optimizer = build_optimizer(model, 1e-4, 0.05)

    def step(bf16: bool):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    seconds = {bf16: timed(lambda: step(bf16), args.repeats) for bf16 in (False, True)}
    print(
        f"1. training step, cpu_fast T-JEPA, batch {args.batch_size} x {batch['input_ids'].shape[1]} "
        f"({tokens} real tokens)"
    )
    print(f"   fp32: {tokens / seconds[False]:9.0f} tokens/s")
    print(f"   bf16: {tokens / seconds[True]:9.0f} tokens/s   speed-up {seconds[False] / seconds[True]:.2f}x")

    counter = FlopCounterMode(display=False)
    with counter:
        step(False)
    flops = counter.get_total_flops()
    print(f"\n2. compute efficiency: {flops / 1e9:.2f} GFLOP per step (forward + backward, counted)")
    for bf16, dtype in ((False, torch.float32), (True, torch.bfloat16)):
        achieved, peak = flops / seconds[bf16], matmul_peak(dtype)
        print(
            f"   {'bf16' if bf16 else 'fp32'}: {achieved / 1e9:7.1f} GFLOP/s achieved vs {peak / 1e9:7.1f} GFLOP/s "
            f"matmul peak = {100 * achieved / peak:.1f}% of peak"
        )

    collate = timed(lambda: recipe.train_batch(1, 0, args.batch_size), args.repeats)
    print(
        f"\n3. span-masking collator: {1e3 * collate:.1f} ms per batch = {100 * collate / seconds[True]:.1f}% of a "
        "bf16 training step"
    )


if __name__ == "__main__":
    main()
