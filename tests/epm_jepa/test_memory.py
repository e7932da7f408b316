"""EPM-JEPA's episodic protocol and memory evaluations: one gravity per episode, the buffer reset and filled from the
current episode, buffer swaps that really swap, adaptation without gradient steps that changes no parameter, the
LoRA freeze, and the pre-registered outcome classes by hand."""

import pytest
import torch

from hf_jepa import EpmJepaConfig, EpmJepaModel
from hf_jepa.data import GravityEpisodes, MovingMnist
from hf_jepa.data.moving_mnist import EPISODIC_EVAL_GRAVITIES, EPISODIC_TRAIN_GRAVITIES
from hf_jepa.metrics.epm_memory import (
    adaptation_curve,
    buffer_swap_ablation,
    episodic_error,
    farthest_gravity,
    settling_bump,
    trajectory_summary,
)
from hf_jepa.recipes.epm_jepa import EpmJepaDataArguments, EpmJepaRecipe, build_episodic_eval
from hf_jepa.reproductions.epm_jepa_episodic import (
    adaptation_outcome,
    settling_outcome,
    swap_outcome,
    tradeoff_outcome,
)
from hf_jepa.testing.harness import train_quickly

SEQUENCE_LENGTH = 6


def _data_args(**overrides) -> EpmJepaDataArguments:
    values = dict(data="embedded", eval_sequences=8, sequence_length=SEQUENCE_LENGTH, eval_sequence_length=6)
    return EpmJepaDataArguments(**{**values, **overrides})


@pytest.fixture(scope="module")
def episodes(embedded_splits) -> dict:
    """Evaluation episodes of the tiny preset: 2 query and 3 support sequences per gravity."""
    return build_episodic_eval(embedded_splits, _data_args(episode_support=3), EpmJepaConfig.tiny().image_size)


@pytest.fixture(scope="module")
def trained(embedded_splits, tmp_path_factory):
    """A tiny vanilla base (3 steps on g = 0), and tracks A and C adapted from it for 4 episodic steps."""
    base_dir = tmp_path_factory.mktemp("base")
    recipe = EpmJepaRecipe(EpmJepaConfig.tiny(track="vanilla"), _data_args(), splits=embedded_splits)
    train_quickly(recipe, base_dir, max_steps=3, per_device_batch_size=4)
    models = {}
    for track in ("vanilla", "epm"):
        args = _data_args(stage="adapt", init_from=str(base_dir), protocol="episodic", episode_support=2, eval_every=0)
        recipe = EpmJepaRecipe(EpmJepaConfig.tiny(track=track), args, splits=embedded_splits)
        result = train_quickly(
            recipe, tmp_path_factory.mktemp(track), per_device_batch_size=4, learning_rate=3e-2, max_steps=4
        )
        models[track] = result.model.eval()
    return base_dir, models


# ------------------------------------------------------------------------------------------------ the data layer


def test_an_episode_has_one_gravity_and_a_support_shared_by_every_rank(embedded_splits):
    world = MovingMnist(images=embedded_splits.train_images, sequence_length=4, gravity=(0.0, 0.5), seed=3)
    sampler = GravityEpisodes(world, EPISODIC_TRAIN_GRAVITIES, support_size=2)
    drawn = [sampler.gravity_of(e) for e in range(40)]
    assert set(drawn) <= set(EPISODIC_TRAIN_GRAVITIES) and len(set(drawn)) >= 3
    episode = sampler.episode(3, episode=7, rank=0)
    gravity = float(episode["gravity"])
    assert gravity == drawn[7]
    # The query sequences all fall with the episode's gravity (the batch's per-sequence gravity column says so)...
    query = world.sample_batch(3, step=7, rank=0, gravity=gravity)
    assert torch.equal(query["gravity"], torch.full((3,), gravity))
    assert torch.equal(episode["pixel_values"], query["pixel_values"])
    # ...and so do the support sequences, the same on every rank, different from every rank's queries.
    other_rank = sampler.episode(3, episode=7, rank=1)
    assert torch.equal(episode["experience_pixel_values"], other_rank["experience_pixel_values"])
    assert not torch.equal(episode["pixel_values"], other_rank["pixel_values"])
    assert not torch.equal(episode["experience_pixel_values"][:2], episode["pixel_values"][:2])
    # The gravity override changes only the dynamics: g = 0 here is exactly the classic batch of the same step.
    classic = MovingMnist(images=embedded_splits.train_images, sequence_length=4, gravity=0.0, seed=3)
    assert torch.equal(
        world.sample_batch(2, step=1, gravity=0.0)["pixel_values"], classic.sample_batch(2, step=1)["pixel_values"]
    )


def test_episodes_refuse_bad_settings(embedded_splits):
    world = MovingMnist(images=embedded_splits.train_images, sequence_length=4)
    with pytest.raises(ValueError, match="support_size"):
        GravityEpisodes(world, (0.1,), support_size=0)
    with pytest.raises(ValueError, match="gravity"):
        GravityEpisodes(world, (-0.1,))
    with pytest.raises(ValueError, match="protocol"):
        _data_args(protocol="shuffled")


def test_forward_with_experience_resets_the_buffer_to_the_current_episode():
    torch.manual_seed(0)
    model = EpmJepaModel(EpmJepaConfig.tiny(track="epm")).train()
    generator = torch.Generator().manual_seed(0)
    old, support, query = (torch.rand(n, 5, 1, 64, 64, generator=generator) for n in (3, 2, 2))
    model.warm_experience(old)  # a previous episode's transitions
    model(query, experience_pixel_values=support)
    transitions = 2 * (5 - model.config.context_length)  # every transition of the 2 support sequences, nothing else
    assert int(model.experience_buffer.num_writes) == transitions
    reference = EpmJepaModel(EpmJepaConfig.tiny(track="epm"))
    reference.load_state_dict(model.state_dict())
    reference.warm_experience(support)
    assert torch.equal(model.experience_buffer.valid_entries(), reference.experience_buffer.valid_entries())
    with pytest.raises(ValueError, match="experience buffer"):
        EpmJepaModel(EpmJepaConfig.tiny(track="vanilla"))(query, experience_pixel_values=support)


def test_episodic_recipe_gives_support_to_memory_tracks_only(embedded_splits, tmp_path):
    base_dir = tmp_path / "base"
    EpmJepaModel(EpmJepaConfig.tiny(track="vanilla")).save_pretrained(base_dir)
    args = _data_args(stage="adapt", init_from=str(base_dir), protocol="episodic", episode_support=2)
    batches = {
        track: EpmJepaRecipe(EpmJepaConfig.tiny(track=track), args, splits=embedded_splits).train_batch(5, 0, 3)
        for track in ("vanilla", "epm")
    }
    assert set(batches["vanilla"]) == {"pixel_values"}
    assert set(batches["epm"]) == {"pixel_values", "experience_pixel_values"}
    assert torch.equal(batches["vanilla"]["pixel_values"], batches["epm"]["pixel_values"])  # the same data
    assert batches["epm"]["experience_pixel_values"].shape[:2] == (2, SEQUENCE_LENGTH)


# ------------------------------------------------------------------------------------------ the memory evaluations


def _modulation(model, support, query):
    """Track C's `d` for the query's context windows with the buffer filled from `support` (None: empty)."""
    model.reset_experience()
    if support is not None:
        model.warm_experience(support)
    with torch.no_grad():
        windows = model.context_windows(model.encode(query)).flatten(0, 1)
        return model.lora_modulation(model.aggregate_experience(windows[:, -1]))


def test_buffer_swap_really_swaps(trained, episodes):
    _, models = trained
    model = models["epm"]
    low, high = min(episodes), max(episodes)
    query = episodes[low]["query"]
    same, different = (
        _modulation(model, episodes[low]["support"], query),
        _modulation(model, episodes[high]["support"], query),
    )
    assert (same - different).abs().max() > 1e-4  # the buffer's gravity reaches the operator
    empty = _modulation(model, None, query)
    # An empty buffer holds only the learned null entry: one key, so `d` is the same for every input (static LoRA).
    assert torch.allclose(empty, empty[:1].expand_as(empty), atol=1e-6)

    swap = buffer_swap_ablation(model, episodes)
    assert set(swap) == set(EPISODIC_EVAL_GRAVITIES)
    assert swap[low]["different_gravity"] == high and swap[high]["different_gravity"] == low
    assert swap[low]["same"] != swap[low]["empty"]
    # After 4 tiny steps the same/different D differ below float resolution; the predictions themselves differ.
    predictions = []
    for support in (episodes[low]["support"], episodes[high]["support"]):
        model.reset_experience()
        model.warm_experience(support)
        with torch.no_grad():
            predictions.append(model(query, update_experience=False).predicted_latents)
    assert not torch.equal(*predictions)
    assert swap[low]["same"] == episodic_error(model, query, episodes[low]["support"])["normalized_error"]
    # Track A has no memory: the three buffers give the same number exactly.
    reference = buffer_swap_ablation(models["vanilla"], episodes)[low]
    assert reference["same"] == reference["different"] == reference["empty"]


def test_adaptation_without_gradient_steps_changes_no_parameter(trained, episodes):
    _, models = trained
    model = models["epm"]
    model.reset_experience()
    model.warm_experience(episodes[0.6]["support"][:1])
    before = {k: v.clone() for k, v in model.state_dict().items()}
    buffer_before = model.experience_buffer.entries.clone(), int(model.experience_buffer.num_writes)
    curves = adaptation_curve(model, episodes, ks=(0, 1, 3))
    after = model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert all(p.grad is None for p in model.parameters())
    # The buffer is put back as it was.
    assert torch.equal(model.experience_buffer.entries, buffer_before[0])
    assert int(model.experience_buffer.num_writes) == buffer_before[1]
    curve = curves[0.3]
    assert list(curve) == [0, 1, 3] and curve[0] != curve[1]  # the buffer's content moves D
    assert curve[0] == episodic_error(model, episodes[0.3]["query"], None)["normalized_error"]
    with pytest.raises(ValueError, match="support"):
        adaptation_curve(model, episodes, ks=(0, 4))


def test_freezing_lora_stops_its_weights_and_nothing_else(trained, embedded_splits, tmp_path):
    base_dir, _ = trained
    args = _data_args(
        stage="adapt", init_from=str(base_dir), protocol="episodic", episode_support=2, eval_every=0, freeze_lora_at=2
    )
    recipe = EpmJepaRecipe(EpmJepaConfig.tiny(track="epm"), args, splits=embedded_splits)
    model = train_quickly(recipe, tmp_path, per_device_batch_size=4, learning_rate=3e-2, max_steps=4).model
    at_freeze, final = recipe.state_at_freeze, model.state_dict()
    lora = [k for k in final if ".lora_" in k]
    assert lora and all(torch.equal(at_freeze[k], final[k]) for k in lora)  # U, V as at the freeze
    assert not torch.equal(at_freeze["hypernetwork.output.weight"], final["hypernetwork.output.weight"])  # d learns on


# ------------------------------------------------------------------------------------------- summaries by hand


def test_trajectory_and_settling_bump_by_hand():
    curve = [(0, 0.5), (5, 0.3), (10, 0.2), (15, 0.26), (20, 0.24)]
    summary = trajectory_summary(curve)
    assert (summary["peak_step"], summary["peak_d_shift"], summary["final_d_shift"]) == (10, 0.2, 0.24)
    assert summary["post_peak_divergence"] == pytest.approx(0.04)
    bump = settling_bump(curve, 10)
    assert bump["bump"] == pytest.approx(0.06) and bump["bump_step"] == 15
    with pytest.raises(ValueError, match="freeze step 7"):
        settling_bump(curve, 7)
    assert farthest_gravity(0.3, (0.1, 0.3, 0.4, 0.6)) == 0.6 and farthest_gravity(0.6, (0.1, 0.3, 0.6)) == 0.1


def test_preregistered_outcome_classes_by_hand():
    assert swap_outcome([3.0, 2.5, 4.0]).startswith("memory matters")
    assert swap_outcome([-3.0, -2.5]).startswith("memory hurts")
    assert swap_outcome([0.5, -1.9]).startswith("memory does nothing")
    assert swap_outcome([3.0, 0.0]).startswith("inconclusive")
    assert adaptation_outcome([10.0]).startswith("memory matters")
    assert settling_outcome([{"bump": 0.02, "d_at_freeze": 0.2}, {"bump": 0.025, "d_at_freeze": 0.2}]).startswith(
        "settling transient present and independent"
    )
    assert settling_outcome([{"bump": 0.02, "d_at_freeze": 0.2}, {"bump": 0.002, "d_at_freeze": 0.2}]).endswith(
        "(timing-dependent)"
    )
    assert settling_outcome([{"bump": -0.01, "d_at_freeze": 0.2}]).startswith("no settling transient")
    assert tradeoff_outcome([{"d_shift": 0.2, "sigma_embed": 0.4}, {"d_shift": 0.3, "sigma_embed": 0.9}]).startswith(
        "trade-off reproduced"
    )
    assert tradeoff_outcome([{"d_shift": 0.2, "sigma_embed": 0.9}]).startswith("no trade-off")
