"""`log_with=trackio` (beside TensorBoard): a short `hf-jepa train` run logs to trackio's local SQLite storage inside
the output folder, with every outgoing network connection refused, and the metrics read back through trackio."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hf_jepa.trainers import TrainingArguments

pytest.importorskip("trackio")

# Runs in a fresh interpreter: trackio fixes its storage folder when first imported, so the run must be the first
# trackio user of its process. Any connection other than a local socket raises, so an attempt to reach the network
# fails the run instead of passing unnoticed.
RUN = r"""
import socket, sys
_connect = socket.socket.connect
def guarded(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6):
        raise OSError(f"network access attempted: {address!r}")
    return _connect(self, address)
socket.socket.connect = guarded
socket.create_connection = lambda address, *a, **k: (_ for _ in ()).throw(OSError(f"network access attempted: {address!r}"))
from hf_jepa.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_trackio_logs_locally_beside_tensorboard_and_reads_back(tmp_path):
    output_dir = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env.pop("TRACKIO_DIR", None)
    env.pop("TRACKIO_SPACE_ID", None)
    env.pop("TRACKIO_SERVER_URL", None)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    settings = [
        "preset=tiny",
        "data=embedded",
        "max_steps=4",
        "logging_steps=2",
        "per_device_batch_size=16",
        "log_with=tensorboard,trackio",
        "prototype_images=100",
        "eval_images=100",
        "plot=false",
        "disable_progress_bar=true",
    ]
    command = [sys.executable, "-c", RUN, "train", "bro-jepa", "--output-dir", str(output_dir), "--set", *settings]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "network access attempted" not in done.stderr

    trackio_dir = output_dir / "logs" / "trackio"
    assert list(trackio_dir.glob("*.db")), sorted(str(p) for p in output_dir.rglob("*"))
    assert list((output_dir / "logs").rglob("events.out.tfevents.*"))  # TensorBoard still writes beside it

    read_back = r"""
import json, sys
from trackio.sqlite_storage import SQLiteStorage
project = "bro_jepa"
runs = SQLiteStorage.get_runs(project)
print(json.dumps({"runs": runs, "logs": SQLiteStorage.get_logs(project, runs[0])}, default=str))
"""
    env["TRACKIO_DIR"] = str(trackio_dir)
    shown = subprocess.run([sys.executable, "-c", read_back], env=env, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr[-3000:]
    stored = json.loads(shown.stdout.strip().splitlines()[-1])
    assert stored["runs"] == ["run"]  # named after the output folder
    logged = [row for row in stored["logs"] if "loss" in row]
    assert [row["step"] for row in logged] == [2, 4]
    history = [json.loads(line) for line in (output_dir / "training_log.jsonl").read_text().splitlines()]
    losses = {row["step"]: row["loss"] for row in history if "loss" in row}
    for row in logged:
        assert row["loss"] == pytest.approx(losses[row["step"]], rel=1e-6)
        assert {"prediction_loss", "lr", "ema_momentum"} <= set(row)


@pytest.mark.parametrize("log_with", ["", "tensorbord", "tensorboard,,wandbx"])
def test_unknown_trackers_are_refused_naming_log_with(log_with, tmp_path):
    with pytest.raises(ValueError, match="log_with"):
        TrainingArguments(output_dir=str(tmp_path), log_with=log_with)


def test_tracker_lists_are_accepted(tmp_path):
    assert (
        TrainingArguments(output_dir=str(tmp_path), log_with="tensorboard, trackio").log_with == "tensorboard, trackio"
    )
