"""JEPA-Reasoner configurations: the latent reasoner, its Talkers (Mono / Dual) and the coupled baselines.

Every model of this family uses the same pre-norm transformer block (RMSNorm, rotary positions, SwiGLU MLP, attention
through transformers' attention interface: `attn_implementation="sdpa"` (the default), `"eager"` or flash attention),
so every config subclasses [`JepaBlockStackConfig`], which declares, documents and validates the block fields once
(`vocab_size`, `hidden_size`, `num_hidden_layers`, `num_attention_heads`, `intermediate_size`,
`max_position_embeddings`, `rms_norm_eps`, `rope_theta`, `initializer_range`, `hidden_dropout`, the special token ids
and `use_cache`); each config adds its own fields and names its default sizes.

Token conventions: `[PAD]`=0, `[UNK]`=1, `[BOS]`=2, `[EOS]`=3, `[SEP]`=4, the ids of the tokenizer that
`hf_jepa.data.reasoning.common.build_reasoning_tokenizer` builds (`REASONING_SPECIAL_TOKENS` order). This folder cannot
import `hf_jepa.data` (trust_remote_code), so the config defaults repeat them; tests/jepa_reasoner/test_modeling.py
checks that every default equals the tokenizer's id.
"""

from transformers import AutoConfig, PretrainedConfig

LATENT_NORMS = ("rms_l2", "l2")
# Where the answer positions' input latents come from in teacher-forced training (see JepaReasonerConfig).
ANSWER_INPUT_SOURCES = ("online", "target")

# The paper's sizes: a 0.9B reasoner and a 198M Talker, on a GPT-2-sized vocabulary (50,257 rounded up to 50,304).
PAPER_VOCAB_SIZE = 50304


def _check_positive_ints(config, fields):
    name = type(config).__name__
    for field in fields:
        value = getattr(config, field)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name}.{field} must be a positive integer, got {value!r}")


def _check_non_negative_ints(config, fields):
    name = type(config).__name__
    for field in fields:
        value = getattr(config, field)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name}.{field} must be a non-negative integer, got {value!r}")


class JepaBlockStackConfig(PretrainedConfig):
    r"""
    The fields of the transformer block stack every model of the family is built from, declared, documented and
    validated here once. [`JepaReasonerConfig`], [`JepaTalkerConfig`] and [`CoupledTransformerConfig`] subclass it:
    each adds its own fields and names the default sizes of its model in `default_sizes`. Not registered with the
    Auto classes. The attention implementation is transformers' own `attn_implementation` argument (`"sdpa"` by
    default, `"eager"` or a flash-attention implementation).

    Args:
        vocab_size (`int`, *optional*, defaults to 50304): token vocabulary (GPT-2's, rounded up to a multiple of 64).
        hidden_size (`int`, *optional*): block width.
        num_hidden_layers (`int`, *optional*): blocks of the model's main stack (each config says which).
        num_attention_heads (`int`, *optional*): attention heads; `hidden_size` must divide into an even head width.
        intermediate_size (`int`, *optional*): SwiGLU MLP width. These four default to the config's `default_sizes`
            (also when passed as `None`).
        max_position_embeddings (`int`, *optional*, defaults to 2048): longest sequence the model accepts. Positions
            are rotary, so this is a limit, not a table.
        rms_norm_eps (`float`, *optional*, defaults to 1e-6): epsilon of every RMSNorm.
        rope_theta (`float`, *optional*, defaults to 10000.0): rotary embedding base.
        initializer_range (`float`, *optional*, defaults to 0.02): std of the truncated-normal weight init.
        hidden_dropout (`float`, *optional*, defaults to 0.0): dropout on each block's residual branches.
        pad_token_id, bos_token_id, eos_token_id (`int`, *optional*, default to 0, 2 and 3): special token ids.
        sep_token_id (`int`, *optional*, defaults to 4): the separator between prompt and answer; a field only of the
            configs whose models read one (`has_sep_token`: the reasoner and the baselines, not the Talkers, which
            read latents, then BOS).
        use_cache (`bool`, *optional*, defaults to `True`): read by `generate`; a field only of the configs whose
            models generate tokens (`generates_tokens`: not the reasoner, which has no `generate`).
    """

    # The sizes of the paper's model of each config; a subclass sets all four.
    default_sizes = {}
    has_sep_token = True
    generates_tokens = True

    # Every subclass defines `__init__`: without one, transformers' dataclass machinery generates one that skips this.
    def __init__(
        self,
        vocab_size: int = PAPER_VOCAB_SIZE,
        hidden_size: int | None = None,
        num_hidden_layers: int | None = None,
        num_attention_heads: int | None = None,
        intermediate_size: int | None = None,
        max_position_embeddings: int = 2048,
        rms_norm_eps: float = 1e-6,
        rope_theta: float = 10000.0,
        initializer_range: float = 0.02,
        hidden_dropout: float = 0.0,
        # Special token ids: build_reasoning_tokenizer's (see the module docstring); a test keeps them equal.
        pad_token_id: int = 0,
        bos_token_id: int = 2,
        eos_token_id: int = 3,
        **kwargs,
    ):
        if not self.default_sizes:
            raise TypeError(f"{type(self).__name__} is a base: use a model's config (e.g. JepaReasonerConfig)")
        sizes = dict(
            hidden_size=hidden_size,
            num_hidden_layers=num_hidden_layers,
            num_attention_heads=num_attention_heads,
            intermediate_size=intermediate_size,
        )
        for field, value in sizes.items():
            setattr(self, field, self.default_sizes[field] if value is None else value)
        self.vocab_size = vocab_size
        self.max_position_embeddings = max_position_embeddings
        self.rms_norm_eps = rms_norm_eps
        self.rope_theta = rope_theta
        self.initializer_range = initializer_range
        self.hidden_dropout = hidden_dropout
        self.pad_token_id = pad_token_id
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id
        # Set only where the model has them, so that config.json holds exactly the model's fields; passed to a config
        # without them they stay in kwargs and become plain attributes (validated all the same).
        if self.has_sep_token:
            self.sep_token_id = kwargs.pop("sep_token_id", 4)
        if self.generates_tokens:
            self.use_cache = kwargs.pop("use_cache", True)
        super().__init__(**kwargs)
        self.validate()

    def validate(self):
        """Raise `ValueError` naming the first invalid field (as `ConfigClass.field`)."""
        name = type(self).__name__
        _check_positive_ints(
            self,
            (
                "vocab_size",
                "hidden_size",
                "num_hidden_layers",
                "num_attention_heads",
                "intermediate_size",
                "max_position_embeddings",
            ),
        )
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"{name}.hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                f"({self.num_attention_heads})"
            )
        if (self.hidden_size // self.num_attention_heads) % 2:
            raise ValueError(
                f"{name}.hidden_size / num_attention_heads ({self.hidden_size // self.num_attention_heads}) must be "
                "even (rotary position embeddings rotate pairs of dimensions)"
            )
        if not self.rms_norm_eps > 0:
            raise ValueError(f"{name}.rms_norm_eps must be positive, got {self.rms_norm_eps!r}")
        if not self.rope_theta > 0:
            raise ValueError(f"{name}.rope_theta must be positive, got {self.rope_theta!r}")
        if not 0.0 <= self.hidden_dropout < 1.0:
            raise ValueError(f"{name}.hidden_dropout must lie in [0, 1), got {self.hidden_dropout!r}")
        if not self.initializer_range > 0:
            raise ValueError(f"{name}.initializer_range must be positive, got {self.initializer_range!r}")
        for field in ("pad_token_id", "bos_token_id", "eos_token_id", "sep_token_id"):
            if not hasattr(self, field):
                continue
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < self.vocab_size:
                raise ValueError(f"{name}.{field} must be a token id in [0, {self.vocab_size}), got {value!r}")


# ------------------------------------------------------------------------------------------------------ reasoner


class JepaReasonerConfig(JepaBlockStackConfig):
    r"""
    Configuration of a JEPA-Reasoner: a latent reasoner that never predicts tokens.

    A token encoder (embeddings + `num_encoder_layers` **causal** transformer blocks + hybrid normalisation) maps
    `[prompt, SEP, answer]` to latents on the unit hypersphere. The encoder is causal so that the latent of a token
    depends on that token and the ones before it only: in teacher forcing the reasoning blocks read exactly what they
    read at generation time (the answer latents are not known then, and a bidirectional encoder would leak them into
    the prompt's latents). The reasoning blocks (`num_hidden_layers` causal blocks, then a second hybrid
    normalisation) read the latent sequence and predict, at each position, the latent of the next token; at
    generation time each predicted latent is fed back as the next input. An EMA copy of the token encoder (the target
    encoder) provides the training targets; the loss is the scaled cosine loss `k - k * cos(pred, target)`.

    The block fields are [`JepaBlockStackConfig`]'s. Here `hidden_size` (default 1536) is the latent width, shared by
    the encoder and the reasoning blocks; `num_hidden_layers` (default 25) counts the reasoning blocks;
    `num_attention_heads` defaults to 12 (head width 128 at full size), `intermediate_size` to 4096;
    `max_position_embeddings` bounds prompt + SEP + answer in training and prompt + reasoning steps at generation.

    Args:
        num_encoder_layers (`int`, *optional*, defaults to 4): causal blocks of the token encoder (and its EMA
            target copy). 0 makes every latent its token's own normalised embedding: context-free targets, so the
            reasoner predicts a point among the vocabulary's latents (the paper's "mixed latents" are linear
            combinations of vocabulary embeddings) rather than a contextual latent of the whole prefix.
        num_reasoning_steps (`int`, *optional*, defaults to 32): latents `generate_latents` produces by default
            (>= 1).
        latent_norm (`str`, *optional*, defaults to `"rms_l2"`): the normalisation of encoder outputs and predicted
            latents: `"rms_l2"` (the paper's hybrid norm: RMSNorm with a learnable gain, then L2 normalisation onto
            the unit sphere) or `"l2"` (plain L2 normalisation, no gain).
        l2_norm_eps (`float`, *optional*, defaults to 1e-12): floor of the L2 norm in the normalisation.
        ema_momentum, ema_momentum_end (`float`, *optional*, default to 0.996 and 1.0): EMA target momentum schedule
            (start, end). The trainer computes the value per step and updates the pairs of `model.ema_pairs()`.
        cosine_loss_scale (`float`, *optional*, defaults to 4.0): `k` of the loss `k - k * cos(pred, target)`: the
            loss lies in `[0, 2k]`, 0 for a perfect prediction, `k` for an orthogonal one. Scaling the cosine loss
            up keeps its gradient on unit vectors (at most `k` per unit change of cos) comparable to an MSE loss on
            unnormalised latents; 4.0 is this library's default, not a value from the paper.
        scheduled_sampling_prob (`float`, *optional*, defaults to 0.0): in training, the probability that an answer
            position's input latent is replaced by the reasoner's own prediction of it (scheduled sampling, two-pass:
            a gradient-free teacher-forced pass gives the predictions, the loss comes from the second pass over the
            mixed inputs). 0.0 is pure teacher forcing (the paper's training); it narrows the gap between the
            teacher-forced inputs of training and the free-running chain of generation. Generation ignores it.
        answer_input_source (`str`, *optional*, defaults to `"online"`): the latents the reasoning blocks read at the
            answer positions in teacher-forced training: `"online"` (the token encoder's, the prompt's encoder) or
            `"target"` (the target encoder's, gradient-free: the very latents the predictions are trained to match,
            hence the space of what generation feeds back). The prompt and SEP always come from the token encoder.
            With a fast EMA the two nearly coincide; with a slow or frozen target (`ema_momentum` 1.0) the online
            encoder drifts away from the target space, and `"online"` trains the blocks on inputs unlike the
            fed-back predictions they read at generation.
    """

    model_type = "jepa_reasoner"
    # The paper's 0.9B reasoner.
    default_sizes = dict(hidden_size=1536, num_hidden_layers=25, num_attention_heads=12, intermediate_size=4096)
    generates_tokens = False

    def __init__(
        self,
        num_encoder_layers: int = 4,
        num_reasoning_steps: int = 32,
        latent_norm: str = "rms_l2",
        l2_norm_eps: float = 1e-12,
        ema_momentum: float = 0.996,
        ema_momentum_end: float = 1.0,
        cosine_loss_scale: float = 4.0,
        scheduled_sampling_prob: float = 0.0,
        answer_input_source: str = "online",
        **kwargs,
    ):
        self.num_encoder_layers = num_encoder_layers
        self.num_reasoning_steps = num_reasoning_steps
        self.latent_norm = latent_norm
        self.l2_norm_eps = l2_norm_eps
        self.ema_momentum = ema_momentum
        self.ema_momentum_end = ema_momentum_end
        self.cosine_loss_scale = cosine_loss_scale
        self.scheduled_sampling_prob = scheduled_sampling_prob
        self.answer_input_source = answer_input_source
        super().__init__(**kwargs)

    def validate(self):
        """Raise `ValueError` naming the first invalid field."""
        super().validate()
        _check_non_negative_ints(self, ("num_encoder_layers",))
        _check_positive_ints(self, ("num_reasoning_steps",))
        if self.num_reasoning_steps >= self.max_position_embeddings:
            raise ValueError(
                f"JepaReasonerConfig.num_reasoning_steps ({self.num_reasoning_steps}) must be smaller than "
                f"max_position_embeddings ({self.max_position_embeddings}): the prompt needs positions too"
            )
        if self.answer_input_source not in ANSWER_INPUT_SOURCES:
            raise ValueError(
                f"JepaReasonerConfig.answer_input_source must be one of {ANSWER_INPUT_SOURCES}, got "
                f"{self.answer_input_source!r}"
            )
        if self.latent_norm not in LATENT_NORMS:
            raise ValueError(f"JepaReasonerConfig.latent_norm must be one of {LATENT_NORMS}, got {self.latent_norm!r}")
        if not self.l2_norm_eps > 0:
            raise ValueError(f"JepaReasonerConfig.l2_norm_eps must be positive, got {self.l2_norm_eps!r}")
        for field in ("ema_momentum", "ema_momentum_end"):
            if not 0.0 <= getattr(self, field) <= 1.0:
                raise ValueError(f"JepaReasonerConfig.{field} must lie in [0, 1], got {getattr(self, field)!r}")
        if not self.cosine_loss_scale > 0:
            raise ValueError(f"JepaReasonerConfig.cosine_loss_scale must be positive, got {self.cosine_loss_scale!r}")
        probability = self.scheduled_sampling_prob
        if isinstance(probability, bool) or not isinstance(probability, (int, float)) or not 0.0 <= probability <= 1.0:
            raise ValueError(f"JepaReasonerConfig.scheduled_sampling_prob must lie in [0, 1], got {probability!r}")

    @classmethod
    def full(cls, **overrides) -> "JepaReasonerConfig":
        """The paper's 0.9B reasoner (the defaults): 1536 wide, 4 encoder + 25 reasoning blocks, 12 heads,
        SwiGLU 4096, 50,304 tokens: ~898M trainable parameters (the EMA target encoder adds ~152M frozen ones)."""
        return cls(**overrides)

    @classmethod
    def cpu_fast(cls, **overrides) -> "JepaReasonerConfig":
        """the size `hf-jepa reproduce jepa-reasoner` trains on a 2-core CPU: 128 wide (4 heads, MLP 384), 6 reasoning
        blocks, 256 positions; set `vocab_size` to the task tokenizer's size. Context-free latents (no encoder
        blocks: each latent is its token's normalised embedding) with teacher forcing on the target latents: at this
        size, contextual EMA targets of 2 encoder blocks lost the token and the reasoner's tree-search accuracy
        (docs/results/jepa-reasoner.md, "What lost the accuracy of the preset reasoner")."""
        kwargs = dict(
            vocab_size=64,
            hidden_size=128,
            num_hidden_layers=6,
            num_encoder_layers=0,
            num_attention_heads=4,
            intermediate_size=384,
            max_position_embeddings=256,
            num_reasoning_steps=16,
            ema_momentum=0.99,
            answer_input_source="target",
        )
        kwargs.update(overrides)
        return cls(**kwargs)

    @classmethod
    def tiny(cls, **overrides) -> "JepaReasonerConfig":
        """A milliseconds-scale preset for tests: 32 wide, 1 encoder + 2 reasoning blocks, 64 tokens."""
        kwargs = dict(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=2,
            num_encoder_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
            num_reasoning_steps=4,
            ema_momentum=0.99,
        )
        kwargs.update(overrides)
        return cls(**kwargs)


# -------------------------------------------------------------------------------------------------------- talkers


class JepaTalkerConfig(JepaBlockStackConfig):
    r"""
    Configuration shared by the Talkers, the lightweight decoders that turn a reasoner's latent chain into tokens.
    Use [`MonoTalkerConfig`] or [`DualTalkerConfig`]; this base is not registered with the Auto classes.

    The decoder projects the latent chain (`latent_size` -> `hidden_size`) into a prefix and runs causal
    self-attention over `[prefix; tokens]` with an LM head over the vocabulary. The Dual-Talker first encodes the
    input prompt with `num_context_layers` bidirectional blocks (sharing the token embeddings) and puts the encoded
    context in front of the latent prefix.

    The block fields are [`JepaBlockStackConfig`]'s. Here `vocab_size` must match the reasoner's; `hidden_size`
    (default 1024) is the Talker's width; `num_hidden_layers` counts the causal decoder blocks (default 7, the
    Dual-Talker's 4); `num_attention_heads` defaults to 16, `intermediate_size` to 2816; `max_position_embeddings`
    bounds the decoder sequence (context + latent prefix + tokens). No `sep_token_id`: the decoder reads the latent
    prefix, then BOS.

    Args:
        num_context_layers (`int`, *optional*, defaults to 0): bidirectional context encoder blocks (0 for the
            Mono-Talker).
        latent_size (`int`, *optional*, defaults to 1536): width of the reasoner's latents; must equal the
            reasoner's `hidden_size`.
    """

    model_type = "jepa_talker"
    # The paper's 198M Talker.
    default_sizes = dict(hidden_size=1024, num_hidden_layers=7, num_attention_heads=16, intermediate_size=2816)
    has_sep_token = False

    def __init__(
        self,
        num_context_layers: int = 0,
        latent_size: int = JepaReasonerConfig.default_sizes["hidden_size"],
        **kwargs,
    ):
        self.num_context_layers = num_context_layers
        self.latent_size = latent_size
        super().__init__(**kwargs)

    def validate(self):
        """Raise `ValueError` naming the first invalid field."""
        super().validate()
        _check_positive_ints(self, ("latent_size",))
        _check_non_negative_ints(self, ("num_context_layers",))


class MonoTalkerConfig(JepaTalkerConfig):
    r"""
    Mono-Talker (context-free tasks): a causal decoder over `[latent prefix; tokens]`, no context encoder. See
    [`JepaTalkerConfig`] for the fields; `num_context_layers` must be 0. The defaults are the paper's ~198M Talker
    (1024 wide, 7 blocks, 16 heads, SwiGLU 2816, untied 50,304-token embeddings and LM head: ~194.5M parameters).
    """

    model_type = "jepa_mono_talker"

    def __init__(self, num_context_layers: int = 0, **kwargs):
        super().__init__(num_context_layers=num_context_layers, **kwargs)

    def validate(self):
        super().validate()
        if self.num_context_layers != 0:
            raise ValueError(
                f"MonoTalkerConfig.num_context_layers must be 0 (the Mono-Talker has no context encoder), got "
                f"{self.num_context_layers!r}: use DualTalkerConfig"
            )

    @classmethod
    def full(cls, **overrides) -> "MonoTalkerConfig":
        """The paper-size Talker (the defaults, ~194.5M parameters)."""
        return cls(**overrides)

    @classmethod
    def cpu_fast(cls, **overrides) -> "MonoTalkerConfig":
        """the size `hf-jepa reproduce jepa-reasoner` trains on a 2-core CPU: 3 decoder blocks, 128 wide, reading a 128-wide
        reasoner (`JepaReasonerConfig.cpu_fast`)."""
        kwargs = dict(
            vocab_size=64,
            hidden_size=128,
            num_hidden_layers=3,
            num_attention_heads=4,
            intermediate_size=384,
            latent_size=128,
            max_position_embeddings=512,
        )
        kwargs.update(overrides)
        return cls(**kwargs)

    @classmethod
    def tiny(cls, **overrides) -> "MonoTalkerConfig":
        """A test preset matching `JepaReasonerConfig.tiny()` (latent_size 32, 64 tokens)."""
        kwargs = dict(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            latent_size=32,
            max_position_embeddings=128,
        )
        kwargs.update(overrides)
        return cls(**kwargs)


class DualTalkerConfig(JepaTalkerConfig):
    r"""
    Dual-Talker: a bidirectional context encoder over the input prompt (`num_context_layers` blocks, sharing the
    token embeddings with the decoder) plus a causal decoder over `[encoded context; latent prefix; tokens]`. See
    [`JepaTalkerConfig`] for the fields; `num_context_layers` must be >= 1. The defaults (3 context + 4 decoder
    blocks, otherwise as the Mono-Talker) give ~194.5M parameters, the paper's 198M Talker size.
    """

    model_type = "jepa_dual_talker"
    # 3 context + 4 decoder blocks: the Mono-Talker's 7 blocks, split.
    default_sizes = {**JepaTalkerConfig.default_sizes, "num_hidden_layers": 4}

    def __init__(self, num_context_layers: int = 3, **kwargs):
        super().__init__(num_context_layers=num_context_layers, **kwargs)

    def validate(self):
        super().validate()
        if self.num_context_layers < 1:
            raise ValueError(
                f"DualTalkerConfig.num_context_layers must be >= 1 (the context encoder), got "
                f"{self.num_context_layers!r}: use MonoTalkerConfig for a Talker without one"
            )

    @classmethod
    def full(cls, **overrides) -> "DualTalkerConfig":
        """The paper-size Dual-Talker (the defaults, ~194.5M parameters)."""
        return cls(**overrides)

    @classmethod
    def cpu_fast(cls, **overrides) -> "DualTalkerConfig":
        """the size `hf-jepa reproduce jepa-reasoner` trains on a 2-core CPU: 2 context + 3 decoder blocks, 128 wide, reading a
        128-wide reasoner (`JepaReasonerConfig.cpu_fast`)."""
        kwargs = dict(
            vocab_size=64,
            hidden_size=128,
            num_hidden_layers=3,
            num_context_layers=2,
            num_attention_heads=4,
            intermediate_size=384,
            latent_size=128,
            max_position_embeddings=768,
        )
        kwargs.update(overrides)
        return cls(**kwargs)

    @classmethod
    def tiny(cls, **overrides) -> "DualTalkerConfig":
        """A test preset matching `JepaReasonerConfig.tiny()` (latent_size 32, 64 tokens)."""
        kwargs = dict(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=2,
            num_context_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            latent_size=32,
            max_position_embeddings=128,
        )
        kwargs.update(overrides)
        return cls(**kwargs)


# ------------------------------------------------------------------------------------------------------ baselines


class CoupledTransformerConfig(JepaBlockStackConfig):
    r"""
    Coupled baseline: a standard decoder-only next-token LM built from the same blocks as the reasoner, trained on
    `[prompt, SEP, answer]` with the loss on the answer tokens. The defaults are parameter-matched to the reasoner
    (same width, heads, MLP and vocabulary; 26 blocks + untied embeddings and LM head: ~891M parameters, against the
    reasoner's ~898M trainable ones).

    The fields are [`JepaBlockStackConfig`]'s (with `sep_token_id` and `use_cache`); here `num_hidden_layers` counts
    every block.
    """

    model_type = "jepa_coupled_lm"
    # Parameter-matched to the paper's reasoner.
    default_sizes = dict(hidden_size=1536, num_hidden_layers=26, num_attention_heads=12, intermediate_size=4096)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)

    @classmethod
    def cpu_fast(cls, **overrides):
        """the size `hf-jepa reproduce jepa-reasoner` trains on a 2-core CPU: as many blocks (6) and the same width (128) as
        `JepaReasonerConfig.cpu_fast`'s encoder + reasoning blocks."""
        kwargs = dict(
            vocab_size=64,
            hidden_size=128,
            num_hidden_layers=6,
            num_attention_heads=4,
            intermediate_size=384,
            max_position_embeddings=256,
        )
        kwargs.update(overrides)
        return cls(**kwargs)

    @classmethod
    def tiny(cls, **overrides) -> "CoupledTransformerConfig":
        """A test preset matching `JepaReasonerConfig.tiny()` (32 wide, 3 blocks, 64 tokens)."""
        kwargs = dict(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=3,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
        )
        kwargs.update(overrides)
        return cls(**kwargs)

    @classmethod
    def full(cls, **overrides) -> "CoupledTransformerConfig":
        """The baseline at the paper's size (the class defaults, matched to the 0.9B reasoner) with `overrides`."""
        return cls(**overrides)


class CoconutConfig(CoupledTransformerConfig):
    r"""
    COCONUT-style coupled latent baseline (Hao et al., 2024): a decoder-only LM that, after `[prompt, SEP]`, runs
    `num_latent_thoughts` continuous thoughts (each thought's input embedding is the previous position's last-layer
    hidden state) and then decodes `[BOS, answer]` with its LM head; `BOS` marks the end of the thoughts (COCONUT's
    `<eot>`). Fields as [`CoupledTransformerConfig`], plus:

    Args:
        num_latent_thoughts (`int`, *optional*, defaults to 6): continuous thoughts per example (>= 0; 0 is a plain
            coupled LM on `[prompt, SEP, BOS, answer]`).
    """

    model_type = "jepa_coconut"

    def __init__(self, num_latent_thoughts: int = 6, **kwargs):
        self.num_latent_thoughts = num_latent_thoughts
        super().__init__(**kwargs)

    def validate(self):
        super().validate()
        _check_non_negative_ints(self, ("num_latent_thoughts",))
        if self.num_latent_thoughts + 2 >= self.max_position_embeddings:
            raise ValueError(
                f"CoconutConfig.num_latent_thoughts ({self.num_latent_thoughts}) leaves no room in "
                f"max_position_embeddings ({self.max_position_embeddings}) for the prompt and the answer"
            )

    @classmethod
    def cpu_fast(cls, **overrides) -> "CoconutConfig":
        """`CoupledTransformerConfig.cpu_fast` with 4 continuous thoughts."""
        kwargs = dict(num_latent_thoughts=4)
        kwargs.update(overrides)
        return super().cpu_fast(**kwargs)

    @classmethod
    def tiny(cls, **overrides) -> "CoconutConfig":
        kwargs = dict(num_latent_thoughts=3)
        kwargs.update(overrides)
        return super().tiny(**kwargs)


# ------------------------------------------------------------------------------------------------------ the pair


TALKER_CONFIG_CLASSES = {MonoTalkerConfig.model_type: MonoTalkerConfig, DualTalkerConfig.model_type: DualTalkerConfig}


def _sub_config(value, name: str, classes: dict):
    """A sub-config from a config object or a dict, by `model_type` among `classes` (resolved here, not through
    `AutoConfig`, so that a trust_remote_code copy of this file resolves them without hf_jepa)."""
    types = tuple(classes)
    if isinstance(value, PretrainedConfig):
        if value.model_type not in classes:
            raise ValueError(
                f"JepaReasonerWithTalkerConfig.{name} must have model_type in {types}, got {value.model_type!r} "
                f"({type(value).__name__})"
            )
        return value
    if isinstance(value, dict):
        model_type = value.get("model_type", types[0] if len(types) == 1 else None)
        if model_type not in classes:
            raise ValueError(f"JepaReasonerWithTalkerConfig.{name} must have model_type in {types}, got {model_type!r}")
        return classes[model_type](
            **{k: v for k, v in value.items() if k not in ("model_type", "transformers_version")}
        )
    raise ValueError(f"JepaReasonerWithTalkerConfig.{name} must be a config or a dict, got {type(value).__name__}")


class JepaReasonerWithTalkerConfig(PretrainedConfig):
    r"""
    Configuration of a reasoner + Talker pair ([`JepaReasonerWithTalker`]): a composite of a [`JepaReasonerConfig`]
    (`reasoner_config`) and a [`MonoTalkerConfig`] or [`DualTalkerConfig`] (`talker_config`, its class chosen by its
    `model_type`, `"jepa_mono_talker"` or `"jepa_dual_talker"`, when it comes as a dict).

    The two must fit together: the Talker reads the reasoner's latents (`talker_config.latent_size ==
    reasoner_config.hidden_size`) and both read and write the same tokenizer's ids (equal `vocab_size`).

    Args:
        reasoner_config (`JepaReasonerConfig` or `dict`, *optional*): the reasoner (the paper's 0.9B by default).
        talker_config (`MonoTalkerConfig`, `DualTalkerConfig` or `dict`, *optional*): the Talker (the paper's
            Mono-Talker by default).
    """

    model_type = "jepa_reasoner_with_talker"
    sub_configs = {"reasoner_config": JepaReasonerConfig, "talker_config": AutoConfig}

    def __init__(self, reasoner_config=None, talker_config=None, **kwargs):
        if reasoner_config is None:
            reasoner_config = JepaReasonerConfig()
        if talker_config is None:
            talker_config = MonoTalkerConfig(
                latent_size=reasoner_config.hidden_size
                if isinstance(reasoner_config, PretrainedConfig)
                else reasoner_config.get("hidden_size", JepaReasonerConfig.default_sizes["hidden_size"])
            )
        # Set before PretrainedConfig.__init__, which walks `sub_configs`.
        self.reasoner_config = _sub_config(
            reasoner_config, "reasoner_config", {JepaReasonerConfig.model_type: JepaReasonerConfig}
        )
        self.talker_config = _sub_config(talker_config, "talker_config", TALKER_CONFIG_CLASSES)
        super().__init__(**kwargs)
        self.validate()

    def validate(self):
        """Raise `ValueError` naming the mismatched fields and both values."""
        reasoner, talker = self.reasoner_config, self.talker_config
        reasoner.validate()
        talker.validate()
        if talker.latent_size != reasoner.hidden_size:
            raise ValueError(
                f"JepaReasonerWithTalkerConfig: the talker's latent_size ({talker.latent_size}) must equal the "
                f"reasoner's hidden_size ({reasoner.hidden_size})"
            )
        if talker.vocab_size != reasoner.vocab_size:
            raise ValueError(
                f"JepaReasonerWithTalkerConfig: the talker's vocab_size ({talker.vocab_size}) must equal the "
                f"reasoner's vocab_size ({reasoner.vocab_size}): both read and write the same tokenizer's ids"
            )

    @property
    def is_dual(self) -> bool:
        return self.talker_config.model_type == DualTalkerConfig.model_type

    # Presets: `tiny` (tests), `cpu_fast` (what `hf-jepa reproduce jepa-reasoner` trains), `full` (the paper's 0.9B
    # reasoner with its 198M Talker): the same preset of the reasoner and of the Talker. `**overrides`:
    #   talker_type: "mono" (the default) or "dual", which Talker;
    #   vocab_size: both sub-configs (they share one tokenizer);
    #   reasoner_config / talker_config: a dict of fields set over that sub-config's preset, or a config replacing it
    #     (the Talker's latent_size follows the reasoner's hidden_size unless talker_config sets it);
    #   anything else: the pair config's own fields.

    @classmethod
    def tiny(cls, **overrides) -> "JepaReasonerWithTalkerConfig":
        """A test preset: `JepaReasonerConfig.tiny()` with `MonoTalkerConfig.tiny()` (`talker_type="mono"`) or
        `DualTalkerConfig.tiny()` (`talker_type="dual"`); `overrides` as described above."""
        return cls._from_presets("tiny", overrides)

    @classmethod
    def cpu_fast(cls, **overrides) -> "JepaReasonerWithTalkerConfig":
        """The sizes `hf-jepa reproduce jepa-reasoner` trains on a 2-core CPU: the `cpu_fast` reasoner and Talker."""
        return cls._from_presets("cpu_fast", overrides)

    @classmethod
    def full(cls, **overrides) -> "JepaReasonerWithTalkerConfig":
        """The paper's sizes: the 0.9B reasoner and the 198M Mono- (or Dual-) Talker reading it."""
        return cls._from_presets("full", overrides)

    @classmethod
    def _from_presets(cls, preset: str, overrides: dict) -> "JepaReasonerWithTalkerConfig":
        overrides = dict(overrides)
        talker_type = overrides.pop("talker_type", "mono")
        talker_classes = {"mono": MonoTalkerConfig, "dual": DualTalkerConfig}
        if talker_type not in talker_classes:
            raise ValueError(
                f"JepaReasonerWithTalkerConfig.{preset}: talker_type must be 'mono' or 'dual', got {talker_type!r}"
            )
        shared = {"vocab_size": overrides.pop("vocab_size")} if "vocab_size" in overrides else {}
        reasoner_config = overrides.pop("reasoner_config", None)
        talker_config = overrides.pop("talker_config", None)
        if not isinstance(reasoner_config, PretrainedConfig):
            reasoner_config = getattr(JepaReasonerConfig, preset)(**{**shared, **(reasoner_config or {})})
        if not isinstance(talker_config, PretrainedConfig):
            talker_config = getattr(talker_classes[talker_type], preset)(
                **{"latent_size": reasoner_config.hidden_size, **shared, **(talker_config or {})}
            )
        return cls(reasoner_config=reasoner_config, talker_config=talker_config, **overrides)


__all__ = [
    "CoconutConfig",
    "CoupledTransformerConfig",
    "DualTalkerConfig",
    "JepaBlockStackConfig",
    "JepaReasonerConfig",
    "JepaReasonerWithTalkerConfig",
    "JepaTalkerConfig",
    "MonoTalkerConfig",
]
