"""Reproduction runs of the paper's claims on real MNIST.

The slow test (excluded from the default suite; `make test-slow`) trains the BRo-JEPA MFR row of `hf-jepa reproduce
bro-jepa` with its default settings and checks the issue's target: >= 99.0% strict zero-shot mean over ops +-2..+-9,
and the same for rollout. The default-suite test is a short run that must already generalise far above chance; it runs on
the embedded digits when the real MNIST is absent (a fresh clone), with thresholds measured on that data.
"""

import os

import pytest
import torch
from conftest import _skip_reason, mnist_dir

from hf_jepa.data import MnistSplits
from hf_jepa.modeling.bro_jepa import BroJepaConfig
from hf_jepa.recipes.bro_jepa import TRAINING_DEFAULTS, BroJepaDataArguments, BroJepaRecipe
from hf_jepa.trainers import JepaTrainer, TrainingArguments

needs_mnist = pytest.mark.skipif(mnist_dir() is None, reason=_skip_reason())


def _train(tmp_path, max_steps, splits=None, **config_overrides):
    # Every core unless OMP_NUM_THREADS says otherwise (make test's two workers: one thread each); the thread count is
    # put back after, so the later tests of this process keep theirs.
    threads = torch.get_num_threads()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1))
    try:
        splits = splits or MnistSplits(str(mnist_dir()))
        config = BroJepaConfig.cpu_fast(**config_overrides)
        recipe = BroJepaRecipe(config, BroJepaDataArguments(plot=False), splits=splits)
        settings = {**TRAINING_DEFAULTS, "max_steps": max_steps}
        args = TrainingArguments(output_dir=str(tmp_path), save_model=False, disable_progress_bar=True, **settings)
        return JepaTrainer(recipe, args).train().metrics
    finally:
        torch.set_num_threads(threads)


@needs_mnist
@pytest.mark.slow
def test_mfr_reaches_99_percent_zero_shot_on_mnist(tmp_path):
    metrics = _train(tmp_path, TRAINING_DEFAULTS["max_steps"], rotation_frequencies="multi")
    assert metrics["zero_shot_accuracy"] >= 0.99, metrics
    assert metrics["rollout_accuracy"] >= 0.99, metrics
    assert min(metrics["accuracy_per_operation"].values()) >= 0.985, metrics


# Thresholds of the short run per data source: (seen, zero-shot mean, worst unseen op). Measured with seed 0 (cpu_fast
# with stride-2 convs and lr 4e-3): real MNIST 98.5% seen, 98.2% zero-shot mean, worst unseen op 97.8%; embedded digits
# (359 test images) 98.6% seen, 98.4% zero-shot mean, worst unseen op 97.2%.
SHORT_RUN_THRESHOLDS = {True: (0.97, 0.95, 0.93), False: (0.95, 0.95, 0.92)}


def test_short_mfr_run_generalises_zero_shot(digits_splits, tmp_path):
    """300 steps (~25 s on one busy core on real MNIST) on ops +-1 only: every unseen op is predicted zero-shot, on the
    real MNIST when present, else on the embedded digits (the default 600-step MNIST run reaches 99.0-99.1%)."""
    metrics = _train(tmp_path, 300, splits=digits_splits.splits, rotation_frequencies="multi")
    seen, zero_shot, worst = SHORT_RUN_THRESHOLDS[digits_splits.real]
    assert metrics["seen_accuracy"] >= seen, (digits_splits.name, metrics)
    assert metrics["zero_shot_accuracy"] >= zero_shot, (digits_splits.name, metrics)
    unseen = {k: v for k, v in metrics["accuracy_per_operation"].items() if abs(k) > 1}
    assert min(unseen.values()) >= worst, (digits_splits.name, unseen)
