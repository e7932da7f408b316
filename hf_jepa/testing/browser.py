"""Drive the browser apps in a real headless browser: Debian's chromium through playwright.

`serve(app)` starts a gradio app on a free loopback port; `browser_page()` opens a page in headless chromium (the
system browser: playwright's own download cannot reach its CDN on these machines). Where chromium or playwright is
missing the tests skip, unless `HF_JEPA_REQUIRE_BROWSER=1` (set by CI, where a skip would hide a failure).
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import shutil
import socket
import urllib.request
from collections.abc import Iterator

__all__ = [
    "CHROMIUM_ARGS",
    "browser_page",
    "chromium_path",
    "free_port",
    "image_shown",
    "screenshot",
    "serve",
    "set_slider",
    "upload",
]

# Chromium on a closed network: no background connections, no GPU, no sandbox as root (the probe's flags).
CHROMIUM_ARGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def chromium_path() -> str | None:
    """The system chromium, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def serve(app) -> Iterator[str]:
    """Serve `app` on a free loopback port for the block; yields its URL."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from hf_jepa.spaces import launch

    port = free_port()
    launch(app, port=port, block=False)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        app.close()


@contextlib.contextmanager
def browser_page(viewport=(1200, 900)):
    """A playwright page in headless system chromium (pytest skip where there is none, unless required)."""
    import pytest

    executable = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    missing = "playwright is not installed" if sync_playwright is None else None
    missing = missing or (None if executable else "no chromium on PATH (apt-get install chromium)")
    if missing:
        if os.environ.get("HF_JEPA_REQUIRE_BROWSER") == "1":
            raise RuntimeError(f"browser tests required (HF_JEPA_REQUIRE_BROWSER=1) but {missing}")
        pytest.skip(missing)
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=executable, args=list(CHROMIUM_ARGS))
        try:
            page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
            page.set_default_timeout(60_000)
            yield page
        finally:
            browser.close()


def image_shown(page, selector: str):
    """The PIL image an `<img>` inside `selector` shows (a data URL or a file the app serves)."""
    from PIL import Image

    source = page.locator(f"{selector} img").first.get_attribute("src")
    if source.startswith("data:"):
        data = base64.b64decode(source.split(",", 1)[1])
    else:
        if source.startswith("/"):
            source = page.url.rstrip("/") + source
        with urllib.request.urlopen(source, timeout=30) as response:
            data = response.read()
    return Image.open(io.BytesIO(data))


def upload(page, selector: str, paths) -> None:
    """Put the file (or list of files) `paths` into the gr.File at `selector`, clearing what it shows first.

    Waits for the file list's name cells (`td[aria-label=NAME]`). Not for the name as text: the list splits it into
    stem and suffix elements, and the upload-progress view that does show the whole name is gone once a fast upload
    ends, so a text wait passed or timed out by timing (it timed out on a loaded CI machine).
    """
    from pathlib import Path

    paths = [Path(p) for p in paths] if isinstance(paths, (list, tuple)) else [Path(paths)]
    component = page.locator(selector)
    shown = component.locator(".file-preview")
    if shown.count():  # the Clear button renders a moment after the list: wait for it, then for the list to go
        component.locator("button[aria-label='Clear']").first.click()
        shown.wait_for(state="detached")
    component.locator("input[type=file]").set_input_files([str(p) for p in paths])
    for path in paths:
        component.locator(f".file-preview td[aria-label={json.dumps(path.name)}]").wait_for()


def set_slider(page, selector: str, value) -> None:
    """Type `value` into the number box of the gr.Slider at `selector`."""
    field = page.locator(f"{selector} input[type=number]")
    field.fill(str(value))
    field.press("Enter")


def screenshot(page, name: str) -> None:
    """With HF_JEPA_SCREENSHOTS=DIR (`make screenshots`), save the whole page as DIR/<name>.png."""
    from pathlib import Path

    folder = os.environ.get("HF_JEPA_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)
