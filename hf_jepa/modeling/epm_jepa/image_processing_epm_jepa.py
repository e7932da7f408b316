"""Image processor for EPM-JEPA's frame encoder: grey 64x64 frames scaled to [0, 1] (the model is trained on Moving
MNIST frames in [0, 1], without normalisation)."""

import numpy as np
from transformers.image_processing_backends import PilBackend
from transformers.image_utils import PILImageResampling


class EpmJepaImageProcessor(PilBackend):
    r"""
    Turns PIL images, arrays or tensors into single frames for EPM-JEPA's frame encoder: one channel (colour images
    are turned into grey first), `size` x `size` (64 by default), `x / 255`, no normalisation (`image_mean` 0,
    `image_std` 1). `EpmJepaImageProcessor.from_model_config(config)` matches a config's `image_size`.
    """

    resample = PILImageResampling.BILINEAR
    image_mean = [0.0]
    image_std = [1.0]
    size = {"height": 64, "width": 64}
    do_resize = True
    do_rescale = True
    do_normalize = False
    do_convert_rgb = False
    model_input_names = ["pixel_values"]

    @classmethod
    def from_model_config(cls, config) -> "EpmJepaImageProcessor":
        """The processor of an `EpmJepaConfig`: its `image_size` and `num_channels` (one channel, or three)."""
        side = int(config.image_size)
        channels = int(config.num_channels)
        return cls(size={"height": side, "width": side}, image_mean=[0.0] * channels, image_std=[1.0] * channels)

    # Copied from hf_jepa.modeling.bro_jepa.image_processing_bro_jepa.BroJepaImageProcessor.process_image
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


__all__ = ["EpmJepaImageProcessor"]
