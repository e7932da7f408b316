"""`hf-jepa export-sentence-transformers`: a tiny T-JEPA folder (with its WordPiece tokenizer) exported twice through
the CLI (the EMA target, and `--context-encoder`), loaded with `SentenceTransformer(out)` in a Python where hf_jepa is
NOT importable, and `encode()` compared with the jepa-feature-extraction pipeline's vectors; the folder is a plain
BERT (no remote code); one-line CLI errors naming DIR / OUT; one console run."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import run_without_hf_jepa
from transformers import pipeline

from hf_jepa import BroJepaConfig, BroJepaModel
from hf_jepa.cli import main

from .test_pipeline import TASK, TEXTS, make_model, make_tokenizer

pytest.importorskip("sentence_transformers")

# sentence-transformers pads a batch and mean-pools over the attention mask, as the pipeline does one text at a time;
# padding changes the float summation order only. Measured max |encode - pipeline| on this model (both encoders,
# batch_size=3, one thread): 1.2e-7.
TOLERANCE = 1e-5

# Runs without hf_jepa: loads each exported folder with sentence-transformers and saves the encoded batch.
ENCODE = """
import numpy as np
from sentence_transformers import SentenceTransformer

texts = {texts!r}
for name in ("target", "context"):
    model = SentenceTransformer(name, device="cpu")
    np.save(name + ".npy", model.encode(texts, batch_size=3, convert_to_numpy=True))
    print(name, type(model[0].auto_model).__name__, model.get_sentence_embedding_dimension())
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(source folder, work folder with target/ and context/ exported by the CLI, the CLI's printed lines)."""
    source = tmp_path_factory.mktemp("t-jepa-tiny")
    make_model().save_pretrained(source)
    make_tokenizer().save_pretrained(source)
    work = tmp_path_factory.mktemp("st-export")
    assert main(["export-sentence-transformers", str(source), str(work / "target")]) == 0
    assert main(["export-sentence-transformers", str(source), str(work / "context"), "--context-encoder"]) == 0
    return source, work


@pytest.fixture(scope="module")
def encoded(exported):
    """{"target": array, "context": array}: SentenceTransformer(...).encode(TEXTS) run where hf_jepa is absent."""
    _, work = exported
    run = run_without_hf_jepa(ENCODE.format(texts=TEXTS), cwd=work, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "target BertModel 32" in run.stdout and "context BertModel 32" in run.stdout, run.stdout
    return {name: np.load(work / f"{name}.npy") for name in ("target", "context")}


@pytest.fixture(scope="module")
def pipe(exported):
    return pipeline(TASK, model=str(exported[0]))


def test_folder_is_plain_bert_without_remote_code(exported):
    _, work = exported
    for name in ("target", "context"):
        folder = work / name
        config = json.loads((folder / "config.json").read_text())
        assert config["model_type"] == "bert" and config["architectures"] == ["BertModel"]
        assert "auto_map" not in config and "t_jepa" not in json.dumps(config)
        assert not list(folder.rglob("*.py"))  # nothing for trust_remote_code to run
        modules = json.loads((folder / "modules.json").read_text())
        assert [m["type"] for m in modules] == [
            "sentence_transformers.models.Transformer",
            "sentence_transformers.models.Pooling",
        ]
        pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
        assert pooling["pooling_mode_mean_tokens"] and not pooling["pooling_mode_cls_token"]
        assert pooling["word_embedding_dimension"] == 32
        assert (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()


def test_encode_equals_the_feature_pipeline(encoded, pipe):
    expected = torch.stack(pipe(TEXTS, return_tensors=True)).numpy()
    assert encoded["target"].shape == (len(TEXTS), 32)
    np.testing.assert_allclose(encoded["target"], expected, rtol=0, atol=TOLERANCE)


def test_context_encoder_gives_the_context_vectors(encoded, pipe):
    expected = torch.stack(pipe(TEXTS, use_target_encoder=False, return_tensors=True)).numpy()
    np.testing.assert_allclose(encoded["context"], expected, rtol=0, atol=TOLERANCE)
    # The two encoders differ in this model (make_model perturbs the target), so the flag matters.
    assert np.abs(encoded["context"] - encoded["target"]).max() > 1e-2


def test_cli_errors_name_the_argument(exported, tmp_path, capsys):
    source, work = exported
    bro = tmp_path / "bro"
    torch.manual_seed(0)
    BroJepaModel(BroJepaConfig.tiny()).save_pretrained(bro)
    no_tokenizer = tmp_path / "no-tokenizer"
    make_model().save_pretrained(no_tokenizer)
    (tmp_path / "file").write_text("x")
    capsys.readouterr()  # the saves' progress bars
    for argv, start in (
        ([str(bro), str(tmp_path / "o1")], f"hf-jepa: error: DIR {str(bro)!r}: the sentence-transformers export is "),
        ([str(tmp_path / "missing"), str(tmp_path / "o2")], "hf-jepa: error: DIR"),
        ([str(no_tokenizer), str(tmp_path / "o3")], f"hf-jepa: error: DIR {str(no_tokenizer)!r}: no tokenizer"),
        ([str(source), str(work / "target")], f"hf-jepa: error: OUT {str(work / 'target')!r}: the folder is not empty"),
        ([str(source), str(tmp_path / "file")], "hf-jepa: error: OUT"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            main(["export-sentence-transformers", *argv])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and err.startswith(start) and err.count("\n") == 1, err
        assert "Traceback" not in err
    assert "bro_jepa" in json.dumps(json.loads((bro / "config.json").read_text()))
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o3").exists()


def test_force_overwrites_and_console_script(exported, tmp_path):
    source, work = exported
    out = tmp_path / "again"
    out.mkdir()
    (out / "old.txt").write_text("x")
    run = subprocess.run(
        [sys.executable, "-m", "hf_jepa.cli", "export-sentence-transformers", str(source), str(out), "--force"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"SentenceTransformer({str(out)!r})" in run.stdout
    # The same encoder as the first export: identical weights.
    from safetensors.torch import load_file

    first, again = load_file(work / "target" / "model.safetensors"), load_file(out / "model.safetensors")
    assert first.keys() == again.keys() and all(torch.equal(first[k], again[k]) for k in first)
