"""The modular-arithmetic task on digit images: (image of x, op k) -> an image of class (x + k) mod modulus.

Batches are drawn as whole tensors from uint8 images held in memory (no per-sample Python). Batch `step` of rank
`rank` depends only on `(seed, step, rank)`, so runs are reproducible, ranks draw different data, and a resumed run
continues with exactly the batches it would have drawn.
"""

from dataclasses import dataclass

import torch

TRAIN_OPERATIONS = (-1, 1)


def unseen_operations(modulus: int = 10) -> tuple[int, ...]:
    """The strict zero-shot evaluation ops: +-2 .. +-(modulus - 1)."""
    return tuple(sign * k for k in range(2, modulus) for sign in (1, -1))


def normalize_images(images: torch.Tensor, mean: float = 0.1307, std: float = 0.3081) -> torch.Tensor:
    """uint8 `(N, H, W)` -> float `(N, 1, H, W)`, scaled to [0, 1] and standardised."""
    return ((images.float() / 255.0 - mean) / std).unsqueeze(1)


def random_shift(images: torch.Tensor, max_shift: int, generator: torch.Generator) -> torch.Tensor:
    """Translate each image by an independent integer offset in [-max_shift, max_shift] (zero padding), batched."""
    if max_shift <= 0:
        return images
    offsets = torch.randint(0, 2 * max_shift + 1, (2, len(images)), generator=generator)
    return shift_images(images, max_shift - offsets[0], max_shift - offsets[1])


# Fixed test-time perturbations for the robustness figures (a digit moved or turned as a user's drawing would be):
# every test image moved by exactly 2 px in one of the 8 directions, or turned by +-15 degrees; the direction and sign
# per image come from `seed`, so every model is scored on the same perturbed images.
PERTURBATIONS = ("shifted_2px", "rotated_15deg")


def shift_images(images: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """Move image `i` of uint8 `(N, H, W)` by `(rows[i], cols[i])` pixels (down, right; zero padding), batched."""
    batch, height, width = images.shape
    pad = int(max(rows.abs().max(), cols.abs().max(), 0)) if batch else 0
    padded = torch.nn.functional.pad(images, (pad,) * 4)
    row_index = (pad - rows)[:, None] + torch.arange(height)[None, :]
    col_index = (pad - cols)[:, None] + torch.arange(width)[None, :]
    return padded[torch.arange(batch)[:, None, None], row_index[:, :, None], col_index[:, None, :]]


def rotate_images(images: torch.Tensor, degrees: torch.Tensor) -> torch.Tensor:
    """Turn image `i` of uint8 `(N, H, W)` by `degrees[i]` (counter-clockwise) about its centre, bilinear, zero fill."""
    radians = torch.deg2rad(degrees.float())
    cos, sin = torch.cos(radians), torch.sin(radians)
    zeros = torch.zeros_like(cos)
    # affine_grid maps each output position to the input position it reads, in normalised (x, y) coordinates with y
    # pointing down: this matrix makes the picture turn counter-clockwise as displayed.
    theta = torch.stack([torch.stack([cos, -sin, zeros], -1), torch.stack([sin, cos, zeros], -1)], 1)
    grid = torch.nn.functional.affine_grid(theta, (len(images), 1, *images.shape[1:]), align_corners=False)
    turned = torch.nn.functional.grid_sample(images[:, None].float(), grid, align_corners=False)
    return turned[:, 0].round().clamp(0, 255).to(images.dtype)


def perturb_images(images: torch.Tensor, perturbation: str, seed: int = 0) -> torch.Tensor:
    """uint8 `(N, H, W)` test images under one of PERTURBATIONS (deterministic given `seed`)."""
    generator = torch.Generator().manual_seed(seed)
    count = len(images)
    if perturbation == "shifted_2px":
        directions = torch.tensor([(r, c) for r in (-2, 0, 2) for c in (-2, 0, 2) if (r, c) != (0, 0)])
        chosen = directions[torch.randint(0, len(directions), (count,), generator=generator)]
        return shift_images(images, chosen[:, 0], chosen[:, 1])
    if perturbation == "rotated_15deg":
        signs = torch.randint(0, 2, (count,), generator=generator) * 2 - 1
        return rotate_images(images, 15.0 * signs)
    raise ValueError(f"perturbation must be one of {PERTURBATIONS}, got {perturbation!r}")


@dataclass
class ModularArithmeticTask:
    """Pairs an image of digit `x` and an op `k` with a random image of digit `(x + k) mod modulus` from the same split.

    Args:
        images: uint8 `(N, H, W)` images of one split.
        labels: int64 `(N,)` digit classes.
        operations: ops to sample from (default: the training ops -1 and +1).
        modulus: group size.
        seed: base seed; batch `step` of `rank` is seeded with `(seed, step, rank)`.
        max_shift: random translation augmentation in pixels (0 = off), applied to context and target images.
        pixel_mean, pixel_std: normalisation of the returned `pixel_values`.
    """

    images: torch.Tensor
    labels: torch.Tensor
    operations: tuple[int, ...] = TRAIN_OPERATIONS
    modulus: int = 10
    seed: int = 0
    max_shift: int = 0
    pixel_mean: float = 0.1307
    pixel_std: float = 0.3081

    def __post_init__(self):
        if self.images.dtype != torch.uint8 or self.images.ndim != 3:
            raise ValueError(
                f"images must be a uint8 tensor (N, H, W), got {self.images.dtype} {tuple(self.images.shape)}"
            )
        if self.labels.shape != (self.images.shape[0],):
            raise ValueError(f"labels must have shape ({self.images.shape[0]},), got {tuple(self.labels.shape)}")
        if not self.operations:
            raise ValueError("operations must not be empty")
        bad = [k for k in self.operations if abs(k) >= self.modulus]
        if bad:
            raise ValueError(f"operations must lie in [-{self.modulus - 1}, {self.modulus - 1}], got {bad}")
        self.labels = self.labels.long()
        order = torch.argsort(self.labels, stable=True)
        counts = torch.bincount(self.labels, minlength=self.modulus)
        if counts.numel() != self.modulus or (counts == 0).any():
            raise ValueError(f"every class 0..{self.modulus - 1} needs at least one image; counts: {counts.tolist()}")
        self._by_class = order
        self._class_counts = counts
        self._class_offsets = torch.cumsum(counts, 0) - counts
        self._operations = torch.tensor(self.operations, dtype=torch.long)

    def __len__(self) -> int:
        return self.images.shape[0]

    def _generator(self, step: int, rank: int) -> torch.Generator:
        # A distinct, well-mixed stream per (seed, step, rank).
        return torch.Generator().manual_seed((self.seed * 1_000_003 + step) * 10_007 + rank)

    def random_image_of_class(self, classes: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Indices of uniformly drawn images of the given classes, one per entry."""
        offsets = (torch.rand(classes.shape, generator=generator) * self._class_counts[classes]).long()
        return self._by_class[self._class_offsets[classes] + offsets]

    def _draw(self, size: int, generator: torch.Generator):
        """Indices of `size` context images, their ops, the target classes and indices of the target images."""
        index = torch.randint(0, len(self), (size,), generator=generator)
        operations = self._operations[torch.randint(0, len(self._operations), (size,), generator=generator)]
        target_labels = (self.labels[index] + operations) % self.modulus
        return index, operations, target_labels, self.random_image_of_class(target_labels, generator)

    def sample_batch(self, batch_size: int, step: int = 0, rank: int = 0) -> dict[str, torch.Tensor]:
        """A batch as model inputs: `pixel_values`, `operations`, `target_pixel_values`, `labels` (target classes)."""
        generator = self._generator(step, rank)
        index, operations, target_labels, target_index = self._draw(batch_size, generator)
        context, target = self.images[index], self.images[target_index]
        if self.max_shift:
            context = random_shift(context, self.max_shift, generator)
            target = random_shift(target, self.max_shift, generator)
        return {
            "pixel_values": normalize_images(context, self.pixel_mean, self.pixel_std),
            "operations": operations,
            "target_pixel_values": normalize_images(target, self.pixel_mean, self.pixel_std),
            "labels": target_labels,
        }

    def to_dataset(self, num_samples: int, batch_size: int = 4096):
        """A materialised `datasets.Dataset` of (image, operation, target_image, label) rows, e.g. for sharing."""
        import datasets
        import numpy as np

        columns = {"image": [], "operation": [], "target_image": [], "label": []}
        for step, start in enumerate(range(0, num_samples, batch_size)):
            size = min(batch_size, num_samples - start)
            index, operations, target_labels, target_index = self._draw(size, self._generator(step, 0))
            columns["image"].append(self.images[index].numpy())
            columns["operation"].append(operations.numpy())
            columns["target_image"].append(self.images[target_index].numpy())
            columns["label"].append(target_labels.numpy())
        data = {key: np.concatenate(value) for key, value in columns.items()}
        height, width = self.images.shape[1:]
        features = datasets.Features(
            {
                "image": datasets.Array2D((height, width), "uint8"),
                "operation": datasets.Value("int64"),
                "target_image": datasets.Array2D((height, width), "uint8"),
                "label": datasets.Value("int64"),
            }
        )
        return datasets.Dataset.from_dict({k: list(v) if v.ndim > 1 else v for k, v in data.items()}, features=features)
