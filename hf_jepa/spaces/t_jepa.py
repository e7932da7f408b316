"""T-JEPA in the browser: a few sentences in, their embedding similarity heat map out, with the model's collapse
diagnostics (effective rank, mean cosine) on the sentences entered."""

from __future__ import annotations

import gradio as gr

from . import similarity
from .layout import ServedModel, UserInputError, family_page, guarded

__all__ = ["build", "embed_sentences", "sentences"]

FAMILY = "t-jepa"
MODEL_TYPES = ("t_jepa",)
# `hf-jepa train t-jepa --set ...` when no model is given: the tiny preset on CPython's own documentation sentences
# (pydoc_data.topics, the recipe's embedded corpus), half a minute on two CPU cores.
QUICK_TRAINING = {"data": "embedded", "preset": "tiny", "max_steps": 60}
TITLE = "T-JEPA: sentence embeddings and their collapse diagnostics"
INTRO = (
    f"Enter {similarity.MIN_ITEMS} to {similarity.MAX_ITEMS} sentences, one per line. The model embeds each with its "
    "EMA target encoder, mean-pooled over the tokens (the `jepa-feature-extraction` pipeline), and the page shows how "
    "similar the embeddings are, with the collapse diagnostics T-JEPA is known for on exactly these sentences: a "
    "collapsed model maps every sentence to nearly the same direction (mean cosine near 1, effective rank near 1). "
    "Lines longer than the model's context are cut to it."
)
# A pasted book would only be cut to MAX_ITEMS lines anyway; refuse it before tokenising megabytes.
MAX_CHARACTERS = 20_000
EXAMPLE = "\n".join(
    [
        "A list is a mutable sequence of arbitrary objects.",
        "A tuple is an immutable sequence of arbitrary objects.",
        "A dictionary maps hashable keys to values.",
        "The with statement wraps a block in the methods of a context manager.",
        "An exception interrupts the normal flow of a program.",
        "Integers have unlimited precision.",
    ]
)


def sentences(text: str | None) -> list[str]:
    """The non-blank lines of `text`, stripped: the sentences to embed (a `UserInputError` unless there are
    MIN_ITEMS to MAX_ITEMS of them)."""
    if text and len(text) > MAX_CHARACTERS:
        raise UserInputError(f"the text is {len(text)} characters long; enter at most {MAX_CHARACTERS}")
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        raise UserInputError(f"the box is empty: enter {similarity.MIN_ITEMS} or more sentences, one per line")
    similarity.check_count(len(lines), "sentences")
    return lines


def embed_sentences(extract, text: str | None):
    """(the sentences of `text`, their `(N, hidden)` embeddings from the feature-extraction pipeline `extract`)."""
    lines = sentences(text)
    return lines, similarity.embed(extract, lines, truncation=True)


def build(served: ServedModel) -> gr.Blocks:
    """The T-JEPA app serving `served`'s folder."""
    page = family_page(TITLE, INTRO, served)

    @guarded(outputs=4)
    def run(text):
        lines, embeddings = embed_sentences(similarity.feature_extractor(served), text)
        return similarity.show(lines, embeddings, "sentences", "sentence")

    with page:
        with gr.Row():
            with gr.Column():
                box = gr.Textbox(
                    label=f"sentences, one per line ({similarity.MIN_ITEMS} to {similarity.MAX_ITEMS})",
                    value=EXAMPLE,
                    lines=8,
                    max_lines=20,
                    elem_id="tjepa-sentences",
                )
                button = gr.Button("Embed and compare", variant="primary", elem_id="tjepa-run")
        outputs = similarity.result_components("tjepa")
        button.click(run, box, outputs)
    return page
