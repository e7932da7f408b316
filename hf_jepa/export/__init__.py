"""Export hf-jepa models to other runtimes: ONNX (`export_onnx`, every family's encoder / feature path, checked with
onnxruntime) and the sentence-transformers layout for T-JEPA (`export_sentence_transformers`). Importing this package
imports torch but neither onnx nor sentence-transformers (each is imported by the function that needs it)."""

from .onnx_export import ONNX_TOLERANCE, OnnxExport, OnnxParityError, export_onnx
from .onnx_paths import OnnxPath, family_paths

__all__ = ["ONNX_TOLERANCE", "OnnxExport", "OnnxParityError", "OnnxPath", "export_onnx", "family_paths"]
