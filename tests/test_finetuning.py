"""EmaWeightsCallback with transformers.Trainer: hand-computed EMA after 3 SGD steps on a one-weight model, momentum 0
equals the plain weights, bad momentum refused."""

import pytest
import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel, Trainer, TrainingArguments

from hf_jepa.finetuning import EmaWeightsCallback


class OneWeight(PreTrainedModel):
    config_class = PretrainedConfig

    def __init__(self, config):
        super().__init__(config)
        self.w = nn.Parameter(torch.tensor([1.0]))

    def forward(self, x, labels=None):
        loss = (self.w * x).sum()  # d loss / d w = sum(x) = 1 per step for x = 1
        return {"loss": loss}


class Ones(torch.utils.data.Dataset):
    def __len__(self):
        return 3

    def __getitem__(self, index):
        return {"x": torch.tensor([1.0])}


def train(momentum, tmp_path):
    model = OneWeight(PretrainedConfig())
    args = TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=1,
        num_train_epochs=1,
        learning_rate=0.1,
        lr_scheduler_type="constant",
        optim="sgd",
        weight_decay=0.0,
        max_grad_norm=0.0,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    callback = EmaWeightsCallback(momentum=momentum)
    Trainer(model=model, args=args, train_dataset=Ones(), callbacks=[callback]).train()
    return model, callback


def test_ema_hand_computed(tmp_path):
    # SGD lr 0.1, gradient 1: weights 1.0 -> 0.9 -> 0.8 -> 0.7; EMA m=0.5 from 1.0:
    # 0.5*1 + 0.5*0.9 = 0.95; 0.5*0.95 + 0.5*0.8 = 0.875; 0.5*0.875 + 0.5*0.7 = 0.7875
    model, callback = train(0.5, tmp_path)
    assert callback.shadow["w"].item() == pytest.approx(0.7875, abs=1e-6)
    assert model.w.item() == pytest.approx(0.7875, abs=1e-6)  # swapped in at the end of training


def test_momentum_zero_is_plain_weights(tmp_path):
    model, callback = train(0.0, tmp_path)
    assert model.w.item() == pytest.approx(0.7, abs=1e-6)


@pytest.mark.parametrize("momentum", [1.0, -0.1, "0.9", True])
def test_bad_momentum(momentum):
    with pytest.raises(ValueError, match="momentum"):
        EmaWeightsCallback(momentum=momentum)


def test_swap_for_evaluation_evaluates_ema_then_trains_on(tmp_path):
    # eval loss = w (x = 1): with m=0.5 the evaluations after steps 1-3 see the EMA 0.95, 0.875, 0.7875, while
    # training continues from the plain weights 0.9, 0.8 (else the EMA would be 0.5*0.95 + 0.5*0.85 = 0.9 at step 2)
    model = OneWeight(PretrainedConfig())
    args = TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=1,
        per_device_eval_batch_size=1,
        num_train_epochs=1,
        learning_rate=0.1,
        lr_scheduler_type="constant",
        optim="sgd",
        weight_decay=0.0,
        max_grad_norm=0.0,
        eval_strategy="steps",
        eval_steps=1,
        label_names=["x"],  # so the evaluation computes the loss
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    callback = EmaWeightsCallback(momentum=0.5, swap_for_evaluation=True)
    trainer = Trainer(model=model, args=args, train_dataset=Ones(), eval_dataset=Ones(), callbacks=[callback])
    trainer.train()
    losses = [entry["eval_loss"] for entry in trainer.state.log_history if "eval_loss" in entry]
    assert losses == pytest.approx([0.95, 0.875, 0.7875], abs=1e-6)
