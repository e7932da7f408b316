"""The robustness figures: test digits moved by 2 px and turned by +-15 degrees (hf_jepa.data.perturb_images), the
zero-shot accuracy on them (hf_jepa.metrics.zero_shot_under_perturbations), in a trained folder's eval results and
card."""

import math

import pytest
import torch
from torch import nn

from hf_jepa.data import PERTURBATIONS, perturb_images
from hf_jepa.data.modular_arithmetic import random_shift, rotate_images, shift_images
from hf_jepa.metrics import zero_shot_under_perturbations
from hf_jepa.modeling.bro_jepa import BroJepaConfig, BroJepaModel


def test_shift_images_hand_values():
    image = torch.arange(1, 10, dtype=torch.uint8).view(1, 3, 3)
    moved = shift_images(image.expand(2, 3, 3), torch.tensor([1, 0]), torch.tensor([0, -2]))
    assert moved[0].tolist() == [[0, 0, 0], [1, 2, 3], [4, 5, 6]]  # one row down
    assert moved[1].tolist() == [[3, 0, 0], [6, 0, 0], [9, 0, 0]]  # two columns left


def test_random_shift_draws_are_those_of_shift_images():
    images = torch.randint(0, 256, (16, 8, 8), dtype=torch.uint8)
    moved = random_shift(images, 2, torch.Generator().manual_seed(5))
    offsets = torch.randint(0, 5, (2, 16), generator=torch.Generator().manual_seed(5))
    assert torch.equal(moved, shift_images(images, 2 - offsets[0], 2 - offsets[1]))


def _dot_images(count: int, row: int, col: int) -> torch.Tensor:
    images = torch.zeros(count, 28, 28, dtype=torch.uint8)
    images[:, row, col] = 255
    return images


def test_shifted_2px_moves_every_image_by_exactly_2_px_in_one_of_8_directions():
    moved = perturb_images(_dot_images(400, 14, 14), "shifted_2px", seed=0)
    positions = [tuple(int(v) for v in image.nonzero()[0]) for image in moved]
    offsets = {(r - 14, c - 14) for r, c in positions}
    assert offsets == {(r, c) for r in (-2, 0, 2) for c in (-2, 0, 2) if (r, c) != (0, 0)}
    assert torch.equal(moved, perturb_images(_dot_images(400, 14, 14), "shifted_2px", seed=0))  # deterministic
    assert not torch.equal(moved, perturb_images(_dot_images(400, 14, 14), "shifted_2px", seed=1))


def test_rotated_15deg_turns_about_the_centre_by_plus_or_minus_15_degrees():
    # A dot right of the image centre (13.5, 13.5 in pixel-centre coordinates) turns counter-clockwise as shown:
    # a quarter turn puts it above the centre.
    quarter = rotate_images(_dot_images(1, 13, 23), torch.tensor([90.0]))
    row, col = (int(v) for v in quarter[0].nonzero()[0])
    assert col in (13, 14) and row < 8
    turned = perturb_images(_dot_images(200, 13, 23), "rotated_15deg", seed=0).float()
    grid_r, grid_c = torch.meshgrid(torch.arange(28.0), torch.arange(28.0), indexing="ij")
    mass = turned.sum((1, 2))
    rows, cols = (turned * grid_r).sum((1, 2)) / mass, (turned * grid_c).sum((1, 2)) / mass
    angles = torch.rad2deg(torch.atan2(13.5 - rows, cols - 13.5))  # counter-clockwise from "right", as displayed
    turns = angles - math.degrees(math.atan2(0.5, 9.5))  # the dot starts 0.5 px above the centre's row
    assert ((turns - 15).abs() < 1).any() and ((turns + 15).abs() < 1).any()
    assert torch.minimum((turns - 15).abs(), (turns + 15).abs()).max() < 1
    with pytest.raises(ValueError, match="perturbation must be one of"):
        perturb_images(turned.byte(), "blurred")


class _PixelClassEncoder(nn.Module):
    """A hand-made encoder: reads the class `c` from one pixel and maps it to the 10-gon point `c`."""

    def __init__(self, row: int, col: int):
        super().__init__()
        self.row, self.col = row, col

    def forward(self, pixel_values):
        angles = pixel_values[:, 0, self.row, self.col].round() * (2 * math.pi / 10)
        return torch.stack((angles.cos(), angles.sin()), dim=-1)


def _model_reading(row: int, col: int) -> BroJepaModel:
    model = BroJepaModel(BroJepaConfig.tiny(latent_dim=2, rotation_frequencies="single"))
    model.context_encoder = _PixelClassEncoder(row, col)
    with torch.no_grad():
        angles = torch.arange(10).float() * (2 * math.pi / 10)
        model.class_prototypes.copy_(torch.stack((angles.cos(), angles.sin()), dim=-1))
        model.predictor.angles.fill_(2 * math.pi / 10)
    return model


def test_zero_shot_under_perturbations_scores_the_perturbed_images():
    labels = torch.arange(40) % 10
    images = labels.to(torch.uint8).view(40, 1, 1).expand(40, 28, 28).clone()  # every pixel holds the class
    to_pixels = lambda x: x.float().unsqueeze(1)  # noqa: E731 - the hand-made encoder reads raw class values
    # The centre pixel keeps its value under both perturbations: a perfect model stays perfect.
    centre = zero_shot_under_perturbations(_model_reading(14, 14), images, labels, to_pixels)
    assert centre == {f"zero_shot_accuracy_{name}": 1.0 for name in PERTURBATIONS}
    # The top-left pixel becomes padding (class 0) where an image moves down or right: those images of classes
    # 1..9 are read as 0 and every op on them is wrong.
    corner = zero_shot_under_perturbations(_model_reading(0, 0), images, labels, to_pixels)
    moved = perturb_images(images, "shifted_2px")
    right = ((moved[:, 0, 0] == labels) | (labels == 0)).float().mean().item()
    assert 0.0 < right < 1.0
    assert corner["zero_shot_accuracy_shifted_2px"] == pytest.approx(right)


def test_trained_folder_reports_the_robustness_figures(embedded_splits, tmp_path):
    import json

    from hf_jepa.recipes.bro_jepa import BroJepaDataArguments, BroJepaRecipe
    from hf_jepa.testing.harness import train_quickly

    recipe = BroJepaRecipe(BroJepaConfig.tiny(), BroJepaDataArguments(plot=False), splits=embedded_splits)
    train_quickly(recipe, tmp_path, max_steps=2)
    results = json.loads((tmp_path / "eval_results.json").read_text())
    for name in PERTURBATIONS:
        assert 0.0 <= results[f"zero_shot_accuracy_{name}"] <= 1.0
    card = (tmp_path / "README.md").read_text()
    assert "Zero-shot accuracy, test digits moved by 2 px" in card
    assert "Zero-shot accuracy, test digits turned by ±15°" in card
