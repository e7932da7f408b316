"""Evaluation of latent-reasoning systems: greedy completion through one interface for the decoupled reasoner +
Talker and the coupled baselines, CFG robustness to input corruption and latent noise, the "mixed latents"
statistics of a reasoner's free-running chain, and where a reasoner + Talker loses accuracy (`decompose_accuracy`:
the reasoner alone decoded by nearest target latent, the Talker alone on the oracle chain, the pair, and the
cosine to the targets by chain position, teacher-forced and free-running)."""

import math

import torch
from transformers import DynamicCache

from ..data.reasoning import (
    BOS_TOKEN,
    PAD_TOKEN,
    REASONING_SPECIAL_TOKENS,
    SEP_TOKEN,
    UNK_TOKEN,
    CfgTask,
    ReasoningData,
)
from ..modeling.jepa_reasoner.modeling_jepa_reasoner_blocks import run_blocks


class _System:
    """`complete(prompt_ids, prompt_mask, latent_noise_std=0.0)` -> answer strings, greedy, in batches.

    `latent_noise_std` is relative: the std of the Gaussian noise divided by the RMS of the vector each system feeds
    back (`noise_scale`), so sigma = 1 means noise as large as the signal whatever the width or normalisation."""

    def noise_scale(self) -> float:
        """RMS of a fed-back vector: the final RMSNorm's output, about the RMS of its gain (coupled models)."""
        return float(self.model.norm.weight.float().pow(2).mean().sqrt())

    def __init__(self, model, data: ReasoningData, batch_size: int = 256):
        self.model, self.data, self.batch_size = model, data, batch_size

    def _complete(self, prompt_ids, prompt_mask, latent_noise_std, generator) -> torch.Tensor:
        raise NotImplementedError

    @torch.no_grad()
    def complete(
        self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, latent_noise_std: float = 0.0, seed: int = 0
    ) -> list[str]:
        device = self.model.device  # prompts may come from CPU tensors while the model runs on an accelerator
        generator = torch.Generator(device=device).manual_seed(seed)
        answers: list[str] = []
        for start in range(0, prompt_ids.shape[0], self.batch_size):
            ids = self._complete(
                prompt_ids[start : start + self.batch_size].to(device),
                prompt_mask[start : start + self.batch_size].to(device),
                latent_noise_std * self.noise_scale(),
                generator,
            )
            answers.extend(self.data.decode(ids))
        return answers


class DecoupledSystem(_System):
    """Reasoner + Talker: the latent chain (noise, if any, added to every fed-back latent), then greedy decoding."""

    def noise_scale(self) -> float:
        return 1.0 / math.sqrt(self.model.reasoner.config.hidden_size)  # RMS of a unit vector

    def _complete(self, prompt_ids, prompt_mask, latent_noise_std, generator):
        steps = self.data.max_answer_length
        tokens, _ = self.model.generate(
            prompt_ids,
            prompt_mask,
            num_reasoning_steps=steps,
            latent_noise_std=latent_noise_std,
            generator=generator,
            max_new_tokens=steps,
            do_sample=False,
        )
        return tokens


class CoupledSystem(_System):
    """The next-token baseline, greedy on `[prompt, SEP]`; latent noise goes on its final hidden state."""

    def _complete(self, prompt_ids, prompt_mask, latent_noise_std, generator):
        sep = torch.full_like(prompt_ids[:, :1], self.model.config.sep_token_id)
        input_ids = torch.cat([prompt_ids, sep], 1)
        attention_mask = torch.cat([prompt_mask, torch.ones_like(sep)], 1)
        extra = dict(latent_noise_std=latent_noise_std, noise_generator=generator) if latent_noise_std else {}
        out = self.model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            do_sample=False,
            max_new_tokens=self.data.max_answer_length,
            **extra,
        )
        return out[:, input_ids.shape[1] :]


class CoconutSystem(_System):
    """The COCONUT-style baseline: continuous thoughts (noise added to them), then greedy decoding after BOS."""

    def _complete(self, prompt_ids, prompt_mask, latent_noise_std, generator):
        out = self.model.generate(
            prompt_ids,
            prompt_mask,
            latent_noise_std=latent_noise_std,
            noise_generator=generator,
            do_sample=False,
            max_new_tokens=self.data.max_answer_length,
        )
        return out[:, 1:]


def cfg_robustness(
    systems: dict[str, "_System"],
    data: ReasoningData,
    replacement_rates=(0.0, 0.1, 0.2, 0.3),
    noise_stds=(0.0, 0.1, 0.2, 0.4),
    seed: int = 0,
) -> dict[str, dict[str, dict[float, float]]]:
    """Valid-under-grammar rate of each system's completions (a) when a fraction of the prompt tokens is replaced by
    other terminals, scored against the *uncorrupted* prefix, and (b) when Gaussian noise of std sigma (relative to
    the unit-norm latents / per-dimension RMS of the hidden states) is added to the latents each system feeds back."""
    task = data.task
    if not isinstance(task, CfgTask):
        raise ValueError(f"cfg_robustness needs the cfg task, got {type(task).__name__}")
    examples = data.eval_examples
    results: dict[str, dict[str, dict[float, float]]] = {name: {"replacement": {}, "noise": {}} for name in systems}
    for rate in replacement_rates:
        corrupted = [task.corrupt_prompt(e.prompt, rate, seed=seed * 100_003 + i) for i, e in enumerate(examples)]
        prompt_ids, prompt_mask = data.encode_prompts(corrupted)
        for name, system in systems.items():
            answers = system.complete(prompt_ids, prompt_mask)
            results[name]["replacement"][rate] = data.accuracy(examples, answers)
    for sigma in noise_stds:
        for name, system in systems.items():
            answers = system.complete(
                data.eval["prompt_ids"], data.eval["prompt_mask"], latent_noise_std=sigma, seed=seed
            )
            results[name]["noise"][sigma] = data.accuracy(examples, answers)
    return results


@torch.no_grad()
def vocabulary_latents(reasoner) -> torch.Tensor:
    """Each vocabulary token's target-encoder latent in isolation (the token alone at position 0): the discrete points
    a reasoner's predictions aim at. Returns `(vocab_size, hidden)` float32 on the CPU, row i = token id i (the
    special tokens `REASONING_SPECIAL_TOKENS` first)."""
    token_ids = torch.arange(reasoner.config.vocab_size, device=reasoner.device)[:, None]
    return reasoner.encode(token_ids, torch.ones_like(token_ids), use_target_encoder=True)[:, 0].float().cpu()


@torch.no_grad()
def mixed_latents(model, data: ReasoningData, num_prompts: int = 200) -> dict:
    """How "mixed" the reasoner's free-running latents are: the mean cosine of a predicted latent to its nearest and
    second-nearest vocabulary latent (a latent sitting on one token has top-1 ~1; a mixture of several tokens has a
    lower top-1 and a top-2 close to it). Also returns the 2-D PCA (fitted on the word latents) of the predictions
    and of the words, for `plot_mixed_latents`."""
    device = model.device
    prompt_ids, prompt_mask = (data.eval[key][:num_prompts].to(device) for key in ("prompt_ids", "prompt_mask"))
    chain = model.generate_latents(prompt_ids, prompt_mask, num_steps=data.max_answer_length).float().cpu()
    mask = data.eval["answer_mask"][:num_prompts].bool()
    predicted = chain[mask]
    vocabulary = vocabulary_latents(model)
    words = vocabulary[len(REASONING_SPECIAL_TOKENS) :]  # [PAD] [UNK] [BOS] [EOS] [SEP] come first and are not words
    mean = words.mean(0, keepdim=True)
    _, _, basis = torch.linalg.svd(words - mean, full_matrices=False)
    project = lambda x: (x - mean) @ basis[:2].T  # noqa: E731
    similarities = (
        torch.nn.functional.normalize(predicted, dim=-1) @ torch.nn.functional.normalize(vocabulary, dim=-1).T
    )
    top = similarities.topk(2, dim=-1).values
    return {
        "nearest_token_cosine": float(top[:, 0].mean()),
        "second_token_cosine": float(top[:, 1].mean()),
        "predicted_2d": project(predicted),
        "words_2d": project(words),
    }


# ---------------------------------------------------------------------------------------------------------------------
# Where a reasoner + Talker loses accuracy


def _check_chains(first: torch.Tensor, second: torch.Tensor, mask: torch.Tensor, names: tuple[str, str, str]) -> None:
    """ValueError unless the two chains share a `(batch, steps, hidden)` shape and `mask` is `(batch, steps)`;
    `names` are the three arguments' names, for the message."""
    if first.shape != second.shape or first.ndim != 3:
        raise ValueError(
            f"{names[0]} and {names[1]} must share a (batch, steps, hidden) shape, got {tuple(first.shape)} and "
            f"{tuple(second.shape)}"
        )
    if tuple(mask.shape) != tuple(first.shape[:2]):
        raise ValueError(f"{names[2]} must have shape {tuple(first.shape[:2])}, got {tuple(mask.shape)}")


def cosine_by_position(predicted: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> list[float]:
    """Mean cosine of `predicted` to `targets` (both `(batch, steps, hidden)`) at each chain position, over the rows
    whose `mask` `(batch, steps)` is 1 there; NaN at a position no row covers."""
    _check_chains(predicted, targets, mask, ("predicted", "targets", "mask"))
    cosine = torch.nn.functional.cosine_similarity(predicted.float(), targets.float(), dim=-1)
    weight = mask.float()
    counts = weight.sum(0)
    sums = (cosine * weight).sum(0)
    return [float(s / c) if c > 0 else float("nan") for s, c in zip(sums, counts)]


def with_free_running_tail(chain: torch.Tensor, free_running: torch.Tensor, answer_mask: torch.Tensor) -> torch.Tensor:
    """`chain` at the answer positions (answer tokens and [EOS]: `answer_mask` `(batch, steps)` is 1), `free_running`
    after them: a teacher-forced or target chain as a Talker meets chains at inference.

    A reasoner generates a fixed number of latents, so past [EOS] a chain goes on with whatever the reasoner generates
    there; the target encoder's latents at those positions are those of padding tokens, which no free-running chain
    contains. A Talker trained on free-running chains can fail on such a tail: on 11-node trees a Mono-Talker read the
    whole target chain at 22.0% and the same targets with the free-running tail at 95.7%
    (`research/jepa_reasoner/curves/ablations/talker_rows/README.md`)."""
    _check_chains(chain, free_running, answer_mask, ("chain", "free_running", "answer_mask"))
    return torch.where(answer_mask.bool()[..., None].to(chain.device), chain, free_running)


def answer_candidate_ids(data: ReasoningData) -> torch.Tensor:
    """Token ids an answer can hold: every id but [PAD], [UNK], [BOS] and [SEP] (the words and [EOS])."""
    vocab = data.tokenizer.get_vocab()
    excluded = {vocab[token] for token in (PAD_TOKEN, UNK_TOKEN, BOS_TOKEN, SEP_TOKEN)}
    return torch.tensor([i for i in range(data.vocab_size) if i not in excluded], dtype=torch.long)


@torch.no_grad()
def nearest_latent_decode(
    reasoner,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    chain: torch.Tensor,
    candidate_ids: torch.Tensor,
    batch_size: int = 32,
) -> torch.Tensor:
    """The reasoner read without a Talker: chain step i becomes the candidate token whose target-encoder latent,
    in the context `[prompt, SEP, tokens decoded so far]`, has the largest cosine to `chain[:, i]` (greedy; the
    target encoder is causal, so a token's latent depends on that context only). Returns `(batch, steps)` ids;
    `ReasoningData.decode` cuts them at the first [EOS]. See `contextual_candidate_similarities`."""
    return contextual_candidate_similarities(
        reasoner, prompt_ids, prompt_mask, chain, candidate_ids, batch_size=batch_size
    )["decoded"]


@torch.no_grad()
def contextual_candidate_similarities(
    reasoner,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    chain: torch.Tensor,
    candidate_ids: torch.Tensor,
    prefix_ids: torch.Tensor | None = None,
    prefix_mask: torch.Tensor | None = None,
    batch_size: int = 32,
    keep_latents: int = 0,
) -> dict[str, torch.Tensor]:
    """The cosine of every chain step to the target-encoder latent of every candidate token in that step's context
    `[prompt, SEP, prefix]`: the latents the reasoner is trained to predict (its targets are contextual), not the
    tokens' latents in isolation. The prefix of step i is `prefix_ids[:, :i]` (masked by `prefix_mask`: the
    teacher's, e.g. the true answer) or, without `prefix_ids`, the tokens decoded greedily so far (each step's
    nearest candidate, as `nearest_latent_decode`). The context is encoded once per step into a KV cache that every
    candidate's one-token continuation reuses; `batch_size` prompts at a time bound its memory.

    Returns CPU tensors: `similarity` `(batch, steps, candidates)` float32, `decoded` `(batch, steps)` (each step's
    nearest candidate id) and, with `keep_latents=k > 0`, `candidate_latents` `(min(k, batch), steps, candidates,
    hidden)`: the unit candidate latents of the first rows (for figures)."""
    encoder, config = reasoner.target_encoder, reasoner.config
    device = reasoner.device
    candidate_ids = candidate_ids.to(device)
    num_candidates = candidate_ids.numel()
    if chain.ndim != 3 or chain.shape[0] != prompt_ids.shape[0]:
        raise ValueError(
            f"chain must be (batch, steps, hidden) with one row per prompt ({prompt_ids.shape[0]}), got "
            f"{tuple(chain.shape)}"
        )
    if prefix_ids is not None:
        if prefix_ids.ndim != 2 or prefix_ids.shape[0] != chain.shape[0] or prefix_ids.shape[1] < chain.shape[1] - 1:
            raise ValueError(
                f"prefix_ids must be (batch, >= steps - 1) = ({chain.shape[0]}, >= {chain.shape[1] - 1}), got "
                f"{tuple(prefix_ids.shape)}"
            )
        prefix_mask = torch.ones_like(prefix_ids) if prefix_mask is None else prefix_mask
    parts: dict[str, list[torch.Tensor]] = {"similarity": [], "decoded": [], "candidate_latents": []}
    for start in range(0, prompt_ids.shape[0], batch_size):
        ids = prompt_ids[start : start + batch_size].to(device)
        mask = prompt_mask[start : start + batch_size].to(device)
        latents = chain[start : start + batch_size].to(device).float()
        rows = ids.shape[0]
        keep = max(0, min(keep_latents - start, rows))
        sep = torch.full_like(ids[:, :1], config.sep_token_id)
        ids, mask = torch.cat([ids, sep], 1), torch.cat([mask, torch.ones_like(sep)], 1)
        decoded, similarities, kept = ids[:, :0], [], []
        for step in range(latents.shape[1]):
            if prefix_ids is None:
                prefix, prefix_keep = decoded, torch.ones_like(decoded)
            else:
                prefix = prefix_ids[start : start + batch_size, :step].to(device)
                prefix_keep = prefix_mask[start : start + batch_size, :step].to(device)
            context_ids, context_mask = torch.cat([ids, prefix], 1), torch.cat([mask, prefix_keep], 1)
            cache = DynamicCache()
            run_blocks(encoder.layers, encoder.embed_tokens(context_ids), context_mask, causal=True, cache=cache)
            cache.batch_repeat_interleave(num_candidates)
            next_ids = candidate_ids.repeat(rows)[:, None]
            key_mask = torch.cat([context_mask.repeat_interleave(num_candidates, 0), torch.ones_like(next_ids)], 1)
            hidden = run_blocks(encoder.layers, encoder.embed_tokens(next_ids), key_mask, causal=True, cache=cache)
            options = encoder.norm(hidden)[:, 0].float().view(rows, num_candidates, -1)
            similarity = torch.nn.functional.cosine_similarity(options, latents[:, step, None], dim=-1)
            similarities.append(similarity.cpu())
            if keep:
                kept.append(torch.nn.functional.normalize(options[:keep], dim=-1).cpu())
            decoded = torch.cat([decoded, candidate_ids[similarity.argmax(-1)][:, None]], 1)
        parts["similarity"].append(torch.stack(similarities, 1))
        parts["decoded"].append(decoded.cpu())
        if keep:
            parts["candidate_latents"].append(torch.stack(kept, 1))
    return {key: torch.cat(value) for key, value in parts.items() if value}


@torch.no_grad()
def talker_answers(talker, data: ReasoningData, chain: torch.Tensor, prompt_ids, prompt_mask, batch_size=256):
    """Greedy answers of `talker` reading `chain` (and the prompt, for a Dual-Talker: one with a context encoder)."""
    device = talker.device
    dual = getattr(talker.config, "num_context_layers", 0) > 0
    answers: list[str] = []
    for start in range(0, chain.shape[0], batch_size):
        part = chain[start : start + batch_size]
        bos = torch.full((part.shape[0], 1), data.tokenizer.bos_token_id, dtype=torch.long, device=device)
        context = {}
        if dual:
            context = dict(
                prompt_ids=prompt_ids[start : start + batch_size].to(device),
                prompt_mask=prompt_mask[start : start + batch_size].to(device),
            )
        out = talker.generate(
            input_ids=bos,
            latents=part.to(device=device, dtype=talker.dtype),
            max_new_tokens=data.max_answer_length,
            do_sample=False,
            **context,
        )
        answers.extend(data.decode(out[:, 1:]))
    return answers


@torch.no_grad()
def reasoner_chains(reasoner, split: dict[str, torch.Tensor], num_steps: int, batch_size: int = 256) -> dict:
    """The three chains of every row of `split`, `(rows, num_steps, hidden)` float32 on the CPU:
    `free_running` (`generate_latents`, what a Talker reads at inference), `teacher_forced` (the predictions with
    the true answer as input) and `targets` (the target encoder's latents of the true answer, padding included: the
    oracle chain up to [EOS], see `with_free_running_tail`)."""
    device = reasoner.device
    was_training = reasoner.training
    reasoner.eval()
    chains: dict[str, list[torch.Tensor]] = {"free_running": [], "teacher_forced": [], "targets": []}
    for start in range(0, split["prompt_ids"].shape[0], batch_size):
        batch = {
            k: split[k][start : start + batch_size].to(device)
            for k in ("prompt_ids", "prompt_mask", "answer_ids", "answer_mask")
        }
        out = reasoner(**batch)
        chains["teacher_forced"].append(out.predictions.float().cpu())
        chains["targets"].append(out.targets.float().cpu())
        free = reasoner.generate_latents(batch["prompt_ids"], batch["prompt_mask"], num_steps=num_steps)
        chains["free_running"].append(free.float().cpu())
    reasoner.train(was_training)
    return {k: torch.cat(v) for k, v in chains.items()}


def decompose_accuracy(reasoner, talker, data: ReasoningData, pair_answers: list[str] | None = None) -> dict:
    """Where a reasoner + Talker loses accuracy on `data`'s eval split:

    - `reasoner_alone_accuracy`: the free-running chain decoded by nearest target latent (`nearest_latent_decode`),
      no Talker: what the chain itself encodes;
    - `talker_oracle_accuracy`: the Talker reading the target encoder's latents of the true answer (an upper bound
      of the Talker: a perfect reasoner's chain, as far as the targets define one), continued after [EOS] by the
      free-running chain (`with_free_running_tail`: the targets define nothing there);
    - `pair_accuracy`: the Talker reading the free-running chain (the system's accuracy; `pair_answers` if given);
    - `cosine_teacher_forced` / `cosine_free_running`: mean cosine to the targets at each chain position (answer
      tokens and [EOS] only), and their means over all those positions (`..._mean`).
    """
    ev = data.eval
    steps = data.max_answer_length
    chains = reasoner_chains(reasoner, ev, steps)
    mask = ev["answer_mask"][:, :steps]
    tokens = nearest_latent_decode(
        reasoner, ev["prompt_ids"], ev["prompt_mask"], chains["free_running"], answer_candidate_ids(data)
    )
    if pair_answers is None:
        pair_answers = talker_answers(talker, data, chains["free_running"], ev["prompt_ids"], ev["prompt_mask"])
    oracle_chain = with_free_running_tail(chains["targets"], chains["free_running"], mask)
    oracle = talker_answers(talker, data, oracle_chain, ev["prompt_ids"], ev["prompt_mask"])
    examples = data.eval_examples
    result = {
        "reasoner_alone_accuracy": data.accuracy(examples, data.decode(tokens)),
        "talker_oracle_accuracy": data.accuracy(examples, oracle),
        "pair_accuracy": data.accuracy(examples, pair_answers),
    }
    for name in ("teacher_forced", "free_running"):
        by_position = cosine_by_position(chains[name], chains["targets"], mask)
        cosine = torch.nn.functional.cosine_similarity(chains[name], chains["targets"], dim=-1)
        result[f"cosine_{name}"] = by_position
        result[f"cosine_{name}_mean"] = float(cosine[mask.bool()].mean())
    return result
