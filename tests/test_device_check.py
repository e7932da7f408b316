"""benchmarks/device_check.py --smoke: the GPU check's commands (accelerate launch of T-JEPA, JEPA-Reasoner and the
Mono-Talker under the FSDP2 and DDP configs, gradient checkpointing off and on, save and reload) run to completion with
tiny presets on the CPU. ~90 s on the 2-core machine (12 accelerate launches), so it runs in CI's reliability stage."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.reliability
def test_device_check_smoke_runs_to_completion(tmp_path):
    out = tmp_path / "report.md"
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "device_check.py"), "--smoke", "--steps", "2", "--out", str(out)]
        + ["--work-dir", str(tmp_path / "work")],
        capture_output=True,
        text=True,
        timeout=500,
        env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = out.read_text()
    assert report.count("| ok |") == 12, report
    assert "failed" not in report
