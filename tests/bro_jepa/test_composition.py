"""The composition-consistency formulations of `BroJepaModel.composition_loss` (issue 16 point 4), each checked on a
predictor whose composition behaviour is known by hand: an exactly additive one (`P(z, k) = z + k c`), a constant
shift (`P(z, k) = z + c`, which ignores `k`) and the block rotation."""

import math

import pytest
import torch

from hf_jepa.modeling.bro_jepa import BroJepaConfig, BroJepaModel

LATENT_DIM = 16


def tiny_model(**overrides) -> BroJepaModel:
    torch.manual_seed(0)
    return BroJepaModel(BroJepaConfig.tiny(**overrides)).double()


def shift_vector() -> torch.Tensor:
    """The per-step shift `c`; `c[0] = 0` keeps latents with `z[0] = 0` in that subspace."""
    c = torch.linspace(-1.0, 1.0, LATENT_DIM, dtype=torch.float64)
    c[0] = 0.0
    return c


@torch.no_grad()
def make_exactly_additive(model: BroJepaModel) -> None:
    """Residual additive predictor with `P(z, k) = z + k c` for latents with `z[0] = 0`: `v = e_0`, two hidden units
    read `+u_0` and `-u_0`, and `GELU(x) - GELU(-x) = x` exactly, so the MLP outputs `c u_0 = c (z_0 + k) = k c`."""
    predictor = model.predictor
    first, last = predictor.mlp[0], predictor.mlp[2]
    predictor.operation_direction.zero_()[0] = 1.0
    first.weight.zero_(), first.bias.zero_(), last.weight.zero_(), last.bias.zero_()
    first.weight[0, 0], first.weight[1, 0] = 1.0, -1.0
    last.weight[:, 0], last.weight[:, 1] = shift_vector(), -shift_vector()


@torch.no_grad()
def make_constant_shift(model: BroJepaModel) -> None:
    """Residual additive predictor with `P(z, k) = z + c` for every `k`: the MLP's hidden layer is `GELU(0) = 0`
    and its output is the bias `c`. It knows the sign of nothing and the magnitude of nothing."""
    predictor = model.predictor
    for layer in (predictor.mlp[0], predictor.mlp[2]):
        layer.weight.zero_(), layer.bias.zero_()
    predictor.mlp[2].bias.copy_(shift_vector())


def latents_in_subspace(batch=6, seed=3) -> torch.Tensor:
    latent = torch.randn(batch, LATENT_DIM, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    latent[:, 0] = 0.0
    return latent


OPS = torch.tensor([1, -1, 1, -1, 1, -1])
MEAN_C2 = shift_vector().pow(2).mean().item()


def test_additive_residual_flag_adds_the_input():
    plain, residual = tiny_model(predictor_type="additive_mlp"), tiny_model(predictor_type="additive_mlp")
    residual.config.additive_residual = residual.predictor.residual = True
    latent = latents_in_subspace()
    # Same weights (same seed): the residual form is the plain output plus z.
    assert torch.allclose(residual.predict(latent, OPS), plain.predict(latent, OPS) + latent)
    make_exactly_additive(residual)
    assert torch.allclose(residual.predict(latent, OPS), latent + OPS[:, None] * shift_vector(), atol=1e-12)
    assert BroJepaConfig.tiny(additive_residual=True).additive_residual is True


@pytest.mark.parametrize("mode", ["rollout", "rollout_stopgrad", "group"])
def test_composition_loss_is_zero_for_an_exactly_additive_predictor(mode):
    model = tiny_model(predictor_type="additive_mlp", additive_residual=True, composition_mode=mode)
    make_exactly_additive(model)
    torch.manual_seed(1)  # the group law draws its op pairs
    assert model.composition_loss(latents_in_subspace(), OPS).item() < 1e-12


@pytest.mark.parametrize("mode", ["rollout", "rollout_stopgrad", "group"])
def test_composition_loss_is_zero_for_a_rotation(mode):
    model = tiny_model(composition_mode=mode)
    torch.manual_seed(1)
    latent = torch.randn(32, LATENT_DIM, dtype=torch.float64)
    assert model.composition_loss(latent, torch.tensor([1, -1] * 16)).item() < 1e-12


@pytest.mark.parametrize(("max_n", "factor"), [(9, 25.5), (2, 1.0), (3, 2.5)])
@pytest.mark.parametrize("mode", ["rollout", "rollout_stopgrad"])
def test_rollout_loss_of_a_constant_shift(mode, max_n, factor):
    """`P(z, nk) - P^n(z, k) = (z + c) - (z + n c) = (1 - n) c`, so the loss is `mean_n (n - 1)^2 * mean(c^2)`:
    n = 2..9 gives (1 + 4 + ... + 64) / 8 = 204 / 8 = 25.5, n = 2 alone 1, n = 2..3 (1 + 4) / 2 = 2.5."""
    model = tiny_model(predictor_type="additive_mlp", additive_residual=True, composition_mode=mode)
    model.config.composition_max_n = max_n
    make_constant_shift(model)
    loss = model.composition_loss(latents_in_subspace(), OPS)
    assert loss.item() == pytest.approx(factor * MEAN_C2, rel=1e-6)  # the loss is computed in float32


@pytest.mark.parametrize(("mode", "gradient_factor"), [("rollout", 51.0), ("rollout_stopgrad", -9.0)])
def test_stop_gradient_leaves_only_the_direct_prediction_trainable(mode, gradient_factor):
    """d loss / d c for the constant shift, per dimension: both sides move, `(1/8) sum_n 2 (n - 1)^2 c / D = 51 c / D`
    (the loss only grows with c); the rollout detached, only `P(z, nk) = z + c` moves: `(1/8) sum_n 2 (1 - n) c / D =
    -9 c / D` (c is pulled towards the rollout, the +-1 chain is left alone)."""
    model = tiny_model(predictor_type="additive_mlp", additive_residual=True, composition_mode=mode)
    make_constant_shift(model)
    model.composition_loss(latents_in_subspace(), OPS).backward()
    expected = gradient_factor * shift_vector() / LATENT_DIM
    assert torch.allclose(model.predictor.mlp[2].bias.grad, expected, atol=1e-7)


def test_group_law_of_a_constant_shift_counts_the_inverse_pairs():
    """`P(P(z, a), b) = z + 2c` against `P(z, a + b) = z + c` (error `c`) or, when `b = -a`, against `z` (error
    `2c`); the inverse term always errs by `2c`. So the loss lies in `[1 + 4, 4 + 4] * mean(c^2)`, and with a batch
    large enough to draw both kinds of pair strictly inside it."""
    model = tiny_model(predictor_type="additive_mlp", additive_residual=True, composition_mode="group")
    make_constant_shift(model)
    torch.manual_seed(0)
    latent = torch.zeros(4000, LATENT_DIM, dtype=torch.float64)
    ratio = model.composition_loss(latent, torch.ones(4000, dtype=torch.long)).item() / MEAN_C2
    # P(b = -a) = E_a[1 / (number of admissible b)], between 1/17 and 1/9; ratio = 5 + 3 P(b = -a).
    assert 5 + 3 / 17 - 0.05 < ratio < 5 + 3 / 9 + 0.05


def rotation_class_latents(model: BroJepaModel, classes: torch.Tensor) -> torch.Tensor:
    """`z_c = R(c theta) e`, so that the block rotation maps class `x` by `k` exactly onto class `(x + k) mod 10`."""
    base = torch.ones(1, LATENT_DIM, dtype=torch.float64).expand(len(classes), -1)
    return model.predictor(base, classes)


def test_labelled_target_is_zero_when_the_composed_op_lands_on_its_class_mean():
    model = tiny_model(composition_mode="labelled_target")
    context = torch.arange(20) % 10
    ops = torch.tensor([1] * 10 + [-1] * 10)  # every class once with +1, once with -1
    labels = (context + ops) % 10
    latent, target = rotation_class_latents(model, context), rotation_class_latents(model, labels)
    assert model.composition_loss(latent, ops, target, labels).item() < 1e-12
    # Targets of class 0 moved by d: every composed prediction that should land on class 0 now errs by mean(d^2) = 1.
    # Per n = 2..9, exactly 2 of the 20 samples compose to class 0 (x + n k = 0 mod 10 for one x per sign of k).
    moved = target.clone()
    moved[labels == 0] += 1.0
    loss = model.composition_loss(latent, ops, moved, labels).item()
    assert loss == pytest.approx(2 / 20, rel=1e-6)  # the loss is computed in float32


def test_labelled_target_skips_classes_missing_from_the_batch_and_needs_labels():
    model = tiny_model(composition_mode="labelled_target")
    context, ops = torch.zeros(4, dtype=torch.long), torch.ones(4, dtype=torch.long)
    labels = (context + ops) % 10  # only class 1 among the targets: no composed class 2..9 is present
    latent = rotation_class_latents(model, context)
    target = torch.randn(4, LATENT_DIM, dtype=torch.float64)
    assert model.composition_loss(latent, ops, target, labels).item() == 0.0
    with pytest.raises(ValueError, match="labelled_target.*labels"):
        model.composition_loss(latent, ops)


def test_forward_passes_targets_and_labels_to_the_labelled_mode():
    model = BroJepaModel(BroJepaConfig.tiny(composition_mode="labelled_target", composition_weight=2.0))
    images = torch.randn(12, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    ops = torch.tensor([1, -1] * 6)
    labels = torch.arange(12) % 10
    out = model(images, ops, target_pixel_values=images.flip(0), labels=labels)
    base = 25 * out.prediction_loss + 25 * out.variance_loss + out.covariance_loss
    assert out.composition_loss.item() > 0
    assert torch.allclose(out.loss, base + 2.0 * out.composition_loss)


def test_defaults_keep_the_earlier_loss_and_old_configs_load():
    config = BroJepaConfig.tiny()
    assert (config.composition_mode, config.composition_max_n, config.additive_residual) == ("rollout", 9, False)
    old = config.to_dict()
    keys = ("composition_mode", "composition_max_n", "composition_loss_type", "additive_input", "additive_residual")
    for key in keys:
        old.pop(key)
    assert BroJepaConfig.from_dict(old).composition_max_n == 9
    assert BroJepaConfig.tiny(modulus=7).composition_max_n == 6
    assert math.isclose(BroJepaConfig.tiny(modulus=7).initial_angle, 2 * math.pi / 7)


def test_cosine_composition_distance_ignores_the_norm():
    """Constant shift `P(z, k) = z + c`: from `z = 0`, `P(z, nk) = c` and `P^n(z, k) = n c` are parallel, so the
    cosine form is 0 where the mean squared error is `25.5 mean(c^2)`; from `z` orthogonal to `c` with `|z| = |c|`,
    `cos(z + c, z + n c) = (1 + n) / (sqrt(2) sqrt(1 + n^2))`."""
    model = tiny_model(
        predictor_type="additive_mlp",
        additive_residual=True,
        composition_mode="rollout_stopgrad",
        composition_loss_type="cosine",
    )
    make_constant_shift(model)
    zero = torch.zeros(6, LATENT_DIM, dtype=torch.float64)
    assert model.composition_loss(zero, OPS).item() < 1e-6
    orthogonal = torch.zeros(6, LATENT_DIM, dtype=torch.float64)
    orthogonal[:, 0] = shift_vector().norm()  # c[0] = 0, so z = |c| e_0 is orthogonal to c and as long
    expected = sum(1 - (1 + n) / (math.sqrt(2) * math.sqrt(1 + n * n)) for n in range(2, 10)) / 8
    assert model.composition_loss(orthogonal, OPS).item() == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match="BroJepaConfig.composition_loss_type"):
        BroJepaConfig.tiny(composition_loss_type="smooth_l1")


def test_concatenated_op_embedding_is_read_exactly():
    """`MLP([z, k v])`: with the first layer reading only the op half (`v = e_0`, unit 0 reads `k`, unit 1 reads
    `-k`) and the output `c (h_0 - h_1)`, the predictor is `P(z, k) = k c` for every `z` (no residual), because
    `GELU(k) - GELU(-k) = k`; the summed form's first layer has half the inputs."""
    model = tiny_model(predictor_type="additive_mlp", additive_input="concat")
    summed = tiny_model(predictor_type="additive_mlp")
    assert model.predictor.mlp[0].in_features == 2 * summed.predictor.mlp[0].in_features == 2 * LATENT_DIM
    predictor = model.predictor
    with torch.no_grad():
        predictor.operation_direction.zero_()[0] = 1.0
        for layer in (predictor.mlp[0], predictor.mlp[2]):
            layer.weight.zero_(), layer.bias.zero_()
        predictor.mlp[0].weight[0, LATENT_DIM], predictor.mlp[0].weight[1, LATENT_DIM] = 1.0, -1.0
        predictor.mlp[2].weight[:, 0], predictor.mlp[2].weight[:, 1] = shift_vector(), -shift_vector()
    latent = torch.randn(6, LATENT_DIM, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    ops = torch.tensor([1, -1, 2, -5, 9, 3])
    assert torch.allclose(model.predict(latent, ops), ops[:, None] * shift_vector(), atol=1e-12)
    with pytest.raises(ValueError, match="BroJepaConfig.additive_input"):
        BroJepaConfig.tiny(additive_input="product")
