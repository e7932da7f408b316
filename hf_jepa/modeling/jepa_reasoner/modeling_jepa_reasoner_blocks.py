"""The building blocks every model of the JEPA-Reasoner family is made of, and the checks of their inputs.

The block: a pre-norm transformer block with RMSNorm (computed in fp32), rotary position embeddings (computed on the
fly from the positions, so there is no buffer to initialise), SwiGLU MLP and attention through transformers' attention
interface (`config._attn_implementation`: "sdpa" by default, "eager", or a flash-attention implementation) with a
`(B, 1, q, k)` mask (causal or bidirectional, padding keys masked, each query always sees itself so padded rows stay
finite) in the form the backend takes (`backend_attention_mask`). Positions are `cumsum(mask) - 1` over the full key
sequence, so a left-padded prompt gets the same positions as the unpadded one and cached decoding continues them.
Every block is a `GradientCheckpointingLayer` (`model.activation_checkpointing_enable()`) and is never split across
devices (`_no_split_modules`). [`run_blocks`] runs a stack of them.

Also here, because every model of the family uses them:
- the norms (`JepaRMSNorm`, the reasoner's `HybridNorm`);
- `residual_noise(model, std, generator)` (a context manager), which adds noise to the residual stream of every block
  of any model of the family, the like-for-like perturbation of the robustness comparison;
- the input checks (token ids, masks, noise std, latent chains), raising `ValueError` naming the argument;
- the decoder LM of the Talkers and the coupled baselines ([`JepaDecoderLMMixin`]: token embeddings, causal blocks,
  final RMSNorm, LM head), its output ([`JepaTalkerOutput`]) and its next-token loss.

This file imports only torch and transformers so that `trust_remote_code` export works.
"""

import math
import numbers
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers.cache_utils import Cache, DynamicCache
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.utils import ModelOutput
from transformers.utils.generic import is_flash_attention_requested

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
    fp32. PyTorch's CPU flash-attention backward is slower in bf16 than in fp32 at these lengths, and bf16 only wins
    from 256 keys with 64-dim heads (`benchmarks/report.py`, section 6, measures it: there the training steps' bf16
    attention backward took most of their time). Autograd records the casts (gradients reach the bf16 inputs) and
    the output comes back in the query's dtype; inference, GPUs and fp32 are untouched."""
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


# ------------------------------------------------------------------------------------------------------ inputs


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


# ---------------------------------------------------------------------------------------------- residual noise


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


# -------------------------------------------------------------------------------------------------- decoder LM


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


class JepaDecoderLMMixin:
    """The decoder LM the Talkers and the coupled baselines are built on: token embeddings, causal blocks, final
    RMSNorm and an untied LM head, with the embedding accessors `GenerationMixin` and `resize_token_embeddings` use.
    Mixed in before the `PreTrainedModel` base; `_init_decoder_lm` builds it."""

    def _init_decoder_lm(self, config, latent_size: int | None = None):
        """Register `embed_tokens`, a `latent_proj` (`latent_size` -> `hidden_size`, only when `latent_size` is given:
        the Talkers' projection of the latent chain), `layers` (`config.num_hidden_layers` blocks), `norm` and
        `lm_head`, in this order: weight init draws in registration order, so the order fixes the initial weights of
        a seed."""
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        if latent_size is not None:
            self.latent_proj = nn.Linear(latent_size, config.hidden_size)
        self.layers = nn.ModuleList(JepaBlock(config) for _ in range(config.num_hidden_layers))
        self.norm = JepaRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def _decoder_call_inputs(
        self, input_ids, attention_mask, labels, cache, use_cache, answer_ids=None, answer_mask=None, needs=None
    ):
        """The start every decoder forward shares. With `answer_ids` (a data-layer batch) the decoder's `input_ids`,
        `attention_mask` and `labels` are built from the answers ([`decoder_inputs_from_answers`]); else a missing
        `input_ids` raises `ValueError` saying what it `needs` to hold (`needs=None`: the model takes no answers and
        the id check below names it). The ids are checked against the vocabulary, and a `DynamicCache` is opened
        when `use_cache` (default: whether a cache was given) asks for one.

        Returns `(input_ids, attention_mask, labels, cache, use_cache, past)`, `past` the number of cached
        positions (0 without a cache)."""
        config = self.config
        if answer_ids is not None:  # a data-layer batch: its coupled-LM input_ids/attention_mask/labels do not apply
            built = decoder_inputs_from_answers(answer_ids, answer_mask, config.bos_token_id, config.pad_token_id)
            input_ids, attention_mask, labels = built["input_ids"], built["attention_mask"], built["labels"]
        elif input_ids is None and needs is not None:
            raise ValueError(f"{type(self).__name__} needs input_ids {needs} or answer_ids")
        check_token_ids(input_ids, "input_ids", config.vocab_size)
        use_cache = use_cache if use_cache is not None else cache is not None
        if use_cache and cache is None:
            cache = DynamicCache(config=config)
        past = cache.get_seq_length() if cache is not None else 0
        return input_ids, attention_mask, labels, cache, use_cache, past

    @staticmethod
    def _token_mask(attention_mask, batch: int, num_tokens: int, device, covers: str) -> torch.Tensor:
        """The decoder tokens' key mask, `(batch, num_tokens)` long: all ones without `attention_mask`, else the mask
        when it has that shape, else `ValueError` saying what it must cover (`covers`, e.g. "cached + new tokens")."""
        if attention_mask is None:
            return torch.ones(batch, num_tokens, dtype=torch.long, device=device)
        token_mask = attention_mask.long()
        if token_mask.shape != (batch, num_tokens):
            raise ValueError(
                f"attention_mask must have shape {(batch, num_tokens)} ({covers}), got {tuple(token_mask.shape)}"
            )
        return token_mask

    def get_input_embeddings(self):
        return self.embed_tokens

    def set_input_embeddings(self, value):
        self.embed_tokens = value

    def get_output_embeddings(self):
        return self.lm_head


__all__ = [
    "HybridNorm",
    "JepaAttention",
    "JepaBlock",
    "JepaDecoderLMMixin",
    "JepaMLP",
    "JepaRMSNorm",
    "JepaTalkerOutput",
    "attend",
    "backend_attention_mask",
    "causal_lm_loss",
    "check_finite_latents",
    "check_mask",
    "check_noise_std",
    "check_token_ids",
    "decoder_inputs_from_answers",
    "eager_attention_forward",
    "hybrid_normalize",
    "keep_last",
    "l2_normalize",
    "mask_for_attention_backend",
    "residual_noise",
    "rms_normalize",
    "run_blocks",
]
