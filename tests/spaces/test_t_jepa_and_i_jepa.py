"""The T-JEPA and I-JEPA browser apps (hf_jepa.spaces.t_jepa, .i_jepa, .similarity) in headless chromium: the
collapse diagnostics, per-item norms and heat map shown are what the apps' plain functions return for the same
sentences / images through the `jepa-feature-extraction` pipeline; bad input is a message and the app keeps serving.

Screenshots: with HF_JEPA_SCREENSHOTS=DIR (make screenshots) the pages are saved there as t-jepa.png, i-jepa.png."""

import io

import numpy as np
import pytest
from PIL import Image
from transformers import pipeline

from hf_jepa.cli_settings import build_train_setup
from hf_jepa.data import images_to_tensor, load_mnist
from hf_jepa.recipes import load_families
from hf_jepa.spaces import build_app, i_jepa, similarity, t_jepa
from hf_jepa.spaces.layout import UserInputError
from hf_jepa.spaces.registry import family_of_model_type
from hf_jepa.testing.browser import browser_page, image_shown, screenshot, serve, upload
from hf_jepa.testing.harness import train_quickly

pytestmark = pytest.mark.browser

SENTENCES = [
    "A list is a mutable sequence.",
    "A tuple cannot be changed once it is made.",
    "The for statement iterates over the items of any sequence.",
    "Raise an exception to signal an error.",
]


def _train(family_name: str, folder, **data):
    family = load_families()[family_name]
    recipe = family.make_recipe(family.make_config("tiny"), family.data_args_class(data="embedded", **data))
    train_quickly(recipe, folder, max_steps=4)
    return folder


@pytest.fixture(scope="module")
def t_folder(tmp_path_factory):
    """A tiny T-JEPA trained for a few steps on the embedded pydoc sentences (its tokenizer saved beside it)."""
    folder = tmp_path_factory.mktemp("t-jepa") / "model"
    return _train("t-jepa", folder, downstream=False, plot=False, diagnostics_sentences=16)


@pytest.fixture(scope="module")
def i_folder(tmp_path_factory):
    """A tiny I-JEPA trained for a few steps on the embedded digits."""
    folder = tmp_path_factory.mktemp("i-jepa") / "model"
    return _train("i-jepa", folder, plot=False, diagnostics_images=16, probe_images=20)


@pytest.fixture(scope="module")
def image_files(tmp_path_factory):
    """Five embedded test digits as PNG files, a file that is no image and a 5000 x 5000 image."""
    folder = tmp_path_factory.mktemp("images")
    images, _ = images_to_tensor(load_mnist("embedded")["test"])
    paths = []
    for index in range(5):
        pixels = images[index].squeeze().numpy()
        pixels = (pixels * 255).round().astype(np.uint8) if pixels.dtype != np.uint8 else pixels
        Image.fromarray(pixels).save(folder / f"digit{index}.png")
        paths.append(folder / f"digit{index}.png")
    (folder / "notes.png").write_text("not an image")
    Image.new("L", (5000, 5000)).save(folder / "huge.png")
    return paths, folder / "notes.png", folder / "huge.png"


def _cells(page, selector: str) -> list[list[str]]:
    rows = page.locator(f"{selector} table tbody tr")
    return [[cell.strip() for cell in rows.nth(i).locator("td").all_inner_texts()] for i in range(rows.count())]


def _check_shown(page, prefix: str, labels: list[str], embeddings, what: str) -> None:
    """The page's diagnostics, verdict, norms and heat map are what the similarity functions give for `embeddings`."""
    page.locator(f"#{prefix}-diagnostics").get_by_text(f"Collapse diagnostics of the {len(labels)} {what}").wait_for()
    result = similarity.diagnostics(embeddings)
    expected = [[name, value] for name, value, _ in similarity.diagnostics_rows(result)]
    assert [row[:2] for row in _cells(page, f"#{prefix}-diagnostics")] == expected
    shown = page.locator(f"#{prefix}-diagnostics").inner_text()
    assert ("Collapse warning" in shown) == bool(result["warnings"])
    assert all(warning in shown for warning in result["warnings"]), (shown, result["warnings"])
    items = _cells(page, f"#{prefix}-items")
    assert [[row[0], row[2]] for row in items] == [[i, norm] for i, _, norm in similarity.item_rows(labels, result)]
    assert [row[1] for row in items] == labels  # shown literally (escaped Markdown)
    heatmap = np.asarray(image_shown(page, f"#{prefix}-heatmap").convert("RGB"))
    drawn = similarity.heatmap_png(similarity.cosine_matrix(embeddings), similarity.heatmap_title(len(labels), what))
    assert np.array_equal(heatmap, np.asarray(Image.open(io.BytesIO(drawn)).convert("RGB")))


def _wait_for_message(page, prefix: str, text: str) -> str:
    page.locator(f"#{prefix}-message").get_by_text("Cannot run this").wait_for()
    message = page.locator(f"#{prefix}-message").inner_text()
    assert text in message, message
    assert page.locator(f"#{prefix}-diagnostics").inner_text().strip() == ""
    return message


def test_t_jepa_app_shows_the_diagnostics_of_the_sentences_entered(t_folder):
    extract = pipeline("jepa-feature-extraction", model=str(t_folder))
    with serve(build_app("t-jepa", model=str(t_folder))) as url, browser_page() as page:
        page.goto(url)
        page.locator("#status").get_by_text("Model:").wait_for()
        box = page.locator("#tjepa-sentences textarea")
        text = "\n".join(SENTENCES) + "\n\n  A line with *stars*, a | bar and <b>tags</b>.  \n"
        box.fill(text)
        page.locator("#tjepa-run").click()
        lines, embeddings = t_jepa.embed_sentences(extract, text)
        assert lines[-1] == "A line with *stars*, a | bar and <b>tags</b>." and len(lines) == 5
        _check_shown(page, "tjepa", lines, embeddings, "sentences")

        # Bad input: one sentence; the page says so, and the next request is answered.
        box.fill("Only one sentence here.\n\n")
        page.locator("#tjepa-run").click()
        _wait_for_message(page, "tjepa", "need at least 2")
        box.fill(t_jepa.EXAMPLE)
        page.locator("#tjepa-run").click()
        lines, embeddings = t_jepa.embed_sentences(extract, t_jepa.EXAMPLE)
        _check_shown(page, "tjepa", lines, embeddings, "sentences")
        assert page.locator("#tjepa-message").inner_text().strip() == ""
        screenshot(page, "t-jepa")


def test_i_jepa_app_shows_the_diagnostics_of_the_images_uploaded(i_folder, image_files):
    digits, not_image, _ = image_files
    extract = pipeline("jepa-feature-extraction", model=str(i_folder))
    with serve(build_app("i-jepa", model=str(i_folder))) as url, browser_page() as page:
        page.goto(url)
        page.locator("#status").get_by_text("Model:").wait_for()
        # Bad input first: a file that is no image among the uploads.
        upload(page, "#ijepa-upload", [digits[0], not_image])
        page.locator("#ijepa-run").click()
        _wait_for_message(page, "ijepa", "notes.png) is not an image")

        upload(page, "#ijepa-upload", digits)
        page.locator("#ijepa-run").click()
        names, embeddings = i_jepa.embed_images(extract, digits)
        assert names == [p.name for p in digits]
        _check_shown(page, "ijepa", names, embeddings, "images")
        assert page.locator("#ijepa-message").inner_text().strip() == ""
        screenshot(page, "i-jepa")


def test_bad_input_is_refused_by_the_plain_functions_with_a_message(image_files):
    digits, not_image, huge = image_files
    for text, message in [
        ("", "the box is empty"),
        (" \n\n ", "the box is empty"),
        ("one line", "need at least 2"),
        ("\n".join(f"sentence {i}" for i in range(65)), "at most 64"),
        ("x" * (t_jepa.MAX_CHARACTERS + 1), "characters long"),
    ]:
        with pytest.raises(UserInputError, match=message):
            t_jepa.sentences(text)
    for paths, message in [
        (None, "no images"),
        ([], "no images"),
        (digits[:1], "need at least 2"),
        ([digits[0], not_image], r"\(notes.png\) is not an image"),
        ([digits[0], huge], r"image 2 \(huge.png\) is 5000 x 5000 pixels"),
    ]:
        with pytest.raises(UserInputError, match=message):
            i_jepa.images(paths)


def test_diagnostics_judge_the_rank_only_where_the_items_allow_it():
    import torch

    two = similarity.diagnostics(torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
    assert two["rank_bound"] == 1 and not two["rank_judged"] and not two["warnings"]
    assert "rank rule is not applied" in similarity.collapse_verdict(two)
    same = similarity.diagnostics(torch.tensor([[1.0, 0.01, 0.0, 0.0]] * 3 + [[1.0, 0.0, 0.01, 0.0]] * 3))
    assert same["rank_judged"] and same["effective_rank"] < 2
    assert {warning.split(" ", 1)[0] for warning in same["warnings"]} >= {"effective_rank", "cosine_mean"}
    assert "Collapse warning" in similarity.collapse_verdict(same)


@pytest.mark.parametrize("module", [t_jepa, i_jepa], ids=["t-jepa", "i-jepa"])
def test_registered_and_the_quick_preset_is_a_valid_short_run_on_embedded_data(module, tmp_path):
    assert family_of_model_type(module.MODEL_TYPES[0]) == module.FAMILY
    setup = build_train_setup(module.FAMILY, {**module.QUICK_TRAINING, "output_dir": str(tmp_path)})
    assert setup.preset == "tiny" and setup.data_args.data == "embedded"
    assert setup.training_args.max_steps <= 100
