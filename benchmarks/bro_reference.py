"""A plain single-file BRo-JEPA, the yardstick of `time_to_accuracy.py`.

The same method as `hf-jepa train bro-jepa`, written the straightforward way (no trainer, no config, tensors in
memory, one loop):
- context encoder: strided 3-conv CNN 32-64-128 (3x3, stride 2, BN + ReLU), then a 2048-256-64 head
  (Linear + BN + ReLU + Linear) and a per-dimension BatchNorm without affine on the 64-d latent;
- EMA target encoder (momentum 0.99, constant), its BatchNorm layers normalising with their own batch statistics
  while training (as `BroJepaModel` does);
- multi-frequency block-rotation predictor `z_p = R(k theta_j) z` on 32 2-D blocks, harmonics cycling 1..5, learnable
  angles initialised at `2 pi / 10 * f_j`;
- loss: 25 * MSE(z_p, z_target) + 25 * VICReg variance + 1 * VICReg covariance of the context latents;
- data: an image of digit x, op k in {-1, +1}, a random image of digit (x + k) mod 10; AdamW 2e-3 (weight decay 0.05 on
  matrices), batch 256, fp32.
Evaluation is hf_jepa's protocol (`hf_jepa.metrics.modular_arithmetic`): class prototypes = mean target latent of
each class over all training images, every test image's context latent rotated by k, classified by cosine to the
prototypes; zero-shot accuracy = mean over the unseen ops +-2..+-9.

Run alone: `python benchmarks/bro_reference.py --seconds 30` (prints accuracy at a few checkpoints).
"""

import argparse
import copy
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

MODULUS = 10
TRAIN_OPS = (-1, 1)
UNSEEN_OPS = tuple(s * k for k in range(2, MODULUS) for s in (1, -1))
MEAN, STD = 0.1307, 0.3081


def normalize(images: torch.Tensor) -> torch.Tensor:
    return ((images.float() / 255.0 - MEAN) / STD).unsqueeze(1)


class Encoder(nn.Module):
    def __init__(self, channels=(32, 64, 128), hidden=256, latent=64):
        super().__init__()
        layers, width = [], 1
        for out in channels:
            layers += [nn.Conv2d(width, out, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(out), nn.ReLU(True)]
            width = out
        self.convs = nn.Sequential(*layers, nn.Flatten())  # 28 -> 14 -> 7 -> 4
        self.head = nn.Sequential(
            nn.Linear(width * 16, hidden), nn.BatchNorm1d(hidden), nn.ReLU(True), nn.Linear(hidden, latent)
        )
        self.norm = nn.BatchNorm1d(latent, affine=False)

    def forward(self, x):
        return self.norm(self.head(self.convs(x)))


class Rotation(nn.Module):
    def __init__(self, latent=64):
        super().__init__()
        self.blocks = latent // 2
        harmonics = torch.arange(self.blocks) % (MODULUS // 2) + 1
        self.angles = nn.Parameter(2 * math.pi / MODULUS * harmonics.float())

    def forward(self, z, k):
        phase = k.float()[:, None] * self.angles[None, :]
        cos, sin = phase.cos(), phase.sin()
        x, y = z.reshape(len(z), self.blocks, 2).unbind(-1)
        return torch.stack((cos * x - sin * y, sin * x + cos * y), -1).reshape_as(z)


def vicreg(z):
    std = torch.sqrt(z.var(0) + 1e-4)
    variance = F.relu(1 - std).mean()
    c = z - z.mean(0)
    cov = c.T @ c / (len(z) - 1)
    covariance = (cov.pow(2).sum() - cov.diagonal().pow(2).sum()) / z.shape[1]
    return variance, covariance


class Sampler:
    """Batches of (context image, op, target image of class (x + k) mod 10) as whole tensors."""

    def __init__(self, images, labels, seed=0):
        self.images, self.labels = images, labels.long()
        self.by_class = [torch.nonzero(self.labels == c).flatten() for c in range(MODULUS)]
        self.counts = torch.tensor([len(i) for i in self.by_class])
        self.order = torch.cat(self.by_class)
        self.offsets = torch.cumsum(self.counts, 0) - self.counts
        self.generator = torch.Generator().manual_seed(seed)

    def batch(self, size):
        g = self.generator
        index = torch.randint(0, len(self.labels), (size,), generator=g)
        ops = torch.tensor(TRAIN_OPS)[torch.randint(0, len(TRAIN_OPS), (size,), generator=g)]
        target_class = (self.labels[index] + ops) % MODULUS
        pick = (torch.rand(size, generator=g) * self.counts[target_class]).long()
        target = self.order[self.offsets[target_class] + pick]
        return normalize(self.images[index]), ops, normalize(self.images[target])


@torch.no_grad()
def evaluate(encoder, target_encoder, rotation, train_images, train_labels, test_images, test_labels, chunk=4096):
    """hf_jepa's protocol: returns (zero-shot accuracy over +-2..+-9, seen accuracy over +-1)."""
    encoder.eval()
    target_encoder.eval()
    sums = torch.zeros(MODULUS, rotation.blocks * 2)
    for i in range(0, len(train_labels), chunk):
        z = target_encoder(normalize(train_images[i : i + chunk]))
        sums.index_add_(0, train_labels[i : i + chunk].long(), z)
    prototypes = F.normalize(sums / torch.bincount(train_labels.long(), minlength=MODULUS)[:, None], dim=-1)
    z = torch.cat([encoder(normalize(test_images[i : i + chunk])) for i in range(0, len(test_labels), chunk)])
    labels = test_labels.long()

    def accuracy(k):
        predicted = (F.normalize(rotation(z, torch.full_like(labels, k)), dim=-1) @ prototypes.T).argmax(-1)
        return (predicted == (labels + k) % MODULUS).float().mean().item()

    encoder.train()
    return sum(map(accuracy, UNSEEN_OPS)) / len(UNSEEN_OPS), sum(map(accuracy, TRAIN_OPS)) / len(TRAIN_OPS)


def train(
    train_images,
    train_labels,
    test_images,
    test_labels,
    checkpoints_s,
    batch_size=256,
    lr=2e-3,
    ema=0.99,
    seed=0,
    perturbed_test_images=None,
):
    """Train until the last of `checkpoints_s` (seconds of training, evaluation excluded); returns
    `[(train_seconds, step, zero_shot, seen, perturbed), ...]`, one row per checkpoint, where `perturbed` maps each
    name of `perturbed_test_images` (name -> uint8 test images, same labels) to the zero-shot accuracy on them."""
    torch.manual_seed(seed)
    encoder, rotation = Encoder(), Rotation()
    target_encoder = copy.deepcopy(encoder).requires_grad_(False)  # stays in train mode: BN uses its own batch
    params = list(encoder.parameters())
    decay = [p for p in params if p.ndim > 1]
    no_decay = [p for p in params if p.ndim <= 1] + list(rotation.parameters())
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}], lr=lr
    )
    sampler = Sampler(train_images, train_labels, seed)
    pending, rows, clock, step = sorted(checkpoints_s), [], 0.0, 0
    target_params, online_params = list(target_encoder.parameters()), list(encoder.parameters())
    while pending:
        start = time.perf_counter()
        context, ops, target = sampler.batch(batch_size)
        z = encoder(context)
        with torch.no_grad():
            z_target = target_encoder(target)
        variance, covariance = vicreg(z)
        loss = 25 * F.mse_loss(rotation(z, ops), z_target) + 25 * variance + covariance
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            torch._foreach_mul_(target_params, ema)
            torch._foreach_add_(target_params, online_params, alpha=1 - ema)
        step += 1
        clock += time.perf_counter() - start
        if clock >= pending[0]:
            pending.pop(0)
            zero_shot, seen = evaluate(
                encoder, target_encoder, rotation, train_images, train_labels, test_images, test_labels
            )
            perturbed = {
                name: evaluate(encoder, target_encoder, rotation, train_images, train_labels, images, test_labels)[0]
                for name, images in (perturbed_test_images or {}).items()
            }
            target_encoder.train()
            rows.append((clock, step, zero_shot, seen, perturbed))
    return rows


def load_splits(data):
    from hf_jepa.data import MnistSplits

    splits = MnistSplits(data)
    return splits.train_images, splits.train_labels, splits.test_images, splits.test_labels


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = Path(__file__).resolve().parents[2] / "shared" / "data" / "mnist"
    parser.add_argument("--data", default=str(default) if default.exists() else "embedded")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    checkpoints = [args.seconds * f for f in (0.25, 0.5, 0.75, 1.0)]
    for seconds, step, zero_shot, seen, _ in train(*load_splits(args.data), checkpoints):
        print(f"{seconds:7.1f} s  step {step:5d}  zero-shot {100 * zero_shot:6.2f}%  seen {100 * seen:6.2f}%")


if __name__ == "__main__":
    main()
