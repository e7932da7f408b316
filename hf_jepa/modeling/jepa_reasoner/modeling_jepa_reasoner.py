"""JEPA-Reasoner: latent reasoning decoupled from token generation, and its Talkers.

Shared block (every model of the family): pre-norm transformer block with RMSNorm (computed in fp32), rotary position
embeddings (computed on the fly from the positions, so there is no buffer to initialise), SwiGLU MLP and attention
through transformers' attention interface (`config._attn_implementation`: "sdpa" by default, "eager", or a
flash-attention implementation) with a `(B, 1, q, k)` mask (causal or bidirectional, padding keys masked, each query
always sees itself so padded rows stay finite) in the form the backend takes (`backend_attention_mask`). Positions are
`cumsum(mask) - 1` over the full key sequence, so a left-padded prompt gets the same positions as the unpadded one and
cached decoding continues them. Every block is a `GradientCheckpointingLayer` (`model.activation_checkpointing_enable()`)
and is never split across devices (`_no_split_modules`).

- [`JepaReasonerModel`]: token encoder (causal blocks + hybrid norm) -> latents on the unit sphere; reasoning blocks
  (causal) predict the next token's latent; an EMA copy of the token encoder gives the targets; scaled cosine loss on
  the answer positions. `generate_latents` feeds each predicted latent back as the next input (KV cache or full
  recomputation). No vocabulary head.
- [`MonoTalkerModel`], [`DualTalkerModel`]: decoders from the latent chain (and, Dual, the encoded prompt) to tokens,
  generating through transformers' `GenerationMixin` with a `DynamicCache`.
- [`JepaReasonerWithTalker`]: a reasoner + Talker pair as one `PreTrainedModel` (one directory, `AutoModel`,
  `push_to_hub`, the `latent-reasoning` pipeline; end-to-end `generate`).

`residual_noise(model, std, generator)` (a context manager) adds noise to the residual stream of every block of any
model of the family, the like-for-like perturbation of the robustness comparison.

The coupled baselines (`CoupledTransformerLM`, `CoconutLM`) are in `modeling_jepa_reasoner_baselines.py`.

This file imports only torch and transformers (same-folder relative imports) so that `trust_remote_code` export works.
"""

import copy
import math
import numbers
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.cache_utils import Cache, DynamicCache
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutput
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.utils import ModelOutput
from transformers.utils.generic import is_flash_attention_requested

from .configuration_jepa_reasoner import (
    DualTalkerConfig,
    JepaReasonerConfig,
    JepaReasonerWithTalkerConfig,
    JepaTalkerConfig,
    MonoTalkerConfig,
)

# ------------------------------------------------------------------------------------------------------- norms


def rms_normalize(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
    """`x / sqrt(mean(x^2) + eps) * weight` over the last dimension, computed in fp32, returned in `x.dtype`."""
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    if weight is not None:
        x32 = x32 * weight.float()
    return x32.to(x.dtype)


def l2_normalize(x: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """`x / max(||x||_2, eps)` over the last dimension, computed in fp32, returned in `x.dtype`."""
    return F.normalize(x.float(), dim=-1, eps=eps).to(x.dtype)


def hybrid_normalize(
    x: torch.Tensor, weight: torch.Tensor | None, rms_eps: float = 1e-6, l2_eps: float = 1e-12
) -> torch.Tensor:
    """The paper's hybrid normalisation: RMSNorm (with gain `weight`), then L2 normalisation onto the unit sphere."""
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + rms_eps)
    if weight is not None:
        x32 = x32 * weight.float()
    return F.normalize(x32, dim=-1, eps=l2_eps).to(x.dtype)


class JepaRMSNorm(nn.Module):
    """RMSNorm with a learnable gain (initialised to 1), computed in fp32."""

    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x):
        return rms_normalize(x, self.weight, self.eps)


class HybridNorm(nn.Module):
    """RMSNorm with a learnable gain, then L2 normalisation: every output row has unit L2 norm (up to `l2_eps`).
    With `use_rms=False` only the L2 normalisation is applied (no parameters)."""

    def __init__(self, hidden_size: int, rms_eps: float = 1e-6, l2_eps: float = 1e-12, use_rms: bool = True):
        super().__init__()
        self.rms = JepaRMSNorm(hidden_size, rms_eps) if use_rms else None
        self.l2_eps = l2_eps

    def forward(self, x):
        if self.rms is None:
            return l2_normalize(x, self.l2_eps)
        return hybrid_normalize(x, self.rms.weight, self.rms.eps, self.l2_eps)


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


# ------------------------------------------------------------------------------------------------------ blocks


def positions_from_mask(key_mask: torch.Tensor) -> torch.Tensor:
    """`(B, K)` positions: index among the valid keys (`cumsum(mask) - 1`, 0 on leading padding)."""
    return (key_mask.long().cumsum(-1) - 1).clamp_min(0)


def attention_mask_4d(key_mask: torch.Tensor, query_length: int, causal: bool) -> torch.Tensor:
    """`(B, 1, q, K)` boolean SDPA mask (True = may attend) for the last `query_length` of `K` positions: valid keys,
    no future keys when `causal`, and always the query's own position (keeps fully padded rows finite)."""
    key_length = key_mask.shape[-1]
    device = key_mask.device
    query_index = torch.arange(query_length, device=device) + (key_length - query_length)
    key_index = torch.arange(key_length, device=device)
    allowed = key_mask.bool()[:, None, None, :].expand(-1, 1, query_length, -1)
    if causal:
        allowed = allowed & (key_index[None, :] <= query_index[:, None])
    return allowed | (key_index[None, :] == query_index[:, None])


def rotary_cos_sin(positions: torch.Tensor, head_dim: int, theta: float):
    """`(B, 1, T, head_dim)` cos and sin tables (fp32) of the rotary embedding at `positions` `(B, T)`."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim))
    freqs = positions.float()[..., None] * inv_freq
    angles = torch.cat([freqs, freqs], dim=-1)[:, None]
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return (x.float() * cos + rotated.float() * sin).to(x.dtype)


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
):
    """Attention written out (`attn_implementation="eager"`), with the signature of transformers' attention interface:
    `softmax(query key^T * scaling + attention_mask) value`, the softmax in fp32. `query`, `key`, `value`: `(B, heads,
    q|k, head_dim)`; `attention_mask`: additive float `(B, 1 | heads, q, k)` (0 where a query may attend, the dtype's
    minimum elsewhere) or None; dropout on the attention weights in training mode only. Returns the output `(B, q,
    heads, head_dim)` and the weights `(B, heads, q, k)`."""
    weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        weights = weights + attention_mask
    weights = F.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = F.dropout(weights, p=dropout, training=module.training)
    output = torch.matmul(weights, value).transpose(1, 2).contiguous()
    return output, weights


def attend(module: nn.Module, query, key, value, attention_mask, **kwargs):
    """`module`'s attention through transformers' attention interface (`module.config._attn_implementation`),
    `(B, heads, q|k, head_dim)` inputs -> `(output (B, q, heads, head_dim), weights or None)`.

    One exception, for speed: an SDPA call that autograd records, in bf16 on CPU, with fewer than 256 keys runs in
    fp32. PyTorch's CPU flash-attention backward is 5-7x slower in bf16 than in fp32 at 31-64 keys and 1.4x at 256
    keys with 32-dim heads, and bf16 only wins from 256 keys with 64-dim heads (measured by `benchmarks/report.py`,
    section 6, where the training steps' bf16 attention backward took most of their time). Autograd records the
    casts (gradients reach the bf16 inputs) and the output comes back in the query's dtype; inference, GPUs and
    fp32 are untouched."""
    implementation = module.config._attn_implementation
    attention_interface = ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager_attention_forward)
    in_float32 = (
        implementation == "sdpa"
        and query.device.type == "cpu"
        and query.dtype == torch.bfloat16
        and torch.is_grad_enabled()
        and key.shape[-2] < 256
    )
    if not in_float32:
        return attention_interface(module, query, key, value, attention_mask, **kwargs)
    if attention_mask is not None and attention_mask.is_floating_point():
        attention_mask = attention_mask.float()
    with torch.autocast("cpu", enabled=False):
        output, weights = attention_interface(
            module, query.float(), key.float(), value.float(), attention_mask, **kwargs
        )
    return output.to(query.dtype), weights


def mask_for_attention_backend(allowed: torch.Tensor, implementation: str | None, dtype: torch.dtype) -> torch.Tensor:
    """A boolean attention mask (True = may attend) in the form the attention backend takes: boolean for "sdpa",
    additive float of `dtype` (0 where allowed, the dtype's minimum elsewhere) for "eager" and any other backend."""
    if implementation == "sdpa":
        return allowed
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, torch.finfo(dtype).min)


def backend_attention_mask(
    implementation: str | None, key_mask: torch.Tensor, query_length: int, causal: bool, dtype: torch.dtype
) -> torch.Tensor | None:
    """The attention mask of the last `query_length` of the `K` positions of `key_mask` `(B, K)` (1 = valid key) in
    the form the backend `implementation` takes:
    - flash attention: the `(B, K)` padding mask itself (causality comes from `is_causal`; padded queries are dropped
      by unpadding), or None when every key is valid;
    - "sdpa": the boolean `(B, 1, q, K)` mask of [`attention_mask_4d`], or None when every key is valid and no mask
      is needed (bidirectional, or causal with `q == K` or `q == 1`: SDPA's `is_causal` covers it);
    - "eager" and other backends: that mask as an additive float mask of `dtype`."""
    key_length = key_mask.shape[-1]
    if is_flash_attention_requested(requested_attention_implementation=implementation):
        return None if bool(key_mask.bool().all()) else key_mask
    if implementation == "sdpa" and bool(key_mask.bool().all()):
        if not causal or query_length in (1, key_length):
            return None
    return mask_for_attention_backend(attention_mask_4d(key_mask, query_length, causal), implementation, dtype)


class JepaAttention(nn.Module):
    """Multi-head self-attention with rotary positions, through transformers' attention interface
    (`config._attn_implementation`); keys/values go through a transformers `Cache` if given. The family has no
    attention dropout (`hidden_dropout` acts on the residual branches)."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        width = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = width // self.num_heads
        self.scaling = self.head_dim**-0.5
        self.attention_dropout = 0.0
        self.is_causal = True
        self.rope_theta = float(config.rope_theta)
        self.q_proj = nn.Linear(width, width, bias=False)
        self.k_proj = nn.Linear(width, width, bias=False)
        self.v_proj = nn.Linear(width, width, bias=False)
        self.o_proj = nn.Linear(width, width, bias=False)

    def forward(self, hidden, cos, sin, attention_mask, cache: Cache | None = None, layer_idx: int = 0, is_causal=True):
        """`attention_mask` in the form the backend takes (see [`backend_attention_mask`])."""
        batch, length, width = hidden.shape
        shape = (batch, length, self.num_heads, self.head_dim)
        q = self.q_proj(hidden).view(shape).transpose(1, 2)
        k = self.k_proj(hidden).view(shape).transpose(1, 2)
        v = self.v_proj(hidden).view(shape).transpose(1, 2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if cache is not None:
            k, v = cache.update(k, v, layer_idx)
        attended, _ = attend(
            self,
            q,
            k.to(q.dtype),
            v.to(q.dtype),
            attention_mask,
            dropout=self.attention_dropout if self.training else 0.0,
            scaling=self.scaling,
            is_causal=is_causal,
        )
        return self.o_proj(attended.reshape(batch, length, width))


class JepaMLP(nn.Module):
    """SwiGLU: `down(silu(gate(x)) * up(x))`."""

    def __init__(self, config):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class JepaBlock(GradientCheckpointingLayer):
    """Pre-norm transformer block: `x + drop(attn(rms(x)))`, then `x + drop(mlp(rms(x)))`. Checkpointed (recomputed
    in the backward pass) after `activation_checkpointing_enable()`, in training mode with gradients on."""

    def __init__(self, config):
        super().__init__()
        self.input_norm = JepaRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.attention = JepaAttention(config)
        self.post_attention_norm = JepaRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = JepaMLP(config)
        self.dropout = nn.Dropout(config.hidden_dropout)

    def forward(self, hidden, cos, sin, attention_mask, cache=None, layer_idx=0, is_causal=True):
        hidden = hidden + self.dropout(
            self.attention(self.input_norm(hidden), cos, sin, attention_mask, cache, layer_idx, is_causal)
        )
        return hidden + self.dropout(self.mlp(self.post_attention_norm(hidden)))


def run_blocks(
    blocks, hidden: torch.Tensor, key_mask: torch.Tensor, causal: bool = True, cache: Cache | None = None
) -> torch.Tensor:
    """Run `blocks` on the new positions `hidden` `(B, q, H)`. `key_mask` `(B, K)` covers every key position (cached
    ones first, then the `q` new ones); the cache (if any) holds layers `0..len(blocks)-1`."""
    if len(blocks) == 0:
        return hidden
    query_length = hidden.shape[1]
    key_length = key_mask.shape[-1]
    past = cache.get_seq_length() if cache is not None else 0
    if past + query_length != key_length:
        raise ValueError(
            f"the attention mask covers {key_length} positions but the keys (cache included) cover "
            f"{past + query_length}: pass an attention_mask for the whole sequence"
        )
    if (
        cache is not None
        and torch.is_grad_enabled()
        and any(block.gradient_checkpointing and block.training for block in blocks)
    ):
        raise ValueError(
            "activation checkpointing recomputes each block in the backward pass and cannot fill a KV cache: "
            "generate in eval mode or under torch.no_grad(), or without a cache"
        )
    positions = positions_from_mask(key_mask)[:, -query_length:]
    attention = blocks[0].attention
    cos, sin = rotary_cos_sin(positions, attention.head_dim, attention.rope_theta)
    mask = backend_attention_mask(attention.config._attn_implementation, key_mask, query_length, causal, hidden.dtype)
    for index, block in enumerate(blocks):
        hidden = block(hidden, cos, sin, mask, cache=cache, layer_idx=index, is_causal=causal)
    return hidden


def check_token_ids(ids: torch.Tensor, name: str, vocab_size: int):
    if not isinstance(ids, torch.Tensor) or ids.ndim != 2 or ids.is_floating_point():
        raise ValueError(f"{name} must be an integer tensor (batch, length), got {getattr(ids, 'shape', ids)!r}")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        raise ValueError(
            f"{name} holds token ids in [{int(ids.min())}, {int(ids.max())}], outside the model's vocabulary of "
            f"{vocab_size}: the tokenizer does not match the model"
        )


def check_noise_std(value, name: str = "latent_noise_std") -> float:
    """`value` as a float when it is a finite real number >= 0 (`None` counts as 0), else `ValueError` naming `name`:
    a NaN, infinite or negative std must not be dropped silently (NaN) nor poison the latents (inf)."""
    if value is None:
        return 0.0
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.dtype == torch.bool:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


@contextmanager
def residual_noise(model: nn.Module, std: float, generator: torch.Generator | None = None) -> Iterator[list[nn.Module]]:
    """Inside the `with` block, every `JepaBlock` of `model` (all its stacks: a reasoner's token encoder and reasoning
    blocks, a Talker's decoder and context encoder, a coupled model's or COCONUT's blocks) adds Gaussian noise to its
    output, i.e. to the residual stream at every position it computes, of std `std` times the RMS over the hidden
    dimension of that position's own output vector (std 1 = noise as large as the signal, whatever the depth or
    width). Yields the hooked blocks; the hooks are removed on exit, also when the block raises.

    Under generation with a KV cache each position is computed once, so its noisy residual stream is what every later
    step attends to (the keys/values in the cache) and what the model feeds back (the reasoner's next latent and
    COCONUT's thoughts come out of the last block, the coupled model's next token out of its LM head): the same
    perturbation for every system, unlike `latent_noise_std`, which perturbs only the vector each system exposes.
    Without a cache every step recomputes the prefix and draws fresh noise for it. `generator` (on the model's
    device) makes the draws reproducible; one `(batch, q, hidden)` draw per block call, in call order. `std` = 0 adds
    nothing (outputs stay bit-identical) and draws nothing. Raises `ValueError` for a `std` that is not a finite
    number >= 0 or a model without `JepaBlock`s."""
    std = check_noise_std(std, "residual_noise_std")
    blocks = [module for module in model.modules() if isinstance(module, JepaBlock)]
    if not blocks:
        raise ValueError(f"residual_noise: {type(model).__name__} has no JepaBlock to perturb")

    def add_noise(block, inputs, output):
        if std == 0:
            return None
        hidden = output.float()
        rms = hidden.pow(2).mean(-1, keepdim=True).sqrt()
        noise = torch.randn(hidden.shape, generator=generator, device=hidden.device, dtype=torch.float32)
        return (hidden + std * rms * noise).to(output.dtype)

    handles = [block.register_forward_hook(add_noise) for block in blocks]
    try:
        yield blocks
    finally:
        for handle in handles:
            handle.remove()


def check_finite_latents(latents, name: str) -> torch.Tensor:
    """`latents` when it is a floating tensor of finite values, else `ValueError` naming `name` (one reduction)."""
    if not isinstance(latents, torch.Tensor) or not latents.is_floating_point():
        raise ValueError(
            f"{name} must be a floating-point tensor (the reasoner's latent chain), got "
            f"{getattr(latents, 'dtype', type(latents).__name__)}"
        )
    if not bool(torch.isfinite(latents).all()):
        count = int((~torch.isfinite(latents)).sum())
        raise ValueError(
            f"{name} holds {count} non-finite value(s) (NaN or inf): the Talker would decode them into arbitrary "
            "tokens; check the reasoner (weights, latent_noise_std) that produced the chain"
        )
    return latents


def check_mask(mask: torch.Tensor | None, name: str, ids: torch.Tensor) -> torch.Tensor:
    if mask is None:
        return torch.ones_like(ids, dtype=torch.long)
    if mask.shape != ids.shape:
        raise ValueError(f"{name} must have the shape of its ids {tuple(ids.shape)}, got {tuple(mask.shape)}")
    return mask.long()


def decoder_inputs_from_answers(
    answer_ids: torch.Tensor, answer_mask: torch.Tensor | None, bos_token_id: int, pad_token_id: int = 0
) -> dict:
    """Teacher-forcing inputs of a decoder from the data layer's answers (answer tokens, EOS, right padding):
    `input_ids = [BOS, answer_ids]`, `attention_mask = [1, answer_mask]` and `labels` = `input_ids` with -100 at BOS
    and padding (shifted inside the models: position t predicts token t+1, so every answer token and EOS is a
    target)."""
    answer_mask = check_mask(answer_mask, "answer_mask", answer_ids)
    bos = torch.full_like(answer_ids[:, :1], bos_token_id)
    input_ids = torch.cat(
        [bos, torch.where(answer_mask.bool(), answer_ids, torch.full_like(answer_ids, pad_token_id))], 1
    )
    attention_mask = torch.cat([torch.ones_like(answer_mask[:, :1]), answer_mask], 1)
    labels = torch.where(attention_mask.bool(), input_ids, torch.full_like(input_ids, -100))
    labels[:, 0] = -100
    return dict(input_ids=input_ids, attention_mask=attention_mask, labels=labels)


def causal_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy (fp32): `logits[:, t]` predicts `labels[:, t + 1]`; -100 is ignored."""
    shifted_logits = logits[:, :-1].float().reshape(-1, logits.shape[-1])
    shifted_labels = labels[:, 1:].reshape(-1).to(logits.device)
    if not (shifted_labels != -100).any():
        return shifted_logits.sum() * 0.0
    return F.cross_entropy(shifted_logits, shifted_labels, ignore_index=-100)


def keep_last(hidden: torch.Tensor, logits_to_keep) -> torch.Tensor:
    if isinstance(logits_to_keep, int):
        return hidden[:, -logits_to_keep:] if logits_to_keep > 0 else hidden
    return hidden[:, logits_to_keep]


def seed_auto_map(model: PreTrainedModel, *auto_classes: str):
    """Pre-seed `config.auto_map` with the Auto classes other than the one the class is registered for (only that
    one is written by `save_pretrained`), so a trust_remote_code export loads through each of them."""
    if getattr(type(model), "_auto_class", None) is None:
        return
    target = f"{type(model).__module__.split('.')[-1]}.{type(model).__name__}"
    auto_map = dict(getattr(model.config, "auto_map", None) or {})
    for auto_class in auto_classes:
        auto_map.setdefault(auto_class, target)
    model.config.auto_map = auto_map


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
        source = args[0] if args else kwargs.get("pretrained_model_name_or_path")
        if source is not None and kwargs.get("config") is None:
            hub_kwargs = (
                "cache_dir",
                "force_download",
                "proxies",
                "token",
                "local_files_only",
                "revision",
                "subfolder",
            )
            config_dict, _ = cls.config_class.get_config_dict(
                source, **{k: kwargs[k] for k in hub_kwargs if k in kwargs}
            )
            found, expected = config_dict.get("model_type"), cls.config_class.model_type
            if found is not None and found != expected:
                raise ValueError(
                    f"{str(source)!r} holds a model of type {found!r}, but {cls.__name__} loads {expected!r} models: "
                    f"load it with the class of its type (AutoModel.from_pretrained picks it). "
                    f"{cls._strict_loading_hint}".strip()
                )
        model, loading_info = super().from_pretrained(*args, output_loading_info=True, **kwargs)
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


# -------------------------------------------------------------------------------------------------------- talkers


@dataclass
class JepaTalkerOutput(ModelOutput):
    """
    Output of the Talkers and the coupled baselines (a `CausalLMOutputWithPast` with the transformers 5 `cache`
    field).

    Args:
        loss: next-token cross-entropy on `labels` (-100 ignored).
        logits: `(batch, kept_positions, vocab)` over the token positions (the last `logits_to_keep` of them).
        cache: the `DynamicCache` holding the decoder's keys/values (prefix included) when `use_cache`.
        last_hidden_state: `(batch, token_positions, hidden)` final-norm decoder states of the new token positions.
    """

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    cache: Cache | None = None
    last_hidden_state: torch.FloatTensor | None = None


class JepaTalkerPreTrainedModel(JepaPreTrainedBase):
    config: JepaTalkerConfig
    config_class = JepaTalkerConfig
    base_model_prefix = "jepa_talker"
    main_input_name = "input_ids"


class _TalkerBase(JepaTalkerPreTrainedModel):
    """Decoder shared by the Talkers: latent projection, token embeddings, causal blocks, final RMSNorm, LM head.

    The decoder sequence is `[prefix; tokens]`; the prefix (`_prefix`) is computed only when the cache is empty
    (first generation step, or every call without a cache) and its keys/values are kept in the cache afterwards, so
    `generate` only feeds the new token each step. The prefix mask is rebuilt every call from the (expanded) model
    kwargs `latent_mask` / `prompt_mask`, which `generate` passes on each step."""

    def __init__(self, config: JepaTalkerConfig):
        super().__init__(config)
        config.validate()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.latent_proj = nn.Linear(config.latent_size, config.hidden_size)
        self.layers = nn.ModuleList(JepaBlock(config) for _ in range(config.num_hidden_layers))
        self.norm = JepaRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def get_input_embeddings(self):
        return self.embed_tokens

    def set_input_embeddings(self, value):
        self.embed_tokens = value

    def get_output_embeddings(self):
        return self.lm_head

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
        if answer_ids is not None:  # a data-layer batch: its coupled-LM input_ids/attention_mask/labels do not apply
            built = decoder_inputs_from_answers(answer_ids, answer_mask, config.bos_token_id, config.pad_token_id)
            input_ids, attention_mask, labels = built["input_ids"], built["attention_mask"], built["labels"]
        elif input_ids is None:
            raise ValueError(f"{type(self).__name__} needs input_ids (decoder tokens) or answer_ids")
        check_token_ids(input_ids, "input_ids", config.vocab_size)
        batch = input_ids.shape[0]
        use_cache = use_cache if use_cache is not None else cache is not None
        if use_cache and cache is None:
            cache = DynamicCache(config=config)
        past = cache.get_seq_length() if cache is not None else 0
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
        if attention_mask is None:
            token_mask = torch.ones(batch, num_tokens, dtype=torch.long, device=input_ids.device)
        else:
            token_mask = attention_mask.long()
            if token_mask.shape != (batch, num_tokens):
                raise ValueError(
                    f"attention_mask must have shape {(batch, num_tokens)} (every decoder token so far), got "
                    f"{tuple(token_mask.shape)}"
                )
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
    "HybridNorm",
    "JepaBlock",
    "JepaPreTrainedBase",
    "JepaRMSNorm",
    "JepaReasonerModel",
    "JepaReasonerOutput",
    "JepaReasonerPreTrainedModel",
    "JepaReasonerWithTalker",
    "JepaTalkerOutput",
    "JepaTalkerPreTrainedModel",
    "JepaTokenEncoder",
    "MonoTalkerModel",
    "check_finite_latents",
    "check_noise_std",
    "decoder_inputs_from_answers",
    "hybrid_normalize",
    "l2_normalize",
    "residual_noise",
    "rms_normalize",
    "scaled_cosine_loss",
]
