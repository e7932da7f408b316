import copy
import json
import math
from pathlib import Path

import pytest
import torch
from torch import nn

from hf_jepa.modeling.bro_jepa import BroJepaConfig, BroJepaModel
from hf_jepa.recipes.bro_jepa import BroJepaDataArguments, BroJepaRecipe
from hf_jepa.testing.harness import load_rank_states, run_in_two_processes, save_rank_state
from hf_jepa.trainers import (
    JepaTrainer,
    TrainingArguments,
    build_optimizer,
    ema_momentum,
    ema_update_,
    parameter_groups,
    warmup_cosine_lambda,
)
from hf_jepa.trainers import trainer as trainer_module

# ---------------------------------------------------------------------------------------------------------- helpers


class RecordingRecipe(BroJepaRecipe):
    """The BRo-JEPA recipe, remembering the initial model and every (step, rank) batch it was asked for."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.initial_state = None
        self.requests = []

    def build_model(self):
        model = super().build_model()
        self.initial_state = copy.deepcopy(model.state_dict())
        return model

    def train_batch(self, step, rank, batch_size):
        self.requests.append((step, rank))
        return super().train_batch(step, rank, batch_size)


def make_recipe(splits, **config_overrides):
    config = BroJepaConfig.tiny(**config_overrides)
    # No shift augmentation (the family's default is 1 px): these tests are about the trainer, and a 20-step run's
    # loss drop on the unaugmented task is what the learning check measures.
    data_args = BroJepaDataArguments(data="embedded", plot=False, prototype_images=200, eval_images=100, max_shift=0)
    return RecordingRecipe(config, data_args, splits=splits)


def make_args(output_dir, **overrides):
    kwargs = dict(
        output_dir=str(output_dir),
        per_device_batch_size=16,
        warmup_steps=1,
        learning_rate=1e-3,
        save_model=False,
        disable_progress_bar=True,
        logging_steps=1,
    )
    kwargs.update(overrides)
    return TrainingArguments(**kwargs)


def train(splits, output_dir, config_overrides=None, **arg_overrides):
    recipe = make_recipe(splits, **(config_overrides or {}))
    result = JepaTrainer(recipe, make_args(output_dir, **arg_overrides)).train()
    return recipe, result


def prefixed(state, prefix):
    return {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}


# --------------------------------------------------------------------------------------------------------- schedules


def test_ema_momentum_schedule():
    assert ema_momentum(0, 100) == pytest.approx(0.996)
    assert ema_momentum(25, 100) == pytest.approx(0.997)
    assert ema_momentum(50, 100) == pytest.approx(0.998)
    assert ema_momentum(100, 100) == pytest.approx(1.0)
    assert ema_momentum(150, 100) == pytest.approx(1.0)  # clamped
    assert ema_momentum(-5, 100) == pytest.approx(0.996)
    assert ema_momentum(3, 4, start=0.5, end=0.9) == pytest.approx(0.8)
    assert ema_momentum(0, 0, start=0.5, end=0.9) == 0.9


def test_ema_update_hand_values():
    target, online = nn.Linear(2, 1), nn.Linear(2, 1)
    with torch.no_grad():
        target.weight.copy_(torch.tensor([[1.0, 2.0]]))
        target.bias.fill_(4.0)
        online.weight.copy_(torch.tensor([[3.0, -2.0]]))
        online.bias.fill_(0.0)
    ema_update_(target, online, momentum=0.75)
    # 0.75 * target + 0.25 * online
    assert torch.allclose(target.weight, torch.tensor([[1.5, 1.0]]))
    assert torch.allclose(target.bias, torch.tensor([3.0]))
    assert torch.equal(online.weight, torch.tensor([[3.0, -2.0]]))  # the online module is untouched
    ema_update_(target, online, momentum=0.0)
    assert torch.equal(target.weight, online.weight)
    ema_update_(target, online, momentum=1.0)
    assert torch.equal(target.weight, online.weight)
    with pytest.raises(ValueError, match="different parameters"):
        ema_update_(nn.Linear(2, 1), nn.Sequential(nn.Linear(2, 1), nn.Linear(1, 1)), 0.5)


def test_ema_update_buffers():
    target, online = nn.BatchNorm1d(2), nn.BatchNorm1d(2)
    with torch.no_grad():
        online.running_mean.copy_(torch.tensor([4.0, -8.0]))
        online.num_batches_tracked.fill_(7)
    ema_update_(target, online, momentum=0.5)  # default: buffers left to the target
    assert torch.equal(target.running_mean, torch.zeros(2))
    assert target.num_batches_tracked.item() == 0
    ema_update_(target, online, momentum=0.5, buffer_momentum=0.75)
    assert torch.allclose(target.running_mean, torch.tensor([1.0, -2.0]))  # 0.75 * 0 + 0.25 * online
    assert target.num_batches_tracked.item() == 7  # integer buffers are copied
    ema_update_(target, online, momentum=0.5, buffer_momentum=0.0)
    assert torch.equal(target.running_mean, online.running_mean)


def test_parameter_groups_no_decay_on_biases_and_1d():
    model = nn.Sequential(nn.Conv2d(1, 4, 3, bias=False), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4, 3))
    model.scale = nn.Parameter(torch.ones(3))  # a free 1-D parameter
    model.frozen = nn.Parameter(torch.ones(3, 3), requires_grad=False)
    decay, no_decay = parameter_groups(model, weight_decay=0.1)
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    ids = lambda group: {id(p) for p in group["params"]}  # noqa: E731
    assert ids(decay) == {id(model[0].weight), id(model[3].weight)}
    assert ids(no_decay) == {id(model[1].weight), id(model[1].bias), id(model[3].bias), id(model.scale)}
    assert id(model.frozen) not in ids(decay) | ids(no_decay)

    # On BRo-JEPA: the frozen EMA target never reaches the optimiser; every trainable parameter does, once.
    bro = BroJepaModel(BroJepaConfig.tiny())
    optimizer = build_optimizer(bro, 1e-3, 0.05)
    in_optimizer = [id(p) for group in optimizer.param_groups for p in group["params"]]
    assert len(in_optimizer) == len(set(in_optimizer))
    assert set(in_optimizer) == {id(p) for p in bro.context_encoder.parameters()}
    assert all(p.ndim >= 2 for p in optimizer.param_groups[0]["params"])
    assert all(p.ndim <= 1 for p in optimizer.param_groups[1]["params"])
    assert optimizer.param_groups[1]["weight_decay"] == 0.0


def test_warmup_cosine_lambda_values():
    schedule = warmup_cosine_lambda(warmup_steps=10, total_steps=110, min_lr_ratio=0.1)
    assert schedule(0) == pytest.approx(0.1)  # (0 + 1) / 10
    assert schedule(4) == pytest.approx(0.5)
    assert schedule(9) == pytest.approx(1.0)
    assert schedule(10) == pytest.approx(1.0)  # cosine starts at the top
    assert schedule(60) == pytest.approx(0.1 + 0.9 * 0.5)  # half way down
    assert schedule(35) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 4)))
    assert schedule(110) == pytest.approx(0.1)
    assert schedule(500) == pytest.approx(0.1)  # clamped
    no_warmup = warmup_cosine_lambda(0, 100)
    assert no_warmup(0) == pytest.approx(1.0) and no_warmup(100) == pytest.approx(0.0, abs=1e-12)


def test_training_arguments_validation():
    with pytest.raises(ValueError, match="per_device_batch_size"):
        TrainingArguments(per_device_batch_size=1)
    with pytest.raises(ValueError, match="max_steps"):
        TrainingArguments(max_steps=0)
    with pytest.raises(ValueError, match="gradient_accumulation_steps"):
        TrainingArguments(gradient_accumulation_steps=0)
    with pytest.raises(ValueError, match="mixed_precision"):
        TrainingArguments(mixed_precision="fp8")
    for field_name, bad in [
        ("max_steps", 1.5),
        ("max_steps", True),
        ("max_steps", "10"),
        ("logging_steps", 0),
        ("save_steps", -1),
        ("learning_rate", float("nan")),
        ("learning_rate", 0.0),
        ("learning_rate", float("inf")),
        ("weight_decay", -0.1),
        ("weight_decay", float("nan")),
        ("min_lr_ratio", 1.5),
        ("max_grad_norm", 0.0),
        ("max_grad_norm", float("nan")),
        ("warmup_steps", -1),
        ("save_total_limit", 0),
        ("seed", -1),
        ("nan_policy", "ignore"),
        ("overwrite_output_dir", "yes"),
        ("resume_allow_changes", 3),
        ("output_dir", ""),
    ]:
        with pytest.raises(ValueError, match=field_name):
            TrainingArguments(**{field_name: bad})
    assert TrainingArguments(resume_allow_changes="max_steps, learning_rate").resume_allow_changes == [
        "max_steps",
        "learning_rate",
    ]
    with pytest.raises(ValueError, match="overwrite_output_dir"):
        TrainingArguments(overwrite_output_dir=True, resume_from_checkpoint="latest")


# ------------------------------------------------------------------------------------------------------ training runs


def test_short_run_learns_and_keeps_target_frozen(embedded_splits, tmp_path):
    steps = 20
    recipe, result = train(embedded_splits, tmp_path, max_steps=steps, per_device_batch_size=32)
    losses = [record["loss"] for record in result.history]
    assert len(losses) == steps and all(math.isfinite(v) for v in losses)
    assert sum(losses[-5:]) / 5 < 0.9 * sum(losses[:3]) / 3, losses
    assert [r["step"] for r in result.history] == list(range(1, steps + 1))
    # The logged schedules are the documented ones.
    lr_lambda = warmup_cosine_lambda(1, steps)
    for record in result.history:
        assert record["lr"] == pytest.approx(1e-3 * lr_lambda(record["step"]))
        assert record["ema_momentum"] == pytest.approx(ema_momentum(record["step"] - 1, steps, 0.996, 1.0))

    model = result.model
    assert isinstance(model, BroJepaModel)  # unwrapped
    initial_target = prefixed(recipe.initial_state, "target_encoder.")
    target, context = model.target_encoder.state_dict(), model.context_encoder.state_dict()
    params = {name for name, _ in model.target_encoder.named_parameters()}
    assert any(not torch.equal(target[k], initial_target[k]) for k in params)  # moved by EMA
    assert any(not torch.equal(target[k], context[k]) for k in params)  # ... but lags the context encoder
    assert all(not p.requires_grad for p in model.target_encoder.parameters())
    model.train()
    assert not model.target_encoder.training
    assert model.has_class_prototypes()  # finalize ran
    for key in ("seen_accuracy", "zero_shot_accuracy", "rollout_accuracy", "prototype_off_diagonal_cosine"):
        assert key in result.metrics
    assert result.metrics["num_processes"] == 1 and result.metrics["train_steps"] == steps


def test_ema_step_formula_inside_the_trainer(embedded_splits, tmp_path):
    """One optimiser step with momentum 0.25: target = 0.25 * initial target + 0.75 * context AFTER the step."""
    recipe, result = train(
        embedded_splits, tmp_path, config_overrides=dict(ema_momentum=0.25, ema_momentum_end=0.25), max_steps=1
    )
    initial_target = prefixed(recipe.initial_state, "target_encoder.")
    context = result.model.context_encoder.state_dict()
    target = result.model.target_encoder.state_dict()
    for name, _ in result.model.target_encoder.named_parameters():
        assert not torch.equal(context[name], initial_target[name])  # the context encoder did move
        assert torch.allclose(target[name], 0.25 * initial_target[name] + 0.75 * context[name], atol=1e-7), name


def test_exact_resume(embedded_splits, tmp_path):
    _, straight = train(embedded_splits, tmp_path / "straight", max_steps=4)

    _, first = train(embedded_splits, tmp_path / "resumed", max_steps=4, save_steps=2)
    checkpoint = tmp_path / "resumed" / "checkpoints" / "checkpoint-2"
    assert checkpoint.is_dir(), sorted(str(p) for p in (tmp_path / "resumed").rglob("*"))
    for name in ("model.safetensors", "optimizer.safetensors", "rng_state_0.safetensors", "checkpoint.json"):
        assert (checkpoint / name).exists(), name
    assert not list(checkpoint.glob("*.pkl")) and not list(checkpoint.glob("*.bin"))  # nothing to unpickle
    assert not (tmp_path / "resumed" / "checkpoints" / "checkpoint-4").exists()  # no save at the final step

    recipe, resumed = train(embedded_splits, tmp_path / "resumed", max_steps=4, resume_from_checkpoint=str(checkpoint))
    assert [r["step"] for r in resumed.history] == [1, 2, 3, 4]  # the log before the checkpoint comes with it
    assert recipe.requests == [(2, 0), (3, 0)]  # continues with the batches it would have drawn
    assert [r["loss"] for r in resumed.history] == [r["loss"] for r in straight.history]

    expected, actual = straight.model.state_dict(), resumed.model.state_dict()
    assert expected.keys() == actual.keys()
    for key in expected:
        assert torch.equal(expected[key], actual[key]), key
    # The run that wrote the checkpoint is itself the straight run.
    for key, value in first.model.state_dict().items():
        assert torch.equal(expected[key], value), key


def test_resumed_run_rewrites_its_checkpoints_bit_identically(embedded_splits, tmp_path):
    """Checkpoints are named by optimiser step; a run resumed from step 2 sets the first run's checkpoint-4 aside and
    writes a new checkpoint-4 with the same state."""
    from safetensors.torch import load_file

    checkpoints = tmp_path / "checkpoints"
    train(embedded_splits, tmp_path, max_steps=6, save_steps=2, save_total_limit=None)
    assert sorted(p.name for p in checkpoints.iterdir()) == ["checkpoint-2", "checkpoint-4"]
    original = load_file(str(checkpoints / "checkpoint-4" / "model.safetensors"))
    train(
        embedded_splits,
        tmp_path,
        max_steps=6,
        save_steps=2,
        save_total_limit=None,
        resume_from_checkpoint=str(checkpoints / "checkpoint-2"),
    )
    names = sorted(p.name for p in checkpoints.iterdir())
    assert names[1:] == ["checkpoint-2", "checkpoint-4"] and names[0].startswith(".abandoned-checkpoint-4-")
    assert load_file(str(checkpoints / names[0] / "model.safetensors")).keys() == original.keys()
    again = load_file(str(checkpoints / "checkpoint-4" / "model.safetensors"))
    assert original.keys() == again.keys()
    assert all(torch.equal(original[k], again[k]) for k in original)


def test_gradient_accumulation(embedded_splits, tmp_path, monkeypatch):
    optimizers = []

    def capturing_build_optimizer(*args, **kwargs):
        optimizers.append(build_optimizer(*args, **kwargs))
        return optimizers[-1]

    monkeypatch.setattr(trainer_module, "build_optimizer", capturing_build_optimizer)
    recipe, result = train(embedded_splits, tmp_path, max_steps=3, gradient_accumulation_steps=2)
    assert recipe.requests == [(step, 0) for step in range(6)]  # two micro-batches per optimiser step
    assert [r["step"] for r in result.history] == [1, 2, 3]
    (optimizer,) = optimizers
    steps = {int(state["step"]) for state in optimizer.state.values()}
    assert steps == {3}  # the optimiser stepped once per accumulation window
    initial = prefixed(recipe.initial_state, "context_encoder.")
    final = result.model.context_encoder.state_dict()
    assert any(not torch.equal(initial[k], final[k]) for k in initial)


# ------------------------------------------------------------------------------------------------- two processes


def _two_process_worker(output_dir, splits):
    import torch.distributed as dist
    from accelerate.state import PartialState

    rank = dist.get_rank()
    recipe, result = train(splits, Path(output_dir) / "run", max_steps=4, per_device_batch_size=16)
    model = result.model
    save_rank_state(model.state_dict(), output_dir)
    requests = list(recipe.requests)
    first = recipe.train_batch(0, rank, 16)
    info = {
        "rank": rank,
        "world_size": dist.get_world_size(),
        "accelerate_num_processes": PartialState().num_processes,
        "accelerate_process_index": PartialState().process_index,
        "requests": requests,
        "first_labels": first["labels"].tolist(),
        "first_pixel_sum": float(first["pixel_values"].sum()),
        "metrics_num_processes": result.metrics.get("num_processes"),
        "parameter_names": [name for name, _ in model.named_parameters()],
    }
    Path(f"{output_dir}/rank{rank}.json").write_text(json.dumps(info))


def test_two_process_training_keeps_ranks_identical(embedded_splits, tmp_path):
    run_in_two_processes(_two_process_worker, str(tmp_path), embedded_splits)

    infos = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    for rank, info in enumerate(infos):
        assert info["rank"] == rank and info["world_size"] == 2
        assert info["accelerate_num_processes"] == 2 and info["accelerate_process_index"] == rank
        assert info["requests"] == [[step, rank] for step in range(4)]
    assert infos[0]["metrics_num_processes"] == 2  # rank 0 evaluated, knowing it was one of two
    assert infos[0]["first_pixel_sum"] != infos[1]["first_pixel_sum"]  # different data on each rank

    states = load_rank_states(tmp_path)
    names = infos[0]["parameter_names"]
    assert any(n.startswith("context_encoder.") for n in names)
    # Every parameter - context encoder (DDP-averaged gradients) and the EMA target encoder - is bit-identical across
    # ranks although each rank trained on different batches.
    target_names = [
        k for k in states[0] if k.startswith("target_encoder.") and "running_" not in k and "num_batches" not in k
    ]
    assert target_names
    for key in names + target_names:
        assert torch.equal(states[0][key], states[1][key]), key
    # ... and training moved them (the two ranks did not merely both stay at the initialisation).
    torch.manual_seed(0)
    initial = BroJepaModel(BroJepaConfig.tiny()).state_dict()
    assert any(not torch.equal(initial[k], states[0][k]) for k in names)
    # BatchNorm running statistics are per rank by design (DDP broadcasts rank 0's at each forward; the last forward's
    # update is local); only rank 0 fills the class prototypes and saves the model.
    assert states[0]["class_prototypes"].abs().sum() > 0


def test_tensorboard_tracker_logs_the_losses(embedded_splits, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    train(embedded_splits, tmp_path, max_steps=4, logging_steps=2, log_with="tensorboard")
    event_files = list((tmp_path / "logs").rglob("events.out.tfevents.*"))
    assert event_files, list(tmp_path.rglob("*"))
    events = EventAccumulator(str(event_files[0].parent))
    events.Reload()
    steps = [event.step for event in events.Scalars("loss")]
    assert steps == [2, 4]
    assert {"prediction_loss", "variance_loss", "lr", "ema_momentum"} <= set(events.Tags()["scalars"])


# ------------------------------------------------------------------------------------------------- time budget


class FakeClock:
    """The trainer's clock (`trainer_module.clock`): time moves only when a test or a recipe advances it."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class TimedRecipe(RecordingRecipe):
    """Batch `step` takes `costs.get(step, 1.0)` seconds of the fake clock (the step's duration, exactly), and records
    whether the model was in training mode when the batch was drawn."""

    def __init__(self, *args, clock, costs=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.clock, self.costs, self.training_modes = clock, dict(costs or {}), []

    def build_model(self):
        self.model = super().build_model()
        return self.model

    def train_batch(self, step, rank, batch_size):
        self.clock.now += self.costs.get(step, 1.0)
        self.training_modes.append(self.model.context_encoder.training)
        return super().train_batch(step, rank, batch_size)


def timed_trainer(splits, output_dir, clock, costs=None, **arg_overrides):
    config = BroJepaConfig.tiny()
    data_args = BroJepaDataArguments(data="embedded", plot=False, prototype_images=200, eval_images=100)
    recipe = TimedRecipe(config, data_args, splits=splits, clock=clock, costs=costs)
    return recipe, JepaTrainer(recipe, make_args(output_dir, **arg_overrides))


COSTS = {2: 3.0}  # step durations 1, 1, 3, 1, 1, ... s: a budget of 5.5 s ends after 4 steps (1 + 1 + 3 + 1 = 6 s)


def test_time_budget_stops_the_run_and_drives_the_schedules(embedded_splits, tmp_path, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(trainer_module, "clock", clock)
    recipe, trainer = timed_trainer(embedded_splits, tmp_path, clock, COSTS, max_train_seconds=5.5, warmup_steps=1)
    result = trainer.train()
    spent = [1.0, 2.0, 5.0, 6.0]  # after each step
    assert [r["step"] for r in result.history] == [1, 2, 3, 4] and trainer.args.max_steps == 1000
    assert [r["step_time_s"] for r in result.history] == spent
    assert result.metrics["train_steps"] == 4 and result.metrics["step_time_s"] == 6.0
    assert result.train_time_s == pytest.approx(6.0)
    # The cosine follows the fraction of the budget spent (the logged lr is the next step's), not step / max_steps;
    # the EMA momentum of step k is that of the time spent before it.
    for record, seconds, before in zip(result.history, spent, [0.0, *spent]):
        assert record["lr"] == pytest.approx(1e-3 * 0.5 * (1 + math.cos(math.pi * min(1.0, seconds / 5.5))))
        assert record["ema_momentum"] == pytest.approx(0.996 + 0.004 * before / 5.5)
    assert result.history[-1]["lr"] == pytest.approx(0.0, abs=1e-12)  # the schedule ends at the budget
    assert trainer.state.progress == 1.0 and trainer.state.done


def test_time_between_steps_is_not_training_time(embedded_splits, tmp_path, monkeypatch):
    """`steps()`: an evaluation between two steps (100 s of the clock, the model left in eval mode) counts neither
    towards the budget nor in train_time_s; the next step trains in training mode; the generator returns the
    result."""
    clock = FakeClock()
    monkeypatch.setattr(trainer_module, "clock", clock)
    recipe, trainer = timed_trainer(embedded_splits, tmp_path, clock, COSTS, max_train_seconds=5.5)
    run, states = trainer.steps(), []
    while True:
        try:
            state = next(run)
        except StopIteration as finished:
            result = finished.value
            break
        states.append((state.step, state.step_time_s))
        clock.now += 100.0
        recipe.model.eval()
    assert states == [(1, 1.0), (2, 2.0), (3, 5.0), (4, 6.0)]
    assert recipe.training_modes == [True] * 4
    assert result.train_time_s == pytest.approx(6.0) and result.metrics["step_time_s"] == 6.0
    assert [r["elapsed_s"] for r in result.history] == pytest.approx([1.0, 2.0, 5.0, 6.0])


def test_time_budget_resume_keeps_the_spent_time(embedded_splits, tmp_path, monkeypatch):
    monkeypatch.setattr(trainer_module, "clock", clock := FakeClock())
    _, straight = timed_trainer(embedded_splits, tmp_path / "straight", clock, COSTS, max_train_seconds=5.5)
    straight = straight.train()
    _, first = timed_trainer(embedded_splits, tmp_path / "run", clock, COSTS, max_train_seconds=5.5, save_steps=2)
    first.train()
    checkpoint = tmp_path / "run" / "checkpoints" / "checkpoint-2"
    assert json.loads((checkpoint / "trainer_state.json").read_text())["step_time_s"] == 2.0
    recipe, resumed = timed_trainer(
        embedded_splits, tmp_path / "run", clock, COSTS, max_train_seconds=5.5, resume_from_checkpoint="latest"
    )
    resumed = resumed.train()
    assert recipe.requests == [(2, 0), (3, 0)]  # 2 s spent before: 3 + 1 s more reach the budget
    assert [r["step_time_s"] for r in resumed.history] == [1.0, 2.0, 5.0, 6.0]
    assert [r["lr"] for r in resumed.history] == [r["lr"] for r in straight.history]
    for key, value in straight.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[key]), key


def test_max_train_seconds_validation_and_cli():
    from hf_jepa.cli_errors import CliError
    from hf_jepa.cli_settings import build_train_setup, parse_overrides

    for bad in (0, -1.0, float("inf"), float("nan"), "soon", True):
        with pytest.raises(ValueError, match="max_train_seconds"):
            TrainingArguments(max_train_seconds=bad)
    setup = build_train_setup("bro-jepa", parse_overrides(["max_train_seconds=90", "data=embedded"]))
    assert setup.training_args.max_train_seconds == 90.0
    assert build_train_setup("bro-jepa", parse_overrides(["data=embedded"])).training_args.max_train_seconds is None
    with pytest.raises(CliError, match="max_train_seconds"):
        build_train_setup("bro-jepa", parse_overrides(["max_train_seconds=0"]))


def _timed_two_process_worker(output_dir, splits):
    """Rank 1's steps take twice as long on its own clock; both ranks must stop at rank 0's 4th step (a rank that
    stopped alone would leave the other waiting in DDP's all-reduce)."""
    import torch.distributed as dist

    rank = dist.get_rank()
    trainer_module.clock = clock = FakeClock()
    recipe, trainer = timed_trainer(
        splits, Path(output_dir) / "run", clock, {step: 1.0 + rank for step in range(100)}, max_train_seconds=3.5
    )
    result = trainer.train()
    info = {"steps": [r["step_time_s"] for r in result.history], "requests": recipe.requests}
    Path(f"{output_dir}/rank{rank}.json").write_text(json.dumps(info))


def test_two_processes_stop_at_the_same_step_of_a_time_budget(embedded_splits, tmp_path):
    run_in_two_processes(_timed_two_process_worker, str(tmp_path), embedded_splits, timeout_s=60)
    infos = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    for rank, info in enumerate(infos):
        assert info["steps"] == [1.0, 2.0, 3.0, 4.0]  # rank 0's durations on both ranks
        assert info["requests"] == [[step, rank] for step in range(4)]
