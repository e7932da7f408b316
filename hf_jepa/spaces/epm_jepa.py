"""EPM-JEPA in the browser: generate a Moving-MNIST sequence at a chosen gravity, run the three tracks' world models
over it step by step (per-step surprisal, the surprisal gate's firings, the experience buffer filling up), compare
their one-step errors, and reset the buffer or swap in one filled at another gravity.

The tracks: the served folder holds one (its `config.track`); the others are its siblings when the folder sits in the
reproduction's layout (`seedN/{base,vanilla,ei,epm}`), else a short experience phase (`epm_tracks.TRACK_TRAINING`,
the recipe's `stage=adapt`) started from the served folder's weights, trained on embedded data once and cached. A folder
pretrained at g = 0 (`stage=pretrain`) is shown as its own row beside the three tracks adapted from it.

Running a sequence is the gate used online: frame t is predicted from the `context_length` frames before it with the
buffer as it stands; when the step's surprisal exceeds the gate's threshold (its running statistics from training,
read only) the transition is written into the buffer (`EpmJepaModel.warm_experience(window, gated=True)`), so later
steps of tracks B and C read it. The buffers live in the browser session (`BufferState`), not in the shared models.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import threading
from dataclasses import dataclass

import gradio as gr
import numpy as np
import torch

from .epm_tracks import FAMILY, TrackModel, load_tracks
from .layout import ServedModel, UserInputError, family_page, figure_png, guarded

logger = logging.getLogger(__name__)

__all__ = [
    "FAMILY",
    "BufferState",
    "TrackModel",
    "build",
    "check_request",
    "compare_tracks",
    "frame_strip",
    "generate_sequence",
    "load_tracks",
    "reset_buffers",
    "run_world_model",
    "swap_buffers",
]

MODEL_TYPES = ("epm_jepa",)
# `hf-jepa train epm-jepa --set ...` when no model is given: a tiny vanilla base pretrained at g = 0; the three
# tracks are then adapted from it with epm_tracks.TRACK_TRAINING (times measured: docs/guides/browser-apps.md).
QUICK_TRAINING = {
    "data": "embedded",
    "preset": "tiny",
    "track": "vanilla",
    "max_steps": 120,
    "per_device_batch_size": 16,
    "eval_sequences": 32,
}
TITLE = "EPM-JEPA: a world model that learns from surprise"
INTRO = (
    "Generate a Moving-MNIST sequence (two digits bouncing in a 64 x 64 box) under a downward gravity g, then run the "
    "latent world models on it: each predicts the next frame's latent from the three before it. The tracks differ in "
    "how they use experience: **A** has none, **B** adds the aggregated experience to the predictor's hidden state, "
    "**C** turns it into an input-conditioned LoRA of the predictor's weights. Experience is written by the "
    "**surprisal gate**: a step whose prediction error is above the gate's threshold (calibrated in training at "
    "g = 0) goes into the track's buffer and shapes the later predictions. *Reset* empties the buffers; *Swap* "
    "fills them from sequences at another gravity."
)
GRAVITY_RANGE = (0.0, 1.0)
MAX_SEQUENCE_LENGTH = 32
# Sequences a swapped-in buffer is filled from (every transition of each, newest kept up to the capacity).
SWAP_SEQUENCES = 4
FRAMES_PER_ROW = 8
FRAME_SCALE = 2
SHORT_NAMES = {"served": "served", "vanilla": "A", "ei": "B", "epm": "C"}
# The models are shared by every session; a run loads the session's buffer into them, hence one lock.
_MODEL_LOCK = threading.RLock()


# ---------------------------------------------------------------------------------------------------------- buffers


@dataclass(frozen=True)
class BufferState:
    """A copy of one experience buffer: its slots, how many transitions were written, and what they came from."""

    entries: torch.Tensor
    num_writes: int
    origin: str = "empty"

    @property
    def capacity(self) -> int:
        return self.entries.shape[0]

    @property
    def occupancy(self) -> int:
        return min(self.num_writes, self.capacity)


def empty_buffer(model, origin: str = "empty") -> BufferState:
    buffer = model.experience_buffer
    return BufferState(torch.zeros_like(buffer.entries), 0, origin)


def _read_buffer(model, origin: str) -> BufferState:
    buffer = model.experience_buffer
    return BufferState(buffer.entries.detach().clone(), int(buffer.num_writes), origin)


@contextlib.contextmanager
def _holding(model, state: BufferState | None):
    """The block runs with `state` in `model`'s buffer (empty for None); the model's own buffer is restored after."""
    from ..metrics.epm_memory import kept_experience

    with _MODEL_LOCK, kept_experience(model), torch.no_grad():
        if model.experience_buffer is not None:
            state = state or empty_buffer(model)
            model.experience_buffer.entries.copy_(state.entries)
            model.experience_buffer.num_writes.fill_(state.num_writes)
        yield


def reset_buffers(tracks: list[TrackModel]) -> dict[str, BufferState]:
    """An empty buffer for every row with one."""
    return {row.key: empty_buffer(row.model, "empty (reset)") for row in tracks if row.has_buffer}


def swap_buffers(tracks: list[TrackModel], gravity: float, seed: int, length: int) -> dict[str, BufferState]:
    """For every row with a buffer: the buffer emptied and filled with every transition of `SWAP_SEQUENCES`
    sequences at `gravity` (the generator's support stream for `seed`: other digits and starts than the query's)."""
    from ..data import GravityEpisodes

    image_size = tracks[0].model.config.image_size
    support = GravityEpisodes(_world(seed, length, image_size), (float(gravity),), SWAP_SEQUENCES).support(0)
    states = {}
    for row in tracks:
        if row.has_buffer:
            with _holding(row.model, None):
                row.model.warm_experience(support)
                origin = f"swapped in: {SWAP_SEQUENCES} sequences at g = {gravity:.2f}"
                states[row.key] = _read_buffer(row.model, origin)
    return states


# -------------------------------------------------------------------------------------------------------- sequences


@functools.cache
def _digits():
    from ..data import MnistSplits

    return MnistSplits("embedded")


def _world(seed: int, length: int, image_size: int):
    from ..data import MovingMnist
    from ..data.moving_mnist import NUM_DIGITS

    digits = _digits()
    return MovingMnist(
        images=digits.test_images,
        labels=digits.test_labels,
        sequence_length=length,
        num_digits=NUM_DIGITS,
        canvas_size=image_size,
        seed=seed,
    )


def check_request(gravity, seed, length, context_length: int) -> tuple[float, int, int]:
    """`(gravity, seed, length)` as numbers, or a `UserInputError` naming the value out of range."""
    low, high = GRAVITY_RANGE
    shortest = context_length + 2  # context, then at least two scored steps (D needs two)
    if gravity is None or not low <= float(gravity) <= high:
        raise UserInputError(f"the gravity must lie in [{low:g}, {high:g}] px/frame^2, got {gravity!r}")
    if seed is None or not float(seed).is_integer() or not 0 <= int(seed) < 2**31:
        raise UserInputError(f"the seed must be a whole number from 0 to {2**31 - 1}, got {seed!r}")
    if length is None or not float(length).is_integer() or not shortest <= int(length) <= MAX_SEQUENCE_LENGTH:
        raise UserInputError(
            f"the sequence length must be a whole number of frames from {shortest} (the {context_length} context "
            f"frames and two predicted ones) to {MAX_SEQUENCE_LENGTH}, got {length!r}"
        )
    return float(gravity), int(seed), int(length)


def generate_sequence(gravity: float, seed: int, length: int, image_size: int = 64) -> torch.Tensor:
    """`(length, 1, image_size, image_size)` frames in [0, 1]: two embedded test digits under `gravity`, the first
    sequence of the generator seeded with `seed`."""
    return _world(seed, length, image_size).sample_batch(1, gravity=float(gravity))["pixel_values"][0]


def frame_strip(frames: torch.Tensor) -> np.ndarray:
    """The frames as one uint8 grey image: `FRAMES_PER_ROW` per row, each scaled `FRAME_SCALE` times, 2-pixel grey
    gaps."""
    pixels = (frames[:, 0].float().clamp(0, 1) * 255).round().to(torch.uint8).numpy()
    pixels = pixels.repeat(FRAME_SCALE, axis=1).repeat(FRAME_SCALE, axis=2)
    count, side, gap = len(pixels), pixels.shape[1], 2
    columns = min(count, FRAMES_PER_ROW)
    rows = -(-count // columns)
    strip = np.full((rows * (side + gap) - gap, columns * (side + gap) - gap), 96, dtype=np.uint8)
    for index, frame in enumerate(pixels):
        top, left = (index // columns) * (side + gap), (index % columns) * (side + gap)
        strip[top : top + side, left : left + side] = frame
    return strip


# ------------------------------------------------------------------------------------------------------ world model


def run_world_model(model, frames: torch.Tensor, buffer: BufferState | None = None) -> dict:
    """Run `model` over `(T, C, H, W)` `frames` one step at a time, starting from `buffer` (None: empty; ignored by a
    model without one). Step t (t = context_length .. T-1) predicts frame t's latent from the frames before it with
    the buffer as it stands; a surprisal above the gate's threshold fires the gate, which writes the transition.

    Returns `surprisal`, `fired` and `occupancy` (after the step's write; None without a buffer) per step,
    `nearest_frame` (the frame whose target latent is nearest the prediction: the prediction decoded by retrieval),
    `threshold`, `normalized_error` (D over the steps), `copy_last_error` (D of repeating the last latent),
    `mean_surprisal`, `firings`, `retrieved` (steps whose nearest frame is the true one) and `buffer` (the new
    `BufferState`, None without a buffer). The model's own buffer and gate are left as they were."""
    from ..metrics.world_model import normalized_prediction_error

    k = model.config.context_length
    pixels = frames[None].to(model.dtype)
    has_buffer = model.experience_buffer is not None
    before = buffer.occupancy if buffer is not None else 0
    with _holding(model, buffer):
        threshold = float(model.surprisal_gate.threshold())
        targets = model.encode(pixels, use_target_encoder=True)[0].float()
        predicted, surprisal, fired, occupancy = [], [], [], []
        for t in range(k, pixels.shape[1]):
            window = pixels[:, t - k : t + 1]
            output = model(window, update_experience=False)
            predicted.append(output.predicted_latents[0, 0].float())
            surprisal.append(float(output.surprisal[0, 0]))
            fired.append(surprisal[-1] > threshold)
            if has_buffer and fired[-1]:
                model.warm_experience(window, gated=True)  # the same prediction, written because it fired
            occupancy.append(model.experience_buffer.occupancy if has_buffer else None)
        writes = sum(fired)
        origin = buffer.origin if buffer is not None else "empty"
        state = _read_buffer(model, _after_writes(origin) if writes else origin) if has_buffer else None
    predicted, true = torch.stack(predicted), targets[k:]
    nearest = torch.cdist(predicted, targets).argmin(dim=-1).tolist()
    return {
        "surprisal": surprisal,
        "fired": fired,
        "occupancy": occupancy,
        "nearest_frame": nearest,
        "threshold": threshold,
        "normalized_error": normalized_prediction_error(predicted, true),
        "copy_last_error": normalized_prediction_error(targets[k - 1 : -1], true),
        "mean_surprisal": float(np.mean(surprisal)),
        "firings": writes,
        "retrieved": sum(int(j == t) for t, j in enumerate(nearest, start=k)),
        "occupancy_before": before if has_buffer else None,
        "buffer": state,
    }


def _after_writes(origin: str) -> str:
    """What a buffer holds after the gate wrote into it."""
    if origin.startswith("swapped in"):
        return origin if origin.endswith("+ gate writes") else f"{origin} + gate writes"
    return "gate writes"


def compare_tracks(
    tracks: list[TrackModel], frames: torch.Tensor, buffers: dict[str, BufferState] | None = None
) -> tuple[dict[str, dict], dict[str, BufferState]]:
    """`run_world_model` for every row on the same frames, each from its buffer in `buffers` (missing: empty).
    A row with a buffer also gets `memory_effect`: its D minus the D of the same run from an empty buffer (what the
    buffer's content changed; 0 when it starts empty). Returns (row key -> result, row key -> the new buffer)."""
    buffers = dict(buffers or {})
    results = {}
    for row in tracks:
        result = results[row.key] = run_world_model(row.model, frames, buffers.get(row.key))
        if result["buffer"] is not None:
            buffers[row.key] = result["buffer"]
            empty = run_world_model(row.model, frames, None)["normalized_error"]
            result["memory_effect"] = result["normalized_error"] - empty
    return results, buffers


# ------------------------------------------------------------------------------------------------------------- views


def _summary_table(tracks: list[TrackModel], results: dict[str, dict], gravity: float) -> str:
    steps = len(next(iter(results.values()))["surprisal"])
    lines = [
        f"One-step prediction of **{steps} frames at g = {gravity:.2f}**\n",
        "| track | D | copy-last D | memory effect | mean surprisal | gate fired | retrieved | buffer |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in tracks:
        result = results[row.key]
        buffer, effect = "none", "no memory"
        if result["buffer"] is not None:
            buffer = f"{result['occupancy_before']} -> {result['buffer'].occupancy} / {result['buffer'].capacity}"
            effect = f"{result['memory_effect']:+.2e}"
        lines.append(
            f"| {row.label} | {result['normalized_error']:.4f} | {result['copy_last_error']:.4f} | {effect} | "
            f"{result['mean_surprisal']:.5f} | {result['firings']} / {steps} | {result['retrieved']} / {steps} | "
            f"{buffer} |"
        )
    lines.append(
        "\nD: squared error of the predicted latents over the variance of the true ones (0 is perfect, 1 predicts "
        "their mean); copy-last D repeats the last latent instead. Memory effect: D minus the D of the same run "
        "from an empty buffer. Retrieved: steps whose prediction is nearer the true frame's latent than any other "
        "frame's. Buffer: occupancy before -> after the run."
    )
    return "\n".join(lines)


def _steps_table(tracks: list[TrackModel], results: dict[str, dict], context_length: int) -> str:
    header = ["frame"] + [f"{SHORT_NAMES[r.key]} surprisal" for r in tracks]
    header += [f"{SHORT_NAMES[r.key]} buffer" for r in tracks if r.has_buffer]
    lines = [
        "Per step (* = the gate fired: the step's surprisal exceeds the track's threshold "
        + ", ".join(f"{SHORT_NAMES[r.key]} {results[r.key]['threshold']:.5f}" for r in tracks)
        + ")\n",
        "| " + " | ".join(header) + " |",
        "|" + "---:|" * len(header),
    ]
    for step in range(len(results[tracks[0].key]["surprisal"])):
        cells = [str(context_length + step)]
        for row in tracks:
            result = results[row.key]
            cells.append(f"{result['surprisal'][step]:.5f}" + (" *" if result["fired"][step] else ""))
        cells += [str(results[r.key]["occupancy"][step]) for r in tracks if r.has_buffer]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _buffer_table(tracks: list[TrackModel], buffers: dict[str, BufferState]) -> str:
    lines = ["| buffer of | occupancy | content |", "|---|---:|---|"]
    for row in tracks:
        if row.has_buffer:
            state = buffers.get(row.key) or empty_buffer(row.model)
            lines.append(f"| {row.label} | {state.occupancy} / {state.capacity} | {state.origin} |")
    return "\n".join(lines)


def _plot(tracks: list[TrackModel], results: dict[str, dict], context_length: int):
    """PIL image: per-step surprisal per row (gate firings circled, thresholds dashed) and buffer occupancy."""
    from PIL import Image

    from ..metrics.figures import pyplot

    plt = pyplot()
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 3.4), gridspec_kw={"width_ratios": [3, 2]})
    for index, row in enumerate(tracks):
        result, color = results[row.key], f"C{index}"
        steps = np.arange(context_length, context_length + len(result["surprisal"]))
        values = np.asarray(result["surprisal"])
        left.plot(steps, values, "-o", ms=3, color=color, label=row.label)
        fired = np.asarray(result["fired"])
        left.scatter(steps[fired], values[fired], s=90, facecolors="none", edgecolors=color, linewidths=1.5)
        left.axhline(result["threshold"], color=color, ls="--", lw=0.8)
        if result["buffer"] is not None:
            right.step(steps, result["occupancy"], where="post", color=color, label=row.label)
            right.axhline(result["buffer"].capacity, color="0.7", ls=":", lw=1)
    left.set(title="surprisal per step (circles: the gate fired; dashed: threshold)", xlabel="frame", ylabel="MSE")
    right.set(title="experience buffer occupancy", xlabel="frame", ylabel="entries")
    for axis in (left, right):
        axis.title.set_fontsize(9)
        axis.tick_params(labelsize=7)
        if axis.lines:
            axis.legend(fontsize=7)
    figure.tight_layout()
    return Image.open(io.BytesIO(figure_png(figure, dpi=100)))


def _tracks_note(tracks: list[TrackModel]) -> str:
    lines = [f"- **{row.label}**: {row.source}" for row in tracks]
    return "**Tracks ready.**\n\n" + "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------- app


def build(served: ServedModel) -> gr.Blocks:
    """The EPM-JEPA app serving `served`'s folder (and the tracks `load_tracks` finds or trains for it)."""
    page = family_page(TITLE, INTRO, served)

    def tracks(progress=None) -> list[TrackModel]:
        return served.cached("tracks", lambda folder: load_tracks(folder, served.cache_dir, progress=progress))

    def request(gravity, seed, length):
        rows = tracks()
        config = rows[0].model.config
        gravity, seed, length = check_request(gravity, seed, length, config.context_length)
        return rows, gravity, generate_sequence(gravity, seed, length, config.image_size), seed, length

    def prepare(progress=gr.Progress(track_tqdm=True)):  # noqa: B008 - gradio's way of asking for progress
        try:
            rows = tracks(progress)
        except Exception as error:  # noqa: BLE001 - shown in the page; the app keeps serving
            logger.exception("could not prepare the tracks")
            return f"**The tracks could not be prepared:** {error}", ""
        return _tracks_note(rows), _buffer_table(rows, {})

    @guarded(outputs=2)
    def generate(gravity, seed, length):
        _, _, frames, _, _ = request(gravity, seed, length)
        return "", frame_strip(frames)

    @guarded(outputs=7)
    def run(gravity, seed, length, buffers):
        rows, gravity, frames, _, _ = request(gravity, seed, length)
        results, buffers = compare_tracks(rows, frames, buffers)
        k = rows[0].model.config.context_length
        return (
            "",
            frame_strip(frames),
            _summary_table(rows, results, gravity),
            _plot(rows, results, k),
            _steps_table(rows, results, k),
            _buffer_table(rows, buffers),
            buffers,
        )

    @guarded(outputs=3)
    def reset():
        rows = tracks()
        buffers = reset_buffers(rows)
        return "", _buffer_table(rows, buffers), buffers

    @guarded(outputs=3)
    def swap(swap_gravity, seed, length):
        rows = tracks()
        config = rows[0].model.config
        swap_gravity, seed, length = check_request(swap_gravity, seed, length, config.context_length)
        buffers = swap_buffers(rows, swap_gravity, seed, length)
        return "", _buffer_table(rows, buffers), buffers

    def keeping(handler, kept: tuple[int, ...]):
        """`handler` whose outputs at `kept` stay as they were when it refused the input (a bad request must not
        empty the session's buffers)."""

        @functools.wraps(handler)
        def wrapped(*args):
            values = list(handler(*args))
            if values[0]:
                for index in kept:
                    values[index] = gr.skip()
            return tuple(values)

        return wrapped

    with page:
        with gr.Row():
            with gr.Column(scale=1):
                gravity = gr.Slider(
                    *GRAVITY_RANGE, value=0.3, step=0.01, label="gravity g (px/frame²)", elem_id="epm-gravity"
                )
                seed = gr.Number(value=0, precision=0, label="seed", elem_id="epm-seed")
                length = gr.Number(
                    value=12,
                    precision=0,
                    label=f"sequence length (frames, up to {MAX_SEQUENCE_LENGTH})",
                    elem_id="epm-length",
                )
                with gr.Row():
                    generate_button = gr.Button("Generate", elem_id="epm-generate")
                    run_button = gr.Button("Run the world model", variant="primary", elem_id="epm-run")
                gr.Markdown("### Experience buffers")
                swap_gravity = gr.Slider(
                    *GRAVITY_RANGE,
                    value=0.0,
                    step=0.01,
                    label="swap in a buffer filled at g =",
                    elem_id="epm-swap-gravity",
                )
                with gr.Row():
                    reset_button = gr.Button("Reset buffer", elem_id="epm-reset")
                    swap_button = gr.Button("Swap buffer", elem_id="epm-swap")
                buffer_view = gr.Markdown(elem_id="epm-buffer")
            with gr.Column(scale=3):
                tracks_view = gr.Markdown("Preparing the tracks ...", elem_id="epm-tracks")
                message = gr.Markdown(elem_id="epm-message")
                gr.Markdown(
                    "The sequence, left to right: the first frames are the context, every later one is predicted."
                )
                frames_view = gr.Image(
                    show_label=False,
                    elem_id="epm-frames",
                    interactive=False,
                    format="png",
                )
                summary = gr.Markdown(elem_id="epm-table")
                plot = gr.Image(show_label=False, elem_id="epm-plot", interactive=False, format="png")
                steps = gr.Markdown(elem_id="epm-steps")
        buffers = gr.State(None)
        page.load(prepare, outputs=[tracks_view, buffer_view])
        generate_button.click(generate, [gravity, seed, length], [message, frames_view])
        run_button.click(
            keeping(run, kept=(5, 6)),
            [gravity, seed, length, buffers],
            [message, frames_view, summary, plot, steps, buffer_view, buffers],
        )
        reset_button.click(keeping(reset, kept=(1, 2)), None, [message, buffer_view, buffers])
        swap_button.click(keeping(swap, kept=(1, 2)), [swap_gravity, seed, length], [message, buffer_view, buffers])
    return page
