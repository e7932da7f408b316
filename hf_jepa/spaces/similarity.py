"""What the T-JEPA and I-JEPA apps share: a few items (sentences, images) embedded with the `jepa-feature-extraction`
pipeline, their collapse diagnostics (`hf_jepa.metrics.collapse`) with what they mean, the per-item norms and the
cosine-similarity heat map."""

from __future__ import annotations

import io
import math

import gradio as gr
import numpy as np
import torch
import torch.nn.functional as F

from ..metrics.collapse import CollapseWatchdog, cosine_similarity_stats, effective_rank, embedding_std
from .layout import UserInputError, figure_png

__all__ = [
    "MAX_ITEMS",
    "MIN_ITEMS",
    "check_count",
    "collapse_verdict",
    "cosine_matrix",
    "diagnostics",
    "diagnostics_rows",
    "embed",
    "feature_extractor",
    "heatmap_png",
    "heatmap_title",
    "item_rows",
    "result_components",
]

MIN_ITEMS, MAX_ITEMS = 2, 64
# Heat-map cells are annotated with their cosine up to this many items (beyond it the numbers would not fit).
ANNOTATED_ITEMS = 12
# Items' text or file names are cut to this many characters in the table.
SHOWN_CHARACTERS = 80


def check_count(count: int, what: str) -> None:
    """A `UserInputError` unless MIN_ITEMS <= count <= MAX_ITEMS (`what`: "sentences", "images")."""
    if count < MIN_ITEMS:
        raise UserInputError(
            f"{what}: got {count}, need at least {MIN_ITEMS} (the heat map and the diagnostics compare {what} with "
            "each other)"
        )
    if count > MAX_ITEMS:
        raise UserInputError(f"{what}: got {count}, at most {MAX_ITEMS} are compared at once")


def feature_extractor(served):
    """The served folder's `jepa-feature-extraction` pipeline, built once and shared by the page's handlers."""

    def build(folder):
        from transformers import pipeline

        import hf_jepa  # noqa: F401 - registers the task

        return pipeline("jepa-feature-extraction", model=str(folder))

    return served.cached("pipeline", build)


def embed(extract, items: list, **kwargs) -> torch.Tensor:
    """`(N, hidden)` float32 embeddings of `items` from the `jepa-feature-extraction` pipeline `extract` (the model's
    target encoder, mean-pooled: `model.embed`); `kwargs` go to the pipeline (e.g. `truncation=True`)."""
    embeddings = extract(list(items), return_tensors=True, batch_size=min(len(items), 16), **kwargs)
    return torch.stack([embedding.float() for embedding in embeddings])


def cosine_matrix(embeddings: torch.Tensor) -> np.ndarray:
    """The `(N, N)` cosine similarities of the rows of `embeddings` (the heat map; its off-diagonal mean is the
    `cosine_similarity_stats` mean)."""
    unit = F.normalize(embeddings.double(), dim=-1)
    return (unit @ unit.T).cpu().numpy()


def diagnostics(embeddings: torch.Tensor) -> dict:
    """The collapse diagnostics of `(N, D)` embeddings, from `hf_jepa.metrics.collapse`: `effective_rank` (centred
    RankMe), `rank_bound` (min(N - 1, D), the most it can be), `cosine_mean` / `cosine_std` over the N (N - 1) / 2
    pairs, `embedding_std_ratio` (`embedding_std` x sqrt(D), ~1 isotropic, 0 collapsed), `norms` (per item), `dim`,
    `count`, and `warnings`: the `CollapseWatchdog`'s messages at its default thresholds (the rank rule only when
    `rank_bound` exceeds its threshold: a centred rank of N items is at most N - 1, so too few items always read as
    collapsed) and `rank_judged` (whether the rank rule was applied)."""
    count, dim = embeddings.shape
    cosine = cosine_similarity_stats(embeddings)
    result = {
        "count": int(count),
        "dim": int(dim),
        "effective_rank": effective_rank(embeddings),
        "rank_bound": int(min(count - 1, dim)),
        "cosine_mean": cosine["mean"],
        "cosine_std": cosine["std"],
        "embedding_std_ratio": embedding_std(embeddings) * math.sqrt(dim),
        "norms": embeddings.double().norm(dim=-1).tolist(),
    }
    watchdog = CollapseWatchdog()
    result["rank_judged"] = watchdog.rank_threshold is not None and result["rank_bound"] > watchdog.rank_threshold
    measured = {k: result[k] for k in ("cosine_mean", "embedding_std_ratio")}
    if result["rank_judged"]:
        measured["effective_rank"] = result["effective_rank"]
    result["warnings"] = watchdog.check(measured, dim=dim)
    return result


def diagnostics_rows(result: dict) -> list[tuple[str, str, str]]:
    """(measure, value as shown, what it means) for the diagnostics table."""
    watchdog = CollapseWatchdog()
    count = result["count"]
    return [
        (
            "effective rank",
            f"{result['effective_rank']:.2f} of at most {result['rank_bound']}",
            "RankMe entropy rank of the centred embeddings: how many directions the items spread over (at most "
            f"min(N - 1, d)); below {watchdog.rank_threshold:g} is dimensional collapse",
        ),
        (
            "mean pairwise cosine",
            f"{result['cosine_mean']:.3f} ± {result['cosine_std']:.3f}",
            f"over the {count * (count - 1) // 2} pairs (± their std): near 0 the items point different ways, above "
            f"{watchdog.cosine_threshold:g} they all point the same way",
        ),
        (
            "embedding std × √d",
            f"{result['embedding_std_ratio']:.3f}",
            "spread of the unit-length embeddings per dimension, times √d: about 1 for isotropic embeddings, below "
            f"{watchdog.std_fraction:g} collapsed to one direction",
        ),
    ]


def collapse_verdict(result: dict) -> str:
    """One paragraph: the watchdog's warnings, or that none of its rules tripped."""
    watchdog = CollapseWatchdog()
    rank_note = (
        ""
        if result["rank_judged"]
        else f" The rank rule is not applied: {result['count']} items allow a rank of at most {result['rank_bound']}."
    )
    if result["warnings"]:
        listed = "; ".join(result["warnings"])
        return f"**Collapse warning** (the collapse watchdog's default thresholds): {listed}.{rank_note}"
    return (
        f"No collapse signs at the collapse watchdog's default thresholds (rank ≥ {watchdog.rank_threshold:g}, "
        f"cosine ≤ {watchdog.cosine_threshold:g}, std × √d ≥ {watchdog.std_fraction:g}).{rank_note}"
    )


def _cell(text: str) -> str:
    """`text` cut to SHOWN_CHARACTERS and escaped for a Markdown table cell (shown literally)."""
    text = " ".join(str(text).split())
    if len(text) > SHOWN_CHARACTERS:
        text = text[: SHOWN_CHARACTERS - 1] + "…"
    text = text.replace("&", "&amp;")
    return "".join("\\" + c if c in "\\`*_{}[]<>()#+-.!|~$" else c for c in text)


def item_rows(labels: list[str], result: dict) -> list[tuple[str, str, str]]:
    """(index as shown, label, embedding norm as shown) per item; indices start at 1, as on the heat map."""
    return [(str(i + 1), label, f"{norm:.3f}") for i, (label, norm) in enumerate(zip(labels, result["norms"]))]


def _markdown_table(header: tuple[str, ...], rows, align: str) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def diagnostics_markdown(result: dict, what: str) -> str:
    rows = [(f"**{name}**", value, meaning) for name, value, meaning in diagnostics_rows(result)]
    head = f"Collapse diagnostics of the {result['count']} {what} entered ({result['dim']}-dimensional embeddings)\n\n"
    return (
        head
        + _markdown_table(("measure", "value", "what it means"), rows, ("---", "---:", "---"))
        + ("\n" + collapse_verdict(result) + "\n")
    )


def items_markdown(labels: list[str], result: dict, item: str) -> str:
    rows = [(index, _cell(label), norm) for index, label, norm in item_rows(labels, result)]
    return _markdown_table(("#", item, "embedding norm"), rows, ("---:", "---", "---:"))


def heatmap_png(cosines: np.ndarray, title: str) -> bytes:
    """PNG bytes: the `(N, N)` cosine matrix as a heat map (-1 blue .. +1 red), rows and columns labelled 1..N."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    count = cosines.shape[0]
    size = min(9.0, 3.5 + 0.12 * count)
    figure, axis = plt.subplots(figsize=(size + 1.2, size))
    image = axis.imshow(cosines, cmap="RdBu_r", vmin=-1.0, vmax=1.0, interpolation="nearest")
    step = 1 if count <= 24 else (2 if count <= 48 else 4)
    ticks = np.arange(0, count, step)
    font = 8 if count <= 24 else 6
    axis.set_xticks(ticks, [str(t + 1) for t in ticks], fontsize=font)
    axis.set_yticks(ticks, [str(t + 1) for t in ticks], fontsize=font)
    if count <= ANNOTATED_ITEMS:
        for row in range(count):
            for col in range(count):
                value = cosines[row, col]
                colour = "white" if abs(value) > 0.6 else "black"
                axis.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=7, color=colour)
    axis.set_title(title, fontsize=10, loc="left")
    axis.set_xlabel("# (as in the table)", fontsize=8)
    axis.set_ylabel("# (as in the table)", fontsize=8)
    figure.colorbar(image, ax=axis, fraction=0.046, pad=0.04, label="cosine similarity")
    figure.tight_layout()
    return figure_png(figure, dpi=100)


def heatmap_title(count: int, what: str) -> str:
    return f"cosine similarity of the {count} {what}"


def show(labels: list[str], embeddings: torch.Tensor, what: str, item: str) -> tuple:
    """The four outputs of `result_components` for `labels` and their embeddings: no message, the diagnostics
    table, the per-item table and the heat map (a PIL image). `what` names the items ("sentences"), `item` one of
    them ("sentence")."""
    from PIL import Image

    result = diagnostics(embeddings)
    plot = heatmap_png(cosine_matrix(embeddings), heatmap_title(len(labels), what))
    return "", diagnostics_markdown(result, what), items_markdown(labels, result, item), Image.open(io.BytesIO(plot))


def result_components(prefix: str) -> list:
    """The outputs both apps show, in `show`'s order, with elem_ids `<prefix>-message`, `-diagnostics`, `-items`,
    `-heatmap`; call inside the page."""
    message = gr.Markdown(elem_id=f"{prefix}-message")
    table = gr.Markdown(elem_id=f"{prefix}-diagnostics")
    with gr.Row():
        with gr.Column(scale=3):
            # No label: gradio draws it over the top of the image; the figure has its own title.
            heatmap = gr.Image(
                label="cosine-similarity heat map",
                show_label=False,
                elem_id=f"{prefix}-heatmap",
                interactive=False,
                format="png",
            )
        with gr.Column(scale=2):
            items = gr.Markdown(elem_id=f"{prefix}-items")
    return [message, table, items, heatmap]
