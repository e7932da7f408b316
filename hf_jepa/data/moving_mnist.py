"""Moving MNIST with gravity: one or two 28x28 digits flying and bouncing on a square canvas under constant gravity.

Physics (per digit, per axis; positions are the digit's top-left corner in float pixels, `(x, y)` with +y pointing down
the rows, `L = canvas_size - 28` is the largest position that keeps the digit fully on the canvas). Each frame,
semi-implicit Euler:

    record frame t at (p_t, v_t)
    v_y <- v_y + g
    p   <- p + v
    if p < 0: p <- -p,     v <- -v          (each axis on its own)
    if p > L: p <- 2L - p, v <- -v

followed by a clamp to [0, L], a no-op unless a single step moves farther than L. Between bounces this gives the
closed form

    y_t = y_0 + v0_y * t + g * t (t + 1) / 2,        x_t = x_0 + v0_x * t,        v_y(t) = v0_y + g * t.

Gravity is drawn per sequence: a float is used by every sequence (`TRAIN_GRAVITY = 0.0`, the classic Moving MNIST),
a pair `(low, high)` is uniform on the half-open interval `(low, high]` (`SHIFT_GRAVITY = (0.0, 0.5)`: every sequence
falls, never exactly 0). Gravity is the last random draw of a batch, so the same seed, step and rank give the same
digits and initial states under any gravity setting: runs that differ only in `gravity` are counterfactual pairs.

Rendering is sub-pixel so that small accelerations stay visible: each digit is placed at its float position with
bilinear interpolation (a splat: every source pixel spreads its intensity over the 2x2 canvas pixels around it with
weights summing to 1, so ink is conserved on the canvas), digits are composited by max, pixels are float in [0, 1].
Everything is batched over sequences, frames and digits; only the cheap physics loops over time.
"""

import hashlib
import json
import math
import tempfile
from dataclasses import dataclass

import torch

DIGIT_SIZE = 28
CANVAS_SIZE = 64
TRAIN_GRAVITY = 0.0
SHIFT_GRAVITY = (0.0, 0.5)
# The EPM-JEPA protocol's sequences: the defaults of the recipe's data arguments (`EpmJepaDataArguments`) and of the
# shared `moving-mnist-gravity` dataset (`hf_jepa.data.sharing.MovingMnistGravityParameters`); both check their
# common fields with `check_gravity_settings`.
SEQUENCE_LENGTH = 8
EVAL_SEQUENCE_LENGTH = 16
EVAL_SEQUENCES = 256
NUM_DIGITS = 2
# Seed of the EPM-JEPA evaluation sequences (MNIST test digits), the same for every run.
EVAL_SEED = 10_007
# The episodic protocol (`GravityEpisodes`): one gravity per episode. Training episodes draw from
# EPISODIC_TRAIN_GRAVITIES; evaluation uses two of them (seen) and two values never trained on (unseen: 0.3 between
# training values, 0.6 beyond them).
EPISODIC_TRAIN_GRAVITIES = (0.0, 0.1, 0.2, 0.4, 0.5)
EPISODIC_EVAL_GRAVITIES = (0.1, 0.3, 0.4, 0.6)
EPISODIC_UNSEEN_GRAVITIES = tuple(g for g in EPISODIC_EVAL_GRAVITIES if g not in EPISODIC_TRAIN_GRAVITIES)
# The rollout readout's wider gravities (`hf-jepa reproduce epm-jepa --set protocol=rollout`): knowing g pays over a
# 10-step rollout only if g moves a digit by pixels within it. Evaluation: 0.5 and 1.5 seen, 0.75 between training
# values, 2.5 beyond them. At g = 2.5 the fastest digit of a 16-frame sequence moves ~15 px per frame, well below the
# 36 px that would need the clamp, and stays on the canvas (research/epm_jepa/rollout/README.md).
ROLLOUT_TRAIN_GRAVITIES = (0.0, 0.5, 1.0, 1.5, 2.0)
ROLLOUT_EVAL_GRAVITIES = (0.5, 0.75, 1.5, 2.5)
# The generator stream of an episode's experience (support) sequences: a "rank" no real process has, so support
# sequences differ from every rank's query sequences and are the same on every rank (buffers stay identical).
SUPPORT_STREAM = 10_006
_NUM_DIGITS_CHOICES = (1, 2, (1, 2))


def simulate_trajectories(
    positions0: torch.Tensor,
    velocities0: torch.Tensor,
    gravity: float | torch.Tensor,
    num_steps: int,
    limit: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Integrate the bouncing-under-gravity physics of the module docstring from an explicit initial state.

    Args:
        positions0: `(B, D, 2)` initial top-left corners `(x, y)` in pixels, expected in `[0, limit]`.
        velocities0: `(B, D, 2)` initial velocities in pixels per frame.
        gravity: downward acceleration in pixels per frame^2, a float or a `(B,)` tensor (one value per sequence).
        num_steps: number of recorded frames T (frame 0 is the initial state).
        limit: the largest position on either axis (`canvas_size - 28` for a 28x28 digit).

    Returns:
        `(positions, velocities)`, each `(B, T, D, 2)` in the dtype of `positions0`; `velocities[:, t]` is the
        velocity held while frame t is recorded (before that step's gravity kick).
    """
    position = positions0.clone()
    velocity = velocities0.to(position.dtype).clone()
    gravity = torch.as_tensor(gravity, dtype=position.dtype)
    kick = torch.zeros_like(velocity)
    # A per-sequence (B,) gravity broadcasts over the digit dimension.
    kick[..., 1] = gravity.reshape(gravity.shape + (1,) * (position.ndim - 1 - gravity.ndim))
    positions, velocities = [], []
    for _ in range(num_steps):
        positions.append(position)
        velocities.append(velocity)
        velocity = velocity + kick
        position = position + velocity
        below = position < 0
        position = torch.where(below, -position, position)
        velocity = torch.where(below, -velocity, velocity)
        above = position > limit
        position = torch.where(above, 2 * limit - position, position)
        velocity = torch.where(above, -velocity, velocity)
        position = position.clamp(0, limit)
    return torch.stack(positions, 1), torch.stack(velocities, 1)


def render_frames(
    images: torch.Tensor,
    positions: torch.Tensor,
    digit_index: torch.Tensor,
    digit_mask: torch.Tensor | None = None,
    canvas_size: int = 64,
) -> torch.Tensor:
    """Draw digits at float positions with bilinear interpolation and composite them by max.

    Args:
        images: uint8 `(N, 28, 28)` digit images.
        positions: `(B, T, D, 2)` top-left corners `(x, y)` in pixels; parts falling off the canvas are dropped.
        digit_index: `(B, D)` indices into `images`.
        digit_mask: optional `(B, D)` bool, False for a digit that is not drawn.
        canvas_size: side of the square canvas.

    Returns:
        float32 `(B, T, 1, canvas_size, canvas_size)` frames in [0, 1].
    """
    batch, steps, digits, _ = positions.shape
    height, width = images.shape[1:]
    digit_pixels = images[digit_index].float() / 255.0
    if digit_mask is not None:
        # An absent digit contributes zeros, which the max composite ignores.
        digit_pixels = digit_pixels * digit_mask[..., None, None]
    # One zero border: the bilinear splat of a 28x28 digit covers 29x29 canvas pixels.
    padded = torch.nn.functional.pad(digit_pixels, (1, 1, 1, 1))[:, None]  # (B, 1, D, 30, 30)

    positions = positions.float()
    corner = torch.floor(positions)
    fraction = (positions - corner)[..., None, None]  # (B, T, D, 2, 1, 1)
    fx, fy = fraction[..., 0, :, :], fraction[..., 1, :, :]
    # Canvas pixel (iy + i, ix + j) takes weight (1 - fy) from source row i and fy from source row i - 1, likewise for
    # columns: exactly bilinear sampling of the digit at (row - y, col - x).
    rows = (1 - fy) * padded[..., 1:, :] + fy * padded[..., :-1, :]  # (B, T, D, 29, 30)
    patch = (1 - fx) * rows[..., :, 1:] + fx * rows[..., :, :-1]  # (B, T, D, 29, 29)

    corner = corner.long()
    canvas_rows = corner[..., 1, None, None] + torch.arange(height + 1)[:, None]
    canvas_cols = corner[..., 0, None, None] + torch.arange(width + 1)[None, :]
    on_canvas = (canvas_rows >= 0) & (canvas_rows < canvas_size) & (canvas_cols >= 0) & (canvas_cols < canvas_size)
    # Off-canvas pixels go to one spare slot past the canvas, cut off below.
    flat = torch.where(on_canvas, canvas_rows * canvas_size + canvas_cols, canvas_size * canvas_size)
    canvas = patch.new_zeros(batch * steps, canvas_size * canvas_size + 1)
    canvas.scatter_reduce_(1, flat.reshape(batch * steps, -1), patch.reshape(batch * steps, -1), reduce="amax")
    return canvas[:, :-1].reshape(batch, steps, 1, canvas_size, canvas_size)


def check_gravity_settings(settings) -> None:
    """Check the Moving-MNIST-with-gravity fields shared by the EPM-JEPA recipe's data arguments and the
    `moving-mnist-gravity` dataset parameters (`settings` has them as attributes): `sequence_length` and
    `eval_sequence_length` integers >= 2, `num_digits` 1 or 2, `train_gravity`, `shift_gravity_min` and
    `shift_gravity_max` finite numbers >= 0 (gravity points down) with `shift_gravity_min < shift_gravity_max` (the
    shift gravity is drawn from `(shift_gravity_min, shift_gravity_max]`, as `MovingMnist` requires). Raises
    `ValueError` naming the field and what it accepts; returns None."""
    for name in ("sequence_length", "eval_sequence_length"):
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 2:
            raise ValueError(f"{name} must be an integer >= 2, got {value!r}")
    if isinstance(settings.num_digits, bool) or settings.num_digits not in (1, 2):
        raise ValueError(f"num_digits must be one of 1, 2; got {settings.num_digits!r}")
    for name in ("train_gravity", "shift_gravity_min", "shift_gravity_max"):
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
        if value < 0:
            raise ValueError(f"{name} must be >= 0 (gravity points down), got {value!r}")
    low, high = settings.shift_gravity_min, settings.shift_gravity_max
    if not low < high:
        raise ValueError(
            f"shift_gravity_min ({low}) must be < shift_gravity_max ({high}): the shift gravity is drawn from "
            "(shift_gravity_min, shift_gravity_max]"
        )


def check_gravity_list(name: str, gravities) -> tuple[float, ...]:
    """`gravities` as a tuple of floats, checked: a non-empty list of finite numbers >= 0 (the simulator's gravity
    points down; a negative value is not supported). Raises `ValueError` naming `name`."""
    if isinstance(gravities, (int, float)) and not isinstance(gravities, bool):
        gravities = (gravities,)
    if not isinstance(gravities, (list, tuple)) or not gravities:
        raise ValueError(f"{name} must be a non-empty list of gravities (px/frame^2, each >= 0), got {gravities!r}")
    for value in gravities:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{name} must hold finite numbers, got {value!r} in {list(gravities)}")
        if value < 0:
            raise ValueError(
                f"{name} must hold gravities >= 0 (the simulator's gravity points down), got {value!r} in "
                f"{list(gravities)}"
            )
    return tuple(float(value) for value in gravities)


def _gravity_bounds(gravity) -> tuple[float, float] | None:
    """`None` for a fixed gravity, else the validated `(low, high)` pair."""
    if isinstance(gravity, (tuple, list)):
        if len(gravity) != 2:
            raise ValueError(f"gravity must be a float or a (low, high) pair, got {gravity!r}")
        low, high = (float(value) for value in gravity)
        if low < 0:
            raise ValueError(f"gravity range must be non-negative (gravity points down), got low={low}")
        if not low < high:
            raise ValueError(f"gravity range (low, high] needs low < high, got {gravity!r}")
        return low, high
    if not isinstance(gravity, (int, float)) or isinstance(gravity, bool) or not math.isfinite(gravity):
        raise ValueError(f"gravity must be a finite float or a (low, high) pair, got {gravity!r}")
    if gravity < 0:
        raise ValueError(f"gravity must be >= 0 (gravity points down), got {gravity}")
    return None


@dataclass
class MovingMnist:
    """Moving MNIST sequences with gravity, drawn as whole batches from uint8 digit images held in memory.

    Args:
        images: uint8 `(N, 28, 28)` digit images of one split.
        labels: optional int `(N,)` digit classes; when given, batches carry `digit_labels`.
        sequence_length: frames per sequence (>= 2).
        num_digits: 1, 2, or `(1, 2)` for 1 or 2 digits per sequence with equal probability.
        gravity: downward acceleration in px/frame^2, a float for every sequence or a `(low, high)` pair drawn
            uniformly from `(low, high]` per sequence (`TRAIN_GRAVITY`, `SHIFT_GRAVITY`).
        speed_min, speed_max: initial speed range in px/frame (direction uniform).
        canvas_size: side of the square canvas in pixels (> 28).
        seed: base seed; batch `step` of `rank` is seeded with `(seed, step, rank)`.
    """

    images: torch.Tensor
    labels: torch.Tensor | None = None
    sequence_length: int = 16
    num_digits: int | tuple[int, int] = 2
    gravity: float | tuple[float, float] = TRAIN_GRAVITY
    speed_min: float = 1.0
    speed_max: float = 3.0
    canvas_size: int = CANVAS_SIZE
    seed: int = 0

    def __post_init__(self):
        if (
            not isinstance(self.images, torch.Tensor)
            or self.images.dtype != torch.uint8
            or self.images.ndim != 3
            or tuple(self.images.shape[1:]) != (DIGIT_SIZE, DIGIT_SIZE)
            or self.images.shape[0] == 0
        ):
            found = (
                f"{self.images.dtype} {tuple(self.images.shape)}"
                if isinstance(self.images, torch.Tensor)
                else type(self.images).__name__
            )
            raise ValueError(f"images must be a non-empty uint8 tensor (N, {DIGIT_SIZE}, {DIGIT_SIZE}), got {found}")
        if self.labels is not None:
            if self.labels.shape != (self.images.shape[0],):
                raise ValueError(f"labels must have shape ({self.images.shape[0]},), got {tuple(self.labels.shape)}")
            self.labels = self.labels.long()
        if not isinstance(self.sequence_length, int) or self.sequence_length < 2:
            raise ValueError(f"sequence_length must be an int >= 2, got {self.sequence_length!r}")
        if isinstance(self.num_digits, list):
            self.num_digits = tuple(self.num_digits)
        if isinstance(self.num_digits, bool) or self.num_digits not in _NUM_DIGITS_CHOICES:
            raise ValueError(f"num_digits must be 1, 2 or (1, 2), got {self.num_digits!r}")
        if isinstance(self.gravity, list):
            self.gravity = tuple(self.gravity)
        self._gravity_bounds = _gravity_bounds(self.gravity)
        if not isinstance(self.canvas_size, int) or self.canvas_size <= DIGIT_SIZE:
            raise ValueError(f"canvas_size must be an int > {DIGIT_SIZE}, got {self.canvas_size!r}")
        if not 0 <= self.speed_min <= self.speed_max:
            raise ValueError(
                f"speeds need 0 <= speed_min <= speed_max, got speed_min={self.speed_min}, speed_max={self.speed_max}"
            )

    def __len__(self) -> int:
        return self.images.shape[0]

    @property
    def limit(self) -> int:
        """The largest top-left coordinate that keeps a digit fully on the canvas."""
        return self.canvas_size - DIGIT_SIZE

    @property
    def max_digits(self) -> int:
        return 1 if self.num_digits == 1 else 2

    def _generator(self, step: int, rank: int) -> torch.Generator:
        # A distinct, well-mixed stream per (seed, step, rank), as in ModularArithmeticTask.
        return torch.Generator().manual_seed((self.seed * 1_000_003 + step) * 10_007 + rank)

    def _draw_gravity(self, batch_size: int, generator: torch.Generator) -> torch.Tensor:
        if self._gravity_bounds is None:
            return torch.full((batch_size,), float(self.gravity))
        low, high = self._gravity_bounds
        # high - U (high - low) with U in [0, 1) is in (low, high]; rounding could still land on low, hence the floor.
        gravity = high - torch.rand(batch_size, generator=generator) * (high - low)
        return torch.maximum(gravity, torch.nextafter(torch.tensor(low), torch.tensor(math.inf)))

    def simulate(
        self, batch_size: int, generator: torch.Generator, gravity: float | None = None
    ) -> dict[str, torch.Tensor]:
        """Draw digits, initial states and gravity (or use `gravity` for every sequence), then integrate the physics.

        Returns `positions` and `velocities` `(B, T, D, 2)` as `(x, y)`, `gravity` `(B,)`, `digit_index` `(B, D)` and
        `digit_mask` `(B, D)` (False for an absent second digit). D is 1 for `num_digits=1`, else 2.
        """
        digits = self.max_digits
        digit_index = torch.randint(0, len(self), (batch_size, digits), generator=generator)
        if self.num_digits == (1, 2):
            count = torch.randint(1, 3, (batch_size, 1), generator=generator)
            digit_mask = torch.arange(digits) < count
        else:
            digit_mask = torch.ones(batch_size, digits, dtype=torch.bool)
        positions0 = torch.rand(batch_size, digits, 2, generator=generator) * self.limit
        angle = torch.rand(batch_size, digits, generator=generator) * (2 * math.pi)
        speed = self.speed_min + torch.rand(batch_size, digits, generator=generator) * (self.speed_max - self.speed_min)
        velocities0 = speed[..., None] * torch.stack([torch.cos(angle), torch.sin(angle)], -1)
        drawn = self._draw_gravity(batch_size, generator)  # drawn anyway: the same stream whatever `gravity` says
        if gravity is not None:
            _gravity_bounds(gravity)
            drawn = torch.full((batch_size,), float(gravity))
        gravity = drawn
        positions, velocities = simulate_trajectories(
            positions0, velocities0, gravity, self.sequence_length, self.limit
        )
        return {
            "positions": positions,
            "velocities": velocities,
            "gravity": gravity,
            "digit_index": digit_index,
            "digit_mask": digit_mask,
        }

    def render(
        self, positions: torch.Tensor, digit_index: torch.Tensor, digit_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Frames `(B, T, 1, canvas_size, canvas_size)` in [0, 1] for digits `digit_index` at `positions`."""
        return render_frames(self.images, positions, digit_index, digit_mask, self.canvas_size)

    def _digit_labels(self, state: dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.where(state["digit_mask"], self.labels[state["digit_index"]], -1)

    def sample_batch(
        self, batch_size: int, step: int = 0, rank: int = 0, gravity: float | None = None
    ) -> dict[str, torch.Tensor]:
        """A batch: `pixel_values` float32 `(B, T, 1, H, W)` in [0, 1], `gravity` `(B,)`, `positions` `(B, T, D, 2)`,
        `digit_mask` `(B, D)`, and `digit_labels` `(B, D)` (-1 for an absent digit) when labels were given.
        `gravity` (a float) overrides the configured gravity for every sequence; digits and initial states are those
        of the same (seed, step, rank) under any gravity."""
        state = self.simulate(batch_size, self._generator(step, rank), gravity)
        batch = {
            "pixel_values": self.render(state["positions"], state["digit_index"], state["digit_mask"]),
            "gravity": state["gravity"],
            "positions": state["positions"],
            "digit_mask": state["digit_mask"],
        }
        if self.labels is not None:
            batch["digit_labels"] = self._digit_labels(state)
        return batch

    def _fingerprint(self, num_sequences: int, batch_size: int) -> str:
        """Names the generated dataset (and its cache folder) by everything its rows depend on."""
        content = hashlib.sha256(self.images.contiguous().numpy().tobytes())
        if self.labels is not None:
            content.update(self.labels.contiguous().numpy().tobytes())
        config = {
            "num_sequences": num_sequences,
            "batch_size": batch_size,
            "sequence_length": self.sequence_length,
            "num_digits": self.num_digits,
            "gravity": self.gravity,
            "speed_min": float(self.speed_min),
            "speed_max": float(self.speed_max),
            "canvas_size": self.canvas_size,
            "seed": self.seed,
            "content": content.hexdigest(),
        }
        return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:32]

    def features(self):
        """The `datasets.Features` of `to_dataset` rows."""
        import datasets

        digits, size = self.max_digits, self.canvas_size
        columns = {
            "pixel_values": datasets.Array4D((self.sequence_length, 1, size, size), "float32"),
            "gravity": datasets.Value("float32"),
            "positions": datasets.Array3D((self.sequence_length, digits, 2), "float32"),
            "digit_mask": datasets.List(datasets.Value("bool"), length=digits),
        }
        if self.labels is not None:
            columns["digit_labels"] = datasets.List(datasets.Value("int64"), length=digits)
        return datasets.Features(columns)

    def _rows(self, num_sequences: int, batch_size: int):
        for step, start in enumerate(range(0, num_sequences, batch_size)):
            batch = self.sample_batch(min(batch_size, num_sequences - start), step=step, rank=0)
            columns = {
                "pixel_values": batch["pixel_values"].numpy(),
                "gravity": batch["gravity"].numpy(),
                "positions": batch["positions"].numpy(),
                "digit_mask": batch["digit_mask"].numpy(),
            }
            if "digit_labels" in batch:
                columns["digit_labels"] = batch["digit_labels"].numpy()
            for index in range(len(columns["gravity"])):
                yield {key: value[index] for key, value in columns.items()}

    def to_dataset(self, num_sequences: int, batch_size: int = 256, cache_dir: str | None = None):
        """A generated `datasets.Dataset` of `num_sequences` rows, e.g. for sharing a fixed evaluation set.

        Rows `[k * batch_size, (k + 1) * batch_size)` are `sample_batch(batch_size, step=k, rank=0)` (the last chunk
        `sample_batch(remainder, step=k)`), so the dataset depends on `batch_size`: with the training run's
        per-device batch size, chunk k is the batch the EPM-JEPA recipe trains on at step k (rank 0). Columns:
        `pixel_values` float32 `(T, 1, H, W)`, the model's input layout and values exactly (the renderer's floats are
        not multiples of 1/255, so a uint8 copy could not give them back), `gravity` float32, `positions` float32
        `(T, D, 2)`, `digit_mask` and, when labels were given, `digit_labels`. `dataset.with_format("torch")[a:b]`
        gives `pixel_values` as the `(B, T, 1, H, W)` float32 tensor the model takes.

        With `cache_dir=None` the rows are generated in a temporary folder and held in memory (nothing is written to
        the user's cache); with a `cache_dir` they are cached there under a fingerprint of the whole configuration
        (seed, sizes, gravity, speeds, image and label content), so different settings never share a cache entry.
        """
        import datasets

        if num_sequences < 1:
            raise ValueError(f"num_sequences must be >= 1, got {num_sequences}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        fingerprint = self._fingerprint(num_sequences, batch_size)
        kwargs = dict(
            features=self.features(),
            gen_kwargs={"num_sequences": num_sequences, "batch_size": batch_size},
            fingerprint=fingerprint,
        )
        if cache_dir is not None:
            return datasets.Dataset.from_generator(self._rows, cache_dir=str(cache_dir), **kwargs)
        with tempfile.TemporaryDirectory(prefix="moving-mnist-") as scratch:
            return datasets.Dataset.from_generator(self._rows, cache_dir=scratch, keep_in_memory=True, **kwargs)


@dataclass
class GravityEpisodes:
    """Episodes of Moving MNIST with one gravity each: the episodic protocol of EPM-JEPA, in which experience can tell
    the model the current dynamics.

    Episode `e` draws its gravity uniformly from `gravities` (seeded by `(world.seed, e)`, the same on every rank),
    then gives `query` sequences (what the model predicts and is trained on: `world.sample_batch(batch, step=e,
    rank=rank, gravity=g)`) and `support` sequences of the same gravity (the experience the buffer is filled from, a
    separate stream shared by every rank). The buffer is reset between episodes by the model (`forward` with
    `experience_pixel_values`), so it only ever holds the current episode's transitions.

    Args:
        world: the sequence generator (its own `gravity` setting is ignored).
        gravities: the gravities episodes draw from (px/frame^2, each >= 0).
        support_size: experience sequences per episode (>= 1).
    """

    world: MovingMnist
    gravities: tuple[float, ...] = EPISODIC_TRAIN_GRAVITIES
    support_size: int = 8

    def __post_init__(self):
        self.gravities = tuple(float(g) for g in self.gravities)
        if not self.gravities:
            raise ValueError("gravities must hold at least one value")
        for value in self.gravities:
            if _gravity_bounds(value) is not None:
                raise ValueError(f"gravities must be single floats, got {value!r}")
        if not isinstance(self.support_size, int) or isinstance(self.support_size, bool) or self.support_size < 1:
            raise ValueError(f"support_size must be an int >= 1, got {self.support_size!r}")

    def gravity_of(self, episode: int) -> float:
        """The gravity of episode `episode` (depends on the world's seed and the episode only)."""
        generator = torch.Generator().manual_seed((self.world.seed * 1_000_003 + episode) * 10_007 + SUPPORT_STREAM - 1)
        return self.gravities[int(torch.randint(0, len(self.gravities), (1,), generator=generator))]

    def support(self, episode: int, gravity: float | None = None, size: int | None = None) -> torch.Tensor:
        """`(size, T, 1, H, W)` experience sequences of episode `episode` (at its gravity unless `gravity` is given)."""
        gravity = self.gravity_of(episode) if gravity is None else gravity
        size = self.support_size if size is None else size
        return self.world.sample_batch(size, step=episode, rank=SUPPORT_STREAM, gravity=gravity)["pixel_values"]

    def episode(self, batch_size: int, episode: int, rank: int = 0) -> dict[str, torch.Tensor]:
        """Episode `episode` for process `rank`: `pixel_values` (the query sequences), `experience_pixel_values`
        (the support sequences) and `gravity` (a 0-d tensor)."""
        gravity = self.gravity_of(episode)
        query = self.world.sample_batch(batch_size, step=episode, rank=rank, gravity=gravity)["pixel_values"]
        return {
            "pixel_values": query,
            "experience_pixel_values": self.support(episode, gravity),
            "gravity": torch.tensor(gravity),
        }
