"""BRo-JEPA in the browser: draw or upload a digit, pick an operation k, see (x + k) mod 10 predicted zero-shot and by
rollout, and the latent turning on the block-rotation predictor's circles."""

from __future__ import annotations

import io

import gradio as gr
import numpy as np
import torch

from .layout import ServedModel, UserInputError, family_page, figure_png, guarded, load_image

__all__ = ["build", "digit_from_drawing", "predict"]

FAMILY = "bro-jepa"
MODEL_TYPES = ("bro_jepa",)
# `hf-jepa train bro-jepa --set ...` when no model is given: make demo's setting (docs/quickstart.md).
QUICK_TRAINING = {"data": "embedded", "max_steps": 600}
TITLE = "BRo-JEPA: modular arithmetic in latent space"
INTRO = (
    "Draw a digit x (pick the brush on the canvas's left first) or upload an image of one, choose an operation k, and the model predicts (x + k) mod 10 "
    "without ever decoding an image: it encodes x, turns the latent with its block-rotation predictor, and reads the "
    "digit off the class prototypes. *Zero-shot* applies k in one step, although training used only k = +-1; "
    "*rollout* applies the trained unit step |k| times."
)
# Blocks drawn on the circle plot: the latent's most energetic rotation planes.
PLOTTED_BLOCKS = 3


def digit_from_drawing(drawing) -> np.ndarray:
    """A drawn canvas (gradio's Sketchpad value, or an RGBA / grey array) as an MNIST-style digit: a light digit on a
    black (28, 28) uint8 canvas, its strokes scaled into the central 20 x 20 and centred by their centre of mass."""
    from PIL import Image

    if isinstance(drawing, dict):
        drawing = drawing.get("composite")
    if drawing is None:
        raise UserInputError("the canvas is blank: draw a digit first")
    array = np.asarray(drawing, dtype=np.float32)
    if array.ndim == 3 and array.shape[-1] == 4:  # ink = opaque and dark: dark strokes on a transparent/white canvas
        luma = array[..., :3] @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
        ink = (array[..., 3] / 255.0) * (1.0 - luma / 255.0)
    elif array.ndim == 3:
        ink = 1.0 - (array[..., :3] @ np.array([0.299, 0.587, 0.114], dtype=np.float32)) / 255.0
    else:
        ink = 1.0 - array / 255.0
    if ink.max() < 0.2:
        raise UserInputError("the canvas is blank: draw a digit first")
    rows, cols = np.nonzero(ink > 0.2)
    crop = ink[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1]
    scale = 20.0 / max(crop.shape)
    size = (max(1, round(crop.shape[1] * scale)), max(1, round(crop.shape[0] * scale)))
    small = np.asarray(Image.fromarray((crop * 255).astype(np.uint8)).resize(size, Image.LANCZOS), dtype=np.float32)
    canvas = np.zeros((28, 28), dtype=np.float32)
    top, left = (28 - small.shape[0]) // 2, (28 - small.shape[1]) // 2
    canvas[top : top + small.shape[0], left : left + small.shape[1]] = small
    total = canvas.sum()
    if total > 0:  # centre of mass to the middle, as MNIST was made
        ys, xs = np.indices(canvas.shape)
        shift_y, shift_x = round(13.5 - (ys * canvas).sum() / total), round(13.5 - (xs * canvas).sum() / total)
        canvas = np.roll(canvas, (shift_y, shift_x), axis=(0, 1))
    return np.clip(canvas, 0, 255).astype(np.uint8)


def digit_from_upload(path: str | None) -> np.ndarray:
    """An uploaded image as grey-scale uint8; a dark-on-light image is inverted (the model saw light digits on dark)."""
    image = load_image(path, "digit image").convert("L")
    array = np.asarray(image, dtype=np.uint8)
    return 255 - array if array.mean() > 127 else array


def predict(classify, digit: np.ndarray, operation: int) -> dict:
    """The modular-arithmetic pipeline's zero-shot and rollout answers for `digit` and `operation`, and the latent's
    path: `{"zero_shot": {...}, "rollout": {...}, "path": (steps + 1, latent_dim) array}`."""
    zero_shot = classify(digit, operation=int(operation))
    rollout = classify(digit, operation=int(operation), rollout=True)
    model = classify.model
    pixels = classify.preprocess(digit, operation=int(operation))["pixel_values"].to(model.device)
    with torch.no_grad():
        latent = model.encode(pixels)
        path = [latent]
        unit = torch.tensor([int(np.sign(operation))], device=model.device)
        for _ in range(abs(int(operation))):
            path.append(model.predict(path[-1], unit))
    return {"zero_shot": zero_shot, "rollout": rollout, "path": torch.cat(path).float().cpu().numpy()}


def circle_plot(model, path: np.ndarray, operation: int):
    """PNG bytes: the latent's rollout path on the rotation blocks with most energy, with the class prototypes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rotation = model.config.predictor_type == "block_rotation"
    pairs = path.reshape(path.shape[0], -1, 2)
    blocks = np.argsort(-np.linalg.norm(pairs[0], axis=-1))[:PLOTTED_BLOCKS]
    prototypes = model.class_prototypes.float().cpu().numpy().reshape(model.config.modulus, -1, 2)
    figure, axes = plt.subplots(1, len(blocks), figsize=(3.2 * len(blocks), 3.4), squeeze=False)
    for axis, block in zip(axes[0], blocks):
        points = pairs[:, block]
        radius = np.linalg.norm(points[0])
        angle = np.linspace(0, 2 * np.pi, 200)
        axis.plot(radius * np.cos(angle), radius * np.sin(angle), color="0.85", lw=1)
        proto = prototypes[:, block]
        axis.scatter(proto[:, 0], proto[:, 1], marker="x", color="0.5", s=25)
        for digit, (x, y) in enumerate(proto):
            axis.annotate(str(digit), (x, y), fontsize=7, color="0.4", xytext=(3, 3), textcoords="offset points")
        axis.plot(points[:, 0], points[:, 1], "-o", color="tab:blue", ms=4)
        axis.scatter(points[-1:, 0], points[-1:, 1], color="tab:red", zorder=3, s=40)
        axis.set_aspect("equal")
        axis.set_title(f"block {block}", fontsize=9)
        axis.tick_params(labelsize=7)
    kind = "rotation planes" if rotation else "latent coordinate pairs (additive predictor: no rotation)"
    figure.suptitle(f"latent path for k = {operation:+d}, {abs(operation)} unit steps, on {kind}", fontsize=9)
    figure.tight_layout()
    return figure_png(figure, dpi=110)


def _result_table(prediction: dict, operation: int) -> str:
    zero, roll = prediction["zero_shot"], prediction["rollout"]
    source = f"{zero['source_digit']} (score {zero['source_score']:.3f})"
    return (
        f"Input read as **{source}**; operation **k = {operation:+d}**\n\n"
        "| | predicted digit | confidence |\n|---|---:|---:|\n"
        f"| zero-shot (k in one step) | {zero['digit']} | {zero['score']:.3f} |\n"
        f"| rollout ({abs(operation)} unit steps) | {roll['digit']} | {roll['score']:.3f} |\n"
    )


def build(served: ServedModel) -> gr.Blocks:
    """The BRo-JEPA app serving `served`'s folder."""
    page = family_page(TITLE, INTRO, served)

    def classifier():
        from transformers import pipeline

        return served.cached("pipeline", lambda folder: pipeline("modular-arithmetic", model=str(folder)))

    def run(digit: np.ndarray, operation):
        if operation is None or not float(operation).is_integer() or abs(int(operation)) > 9:
            raise UserInputError(f"the operation must be a whole number from -9 to +9, got {operation!r}")
        classify = classifier()
        prediction = predict(classify, digit, int(operation))
        plot = circle_plot(classify.model, prediction["path"], int(operation))
        from PIL import Image

        return "", _result_table(prediction, int(operation)), Image.fromarray(digit), Image.open(io.BytesIO(plot))

    @guarded(outputs=4)
    def from_drawing(drawing, operation):
        return run(digit_from_drawing(drawing), operation)

    @guarded(outputs=4)
    def from_upload(path, operation):
        return run(digit_from_upload(path), operation)

    with page:
        with gr.Row():
            with gr.Column():
                with gr.Tab("Draw"):
                    canvas = gr.Sketchpad(
                        label="Draw a digit",
                        type="numpy",
                        image_mode="RGBA",
                        elem_id="bro-canvas",
                        height=320,
                        canvas_size=(280, 280),
                        brush=gr.Brush(default_size=18, colors=["#000000"], color_mode="fixed"),
                        layers=False,
                    )
                    run_drawing = gr.Button("Predict from the drawing", variant="primary", elem_id="bro-run-drawing")
                with gr.Tab("Upload"):
                    # A file, not gr.Image: gradio would reject a file that is no image before our message could.
                    upload = gr.File(
                        label="Upload an image of a digit (a light digit on a dark background, as in MNIST)",
                        file_types=["image"],
                        type="filepath",
                        elem_id="bro-upload",
                    )
                    run_upload = gr.Button("Predict from the upload", variant="primary", elem_id="bro-run-upload")
                operation = gr.Slider(-9, 9, value=3, step=1, label="operation k", elem_id="bro-operation")
            with gr.Column():
                message = gr.Markdown(elem_id="bro-message")
                result = gr.Markdown(elem_id="bro-result")
                seen = gr.Image(
                    label="what the model saw (28 x 28)",
                    elem_id="bro-seen",
                    height=140,
                    interactive=False,
                    format="png",
                )
        circle = gr.Image(
            label="the latent on the rotation circles", elem_id="bro-circle", interactive=False, format="png"
        )
        outputs = [message, result, seen, circle]
        run_drawing.click(from_drawing, [canvas, operation], outputs)
        run_upload.click(from_upload, [upload, operation], outputs)
    return page
