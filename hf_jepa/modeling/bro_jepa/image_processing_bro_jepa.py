"""Image processor for BRo-JEPA: grey-scale 28x28 digits, scaled to [0, 1] and normalised with MNIST statistics."""

from transformers.image_processing_backends import PilBackend
from transformers.image_utils import PILImageResampling


class BroJepaImageProcessor(PilBackend):
    r"""
    Turns PIL images, `(H, W, 1)` / `(1, H, W)` arrays or tensors of digits into the `pixel_values` BRo-JEPA expects:
    one channel, 28x28, `(x / 255 - 0.1307) / 0.3081`. Inputs must be grey-scale (the `modular-arithmetic` pipeline
    converts colour images to grey before calling it).
    """

    resample = PILImageResampling.BILINEAR
    image_mean = [0.1307]
    image_std = [0.3081]
    size = {"height": 28, "width": 28}
    do_resize = True
    do_rescale = True
    do_normalize = True
    do_convert_rgb = False
    model_input_names = ["pixel_values"]


__all__ = ["BroJepaImageProcessor"]
