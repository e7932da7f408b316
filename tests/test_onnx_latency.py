"""`benchmarks/onnx_latency.py` at a tiny size (what `make benchmark` runs for every family and preset): results.json
holds every repeat, the reported ratios are the per-repeat ORT / PyTorch ratios of those times, the timed outputs
agree, and the markdown table has one row per batch. Its timings are not checked: they depend on the machine."""

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

ROOT = Path(__file__).resolve().parents[1]


def test_tiny_run_records_repeats_and_ratios(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    args = ["--families", "BRo-JEPA", "--presets", "tiny", "--repeats", "3", "--group-seconds", "0.01"]
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "onnx_latency.py"), *args, "--batch", "4", "--out", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["setup"]["threads"] == 1 and results["setup"]["repeats"] == 3
    (row,) = results["rows"]
    assert (row["family"], row["preset"], row["path"]) == ("BRo-JEPA", "tiny", "encoder")
    assert row["export_max_abs_diff"] < 1e-4
    assert list(row["batches"]) == ["1", "4"]
    for batch, cell in row["batches"].items():
        assert cell["input_shapes"]["pixel_values"][0] == int(batch)
        assert cell["max_abs_diff"] < 1e-4 and cell["calls_per_repeat"] >= 2
        times = cell["seconds_per_call_all"]
        assert {name: len(values) for name, values in times.items()} == {
            "torch_no_grad": 3,
            "torch_inference_mode": 3,
            "onnxruntime": 3,
        }
        for name, values in times.items():
            spread = cell["seconds_per_call"][name]
            assert (spread["median"], spread["low"], spread["high"]) == (
                statistics.median(values),
                min(values),
                max(values),
            )
        ratios = [o / t for o, t in zip(times["onnxruntime"], times["torch_no_grad"])]
        assert cell["ratio_ort_over"]["torch_no_grad"]["median"] == pytest.approx(statistics.median(ratios))
    table = [line for line in (tmp_path / "onnx_latency.md").read_text().splitlines() if line.startswith("| BRo-JEPA")]
    assert len(table) == 2 and table[1].startswith("| BRo-JEPA | tiny | 0.05M | 4 | pixel_values 4x1x28x28 |")
