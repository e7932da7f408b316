"""Converting released checkpoints into hf-jepa folders (`hf-jepa convert`)."""

from .i_jepa import ConversionResult, convert_i_jepa, infer_layout
from .i_jepa_keys import ConversionError

__all__ = ["ConversionError", "ConversionResult", "convert_i_jepa", "infer_layout"]
