"""The EPM-JEPA browser app (hf_jepa.spaces.epm_jepa) in headless chromium: the frames, the three tracks' table, the
per-step surprisal and the buffers shown are what the app's plain functions return for the same gravity and seed;
reset and swap change the buffers as those functions say; bad input is a message and the app keeps serving.

Screenshot: with HF_JEPA_SCREENSHOTS=DIR (make screenshots) the page is saved there as epm-jepa.png."""

import shutil

import numpy as np
import pytest

from hf_jepa import EpmJepaConfig
from hf_jepa.recipes.epm_jepa import EpmJepaDataArguments, EpmJepaRecipe
from hf_jepa.spaces import build_app, epm_tracks
from hf_jepa.spaces.epm_jepa import compare_tracks, frame_strip, generate_sequence, load_tracks, swap_buffers
from hf_jepa.testing.browser import browser_page, image_shown, screenshot, serve, set_slider
from hf_jepa.testing.harness import train_quickly

pytestmark = pytest.mark.browser

# The tracks' experience phase, shortened for the test (a few seconds per track on 2 cores).
FAST_TRACKS = {**epm_tracks.TRACK_TRAINING, "max_steps": 6, "per_device_batch_size": 8, "eval_sequences": 8}


@pytest.fixture(scope="module")
def epm_app(embedded_splits, tmp_path_factory):
    """A tiny vanilla base pretrained at g = 0, and its three tracks adapted from it into the app cache."""
    root = tmp_path_factory.mktemp("epm-app")
    data_args = EpmJepaDataArguments(data="embedded", eval_sequences=8, sequence_length=6)
    recipe = EpmJepaRecipe(EpmJepaConfig.tiny(track="vanilla"), data_args, splits=embedded_splits)
    train_quickly(recipe, root / "base", max_steps=20, per_device_batch_size=4, learning_rate=2e-3)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(epm_tracks, "TRACK_TRAINING", FAST_TRACKS)
        tracks = load_tracks(root / "base", cache_dir=root / "cache")
        yield root / "base", root / "cache", tracks


def _cells(page, selector: str) -> list[list[str]]:
    rows = page.locator(f"{selector} table tbody tr")
    return [[cell.strip() for cell in rows.nth(i).locator("td").all_inner_texts()] for i in range(rows.count())]


def _expected_table(tracks, results) -> list[list[str]]:
    steps = len(results[tracks[0].key]["surprisal"])
    rows = []
    for row in tracks:
        result = results[row.key]
        buffer, effect = "none", "no memory"
        if result["buffer"] is not None:
            buffer = f"{result['occupancy_before']} -> {result['buffer'].occupancy} / {result['buffer'].capacity}"
            effect = f"{result['memory_effect']:+.2e}"
        rows.append(
            [
                row.label,
                f"{result['normalized_error']:.4f}",
                f"{result['copy_last_error']:.4f}",
                effect,
                f"{result['mean_surprisal']:.5f}",
                f"{result['firings']} / {steps}",
                f"{result['retrieved']} / {steps}",
                buffer,
            ]
        )
    return rows


def _expected_steps(tracks, results) -> list[list[str]]:
    k = tracks[0].model.config.context_length
    rows = []
    for step in range(len(results[tracks[0].key]["surprisal"])):
        cells = [str(k + step)]
        for row in tracks:
            value, fired = results[row.key]["surprisal"][step], results[row.key]["fired"][step]
            cells.append(f"{value:.5f}" + (" *" if fired else ""))
        cells += [str(results[row.key]["occupancy"][step]) for row in tracks if row.has_buffer]
        rows.append(cells)
    return rows


def _occupancy(page) -> list[str]:
    return [cells[1] for cells in _cells(page, "#epm-buffer")]


def _expected_occupancy(tracks, buffers) -> list[str]:
    return [f"{buffers[r.key].occupancy} / {buffers[r.key].capacity}" for r in tracks if r.has_buffer]


def _request(page, gravity, seed, length) -> None:
    set_slider(page, "#epm-gravity", gravity)
    page.locator("#epm-seed input").fill(str(seed))
    page.locator("#epm-length input").fill(str(length))


def test_epm_app_shows_what_its_functions_compute(epm_app):
    base, cache, tracks = epm_app
    assert [row.key for row in tracks] == ["served", "vanilla", "ei", "epm"]
    gravity, seed, length = 0.45, 3, 10
    frames = generate_sequence(gravity, seed, length)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(epm_tracks, "TRACK_TRAINING", FAST_TRACKS)
        app = build_app("epm-jepa", model=str(base), cache_dir=cache)
        with serve(app) as url, browser_page(viewport=(1400, 1000)) as page:
            page.goto(url)
            page.locator("#status").get_by_text("Model:").wait_for()
            page.locator("#epm-tracks").get_by_text("Tracks ready").wait_for(timeout=120_000)
            assert "trained earlier" in page.locator("#epm-tracks").inner_text()  # the fixture's tracks, cached

            _request(page, gravity, seed, length)
            page.locator("#epm-generate").click()
            page.locator("#epm-frames img").wait_for()
            assert np.array_equal(np.asarray(image_shown(page, "#epm-frames").convert("L")), frame_strip(frames))

            page.locator("#epm-run").click()
            page.locator("#epm-table").get_by_text(f"at g = {gravity:.2f}").wait_for()
            results, buffers = compare_tracks(tracks, frames)
            assert _cells(page, "#epm-table") == _expected_table(tracks, results)
            assert _cells(page, "#epm-steps") == _expected_steps(tracks, results)
            assert _occupancy(page) == _expected_occupancy(tracks, buffers)
            assert image_shown(page, "#epm-plot").size[0] > 600

            # Reset empties both buffers; swap fills them from sequences at g = 0 and the run reads them.
            page.locator("#epm-reset").click()
            page.locator("#epm-buffer").get_by_text("empty (reset)").first.wait_for()
            assert _occupancy(page) == ["0 / 32", "0 / 32"]
            set_slider(page, "#epm-swap-gravity", 0.0)
            page.locator("#epm-swap").click()
            page.locator("#epm-buffer").get_by_text("swapped in").first.wait_for()
            swapped = swap_buffers(tracks, 0.0, seed, length)
            assert _occupancy(page) == _expected_occupancy(tracks, swapped)
            assert all(state.occupancy > 0 for state in swapped.values())
            page.locator("#epm-run").click()
            page.locator("#epm-table").get_by_text(f"{swapped['ei'].occupancy} -> ").first.wait_for()
            results, buffers = compare_tracks(tracks, frames, swapped)
            shown = _cells(page, "#epm-table")
            assert shown == _expected_table(tracks, results)
            assert [row[3] for row in shown[2:]] != ["+0.00e+00", "+0.00e+00"]  # the swapped memory changed D
            screenshot(page, "epm-jepa")

            # Bad input: a sequence length out of range is a message; the buffers shown are kept.
            page.locator("#epm-length input").fill("99")
            page.locator("#epm-run").click()
            page.locator("#epm-message").get_by_text("Cannot run this").wait_for()
            assert "sequence length" in page.locator("#epm-message").inner_text()
            assert page.locator("#epm-table").inner_text().strip() == ""
            assert _occupancy(page) == _expected_occupancy(tracks, buffers)

            # ... and the app still serves a valid request, from the buffers the session kept.
            _request(page, 0.2, 7, 8)
            page.locator("#epm-run").click()
            page.locator("#epm-table").get_by_text("at g = 0.20").wait_for()
            assert page.locator("#epm-message").inner_text().strip() == ""
            results, buffers = compare_tracks(tracks, generate_sequence(0.2, 7, 8), buffers)
            assert _cells(page, "#epm-table") == _expected_table(tracks, results)
            assert _occupancy(page) == _expected_occupancy(tracks, buffers)


def test_tracks_come_from_the_reproduction_layout_before_any_training(epm_app, tmp_path):
    base, cache, tracks = epm_app
    seed_folder = tmp_path / "seed0"
    shutil.copytree(base, seed_folder / "base")
    trained = {row.key: row for row in tracks}
    for track in ("vanilla", "ei", "epm"):
        folder = next(cache.glob(f"epm-jepa-tracks/*/{track}"))
        shutil.copytree(folder, seed_folder / track)
    found = load_tracks(seed_folder / "epm", cache_dir=tmp_path / "cache")
    assert [row.key for row in found] == ["vanilla", "ei", "epm"]
    assert [row.source for row in found] == [
        f"the sibling folder `{seed_folder / 'vanilla'}`",
        f"the sibling folder `{seed_folder / 'ei'}`",
        "the served model",
    ]
    assert not (tmp_path / "cache").exists()  # nothing was trained
    frames = generate_sequence(0.3, 1, 8)
    assert (
        compare_tracks(found, frames)[0]["epm"]["surprisal"]
        == compare_tracks([trained["epm"]], frames)[0]["epm"]["surprisal"]
    )
