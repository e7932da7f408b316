"""No run lost, no record wrong (issue 12, trainer part): output folders and their lock, atomic checkpoints named by
step, `latest`, rotation, safe loading (no pickle), settings checked on resume, a continuous log, non-finite losses,
and kill -9 then resume giving bit-identical weights for every family (the `reliability` marker, run separately)."""

import json
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import hf_jepa
from hf_jepa.modeling.bro_jepa import BroJepaConfig
from hf_jepa.modeling.epm_jepa import EpmJepaConfig
from hf_jepa.recipes.bro_jepa import BroJepaDataArguments, BroJepaRecipe
from hf_jepa.recipes.epm_jepa import EpmJepaDataArguments, EpmJepaRecipe
from hf_jepa.testing.harness import train_quickly
from hf_jepa.trainers import JepaTrainer, TrainingArguments
from hf_jepa.trainers import checkpointing as ckpt
from hf_jepa.trainers import trainer as trainer_module
from hf_jepa.trainers.output_dir import LOCK_NAME, acquire_lock

ROOT = Path(hf_jepa.__file__).resolve().parent.parent

# ---------------------------------------------------------------------------------------------------------- helpers


class Recipe(BroJepaRecipe):
    """BRo-JEPA, remembering the batches asked for; `poison` maps a batch index to "nan" or "crash"."""

    def __init__(self, *args, poison=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.requests, self.built, self.poison = [], False, dict(poison or {})

    def build_model(self):
        self.built = True
        model = super().build_model()
        self.initial_state = {k: v.clone() for k, v in model.state_dict().items()}
        return model

    def train_batch(self, step, rank, batch_size):
        self.requests.append(step)
        batch = super().train_batch(step, rank, batch_size)
        if self.poison.get(step) == "nan":
            # Finite pixels (the model refuses NaN inputs) of alternating sign, so large that the encoder's sums
            # overflow to +inf and -inf and meet: a NaN loss at this very step.
            signs = torch.ones_like(batch["pixel_values"]).flatten()
            signs[1::2] = -1
            batch["pixel_values"] = 3e38 * signs.view_as(batch["pixel_values"])
        elif self.poison.get(step) == "crash":
            raise KeyboardInterrupt("simulated crash")
        elif self.poison.get(step) == "slow":
            time.sleep(1.0)
        return batch


def make_recipe(splits, poison=None, **config_overrides):
    data_args = BroJepaDataArguments(data="embedded", plot=False, prototype_images=100, eval_images=50)
    return Recipe(BroJepaConfig.tiny(**config_overrides), data_args, splits=splits, poison=poison)


def train(splits, output_dir, poison=None, config_overrides=None, **overrides):
    recipe = make_recipe(splits, poison, **(config_overrides or {}))
    settings = dict(
        output_dir=str(output_dir),
        max_steps=4,
        per_device_batch_size=8,
        warmup_steps=1,
        logging_steps=1,
        save_model=False,
        disable_progress_bar=True,
    )
    settings.update(overrides)
    return recipe, JepaTrainer(recipe, TrainingArguments(**settings)).train()


def assert_same_weights(expected: dict, actual: dict):
    assert expected.keys() == actual.keys()
    different = [k for k in expected if not torch.equal(expected[k], actual[k])]
    assert not different, f"{len(different)} of {len(expected)} tensors differ: {different[:5]}"


# ---------------------------------------------------------------------------------------------------- output folders


def test_non_empty_output_dir_is_refused_and_overwrite_clears_it(embedded_splits, tmp_path):
    (tmp_path / "previous-run.txt").write_text("a result")
    recipe = make_recipe(embedded_splits)
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=1, per_device_batch_size=8, disable_progress_bar=True)
    with pytest.raises(ValueError, match=r"is not empty \(previous-run.txt\).*overwrite_output_dir") as error:
        JepaTrainer(recipe, args).train()
    assert str(tmp_path) in str(error.value)
    assert not recipe.built and (tmp_path / "previous-run.txt").exists()  # refused before anything ran
    assert not (tmp_path / LOCK_NAME).exists()

    train(embedded_splits, tmp_path, max_steps=1, overwrite_output_dir=True, save_model=True)
    assert not (tmp_path / "previous-run.txt").exists()
    assert (tmp_path / "model.safetensors").is_file() and not (tmp_path / LOCK_NAME).exists()


def test_output_dir_that_is_a_file_is_refused_before_training(embedded_splits, tmp_path):
    path = tmp_path / "model.bin"
    path.write_text("not a folder")
    recipe = make_recipe(embedded_splits)
    args = TrainingArguments(output_dir=str(path), max_steps=1, per_device_batch_size=8)
    with pytest.raises(ValueError, match="is a file, not a folder"):
        JepaTrainer(recipe, args).train()
    args = TrainingArguments(output_dir=str(path / "run"), max_steps=1, per_device_batch_size=8)
    with pytest.raises(ValueError, match="not writable"):
        JepaTrainer(recipe, args).train()
    assert not recipe.built


def test_overwrite_refuses_to_clear_the_working_directory(embedded_splits, tmp_path, monkeypatch):
    (tmp_path / "keep.txt").write_text("x")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="refuses to clear"):
        train(embedded_splits, ".", max_steps=1, overwrite_output_dir=True)
    assert (tmp_path / "keep.txt").exists()


def test_second_concurrent_writer_is_refused_naming_the_holder(embedded_splits, tmp_path):
    holder = acquire_lock(tmp_path)  # a run of this process holds the folder
    try:
        recipe = make_recipe(embedded_splits)
        args = TrainingArguments(output_dir=str(tmp_path), max_steps=1, per_device_batch_size=8)
        with pytest.raises(ValueError, match=rf"in use by another run \(pid {os.getpid()} on ") as error:
            JepaTrainer(recipe, args).train()
        assert "delete" in str(error.value) and not recipe.built
        assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()  # still the holder's
    finally:
        holder.release()
    assert not (tmp_path / LOCK_NAME).exists()


def test_stale_lock_of_a_dead_process_is_taken_over(embedded_splits, tmp_path, caplog):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    lock = {"pid": int(dead.stdout), "host": socket.gethostname(), "start_time": 0, "command": "killed run"}
    (tmp_path / LOCK_NAME).write_text(json.dumps(lock))
    with caplog.at_level(logging.WARNING):
        train(embedded_splits, tmp_path, max_steps=1)
    assert "stale lock" in caplog.text
    assert not (tmp_path / LOCK_NAME).exists()  # released at the end


def test_lock_is_released_when_training_fails(embedded_splits, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        train(embedded_splits, tmp_path, poison={1: "crash"})
    assert not (tmp_path / LOCK_NAME).exists()


# ------------------------------------------------------------------------------------------------------ checkpoints


def test_resuming_from_an_earlier_checkpoint_sets_the_later_ones_aside(embedded_splits, tmp_path):
    # Roll back to step 2 of a run that reached checkpoint 4, then crash at step 4: `latest` must not pick the
    # abandoned run's checkpoint 4.
    run = tmp_path / "run"
    train(embedded_splits, run, max_steps=6, save_steps=2, save_total_limit=None)
    root = run / "checkpoints"
    with pytest.raises(KeyboardInterrupt):
        train(
            embedded_splits,
            run,
            max_steps=6,
            save_steps=2,
            resume_from_checkpoint=str(root / "checkpoint-2"),
            poison={3: "crash"},
        )
    assert [step for step, _ in ckpt.complete_checkpoints(run)] == [2]
    assert [p.name.startswith(".abandoned-checkpoint-4-") for p in root.iterdir() if p.name != "checkpoint-2"] == [True]
    recipe, _ = train(embedded_splits, run, max_steps=6, resume_from_checkpoint="latest")
    assert recipe.requests == [2, 3, 4, 5]


def test_latest_skips_an_incomplete_newer_checkpoint(embedded_splits, tmp_path, caplog):
    _, straight = train(embedded_splits, tmp_path / "straight", max_steps=6)
    run = tmp_path / "run"
    train(embedded_splits, run, max_steps=6, save_steps=2, save_total_limit=None)
    root = run / "checkpoints"
    assert sorted(p.name for p in root.iterdir()) == ["checkpoint-2", "checkpoint-4"]
    marker = json.loads((root / "checkpoint-4" / "checkpoint.json").read_text())
    assert marker["step"] == 4 and "model.safetensors" in marker["files"] and marker["settings_hash"]
    (root / "checkpoint-4" / "optimizer.safetensors").write_bytes(b"truncated")  # a torn write
    (root / ".tmp-checkpoint-5").mkdir()  # an unfinished write

    with caplog.at_level(logging.WARNING):
        recipe, resumed = train(embedded_splits, run, max_steps=6, resume_from_checkpoint="latest")
    assert "Skipping incomplete checkpoint" in caplog.text and "checkpoint-4" in caplog.text
    assert recipe.requests == [2, 3, 4, 5]  # resumed from step 2
    assert_same_weights(straight.model.state_dict(), resumed.model.state_dict())

    with pytest.raises(ValueError, match="is incomplete .*optimizer.safetensors.*latest"):
        train(embedded_splits, run, max_steps=6, resume_from_checkpoint=str(root / "checkpoint-4"))
    with pytest.raises(ValueError, match="does not exist"):
        train(embedded_splits, run, max_steps=6, resume_from_checkpoint=str(root / "checkpoint-99"))
    with pytest.raises(ValueError, match="no complete checkpoint"):
        train(embedded_splits, tmp_path / "empty", max_steps=6, resume_from_checkpoint="latest")


def test_rotation_deletes_only_after_the_new_checkpoint_is_complete(embedded_splits, tmp_path, monkeypatch):
    train(embedded_splits, tmp_path / "a", max_steps=7, save_steps=2, save_total_limit=2)
    assert sorted(p.name for p in (tmp_path / "a" / "checkpoints").iterdir()) == ["checkpoint-4", "checkpoint-6"]

    real_write = ckpt.write_main_files

    def failing_write(folder, *args):  # the disk fills up while checkpoint 6 is written
        if folder.name.endswith("-6"):
            raise OSError("disk full")
        return real_write(folder, *args)

    monkeypatch.setattr(trainer_module, "write_main_files", failing_write)
    with pytest.raises(OSError, match="disk full"):
        train(embedded_splits, tmp_path / "b", max_steps=7, save_steps=2, save_total_limit=1)
    root = tmp_path / "b" / "checkpoints"
    assert sorted(p.name for p in root.iterdir()) == [".tmp-checkpoint-6", "checkpoint-4"]  # the newest complete kept
    assert ckpt.incomplete_reason(root / "checkpoint-4") is None
    assert [step for step, _ in ckpt.complete_checkpoints(tmp_path / "b")] == [4]


# ----------------------------------------------------------------------------------------------------- safe loading


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):  # unpickling this creates the marker file
        return (open, (self.marker, "w"))


def test_pickle_payload_in_a_checkpoint_does_not_run(embedded_splits, tmp_path):
    run, marker = tmp_path / "run", tmp_path / "payload-ran"
    train(embedded_splits, run, max_steps=4, save_steps=2)
    checkpoint = run / "checkpoints" / "checkpoint-2"
    (checkpoint / "custom_checkpoint_0.pkl").write_bytes(pickle.dumps(_Payload(str(marker))))
    for spec in (str(checkpoint), "latest"):
        with pytest.raises(ValueError, match=r"pickle files \(custom_checkpoint_0.pkl\).*allow_pickle_checkpoints"):
            train(embedded_splits, run, max_steps=4, resume_from_checkpoint=spec)
    # An accelerate-style folder made only of pickles is refused too.
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "random_states_0.pkl").write_bytes(pickle.dumps(_Payload(str(marker))))
    with pytest.raises(ValueError, match="pickle"):
        train(embedded_splits, tmp_path / "other", max_steps=4, resume_from_checkpoint=str(legacy))
    assert not marker.exists()


def test_resume_unpickles_nothing(embedded_splits, tmp_path, monkeypatch):
    _, straight = train(embedded_splits, tmp_path / "straight", max_steps=4)
    train(embedded_splits, tmp_path / "run", max_steps=4, save_steps=2)

    def refuse(*args, **kwargs):
        raise AssertionError("something was unpickled")

    for module, name in ((pickle, "load"), (pickle, "loads"), (pickle, "Unpickler"), (torch, "load")):
        monkeypatch.setattr(module, name, refuse)
    _, resumed = train(embedded_splits, tmp_path / "run", max_steps=4, resume_from_checkpoint="latest")
    assert_same_weights(straight.model.state_dict(), resumed.model.state_dict())


def test_legacy_pickle_checkpoint_loads_only_when_allowed(embedded_splits, tmp_path):
    """accelerate's own `save_state` format (pickles): refused by default, read with allow_pickle_checkpoints=True."""
    from accelerate import Accelerator

    from hf_jepa.trainers.optim import build_optimizer, warmup_cosine_lambda
    from hf_jepa.trainers.trainer import TrainerState

    _, straight = train(embedded_splits, tmp_path / "straight", max_steps=4)
    recipe = make_recipe(embedded_splits)
    # The old trainer's state at step 0: a fresh model, optimiser and scheduler saved with `save_state`.
    from accelerate.utils import set_seed

    set_seed(0)
    model = recipe.build_model()
    optimizer = build_optimizer(model, 1e-3, 0.05)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine_lambda(1, 4))
    accelerator = Accelerator(cpu=True)
    model, optimizer = accelerator.prepare(model, optimizer)
    accelerator.register_for_checkpointing(scheduler, TrainerState())
    accelerator.save_state(str(tmp_path / "legacy"))
    with pytest.raises(ValueError, match="pickle"):
        train(embedded_splits, tmp_path / "from-legacy", max_steps=4, resume_from_checkpoint=str(tmp_path / "legacy"))
    _, resumed = train(
        embedded_splits,
        tmp_path / "from-legacy-allowed",
        max_steps=4,
        resume_from_checkpoint=str(tmp_path / "legacy"),
        allow_pickle_checkpoints=True,
    )
    assert_same_weights(straight.model.state_dict(), resumed.model.state_dict())


# ------------------------------------------------------------------------------------------------------------ resume


def test_resume_with_changed_settings_is_refused_unless_allowed(embedded_splits, tmp_path):
    run = tmp_path / "run"
    train(embedded_splits, run, max_steps=4, save_steps=2)
    with pytest.raises(ValueError, match=r"train\.learning_rate: 0\.001 in the checkpoint, 0\.002 now") as error:
        train(embedded_splits, run, max_steps=4, learning_rate=2e-3, seed=1, resume_from_checkpoint="latest")
    assert "train.seed: 0 in the checkpoint, 1 now" in str(error.value)
    assert "resume_allow_changes=[learning_rate, seed]" in str(error.value)
    with pytest.raises(ValueError, match=r"model\.latent_dim"):
        train(embedded_splits, run, config_overrides=dict(latent_dim=48), resume_from_checkpoint="latest")
    with pytest.raises(ValueError, match=r"past max_steps=1: set max_steps >= 2"):
        train(embedded_splits, run, max_steps=1, resume_from_checkpoint="latest", resume_allow_changes=True)
    # Bookkeeping settings (logging, saving) may change freely.
    train(embedded_splits, tmp_path / "run2", max_steps=4, save_steps=2)
    train(embedded_splits, tmp_path / "run2", max_steps=4, logging_steps=2, resume_from_checkpoint="latest")

    _, resumed = train(
        embedded_splits,
        run,
        max_steps=4,
        learning_rate=2e-3,
        resume_from_checkpoint="latest",
        resume_allow_changes=["learning_rate"],
        save_model=True,
    )
    assert [r["step"] for r in resumed.history] == [1, 2, 3, 4]
    from hf_jepa.trainers.optim import warmup_cosine_lambda

    schedule = warmup_cosine_lambda(1, 4)
    assert resumed.history[1]["lr"] == pytest.approx(1e-3 * schedule(2))  # before the resume: the old rate
    assert resumed.history[3]["lr"] == pytest.approx(2e-3 * schedule(4))  # after it: the new one
    record = json.loads((run / "training_args.json").read_text())
    assert record["learning_rate"] == 2e-3
    assert record["resumes"][-1]["step"] == 2
    assert record["resumes"][-1]["changes"] == {"train.learning_rate": [0.001, 0.002]}
    card = (run / "README.md").read_text()
    assert "Settings changed on resume" in card and "train.learning_rate 0.001 -> 0.002" in card


def test_log_is_continuous_and_time_cumulative_across_a_crash(embedded_splits, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        train(embedded_splits, tmp_path, max_steps=4, save_steps=2, save_model=True, poison={0: "slow", 3: "crash"})
    state = json.loads((tmp_path / "checkpoints" / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["train_time_s"] >= 1.0  # the slow first batch
    _, resumed = train(embedded_splits, tmp_path, max_steps=4, save_model=True, resume_from_checkpoint="latest")
    log = [json.loads(line) for line in (tmp_path / "training_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3, 4]
    assert log[:2] == state["log_history"]
    elapsed = [r["elapsed_s"] for r in log]
    assert elapsed == sorted(elapsed) and elapsed[2] > state["train_time_s"]
    metrics = json.loads((tmp_path / "eval_results.json").read_text())
    assert metrics["train_time_s"] >= round(state["train_time_s"], 2) and resumed.train_time_s > state["train_time_s"]


# ----------------------------------------------------------------------------------------------- non-finite losses


def test_non_finite_loss_stops_naming_the_step(embedded_splits, tmp_path):
    with pytest.raises(FloatingPointError, match="non-finite loss .* at optimiser step 3.*nan_policy='skip'"):
        train(embedded_splits, tmp_path, max_steps=4, save_steps=2, poison={2: "nan"})
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["checkpoint-2"]  # nothing half-written
    assert not (tmp_path / LOCK_NAME).exists()


def test_non_finite_loss_skip_policy(embedded_splits, tmp_path):
    _, result = train(embedded_splits, tmp_path / "one", max_steps=4, nan_policy="skip", poison={1: "nan"})
    assert [r["skipped_steps"] for r in result.history] == [0, 1, 1, 1]
    assert "loss" not in result.history[1]
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in result.history[2:])
    assert all(torch.isfinite(v.float()).all() for v in result.model.state_dict().values())
    assert result.metrics["skipped_steps"] == 1
    # Skipped steps change nothing: no optimiser step, no EMA update, BatchNorm statistics restored.
    recipe, skipped = train(
        embedded_splits, tmp_path / "all", max_steps=2, nan_policy="skip", poison={0: "nan", 1: "nan"}
    )
    assert skipped.history[-1]["skipped_steps"] == 2
    final = {k: v for k, v in skipped.model.state_dict().items() if k != "class_prototypes"}  # set after training
    assert_same_weights({k: v for k, v in recipe.initial_state.items() if k in final}, final)


# ---------------------------------------------------------------------------------------------------- two processes


def _two_process_worker(output_dir, splits):
    import torch.distributed as dist

    from hf_jepa.testing.harness import save_rank_state

    rank, output_dir = dist.get_rank(), Path(output_dir)
    try:  # a refused start fails on every rank (no rank left waiting)
        train(splits, output_dir / "busy", max_steps=2)
    except ValueError as error:
        (output_dir / f"refused{rank}.txt").write_text(str(error))
    _, first = train(splits, output_dir / "run", max_steps=4, save_steps=2)
    _, resumed = train(splits, output_dir / "run", max_steps=4, resume_from_checkpoint="latest")
    assert all(torch.equal(v, resumed.model.state_dict()[k]) for k, v in first.model.state_dict().items())
    save_rank_state(resumed.model.state_dict(), output_dir)


def test_two_processes_checkpoint_resume_and_refuse_together(embedded_splits, tmp_path):
    from hf_jepa.testing.harness import load_rank_states, run_in_two_processes

    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x.txt").write_text("x")
    run_in_two_processes(_two_process_worker, str(tmp_path), embedded_splits)
    for rank in (0, 1):
        assert "is not empty" in (tmp_path / f"refused{rank}.txt").read_text()
    checkpoint = tmp_path / "run" / "checkpoints" / "checkpoint-2"
    assert (checkpoint / "rng_state_0.json").is_file() and (checkpoint / "rng_state_1.json").is_file()
    # Resumed on both ranks, the weights still agree (BatchNorm statistics are per rank, prototypes rank 0's only).
    shared = [k for k in load_rank_states(tmp_path)[0] if not any(w in k for w in ("running_", "num_batches", "proto"))]
    states = [{k: state[k] for k in shared} for state in load_rank_states(tmp_path)]
    assert_same_weights(*states)


# ----------------------------------------------------------------------------------------------- EPM-JEPA state


@pytest.fixture(scope="module")
def epm_base(embedded_splits, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("epm-base")
    data_args = EpmJepaDataArguments(data="embedded", eval_sequences=8, sequence_length=6, plot=False, eval_every=0)
    recipe = EpmJepaRecipe(EpmJepaConfig.tiny(track="vanilla"), data_args, splits=embedded_splits)
    train_quickly(recipe, output_dir, max_steps=4, per_device_batch_size=4)
    return output_dir


@pytest.mark.parametrize("track", ["ei", "epm"])
def test_epm_tracks_resume_exactly_with_buffer_and_gate(epm_base, embedded_splits, tmp_path, track):
    def run(output_dir, **overrides):
        data_args = EpmJepaDataArguments(
            data="embedded", stage="adapt", init_from=str(epm_base), sequence_length=6, eval_sequences=8, plot=False
        )
        config = EpmJepaConfig.tiny(track=track, gate_warmup_updates=1, surprisal_threshold_std=0.0)
        recipe = EpmJepaRecipe(config, data_args, splits=embedded_splits)
        settings = dict(max_steps=6, per_device_batch_size=4, learning_rate=1e-2, logging_steps=3, save_model=False)
        return train_quickly(recipe, output_dir, **{**settings, **overrides}).model

    straight = run(tmp_path / "straight")
    run(tmp_path / "run", save_steps=3)
    saved = load_file(str(tmp_path / "run" / "checkpoints" / "checkpoint-3" / "recipe_state.safetensors"))
    assert int(saved["experience_buffer.num_writes"]) > 0  # the gate fired: the buffer is in the checkpoint
    resumed = run(tmp_path / "run", resume_from_checkpoint="latest")
    assert_same_weights(straight.state_dict(), resumed.state_dict())
    assert torch.equal(straight.experience_buffer.entries, resumed.experience_buffer.entries)
    assert torch.equal(straight.experience_buffer.num_writes, resumed.experience_buffer.num_writes)
    # The saved model's weight keys are unchanged (the buffer stays out of save_pretrained).
    assert not any(k.startswith("experience_buffer.") for k in straight.state_dict())


# ------------------------------------------------------------------------------------- kill -9, then resume (slow-ish)

_MNIST = ["data=embedded", "plot=false"]
_REASONING = ["task=cfg", "num_train_examples=64", "num_eval_examples=8", "plot=false"]
KILL_CASES = {
    "bro-jepa": ("bro-jepa", [*_MNIST, "prototype_images=100", "eval_images=50"]),
    "i-jepa": ("i-jepa", [*_MNIST, "probe_images=100", "diagnostics_images=32"]),
    "t-jepa": ("t-jepa", ["plot=false", "downstream=false", "diagnostics_sentences=16"]),
    "epm-jepa": ("epm-jepa", [*_MNIST, "eval_sequences=8", "eval_every=0", "sequence_length=6"]),
    "epm-jepa-track-b": ("epm-jepa", [*_MNIST, "eval_sequences=8", "eval_every=0", "sequence_length=6", "stage=adapt"]),
    "epm-jepa-track-c": ("epm-jepa", [*_MNIST, "eval_sequences=8", "eval_every=0", "sequence_length=6", "stage=adapt"]),
    "jepa-reasoner": ("jepa-reasoner", _REASONING),
    "jepa-mono-talker": ("jepa-mono-talker", _REASONING),
    "jepa-dual-talker": ("jepa-dual-talker", _REASONING),
    "coupled-lm": ("coupled-lm", _REASONING),
    "coconut": ("coconut", _REASONING),
}
_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def _command(family, output_dir, settings):
    common = ["preset=tiny", "disable_progress_bar=true", "per_device_batch_size=4", "logging_steps=5"]
    common += ["max_steps=60", "save_steps=10", "warmup_steps=2"]
    return [
        sys.executable,
        "-m",
        "hf_jepa.cli",
        "train",
        family,
        "--set",
        *common,
        *settings,
        "--output-dir",
        str(output_dir),
    ]


def _run(command):
    done = subprocess.run(command, cwd=ROOT, env=_ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def prerequisites(tmp_path_factory):
    """A tiny EPM base (tracks B and C adapt from it) and a tiny reasoner (the Talkers train on it)."""
    root = tmp_path_factory.mktemp("prerequisites")
    epm = [*KILL_CASES["epm-jepa"][1], "max_steps=4", "save_steps=0"]
    _run(_command("epm-jepa", root / "epm-base", epm))
    _run(_command("jepa-reasoner", root / "reasoner", [*_REASONING, "max_steps=4", "save_steps=0"]))
    return root


@pytest.mark.reliability
@pytest.mark.parametrize("case", sorted(KILL_CASES))
def test_kill_9_then_resume_gives_bit_identical_weights(case, prerequisites, tmp_path):
    family, settings = KILL_CASES[case]
    settings = list(settings)
    if case.startswith("epm-jepa-track"):
        track = "ei" if case.endswith("-b") else "epm"
        settings += [
            f"init_from={prerequisites / 'epm-base'}",
            f"track={track}",
            "surprisal_threshold_std=0",
            "gate_warmup_updates=1",
        ]
    if "talker" in case:
        settings.append(f"reasoner={prerequisites / 'reasoner'}")
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    _run(_command(family, straight, settings))

    process = subprocess.Popen(
        _command(family, killed, settings), cwd=ROOT, env=_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 300
    while not list((killed / "checkpoints").glob("checkpoint-*/checkpoint.json")):
        assert process.poll() is None, process.stderr.read().decode()[-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(process.pid, signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL
    assert (killed / LOCK_NAME).exists()  # left behind by the killed run: taken over below
    steps_done = max(step for step, _ in ckpt.complete_checkpoints(killed))
    assert steps_done < 60, "the run finished before the kill"

    _run(_command(family, killed, [*settings, "resume_from_checkpoint=latest"]))
    assert_same_weights(load_file(str(straight / "model.safetensors")), load_file(str(killed / "model.safetensors")))
    log = [json.loads(line) for line in (killed / "training_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(5, 61, 5))  # continuous across the kill
    straight_log = [json.loads(line) for line in (straight / "training_log.jsonl").read_text().splitlines()]
    assert [r.get("loss") for r in log] == [r.get("loss") for r in straight_log]
    assert not (killed / LOCK_NAME).exists()


def test_a_training_argument_added_later_is_no_difference_at_its_default():
    # A checkpoint written before `nan_policy` existed resumes while the argument keeps its default.
    saved = {"train": {"learning_rate": 1e-3}, "model": {"latent_dim": 16}, "data": {}}
    same = {"train": {"learning_rate": 1e-3, "nan_policy": "stop"}, "model": {"latent_dim": 16}, "data": {}}
    assert ckpt.settings_differences(saved, same) == {}
    changed = {**same, "train": {**same["train"], "nan_policy": "skip"}}
    assert ckpt.settings_differences(saved, changed) == {"train.nan_policy": ["<unset>", "skip"]}
    # model and data settings must be present on both sides
    assert ckpt.settings_differences(saved, {**same, "data": {"max_shift": 0}}) == {"data.max_shift": ["<unset>", 0]}
