"""I-JEPA's collapse on MNIST and its cause: the trunc-normal(0.02) init starts a small encoder position-only, and a
short run from it ends with lower rank and higher pooled cosine than the same run from the small presets' init
(PyTorch's fan-in default); every evaluation reports the untrained encoder's probe beside the trained one's.

Why (issue 16, research/i_jepa/health/README.md): with I-JEPA's trunc-normal std 0.02 (made for ViT-H's width 1280) a 128-wide ViT
with 4 x 4 patches starts as a position-only map, and pre-training never recovers content: pooled cosine -> 1.000,
loss -> 1e-4, a linear probe below the untrained encoder's. Xavier-uniform (MAE's) avoids that collapse but trains to
easy targets with falling rank; the fan-in scale (`pytorch_default`) trains like the plain-PyTorch reference."""

import pytest
import torch

from hf_jepa.metrics.collapse import cosine_similarity_stats, effective_rank
from hf_jepa.modeling.i_jepa import IJepaConfig, IJepaModel
from hf_jepa.recipes.i_jepa import IJepaDataArguments, IJepaRecipe
from hf_jepa.trainers import JepaTrainer, TrainingArguments


def _pixels(images: torch.Tensor) -> torch.Tensor:
    return (images.float().unsqueeze(1) / 255.0 - 0.1307) / 0.3081


@torch.no_grad()
def _pooled_stats(model: IJepaModel, images: torch.Tensor) -> tuple[float, float]:
    embeddings = model.eval().embed(_pixels(images)).float()
    return effective_rank(embeddings), cosine_similarity_stats(embeddings)["mean"]


def test_small_presets_default_to_fan_in_init_and_the_full_preset_to_i_jepa_init():
    assert IJepaConfig.cpu_fast().init_scheme == IJepaConfig.tiny().init_scheme == "pytorch_default"
    assert IJepaConfig.full().init_scheme == IJepaConfig().init_scheme == "trunc_normal"
    with pytest.raises(ValueError, match="init_scheme"):
        IJepaConfig.tiny(init_scheme="kaiming")


def test_trunc_normal_init_starts_the_small_encoder_position_only(embedded_splits):
    """The untrained cpu_fast target encoder: the preset's fan-in init keeps the images apart, trunc-normal(0.02)
    nearly does not. Measured (seed 0, 256 embedded digits): rank 17.8 vs 7.6, pooled cosine 0.99806 vs 0.99987."""
    images = embedded_splits.test_images[:256]
    torch.manual_seed(0)
    default = _pooled_stats(IJepaModel(IJepaConfig.cpu_fast()), images)
    torch.manual_seed(0)
    trunc = _pooled_stats(IJepaModel(IJepaConfig.cpu_fast(init_scheme="trunc_normal")), images)
    assert default[0] > 1.5 * trunc[0], (default, trunc)
    assert 1.0 - default[1] > 2.0 * (1.0 - trunc[1]), (default, trunc)


def _train_short(splits, output_dir, init_scheme: str) -> list[dict]:
    """The recipe as `hf-jepa train i-jepa` runs it (fp32), on the cpu_fast geometry (4 x 4 patches, a 7 x 7 grid) at the
    tiny preset's width, for STEPS steps; the diagnostics records (pooled validation embeddings every LOG_EVERY)."""
    recipe = IJepaRecipe(
        IJepaConfig.tiny(patch_size=4, init_scheme=init_scheme),
        IJepaDataArguments(data="embedded", diagnostics_images=256, probe_images=200, plot=False),
        seed=0,
        splits=splits,
    )
    args = TrainingArguments(
        output_dir=str(output_dir),
        max_steps=STEPS,
        per_device_batch_size=64,
        learning_rate=1e-3,
        weight_decay=0.04,
        warmup_steps=STEPS // 20,
        logging_steps=LOG_EVERY,
        mixed_precision="no",
        save_model=False,
        disable_progress_bar=True,
    )
    JepaTrainer(recipe, args).train()
    return recipe.records


def test_short_run_keeps_content_that_the_trunc_normal_init_loses(embedded_splits, tmp_path):
    """Measured (seed 0, embedded digits, 250 steps): the preset's fan-in init ends at effective rank 10.5, pooled
    cosine 0.99919; trunc-normal(0.02) at rank 6.83, cosine 0.99989 (1 - cosine 7.4x smaller). Thresholds inside
    those ratios. Too short to see the recovery itself (on real MNIST the pooled rank rises and cosine falls only from
    step ~200-300: research/i_jepa/health/README.md)."""
    default = _train_short(embedded_splits, tmp_path / "default", "pytorch_default")[-1]
    trunc = _train_short(embedded_splits, tmp_path / "trunc", "trunc_normal")[-1]
    assert default["val/effective_rank"] > 1.3 * trunc["val/effective_rank"], (default, trunc)
    assert 1.0 - default["val/cosine_mean"] > 3.0 * (1.0 - trunc["val/cosine_mean"]), (default, trunc)


STEPS, LOG_EVERY = 250, 125


class _RecordingRecipe(IJepaRecipe):
    """The recipe, keeping a copy of the model the trainer starts from."""

    def build_model(self):
        model = super().build_model()
        self.initial_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        return model


def test_evaluation_reports_the_untrained_encoders_probe_from_the_runs_own_initialisation(embedded_splits, tmp_path):
    """Every run reports `probe_accuracy_untrained` beside `probe_accuracy`: the same probe on the initialisation the
    trainer started from (bit for bit), built without moving the global random state."""
    recipe = _RecordingRecipe(
        IJepaConfig.tiny(),
        IJepaDataArguments(data="embedded", diagnostics_images=64, probe_images=100, plot=False),
        seed=3,
        splits=embedded_splits,
    )
    args = TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=3,
        per_device_batch_size=8,
        seed=3,
        save_model=False,
        disable_progress_bar=True,
        mixed_precision="no",
    )
    metrics = JepaTrainer(recipe, args).train().metrics
    assert 0.0 < metrics["probe_accuracy_untrained"] <= 1.0 and 0.0 < metrics["probe_accuracy"] <= 1.0
    state = torch.random.get_rng_state()
    untrained = recipe.untrained_model().state_dict()
    assert torch.equal(torch.random.get_rng_state(), state)
    assert untrained.keys() == recipe.initial_state.keys()
    assert all(torch.equal(untrained[k], recipe.initial_state[k]) for k in untrained)
    assert metrics["probe_accuracy_untrained"] == recipe._probe(recipe.untrained_model(), 100)


@pytest.mark.slow
def test_default_recipe_recovers_from_the_early_transient_on_real_mnist(mnist_path, tmp_path):
    """The health check of issue 16 on the real data: `hf-jepa train i-jepa`'s recipe and cpu_fast preset (bf16, batch
    64, lr 1e-3), 800 steps (its schedules follow the run length). After the early near-collapse (pooled validation
    cosine ~0.99 at step 100-200) the effective rank rises and the cosine falls. Measured in the 3-seed reproduction
    run (seed 0, 1,600 steps): rank 21.0 / 20.7 / 32.1 / 39.4 and cosine 0.993 / 0.992 / 0.970 / 0.867 at steps
    100 / 200 / 400 / 800; with 500 steps in all the rise had only begun (rank 21.2 -> 25.8). This test's run
    measured rank 21.1 -> 35.5 and cosine 0.9930 -> 0.9541 (steps 100 -> 800). The linear probe is not asserted: at
    800 steps it was still below the untrained encoder's (0.645 vs 0.683 on 1,000 images); it passes it by the end of
    the 1,600-step default (docs/results/t-jepa.md's 3-seed table). About 6-9 minutes on one thread: marked slow (`make test-slow`)."""
    from hf_jepa.data import MnistSplits
    from hf_jepa.recipes.i_jepa import TRAINING_DEFAULTS

    recipe = IJepaRecipe(
        IJepaConfig.cpu_fast(),
        IJepaDataArguments(data=str(mnist_path), diagnostics_images=256, probe_images=1000, plot=False),
        seed=0,
        splits=MnistSplits(str(mnist_path)),
    )
    settings = {**TRAINING_DEFAULTS, "max_steps": 800, "logging_steps": 100}
    args = TrainingArguments(output_dir=str(tmp_path), save_model=False, disable_progress_bar=True, **settings)
    JepaTrainer(recipe, args).train()
    first, last = recipe.records[0], recipe.records[-1]
    assert last["val/effective_rank"] > 1.3 * first["val/effective_rank"], (first, last)
    assert 1.0 - last["val/cosine_mean"] > 3.0 * (1.0 - first["val/cosine_mean"]), (first, last)
