"""`export_onnx`: write a model's inference paths (`hf_jepa.export.onnx_paths`) as fp32 ONNX files with dynamic batch
(and sequence / frame) axes, check each with onnxruntime against the model's own PyTorch function, and write a JSON
beside each file naming its inputs, outputs, source, opset and the measured parity.

The exporter is `torch.onnx.export(..., dynamo=True)` (torch.export + onnxscript), the one torch develops and the
default since torch 2.9; the TorchScript exporter (`dynamo=False`) is deprecated. See docs/guides/onnx.md.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .onnx_paths import OnnxPath, family_paths

__all__ = ["ONNX_TOLERANCE", "OnnxExport", "OnnxParityError", "check_parity", "export_onnx", "onnxruntime_session"]

logger = logging.getLogger(__name__)

# Largest |onnxruntime - PyTorch| accepted on any output element (fp32 both sides; measured ~1e-6 on the presets,
# docs/guides/onnx.md). Larger means the graph computes something else, not rounding.
ONNX_TOLERANCE = 1e-4
# The example batch the graph is traced with, and a second one the parity check also runs (through the dynamic axis).
# Neither is 1: torch.export specialises a dimension whose example size is 0 or 1.
EXPORT_BATCH, CHECK_BATCH = 2, 3
# A graph past protobuf's 2 GiB limit needs its weights in a side file; below it one self-contained file is simpler.
_EXTERNAL_DATA_BYTES = 1 << 30


class OnnxParityError(RuntimeError):
    """onnxruntime's outputs differ from PyTorch's by more than the tolerance."""


@dataclass
class OnnxExport:
    """One written path: the `.onnx` file, its JSON, and the largest |onnxruntime - PyTorch| at each checked batch."""

    path: str
    onnx_file: Path
    json_file: Path
    opset: int
    max_abs_diff: dict[int, float] = field(default_factory=dict)

    @property
    def worst(self) -> float:
        """The largest difference over every checked batch size."""
        return max(self.max_abs_diff.values())


def onnxruntime_session(onnx_file: str | os.PathLike, threads: int | None = None):
    """An `onnxruntime.InferenceSession` on the CPU for `onnx_file` (`threads`: intra-op threads; None = the
    runtime's default)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])


def check_parity(session, path: OnnxPath, batch: int, seed: int = 0) -> float:
    """The largest |onnxruntime - PyTorch| over every output of `path` on its seeded example inputs of `batch` rows;
    the PyTorch side is the model's public function (`path.reference`)."""
    inputs = path.inputs(batch, seed)
    with torch.no_grad():
        expected = path.reference(**inputs)
    got = session.run(list(path.output_names), {name: tensor.numpy() for name, tensor in inputs.items()})
    worst = 0.0
    for name, reference, value in zip(path.output_names, expected, got):
        reference = reference.float().numpy()
        if tuple(value.shape) != tuple(reference.shape):
            raise OnnxParityError(
                f"{path.name}: onnxruntime's {name} has shape {tuple(value.shape)}, PyTorch's {tuple(reference.shape)} "
                f"(batch {batch}): a dynamic axis was exported as a constant"
            )
        worst = max(worst, float(abs(value - reference).max()) if reference.size else 0.0)
    return worst


def _output_target(output: Path | None, folder: Path | None, names: list[str]) -> dict[str, Path]:
    """Where each path's `.onnx` goes: `output` itself when it ends in `.onnx` (one path only), else `<output>/<name>.onnx`
    (default output: `<folder>/onnx`)."""
    if output is not None and output.suffix == ".onnx":
        if len(names) != 1:
            raise ValueError(
                f"--output {output}: a .onnx file holds one path, but {len(names)} are exported ({', '.join(names)}); "
                "give a folder, or pick one with --path"
            )
        return {names[0]: output}
    if output is None:
        if folder is None:
            raise ValueError("output: give a folder or a .onnx file for an in-memory model")
        output = folder / "onnx"
    return {name: output / f"{name}.onnx" for name in names}


def _describe(tensor: torch.Tensor, axes: dict[int, str]) -> dict:
    return {
        "dtype": str(tensor.dtype).removeprefix("torch."),
        "shape": [axes.get(i, n) for i, n in enumerate(tensor.shape)],
    }


@contextlib.contextmanager
def _quiet_exporter():
    """The dynamo exporter's known, harmless chatter silenced (its notes on skipping torchvision's ops, torch.export's
    LeafSpec deprecation, the notes on merged axis names, and onnxscript's / onnx_ir's INFO lines on every graph pass,
    dozens per file under the CLI's INFO logging), so a user sees one line per file; all of it is shown when this
    module logs at DEBUG. Warnings and errors of those libraries otherwise still show."""
    if logger.isEnabledFor(logging.DEBUG):
        yield
        return
    levels = {"torch.onnx._internal.exporter._registration": logging.ERROR, "onnxscript": logging.WARNING}
    levels["onnx_ir"] = logging.WARNING
    loggers = {name: logging.getLogger(name) for name in levels}
    previous = {name: log.level for name, log in loggers.items()}
    try:
        for name, log in loggers.items():
            log.setLevel(max(levels[name], log.getEffectiveLevel()))
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"# The axis name: .* will not be used", category=UserWarning)
            warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)", category=FutureWarning)
            yield
    finally:
        for name, log in loggers.items():
            log.setLevel(previous[name])


def _export_one(path: OnnxPath, onnx_file: Path, opset: int | None) -> int:
    """Trace `path` at `EXPORT_BATCH` and write `onnx_file`; returns the file's opset."""
    import onnx

    inputs = path.inputs(EXPORT_BATCH, 0)
    dynamic_shapes = tuple(path.dynamic.get(name, {}) for name in inputs)
    weight_bytes = sum(p.numel() * p.element_size() for p in path.module.parameters())
    onnx_file.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad(), path.tracing(), _quiet_exporter():
        torch.onnx.export(
            path.module.eval(),
            tuple(inputs.values()),
            str(onnx_file),
            dynamo=True,
            input_names=list(inputs),
            output_names=list(path.output_names),
            dynamic_shapes=dynamic_shapes,
            opset_version=opset,
            external_data=weight_bytes > _EXTERNAL_DATA_BYTES,
            verbose=False,
        )
    model = onnx.load(str(onnx_file), load_external_data=False)
    return next(entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx"))


def export_onnx(
    model,
    output: str | os.PathLike | None = None,
    paths: list[str] | None = None,
    opset: int | None = None,
    tolerance: float = ONNX_TOLERANCE,
    source: str | None = None,
) -> list[OnnxExport]:
    """Export the paths named in `paths` (default: all of the model's) of `model` (an hf-jepa model, or the folder /
    Hub id to load it from) and check each with onnxruntime.

    `output`: a folder (one `<path>.onnx` + `<path>.json` each; default `<folder>/onnx`) or a `.onnx` file for a
    single path. `opset`: the ONNX opset (None: the exporter's default). Raises `OnnxParityError` (and removes the
    file) when onnxruntime differs from the model's own function by more than `tolerance` at batch 2 or 3.
    Returns one `OnnxExport` per path, in the order of `paths`."""
    import onnxruntime

    folder = None
    if isinstance(model, (str, os.PathLike)):
        from ..cli_errors import load_model

        source = str(model) if source is None else source
        folder = Path(model) if Path(model).is_dir() else None
        model = load_model(str(model))
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not tolerance > 0:
        raise ValueError(f"tolerance must be a positive number, got {tolerance!r}")
    if opset is not None and (isinstance(opset, bool) or not isinstance(opset, int) or opset < 1):
        raise ValueError(f"opset must be a positive integer, got {opset!r}")
    model = model.float().eval()
    available = {path.name: path for path in family_paths(model)}
    names = list(available) if not paths else list(dict.fromkeys(paths))
    for name in names:
        if name not in available:
            raise ValueError(
                f"--path {name!r}: this {model.config.model_type} model has no such path; choose from "
                f"{', '.join(available)}"
            )
    targets = _output_target(None if output is None else Path(output), folder, names)
    results = []
    for name in names:
        path, onnx_file = available[name], targets[name]
        opset_used = _export_one(path, onnx_file, opset)
        session = onnxruntime_session(onnx_file)
        diffs = {batch: check_parity(session, path, batch) for batch in (EXPORT_BATCH, CHECK_BATCH)}
        worst = max(diffs.values())
        if not worst <= tolerance:  # NaN fails too
            onnx_file.unlink(missing_ok=True)
            raise OnnxParityError(
                f"{name}: onnxruntime differs from PyTorch by up to {worst:.3g} (tolerance {tolerance:g}; batch sizes "
                f"{', '.join(map(str, diffs))}), so the export is wrong; {onnx_file} was removed"
            )
        example = path.inputs(EXPORT_BATCH, 0)
        with torch.no_grad():
            outputs = path.reference(**example)
            other = path.reference(**path.inputs(CHECK_BATCH, 0))
        # An output axis is dynamic where its size changed with the inputs' dynamic axes; it takes the name of the
        # first input's axis at the same index (batch; sequence for text, frames for EPM-JEPA).
        first_axes = path.dynamic.get(next(iter(example)), {})
        output_axes = [
            {i: first_axes.get(i, f"dim_{i}") for i, (a, b) in enumerate(zip(x.shape, y.shape)) if a != b}
            for x, y in zip(outputs, other)
        ]
        record = {
            "format": "onnx",
            "path": name,
            "description": path.description,
            "model_type": model.config.model_type,
            "source": source,
            "opset": opset_used,
            "dtype": "float32",
            "inputs": {key: _describe(value, path.dynamic.get(key, {})) for key, value in example.items()},
            "outputs": {
                key: _describe(value, axes) for key, value, axes in zip(path.output_names, outputs, output_axes)
            },
            "parity": {
                "max_abs_diff": {str(batch): diff for batch, diff in diffs.items()},
                "tolerance": tolerance,
                "reference": "the model's PyTorch function (encode / embed / predict), fp32, eval mode",
                "onnxruntime": onnxruntime.__version__,
            },
            "exporter": f"torch.onnx.export(dynamo=True), torch {torch.__version__}",
        }
        json_file = onnx_file.with_suffix(".json")
        json_file.write_text(json.dumps(record, indent=2) + "\n")
        logger.info("Wrote %s (max |onnxruntime - PyTorch| %.2g)", onnx_file, worst)
        results.append(OnnxExport(name, onnx_file, json_file, opset_used, diffs))
    return results
