"""EPM-JEPA's experience memory: the surprisal gate, the FIFO experience buffer, the transformer that encodes it with
the attention aggregator queried by the current latent, and the hypernetwork whose output `d` modulates the peft LoRA
layers of the predictor (`dW = U diag(d) V^T`, track C).

This file imports only torch, peft and its own folder so that `trust_remote_code` export works.
"""

import contextlib

import torch
import torch.nn.functional as F
from peft.tuners.lora import LoraLayer
from torch import nn

from .configuration_epm_jepa import EpmJepaConfig

# The peft adapter that holds the experience LoRA layers (track C).
ADAPTER_NAME = "experience"


# --------------------------------------------------------------------------------------------------------- memory


class EpmJepaSurprisalGate(nn.Module):
    """Boundary detection on batch-mean surprisal: an event fires when it exceeds `mean + threshold_std * std` of
    its running statistics (exponential moving averages, updated after every training batch, kept in the checkpoint
    because they calibrate the gate to the training distribution)."""

    def __init__(self, config: EpmJepaConfig):
        super().__init__()
        self.momentum = config.surprisal_momentum
        self.threshold_std = config.surprisal_threshold_std
        self.warmup_updates = config.gate_warmup_updates
        self.register_buffer("running_mean", torch.zeros(()))
        self.register_buffer("running_var", torch.ones(()))
        self.register_buffer("num_updates", torch.zeros((), dtype=torch.long))

    def threshold(self) -> torch.Tensor:
        return self.running_mean + self.threshold_std * self.running_var.clamp_min(0).sqrt()

    @torch.no_grad()
    def observe(self, surprisal: torch.Tensor) -> bool:
        """Decide on one batch-mean surprisal, then fold it into the running statistics. Returns whether it fired.
        A non-finite surprisal (NaN or inf) is ignored: it never fires and leaves the statistics unchanged, so they
        stay finite (and so does the checkpoint that stores them)."""
        surprisal = surprisal.detach().float()
        if not bool(torch.isfinite(surprisal)):
            return False
        fired = bool(self.num_updates >= self.warmup_updates) and bool(surprisal > self.threshold())
        if self.num_updates == 0:
            self.running_mean.copy_(surprisal)
            self.running_var.zero_()
        else:
            delta = surprisal - self.running_mean
            self.running_mean.add_((1 - self.momentum) * delta)
            self.running_var.mul_(self.momentum).add_(self.momentum * (1 - self.momentum) * delta**2)
        self.num_updates += 1
        return fired


class EpmJepaExperienceBuffer(nn.Module):
    """FIFO ring of `capacity` latent transitions. Slots fill in order, so the first `occupancy` slots are valid;
    once full, each write overwrites the oldest entries. Non-persistent: never saved, rebuilt at run time."""

    def __init__(self, config: EpmJepaConfig):
        super().__init__()
        self.capacity = config.buffer_capacity
        self.register_buffer("entries", torch.zeros(config.buffer_capacity, config.buffer_entry_dim), persistent=False)
        self.register_buffer("num_writes", torch.zeros((), dtype=torch.long), persistent=False)

    @property
    def occupancy(self) -> int:
        return min(int(self.num_writes), self.capacity)

    @torch.no_grad()
    def write(self, entries: torch.Tensor) -> int:
        """Append `(n, entry_dim)` entries (the newest `capacity` are kept). Rows holding a NaN or inf are skipped, so
        the buffer never stores a non-finite entry. Returns the number of rows written."""
        if entries.ndim != 2 or entries.shape[1] != self.entries.shape[1]:
            raise ValueError(f"entries must have shape (n, {self.entries.shape[1]}), got {tuple(entries.shape)}")
        finite = torch.isfinite(entries).all(dim=1)
        if not bool(finite.all()):
            entries = entries[finite]
        written = entries.shape[0]
        entries = entries[-self.capacity :]
        slots = (int(self.num_writes) + torch.arange(entries.shape[0], device=self.entries.device)) % self.capacity
        self.entries[slots] = entries.to(self.entries.dtype)
        self.num_writes += entries.shape[0]
        return written

    def valid_entries(self) -> torch.Tensor:
        return self.entries[: self.occupancy]

    def ordered_entries(self) -> torch.Tensor:
        """Valid entries from oldest to newest."""
        if int(self.num_writes) <= self.capacity:
            return self.valid_entries()
        start = int(self.num_writes) % self.capacity
        return torch.cat([self.entries[start:], self.entries[:start]])

    @torch.no_grad()
    def reset(self) -> None:
        self.entries.zero_()
        self.num_writes.zero_()


class EpmJepaExperienceEncoder(nn.Module):
    """Buffer entries -> transformer encoder (a set: no positions) -> attention aggregator queried by the current
    latent -> `e_agg`. A learned null entry is always present, so an empty buffer gives a defined `e_agg` and every
    parameter takes part in every step (as distributed training requires)."""

    def __init__(self, config: EpmJepaConfig):
        super().__init__()
        width = config.memory_dim
        self.entry_projection = nn.Linear(config.buffer_entry_dim, width)
        self.null_entry = nn.Parameter(torch.empty(1, width))
        layer = nn.TransformerEncoderLayer(
            width,
            config.memory_num_heads,
            dim_feedforward=2 * width,
            dropout=0.0,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(layer, config.memory_num_layers, enable_nested_tensor=False)
        self.query_projection = nn.Linear(config.latent_dim, width)
        self.aggregator = nn.MultiheadAttention(width, config.memory_num_heads, dropout=0.0, batch_first=True)
        self.output_norm = nn.LayerNorm(width)

    def encode_entries(self, entries: torch.Tensor) -> torch.Tensor:
        """`(n, entry_dim)` -> `(1, n + 1, memory_dim)` memory tokens (the null entry first)."""
        tokens = torch.cat([self.null_entry, self.entry_projection(entries.to(self.null_entry.dtype))])
        return self.encoder(tokens[None])

    def forward(self, current_latent: torch.Tensor, entries: torch.Tensor) -> torch.Tensor:
        """`current_latent`: `(N, latent_dim)`; `entries`: `(n, entry_dim)` -> `e_agg`: `(N, memory_dim)`."""
        memory = self.encode_entries(entries)
        query = self.query_projection(current_latent)[None]
        aggregated, _ = self.aggregator(query, memory, memory, need_weights=False)
        return self.output_norm(aggregated[0])


class EpmJepaHypernetwork(nn.Module):
    """`e_agg -> d`: one rank-`r` diagonal per targeted layer. The last layer's weight starts at zero, its bias at one
    (`modulation_init="unit"`: `d = 1`, so the delta starts as plain LoRA, which peft initialises to zero) or at zero
    (`"zero"`: `d = 0` while `U` is random, so the delta starts at zero and only experience can make it)."""

    def __init__(self, config: EpmJepaConfig, num_layers: int):
        super().__init__()
        self.num_layers, self.rank = num_layers, config.lora_rank
        self.hidden = nn.Linear(config.memory_dim, config.hypernetwork_hidden_size)
        self.output = nn.Linear(config.hypernetwork_hidden_size, num_layers * config.lora_rank)
        self.output._hf_jepa_init = "unit_bias" if config.modulation_init == "unit" else "zeros"

    def forward(self, experience: torch.Tensor) -> torch.Tensor:
        """`(N, memory_dim)` -> `(N, num_layers, rank)`."""
        return self.output(F.gelu(self.hidden(experience))).unflatten(-1, (self.num_layers, self.rank))


def lora_layers(module: nn.Module) -> list[tuple[str, LoraLayer]]:
    """peft LoRA layers holding the experience adapter, in module order (the order of `d`'s layer axis)."""
    return [(name, m) for name, m in module.named_modules() if isinstance(m, LoraLayer) and ADAPTER_NAME in m.lora_A]


@contextlib.contextmanager
def modulated_lora(layers: list[LoraLayer], modulation: torch.Tensor | None):
    """Within the block, LoRA layer `i` computes `W x + scaling * B diag(d_i) A x` with a per-row `d_i`
    (`modulation[:, i]`, shape `(N, rank)`): a forward hook scales the rank-`r` activations of `lora_A`. With
    `modulation=None` the layers are plain LoRA."""
    if modulation is None:
        yield
        return
    if modulation.shape[1] != len(layers):
        raise ValueError(f"modulation has {modulation.shape[1]} layers, the model has {len(layers)} LoRA layers")
    handles = []

    def scale_by(d):
        def hook(_module, _inputs, output):
            return output * d.to(output.dtype)

        return hook

    try:
        for index, layer in enumerate(layers):
            if layer.merged:
                raise RuntimeError(
                    "a merged LoRA layer cannot be modulated per sample: unmerge it (dW depends on each input)"
                )
            handles.append(layer.lora_A[ADAPTER_NAME].register_forward_hook(scale_by(modulation[:, index])))
        yield
    finally:
        for handle in handles:
            handle.remove()
