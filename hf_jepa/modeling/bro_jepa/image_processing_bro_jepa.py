"""Image processor for BRo-JEPA: grey-scale 28x28 digits, scaled to [0, 1] and normalised with MNIST statistics."""

import numpy as np
from transformers.image_processing_backends import PilBackend
from transformers.image_utils import PILImageResampling


class BroJepaImageProcessor(PilBackend):
    r"""
    Turns PIL images, `(H, W, 1)` / `(1, H, W)` arrays or tensors of digits into the `pixel_values` BRo-JEPA expects:
    one channel, 28x28, `(x / 255 - 0.1307) / 0.3081`. Colour images (RGB PIL images, 3-channel arrays; transformers'
    image pipelines convert every image to RGB before calling the processor) are turned into grey first, with PIL's
    own "L" conversion, so a grey digit comes back unchanged.
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

    def process_image(self, image, *args, **kwargs):
        """The backend's channel-first array; grey when the model takes one channel (`image_mean` has one entry)
        and the image has three or four: PIL images through `convert("L")` (ITU-R 601-2 luma, so a grey image
        converted to RGB comes back bit-equal), arrays weighted the same way (alpha dropped)."""
        single_channel = len(np.atleast_1d(self.image_mean)) == 1
        if single_channel and hasattr(image, "convert") and getattr(image, "mode", "L") in ("RGB", "RGBA", "P", "CMYK"):
            image = image.convert("L")
        array = super().process_image(image, *args, **kwargs)
        if single_channel and array.ndim == 3 and array.shape[0] in (3, 4):
            luma = np.asarray([0.299, 0.587, 0.114], dtype=np.float32)
            array = np.tensordot(luma, array[:3].astype(np.float32), axes=1)[None]
        return array


__all__ = ["BroJepaImageProcessor"]
