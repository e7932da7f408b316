"""The export commands of `hf-jepa`: `export-onnx` (hf_jepa.export.onnx_export) and `export-sentence-transformers`
(hf_jepa.export.sentence_transformers). Importing this module imports neither torch nor onnx, so `hf-jepa --help`
stays fast."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from .cli_errors import CliError

__all__ = ["add_export_commands"]


def _model_folder(value: str) -> str:
    if not Path(value).is_dir():
        raise CliError(f"DIR {value!r}: no such folder; give a saved hf-jepa model folder (config.json + weights)")
    if not (Path(value) / "config.json").is_file():
        raise CliError(f"DIR {value!r}: the folder has no config.json; give a saved hf-jepa model folder")
    return value


def cmd_export_onnx(args: argparse.Namespace) -> int:
    """Export the model's paths to ONNX and check them with onnxruntime; prints one line per file."""
    missing = [name for name in ("onnx", "onnxruntime", "onnxscript") if importlib.util.find_spec(name) is None]
    if missing:
        raise CliError(f'ONNX export needs {", ".join(missing)}: pip install "hf-jepa[onnx]"')
    if args.opset is not None and args.opset < 1:
        raise CliError(f"--opset {args.opset}: expected a positive ONNX opset version (e.g. 18)")
    if args.tolerance is not None and not args.tolerance > 0:
        raise CliError(f"--tolerance {args.tolerance}: expected a positive number")
    folder = _model_folder(args.model_dir)
    import hf_jepa  # noqa: F401  (registers the configs and models with the Auto classes)

    from .export.onnx_export import ONNX_TOLERANCE, export_onnx

    try:
        results = export_onnx(
            folder,
            output=args.output,
            paths=args.path or None,
            opset=args.opset,
            tolerance=ONNX_TOLERANCE if args.tolerance is None else args.tolerance,
        )
    except ValueError as error:
        # The library names its Python argument `model`; on the command line that is DIR.
        message = str(error)
        if message.startswith("model: "):
            message = f"DIR {folder!r}: " + message.removeprefix("model: ")
        raise CliError(message) from error
    for result in results:
        print(
            f"{result.onnx_file} (opset {result.opset}): max |onnxruntime - PyTorch| = {result.worst:.2g} "
            f"at batch sizes {', '.join(map(str, result.max_abs_diff))}"
        )
    return 0


def _sentence_transformers_arguments(args: argparse.Namespace) -> str:
    """Check DIR (a T-JEPA folder with its tokenizer) and OUT (new, empty, or --force) before anything loads, so each
    mistake is named by its argument; returns DIR."""
    import json

    folder = _model_folder(args.model_dir)
    try:
        model_type = json.loads((Path(folder) / "config.json").read_text()).get("model_type")
    except (OSError, ValueError, AttributeError) as error:
        raise CliError(f"DIR {folder!r}: config.json is not a readable JSON mapping ({error})") from error
    if model_type != "t_jepa":
        raise CliError(
            f"DIR {folder!r}: the sentence-transformers export is for T-JEPA text models (model_type 't_jepa'), "
            f"this folder's model_type is {model_type!r}"
        )
    if not any((Path(folder) / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt")):
        raise CliError(
            f"DIR {folder!r}: no tokenizer saved beside the model; save it there with tokenizer.save_pretrained(DIR)"
        )
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise CliError(f"OUT {args.output!r}: is a file; give a folder to write")
    if out.is_dir() and any(out.iterdir()) and not args.force:
        raise CliError(f"OUT {args.output!r}: the folder is not empty; choose another folder or pass --force")
    return folder


def cmd_export_sentence_transformers(args: argparse.Namespace) -> int:
    """Write DIR's T-JEPA encoder as a sentence-transformers folder OUT; prints the folder written."""
    folder = _sentence_transformers_arguments(args)
    import hf_jepa  # noqa: F401

    from .export.sentence_transformers import export_sentence_transformers

    try:
        out = export_sentence_transformers(
            folder, args.output, use_target_encoder=not args.context_encoder, overwrite=args.force
        )
    except (ValueError, FileExistsError, NotADirectoryError) as error:
        raise CliError(str(error)) from error
    print(f"Wrote the sentence-transformers folder {out} (load it with SentenceTransformer({str(out)!r}))")
    return 0


def add_export_commands(sub) -> tuple[argparse.ArgumentParser, ...]:
    """Add `export-onnx` and `export-sentence-transformers` to the `hf-jepa` subparsers `sub`; returns their parsers."""
    onnx = sub.add_parser(
        "export-onnx",
        help="export a model's encoder / feature paths to ONNX, checked with onnxruntime",
        description="Export every inference path of a saved hf-jepa model (or the --path ones) to fp32 ONNX with "
        "dynamic batch (and sequence / frame) axes; each file is checked with onnxruntime against the model's own "
        "PyTorch function and gets a JSON beside it (inputs, outputs, opset, parity). Paths: encoder (all families; "
        "I-JEPA and T-JEPA: the EMA target, as jepa-feature-extraction), context-encoder (I-JEPA, T-JEPA), "
        "target-encoder (BRo-JEPA, EPM-JEPA, JEPA-Reasoner), predictor (BRo-JEPA).",
    )
    onnx.add_argument("model_dir", metavar="DIR", help="a saved hf-jepa model folder")
    onnx.add_argument("--output", default=None, help="a folder (default DIR/onnx) or a .onnx file for one --path")
    onnx.add_argument(
        "--path", action="append", default=None, metavar="NAME", help="export only this path (repeatable)"
    )
    onnx.add_argument("--opset", type=int, default=None, help="ONNX opset version (default: the exporter's)")
    onnx.add_argument("--tolerance", type=float, default=None, help="largest accepted |onnxruntime - PyTorch| (1e-4)")
    onnx.set_defaults(handler=cmd_export_onnx)
    st = sub.add_parser(
        "export-sentence-transformers",
        help="write a T-JEPA model as a sentence-transformers folder (plain BERT + mean pooling)",
        description="Write the encoder T-JEPA embeds with (the EMA target when there is one) as a plain BertModel "
        "with its tokenizer and the sentence-transformers layout (modules.json, mean pooling), loadable with "
        "SentenceTransformer(OUT) without hf_jepa; encode() gives the jepa-feature-extraction pipeline's vectors.",
    )
    st.add_argument("model_dir", metavar="DIR", help="a saved T-JEPA model folder with its tokenizer")
    st.add_argument("output", metavar="OUT", help="the folder to write (must be empty or new)")
    st.add_argument("--context-encoder", action="store_true", help="export the context encoder, not the EMA target")
    st.add_argument("--force", action="store_true", help="write into a non-empty OUT")
    st.set_defaults(handler=cmd_export_sentence_transformers)
    return onnx, st
