"""JEPA-Reasoner speed, as ratios against baselines measured in the same run on this machine.

1. Latent chain generation: latents/s of `generate_latents` with the KV cache vs recomputing the whole sequence at
   every step (the straightforward reference), cpu_fast reasoner on the arithmetic task's prompts.
2. Talker decoding: tokens/s of the Dual-Talker's `generate` (greedy) with the cache vs `use_cache=False`.
3. Reasoner training step: latents/s in fp32 vs bf16 autocast, and its achieved FLOP/s vs this machine's measured
   matmul peak.

Run: `make benchmark` or `python benchmarks/bench_jepa_reasoner.py`.
"""

import argparse

import torch
from timing import matmul_peak, timed
from torch.utils.flop_counter import FlopCounterMode

from hf_jepa.data.reasoning import ReasoningData
from hf_jepa.modeling.jepa_reasoner import DualTalkerConfig, DualTalkerModel, JepaReasonerConfig, JepaReasonerModel
from hf_jepa.recipes.jepa_reasoner import JepaReasonerDataArguments
from hf_jepa.trainers import build_optimizer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    data = ReasoningData(
        JepaReasonerDataArguments(
            task="arithmetic",
            min_operations=1,
            max_operations=2,
            num_train_examples=args.batch_size,
            num_eval_examples=8,
        )
    )
    steps = data.max_answer_length
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, data: synthetic arithmetic word problems "
        f"(batch {args.batch_size}, prompts <= {data.max_prompt_length} tokens, {steps} reasoning steps)\n"
    )
    length = data.max_prompt_length + 1 + steps + 8
    torch.manual_seed(0)
    reasoner = JepaReasonerModel(
        JepaReasonerConfig.cpu_fast(
            vocab_size=data.vocab_size, max_position_embeddings=length, num_reasoning_steps=steps
        )
    ).eval()
    talker = DualTalkerModel(
        DualTalkerConfig.cpu_fast(vocab_size=data.vocab_size, max_position_embeddings=3 * length)
    ).eval()
    batch = {k: v[: args.batch_size] for k, v in data.train.items()}
    prompt = (batch["prompt_ids"], batch["prompt_mask"])

    with torch.no_grad():
        chain_s = {
            cache: timed(lambda: reasoner.generate_latents(*prompt, num_steps=steps, use_cache=cache), args.repeats)
            for cache in (False, True)
        }
        chain = reasoner.generate_latents(*prompt, num_steps=steps)
    latents = args.batch_size * steps
    print("1. latent chain generation (cpu_fast reasoner, 6 reasoning blocks, 128 wide)")
    print(f"   recompute every step: {latents / chain_s[False]:8.0f} latents/s")
    print(
        f"   KV cache:             {latents / chain_s[True]:8.0f} latents/s   speed-up "
        f"{chain_s[False] / chain_s[True]:.2f}x"
    )

    bos = torch.full((args.batch_size, 1), talker.config.bos_token_id, dtype=torch.long)

    def talk(cache: bool):
        return talker.generate(
            input_ids=bos,
            latents=chain,
            prompt_ids=prompt[0],
            prompt_mask=prompt[1],
            max_new_tokens=steps,
            min_new_tokens=steps,
            do_sample=False,
            use_cache=cache,
        )

    with torch.no_grad():
        talk_s = {cache: timed(lambda: talk(cache), args.repeats) for cache in (False, True)}
    tokens = args.batch_size * steps
    print(f"\n2. Dual-Talker greedy decoding ({steps} new tokens per answer)")
    print(f"   use_cache=False: {tokens / talk_s[False]:8.0f} tokens/s")
    print(f"   use_cache=True:  {tokens / talk_s[True]:8.0f} tokens/s   speed-up {talk_s[False] / talk_s[True]:.2f}x")

    reasoner.train()
    optimizer = build_optimizer(reasoner, 1e-4, 0.05)
    inputs = {k: batch[k] for k in ("prompt_ids", "prompt_mask", "answer_ids", "answer_mask")}
    answer_latents = int(batch["answer_mask"].sum())

    def step(bf16: bool):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = reasoner(**inputs).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step_s = {bf16: timed(lambda: step(bf16), args.repeats) for bf16 in (False, True)}
    print(f"\n3. reasoner training step (teacher-forced, {answer_latents} target latents per batch)")
    print(f"   fp32: {answer_latents / step_s[False]:8.0f} latents/s")
    print(f"   bf16: {answer_latents / step_s[True]:8.0f} latents/s   speed-up {step_s[False] / step_s[True]:.2f}x")
    counter = FlopCounterMode(display=False)
    with counter:
        step(False)
    flops = counter.get_total_flops()
    for bf16, dtype in ((False, torch.float32), (True, torch.bfloat16)):
        achieved, peak = flops / step_s[bf16], matmul_peak(dtype)
        print(
            f"   {'bf16' if bf16 else 'fp32'}: {achieved / 1e9:7.1f} GFLOP/s achieved vs {peak / 1e9:7.1f} GFLOP/s "
            f"matmul peak = {100 * achieved / peak:.1f}% of peak"
        )


if __name__ == "__main__":
    main()
