"""The JEPA-Reasoner's Talkers, and the reasoner + Talker pair.

- [`MonoTalkerModel`], [`DualTalkerModel`]: decoders from the reasoner's latent chain (and, Dual, the encoded prompt)
  to tokens, generating through transformers' `GenerationMixin` with a `DynamicCache`. Both are the family's decoder
  LM ([`JepaDecoderLMMixin`]) with a projection of the latent chain in front of the tokens.
- [`JepaReasonerWithTalker`]: a reasoner + Talker pair as one `PreTrainedModel` (one directory, `AutoModel`,
  `push_to_hub`, the `latent-reasoning` pipeline; end-to-end `generate`).

This file imports only torch and transformers (same-folder relative imports) so that `trust_remote_code` export works.
"""

import copy

import torch
from torch import nn
from transformers import GenerationMixin
from transformers.cache_utils import Cache

from .configuration_jepa_reasoner import (
    DualTalkerConfig,
    JepaReasonerConfig,
    JepaReasonerWithTalkerConfig,
    JepaTalkerConfig,
    MonoTalkerConfig,
)
from .modeling_jepa_reasoner import JepaPreTrainedBase, JepaReasonerModel, seed_auto_map
from .modeling_jepa_reasoner_blocks import (
    JepaBlock,
    JepaDecoderLMMixin,
    JepaRMSNorm,
    JepaTalkerOutput,
    causal_lm_loss,
    check_finite_latents,
    check_mask,
    check_token_ids,
    keep_last,
    run_blocks,
)

# -------------------------------------------------------------------------------------------------------- talkers


class JepaTalkerPreTrainedModel(JepaPreTrainedBase):
    config: JepaTalkerConfig
    config_class = JepaTalkerConfig
    base_model_prefix = "jepa_talker"
    main_input_name = "input_ids"


class _TalkerBase(JepaDecoderLMMixin, JepaTalkerPreTrainedModel):
    """Decoder shared by the Talkers: the family's decoder LM (token embeddings, causal blocks, final RMSNorm, LM
    head) with a projection of the latent chain.

    The decoder sequence is `[prefix; tokens]`; the prefix (`_prefix`) is computed only when the cache is empty
    (first generation step, or every call without a cache) and its keys/values are kept in the cache afterwards, so
    `generate` only feeds the new token each step. The prefix mask is rebuilt every call from the (expanded) model
    kwargs `latent_mask` / `prompt_mask`, which `generate` passes on each step."""

    def __init__(self, config: JepaTalkerConfig):
        super().__init__(config)
        config.validate()
        self._init_decoder_lm(config, latent_size=config.latent_size)

    def _check_latents(self, latents, latent_mask, batch, check_values: bool = True):
        """The latent chain's shape and mask; with `check_values` (when the prefix is computed: once per `generate`)
        also that it is a floating tensor of finite values (NaN or inf raise `ValueError`)."""
        if latents is None:
            raise ValueError(
                f"{type(self).__name__} needs latents (batch, steps, latent_size): the reasoner's chain. A Talker is a "
                "component with no standard pipeline task of its own: for text from a prompt load the reasoner+Talker "
                "pair folder (`<talker run>/pair`) with pipeline('text-generation') or pipeline('latent-reasoning')"
            )
        if check_values:
            check_finite_latents(latents, "latents")
        if latents.ndim != 3 or latents.shape[-1] != self.config.latent_size:
            raise ValueError(
                f"latents must have shape (batch, steps, latent_size={self.config.latent_size}), got "
                f"{tuple(latents.shape)}"
            )
        if latents.shape[0] != batch:
            raise ValueError(f"latents has {latents.shape[0]} rows, input_ids {batch}")
        if latent_mask is None:
            return torch.ones(latents.shape[:2], dtype=torch.long, device=latents.device)
        if latent_mask.shape != latents.shape[:2]:
            raise ValueError(f"latent_mask must have shape {tuple(latents.shape[:2])}, got {tuple(latent_mask.shape)}")
        return latent_mask.long()

    def _prefix(self, batch, latents, latent_mask, prompt_ids, prompt_mask, compute: bool):
        """(prefix embeddings or None, prefix mask `(B, S)`)."""
        raise NotImplementedError

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        latents: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        latent_mask: torch.Tensor | None = None,
        prompt_ids: torch.Tensor | None = None,
        prompt_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        answer_ids: torch.Tensor | None = None,
        answer_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        return_dict: bool | None = None,
        past_key_values: Cache | None = None,
        **kwargs,
    ) -> JepaTalkerOutput | tuple:
        r"""
        input_ids (`torch.LongTensor` of shape `(batch, T)`): decoder tokens, `[BOS, answer...]` (or build them from
            `answer_ids` / `answer_mask`).
        latents (`torch.FloatTensor` of shape `(batch, S, latent_size)`): the reasoner's latent chain (finite
            values: NaN or inf raise `ValueError`).
        attention_mask (`torch.LongTensor` of shape `(batch, T_total)`, *optional*): 1 for decoder tokens; with a
            cache it covers every token so far (as `generate` passes it).
        latent_mask (`torch.LongTensor` of shape `(batch, S)`, *optional*): 1 for valid latents (all by default).
        prompt_ids, prompt_mask: the input context (Dual-Talker only; ignored by the Mono-Talker).
        labels (`torch.LongTensor` of shape `(batch, T)`, *optional*): targets aligned with `input_ids` (shifted
            inside), -100 ignored.
        answer_ids, answer_mask (*optional*): the data layer's answers. When given they take precedence: the
            decoder's `input_ids` / `attention_mask` / `labels` are built from them with
            [`decoder_inputs_from_answers`] (so `model(**data_batch, latents=...)` ignores the batch's coupled-LM
            `input_ids = [prompt, SEP, answer]` and `labels`).
        cache (`Cache`, *optional*): a `DynamicCache` (prefix and earlier tokens); `past_key_values` is an alias.
        use_cache (`bool`, *optional*): return the cache (a new `DynamicCache` when none is given).
        logits_to_keep (`int`, *optional*): compute logits for the last `n` positions only (0 = all).
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        config = self.config
        cache = cache if cache is not None else past_key_values
        input_ids, attention_mask, labels, cache, use_cache, past = self._decoder_call_inputs(
            input_ids, attention_mask, labels, cache, use_cache, answer_ids, answer_mask, needs="(decoder tokens)"
        )
        batch = input_ids.shape[0]
        prefix, prefix_mask = self._prefix(batch, latents, latent_mask, prompt_ids, prompt_mask, compute=past == 0)
        hidden = self.embed_tokens(input_ids)
        num_prefix = 0
        if past == 0:
            num_prefix = prefix.shape[1]
            hidden = torch.cat([prefix.to(hidden.dtype), hidden], 1)
        total = past + hidden.shape[1]
        if total > config.max_position_embeddings:
            raise ValueError(
                f"the decoder sequence (prefix {prefix_mask.shape[1]} + tokens) has length {total}, longer than "
                f"max_position_embeddings ({config.max_position_embeddings})"
            )
        num_tokens = total - prefix_mask.shape[1]
        if num_tokens < input_ids.shape[1]:
            raise ValueError(f"the cache holds {past} positions, fewer than the prefix ({prefix_mask.shape[1]})")
        token_mask = self._token_mask(attention_mask, batch, num_tokens, input_ids.device, "every decoder token so far")
        key_mask = torch.cat([prefix_mask.to(token_mask.device), token_mask], 1)
        hidden = run_blocks(self.layers, hidden, key_mask, causal=True, cache=cache)
        hidden = self.norm(hidden[:, num_prefix:])
        loss = None
        if labels is not None:
            logits = self.lm_head(hidden)
            loss = causal_lm_loss(logits, labels)
            logits = keep_last(logits, logits_to_keep)
        else:
            logits = self.lm_head(keep_last(hidden, logits_to_keep))
        output = JepaTalkerOutput(
            loss=loss, logits=logits, cache=cache if use_cache else None, last_hidden_state=hidden
        )
        return output if return_dict else output.to_tuple()


class MonoTalkerModel(_TalkerBase, GenerationMixin):
    """
    Mono-Talker: a causal decoder over `[latent_proj(latents); tokens]` with an LM head. Generate with
    `model.generate(input_ids=<(B, 1) BOS column>, latents=chain, max_new_tokens=..., ...)`: greedy, sampling and
    beam search all run through transformers' `GenerationMixin` with a `DynamicCache` (`latents` and `latent_mask`
    are model kwargs, expanded for beams by `GenerationMixin`).
    """

    config: MonoTalkerConfig
    config_class = MonoTalkerConfig

    def __init__(self, config: MonoTalkerConfig):
        super().__init__(config)
        self.post_init()
        seed_auto_map(self, "AutoModel")

    def _prefix(self, batch, latents, latent_mask, prompt_ids, prompt_mask, compute):
        latent_mask = self._check_latents(latents, latent_mask, batch, check_values=compute)
        prefix = self.latent_proj(latents.to(self.latent_proj.weight.dtype)) if compute else None
        return prefix, latent_mask


class DualTalkerModel(_TalkerBase, GenerationMixin):
    """
    Dual-Talker: a bidirectional context encoder over the prompt (`context_layers` + `context_norm`, sharing the
    token embeddings) and a causal decoder over `[encoded prompt; latent_proj(latents); tokens]` (a prefix layout, not
    cross-attention: one self-attention stack and one cache). Prompt padding is masked out of the decoder's
    attention. Generate with `model.generate(input_ids=<BOS column>, latents=chain, prompt_ids=..., prompt_mask=...,
    ...)`.
    """

    config: DualTalkerConfig
    config_class = DualTalkerConfig

    def __init__(self, config: DualTalkerConfig):
        super().__init__(config)
        self.context_layers = nn.ModuleList(JepaBlock(config) for _ in range(config.num_context_layers))
        self.context_norm = JepaRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_init()
        seed_auto_map(self, "AutoModel")

    def encode_context(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor | None = None) -> torch.Tensor:
        """`(B, P, hidden)` bidirectional context states of the prompt (padding keys masked)."""
        check_token_ids(prompt_ids, "prompt_ids", self.config.vocab_size)
        prompt_mask = check_mask(prompt_mask, "prompt_mask", prompt_ids)
        hidden = self.embed_tokens(prompt_ids)
        hidden = run_blocks(self.context_layers, hidden, prompt_mask, causal=False)
        return self.context_norm(hidden)

    def _prefix(self, batch, latents, latent_mask, prompt_ids, prompt_mask, compute):
        latent_mask = self._check_latents(latents, latent_mask, batch, check_values=compute)
        if prompt_ids is None:
            raise ValueError("DualTalkerModel needs prompt_ids (batch, P): the input context")
        if prompt_ids.shape[0] != batch:
            raise ValueError(f"prompt_ids has {prompt_ids.shape[0]} rows, input_ids {batch}")
        prompt_mask = check_mask(prompt_mask, "prompt_mask", prompt_ids)
        prefix = None
        if compute:
            context = self.encode_context(prompt_ids, prompt_mask)
            prefix = torch.cat(
                [context, self.latent_proj(latents.to(self.latent_proj.weight.dtype)).to(context.dtype)], 1
            )
        return prefix, torch.cat([prompt_mask, latent_mask.to(prompt_mask.device)], 1)


TALKER_MODEL_CLASSES = {MonoTalkerConfig.model_type: MonoTalkerModel, DualTalkerConfig.model_type: DualTalkerModel}


# ------------------------------------------------------------------------------------------------------ the pair


def _mark_initialized(module: nn.Module):
    """Flag every submodule as initialised, so that a `post_init` around it never re-initialises its weights."""
    for submodule in module.modules():
        submodule._is_hf_initialized = True


class JepaReasonerWithTalker(JepaPreTrainedBase, GenerationMixin):
    """
    A reasoner and a Talker (Mono or Dual) used together, as one `PreTrainedModel`: `self.reasoner` (a
    [`JepaReasonerModel`]) and `self.talker` (a [`MonoTalkerModel`] or [`DualTalkerModel`], chosen by
    `config.talker_config.model_type`).

    `save_pretrained(dir)` writes ONE directory (`config.json` with both sub-configs, `model.safetensors` with the keys
    `reasoner.*` and `talker.*`, plus the modeling files for trust_remote_code); `from_pretrained` (or
    `AutoModel.from_pretrained`) loads it strictly (missing, unexpected or mis-shaped weights raise `ValueError`)
    and re-freezes the reasoner's EMA target encoder; `push_to_hub` and `pipeline("latent-reasoning", model=...)`
    work on it. [`from_components`] pairs two existing models (their modules and weights are reused, not copied).
    `generate` runs the reasoner's latent chain and the Talker on it; the chain never depends on the Talker's tokens.
    """

    config: JepaReasonerWithTalkerConfig
    config_class = JepaReasonerWithTalkerConfig
    base_model_prefix = "jepa_reasoner_with_talker"
    main_input_name = "prompt_ids"

    def __init__(
        self,
        config: JepaReasonerWithTalkerConfig,
        reasoner: JepaReasonerModel | None = None,
        talker: "MonoTalkerModel | DualTalkerModel | None" = None,
    ):
        super().__init__(config)
        config.validate()
        talker_class = TALKER_MODEL_CLASSES[config.talker_config.model_type]
        if reasoner is None:
            reasoner = JepaReasonerModel(config.reasoner_config)
        else:  # from_components: keep the given weights as they are
            _mark_initialized(reasoner)
        if talker is None:
            talker = talker_class(config.talker_config)
        else:
            _mark_initialized(talker)
        self.reasoner = reasoner
        self.talker = talker
        self.post_init()
        seed_auto_map(self, "AutoModelForCausalLM")  # `pipeline("text-generation")` without hf_jepa

    @classmethod
    def from_components(
        cls, reasoner: JepaReasonerModel, talker: "MonoTalkerModel | DualTalkerModel"
    ) -> "JepaReasonerWithTalker":
        """Pair an existing reasoner and Talker: the pair's config holds their configs, and the pair holds the two
        models themselves (same modules, same weights bit for bit; training one trains the pair). Raises
        `ValueError` when they do not fit together (latent width, vocabulary) or are not a reasoner and a Talker."""
        if getattr(getattr(reasoner, "config", None), "model_type", None) != JepaReasonerConfig.model_type:
            raise ValueError(f"reasoner must be a JepaReasonerModel, got {type(reasoner).__name__}")
        talker_type = getattr(getattr(talker, "config", None), "model_type", None)
        if talker_type not in TALKER_MODEL_CLASSES:
            raise ValueError(f"talker must be a MonoTalkerModel or DualTalkerModel, got {type(talker).__name__}")
        # A composite config sets its attention implementation on its sub-configs (here the models' own configs):
        # hand each model's own choice down, or building the pair would reset them.
        implementations = {
            "reasoner_config": reasoner.config._attn_implementation,
            "talker_config": talker.config._attn_implementation,
        }
        config = JepaReasonerWithTalkerConfig(
            reasoner_config=reasoner.config, talker_config=talker.config, attn_implementation=implementations
        )
        return cls(config, reasoner=reasoner, talker=talker)

    @property
    def is_dual(self) -> bool:
        return self.config.talker_config.model_type == DualTalkerConfig.model_type

    # ------------------------------------------------------------------ weights

    def _init_weights(self, module):
        """Each sub-model initialises its own modules with its own config (transformers dispatches to the sub-models'
        `_initialize_weights` itself; this covers direct calls). The pair owns no weights of its own."""
        if module is self:
            return
        for child in (self.reasoner, self.talker):
            if any(module is candidate for candidate in child.modules()):
                child._init_weights(module)
                return

    def ema_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """The reasoner's (online, target) pairs: the Talker has no EMA target."""
        return self.reasoner.ema_pairs()

    # ------------------------------------------------------------------ generation

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            "JepaReasonerWithTalker has no forward pass of its own: train `model.reasoner` and `model.talker` (each "
            "has its own loss), and use `model.generate(prompt_ids, prompt_mask, ...)` for text"
        )

    @torch.no_grad()
    def generate(
        self,
        prompt_ids: torch.Tensor | None = None,
        prompt_mask: torch.Tensor | None = None,
        num_reasoning_steps: int | None = None,
        latent_noise_std: float = 0.0,
        generator: torch.Generator | None = None,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        **generation_kwargs,
    ):
        """Called as `GenerationMixin.generate` is (`input_ids`, `attention_mask`, `generation_config`, ... - what
        `pipeline("text-generation")` passes), the prompt is `input_ids` and the result is one tensor: the prompt
        followed by the Talker's tokens (BOS dropped), `torch.cat([input_ids, token_ids], 1)`. Decoding defaults
        come from `self.generation_config` (saved as generation_config.json) unless a `generation_config` or
        generation keywords are passed.

        Called with `prompt_ids`, it returns `(token_ids, latent_chain)`: the reasoner's chain `(B, steps, hidden)` (from `generate_latents`, with
        optional latent noise drawn from `generator`), then the Talker's `generate` from a BOS column with
        `generation_kwargs` (e.g. `max_new_tokens`, `do_sample`, `num_beams`). Prompts are left-padded
        (`prompt_mask` 0 on padding). `token_ids` excludes the BOS column; with `return_dict_in_generate=True` it is
        the Talker's full generate output instead. An empty prompt, a `latent_noise_std` that is not a finite number
        >= 0, or a chain with NaN / inf values (e.g. from broken weights) raise `ValueError`."""
        if prompt_ids is None:
            if input_ids is None:
                raise ValueError(
                    "the prompt is empty: the reasoner needs at least one prompt token to reason from (got no "
                    "prompt_ids and no input_ids; pipeline('text-generation') passes none for a prompt of '')"
                )
            if generation_kwargs.get("generation_config") is None:  # the saved defaults, updated by the keywords
                defaults = copy.deepcopy(self.generation_config)
                generation_kwargs = {**defaults.update(**generation_kwargs), "generation_config": defaults}
            tokens, _ = self.generate(
                input_ids, attention_mask, num_reasoning_steps, latent_noise_std, generator, **generation_kwargs
            )
            if not isinstance(tokens, torch.Tensor):
                raise ValueError("return_dict_in_generate is not supported with input_ids: call generate(prompt_ids)")
            return torch.cat([input_ids, tokens.to(input_ids.device)], 1)
        chain = self.reasoner.generate_latents(
            prompt_ids,
            prompt_mask,
            num_steps=num_reasoning_steps,
            latent_noise_std=latent_noise_std,
            generator=generator,
        )
        batch = prompt_ids.shape[0]
        bos = torch.full((batch, 1), self.talker.config.bos_token_id, dtype=torch.long, device=prompt_ids.device)
        kwargs = dict(input_ids=bos, latents=chain.to(self.talker.dtype))
        if self.is_dual:
            kwargs.update(prompt_ids=prompt_ids, prompt_mask=check_mask(prompt_mask, "prompt_mask", prompt_ids))
        kwargs.update(generation_kwargs)
        output = self.talker.generate(**kwargs)
        if isinstance(output, torch.Tensor):
            return output[:, 1:], chain
        return output, chain


__all__ = [
    "DualTalkerModel",
    "JepaReasonerWithTalker",
    "JepaTalkerPreTrainedModel",
    "MonoTalkerModel",
]
