"""`modular-arithmetic` pipeline: image of a digit `x` + operation `k` -> predicted digit `(x + k) mod modulus`.

The pipeline encodes the image, applies the operation in latent space with the model's predictor and classifies the
predicted latent against the model's class prototypes (or its supervised head)::

    from transformers import pipeline
    import hf_jepa  # registers the task

    pipe = pipeline("modular-arithmetic", model="path/or/org/name")
    pipe(image, operation=3)                  # {"digit": ..., "score": ..., "operation": 3, "source_digit": ..., ...}
    pipe([img_a, img_b], operation=[1, -2], batch_size=2)

This file imports only numpy, torch, PIL, transformers and `.base` (no `hf_jepa` imports): `pipe.save_pretrained`
copies both next to the weights so `pipeline(model=dir, trust_remote_code=True)` works where hf_jepa is not installed.
"""

import numbers
import os

import numpy as np
import torch

from .base import JepaPipeline, check_flag, eval_mode

__all__ = ["ModularArithmeticPipeline"]


def _is_sequence(value) -> bool:
    if isinstance(value, (list, tuple)):
        return True
    if isinstance(value, (np.ndarray, torch.Tensor)):
        return value.ndim > 0
    return False


def _is_batch_array(value) -> bool:
    """A 4-D array or tensor is a batch of images `(N, C, H, W)` / `(N, H, W, C)`."""
    return isinstance(value, (np.ndarray, torch.Tensor)) and value.ndim == 4


class ModularArithmeticPipeline(JepaPipeline):
    r"""
    Predicts `(x + k) mod modulus` from an image of digit `x` and an operation `k`, with a BRo-JEPA model.

    Inputs (one or a list):
        PIL images (converted to grey-scale), numpy arrays or torch tensors of shape `(H, W)`, `(H, W, 1)`,
        `(1, H, W)` (or 3-channel colour, converted to grey-scale) - integer pixels in `0..255` or floats in `[0, 1]` -,
        a 4-D batch `(N, C, H, W)`, file paths / URLs, or dicts `{"image": ..., "operation": k}`.
        Images are resized to the model's size and normalised by the pipeline's image processor.

    Call arguments:
        operation (`int` or list of `int`): the operation `k` in `[-(modulus - 1), modulus - 1]`; a list gives one
            operation per image (same length as the list of images).
        rollout (`bool`, *optional*, defaults to `False`): apply the unit step `sign(k)` `|k|` times instead of `k`
            at once (the multi-step evaluation of the paper).
        return_tensors (`bool`, *optional*, defaults to `False`): return `latent` as a tensor instead of a list.
        batch_size (`int`): images per forward pass (works for any `batch_size`).

    Returns (per image) a dict:
        `digit` (predicted `(x + k) mod modulus`), `score` (its softmax probability), `operation` (`k`),
        `source_digit` / `source_score` (classification of the input itself: the predicted latent for `k = 0`),
        `latent` (the predicted latent `P(z, k)`).
    """

    model_types = ("bro_jepa",)
    _load_image_processor = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.image_processor is None:
            # A model saved without its image processor: use the one registered for its config (hf_jepa installed),
            # else a generic one built from the model config's normalisation. Batching needs an image processor.
            self.image_processor = self._default_image_processor()

    def _default_image_processor(self):
        config = self.model.config
        try:
            from transformers.models.auto.image_processing_auto import IMAGE_PROCESSOR_MAPPING

            entry = IMAGE_PROCESSOR_MAPPING[type(config)]
            if isinstance(entry, dict):
                cls = entry.get("pil") or next(c for c in entry.values() if c is not None)
            elif isinstance(entry, (list, tuple)):
                cls = next(c for c in entry if c is not None)
            else:
                cls = entry
            return cls()
        except Exception:  # noqa: BLE001 - not registered (e.g. loaded with trust_remote_code): build a generic one
            from transformers.image_processing_backends import PilBackend
            from transformers.image_utils import PILImageResampling

            size = getattr(config, "image_size", 28)
            return PilBackend(
                image_mean=[getattr(config, "pixel_mean", 0.1307)],
                image_std=[getattr(config, "pixel_std", 0.3081)],
                size={"height": size, "width": size},
                resample=PILImageResampling.BILINEAR,
                do_resize=True,
                do_rescale=True,
                do_normalize=True,
            )

    # ------------------------------------------------------------------ argument handling

    def _sanitize_parameters(self, operation=None, rollout=None, return_tensors=None, **kwargs):
        preprocess_params, forward_params, postprocess_params = {}, {}, {}
        if operation is not None:
            preprocess_params["operation"] = operation
        if rollout is not None:
            forward_params["rollout"] = check_flag(rollout, "rollout")
        if return_tensors is not None:
            postprocess_params["return_tensors"] = check_flag(return_tensors, "return_tensors")
        return preprocess_params, forward_params, postprocess_params

    @property
    def modulus(self) -> int:
        return int(self.model.config.modulus)

    def _check_operation(self, operation) -> int:
        modulus = self.modulus
        if isinstance(operation, (np.ndarray, torch.Tensor)) and operation.ndim == 0:
            operation = operation.item()
        if operation is None:
            raise ValueError(
                "operation is required: pass `operation=k` (an integer in "
                f"[-{modulus - 1}, {modulus - 1}]) or a list with one operation per image"
            )
        if isinstance(operation, bool) or not isinstance(operation, numbers.Integral):
            raise ValueError(f"operation must be an integer in [-{modulus - 1}, {modulus - 1}], got {operation!r}")
        operation = int(operation)
        if abs(operation) >= modulus:
            raise ValueError(
                f"operation must lie in [-{modulus - 1}, {modulus - 1}] for this model (modulus {modulus}), "
                f"got {operation}"
            )
        return operation

    def _check_ready(self):
        model = self.model
        if getattr(model, "classifier", None) is None and hasattr(model, "has_class_prototypes"):
            if not model.has_class_prototypes():
                raise RuntimeError(
                    "This BRo-JEPA model has no class prototypes, so its predicted latents cannot be turned into "
                    "digits: call `model.fill_class_prototypes(pixel_values, labels)` on labelled images (every class "
                    "at least once) before using the modular-arithmetic pipeline (then save the model again)."
                )

    def __call__(self, inputs=None, operation=None, **kwargs):
        """Predict `(x + k) mod modulus` for one image or a list of images; see the class docstring."""
        if inputs is None:
            inputs = kwargs.pop("images", None)
        if inputs is None:
            raise ValueError("pass the image(s) as the first argument")
        self._check_ready()
        if _is_batch_array(inputs):
            if len(inputs) == 0:
                raise ValueError(f"inputs: got an empty batch of images (shape {tuple(inputs.shape)})")
            inputs = list(inputs)
        elif isinstance(inputs, (list, tuple)) and len(inputs) == 0:
            raise ValueError("inputs: got an empty list of images")
        if _is_sequence(operation):
            operations = operation.tolist() if isinstance(operation, (np.ndarray, torch.Tensor)) else list(operation)
            if not isinstance(inputs, (list, tuple)):
                raise ValueError(
                    f"operation is a list of {len(operations)} operations but a single image was given: pass a list "
                    "of images of the same length, or an integer operation"
                )
            if len(operations) != len(inputs):
                raise ValueError(
                    f"operation has {len(operations)} entries but {len(inputs)} images were given: pass one "
                    "operation per image, or a single integer"
                )
            inputs = [{"image": image, "operation": self._check_operation(k)} for image, k in zip(inputs, operations)]
            operation = None
        elif operation is not None:
            operation = self._check_operation(operation)
            kwargs["operation"] = operation
        elif isinstance(inputs, (list, tuple)):
            for item in inputs:  # fail fast, before any image is processed
                self._check_operation(item.get("operation") if isinstance(item, dict) else None)
        return super().__call__(inputs, **kwargs)

    # ------------------------------------------------------------------ image conversion

    def _to_image(self, image):
        """Return `(image, do_rescale)` in a form the image processor accepts: grey-scale, one channel."""
        from PIL import Image

        if isinstance(image, (str, os.PathLike)):
            from transformers.image_utils import load_image

            image = load_image(str(image))
        if isinstance(image, Image.Image):
            return (image if image.mode == "L" else image.convert("L")), True
        if isinstance(image, torch.Tensor):
            image = image.detach().cpu()
            image = image.float().numpy() if image.dtype == torch.bfloat16 else image.numpy()
        if not isinstance(image, np.ndarray):
            raise TypeError(
                "inputs: images must be PIL images, numpy arrays, torch tensors, file paths or dicts "
                f"{{'image': ..., 'operation': k}}, got {type(image).__name__}"
            )
        array = image
        if array.ndim == 3 and array.shape[0] in (1, 3) and array.shape[-1] not in (1, 3):
            array = np.moveaxis(array, 0, -1)  # (C, H, W) -> (H, W, C)
        if array.ndim == 2:
            array = array[:, :, None]
        if array.ndim != 3 or array.shape[-1] not in (1, 3):
            raise ValueError(
                f"inputs: an image array must have shape (H, W), (H, W, 1), (1, H, W) or 3-channel colour, "
                f"got {tuple(image.shape)}"
            )
        if array.shape[0] == 0 or array.shape[1] == 0:
            raise ValueError(f"inputs: the image is empty (shape {tuple(image.shape)})")
        if array.dtype == np.bool_:
            raise ValueError(
                "inputs: boolean image arrays are ambiguous: pass uint8 pixels (0..255) or floats in [0, 1]"
            )
        if np.issubdtype(array.dtype, np.integer):
            if array.size and (array.min() < 0 or array.max() > 255):
                raise ValueError("inputs: integer image arrays must hold pixels in 0..255")
            array, do_rescale = array.astype(np.uint8), True
        elif np.issubdtype(array.dtype, np.floating):
            if not np.isfinite(array).all():
                count = int((~np.isfinite(array)).sum())
                raise ValueError(
                    f"inputs: the image holds {count} NaN or inf value(s); pixels must be finite, in [0, 1]"
                )
            if array.size and (array.min() < 0 or array.max() > 1):
                raise ValueError(
                    "inputs: floating-point image arrays must hold pixels in [0, 1] (use uint8 for 0..255); already "
                    "normalised pixel_values should go to the model directly, not through the pipeline"
                )
            array, do_rescale = array.astype(np.float32), False
        else:
            raise ValueError(f"inputs: unsupported image dtype {array.dtype}")
        if array.shape[-1] == 3:  # ITU-R 601 luma, as PIL's convert("L")
            grey = array.astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
            array = (np.round(grey).astype(np.uint8) if do_rescale else grey)[:, :, None]
        return array, do_rescale

    # ------------------------------------------------------------------ pipeline steps

    def preprocess(self, inputs, operation=None):
        if isinstance(inputs, dict):
            if "image" not in inputs:
                raise ValueError("a dict input needs an 'image' key (and optionally 'operation')")
            operation = inputs.get("operation", operation)
            inputs = inputs["image"]
        operation = self._check_operation(operation)
        image, do_rescale = self._to_image(inputs)
        pixel_values = self.image_processor(images=image, do_rescale=do_rescale, return_tensors="pt")["pixel_values"]
        if self.dtype is not None:
            pixel_values = pixel_values.to(self.dtype)
        return {"pixel_values": pixel_values, "operation": torch.tensor([operation], dtype=torch.long)}

    def _forward(self, model_inputs, rollout=False):
        # Eval mode: BatchNorm must use its running statistics (a batch can hold a single image).
        with eval_mode(self.model) as model:
            pixel_values, operations = model_inputs["pixel_values"], model_inputs["operation"]
            context_latent = model.encode(pixel_values)
            if rollout:
                predicted_latent = model.rollout(context_latent, operations)
            else:
                predicted_latent = model.predict(context_latent, operations)
            logits = model.class_logits(predicted_latent)
            if logits is None:
                self._check_ready()
                raise RuntimeError("the model returned no class logits")
            source_logits = model.class_logits(model.predict(context_latent, torch.zeros_like(operations)))
        # Per-sample tensors only, so batches can be split back into single results.
        return {
            "logits": logits,
            "source_logits": source_logits,
            "predicted_latent": predicted_latent,
            "operation": operations,
        }

    def postprocess(self, model_outputs, return_tensors=False):
        probabilities = model_outputs["logits"][0].float().softmax(-1)
        source_probabilities = model_outputs["source_logits"][0].float().softmax(-1)
        digit, source_digit = int(probabilities.argmax()), int(source_probabilities.argmax())
        latent = model_outputs["predicted_latent"][0]
        return {
            "digit": digit,
            "score": float(probabilities[digit]),
            "operation": int(model_outputs["operation"].reshape(-1)[0]),
            "source_digit": source_digit,
            "source_score": float(source_probabilities[source_digit]),
            "latent": latent.clone() if return_tensors else latent.float().tolist(),
        }
