"""`JepaEmaCallback` on every EMA family: after an optimiser step it moves every target of `model.ema_pairs()` to
`m * target + (1 - m) * online` with `m` from the family's own config schedule (the T-JEPA run under
`transformers.Trainer` is in test_trainer_callback.py)."""

import pytest
import torch
from transformers import TrainerState

from hf_jepa.modeling.bro_jepa import BroJepaConfig, BroJepaModel
from hf_jepa.modeling.epm_jepa import EpmJepaConfig, EpmJepaModel
from hf_jepa.modeling.i_jepa import IJepaConfig, IJepaModel
from hf_jepa.modeling.jepa_reasoner import JepaReasonerConfig, JepaReasonerModel
from hf_jepa.modeling.t_jepa import TJepaConfig, TJepaModel
from hf_jepa.trainers import JepaEmaCallback, ema_momentum

SCHEDULE = dict(ema_momentum=0.9, ema_momentum_end=0.99)
FAMILIES = {
    "bro-jepa": lambda: BroJepaModel(BroJepaConfig.tiny(**SCHEDULE)),
    "epm-jepa vanilla": lambda: EpmJepaModel(EpmJepaConfig.tiny(track="vanilla", **SCHEDULE)),
    "epm-jepa track C": lambda: EpmJepaModel(EpmJepaConfig.tiny(track="epm", **SCHEDULE)),
    "i-jepa": lambda: IJepaModel(IJepaConfig.tiny(**SCHEDULE)),
    "t-jepa": lambda: TJepaModel(TJepaConfig.tiny(**SCHEDULE)),
    "jepa-reasoner": lambda: JepaReasonerModel(JepaReasonerConfig.tiny(**SCHEDULE)),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_callback_applies_the_family_schedule_to_every_target(family):
    torch.manual_seed(0)
    model = FAMILIES[family]()
    pairs = model.ema_pairs()
    assert pairs, family
    with torch.no_grad():  # an optimiser step moved the online modules away from their targets
        for online, _target in pairs:
            for parameter in online.parameters():
                parameter.add_(torch.randn_like(parameter) * 0.1)
    before = [
        ([t.detach().clone() for t in target.parameters()], [o.detach().clone() for o in online.parameters()])
        for online, target in pairs
    ]
    callback = JepaEmaCallback()
    callback.on_train_begin(None, None, None, model=model)
    state = TrainerState(global_step=2, max_steps=4)  # the second optimiser step of four just ran
    callback.on_step_end(None, state, None, model=model)
    momentum = ema_momentum(1, 4, 0.9, 0.99)
    assert callback.last_momentum == pytest.approx(momentum)
    for (_online, target), (targets, onlines) in zip(pairs, before):
        assert len(targets) == len(onlines) > 0
        for new, old, source in zip(target.parameters(), targets, onlines):
            torch.testing.assert_close(new, momentum * old + (1 - momentum) * source)
            assert not new.requires_grad  # targets stay out of the optimiser
