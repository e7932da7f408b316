"""`hf-jepa export-onnx`: every family's tiny model exported with torch.onnx (dynamo) and run with onnxruntime, equal to
the model's own PyTorch function (encode / embed / predict) to `ONNX_TOLERANCE` at the traced batch and at another
batch (and sequence / frame count) through the dynamic axes; the JSON beside each file; CLI errors; one console run."""

import json
import subprocess
import sys

import pytest
import torch

from hf_jepa import (
    BroJepaConfig,
    BroJepaModel,
    EpmJepaConfig,
    EpmJepaModel,
    IJepaConfig,
    IJepaModel,
    JepaReasonerConfig,
    JepaReasonerModel,
    MonoTalkerConfig,
    MonoTalkerModel,
    TJepaConfig,
    TJepaModel,
)
from hf_jepa.cli import main
from hf_jepa.export import ONNX_TOLERANCE, export_onnx, family_paths
from hf_jepa.export.onnx_export import check_parity, onnxruntime_session

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

FAMILIES = {
    "i_jepa": (IJepaConfig, IJepaModel),
    "t_jepa": (TJepaConfig, TJepaModel),
    "bro_jepa": (BroJepaConfig, BroJepaModel),
    "epm_jepa": (EpmJepaConfig, EpmJepaModel),
    "jepa_reasoner": (JepaReasonerConfig, JepaReasonerModel),
}
# The path each family's test exports: the default feature path, and BRo-JEPA's predictor step.
PATHS = {
    "i_jepa": ["encoder"],
    "t_jepa": ["encoder"],
    "bro_jepa": ["encoder", "predictor"],
    "epm_jepa": ["encoder"],
    "jepa_reasoner": ["encoder"],
}


def tiny(model_type: str):
    """A tiny model whose EMA target differs from its online encoder (so exporting the wrong one fails parity)."""
    config_class, model_class = FAMILIES[model_type]
    torch.manual_seed(0)
    model = model_class(config_class.tiny()).eval()
    with torch.no_grad():
        for _, target in model.ema_pairs():
            for parameter in target.parameters():
                parameter.add_(0.05 * torch.randn_like(parameter))
    return model


@pytest.mark.parametrize("model_type", list(FAMILIES))
def test_export_matches_pytorch_at_two_batch_sizes(model_type, tmp_path):
    model = tiny(model_type)
    results = export_onnx(model, output=tmp_path, paths=PATHS[model_type])
    assert [r.path for r in results] == PATHS[model_type]
    for result in results:
        assert set(result.max_abs_diff) == {2, 3}
        assert result.worst < ONNX_TOLERANCE
        record = json.loads(result.json_file.read_text())
        assert record["parity"]["tolerance"] == ONNX_TOLERANCE
        assert record["opset"] == result.opset >= 18
        assert all(shape["shape"][0] == "batch" for shape in record["inputs"].values())
        # A batch the graph was not traced with, run again here from the file (batch 5; text: 11 tokens).
        path = next(p for p in family_paths(model) if p.name == result.path)
        assert check_parity(onnxruntime_session(result.onnx_file, threads=1), path, batch=5, seed=7) < ONNX_TOLERANCE


def test_wrong_encoder_would_fail_parity(tmp_path):
    """The check can fail: the context encoder's graph compared with the target encoder's function differs."""
    model = tiny("i_jepa")
    (result,) = export_onnx(model, output=tmp_path, paths=["context-encoder"])
    target_path = next(p for p in family_paths(model) if p.name == "encoder")
    assert check_parity(onnxruntime_session(result.onnx_file), target_path, batch=2) > 1e-2


def test_t_jepa_outputs_are_token_features_and_pooled(tmp_path):
    model = tiny("t_jepa")
    (result,) = export_onnx(model, output=tmp_path / "text.onnx", paths=["encoder"])
    assert result.onnx_file == tmp_path / "text.onnx" and result.json_file == tmp_path / "text.json"
    record = json.loads(result.json_file.read_text())
    assert list(record["outputs"]) == ["token_features", "pooled"]
    assert record["inputs"]["input_ids"]["shape"] == ["batch", "sequence"]
    assert record["outputs"]["pooled"]["shape"] == ["batch", model.config.hidden_size]


def test_bad_arguments(tmp_path, capsys):
    model = tiny("bro_jepa")
    with pytest.raises(ValueError, match="--path 'nope'.*choose from encoder, target-encoder, predictor"):
        export_onnx(model, output=tmp_path, paths=["nope"])
    with pytest.raises(ValueError, match="a .onnx file holds one path"):
        export_onnx(model, output=tmp_path / "one.onnx")
    folder = tmp_path / "bro"
    model.save_pretrained(folder)
    talker = tmp_path / "talker"
    MonoTalkerModel(MonoTalkerConfig.tiny()).save_pretrained(talker)
    capsys.readouterr()  # the saves' progress bars
    for argv, start in (
        ([str(tmp_path / "missing")], "hf-jepa: error: DIR"),
        ([str(talker)], f"hf-jepa: error: DIR {str(talker)!r}: ONNX export covers the model types i_jepa, t_jepa"),
        ([str(folder), "--path", "nope"], "hf-jepa: error: --path 'nope'"),
        ([str(folder), "--opset", "0"], "hf-jepa: error: --opset 0"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            main(["export-onnx", *argv])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and err.startswith(start) and "Traceback" not in err, err


def test_console_script(tmp_path):
    folder = tmp_path / "bro"
    tiny("bro_jepa").save_pretrained(folder)
    run = subprocess.run(
        [sys.executable, "-m", "hf_jepa.cli", "export-onnx", str(folder), "--path", "predictor"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "predictor.onnx (opset" in run.stdout
    record = json.loads((folder / "onnx" / "predictor.json").read_text())
    assert record["source"] == str(folder) and record["parity"]["max_abs_diff"]["3"] < ONNX_TOLERANCE
