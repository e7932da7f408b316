"""The browser apps (hf_jepa.spaces), driven in headless chromium: the BRo-JEPA app's main flow and bad input, the
quick-preset path, the Space folder run with `python app.py`, its push to the loopback Hub, and the CLI's checks.

Screenshots: with HF_JEPA_SCREENSHOTS=DIR (make screenshots) each app's page is saved there as <family>.png."""

import os
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest
from PIL import Image
from transformers import pipeline

from hf_jepa.data import images_to_tensor, load_mnist
from hf_jepa.recipes import load_families
from hf_jepa.spaces import build_app
from hf_jepa.spaces.bro_jepa import predict
from hf_jepa.testing.browser import browser_page, free_port, image_shown, screenshot, serve, set_slider, upload
from hf_jepa.testing.harness import train_quickly

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def bro_folder(tmp_path_factory):
    """A BRo-JEPA folder trained briefly on the embedded digits (class prototypes filled)."""
    family = load_families()["bro-jepa"]
    folder = tmp_path_factory.mktemp("bro") / "model"
    recipe = family.make_recipe(family.make_config("tiny"), family.data_args_class(data="embedded"))
    train_quickly(recipe, folder, max_steps=20)
    return folder


@pytest.fixture(scope="module")
def digit_files(tmp_path_factory):
    """Three embedded test digits as PNG files, and a file that is no image."""
    folder = tmp_path_factory.mktemp("digits")
    images, labels = images_to_tensor(load_mnist("embedded")["test"])
    paths = []
    for index in range(3):
        pixels = images[index].squeeze().numpy()
        pixels = (pixels * 255).round().astype(np.uint8) if pixels.dtype != np.uint8 else pixels
        Image.fromarray(pixels).save(folder / f"digit{index}.png")
        paths.append(folder / f"digit{index}.png")
    (folder / "notes.png").write_text("not an image")
    return paths, folder / "notes.png"


def _expected_table(classify, digit: np.ndarray, operation: int) -> list[str]:
    prediction = predict(classify, digit, operation)
    zero, roll = prediction["zero_shot"], prediction["rollout"]
    return [f"{zero['digit']}\t{zero['score']:.3f}", f"{roll['digit']}\t{roll['score']:.3f}"]


def _shown_rows(page) -> list[str]:
    rows = page.locator("#bro-result table tbody tr")
    return ["\t".join(rows.nth(i).locator("td").all_inner_texts()[1:]) for i in range(rows.count())]


def test_bro_app_predicts_what_the_pipeline_predicts(bro_folder, digit_files):
    digits, not_image = digit_files
    classify = pipeline("modular-arithmetic", model=str(bro_folder))
    with serve(build_app("bro-jepa", model=str(bro_folder))) as url, browser_page() as page:
        page.goto(url)
        page.locator("#status").get_by_text("Model:").wait_for()
        page.get_by_role("tab", name="Upload").click()
        for path, operation in zip(digits, (-4, 7)):
            upload(page, "#bro-upload", path)
            set_slider(page, "#bro-operation", operation)
            page.locator("#bro-run-upload").click()
            page.locator("#bro-result").get_by_text(f"k = {operation:+d}").wait_for()
            assert _shown_rows(page) == _expected_table(classify, np.asarray(Image.open(path)), operation)
            seen = np.asarray(image_shown(page, "#bro-seen").convert("L"))
            assert np.array_equal(seen, np.asarray(Image.open(path)))  # the model saw the upload unchanged
            assert image_shown(page, "#bro-circle").size[0] > 300  # the latent-path plot
        screenshot(page, "bro-jepa")

        # Bad input: a file that is no image; the page says so and keeps serving.
        upload(page, "#bro-upload", not_image)
        page.locator("#bro-run-upload").click()
        page.locator("#bro-message").get_by_text("Cannot run this").wait_for()
        message = page.locator("#bro-message").inner_text()
        assert "not an image" in message or "no digit image" in message, message
        assert page.locator("#bro-result").inner_text().strip() == ""

        # Drawing: a blank canvas is refused; strokes give the pipeline's answer on the 28 x 28 digit shown.
        page.get_by_role("tab", name="Draw").click()
        page.locator("#bro-run-drawing").click()
        page.locator("#bro-message").get_by_text("canvas is blank").wait_for()
        page.locator("#bro-canvas button[aria-label='Brush']").click()
        canvas = page.locator("#bro-canvas canvas").first
        box = canvas.bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.2)
        page.mouse.down()
        for step in range(1, 21):  # a vertical stroke: a "1"
            page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * (0.2 + 0.03 * step))
        page.mouse.up()
        set_slider(page, "#bro-operation", 2)
        page.locator("#bro-run-drawing").click()
        page.locator("#bro-result").get_by_text("k = +2").wait_for()
        seen = np.asarray(image_shown(page, "#bro-seen").convert("L"))
        assert seen.shape == (28, 28) and seen.max() > 100 and seen[:, :5].max() == 0  # centred, MNIST-style
        assert _shown_rows(page) == _expected_table(classify, seen, 2)


def test_without_a_model_the_app_trains_the_quick_preset_once_and_says_so(tmp_path, monkeypatch):
    from hf_jepa.spaces import bro_jepa

    monkeypatch.setattr(bro_jepa, "QUICK_TRAINING", {"data": "embedded", "preset": "tiny", "max_steps": 2})
    with serve(build_app("bro-jepa", cache_dir=tmp_path)) as url, browser_page() as page:
        page.goto(url)
        page.locator("#status").get_by_text("trained the quick bro-jepa preset").wait_for(timeout=240_000)
    assert (tmp_path / "bro-jepa" / "eval_results.json").is_file()
    with serve(build_app("bro-jepa", cache_dir=tmp_path)) as url, browser_page() as page:
        page.goto(url)
        page.locator("#status").get_by_text("trained earlier and cached").wait_for()


def _wait_until_serving(url: str, process, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"app.py exited with {process.returncode}: {process.stdout.read()[-3000:]}")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"app.py did not serve {url} within {seconds} s")


def test_space_folder_runs_with_python_app_py_and_pushes_to_the_hub(bro_folder, digit_files, tmp_path, hub):
    from huggingface_hub import ModelCard

    from hf_jepa.spaces.space_folder import push_space, write_space
    from hf_jepa.testing.hub_server import use_loopback_hub

    space = write_space(str(bro_folder), tmp_path / "space")
    assert {"app.py", "requirements.txt", "README.md", "model", "hf_jepa"} <= {p.name for p in space.iterdir()}
    assert (space / "hf_jepa" / "model_cards" / "bro_jepa.md").is_file()  # as a wheel lays the package out
    assert (space / "hf_jepa" / "configs" / "accelerate" / "cpu_2proc.yaml").is_file()
    card = ModelCard.load(space / "README.md").data.to_dict()
    assert (card["sdk"], card["app_file"]) == ("gradio", "app.py")
    requirements = (space / "requirements.txt").read_text().splitlines()
    assert "torch==2.13.0" in requirements and requirements[0].startswith("--extra-index-url")
    assert any(line.startswith("gradio==") for line in requirements)
    with pytest.raises(FileExistsError, match="not empty"):
        write_space(str(bro_folder), space)

    port = free_port()
    env = {**os.environ, "GRADIO_SERVER_PORT": str(port), "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONPATH": ""}
    env.pop("GRADIO_SERVER_NAME", None)
    process = subprocess.Popen(
        [sys.executable, "app.py"], cwd=space, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        url = f"http://127.0.0.1:{port}/"
        _wait_until_serving(url, process)
        with browser_page() as page:
            page.goto(url)
            page.locator("#status").get_by_text("Model:").wait_for()
            assert str(space / "model") in page.locator("#status").inner_text()
            page.get_by_role("tab", name="Upload").click()
            upload(page, "#bro-upload", digit_files[0][0])
            page.locator("#bro-run-upload").click()
            page.locator("#bro-result").get_by_text("zero-shot").wait_for()
            classify = pipeline("modular-arithmetic", model=str(bro_folder))
            assert _shown_rows(page) == _expected_table(classify, np.asarray(Image.open(digit_files[0][0])), 3)
    finally:
        process.terminate()
        process.wait(timeout=30)

    with use_loopback_hub(hub, cache_dir=tmp_path / "cache"):
        url = push_space(space, "org/bro-space")
    pushed = hub.files("org/bro-space", repo_type="space")
    local = {p.relative_to(space).as_posix(): p.read_bytes() for p in space.rglob("*") if p.is_file()}
    local = {k: v for k, v in local.items() if "__pycache__" not in k}
    assert "spaces/org/bro-space" in url
    assert {k: v for k, v in pushed.items() if k != ".gitattributes"} == local


def test_cli_refuses_public_binding_unless_asked_and_bad_space_arguments(bro_folder, tmp_path):
    from hf_jepa.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "bro-jepa", "--model", str(bro_folder), "--host", "0.0.0.0"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit):
        main(["space", str(tmp_path / "missing"), "--output", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_hf_jepa_demo_opens_a_working_page(bro_folder, digit_files):
    """The command users run: `hf-jepa demo bro-jepa --model DIR` serves the app on loopback until stopped."""
    port = free_port()
    command = [sys.executable, "-m", "hf_jepa.cli", "demo", "bro-jepa", "--model", str(bro_folder), "--port", str(port)]
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"}
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = f"http://127.0.0.1:{port}/"
        _wait_until_serving(url, process)
        with browser_page() as page:
            page.goto(url)
            page.locator("#status").get_by_text("Model:").wait_for()
            page.get_by_role("tab", name="Upload").click()
            upload(page, "#bro-upload", digit_files[0][1])
            set_slider(page, "#bro-operation", -1)
            page.locator("#bro-run-upload").click()
            page.locator("#bro-result").get_by_text("k = -1").wait_for()
            classify = pipeline("modular-arithmetic", model=str(bro_folder))
            assert _shown_rows(page) == _expected_table(classify, np.asarray(Image.open(digit_files[0][1])), -1)
    finally:
        process.terminate()
        process.wait(timeout=30)
