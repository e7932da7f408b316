import datasets
import numpy as np
import pyarrow as pa
import pytest
import torch

from hf_jepa.data import (
    SHIFT_GRAVITY,
    TRAIN_GRAVITY,
    MovingMnist,
    images_to_tensor,
    render_frames,
    simulate_trajectories,
)


def _images(count=20, seed=0):
    """Synthetic uint8 "digits": random blobs with a zero border, different per image."""
    generator = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (count, 28, 28), generator=generator, dtype=torch.uint8)
    images[:, :4] = 0
    images[:, -4:] = 0
    images[:, :, :4] = 0
    images[:, :, -4:] = 0
    return images


def _task(**overrides):
    settings = dict(images=_images(), labels=torch.arange(20), sequence_length=6, seed=3)
    settings.update(overrides)
    return MovingMnist(**settings)


def _paste(image, x, y, canvas_size=64):
    """The exact frame for a digit at integer (x, y), cropped at the canvas edges."""
    canvas = torch.zeros(canvas_size + 56, canvas_size + 56)
    canvas[y + 28 : y + 56, x + 28 : x + 56] = image.float() / 255.0
    return canvas[28 : 28 + canvas_size, 28 : 28 + canvas_size]


def _render_one(image, x, y, canvas_size=64):
    positions = torch.tensor([[[[x, y]]]], dtype=torch.float64)
    return render_frames(image[None], positions, torch.zeros(1, 1, dtype=torch.long), canvas_size=canvas_size)[0, 0, 0]


def _centre_of_mass_y(frames):
    """Ink-weighted mean row of each frame `(..., 1, H, W)`."""
    rows = torch.arange(frames.shape[-2], dtype=torch.float64)[:, None]
    frames = frames.double()
    return (frames * rows).sum((-1, -2, -3)) / frames.sum((-1, -2, -3))


# ------------------------------------------------------------------------------------------------------- batches


@pytest.mark.parametrize("num_digits, digits", [(1, 1), (2, 2), ((1, 2), 2)])
def test_sample_batch_shapes_dtypes_and_range(num_digits, digits):
    task = _task(num_digits=num_digits)
    batch = task.sample_batch(64)
    assert batch["pixel_values"].shape == (64, 6, 1, 64, 64) and batch["pixel_values"].dtype == torch.float32
    assert batch["pixel_values"].min() >= 0 and batch["pixel_values"].max() <= 1
    assert batch["pixel_values"].amax((1, 2, 3, 4)).min() > 0.5  # every sequence shows ink
    assert batch["gravity"].shape == (64,) and (batch["gravity"] == TRAIN_GRAVITY).all()
    assert batch["positions"].shape == (64, 6, digits, 2)
    assert batch["positions"].min() >= 0 and batch["positions"].max() <= 64 - 28
    labels, mask = batch["digit_labels"], batch["digit_mask"]
    assert labels.shape == mask.shape == (64, digits) and labels.dtype == torch.int64
    assert mask[:, 0].all()  # the first digit is always there
    assert ((labels >= 0) == mask).all() and (labels[~mask] == -1).all() and (labels < 20).all()
    if num_digits == (1, 2):
        assert 10 < (~mask[:, 1]).sum() < 54  # both counts are drawn


def test_sample_batch_without_labels_and_other_canvas():
    batch = _task(labels=None, canvas_size=40).sample_batch(4)
    assert "digit_labels" not in batch
    assert batch["pixel_values"].shape == (4, 6, 1, 40, 40)
    assert batch["positions"].max() <= 40 - 28


def test_batches_are_deterministic_per_seed_step_rank():
    task = _task(gravity=SHIFT_GRAVITY)
    first = task.sample_batch(8, step=5, rank=1)
    again = _task(gravity=SHIFT_GRAVITY).sample_batch(8, step=5, rank=1)
    for key in first:
        assert torch.equal(first[key], again[key]), key
    for other in (
        task.sample_batch(8, step=6, rank=1),
        task.sample_batch(8, step=5, rank=0),
        _task(gravity=SHIFT_GRAVITY, seed=4).sample_batch(8, step=5, rank=1),
    ):
        assert not torch.equal(first["pixel_values"], other["pixel_values"])
        assert not torch.equal(first["gravity"], other["gravity"])


# ------------------------------------------------------------------------------------------------------- physics


def test_trajectory_matches_closed_form_under_gravity():
    gravity = torch.tensor([0.1, 0.25, 0.5], dtype=torch.float64)
    positions0 = torch.tensor([[[3.0, 2.0], [50.0, 10.0]]] * 3, dtype=torch.float64)
    velocities0 = torch.tensor([[[1.5, 0.5], [-2.0, -1.0]]] * 3, dtype=torch.float64)
    steps = 12
    # A wall far away: no bounce within 12 frames, so the closed form holds throughout.
    positions, velocities = simulate_trajectories(positions0, velocities0, gravity, steps, limit=1000.0)
    assert positions.shape == velocities.shape == (3, steps, 2, 2)
    t = torch.arange(steps, dtype=torch.float64)[None, :, None]
    g = gravity[:, None, None]
    expected_y = positions0[:, None, :, 1] + velocities0[:, None, :, 1] * t + g * t * (t + 1) / 2
    expected_x = positions0[:, None, :, 0] + velocities0[:, None, :, 0] * t
    torch.testing.assert_close(positions[..., 1], expected_y, rtol=0, atol=1e-9)
    torch.testing.assert_close(positions[..., 0], expected_x, rtol=0, atol=1e-9)  # x ignores gravity
    torch.testing.assert_close(velocities[..., 1], velocities0[:, None, :, 1] + g * t, rtol=0, atol=1e-9)
    assert (velocities[..., 0] == velocities0[:, None, :, 0]).all()
    # The frame-to-frame vertical step grows by exactly g.
    torch.testing.assert_close(positions[..., 1].diff(n=2, dim=1), g.expand(3, steps - 2, 2), rtol=0, atol=1e-9)


def test_without_gravity_velocity_is_constant_and_bounces_keep_speed():
    generator = torch.Generator().manual_seed(0)
    positions0 = torch.rand(16, 2, 2, generator=generator, dtype=torch.float64) * 36
    velocities0 = (torch.rand(16, 2, 2, generator=generator, dtype=torch.float64) - 0.5) * 6
    # Away from walls, the velocity never changes.
    positions, velocities = simulate_trajectories(positions0 + 500, velocities0, 0.0, 20, limit=1000.0)
    assert (velocities == velocities0[:, None]).all()
    torch.testing.assert_close(positions.diff(dim=1), velocities[:, :-1], rtol=0, atol=1e-9)
    # In a 36 px box there are many bounces: each only flips signs, and positions stay in the box.
    positions, velocities = simulate_trajectories(positions0, velocities0, 0.0, 60, limit=36.0)
    assert (velocities.abs() == velocities0.abs()[:, None]).all()
    assert (velocities.sign() != velocities0.sign()[:, None]).any()
    assert positions.min() >= 0 and positions.max() <= 36


def test_hand_computed_bounces():
    limit = 36.0
    # Floor, no gravity: y = 35 + 2 = 37 > 36 -> 2 * 36 - 37 = 35, v_y = -2; then 35 - 2 = 33.
    positions, velocities = simulate_trajectories(
        torch.tensor([[[10.0, 35.0]]]), torch.tensor([[[1.0, 2.0]]]), 0.0, 3, limit
    )
    assert positions[0, :, 0, 1].tolist() == [35.0, 35.0, 33.0]
    assert velocities[0, :, 0, 1].tolist() == [2.0, -2.0, -2.0]
    assert positions[0, :, 0, 0].tolist() == [10.0, 11.0, 12.0] and (velocities[..., 0] == 1).all()
    # Floor with gravity 0.5: v_y = 2.5, y = 37.5 -> 72 - 37.5 = 34.5, v_y = -2.5 (|v| after the kick is kept);
    # next: v_y = -2.0, y = 32.5.
    positions, velocities = simulate_trajectories(
        torch.tensor([[[10.0, 35.0]]]), torch.tensor([[[0.0, 2.0]]]), torch.tensor([0.5]), 3, limit
    )
    assert positions[0, :, 0, 1].tolist() == [35.0, 34.5, 32.5]
    assert velocities[0, :, 0, 1].tolist() == [2.0, -2.5, -2.0]
    # Ceiling and left wall: p = 1 - 3 = -2 -> 2, v = +3 on both axes.
    positions, velocities = simulate_trajectories(
        torch.tensor([[[1.0, 1.0]]]), torch.tensor([[[-3.0, -3.0]]]), 0.0, 2, limit
    )
    assert positions[0, 1, 0].tolist() == [2.0, 2.0] and velocities[0, 1, 0].tolist() == [3.0, 3.0]
    # Right wall: x = 35 + 3 = 38 -> 34, v_x = -3.
    positions, velocities = simulate_trajectories(
        torch.tensor([[[35.0, 5.0]]]), torch.tensor([[[3.0, 0.0]]]), 0.0, 2, limit
    )
    assert positions[0, 1, 0].tolist() == [34.0, 5.0] and velocities[0, 1, 0].tolist() == [-3.0, 0.0]

    # A step longer than the box leaves it even after one reflection (x: 10 + 100 -> 72 - 110 = -38; y: 10 - 100
    # -> 90 -> 72 - 90 = -18): clamped into the box.
    positions, _ = simulate_trajectories(
        torch.tensor([[[10.0, 10.0]]]), torch.tensor([[[100.0, -100.0]]]), 0.0, 4, limit
    )
    assert positions.min() >= 0 and positions.max() <= limit and positions[0, 1, 0].tolist() == [0.0, 0.0]


# ------------------------------------------------------------------------------------------------------- gravity


def test_gravity_changes_frames_and_pulls_ink_down():
    flat, falling = _task(num_digits=1, sequence_length=8), _task(num_digits=1, sequence_length=8, gravity=0.5)
    batch0, batch1 = flat.sample_batch(64), falling.sample_batch(64)
    # Same seed: same digits and initial states, so frame 0 is identical and only the motion differs.
    assert torch.equal(batch0["pixel_values"][:, 0], batch1["pixel_values"][:, 0])
    assert torch.equal(batch0["positions"][:, 0], batch1["positions"][:, 0])
    assert not torch.equal(batch0["pixel_values"][:, 1:], batch1["pixel_values"][:, 1:])
    assert (batch1["gravity"] == 0.5).all()

    # Sequences whose y never bounced in either run follow the closed form; for them the rendered ink falls
    # exactly g t (t + 1) / 2 pixels below the g = 0 run (a digit fully on the canvas keeps all its ink).
    t = torch.arange(8, dtype=torch.float64)
    y0 = batch0["positions"][:, 0, 0, 1].double()[:, None]
    vy0 = (batch0["positions"][:, 1, 0, 1].double() - y0[:, 0])[:, None]  # g = 0 run: v = first step
    closed0 = y0 + vy0 * t
    closed1 = closed0 + 0.5 * t * (t + 1) / 2
    free = ((batch0["positions"][:, :, 0, 1] - closed0).abs().amax(1) < 1e-4) & (
        (batch1["positions"][:, :, 0, 1] - closed1).abs().amax(1) < 1e-4
    )
    assert free.sum() >= 5
    shift = _centre_of_mass_y(batch1["pixel_values"][free]) - _centre_of_mass_y(batch0["pixel_values"][free])
    torch.testing.assert_close(shift, (0.5 * t * (t + 1) / 2).expand_as(shift), rtol=0, atol=1e-3)
    assert (shift[:, 1:] > 0).all()


def test_falling_digit_from_rest():
    image = _images(1)[0]
    gravity = 0.5
    positions, _ = simulate_trajectories(
        torch.tensor([[[18.0, 0.0]]]), torch.zeros(1, 1, 2), torch.tensor([gravity]), 8, limit=36.0
    )
    frames = render_frames(image[None], positions, torch.zeros(1, 1, dtype=torch.long))
    t = torch.arange(8, dtype=torch.float64)
    drop = _centre_of_mass_y(frames[0]) - _centre_of_mass_y(frames[0, :1])
    torch.testing.assert_close(drop, gravity * t * (t + 1) / 2, rtol=0, atol=1e-3)  # 14 px at t = 7: no bounce


def test_shift_gravity_is_never_zero():
    task = _task(gravity=SHIFT_GRAVITY, sequence_length=2, num_digits=1)
    gravity = torch.cat([task.simulate(50_000, task._generator(step, 0))["gravity"] for step in range(4)])
    assert gravity.min() > 0 and gravity.max() <= 0.5
    assert gravity.min() < 1e-3 and gravity.max() > 0.499  # it spans the interval
    assert abs(gravity.mean().item() - 0.25) < 0.005
    # Even a range narrower than float32 spacing never returns its excluded lower end.
    narrow = _task(gravity=(1.0, 1.0000001), sequence_length=2, num_digits=1).simulate(1000, torch.Generator())
    assert (narrow["gravity"] > 1.0).all()


def test_gravity_range_frames_match_fixed_gravity_frames():
    # Gravity is the last draw: a range and fixed gravity share digits and initial states.
    ranged, fixed = _task(gravity=SHIFT_GRAVITY).sample_batch(4), _task(gravity=0.0).sample_batch(4)
    assert torch.equal(ranged["pixel_values"][:, 0], fixed["pixel_values"][:, 0])
    assert not torch.equal(ranged["pixel_values"][:, -1], fixed["pixel_values"][:, -1])


# ----------------------------------------------------------------------------------------------------- rendering


def test_integer_positions_paste_the_digit_exactly():
    image = _images(1)[0]
    for x, y in ((0, 0), (36, 36), (10, 7), (-5, 40), (60, -20)):  # the last two hang off the canvas
        torch.testing.assert_close(_render_one(image, x, y), _paste(image, x, y), rtol=0, atol=1e-6)


def test_sub_pixel_rendering_is_bilinear_and_keeps_ink():
    image = _images(1)[0]
    ink = image.double().sum().item() / 255
    left, right, half = _render_one(image, 10, 12), _render_one(image, 11, 12), _render_one(image, 10.5, 12)
    torch.testing.assert_close(half, (left + right) / 2, rtol=0, atol=1e-6)
    up, down, half = _render_one(image, 10, 12), _render_one(image, 10, 13), _render_one(image, 10, 12.5)
    torch.testing.assert_close(half, (up + down) / 2, rtol=0, atol=1e-6)
    assert not torch.equal(half, up) and not torch.equal(half, down)
    frame = _render_one(image, 10.3, 12.7)
    assert abs(frame.double().sum().item() - ink) < 1e-3
    # The ink's centre moves with the float position, not with its rounding.
    shift = _centre_of_mass_y(frame[None]) - _centre_of_mass_y(_render_one(image, 10, 12)[None])
    assert abs(shift.item() - 0.7) < 1e-4


def test_two_digits_composite_by_max():
    images = _images(2)
    positions = torch.tensor([[[[5.0, 6.0], [12.25, 9.5]], [[20.5, 30.0], [18.0, 25.75]]]])  # (1, T=2, D=2, 2)
    both = render_frames(images, positions, torch.tensor([[0, 1]]))
    first = render_frames(images, positions[:, :, :1], torch.tensor([[0]]))
    second = render_frames(images, positions[:, :, 1:], torch.tensor([[1]]))
    assert torch.equal(both, torch.maximum(first, second))
    assert not torch.equal(both, first) and not torch.equal(both, second)
    hidden = render_frames(images, positions, torch.tensor([[0, 1]]), digit_mask=torch.tensor([[True, False]]))
    assert torch.equal(hidden, first)


# ------------------------------------------------------------------------------------------------------- dataset


def test_to_dataset_rows_are_sample_batch_frames(monkeypatch, tmp_path):
    # Nothing may land in the user's datasets cache.
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "user-cache")
    task = _task(sequence_length=4, num_digits=(1, 2), gravity=SHIFT_GRAVITY)
    dataset = task.to_dataset(10, batch_size=4)
    assert not (tmp_path / "user-cache").exists()
    assert dataset.num_rows == 10
    assert set(dataset.features) == {"pixel_values", "gravity", "positions", "digit_mask", "digit_labels"}
    # The model's input layout (T, 1, H, W) and dtype: the renderer's floats, not a uint8 copy.
    assert dataset.features["pixel_values"] == datasets.Array4D((4, 1, 64, 64), "float32")
    storage = dataset.data.schema.field("pixel_values").type.storage_type
    assert storage.value_type.value_type.value_type.value_type == pa.float32()
    rows = dataset.with_format("numpy")[:]
    assert rows["pixel_values"].dtype == np.float32 and rows["pixel_values"].shape == (10, 4, 1, 64, 64)
    # Rows come in chunks of batch_size, chunk k being sample_batch(size, step=k): 4 + 4 + 2 rows.
    for step, (start, size) in enumerate(((0, 4), (4, 4), (8, 2))):
        batch = task.sample_batch(size, step=step)
        np.testing.assert_array_equal(rows["pixel_values"][start : start + size], batch["pixel_values"].numpy())
        np.testing.assert_array_equal(rows["gravity"][start : start + size], batch["gravity"].numpy())
        np.testing.assert_array_equal(rows["positions"][start : start + size], batch["positions"].numpy())
        np.testing.assert_array_equal(rows["digit_labels"][start : start + size], batch["digit_labels"].numpy())
        np.testing.assert_array_equal(rows["digit_mask"][start : start + size], batch["digit_mask"].numpy())


def test_to_dataset_same_seed_same_rows_other_seed_other_rows(tmp_path):
    def frames(seed, **kwargs):
        dataset = _task(sequence_length=3, seed=seed, gravity=SHIFT_GRAVITY).to_dataset(6, batch_size=4, **kwargs)
        return dataset.with_format("numpy")[:]

    assert np.array_equal(frames(1)["pixel_values"], frames(1)["pixel_values"])
    assert not np.array_equal(frames(1)["pixel_values"], frames(2)["pixel_values"])
    # A shared cache folder keeps seeds apart and reuses identical configurations.
    cached = [frames(seed, cache_dir=tmp_path) for seed in (1, 2, 1)]
    assert np.array_equal(cached[0]["pixel_values"], frames(1)["pixel_values"])
    assert not np.array_equal(cached[0]["pixel_values"], cached[1]["pixel_values"])
    assert not np.array_equal(cached[0]["gravity"], cached[1]["gravity"])
    assert np.array_equal(cached[0]["pixel_values"], cached[2]["pixel_values"])


def test_labels_are_optional_in_the_dataset():
    dataset = _task(labels=None, sequence_length=2, num_digits=1).to_dataset(3)
    assert set(dataset.features) == {"pixel_values", "gravity", "positions", "digit_mask"}
    assert dataset.features["positions"] == datasets.Array3D((2, 1, 2), "float32")


# ---------------------------------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"images": _images().float()}, "images"),
        ({"images": _images()[:, :27]}, "images"),
        ({"images": _images()[0]}, "images"),
        ({"labels": torch.arange(3)}, "labels"),
        ({"gravity": -0.1}, "gravity"),
        ({"gravity": (-0.1, 0.5)}, "gravity"),
        ({"gravity": (0.5, 0.5)}, "gravity"),
        ({"gravity": (0.5, 0.1)}, "gravity"),
        ({"gravity": (0.1, 0.2, 0.3)}, "gravity"),
        ({"sequence_length": 1}, "sequence_length"),
        ({"num_digits": 3}, "num_digits"),
        ({"num_digits": (0, 2)}, "num_digits"),
        ({"canvas_size": 28}, "canvas_size"),
        ({"speed_min": 2.0, "speed_max": 1.0}, "speed_min"),
        ({"speed_min": -1.0}, "speed_min"),
    ],
)
def test_bad_settings_raise_naming_the_field(overrides, field):
    with pytest.raises(ValueError, match=field):
        _task(**overrides)


# -------------------------------------------------------------------------------------------------- real MNIST


def test_end_to_end_on_real_mnist(mnist_dataset):
    images, labels = images_to_tensor(mnist_dataset["test"].select(range(300)))
    task = MovingMnist(images=images, labels=labels, num_digits=1, gravity=SHIFT_GRAVITY, seed=0)
    assert len(task) == 300
    batch = task.sample_batch(16, step=2)
    assert batch["pixel_values"].shape == (16, 16, 1, 64, 64)
    # One digit fully on the canvas keeps its ink in every frame, and that ink is the ink of an image of its label.
    ink = batch["pixel_values"].double().sum((2, 3, 4))
    torch.testing.assert_close(ink, ink[:, :1].expand_as(ink), rtol=1e-5, atol=1e-3)
    image_ink = images.double().sum((1, 2)) / 255
    for sequence_ink, label in zip(ink[:, 0], batch["digit_labels"][:, 0]):
        matches = (image_ink - sequence_ink).abs() < 1e-3
        assert matches.any() and label in labels[matches]
    dataset = task.to_dataset(4, batch_size=4)
    assert dataset.num_rows == 4
    np.testing.assert_array_equal(dataset.with_format("numpy")[:]["pixel_values"], task.sample_batch(4)["pixel_values"])
