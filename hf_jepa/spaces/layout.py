"""What every family's app shares: the page layout, the model it serves, and bad input shown as a message.

An app is a `gradio.Blocks` page: a header naming the family and the model folder, a status line, the family's own
controls, and a footer with the loading snippet. The model is resolved when the page first loads (`ServedModel`):
a folder or Hub id given with `--model`, or the family's quick preset trained on embedded data, with the trainer's
progress bar shown in the page, then cached. Handlers raise `UserInputError` (or the pipelines' own ValueError /
TypeError, which name the argument) for bad input; `guarded` turns it into a message in the page and keeps serving.
"""

from __future__ import annotations

import functools
import io
import logging
import threading
from collections.abc import Callable
from pathlib import Path

import gradio as gr

from .models import resolve_model

logger = logging.getLogger(__name__)

__all__ = [
    "MAX_IMAGE_PIXELS",
    "ServedModel",
    "UserInputError",
    "family_page",
    "figure_png",
    "guarded",
    "load_image",
    "theme",
]

# Larger uploads are refused with a message (a photo from a phone is ~12 Mpx; nothing here needs more than 1 Mpx).
MAX_IMAGE_PIXELS = 4096 * 4096
# The upload size the server accepts at all (gradio refuses bigger files before any handler runs).
MAX_FILE_SIZE = "20mb"


class UserInputError(ValueError):
    """Bad input from the page: the message is shown to the user as is."""


def figure_png(figure, dpi: int) -> bytes:
    """The PNG bytes of the matplotlib `figure` at `dpi`. The figure is closed: a page draws one per request, and
    pyplot keeps every open figure alive."""
    from ..metrics.figures import pyplot

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    pyplot().close(figure)
    return buffer.getvalue()


def theme() -> gr.themes.Base:
    """The apps' theme, with local fonts only (the machines these run on may have no route to a font CDN)."""
    return gr.themes.Soft(font=["ui-sans-serif", "system-ui", "sans-serif"], font_mono=["ui-monospace", "monospace"])


class ServedModel:
    """The folder an app serves, resolved once on first use (training the quick preset if needed)."""

    def __init__(self, family: str, model: str | None = None, cache_dir: str | Path | None = None):
        self.family, self.model, self.cache_dir = family, model, cache_dir
        self._folder: Path | None = None
        self.note = ""
        self._lock = threading.Lock()
        self._loaded: dict[str, object] = {}

    def folder(self, progress: Callable | None = None) -> Path:
        with self._lock:
            if self._folder is None:
                self._folder, self.note = resolve_model(self.family, self.model, self.cache_dir, progress=progress)
            return self._folder

    def cached(self, key: str, build: Callable[[Path], object]):
        """`build(folder)` once per key (a pipeline, a model): the page's handlers share it."""
        folder = self.folder()
        with self._lock:
            if key not in self._loaded:
                self._loaded[key] = build(folder)
            return self._loaded[key]


def guarded(outputs: int, message_index: int = 0):
    """Decorate a handler returning `outputs` values, one of them (at `message_index`) the page's message: a
    `UserInputError`, `ValueError` or `TypeError` becomes that message with the other outputs cleared; anything else
    is logged with its traceback and shown as one line. The server keeps serving either way."""

    def decorate(handler):
        @functools.wraps(handler)
        def run(*args, **kwargs):
            try:
                return handler(*args, **kwargs)
            except (UserInputError, ValueError, TypeError) as error:
                text = f"**Cannot run this:** {error}"
            except Exception as error:  # noqa: BLE001 - the page must keep serving; the log has the traceback
                logger.exception("handler %s failed", handler.__name__)
                text = f"**Internal error** ({type(error).__name__}: {error}); the server log has the details."
            values = [None] * outputs
            values[message_index] = text
            return tuple(values) if outputs > 1 else values[0]

        return run

    return decorate


def load_image(path: str | None, what: str = "image"):
    """The uploaded file at `path` as a PIL image, or a `UserInputError` saying what is wrong with it."""
    from PIL import Image, UnidentifiedImageError

    if not path:
        raise UserInputError(f"no {what}: upload an image file (PNG, JPEG, ...) first")
    try:
        with Image.open(path) as opened:
            width, height = opened.size
            if width * height > MAX_IMAGE_PIXELS:
                raise UserInputError(
                    f"the {what} is {width} x {height} pixels; upload one under {MAX_IMAGE_PIXELS // 10**6} Mpx"
                )
            opened.load()
            return opened.copy()
    except UnidentifiedImageError:
        raise UserInputError(f"the uploaded file ({Path(path).name}) is not an image this app can read") from None
    except OSError as error:
        raise UserInputError(f"the uploaded {what} cannot be read: {error}") from None


def family_page(title: str, intro: str, served: ServedModel) -> gr.Blocks:
    """The page every app starts from: title, intro, a status line (elem_id `status`) that the first page load fills
    with where the model came from (training it first, with progress, when needed). Add the family's controls inside
    `with page:` after calling this."""
    page = gr.Blocks(title=title, analytics_enabled=False)
    with page:
        gr.Markdown(f"# {title}\n\n{intro}")
        status = gr.Markdown("Preparing the model ...", elem_id="status")

    def prepare(progress=gr.Progress(track_tqdm=True)):  # noqa: B008 - gradio's way of asking for progress
        try:
            folder = served.folder(progress=progress)
        except Exception as error:  # noqa: BLE001 - shown in the page; the app keeps serving
            logger.exception("could not prepare the model")
            return f"**The model could not be prepared:** {error}"
        return f"Model: `{folder}`. {served.note}"

    with page:
        page.load(prepare, outputs=status)
    return page
