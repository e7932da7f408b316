"""JEPA-Reasoner: latent reasoning decoupled from token generation, and the base class of the family's models.

- [`JepaPreTrainedBase`]: what every model of the family shares as a `PreTrainedModel` (weight init, EMA-target
  housekeeping, strict loading).
- [`JepaReasonerModel`]: token encoder (causal blocks + hybrid norm) -> latents on the unit sphere; reasoning blocks
  (causal) predict the next token's latent; an EMA copy of the token encoder gives the targets; scaled cosine loss on
  the answer positions. `generate_latents` feeds each predicted latent back as the next input (KV cache or full
  recomputation). No vocabulary head.

The blocks are in `modeling_jepa_reasoner_blocks.py`, the Talkers and the reasoner + Talker pair in
`modeling_jepa_talker.py`, the coupled baselines (`CoupledTransformerLM`, `CoconutLM`) in
`modeling_jepa_reasoner_baselines.py`.

This file imports only torch and transformers (same-folder relative imports) so that `trust_remote_code` export works.
"""

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.cache_utils import Cache, DynamicCache
from transformers.modeling_outputs import BaseModelOutput
from transformers.utils import ModelOutput

from .configuration_jepa_reasoner import JepaReasonerConfig
from .modeling_jepa_reasoner_blocks import (
    HybridNorm,
    JepaBlock,
    JepaRMSNorm,
    check_mask,
    check_noise_std,
    check_token_ids,
    l2_normalize,
    run_blocks,
)

# ---------------------------------------------------------------------------------------------------- the base


def seed_auto_map(model: PreTrainedModel, *auto_classes: str):
    """Pre-seed `config.auto_map` with the Auto classes other than the one the class is registered for (only that
    one is written by `save_pretrained`), so a trust_remote_code export loads through each of them. The entries are
    overwritten, not kept: a config loaded from a folder saved when the class lived in another file names that
    file, and the export copies the file the class lives in now."""
    if getattr(type(model), "_auto_class", None) is None:
        return
    target = f"{type(model).__module__.split('.')[-1]}.{type(model).__name__}"
    auto_map = dict(getattr(model.config, "auto_map", None) or {})
    for auto_class in auto_classes:
        auto_map[auto_class] = target
    model.config.auto_map = auto_map


# Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.source_config_dict
def source_config_dict(cls, source, kwargs) -> dict | None:
    """The config dict `cls.from_pretrained(source, **kwargs)` would read (None without a source, or with `config=`
    given). Raises `ValueError` naming both model types when `source` holds another model type, before transformers
    fails on that model's config values."""
    if source is None or kwargs.get("config") is not None:
        return None
    hub_kwargs = ("cache_dir", "force_download", "proxies", "token", "local_files_only", "revision", "subfolder")
    config_dict, _ = cls.config_class.get_config_dict(source, **{k: kwargs[k] for k in hub_kwargs if k in kwargs})
    found, expected = config_dict.get("model_type"), cls.config_class.model_type
    if found is not None and found != expected:
        raise ValueError(
            f"{str(source)!r} holds a model of type {found!r}, but {cls.__name__} loads {expected!r} models: "
            f"load it with the class of its type (AutoModel.from_pretrained picks it). "
            f"{cls._strict_loading_hint}".strip()
        )
    return config_dict


# Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.copy_into_aligned_memory
@torch.no_grad()
def copy_into_aligned_memory(model: nn.Module) -> None:
    """Give each CPU parameter and buffer of `model` that lies outside PyTorch's aligned allocations a copy of its own.
    from_pretrained keeps the tensors safetensors serves from the memory-mapped file, at the file's 8-byte alignment,
    and CPU vector kernels can split their sums by alignment (seen on AMD EPYC): without the copy a loaded model's
    outputs could differ from the saved model's in the last bits. Each tensor object stays the same (`.data` is
    replaced), so tied weights stay tied."""
    alignment = 64  # bytes: what PyTorch's CPU allocator guarantees (c10's gAlignment)
    for module in model.modules():
        for tensor in (*module._parameters.values(), *module._buffers.values()):
            if tensor is not None and tensor.device.type == "cpu" and tensor.data_ptr() % alignment:
                tensor.data = tensor.data.clone()


class JepaPreTrainedBase(PreTrainedModel):
    """Weight init shared by the family, EMA-target housekeeping (`ema_pairs()` is empty unless the model has an EMA
    target) and strict loading (`from_pretrained(..., strict=True)` raises `ValueError` on missing, unexpected or
    mis-shaped weights, and re-freezes the EMA targets)."""

    base_model_prefix = "model"
    input_modalities = "text"
    supports_gradient_checkpointing = True
    _no_split_modules = ["JepaBlock"]
    _supports_sdpa = True
    _supports_flash_attn = True
    # Appended to the strict-loading error of `from_pretrained`.
    _strict_loading_hint = ""

    def _init_weights(self, module):
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            init.trunc_normal_(module.weight, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.trunc_normal_(module.weight, std=std)
        elif isinstance(module, JepaRMSNorm):
            init.ones_(module.weight)

    def ema_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """(online, target) module pairs the trainer updates by EMA: none unless the model has an EMA target."""
        return []

    # Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.BroJepaModel.copy_online_to_targets
    @torch.no_grad()
    def copy_online_to_targets(self):
        """Make every EMA target an exact copy of its online module (parameters and buffers)."""
        for online, target in self.ema_pairs():
            target.load_state_dict(online.state_dict())

    # Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.BroJepaModel.freeze_targets
    def freeze_targets(self):
        """Keep every EMA target out of the optimiser and in eval mode: only the EMA update (`ema_pairs`) moves it."""
        for _, target in self.ema_pairs():
            target.requires_grad_(False)
            target.eval()

    # Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.BroJepaModel.train
    def train(self, mode: bool = True):
        super().train(mode)
        for _, target in self.ema_pairs():
            target.eval()
        return self

    # Copied from hf_jepa.modeling.bro_jepa.modeling_bro_jepa.BroJepaModel.from_pretrained
    @classmethod
    def from_pretrained(cls, *args, strict: bool = True, **kwargs):
        """`PreTrainedModel.from_pretrained`, strict by default: weights missing from the checkpoint, left unused or of
        another shape (reported with `ignore_mismatched_sizes=True`; without it transformers raises already) raise
        `ValueError` instead of a warning; `strict=False` only warns. The EMA targets are re-frozen after loading
        (loading marks every floating parameter trainable again). A folder or repo holding another model type raises
        `ValueError` naming both types (instead of failing on the other model's config values)."""
        output_loading_info = kwargs.pop("output_loading_info", False)
        source_config_dict(cls, args[0] if args else kwargs.get("pretrained_model_name_or_path"), kwargs)
        model, loading_info = super().from_pretrained(*args, output_loading_info=True, **kwargs)
        copy_into_aligned_memory(model)
        model.freeze_targets()
        problems = {
            k: sorted(str(x) for x in (loading_info.get(k) or ()))
            for k in ("missing_keys", "unexpected_keys", "mismatched_keys")
        }
        if strict and any(problems.values()):
            raise ValueError(
                f"{cls.__name__}.from_pretrained: the checkpoint does not match the config (missing keys: "
                f"{problems['missing_keys'][:8]}, unexpected keys: {problems['unexpected_keys'][:8]}, mismatched "
                f"keys: {problems['mismatched_keys'][:8]}). {cls._strict_loading_hint}"
                "Pass strict=False to load anyway."
            )
        return (model, loading_info) if output_loading_info else model


# ------------------------------------------------------------------------------------------------------ reasoner


def scaled_cosine_loss(
    pred: torch.Tensor, target: torch.Tensor, k: float = 4.0, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """`k - k * cos(pred, target)` over the last dimension, averaged over the positions where `mask` is 1 (all
    positions without a mask), in fp32. Identical directions give 0, orthogonal ones `k`, opposite ones `2k`; the
    target side is detached."""
    cos = F.cosine_similarity(pred.float(), target.detach().float(), dim=-1, eps=1e-8)
    per_position = k - k * cos
    if mask is None:
        return per_position.mean()
    weights = mask.to(per_position.dtype)
    return (per_position * weights).sum() / weights.sum().clamp_min(1.0)


@dataclass
class JepaReasonerOutput(ModelOutput):
    """
    Output of [`JepaReasonerModel`].

    Args:
        loss: the scaled cosine loss over the answer positions (when answers are given).
        predictions: `(batch, answer_length, hidden)` unit latents predicted for the answer tokens:
            `predictions[:, j]` is read at the position before `answer_ids[:, j]` (SEP for j = 0).
        targets: `(batch, answer_length, hidden)` the EMA target encoder's latents of `answer_ids`.
        answer_mask: `(batch, answer_length)` the positions the loss counts (answer tokens and EOS).
        encoder_latents: `(batch, length, hidden)` the online token encoder's latents of `[prompt, SEP, answer]`.
        reasoner_latents: `(batch, length, hidden)` the reasoning blocks' unit predictions at every position.
    """

    loss: torch.FloatTensor | None = None
    predictions: torch.FloatTensor | None = None
    targets: torch.FloatTensor | None = None
    answer_mask: torch.LongTensor | None = None
    encoder_latents: torch.FloatTensor | None = None
    reasoner_latents: torch.FloatTensor | None = None


class JepaTokenEncoder(nn.Module):
    """Token embeddings + causal blocks + hybrid normalisation: tokens -> latents on the unit sphere."""

    def __init__(self, config: JepaReasonerConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(JepaBlock(config) for _ in range(config.num_encoder_layers))
        self.norm = HybridNorm(
            config.hidden_size, config.rms_norm_eps, config.l2_norm_eps, use_rms=config.latent_norm == "rms_l2"
        )

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.embed_tokens(input_ids)
        hidden = run_blocks(self.layers, hidden, attention_mask, causal=True)
        return self.norm(hidden)


class JepaReasonerPreTrainedModel(JepaPreTrainedBase):
    config: JepaReasonerConfig
    config_class = JepaReasonerConfig
    base_model_prefix = "jepa_reasoner"
    main_input_name = "prompt_ids"


class JepaReasonerModel(JepaReasonerPreTrainedModel):
    """
    The JEPA-Reasoner: `encoder` (token encoder, causal), `layers` (reasoning blocks, causal) + `norm` (hybrid
    norm), and `target_encoder` (EMA copy of `encoder`; frozen, always in eval mode; the trainer updates it
    through `ema_pairs()`).

    Training (`forward`): `[prompt, SEP, answer]` (prompt left-padded, answer = tokens + EOS + right padding) is
    encoded into latents (the answer positions' by the target encoder when `config.answer_input_source="target"`);
    the reasoning blocks read them causally and predict at position t the target encoder's latent of token t+1. The
    loss `k - k * cos` counts the positions that predict an answer token or the EOS, i.e. the SEP position and every
    answer position whose next token is not padding (`answer_mask`); the prompt positions do not count.

    Generation (`generate_latents`): `[prompt, SEP]` is encoded, the reasoning blocks predict the next latent, which
    (optionally perturbed by Gaussian noise and re-normalised) is appended as the next input, `num_steps` times. The
    chain never depends on tokens: there is no vocabulary head.
    """

    def __init__(self, config: JepaReasonerConfig):
        super().__init__(config)
        config.validate()
        self.encoder = JepaTokenEncoder(config)
        self.layers = nn.ModuleList(JepaBlock(config) for _ in range(config.num_hidden_layers))
        self.norm = HybridNorm(
            config.hidden_size, config.rms_norm_eps, config.l2_norm_eps, use_rms=config.latent_norm == "rms_l2"
        )
        self.target_encoder = copy.deepcopy(self.encoder)
        self.post_init()
        if self.encoder.embed_tokens.weight.device.type != "meta":
            self.copy_online_to_targets()
        self.freeze_targets()

    # ------------------------------------------------------------------ EMA target

    def ema_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """(online, target) module pairs the trainer updates by EMA."""
        return [(self.encoder, self.target_encoder)]

    # ------------------------------------------------------------------ building blocks

    def encode(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, use_target_encoder: bool = False
    ) -> torch.Tensor:
        """`(B, L, hidden)` unit latents of tokens from the (causal) token encoder, or from its EMA target."""
        check_token_ids(input_ids, "input_ids", self.config.vocab_size)
        attention_mask = check_mask(attention_mask, "attention_mask", input_ids)
        if input_ids.shape[1] > self.config.max_position_embeddings:
            raise ValueError(
                f"input_ids has length {input_ids.shape[1]}, longer than max_position_embeddings "
                f"({self.config.max_position_embeddings})"
            )
        if use_target_encoder:
            with torch.no_grad():
                return self.target_encoder(input_ids, attention_mask)
        return self.encoder(input_ids, attention_mask)

    def reason(self, latents: torch.Tensor, attention_mask: torch.Tensor, cache: Cache | None = None) -> torch.Tensor:
        """Reasoning blocks on the new input latents `(B, q, hidden)`: returns the unit predictions of the next
        latent at each of them. `attention_mask` `(B, K)` covers the cached positions and the new ones."""
        hidden = run_blocks(self.layers, latents, attention_mask, causal=True, cache=cache)
        return self.norm(hidden)

    def _with_sep(self, prompt_ids, prompt_mask):
        sep = torch.full_like(prompt_ids[:, :1], self.config.sep_token_id)
        return torch.cat([prompt_ids, sep], 1), torch.cat([prompt_mask, torch.ones_like(prompt_mask[:, :1])], 1)

    # ------------------------------------------------------------------ training

    def forward(
        self,
        prompt_ids: torch.Tensor | None = None,
        prompt_mask: torch.Tensor | None = None,
        answer_ids: torch.Tensor | None = None,
        answer_mask: torch.Tensor | None = None,
        return_dict: bool | None = None,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        **kwargs,
    ) -> JepaReasonerOutput | BaseModelOutput | tuple:
        r"""
        Called with `input_ids` (and `attention_mask`) instead of `prompt_ids`, as `pipeline("feature-extraction")`
        calls it, the model returns its reasoning: a `BaseModelOutput` whose `last_hidden_state` is the latent chain
        `generate_latents(input_ids, attention_mask)` `(batch, num_reasoning_steps, hidden)` (no noise); no loss.

        prompt_ids (`torch.LongTensor` of shape `(batch, P)`): prompts, left-padded.
        prompt_mask (`torch.LongTensor` of shape `(batch, P)`, *optional*): 1 for prompt tokens, 0 for padding.
        answer_ids (`torch.LongTensor` of shape `(batch, A)`, *optional*): answer tokens, EOS, right padding.
            Without answers the output holds the latents of `[prompt, SEP]` and no loss.
        answer_mask (`torch.LongTensor` of shape `(batch, A)`, *optional*): 1 for answer tokens and EOS.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        config = self.config
        if prompt_ids is None:
            if input_ids is None:
                raise ValueError(
                    "pass prompt_ids (training, latents of [prompt, SEP, answer]) or input_ids (the chain)"
                )
            if answer_ids is not None:
                raise ValueError("answer_ids go with prompt_ids, not input_ids: pass the prompts as prompt_ids")
            output = BaseModelOutput(last_hidden_state=self.generate_latents(input_ids, attention_mask))
            return output if return_dict else output.to_tuple()
        check_token_ids(prompt_ids, "prompt_ids", config.vocab_size)
        prompt_mask = check_mask(prompt_mask, "prompt_mask", prompt_ids)
        ids, mask = self._with_sep(prompt_ids, prompt_mask)
        if answer_ids is not None:
            check_token_ids(answer_ids, "answer_ids", config.vocab_size)
            answer_mask = check_mask(answer_mask, "answer_mask", answer_ids)
            if answer_ids.shape[0] != prompt_ids.shape[0]:
                raise ValueError(f"answer_ids has {answer_ids.shape[0]} rows, prompt_ids {prompt_ids.shape[0]}")
            ids, mask = torch.cat([ids, answer_ids], 1), torch.cat([mask, answer_mask], 1)
        if ids.shape[1] > config.max_position_embeddings:
            raise ValueError(
                f"prompt_ids + SEP + answer_ids have length {ids.shape[1]}, longer than max_position_embeddings "
                f"({config.max_position_embeddings})"
            )
        latents = self.encoder(ids, mask)
        inputs = latents
        start = prompt_ids.shape[1]
        if answer_ids is not None:
            with torch.no_grad():
                targets = self.target_encoder(ids, mask)[:, start + 1 :]
            if config.answer_input_source == "target":
                # Teacher forcing in the space generation feeds back: the answer positions read the target latents.
                inputs = torch.cat([latents[:, : start + 1], targets.to(latents.dtype)], 1)
            if self.training and config.scheduled_sampling_prob > 0:
                inputs = self._mix_in_own_predictions(inputs, mask, start, answer_mask)
        predicted = self.reason(inputs, mask)
        parts = dict(encoder_latents=latents, reasoner_latents=predicted)
        if answer_ids is not None:
            length = answer_ids.shape[1]
            predictions = predicted[:, start : start + length]
            loss = scaled_cosine_loss(predictions, targets, config.cosine_loss_scale, answer_mask)
            parts.update(loss=loss, predictions=predictions, targets=targets, answer_mask=answer_mask)
        output = JepaReasonerOutput(**parts)
        return output if return_dict else output.to_tuple()

    def _mix_in_own_predictions(self, latents, mask, prompt_length: int, answer_mask) -> torch.Tensor:
        """Scheduled sampling: each answer token's input latent (positions `prompt_length + 1 ...`) is replaced, with
        probability `config.scheduled_sampling_prob` (torch's global generator), by the reasoner's prediction of it
        from a gradient-free teacher-forced pass, i.e. what generation would have fed back there. Padding stays."""
        length = answer_mask.shape[1]
        with torch.no_grad():
            own = self.reason(latents.detach(), mask)[:, prompt_length : prompt_length + length]
        replace = torch.rand(answer_mask.shape, device=latents.device) < self.config.scheduled_sampling_prob
        replace = (replace & answer_mask.bool())[..., None]
        answer_inputs = torch.where(replace, own.to(latents.dtype), latents[:, prompt_length + 1 :])
        return torch.cat([latents[:, : prompt_length + 1], answer_inputs], 1)

    # ------------------------------------------------------------------ generation

    def _check_prompt(self, prompt_ids, prompt_mask) -> torch.Tensor:
        """Token ids in the vocabulary, at least one prompt, and at least one (unmasked) token in every prompt;
        returns the mask (all ones by default)."""
        check_token_ids(prompt_ids, "prompt_ids", self.config.vocab_size)
        if prompt_ids.shape[0] == 0:
            raise ValueError("prompt_ids is empty (batch size 0): pass at least one prompt")
        if prompt_ids.shape[1] == 0:
            raise ValueError("prompt_ids is empty: every prompt needs at least one token")
        prompt_mask = check_mask(prompt_mask, "prompt_mask", prompt_ids)
        empty = prompt_mask.sum(1) == 0
        if bool(empty.any()):
            rows = torch.nonzero(empty).flatten().tolist()
            raise ValueError(
                f"prompt_mask masks every token of rows {rows[:8]}: each prompt needs at least one token (an empty "
                "prompt leaves the reasoner nothing to reason about)"
            )
        return prompt_mask

    def _check_generation_inputs(self, prompt_ids, prompt_mask, num_steps):
        config = self.config
        num_steps = config.num_reasoning_steps if num_steps is None else num_steps
        if not isinstance(num_steps, int) or isinstance(num_steps, bool) or num_steps < 1:
            raise ValueError(f"num_steps must be an integer >= 1, got {num_steps!r}")
        prompt_mask = self._check_prompt(prompt_ids, prompt_mask)
        limit = config.max_position_embeddings - num_steps
        if prompt_ids.shape[1] > limit:
            raise ValueError(
                f"prompt_ids has length {prompt_ids.shape[1]}, longer than max_position_embeddings - num_steps "
                f"({config.max_position_embeddings} - {num_steps} = {limit}): the prompt, SEP and {num_steps - 1} "
                "fed-back latents must fit in max_position_embeddings"
            )
        return prompt_mask, num_steps

    def _feed_back(self, predicted, latent_noise_std, generator):
        if latent_noise_std > 0:
            noise = torch.randn(predicted.shape, generator=generator, device=predicted.device, dtype=torch.float32)
            return l2_normalize(predicted.float() + latent_noise_std * noise, self.config.l2_norm_eps).to(
                predicted.dtype
            )
        return predicted

    def generate_latents(
        self,
        prompt_ids: torch.Tensor,
        prompt_mask: torch.Tensor | None = None,
        num_steps: int | None = None,
        latent_noise_std: float = 0.0,
        generator: torch.Generator | None = None,
        use_cache: bool = True,
    ) -> torch.Tensor:
        """
        The latent chain `(batch, num_steps, hidden)`: `[prompt, SEP]` is encoded, then each step the reasoning
        blocks predict the next (unit) latent, which is appended as the next input. With `latent_noise_std > 0`,
        Gaussian noise of that std is added to each predicted latent and the sum re-normalised (L2) before it is
        recorded and fed back (noise drawn from `generator`, one `(batch, hidden)` draw per step). `use_cache`
        keeps the reasoning blocks' keys/values in a `DynamicCache`; `False` recomputes the whole sequence each
        step (same result up to float rounding). Gradients flow if enabled by the caller.

        Raises `ValueError` for an empty prompt (no prompts, no tokens, or a row whose `prompt_mask` is all 0) and
        for a `latent_noise_std` that is not a finite number >= 0 (NaN, inf, negative).
        """
        latent_noise_std = check_noise_std(latent_noise_std)
        prompt_mask, num_steps = self._check_generation_inputs(prompt_ids, prompt_mask, num_steps)
        ids, mask = self._with_sep(prompt_ids, prompt_mask)
        inputs = self.encoder(ids, mask)
        chain = []
        cache = DynamicCache() if use_cache else None
        new_inputs = inputs
        for step in range(num_steps):
            if cache is not None:
                predicted = self.reason(new_inputs, mask, cache)[:, -1]
            else:
                predicted = self.reason(inputs, mask)[:, -1]
            latent = self._feed_back(predicted, latent_noise_std, generator)
            chain.append(latent)
            if step + 1 < num_steps:
                new_inputs = latent[:, None]
                inputs = torch.cat([inputs, new_inputs], 1)
                mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)
        return torch.stack(chain, 1)


__all__ = [
    "JepaPreTrainedBase",
    "JepaReasonerModel",
    "JepaReasonerOutput",
    "JepaReasonerPreTrainedModel",
    "JepaTokenEncoder",
    "scaled_cosine_loss",
]
