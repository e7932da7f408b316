"""Model cards: one renderer per family (`cards/<family>.py`) and the rows they share (`cards/common.py`).

Every family module exports the same two functions::

    render_card(config, metrics, training_args=None, data_args=None, reproduction=None, *, repo_id=None, ...)
        -> huggingface_hub.ModelCard
    result_rows(metrics) -> list[tuple[str, str]]

(family-specific extras are keyword-only, e.g. `example_prompt=` of `jepa_reasoner`). Importing this package loads
no family module: :func:`card_module` imports the one a `model_type` needs.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["CARD_MODULES", "card_module"]

# model_type -> the module (under hf_jepa.cards) that renders its card.
CARD_MODULES = {
    "bro_jepa": "bro_jepa",
    "epm_jepa": "epm_jepa",
    "t_jepa": "t_jepa",
    "i_jepa": "i_jepa",
    "jepa_reasoner": "jepa_reasoner",
    "jepa_mono_talker": "jepa_reasoner",
    "jepa_dual_talker": "jepa_reasoner",
    "jepa_reasoner_with_talker": "jepa_reasoner",
    "jepa_coupled_lm": "jepa_reasoner",
    "jepa_coconut": "jepa_reasoner",
}


def card_module(model_type: str) -> ModuleType:
    """The card module of `model_type` (it has `render_card` and `result_rows`); `KeyError` for an unknown type."""
    if model_type not in CARD_MODULES:
        raise KeyError(f"no model card for model_type {model_type!r}; known: {sorted(CARD_MODULES)}")
    return importlib.import_module(f"{__name__}.{CARD_MODULES[model_type]}")
