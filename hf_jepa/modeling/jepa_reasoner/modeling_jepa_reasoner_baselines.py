"""Coupled baselines of the JEPA-Reasoner paper, on the family's shared transformer block.

- [`CoupledTransformerLM`]: a standard decoder-only next-token LM on `[prompt, SEP, answer]`.
- [`CoconutLM`]: COCONUT-style continuous thoughts (the previous position's last-layer hidden state fed back as the
  next input embedding) between `[prompt, SEP]` and `[BOS, answer]`, decoded by the same model's LM head.

Both are the family's decoder LM ([`JepaDecoderLMMixin`]) and generate through transformers' `GenerationMixin` with a
`DynamicCache`. Imports only torch, transformers and the sibling modeling files (trust_remote_code export).
"""

from dataclasses import dataclass

import torch
from transformers import GenerationMixin
from transformers.cache_utils import Cache
from transformers.utils import ModelOutput

from .configuration_jepa_reasoner import CoconutConfig, CoupledTransformerConfig
from .modeling_jepa_reasoner import JepaPreTrainedBase, seed_auto_map
from .modeling_jepa_reasoner_blocks import (
    JepaDecoderLMMixin,
    JepaTalkerOutput,
    causal_lm_loss,
    check_mask,
    check_noise_std,
    check_token_ids,
    keep_last,
    run_blocks,
)


class _DecoderLMBase(JepaDecoderLMMixin, JepaPreTrainedBase):
    """The family's decoder LM (token embeddings, causal blocks, final RMSNorm, untied LM head) on `[prompt, SEP,
    ...]`, with the optional noise on the final hidden states of the robustness comparison."""

    main_input_name = "input_ids"

    def __init__(self, config):
        super().__init__(config)
        config.validate()
        self._init_decoder_lm(config)

    def _decode(self, hidden, key_mask, cache):
        """Causal blocks + final norm on the new positions `hidden` (`key_mask` covers cache + new)."""
        if key_mask.shape[1] > self.config.max_position_embeddings:
            raise ValueError(
                f"the sequence has length {key_mask.shape[1]}, longer than max_position_embeddings "
                f"({self.config.max_position_embeddings})"
            )
        return self.norm(run_blocks(self.layers, hidden, key_mask, causal=True, cache=cache))

    def _logits(self, hidden, logits_to_keep, latent_noise_std, noise_generator):
        """LM head on the last `logits_to_keep` positions; Gaussian noise of std `latent_noise_std` is added to exactly
        those final hidden states first (so generation draws one `(B, 1, H)` noise sample per step, with or without
        a cache)."""
        kept = keep_last(hidden, logits_to_keep)
        latent_noise_std = check_noise_std(latent_noise_std)
        if latent_noise_std > 0:
            noise = torch.randn(kept.shape, generator=noise_generator, device=kept.device, dtype=torch.float32)
            kept = (kept.float() + latent_noise_std * noise).to(kept.dtype)
        return self.lm_head(kept)


class CoupledTransformerLM(_DecoderLMBase, GenerationMixin):
    """
    Standard decoder-only LM (the coupled baseline): `input_ids = [prompt, SEP, answer]` from the data layer (prompt
    left-padded), `labels` with -100 on prompt/SEP/padding, next-token cross-entropy. Generate with
    `model.generate(input_ids=[prompt, SEP], attention_mask=..., max_new_tokens=...)` through `GenerationMixin`.

    `latent_noise_std` (forward and generate kwarg) adds Gaussian noise of that std to the final hidden states (after
    the final norm) right before the LM head, at the positions whose logits are computed: the coupled analogue of the
    reasoner's latent noise for the robustness comparison. `noise_generator` (a `torch.Generator`) makes it
    reproducible; without one the global RNG is used.
    """

    config: CoupledTransformerConfig
    config_class = CoupledTransformerConfig
    base_model_prefix = "jepa_coupled_lm"

    def __init__(self, config: CoupledTransformerConfig):
        super().__init__(config)
        self.post_init()
        seed_auto_map(self, "AutoModel")

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        cache: Cache | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        latent_noise_std: float = 0.0,
        noise_generator: torch.Generator | None = None,
        return_dict: bool | None = None,
        past_key_values: Cache | None = None,
        **kwargs,
    ) -> JepaTalkerOutput | tuple:
        r"""
        input_ids (`(batch, T)`): new tokens (all tokens without a cache). attention_mask (`(batch, T_total)`):
        1 for tokens, covering the cached ones too. labels: aligned with `input_ids`, shifted inside, -100 ignored.
        cache / past_key_values: a `DynamicCache`. logits_to_keep: logits for the last n positions only (0 = all).
        latent_noise_std, noise_generator: Gaussian noise on the final hidden states before the LM head.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        cache = cache if cache is not None else past_key_values
        input_ids, attention_mask, labels, cache, use_cache, past = self._decoder_call_inputs(
            input_ids, attention_mask, labels, cache, use_cache
        )
        batch, length = input_ids.shape
        key_mask = self._token_mask(attention_mask, batch, past + length, input_ids.device, "cached + new tokens")
        hidden = self._decode(self.embed_tokens(input_ids), key_mask, cache)
        loss = None
        if labels is not None:
            logits = self._logits(hidden, 0, latent_noise_std, noise_generator)
            loss = causal_lm_loss(logits, labels)
            logits = keep_last(logits, logits_to_keep)
        else:
            logits = self._logits(hidden, logits_to_keep, latent_noise_std, noise_generator)
        output = JepaTalkerOutput(
            loss=loss, logits=logits, cache=cache if use_cache else None, last_hidden_state=hidden
        )
        return output if return_dict else output.to_tuple()


@dataclass
class CoconutOutput(ModelOutput):
    """
    Output of [`CoconutLM`].

    Args:
        loss: next-token cross-entropy on the answer tokens (`labels`, -100 ignored).
        logits: `(batch, kept_positions, vocab)` over the decoder token positions `[BOS, answer...]`.
        cache: the `DynamicCache` (prompt, SEP, thoughts and tokens so far) when `use_cache`.
        last_hidden_state: `(batch, token_positions, hidden)` final-norm states of the new token positions.
        thoughts: `(batch, num_latent_thoughts, hidden)` the continuous thoughts fed as input embeddings (noise
            included); only on calls that computed them (empty cache).
    """

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    cache: Cache | None = None
    last_hidden_state: torch.FloatTensor | None = None
    thoughts: torch.FloatTensor | None = None


class CoconutLM(_DecoderLMBase, GenerationMixin):
    """
    COCONUT-style coupled latent model. Sequence: `[prompt (left-padded), SEP, t_1..t_K, BOS, answer...]`; the input
    embedding of thought `t_k` is the last-layer (final-norm) hidden state at the previous position (SEP for `t_1`),
    plus optional noise; `BOS` ends the thoughts (COCONUT's `<eot>`) and the answer is decoded with the LM head.

    Thoughts are computed sequentially, only when the cache is empty (first generation step, or every call without
    a cache): with a cache incrementally (one position per thought), without one by recomputing the whole prefix
    for each thought. Noise on the thoughts comes as an explicit additive `thought_noise` `(B, K, hidden)` tensor
    (or is drawn from `latent_noise_std` / `noise_generator` in `forward`); `generate` draws it once, so cached and
    uncached generation see the same thoughts.

    Training: `model(prompt_ids=..., prompt_mask=..., answer_ids=..., answer_mask=...)` (the decoder tokens and labels
    are built with [`decoder_inputs_from_answers`]), or pass `input_ids` / `attention_mask` / `labels` for `[BOS,
    answer]` yourself. Generation: `model.generate(prompt_ids, prompt_mask, latent_noise_std=0.0, max_new_tokens=...,
    ...)` returns `[BOS, answer tokens...]` (`GenerationMixin` output).
    """

    config: CoconutConfig
    config_class = CoconutConfig
    base_model_prefix = "jepa_coconut"

    def __init__(self, config: CoconutConfig):
        super().__init__(config)
        self.post_init()
        seed_auto_map(self, "AutoModel")

    def _prefix_mask(self, prompt_ids, prompt_mask, batch):
        if prompt_ids is None:
            raise ValueError("CoconutLM needs prompt_ids (batch, P)")
        check_token_ids(prompt_ids, "prompt_ids", self.config.vocab_size)
        if prompt_ids.shape[0] != batch:
            raise ValueError(f"prompt_ids has {prompt_ids.shape[0]} rows, input_ids {batch}")
        prompt_mask = check_mask(prompt_mask, "prompt_mask", prompt_ids)
        extra = torch.ones(batch, 1 + self.config.num_latent_thoughts, dtype=torch.long, device=prompt_mask.device)
        return prompt_mask, torch.cat([prompt_mask, extra], 1)

    def _thoughts(self, prompt_ids, prefix_mask, thought_noise, cache):
        """Run `[prompt, SEP]` and the K thoughts; returns (prefix input embeddings incl. thoughts, thoughts). With a
        cache, the keys/values of every prefix position but the last (the last thought, or SEP when K = 0) stay in
        it; the token pass feeds that last position first."""
        num_thoughts = self.config.num_latent_thoughts
        sep = torch.full_like(prompt_ids[:, :1], self.config.sep_token_id)
        embeds = self.embed_tokens(torch.cat([prompt_ids, sep], 1))
        length = embeds.shape[1]
        thoughts = []
        new = embeds
        for k in range(num_thoughts):
            if cache is not None:
                hidden = self._decode(new, prefix_mask[:, :length], cache)
            else:
                hidden = self._decode(embeds, prefix_mask[:, :length], None)
            thought = hidden[:, -1:]
            if thought_noise is not None:
                thought = (thought.float() + thought_noise[:, k : k + 1].float()).to(thought.dtype)
            thoughts.append(thought)
            new = thought.to(embeds.dtype)
            embeds = torch.cat([embeds, new], 1)
            length += 1
        thoughts = torch.cat(thoughts, 1) if thoughts else embeds[:, :0]
        return embeds, thoughts

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        prompt_ids: torch.Tensor | None = None,
        prompt_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        answer_ids: torch.Tensor | None = None,
        answer_mask: torch.Tensor | None = None,
        thought_noise: torch.Tensor | None = None,
        latent_noise_std: float = 0.0,
        noise_generator: torch.Generator | None = None,
        cache: Cache | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        return_dict: bool | None = None,
        past_key_values: Cache | None = None,
        **kwargs,
    ) -> CoconutOutput | tuple:
        r"""
        input_ids (`(batch, T)`): decoder tokens `[BOS, answer...]` (new ones only with a non-empty cache).
        attention_mask (`(batch, T_total)`, *optional*): 1 for decoder tokens, covering the cached ones too.
        prompt_ids, prompt_mask (`(batch, P)`): the left-padded prompt (needed on every call; `generate` passes them).
        labels: aligned with `input_ids`, shifted inside, -100 ignored.
        answer_ids, answer_mask: the data layer's answers; when given they take precedence and `input_ids` /
            `attention_mask` / `labels` are built from them (`model(**data_batch)` works).
        thought_noise (`(batch, K, hidden)`, *optional*): additive noise on the thoughts; else drawn with std
            `latent_noise_std` from `noise_generator` when the thoughts are computed.
        cache / past_key_values, use_cache, logits_to_keep: as [`CoupledTransformerLM`].
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        config = self.config
        cache = cache if cache is not None else past_key_values
        input_ids, attention_mask, labels, cache, use_cache, past = self._decoder_call_inputs(
            input_ids, attention_mask, labels, cache, use_cache, answer_ids, answer_mask, needs="([BOS, answer...])"
        )
        batch, length = input_ids.shape
        _, prefix_mask = self._prefix_mask(prompt_ids, prompt_mask, batch)
        num_tokens = past + length - prefix_mask.shape[1] if past else length
        token_mask = self._token_mask(attention_mask, batch, num_tokens, input_ids.device, "every decoder token so far")
        key_mask = torch.cat([prefix_mask, token_mask.to(prefix_mask.device)], 1)
        token_embeds = self.embed_tokens(input_ids)
        thoughts = None
        if past == 0:
            latent_noise_std = check_noise_std(latent_noise_std)
            if thought_noise is None and latent_noise_std > 0 and config.num_latent_thoughts:
                thought_noise = latent_noise_std * torch.randn(
                    batch,
                    config.num_latent_thoughts,
                    config.hidden_size,
                    generator=noise_generator,
                    device=token_embeds.device,
                    dtype=torch.float32,
                )
            if thought_noise is not None and thought_noise.shape != (
                batch,
                config.num_latent_thoughts,
                config.hidden_size,
            ):
                raise ValueError(
                    f"thought_noise must have shape {(batch, config.num_latent_thoughts, config.hidden_size)}, "
                    f"got {tuple(thought_noise.shape)}"
                )
            prefix, thoughts = self._thoughts(prompt_ids, prefix_mask, thought_noise, cache)
            if cache is not None:
                # `[prompt, SEP, t_1..t_{K-1}]` are cached; the last thought (or SEP, K = 0) is fed with the tokens.
                cached = cache.get_seq_length()
                new = torch.cat([prefix[:, cached:], token_embeds], 1)
            else:
                new = torch.cat([prefix, token_embeds], 1)
        else:
            new = token_embeds
        hidden = self._decode(new, key_mask, cache)
        hidden = hidden[:, -length:]
        loss = None
        if labels is not None:
            logits = self._logits(hidden, 0, 0.0, None)
            loss = causal_lm_loss(logits, labels)
            logits = keep_last(logits, logits_to_keep)
        else:
            logits = self._logits(hidden, logits_to_keep, 0.0, None)
        output = CoconutOutput(
            loss=loss, logits=logits, cache=cache if use_cache else None, last_hidden_state=hidden, thoughts=thoughts
        )
        return output if return_dict else output.to_tuple()

    @torch.no_grad()
    def generate(
        self,
        prompt_ids: torch.Tensor | None = None,
        prompt_mask: torch.Tensor | None = None,
        latent_noise_std: float = 0.0,
        noise_generator: torch.Generator | None = None,
        input_ids: torch.Tensor | None = None,
        thought_noise: torch.Tensor | None = None,
        **kwargs,
    ):
        """Run the thoughts after `[prompt, SEP]`, then decode from a BOS column through `GenerationMixin`
        (greedy / sampling / beams, with or without a cache: `use_cache=False`). Noise of std `latent_noise_std`
        (drawn once from `noise_generator`, shape `(B, K, hidden)`) is added to the thoughts. Returns what
        `GenerationMixin.generate` returns: `[BOS, answer tokens...]` by default.

        Called with `input_ids` and no `prompt_ids` (as `pipeline("text-generation")` calls it), `input_ids` is the
        prompt (`attention_mask` its mask) and the result is the prompt followed by the answer tokens (BOS dropped),
        as `GenerationMixin.generate` returns for a decoder-only model."""
        if prompt_ids is None and input_ids is not None:
            prompt = input_ids
            generated = self.generate(
                prompt_ids=prompt,
                prompt_mask=kwargs.pop("attention_mask", None),
                latent_noise_std=latent_noise_std,
                noise_generator=noise_generator,
                thought_noise=thought_noise,
                **kwargs,
            )
            if not isinstance(generated, torch.Tensor):
                raise ValueError("return_dict_in_generate is not supported with input_ids: call generate(prompt_ids)")
            return torch.cat([prompt, generated[:, 1:]], 1)
        if prompt_ids is None:
            raise ValueError("CoconutLM.generate needs prompt_ids (batch, P)")
        batch = prompt_ids.shape[0]
        if input_ids is None:
            input_ids = torch.full((batch, 1), self.config.bos_token_id, dtype=torch.long, device=prompt_ids.device)
        latent_noise_std = check_noise_std(latent_noise_std)
        if thought_noise is None and latent_noise_std > 0 and self.config.num_latent_thoughts:
            thought_noise = latent_noise_std * torch.randn(
                batch,
                self.config.num_latent_thoughts,
                self.config.hidden_size,
                generator=noise_generator,
                dtype=torch.float32,
            ).to(prompt_ids.device)
        prompt_mask = check_mask(prompt_mask, "prompt_mask", prompt_ids)
        return super().generate(
            input_ids=input_ids, prompt_ids=prompt_ids, prompt_mask=prompt_mask, thought_noise=thought_noise, **kwargs
        )


__all__ = ["CoconutLM", "CoconutOutput", "CoupledTransformerLM"]
