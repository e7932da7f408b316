"""`benchmarks/report.py --quick` (what `make benchmark` runs at full size) writes a report with every section, finite
ratios and the scaling figure. Its numbers are not checked: they are tiny sizes on whatever machine runs the test."""

import math
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = (
    "## Machine",
    "## 1. Matmul peak",
    "## 2. Compute efficiency of the training step",
    "## 3. torch.compile vs eager",
    "## 4. Inference",
    "## 5. Scaling",
    "## 6. What bounds the training step",
)


def _table(text: str, section: str) -> list[list[str]]:
    """The rows (cells) of the first table after `section`'s heading, header and separator excluded."""
    body = text.split(section, 1)[1].split("\n## ", 1)[0]
    rows = [line for line in body.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def _number(cell: str) -> float:
    return float(re.match(r"-?[\d,.]+", cell).group(0).replace(",", ""))


def test_quick_report_structure(tmp_path):
    output = tmp_path / "benchmarks.md"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "report.py"), "--quick", "--output", str(output)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    text = output.read_text()
    positions = [text.index(section) for section in SECTIONS]
    assert positions == sorted(positions)
    assert "| torch |" in text and "| load average (1 min) at start |" in text

    peaks = _table(text, SECTIONS[1])
    assert [row[0] for row in peaks] == ["fp32", "bf16"]
    assert all(_number(row[1]) > 0 and math.isfinite(_number(row[1])) for row in peaks)

    efficiency = _table(text, SECTIONS[2])
    assert [row[0] for row in efficiency] == ["t-jepa", "i-jepa", "epm-jepa", "jepa-reasoner", "bro-jepa"]
    for row in efficiency:
        flops, fp32_share, bf16_share, speedup = (_number(row[i]) for i in (2, 4, 6, 7))
        assert flops > 0 and 0 < fp32_share < 100 * 10 and 0 < bf16_share and speedup > 0, row
        assert row[9] in ("met", "not met", "n/a")

    inference = _table(text, SECTIONS[4])
    assert {row[2] for row in inference} == {"fp32", "bf16"}
    assert all(not row[3].startswith("failed") for row in inference), inference
    assert all(_number(row[3]) > 0 and _number(row[4]) > 0 for row in inference)

    scaling = _table(text, SECTIONS[5])
    assert [row[0] for row in scaling] == [
        "batch size",
        "sequence length (tokens)",
        "frames per sequence",
        "width (hidden size)",
    ]
    # The FLOP exponents are properties of the models, not of the machine: ~1 in batch, length and frames, >1 in width.
    flop_k = [_number(row[6]) for row in scaling]
    assert all(0 < _number(share) for row in scaling for share in row[4].split(", "))
    assert abs(flop_k[0] - 1) < 0.05 and abs(flop_k[2] - 1) < 0.2 and 0.9 < flop_k[1] < 2.1 and flop_k[3] > 1.2
    assert all(math.isfinite(_number(row[5])) for row in scaling)
    assert (tmp_path / "benchmark_scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    bound = _table(text, SECTIONS[6])[:10]  # the attention table follows in the same section
    families = ["t-jepa", "i-jepa", "epm-jepa", "jepa-reasoner", "bro-jepa"]
    assert [(row[0], row[1]) for row in bound] == [(f, p) for p in ("fp32", "bf16") for f in families]
    for row in bound:
        time_in_matmuls, at_shapes, achieved = (_number(row[i]) for i in (6, 7, 8))
        assert 0 < time_in_matmuls and 0 < achieved <= at_shapes, row
        # achieved = (matmuls at their shapes) x (time in matmuls), up to the table's rounding: achieved and the
        # shapes' share are printed to 0.05 percentage points, the time share to 0.5
        rounding = 0.05 + 0.05 * time_in_matmuls / 100 + 0.005 * at_shapes
        assert abs(achieved - at_shapes * time_in_matmuls / 100) <= rounding + 1e-9, row
    attention = [row for row in text.split(SECTIONS[6], 1)[1].splitlines() if row.startswith("| (")]
    assert len(attention) >= 2 and all(_number(row.split("|")[4].strip()) > 0 for row in attention)
