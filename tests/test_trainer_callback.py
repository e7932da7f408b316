"""`JepaEmaCallback`: T-JEPA trained by `transformers.Trainer` (tokenised with `Dataset.map`, masked by hf-jepa's
collator) moves its EMA target exactly as `JepaTrainer` would, step by step; without the callback it does not move."""

import pytest
import torch
from datasets import Dataset
from transformers import Trainer, TrainerCallback
from transformers import TrainingArguments as HfTrainingArguments

from hf_jepa.data.masking import SpanMaskingCollator
from hf_jepa.data.text import embedded_sentences, train_wordpiece_tokenizer
from hf_jepa.modeling.t_jepa import TJepaConfig, TJepaModel
from hf_jepa.trainers import JepaEmaCallback, ema_momentum

KEYS = ("input_ids", "attention_mask", "target_mask", "span_ids")


class _Snapshots(TrainerCallback):
    """Records the target before the EMA callback runs (it is registered first) and the online weights."""

    def __init__(self):
        self.before = []

    def on_step_end(self, args, state, control, model=None, **kwargs):
        pairs = model.ema_pairs()
        self.before.append(
            [
                ([p.detach().clone() for p in t.parameters()], [p.detach().clone() for p in o.parameters()])
                for o, t in pairs
            ]
        )


class _After(TrainerCallback):
    def __init__(self):
        self.after = []

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self.after.append([[p.detach().clone() for p in t.parameters()] for _, t in model.ema_pairs()])


@pytest.fixture(scope="module")
def text_data():
    texts = [row["text"] for row in embedded_sentences()[:256]]
    tokenizer = train_wordpiece_tokenizer(texts, vocab_size=512)
    dataset = Dataset.from_dict({"text": texts}).map(
        lambda batch: tokenizer(batch["text"], truncation=True, max_length=48), batched=True, remove_columns=["text"]
    )
    collator = SpanMaskingCollator(tokenizer=tokenizer, max_length=48, seed=0)
    return dataset, lambda rows: {key: value for key, value in collator(rows).items() if key in KEYS}


def _train(text_data, tmp_path, callbacks, steps=3):
    dataset, collate = text_data
    torch.manual_seed(0)
    model = TJepaModel(TJepaConfig.tiny(ema_momentum=0.9, ema_momentum_end=0.99))
    args = HfTrainingArguments(
        output_dir=str(tmp_path),
        max_steps=steps,
        per_device_train_batch_size=8,
        learning_rate=1e-2,
        report_to=[],
        remove_unused_columns=False,
        save_strategy="no",
        logging_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=dataset, data_collator=collate, callbacks=callbacks)
    trainer.train()
    return model


def test_the_target_follows_the_ema_formula_step_by_step(text_data, tmp_path):
    before, callback, after = _Snapshots(), JepaEmaCallback(), _After()
    model = _train(text_data, tmp_path / "ema", [before, callback, after])
    assert len(before.before) == len(after.after) == 3
    for step, (pairs_before, pairs_after) in enumerate(zip(before.before, after.after)):
        momentum = ema_momentum(step, 3, 0.9, 0.99)  # JepaTrainer's schedule
        for (target, online), target_after in zip(pairs_before, pairs_after):
            for t, o, t_new in zip(target, online, target_after):
                torch.testing.assert_close(t_new, momentum * t + (1 - momentum) * o)
    assert callback.last_momentum == pytest.approx(ema_momentum(2, 3, 0.9, 0.99))
    online, target = model.ema_pairs()[0]
    assert any(not torch.equal(a, b) for a, b in zip(online.parameters(), target.parameters()))


def test_without_the_callback_the_target_never_moves(text_data, tmp_path):
    snapshots = _Snapshots()
    _train(text_data, tmp_path / "plain", [snapshots], steps=2)
    first_target = snapshots.before[0][0][0]
    last_target = snapshots.before[-1][0][0]
    assert all(torch.equal(a, b) for a, b in zip(first_target, last_target))  # the silent mistraining


def test_a_model_without_targets_is_refused(tmp_path):
    callback = JepaEmaCallback()
    with pytest.raises(ValueError, match="ema_pairs"):
        callback.on_train_begin(None, None, None, model=torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="start must be a momentum"):
        JepaEmaCallback(start=1.5)
