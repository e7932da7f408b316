"""Evaluation of latent-reasoning systems: greedy completion through one interface for the decoupled reasoner +
Talker and the coupled baselines, CFG robustness to input corruption and latent noise, and the "mixed latents"
statistics of a reasoner's free-running chain."""

import math

import torch

from ..data.reasoning import REASONING_SPECIAL_TOKENS, CfgTask, ReasoningData


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
    # Each vocabulary token's target-encoder latent in isolation (position 0): the discrete points predictions aim at.
    token_ids = torch.arange(model.config.vocab_size, device=device)[:, None]
    vocabulary = model.encode(token_ids, torch.ones_like(token_ids), use_target_encoder=True)[:, 0].float().cpu()
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
