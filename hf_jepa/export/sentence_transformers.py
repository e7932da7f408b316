"""`export_sentence_transformers`: a T-JEPA model as a sentence-transformers folder that loads anywhere, without
hf_jepa or `trust_remote_code`.

The folder holds the encoder `embed` uses (the EMA target encoder when the objective has one, else the context
encoder) as a plain `BertModel` (`config.json` of model type "bert", `model.safetensors`), the model's tokenizer, and
the sentence-transformers layout around them: `modules.json` (Transformer -> Pooling), `sentence_bert_config.json`,
`1_Pooling/config.json` (mean over the attention mask, as `TJepaModel.embed` and the jepa-feature-extraction pipeline
pool) and `config_sentence_transformers.json`. So `SentenceTransformer(folder).encode(texts)` gives the pipeline's
vectors (tests/t_jepa/test_sentence_transformers.py checks it to 1e-5).

Why a separate folder rather than these files inside a T-JEPA training folder: sentence-transformers loads its
Transformer module with `AutoModel`, which on a T-JEPA folder builds the whole `TJepaModel` (predictor, both encoders)
whose `forward` is the training objective, not the encoder's states; and it would need hf_jepa installed. A plain BERT
folder is what every sentence-transformers version, and transformers alone, reads. The files are written by hand (not
with sentence-transformers' `save`), so exporting does not need sentence-transformers installed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["export_sentence_transformers"]

_POOLING_DIR = "1_Pooling"


def _versions() -> dict[str, str]:
    import importlib.metadata

    versions = {}
    for name, key in (("sentence-transformers", "sentence_transformers"), ("transformers", "transformers")):
        try:
            versions[key] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    import torch

    versions["pytorch"] = torch.__version__
    return versions


def export_sentence_transformers(
    model,
    output: str | os.PathLike,
    tokenizer=None,
    use_target_encoder: bool = True,
    overwrite: bool = False,
) -> Path:
    """Write `model` (a `TJepaModel`, or the folder / Hub id of one) to the folder `output` in the sentence-transformers
    layout (see the module docstring). `tokenizer`: default the one saved beside the model (required);
    `use_target_encoder=False` exports the context encoder instead of the EMA target. An existing non-empty
    `output` raises `FileExistsError` unless `overwrite`. Returns the folder."""
    from transformers import AutoTokenizer

    source = None
    if isinstance(model, (str, os.PathLike)):
        from ..cli_errors import load_model

        source = str(model)
        model = load_model(source)
        if tokenizer is None:
            try:
                tokenizer = AutoTokenizer.from_pretrained(source)
            except (OSError, ValueError) as error:
                raise ValueError(
                    f"model {source!r}: no tokenizer saved beside the model ({type(error).__name__}); save it there with "
                    "tokenizer.save_pretrained(folder), or pass tokenizer="
                ) from error
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type != "t_jepa":
        raise ValueError(
            f"model: the sentence-transformers export is for T-JEPA text models (model_type 't_jepa'), got "
            f"{type(model).__name__} with model_type {model_type!r}"
        )
    if tokenizer is None:
        raise ValueError("tokenizer: pass the model's tokenizer (sentence-transformers tokenizes with it)")
    vocab = int(model.config.backbone_config.vocab_size)
    if len(tokenizer) > vocab:
        raise ValueError(
            f"tokenizer: it has {len(tokenizer)} tokens but the model's vocabulary has {vocab}: it does not belong to "
            "this model"
        )
    output = Path(output)
    if output.is_file():
        raise NotADirectoryError(f"output: {output} is a file; give a folder")
    if output.is_dir() and any(output.iterdir()) and not overwrite:
        raise FileExistsError(f"output: {output} is not empty; choose another folder or pass overwrite=True (--force)")
    target = use_target_encoder and model.target_encoder is not None
    encoder = model.target_encoder if target else model.context_encoder
    output.mkdir(parents=True, exist_ok=True)
    from transformers.utils import logging as hf_logging

    # transformers' one-shard "Writing model shards" bar is noise for a CLI that prints the folder it wrote.
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        encoder.save_pretrained(output)  # a BertModel: config.json (model_type "bert") + model.safetensors
        tokenizer.save_pretrained(output)
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    hidden = int(model.config.backbone_config.hidden_size)
    files = {
        "modules.json": [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": _POOLING_DIR, "type": "sentence_transformers.models.Pooling"},
        ],
        # `model_args`: the encoder has no pooler (T-JEPA's BertModel is built with add_pooling_layer=False); without
        # it AutoModel would add a randomly initialised one (unused by mean pooling, but reported as missing weights).
        # The pipeline refuses texts past the position limit unless truncation=True; sentence-transformers truncates.
        "sentence_bert_config.json": {
            "max_seq_length": int(model.config.backbone_config.max_position_embeddings),
            "do_lower_case": False,
            "model_args": {"add_pooling_layer": False},
        },
        f"{_POOLING_DIR}/config.json": {
            "word_embedding_dimension": hidden,
            "pooling_mode_cls_token": False,
            "pooling_mode_mean_tokens": True,
            "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False,
            "pooling_mode_weightedmean_tokens": False,
            "pooling_mode_lasttoken": False,
            "include_prompt": True,
        },
        "config_sentence_transformers.json": {
            "__version__": _versions(),
            "model_type": "SentenceTransformer",
            "prompts": {},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
    }
    for name, content in files.items():
        (output / name).parent.mkdir(parents=True, exist_ok=True)
        (output / name).write_text(json.dumps(content, indent=2) + "\n")
    which = "EMA target encoder" if target else "context encoder"
    (output / "README.md").write_text(
        "---\nlibrary_name: sentence-transformers\npipeline_tag: sentence-similarity\ntags:\n- sentence-transformers\n"
        "- feature-extraction\n- t-jepa\n---\n\n"
        f"# T-JEPA sentence encoder\n\nThe {which} of the T-JEPA model `{source or 'in memory'}` (objective "
        f"`{model.config.objective}`) as a plain BERT encoder with mean pooling over the attention mask, written by "
        "`hf-jepa export-sentence-transformers`. Its vectors equal the `jepa-feature-extraction` pipeline's.\n\n"
        "```python\nfrom sentence_transformers import SentenceTransformer\n\n"
        f'model = SentenceTransformer("{output.name}")\nembeddings = model.encode(["A sentence.", "Another one."])\n```\n'
    )
    return output
