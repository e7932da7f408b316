"""Try hf-jepa in a browser: one Gradio app per family, served locally or as a Hugging Face Space.

    hf-jepa demo bro-jepa [--model DIR|REPO]     # http://127.0.0.1:7860
    hf-jepa space DIR --output SPACE_DIR         # a Space folder: app.py, requirements.txt, README with metadata
    hf-jepa push-space SPACE_DIR ORG/NAME        # upload it as a Space repo

Needs the `spaces` extra (`pip install "hf-jepa[spaces]"`: gradio, matplotlib).
"""

from __future__ import annotations

from pathlib import Path

from .registry import APPS, app_module

__all__ = ["APPS", "build_app", "launch"]


def build_app(family: str, model: str | None = None, cache_dir: str | Path | None = None):
    """The `gradio.Blocks` app of `family` serving `model` (a folder or Hub id; default: the quick preset, trained on
    first load and cached under `cache_dir`)."""
    module = app_module(family)
    from .layout import ServedModel

    return module.build(ServedModel(family, model, cache_dir))


def launch(app, host: str = "127.0.0.1", port: int | None = None, share: bool = False, block: bool = True):
    """Serve `app` on `host:port` (loopback unless asked otherwise; `share=True` opens a public gradio.live link)."""
    from .layout import MAX_FILE_SIZE, theme

    return app.launch(
        server_name=host,
        server_port=port,
        share=share,
        prevent_thread_lock=not block,
        max_file_size=MAX_FILE_SIZE,
        theme=theme(),
        quiet=not block,
        footer_links=["api"],
    )
