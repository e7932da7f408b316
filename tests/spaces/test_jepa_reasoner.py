"""The JEPA-Reasoner browser app (hf_jepa.spaces.jepa_reasoner) in headless chromium: the answer shown is the
`latent-reasoning` pipeline's for the same prompt, the right/wrong mark is the task's score, the per-step cosines
under noise are what the app's functions compute; bad input is a message and the app keeps serving. The folders come
from the app's own two-run quick preset (a reasoner, then a Talker reading its folder), made tiny.

Screenshot: with HF_JEPA_SCREENSHOTS=DIR (make screenshots) the page is saved there as jepa-reasoner.png."""

import pytest
from transformers import pipeline

from hf_jepa.spaces import build_app, jepa_reasoner
from hf_jepa.spaces.jepa_reasoner import chain_cosines, generate, load_task_data, pair_folder
from hf_jepa.spaces.layout import UserInputError
from hf_jepa.spaces.models import resolve_model
from hf_jepa.testing.browser import browser_page, image_shown, screenshot, serve, set_slider

pytestmark = pytest.mark.browser

_TASK = {"task": "cfg", "num_train_examples": 300, "num_eval_examples": 20, "plot": False, "disable_progress_bar": True}
TINY_TRAINING = [
    ("jepa-reasoner", {"preset": "tiny", "max_steps": 30, **_TASK}),
    ("jepa-mono-talker", {"preset": "tiny", "reasoner": "{jepa-reasoner}", "max_steps": 30, **_TASK}),
]
NOISE = 0.5


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The app's quick preset, tiny: resolve_model trains the reasoner, then the Talker on it, into the cache; the
    second call finds it there. Returns (the served Talker folder, the cache, the two notes)."""
    cache = tmp_path_factory.mktemp("spaces-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jepa_reasoner, "QUICK_TRAINING", TINY_TRAINING)
        folder, trained = resolve_model("jepa-reasoner", None, cache)
        again, cached = resolve_model("jepa-reasoner", None, cache)
    assert again == folder
    return folder, cache, trained, cached


def test_quick_preset_trains_the_reasoner_then_its_talker_once(quick):
    folder, cache, trained, cached = quick
    reasoner = cache / "jepa-reasoner" / "jepa-reasoner"
    assert folder == (cache / "jepa-reasoner" / "jepa-mono-talker").resolve()
    assert (reasoner / "eval_results.json").is_file() and (folder / "pair" / "config.json").is_file()
    assert f"reasoner={reasoner.resolve()}" in trained and "then `hf-jepa train jepa-mono-talker" in trained
    assert "trained earlier and cached" in cached
    assert pair_folder(folder) == folder / "pair" and pair_folder(folder / "pair") == folder / "pair"
    with pytest.raises(UserInputError, match="not a reasoner"):
        pair_folder(reasoner)


def _answer(page, selector: str) -> str:
    return page.locator(f"{selector}").locator("textarea, input").first.input_value()


def _cosines_shown(page) -> list[str]:
    rows = page.locator("#reasoner-cosines table tbody tr")
    return [rows.nth(i).locator("td").last.inner_text().strip() for i in range(rows.count())]


def test_reasoner_app_shows_the_pipelines_answer_and_the_noisy_chains_cosines(quick):
    folder = quick[0]
    reason = pipeline("latent-reasoning", model=str(folder / "pair"))
    data = load_task_data(folder / "pair", reason.tokenizer)
    steps = data.max_answer_length
    with serve(build_app("jepa-reasoner", model=str(folder))) as url, browser_page() as page:
        page.goto(url)
        page.locator("#status").get_by_text("Model:").wait_for()
        page.locator("#reasoner-info").get_by_text("Task:").wait_for()

        # An example picked from the dropdown fills the prompt and runs it.
        example = data.eval_examples[0]
        page.locator("#reasoner-example input").click()
        page.get_by_role("option", name=example.prompt, exact=True).click()
        page.locator("#reasoner-verdict").get_by_text("held-out example").wait_for()
        expected = reason(example.prompt, num_reasoning_steps=steps)["generated_text"]
        assert page.locator("#reasoner-prompt textarea").input_value() == example.prompt
        assert _answer(page, "#reasoner-answer") == expected
        verdict = page.locator("#reasoner-verdict").inner_text()
        assert example.answer in verdict
        assert ("Right" if data.task.score(example, expected) else "Wrong") in verdict
        assert image_shown(page, "#reasoner-pca").size[0] > 400  # the chain on the vocabulary's PCA

        # Noise: the answer under noise and each step's cosine to the clean chain, as the functions compute them.
        clean = generate(reason, example.prompt, steps)
        noisy = generate(reason, example.prompt, steps, noise=NOISE, seed=0)
        set_slider(page, "#reasoner-noise", NOISE)  # moving the slider reruns the prompt
        page.locator("#reasoner-cosines").get_by_text(f"Noise std {NOISE:g}").wait_for()
        assert _cosines_shown(page) == [f"{c:.3f}" for c in chain_cosines(noisy["chain"], clean["chain"])]
        assert len(_cosines_shown(page)) == steps
        assert _answer(page, "#reasoner-noisy-answer") == noisy["answer"]
        assert clean["answer"] == expected
        screenshot(page, "jepa-reasoner")

        # Bad input: an empty prompt, then unknown tokens; each a message, and a valid prompt works afterwards.
        page.locator("#reasoner-prompt textarea").fill("")
        page.locator("#reasoner-run").click()
        page.locator("#reasoner-message").get_by_text("empty prompt").wait_for()
        assert page.locator("#reasoner-verdict").inner_text().strip() == ""
        page.locator("#reasoner-prompt textarea").fill("x hello +")
        page.locator("#reasoner-run").click()
        page.locator("#reasoner-message").get_by_text("not in the tokenizer's vocabulary: 'hello'").wait_for()
        typed = data.eval_examples[1].prompt
        page.locator("#reasoner-prompt textarea").fill(typed)
        page.locator("#reasoner-run").click()
        page.locator("#reasoner-verdict").get_by_text("held-out example").wait_for()
        set_slider(page, "#reasoner-noise", 0)
        page.locator("#reasoner-cosines").get_by_text("above 0").wait_for()
        assert page.locator("#reasoner-message").inner_text().strip() == ""
        assert _answer(page, "#reasoner-answer") == reason(typed, num_reasoning_steps=steps)["generated_text"]
        assert _answer(page, "#reasoner-noisy-answer") == ""
