"""`latent-reasoning` pipeline: a prompt -> the reasoner's latent chain -> the Talker's text, with a JEPA-Reasoner +
Talker pair (`JepaReasonerWithTalker`) and the word-level tokenizer saved beside it.

::

    from transformers import pipeline
    import hf_jepa  # registers the task

    reason = pipeline("latent-reasoning", model="path/or/org/pair")   # loads the tokenizer saved beside the pair
    reason("n3 n7 , n3 n9 ? n9")                  # {"generated_text": "n3 n9", "num_reasoning_steps": 4}
    reason(["n3 n7 , n3 n9 ? n9", "n1 n2 ? n2"], batch_size=2, num_reasoning_steps=8)
    reason(prompt, return_latents=True)           # + "latents": the chain, num_reasoning_steps x hidden
    reason(prompt, do_sample=True, top_k=5, seed=0)          # reproducible sampling
    reason(prompt, latent_noise_std=0.1, seed=0)             # noisy latent chain, reproducible

This file imports only torch, transformers and `.base` (no `hf_jepa` imports): `pipe.save_pretrained` copies both next
to the weights so `pipeline(model=dir, trust_remote_code=True)` works where hf_jepa is not installed.
"""

import collections.abc
import contextlib
import numbers

import torch

from .base import JepaPipeline, check_flag, eval_mode

__all__ = ["LatentReasoningPipeline"]

PAIR_MODEL_TYPE = "jepa_reasoner_with_talker"
# Generation arguments forwarded to the Talker's `generate` (transformers' GenerationMixin).
GENERATION_ARGS = (
    "max_new_tokens",
    "min_new_tokens",
    "do_sample",
    "num_beams",
    "temperature",
    "top_k",
    "top_p",
    "repetition_penalty",
    "length_penalty",
    "no_repeat_ngram_size",
    "early_stopping",
)
# Set by the pipeline itself: refused in `generate_kwargs`.
RESERVED_GENERATION_ARGS = (
    "input_ids",
    "latents",
    "latent_mask",
    "prompt_ids",
    "prompt_mask",
    "attention_mask",
    "return_dict_in_generate",
    "num_return_sequences",
    "generator",
)


class PromptTypeError(TypeError, ValueError):
    """A prompt that is not a string: both a `TypeError` (its kind) and a `ValueError` (a bad input value)."""


class _Encoded:
    """A prompt already checked and tokenised by `__call__` (so that errors name its index); `preprocess` unwraps it."""

    __slots__ = ("ids",)

    def __init__(self, ids: list[int]):
        self.ids = ids


def _check_int(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


class LatentReasoningPipeline(JepaPipeline):
    r"""
    Text in, latent reasoning, text out, with a reasoner + Talker pair (`JepaReasonerWithTalker`,
    `config.model_type == "jepa_reasoner_with_talker"`).

    Each prompt (whitespace-separated tokens of the tokenizer's vocabulary, e.g. a task prompt of
    `hf_jepa.data.reasoning`) is tokenised, `[SEP]` is appended by the reasoner, which then produces a chain of
    `num_reasoning_steps` latents (each fed back as the next input; optionally perturbed by Gaussian noise); the Talker
    decodes the chain (the Dual-Talker also reads the prompt) into tokens from `[BOS]`, and the tokens up to the first
    `[EOS]` are decoded to text (special tokens skipped).

    The tokenizer: the one saved beside the pair (`tokenizer.save_pretrained(pair_dir)`, loaded by
    `pipeline(task, model=pair_dir)`) or `pipeline(..., tokenizer=...)`; creating the pipeline without one raises.

    Inputs: a prompt string or a list of prompt strings (a generator or a dataset of strings also works, checked
    item by item). Errors name the argument: an empty prompt, a token the tokenizer does not know (a word-level
    tokenizer would silently read it as `[UNK]`), a special token (`[SEP]`, `[EOS]`... are placed by the models), a
    prompt longer than `reasoner_config.max_position_embeddings - num_reasoning_steps` tokens, or one that leaves the
    Talker too few positions, raise `ValueError`; a non-string prompt raises `PromptTypeError` (both a `TypeError`
    and a `ValueError`).

    Call arguments (also accepted when creating the pipeline, as defaults):
        num_reasoning_steps (`int` >= 1, *optional*): latents in the chain (default: the reasoner config's
            `num_reasoning_steps`).
        latent_noise_std (`float` >= 0, *optional*, defaults to 0): std of the Gaussian noise added to each
            predicted latent (then re-normalised) before it is recorded and fed back.
        seed (`int` >= 0, *optional*): seeds the latent noise and the Talker's sampling of each forward pass (the
            global RNG state is restored afterwards), so the same call gives the same result. Seeding is per forward
            pass: with `do_sample` or latent noise, `batch_size > 1` draws differently from one prompt at a time.
        return_latents (`bool`, *optional*, defaults to `False`): add `"latents"`, the chain
            `(num_reasoning_steps, hidden)`, as a list of lists of floats, or a float tensor with
            `return_tensors=True`.
        return_tensors (`bool`, *optional*, defaults to `False`): see `return_latents`.
        max_new_tokens (`int`, *optional*, defaults to `num_reasoning_steps + 1`), min_new_tokens, do_sample,
            num_beams, temperature, top_k, top_p, repetition_penalty, length_penalty, no_repeat_ngram_size,
            early_stopping: passed to the Talker's `generate`; `generate_kwargs` (a dict) passes any other
            generation argument.
        batch_size (`int`): prompts per forward pass; prompts of a batch are left-padded (padding is masked out of
            the reasoner and the Talker), so greedy results equal `batch_size=1`.

    Returns, per prompt, a dict: `generated_text` (`str`), `num_reasoning_steps` (`int`) and, with
    `return_latents=True`, `latents`; a list of them for a list of prompts. The model runs in eval mode (its mode is
    restored afterwards).
    """

    model_types = (PAIR_MODEL_TYPE,)
    _load_tokenizer = None  # the tokenizer saved beside the pair, when present; its absence is reported in __init__

    def __init__(self, *args, **kwargs):
        model = kwargs["model"] if "model" in kwargs else (args[0] if args else None)
        config = getattr(model, "config", None)
        if getattr(config, "model_type", None) != PAIR_MODEL_TYPE or not all(
            hasattr(model, name) for name in ("reasoner", "talker", "generate")
        ):
            raise TypeError(
                f"model: the latent-reasoning pipeline needs a JepaReasonerWithTalker (model_type "
                f"{PAIR_MODEL_TYPE!r}), got {type(model).__name__} with model_type "
                f"{getattr(config, 'model_type', None)!r}"
            )
        super().__init__(*args, **kwargs)
        if self.tokenizer is None:
            raise ValueError(
                "tokenizer: the latent-reasoning pipeline needs the pair's word-level tokenizer and none could be "
                "loaded: save it beside the model (tokenizer.save_pretrained(model_dir), e.g. "
                "hf_jepa.data.reasoning.build_reasoning_tokenizer(task.vocab())) or pass pipeline(..., tokenizer=...)"
            )
        vocab = int(self.model.config.reasoner_config.vocab_size)
        if len(self.tokenizer) > vocab:
            raise ValueError(
                f"tokenizer: it has {len(self.tokenizer)} tokens but the model's vocabulary has {vocab} "
                "(reasoner_config.vocab_size): the tokenizer does not belong to this model"
            )
        if self.tokenizer.unk_token_id is None:
            raise ValueError("tokenizer: it has no unknown token ([UNK]), so unknown prompt tokens cannot be detected")

    # ------------------------------------------------------------------ arguments

    def _sanitize_parameters(
        self,
        num_reasoning_steps=None,
        latent_noise_std=None,
        seed=None,
        return_latents=None,
        return_tensors=None,
        generate_kwargs=None,
        **kwargs,
    ):
        preprocess_params, forward_params, postprocess_params = {}, {}, {}
        unknown = sorted(set(kwargs) - set(GENERATION_ARGS))
        if unknown:
            raise TypeError(
                f"latent-reasoning pipeline: unexpected argument(s) {unknown}; generation arguments other than "
                f"{list(GENERATION_ARGS)} go in generate_kwargs={{...}}"
            )
        if num_reasoning_steps is not None:
            steps = _check_int(num_reasoning_steps, "num_reasoning_steps", 1)
            preprocess_params["num_reasoning_steps"] = forward_params["num_reasoning_steps"] = steps
        if latent_noise_std is not None:
            if (
                isinstance(latent_noise_std, bool)
                or not isinstance(latent_noise_std, numbers.Real)
                or not latent_noise_std >= 0
                or latent_noise_std == float("inf")
            ):
                raise ValueError(f"latent_noise_std must be a finite number >= 0, got {latent_noise_std!r}")
            forward_params["latent_noise_std"] = float(latent_noise_std)
        if seed is not None:
            forward_params["seed"] = _check_int(seed, "seed", 0)
        if return_latents is not None:
            postprocess_params["return_latents"] = check_flag(return_latents, "return_latents")
        if return_tensors is not None:
            postprocess_params["return_tensors"] = check_flag(return_tensors, "return_tensors")

        generation = {}
        if generate_kwargs is not None:
            if not isinstance(generate_kwargs, dict):
                raise ValueError(f"generate_kwargs must be a dict, got {type(generate_kwargs).__name__}")
            reserved = sorted(set(generate_kwargs) & set(RESERVED_GENERATION_ARGS))
            if reserved:
                raise ValueError(f"generate_kwargs: {reserved} are set by the latent-reasoning pipeline itself")
            generation.update(generate_kwargs)
        generation.update(kwargs)
        for name in ("max_new_tokens", "num_beams"):
            if generation.get(name) is not None:
                generation[name] = _check_int(generation[name], name, 1)
        if generation.get("min_new_tokens") is not None:
            generation["min_new_tokens"] = _check_int(generation["min_new_tokens"], "min_new_tokens", 0)
        if generation.get("do_sample") is not None:
            generation["do_sample"] = check_flag(generation["do_sample"], "do_sample")
        if generation:
            forward_params["generate_kwargs"] = generation
            if generation.get("max_new_tokens") is not None:
                preprocess_params["max_new_tokens"] = generation["max_new_tokens"]
        return preprocess_params, forward_params, postprocess_params

    def __call__(self, inputs=None, **kwargs):
        """Run one prompt or a list of prompts; see the class docstring."""
        if inputs is None:
            raise ValueError("inputs: pass a prompt string (or a list of them) as the first argument")
        call_params = {k: v for k, v in kwargs.items() if k not in ("batch_size", "num_workers")}
        preprocess_params, _, _ = self._sanitize_parameters(**call_params)
        preprocess_params = {**self._preprocess_params, **preprocess_params}
        # Check and tokenise every prompt first, so that an error names the prompt it is about.
        if isinstance(inputs, (list, tuple)):
            if len(inputs) == 0:
                raise ValueError("inputs: got an empty list of prompts")
            inputs = [
                _Encoded(self._encode(item, f"inputs[{i}]", **preprocess_params)) for i, item in enumerate(inputs)
            ]
        elif isinstance(inputs, str):
            inputs = _Encoded(self._encode(inputs, "inputs", **preprocess_params))
        elif not isinstance(inputs, collections.abc.Iterable) or isinstance(inputs, (bytes, dict)):
            raise PromptTypeError(
                f"inputs: the latent-reasoning pipeline takes a prompt string or a list of them, got "
                f"{type(inputs).__name__}"
            )
        # else: a generator or a Dataset, checked item by item in `preprocess`
        return super().__call__(inputs, **kwargs)

    # ------------------------------------------------------------------ tokenisation

    def _steps(self, num_reasoning_steps) -> int:
        return int(
            self.model.config.reasoner_config.num_reasoning_steps
            if num_reasoning_steps is None
            else num_reasoning_steps
        )

    def _encode(self, prompt, where: str, num_reasoning_steps=None, max_new_tokens=None) -> list[int]:
        if not isinstance(prompt, str):
            raise PromptTypeError(
                f"{where}: a prompt must be a string of whitespace-separated tokens, got {type(prompt).__name__}"
            )
        if not prompt.strip():
            raise ValueError(f"{where}: empty prompt (it needs at least one token)")
        tokenizer = self.tokenizer
        if getattr(tokenizer, "is_fast", False):
            encoded = tokenizer(prompt, add_special_tokens=False, return_offsets_mapping=True)
            ids = list(encoded["input_ids"])
            words = [prompt[start:end] for start, end in encoded["offset_mapping"]]
        else:
            words = prompt.split()
            ids = [tokenizer.convert_tokens_to_ids(word) for word in words]
        if not ids:
            raise ValueError(f"{where}: empty prompt (it has no tokens)")
        unk = tokenizer.unk_token_id
        unknown = list(dict.fromkeys(word for word, i in zip(words, ids) if i == unk or i is None))
        if unknown:
            shown = ", ".join(repr(word) for word in unknown[:20]) + (" ..." if len(unknown) > 20 else "")
            raise ValueError(f"{where}: {len(unknown)} token(s) not in the tokenizer's vocabulary: {shown}")
        special = set(tokenizer.all_special_ids)
        specials = list(dict.fromkeys(word for word, i in zip(words, ids) if i in special))
        if specials:
            raise ValueError(
                f"{where}: special tokens are placed by the models, not written in a prompt: "
                + ", ".join(repr(word) for word in specials)
            )
        steps = self._steps(num_reasoning_steps)
        reasoner = self.model.config.reasoner_config
        limit = int(reasoner.max_position_embeddings) - steps
        if len(ids) > limit:
            raise ValueError(
                f"{where}: the prompt has {len(ids)} tokens, more than fit with num_reasoning_steps={steps}: "
                f"max_position_embeddings - num_reasoning_steps = {reasoner.max_position_embeddings} - {steps} = "
                f"{limit} (the prompt, [SEP] and the fed-back latents share the reasoner's positions)"
            )
        talker = self.model.config.talker_config
        new_tokens = steps + 1 if max_new_tokens is None else int(max_new_tokens)
        context = len(ids) if getattr(self.model, "is_dual", False) else 0
        needed = context + steps + new_tokens  # [prompt;] latents, BOS, then every new token but the last is read
        if needed > int(talker.max_position_embeddings):
            raise ValueError(
                f"{where}: the Talker's sequence would need {needed} positions (prompt {context} + "
                f"num_reasoning_steps {steps} + BOS + max_new_tokens {new_tokens} - 1), more than its "
                f"max_position_embeddings ({talker.max_position_embeddings}): shorten the prompt or lower "
                "num_reasoning_steps / max_new_tokens"
            )
        return ids

    # ------------------------------------------------------------------ batching

    def _pad_id(self) -> int:
        pad = getattr(self.tokenizer, "pad_token_id", None)
        return int(self.model.config.reasoner_config.pad_token_id if pad is None else pad)

    def _collate(self, items: list[dict]) -> dict:
        """Left-pad the prompts (pad id, mask 0): the reasoner reads the last prompt token at a fixed position
        (transformers' collate pads on the tokenizer's side); the batches of `JepaPipeline.get_iterator`."""
        length = max(item["prompt_ids"].shape[1] for item in items)
        prompt_ids = torch.full((len(items), length), self._pad_id(), dtype=torch.long)
        prompt_mask = torch.zeros((len(items), length), dtype=torch.long)
        for row, item in enumerate(items):
            n = item["prompt_ids"].shape[1]
            prompt_ids[row, length - n :] = item["prompt_ids"][0]
            prompt_mask[row, length - n :] = item["prompt_mask"][0]
        return {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask}

    # ------------------------------------------------------------------ pipeline steps

    def preprocess(self, inputs, num_reasoning_steps=None, max_new_tokens=None):
        ids = (
            inputs.ids
            if isinstance(inputs, _Encoded)
            else self._encode(inputs, "inputs", num_reasoning_steps=num_reasoning_steps, max_new_tokens=max_new_tokens)
        )
        prompt_ids = torch.tensor([ids], dtype=torch.long)
        return {"prompt_ids": prompt_ids, "prompt_mask": torch.ones_like(prompt_ids)}

    def _forward(self, model_inputs, num_reasoning_steps=None, latent_noise_std=0.0, seed=None, generate_kwargs=None):
        model = self.model
        steps = self._steps(num_reasoning_steps)
        generation = dict(generate_kwargs or {})
        if generation.get("max_new_tokens") is None:
            generation["max_new_tokens"] = steps + 1
        prompt_ids, prompt_mask = model_inputs["prompt_ids"], model_inputs["prompt_mask"]
        generator = None
        if seed is not None:
            generator = torch.Generator(device=prompt_ids.device).manual_seed(seed)
        devices = [prompt_ids.device] if prompt_ids.device.type == "cuda" else []
        rng = torch.random.fork_rng(devices=devices) if seed is not None else contextlib.nullcontext()
        with eval_mode(model), rng:
            if seed is not None:
                torch.manual_seed(seed)
            tokens, chain = model.generate(
                prompt_ids,
                prompt_mask,
                num_reasoning_steps=steps,
                latent_noise_std=latent_noise_std,
                generator=generator,
                **generation,
            )
        return {"tokens": tokens, "latents": chain}  # (batch, ...): per-sample, so batches split back into results

    def postprocess(self, model_outputs, return_latents=False, return_tensors=False):
        tokens = model_outputs["tokens"][0].tolist()
        eos = self.model.config.talker_config.eos_token_id
        if eos in tokens:
            tokens = tokens[: tokens.index(eos)]
        # .strip(): the reasoning tokenizers decode every token after a space (so text-generation continuations read
        # after their prompt); this task returns the answer alone.
        text = self.tokenizer.decode(tokens, skip_special_tokens=True, clean_up_tokenization_spaces=False).strip()
        latents = model_outputs["latents"][0]
        result = {"generated_text": text, "num_reasoning_steps": int(latents.shape[0])}
        if return_latents:
            result["latents"] = latents.clone() if return_tensors else latents.float().tolist()
        return result
