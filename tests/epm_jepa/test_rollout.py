"""EPM-JEPA's k-step rollout readout and rollout loss (research/epm_jepa/rollout/README.md), by hand-checkable
properties on the tiny preset: a 1-step rollout is the one-step prediction bit for bit, an identity predictor scores
the copy-last baseline at every lag, the 1-step rollout loss is the one-step loss, bad arguments name themselves, and
the quick rollout protocol runs end to end and writes its tables."""

import json

import pytest
import torch
import torch.nn.functional as F

from hf_jepa import EpmJepaConfig, EpmJepaModel
from hf_jepa.data import MovingMnist
from hf_jepa.data.moving_mnist import ROLLOUT_EVAL_GRAVITIES, ROLLOUT_TRAIN_GRAVITIES, check_gravity_list
from hf_jepa.metrics.epm_rollout import check_readout_steps, episodic_rollout_errors, rollout_errors
from hf_jepa.metrics.world_model import evaluate_world_model
from hf_jepa.recipes.epm_jepa import EpmJepaDataArguments, EpmJepaRecipe
from hf_jepa.reproductions.epm_jepa import reproduce_epm_jepa
from hf_jepa.reproductions.epm_jepa_rollout import rollout_outcome

FRAMES = 9


@pytest.fixture(scope="module")
def sequences(embedded_splits):
    """Query and support sequences of 9 frames at g = 1.0 (tiny canvas)."""
    world = MovingMnist(
        images=embedded_splits.test_images,
        sequence_length=FRAMES,
        canvas_size=EpmJepaConfig.tiny().image_size,
        seed=3,
    )
    return {
        "query": world.sample_batch(5, step=0, gravity=1.0)["pixel_values"],
        "support": world.sample_batch(3, step=1, gravity=1.0)["pixel_values"],
    }


def _model(track: str, **overrides) -> EpmJepaModel:
    torch.manual_seed(0)
    model = EpmJepaModel(EpmJepaConfig.tiny(track=track, **overrides)).eval()
    if track == "epm":  # a d that depends on e_agg, so the memory moves the prediction (zero init: d = 0)
        with torch.no_grad():
            model.hypernetwork.output.weight.normal_(std=0.5)
    return model


@pytest.mark.parametrize("track", ["vanilla", "epm"])
def test_one_step_rollout_is_the_one_step_prediction_bit_for_bit(track, sequences):
    model = _model(track)
    if model.experience_buffer is not None:
        model.warm_experience(sequences["support"])
    with torch.no_grad():
        output = model(sequences["query"], update_experience=False)
        windows = model.context_windows(output.context_latents)
        rolled = model.rollout(windows.flatten(0, 1), 1).unflatten(0, tuple(windows.shape[:2]))
    assert torch.equal(rolled[:, :, 0], output.predicted_latents)
    # So D_1 of the readout is the one-step D of evaluate_world_model exactly.
    one_step = evaluate_world_model(model, sequences["query"])
    readout = rollout_errors(model, sequences["query"], (1, 4))
    assert readout[1]["normalized_error"] == one_step["normalized_error"]
    assert readout[1]["copy_last_error"] == one_step["copy_last_error"]
    # A longer rollout feeds its predictions back: step 2 differs from a one-step prediction of the true window.
    assert readout[4]["num_predictions"] == 5 * (FRAMES - 3 - 4 + 1)


def test_identity_predictor_scores_the_copy_last_baseline_at_every_lag(sequences):
    model = _model("vanilla")
    with torch.no_grad():  # the predictor is z_t + MLP(...): a zero last layer makes it the identity
        model.predictor.layers[-1].weight.zero_()
        model.predictor.layers[-1].bias.zero_()
    # A fresh model's EMA target is a copy of the context encoder, so copying z_t is what the identity rollout does.
    readout = rollout_errors(model, sequences["query"], (1, 3, 6))
    for k, row in readout.items():
        assert row["normalized_error"] == pytest.approx(row["copy_last_error"], rel=1e-6), k
    assert readout[6]["copy_last_error"] > readout[1]["copy_last_error"]  # digits move farther over 6 frames


def test_rollout_loss_of_one_step_is_the_one_step_loss_and_k_steps_average_the_steps(sequences):
    model = _model("vanilla")
    output = model(sequences["query"], update_experience=False)
    targets = output.target_latents
    assert torch.equal(model.rollout_loss(output.context_latents, targets, 1), output.prediction_loss)

    three = EpmJepaModel(EpmJepaConfig.tiny(track="vanilla", rollout_loss_steps=3)).eval()
    three.load_state_dict(model.state_dict())
    rolled_output = three(sequences["query"], update_experience=False)
    assert torch.equal(rolled_output.predicted_latents, output.predicted_latents)  # outputs stay one-step
    # By hand: rollouts from the windows with 3 frames after them, each step's error, averaged over the steps.
    windows = three.context_windows(rolled_output.context_latents)[:, : FRAMES - 3 - 3 + 1]
    rolled = three.rollout(windows.flatten(0, 1), 3).unflatten(0, tuple(windows.shape[:2]))
    per_step = [F.mse_loss(rolled[:, :, j], targets[:, j : j + windows.shape[1]]) for j in range(3)]
    assert rolled_output.prediction_loss.item() == pytest.approx(torch.stack(per_step).mean().item(), rel=1e-6)
    assert rolled_output.prediction_loss.item() != pytest.approx(output.prediction_loss.item(), rel=1e-3)
    rolled_output.loss.backward()  # the loss trains through the fed-back predictions
    assert three.predictor.layers[0].weight.grad.abs().sum() > 0


def test_memory_moves_the_rollout_and_the_buffer_is_restored(sequences):
    model = _model("epm")
    entries = model.experience_buffer.entries.clone()
    with_support = episodic_rollout_errors(model, sequences["query"], sequences["support"], (1, 5))
    empty = episodic_rollout_errors(model, sequences["query"], None, (1, 5))
    assert with_support[5] != empty[5]
    assert torch.equal(model.experience_buffer.entries, entries)


def test_bad_arguments_name_themselves(sequences, embedded_splits):
    model = _model("vanilla")
    with pytest.raises(ValueError, match="steps goes up to 7.*needs at least 10"):
        rollout_errors(model, sequences["query"], (1, 7))
    with pytest.raises(ValueError, match="readout_steps must be a non-empty list"):
        check_readout_steps((), 16, 3)
    with pytest.raises(ValueError, match="readout_steps must be a non-empty list"):
        check_readout_steps((0, 5), 16, 3)
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        model.rollout(torch.zeros(2, 3, model.config.latent_dim), 0)
    with pytest.raises(ValueError, match="rollout_loss_steps"):
        EpmJepaConfig.tiny(rollout_loss_steps=0)
    long_loss = EpmJepaModel(EpmJepaConfig.tiny(track="vanilla", rollout_loss_steps=8))
    with pytest.raises(ValueError, match=r"rollout_loss_steps=8"):
        long_loss(sequences["query"])  # 9 frames < 3 + 8
    with pytest.raises(ValueError, match="sequence_length .* rollout_loss_steps"):
        EpmJepaRecipe(
            EpmJepaConfig.tiny(rollout_loss_steps=10), EpmJepaDataArguments(data="embedded"), splits=embedded_splits
        )
    with pytest.raises(ValueError, match="train_gravities must be a non-empty list"):
        check_gravity_list("train_gravities", [])
    with pytest.raises(ValueError, match="episode_gravities must hold gravities >= 0"):
        EpmJepaDataArguments(episode_gravities=[0.5, -1.0])
    common = dict(data="embedded", quick=True, seeds=(0,), protocol="rollout")
    with pytest.raises(ValueError, match="eval_gravities must be a non-empty list"):
        reproduce_epm_jepa(**common, eval_gravities=())
    with pytest.raises(ValueError, match="train_gravities must hold gravities >= 0"):
        reproduce_epm_jepa(**common, train_gravities=(0.0, -0.5))
    with pytest.raises(ValueError, match="readout_steps goes up to 20"):
        reproduce_epm_jepa(**common, readout_steps=(1, 20))
    with pytest.raises(ValueError, match="specialist_gravity must be one of eval_gravities"):
        reproduce_epm_jepa(**common, specialist_gravity=0.1)
    with pytest.raises(ValueError, match="at least one value not in train_gravities"):
        reproduce_epm_jepa(**common, eval_gravities=(0.5, 1.0))


def test_wide_gravities_keep_digits_on_the_canvas(embedded_splits):
    """At the rollout protocol's largest gravity a digit stays within [0, L] and moves well under L per frame (so
    the reflection, not the clamp, handles every bounce), and it does bounce within a 16-frame sequence."""
    world = MovingMnist(images=embedded_splits.test_images, sequence_length=16, seed=1)
    positions = world.sample_batch(64, gravity=max(ROLLOUT_EVAL_GRAVITIES))["positions"]
    assert positions.min() >= 0 and positions.max() <= world.limit
    step = (positions[:, 1:] - positions[:, :-1]).abs().max()
    assert step < 0.5 * world.limit
    falling = positions[:, 1:, :, 1] - positions[:, :-1, :, 1]
    assert bool(((falling[:, :-1] > 0) & (falling[:, 1:] < 0)).any())  # a floor bounce reverses the fall
    assert min(ROLLOUT_TRAIN_GRAVITIES) == 0.0


def test_rollout_outcome_classes_by_hand():
    assert rollout_outcome([1.0, 2.0, 1.5], 10).startswith("memory pays at k=10")  # mean 1.5 > std 0.5
    assert rollout_outcome([0.3, -0.1, 0.4], 10).startswith("memory not shown")  # mean 0.2 < std 0.26
    assert rollout_outcome([-2.0, -3.0], 10).startswith("memory not shown")
    assert rollout_outcome([5.0], 10).startswith("not measured")


def test_quick_rollout_protocol_writes_the_new_tables(embedded_splits, tmp_path):
    result = reproduce_epm_jepa(data="embedded", output_dir=str(tmp_path), quick=True, seeds=(0, 1), protocol="rollout")
    summary = result.summary
    rollout = summary["rollout"]
    assert rollout["readout_steps"] == [1, 5, 10] and set(rollout["tracks"]) == {"vanilla", "ei", "epm"}
    assert set(rollout["outcome"]) == {"ei", "epm"} and all(v.startswith("memory") for v in rollout["outcome"].values())
    assert set(rollout["comparisons"]) == {"C vs B", "C vs A", "B vs A"}
    assert rollout["specialist"]["gravity"] == 1.5 and set(rollout["specialist"]["per_k"]) == {"1", "5", "10"}
    # D_1 with a same-g buffer is the one-step D of the episodic buffer swap, up to bf16: the swap reads the trained
    # model through the trainer's autocast wrapper of `forward`, the rollout runs in the weights' fp32.
    for track in ("vanilla", "epm"):
        assert rollout["tracks"][track]["per_k"]["1"]["same"][0] == pytest.approx(
            summary["tracks"][track]["swap_same"][0], rel=2e-2
        )
    assert summary["rollout_loss_steps"] == 10 and summary["experience_sequence_length"] == 13
    assert summary["unseen_gravities"] == [0.75, 2.5]
    table = (tmp_path / "results.md").read_text()
    assert "**(a) Buffer swap**" in table and "**(e) Rollout readout D_k**" in table
    assert "**(f) Adaptation without gradient steps on D_k**" in table and "**(g) What knowing g is worth" in table
    saved = json.loads((tmp_path / "results.json").read_text())
    assert "rollout" in saved["per_seed"][0]["tracks"]["epm"] and "specialist" in saved["per_seed"][1]
    config = json.loads((tmp_path / "seed0" / "epm" / "config.json").read_text())
    assert config["rollout_loss_steps"] == 10
    specialist = json.loads((tmp_path / "seed0" / "vanilla-g1.5" / "data_args.json").read_text())
    assert specialist["episode_gravities"] == [1.5] and specialist["sequence_length"] == 13


def test_quick_episodic_protocol_keeps_its_tables_without_the_rollout(embedded_splits, tmp_path):
    summary = reproduce_epm_jepa(
        data="embedded", output_dir=str(tmp_path), quick=True, seeds=(0,), protocol="episodic"
    ).summary
    assert (
        "rollout" not in summary and summary["rollout_loss_steps"] == 1 and summary["experience_sequence_length"] == 8
    )
    assert summary["unseen_gravities"] == [0.3, 0.6] and summary["freeze"]
    table = (tmp_path / "results.md").read_text()
    assert table.startswith("**(a) Buffer swap**") and "Rollout readout" not in table
    assert json.loads((tmp_path / "seed0" / "epm" / "config.json").read_text())["rollout_loss_steps"] == 1
