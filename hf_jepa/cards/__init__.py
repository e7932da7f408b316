"""Model cards: one renderer per family (`cards/<family>.py`) and the rows they share (`cards/common.py`).

Every family module exports the same two functions::

    render_card(config, metrics, training_args=None, data_args=None, reproduction=None, *, repo_id=None,
                base_model=None, ...)
        -> huggingface_hub.ModelCard
    result_rows(metrics) -> list[tuple[str, str]]

`render_card` is built once, by `common.card_renderer`, around the family's own renderer, which takes the arguments
as one `common.CardInputs`; family-specific extras are keyword-only, e.g. `example_prompt=` of `jepa_reasoner`.
Importing this package loads no family module.
"""
