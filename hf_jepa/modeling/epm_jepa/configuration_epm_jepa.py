"""EPM-JEPA configuration."""

from transformers import PretrainedConfig

TRACKS = ("vanilla", "ei", "epm")
TRACK_NAMES = {
    "vanilla": "A: vanilla JEPA",
    "ei": "B: EI-JEPA (residual injection)",
    "epm": "C: EPM-JEPA (dynamic LoRA)",
}
BUFFER_ENTRIES = ("pair", "pair_residual")
MODULATION_INITS = ("unit", "zero")


class EpmJepaConfig(PretrainedConfig):
    r"""
    Configuration of an EPM-JEPA world model (Experience-Modulated JEPA): a latent next-frame predictor for Moving MNIST
    whose operator (the predictor's weights) is modulated by accumulated experience.

    All three tracks share a CNN frame encoder, an EMA target encoder and an MLP predictor base that maps the last
    `context_length` latents to the next one. They differ only in how experience is used:

    - `"vanilla"` (track A): no memory.
    - `"ei"` (track B, EI-JEPA, operand side): the aggregated experience `e_agg` is added to the predictor's first
      hidden state through a zero-initialised projection.
    - `"epm"` (track C, EPM-JEPA, operator side): `e_agg` drives a hypernetwork giving a per-sample vector `d`, and each
      targeted predictor linear layer computes `W x + U diag(d) V^T x` with `U`, `V` held in peft LoRA layers.

    Tracks B and C share the memory subsystem: a surprisal gate (batch-mean prediction error of the model's own
    predictor against a running mean + `surprisal_threshold_std` running standard deviations) that writes the most
    surprising transitions of a batch into a FIFO buffer of `buffer_capacity` entries, a small transformer encoder over
    the entries, and an attention aggregator queried by the current latent.

    The defaults are the full-size model for GPUs; :meth:`cpu_fast` is the size the reproduction trains on a 2-core
    CPU and :meth:`tiny` a seconds-scale preset for tests.

    Args:
        track (`str`, *optional*, defaults to `"epm"`): `"vanilla"`, `"ei"` or `"epm"`.
        image_size (`int`, *optional*, defaults to 64): side of the square frames.
        num_channels (`int`, *optional*, defaults to 1): frame channels.
        encoder_channels (`list[int]`): channels of the encoder's stride-2 conv stages (each halves the side).
        latent_dim (`int`, *optional*, defaults to 128): latent width.
        context_length (`int`, *optional*, defaults to 3): past latents the predictor reads; a sequence needs at least
            this many frames to predict and one more to be scored.
        predictor_hidden_size (`int`, *optional*, defaults to 512): hidden width of the predictor base.
        predictor_num_layers (`int`, *optional*, defaults to 3): linear layers of the predictor base (>= 2).
        buffer_capacity (`int`, *optional*, defaults to 256): FIFO experience buffer size (the paper's 256).
        buffer_entry (`str`, *optional*, defaults to `"pair_residual"`): what an entry holds: the target latents
            `(z_t, z_t+1)` (`"pair"`, as in the paper) or that pair plus the prediction residual `z_t+1 - z_hat_t+1`
            (`"pair_residual"`), which shows the aggregator directly what the predictor got wrong (e.g. an
            acceleration it does not model).
        write_per_event (`int`, *optional*, defaults to 16): transitions written per boundary event (the batch's most
            surprising ones, one per sequence), so one event cannot flush the whole buffer.
        surprisal_momentum (`float`, *optional*, defaults to 0.99): momentum of the gate's running mean/variance of
            the batch-mean surprisal.
        surprisal_threshold_std (`float`, *optional*, defaults to 1.0): a boundary event fires when the batch-mean
            surprisal exceeds the running mean by this many running standard deviations.
        gate_warmup_updates (`int`, *optional*, defaults to 20): batches seen before the gate may fire (its running
            statistics are meaningless before).
        memory_dim (`int`, *optional*, defaults to 128): width of the memory encoder and of `e_agg`.
        memory_num_layers (`int`, *optional*, defaults to 2): transformer layers over the buffer entries.
        memory_num_heads (`int`, *optional*, defaults to 4): attention heads (memory encoder and aggregator).
        lora_rank (`int`, *optional*, defaults to 8): rank `r` of `dW = U diag(d) V^T`.
        lora_alpha (`float`, *optional*, defaults to 8): peft LoRA scaling numerator (scaling = alpha / r).
        lora_target_modules (`str` or `list[str]`): peft `target_modules`: the predictor linear layers that get a
            modulated delta (a regex over full module names, by default every predictor base layer).
        hypernetwork_hidden_size (`int`, *optional*, defaults to 128): hidden width of the hypernetwork `e_agg -> d`.
        modulation_init (`str`, *optional*, defaults to `"zero"`): how track C starts so that `dW = 0` (the base
            predictor exactly). `"zero"`: the hypernetwork outputs `d = 0` and `U` is random like `V`, so every part of
            `dW = U diag(d) V^T` comes from experience (the paper's form) and the gradient reaches the memory path
            from the first step. `"unit"` (the earlier default; a saved config keeps the value it was written
            with): the hypernetwork outputs `d = 1` and `U` is zero (peft's LoRA init), so `dW` starts as a static LoRA
            that experience only rescales; no gradient reaches the hypernetwork, aggregator or memory encoder until `U`
            has grown (research/epm_jepa/memory_diagnosis/README.md: after 60 episodic steps `d` differs by ~1% between
            a same-g and a different-g buffer). The value only chooses the initialisation: a loaded model computes with
            its saved weights either way.
        invariance_weight, variance_weight, covariance_weight (`float`): weights of the latent prediction loss and
            the VICReg variance/covariance terms on the context latents (25, 25, 1 as VICReg).
        rollout_loss_steps (`int`, *optional*, defaults to 1): steps `K` of the latent prediction loss. 1: every
            window predicts the next latent (one-step). `K > 1`: from every window with `K` frames after it the
            predictor rolls out `K` steps, feeding its own predictions back as the newest context entries, and the
            loss is the mean over steps 1..K of the squared error against the EMA target latents, so what changes
            over several steps (an unknown gravity's error grows with the horizon) is trained for. `forward` then
            needs `context_length + K` frames per sequence.
        ema_momentum, ema_momentum_end (`float`): EMA target momentum, linear from the first to the second over a
            training run. Read by the trainer.
        initializer_range (`float`, *optional*, defaults to 0.02): std of the truncated-normal weight init.
    """

    model_type = "epm_jepa"

    def __init__(
        self,
        track: str = "epm",
        image_size: int = 64,
        num_channels: int = 1,
        encoder_channels: list | None = None,
        latent_dim: int = 128,
        context_length: int = 3,
        predictor_hidden_size: int = 512,
        predictor_num_layers: int = 3,
        buffer_capacity: int = 256,
        buffer_entry: str = "pair_residual",
        write_per_event: int = 16,
        surprisal_momentum: float = 0.99,
        surprisal_threshold_std: float = 1.0,
        gate_warmup_updates: int = 20,
        memory_dim: int = 128,
        memory_num_layers: int = 2,
        memory_num_heads: int = 4,
        lora_rank: int = 8,
        lora_alpha: float = 8.0,
        lora_target_modules: str | list | None = None,
        hypernetwork_hidden_size: int = 128,
        modulation_init: str = "zero",
        invariance_weight: float = 25.0,
        variance_weight: float = 25.0,
        covariance_weight: float = 1.0,
        rollout_loss_steps: int = 1,
        ema_momentum: float = 0.996,
        ema_momentum_end: float = 1.0,
        initializer_range: float = 0.02,
        **kwargs,
    ):
        self.track = track
        self.image_size = image_size
        self.num_channels = num_channels
        self.encoder_channels = list(encoder_channels) if encoder_channels is not None else [32, 64, 128, 256]
        self.latent_dim = latent_dim
        self.context_length = context_length
        self.predictor_hidden_size = predictor_hidden_size
        self.predictor_num_layers = predictor_num_layers
        self.buffer_capacity = buffer_capacity
        self.buffer_entry = buffer_entry
        self.write_per_event = write_per_event
        self.surprisal_momentum = surprisal_momentum
        self.surprisal_threshold_std = surprisal_threshold_std
        self.gate_warmup_updates = gate_warmup_updates
        self.memory_dim = memory_dim
        self.memory_num_layers = memory_num_layers
        self.memory_num_heads = memory_num_heads
        self.lora_rank = lora_rank
        self.lora_alpha = float(lora_alpha)
        self.lora_target_modules = lora_target_modules if lora_target_modules is not None else r"predictor\.layers\.\d+"
        self.hypernetwork_hidden_size = hypernetwork_hidden_size
        self.modulation_init = modulation_init
        self.invariance_weight = invariance_weight
        self.variance_weight = variance_weight
        self.covariance_weight = covariance_weight
        self.rollout_loss_steps = rollout_loss_steps
        self.ema_momentum = ema_momentum
        self.ema_momentum_end = ema_momentum_end
        self.initializer_range = initializer_range
        super().__init__(**kwargs)
        self.validate()

    def validate(self):
        """Raise `ValueError` naming the first invalid field."""
        for field, allowed in (
            ("track", TRACKS),
            ("buffer_entry", BUFFER_ENTRIES),
            ("modulation_init", MODULATION_INITS),
        ):
            if getattr(self, field) not in allowed:
                raise ValueError(f"EpmJepaConfig.{field} must be one of {allowed}, got {getattr(self, field)!r}")
        positive_ints = (
            "image_size",
            "num_channels",
            "latent_dim",
            "context_length",
            "predictor_hidden_size",
            "buffer_capacity",
            "write_per_event",
            "memory_dim",
            "memory_num_layers",
            "memory_num_heads",
            "lora_rank",
            "hypernetwork_hidden_size",
            "rollout_loss_steps",
        )
        for field in positive_ints:
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"EpmJepaConfig.{field} must be a positive integer, got {value!r}")
        if not isinstance(self.predictor_num_layers, int) or self.predictor_num_layers < 2:
            raise ValueError(
                f"EpmJepaConfig.predictor_num_layers must be an integer >= 2, got {self.predictor_num_layers!r}"
            )
        channels = self.encoder_channels
        if not channels or any(not isinstance(c, int) or isinstance(c, bool) or c <= 0 for c in channels):
            raise ValueError(
                f"EpmJepaConfig.encoder_channels must be a non-empty list of positive integers, got {channels!r}"
            )
        if self.image_size % (2 ** len(channels)):
            raise ValueError(
                f"EpmJepaConfig.image_size ({self.image_size}) must be divisible by 2**len(encoder_channels) "
                f"({2 ** len(channels)}): each encoder stage halves the side"
            )
        if self.memory_dim % self.memory_num_heads:
            raise ValueError(
                f"EpmJepaConfig.memory_dim ({self.memory_dim}) must be divisible by memory_num_heads ({self.memory_num_heads})"
            )
        if self.write_per_event > self.buffer_capacity:
            raise ValueError(
                f"EpmJepaConfig.write_per_event ({self.write_per_event}) must not exceed buffer_capacity ({self.buffer_capacity})"
            )
        if not isinstance(self.gate_warmup_updates, int) or self.gate_warmup_updates < 0:
            raise ValueError(
                f"EpmJepaConfig.gate_warmup_updates must be an integer >= 0, got {self.gate_warmup_updates!r}"
            )
        for field in ("surprisal_momentum", "ema_momentum", "ema_momentum_end"):
            value = getattr(self, field)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"EpmJepaConfig.{field} must lie in [0, 1], got {value!r}")
        for field in ("surprisal_threshold_std", "invariance_weight", "variance_weight", "covariance_weight"):
            if getattr(self, field) < 0:
                raise ValueError(f"EpmJepaConfig.{field} must be >= 0, got {getattr(self, field)!r}")
        if self.lora_alpha <= 0:
            raise ValueError(f"EpmJepaConfig.lora_alpha must be > 0, got {self.lora_alpha!r}")
        targets = self.lora_target_modules
        if not (isinstance(targets, str) and targets) and not (
            isinstance(targets, list) and targets and all(isinstance(t, str) and t for t in targets)
        ):
            raise ValueError(
                f"EpmJepaConfig.lora_target_modules must be a regex or a list of module names, got {targets!r}"
            )

    @property
    def uses_memory(self) -> bool:
        return self.track in ("ei", "epm")

    @property
    def buffer_entry_dim(self) -> int:
        return self.latent_dim * (3 if self.buffer_entry == "pair_residual" else 2)

    @classmethod
    def tiny(cls, **overrides) -> "EpmJepaConfig":
        """A seconds-scale preset for tests."""
        kwargs = dict(
            encoder_channels=[4, 8, 8, 8],
            latent_dim=16,
            predictor_hidden_size=32,
            buffer_capacity=32,
            write_per_event=4,
            memory_dim=16,
            memory_num_layers=1,
            memory_num_heads=2,
            lora_rank=2,
            lora_alpha=2.0,
            hypernetwork_hidden_size=16,
            gate_warmup_updates=2,
            ema_momentum=0.9,
        )
        kwargs.update(overrides)
        return cls(**kwargs)

    @classmethod
    def cpu_fast(cls, **overrides) -> "EpmJepaConfig":
        """The size the reproduction trains on a 2-core CPU: a narrow encoder, 64-dim latents, memory width 64. Short
        runs need an EMA target that follows faster than I-JEPA's 0.996, so the momentum starts at 0.99."""
        kwargs = dict(
            encoder_channels=[16, 32, 64, 64],
            latent_dim=64,
            predictor_hidden_size=256,
            memory_dim=64,
            memory_num_layers=1,
            hypernetwork_hidden_size=64,
            ema_momentum=0.99,
        )
        kwargs.update(overrides)
        return cls(**kwargs)

    @classmethod
    def full(cls, **overrides) -> "EpmJepaConfig":
        """The GPU-size world model: the class defaults with `overrides`."""
        return cls(**overrides)


__all__ = ["EpmJepaConfig"]
