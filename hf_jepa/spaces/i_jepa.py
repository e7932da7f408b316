"""I-JEPA in the browser: a few images in, their embedding similarity heat map out, with the model's collapse
diagnostics (effective rank, mean cosine) on the images uploaded."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from . import similarity
from .layout import ServedModel, UserInputError, family_page, guarded, load_image

__all__ = ["build", "embed_images", "images"]

FAMILY = "i-jepa"
MODEL_TYPES = ("i_jepa",)
# `hf-jepa train i-jepa --set ...` when no model is given: the tiny preset on the embedded digits (scikit-learn's
# 8 x 8 digits upscaled to 28 x 28), well under a minute on two CPU cores.
QUICK_TRAINING = {"data": "embedded", "preset": "tiny", "max_steps": 100}
TITLE = "I-JEPA: image embeddings and their collapse diagnostics"
INTRO = (
    f"Upload {similarity.MIN_ITEMS} to {similarity.MAX_ITEMS} images (PNG, JPEG, ...; the model was trained on "
    "light digits on a dark background, MNIST-style). The model embeds each with its EMA target encoder, "
    "average-pooled over the patches (the `jepa-feature-extraction` pipeline: converted to the model's channels and "
    "resized to its image size), and the page shows how similar the embeddings are, with the collapse diagnostics on "
    "exactly these images: a collapsed model maps every image to nearly the same direction (mean cosine near 1, "
    "effective rank near 1)."
)


def images(paths) -> tuple[list[str], list]:
    """(file names, PIL images) of the uploaded files at `paths` (gr.File's list of paths), each read with
    `load_image`; a `UserInputError` for a file that is no image or too large, or unless there are MIN_ITEMS to
    MAX_ITEMS of them."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    paths = [str(p) for p in paths or []]
    if not paths:
        raise UserInputError(f"no images: upload {similarity.MIN_ITEMS} or more image files first")
    similarity.check_count(len(paths), "images")
    names = [Path(p).name for p in paths]
    return names, [load_image(p, f"image {i + 1} ({names[i]})") for i, p in enumerate(paths)]


def embed_images(extract, paths):
    """(the uploads' file names, their `(N, hidden)` embeddings from the feature-extraction pipeline `extract`)."""
    names, pictures = images(paths)
    return names, similarity.embed(extract, pictures)


def build(served: ServedModel) -> gr.Blocks:
    """The I-JEPA app serving `served`'s folder."""
    page = family_page(TITLE, INTRO, served)

    @guarded(outputs=4)
    def run(paths):
        names, embeddings = embed_images(similarity.feature_extractor(served), paths)
        return similarity.show(names, embeddings, "images", "image file")

    with page:
        with gr.Row():
            with gr.Column():
                # A file, not gr.Image: gradio would reject a file that is no image before our message could.
                upload = gr.File(
                    label=f"images ({similarity.MIN_ITEMS} to {similarity.MAX_ITEMS}), numbered in upload order",
                    file_count="multiple",
                    file_types=["image"],
                    type="filepath",
                    elem_id="ijepa-upload",
                )
                button = gr.Button("Embed and compare", variant="primary", elem_id="ijepa-run")
        outputs = similarity.result_components("ijepa")
        button.click(run, upload, outputs)
    return page
