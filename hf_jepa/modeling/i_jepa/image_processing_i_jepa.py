"""Image processor for I-JEPA: resized to the model's `image_size`, scaled to [0, 1] and normalised with the statistics
the model was trained with (`config.pixel_mean` / `config.pixel_std`; `from_model_config` reads them)."""

import numpy as np
from transformers.image_processing_backends import PilBackend
from transformers.image_utils import PILImageResampling


class IJepaImageProcessor(PilBackend):
    r"""
    Turns PIL images, arrays or tensors into the `pixel_values` I-JEPA expects: `size` x `size`,
    `(x / 255 - image_mean) / image_std`, as many channels as `image_mean` has entries (grey for the MNIST presets:
    colour images are turned into grey first, so transformers' image pipelines, which convert every image to RGB,
    give a grey model the digit it was trained on; RGB for a 3-channel model: grey, palette and RGBA images are
    converted to RGB, grey arrays repeated over the channels). The defaults are the MNIST presets' (28 px, one
    channel); `IJepaImageProcessor.from_model_config(config)` matches any config (its size, channels and statistics).
    """

    resample = PILImageResampling.BICUBIC
    image_mean = [0.1307]
    image_std = [0.3081]
    size = {"height": 28, "width": 28}
    do_resize = True
    do_rescale = True
    do_normalize = True
    do_convert_rgb = False
    model_input_names = ["pixel_values"]

    @classmethod
    def from_model_config(cls, config) -> "IJepaImageProcessor":
        """The processor of an `IJepaConfig`: its backbone's `image_size` and its `pixel_mean` / `pixel_std`."""
        side = int(config.backbone_config.image_size)
        return cls(
            size={"height": side, "width": side},
            image_mean=list(config.pixel_mean),
            image_std=list(config.pixel_std),
        )

    def process_image(self, image, *args, **kwargs):
        """The backend's channel-first array with the model's channels (`image_mean`'s length). One channel: an
        image with three or four becomes grey, PIL images through `convert("L")` (ITU-R 601-2 luma, so a grey image
        converted to RGB comes back bit-equal), arrays weighted the same way (alpha dropped). Three channels: PIL
        images in any other mode through `convert("RGB")`, a grey array repeated over the three channels, an RGBA
        array without its alpha."""
        channels = len(np.atleast_1d(self.image_mean))
        single_channel = channels == 1
        if single_channel and hasattr(image, "convert") and getattr(image, "mode", "L") in ("RGB", "RGBA", "P", "CMYK"):
            image = image.convert("L")
        elif channels == 3 and hasattr(image, "convert") and getattr(image, "mode", "RGB") != "RGB":
            image = image.convert("RGB")
        array = super().process_image(image, *args, **kwargs)
        if single_channel and array.ndim == 3 and array.shape[0] in (3, 4):
            luma = np.asarray([0.299, 0.587, 0.114], dtype=np.float32)
            array = np.tensordot(luma, array[:3].astype(np.float32), axes=1)[None]
        elif channels == 3 and array.ndim == 2:
            array = np.repeat(array[None], 3, axis=0)
        elif channels == 3 and array.ndim == 3 and array.shape[0] in (1, 4):
            array = np.repeat(array, 3, axis=0) if array.shape[0] == 1 else array[:3]
        return array


__all__ = ["IJepaImageProcessor"]
