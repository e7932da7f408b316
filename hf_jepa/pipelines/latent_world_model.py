"""`latent-world-model` pipeline: a sequence of frames -> the predicted latent of the next frame, and the surprisal of
every frame the model can score.

For EPM-JEPA world models (`model_type="epm_jepa"`, any track)::

    from transformers import pipeline
    import hf_jepa  # registers the task

    pipe = pipeline("latent-world-model", model="path/or/org/name")
    pipe(frames)                        # {"predicted_latent": [...], "surprisal": [...], "num_frames": T}
    pipe([frames_a, frames_b])          # one dict per sequence
    pipe(frames, warm_experience=True)  # write the sequence's transitions into the experience buffer first

This file imports only numpy, torch, PIL, transformers and `.base` (no `hf_jepa` imports): `pipe.save_pretrained`
copies both next to the weights so `pipeline(model=dir, trust_remote_code=True)` works where hf_jepa is not installed.
"""

import numpy as np
import torch

from .base import JepaPipeline, array_to_tensor, check_flag, eval_mode, is_array, is_pil_image, pixels_to_unit_float

__all__ = ["LatentWorldModelPipeline"]

MODEL_TYPE = "epm_jepa"


def _is_frame(value) -> bool:
    """A single frame inside a list: a PIL image or a 2-D array / tensor `(H, W)`."""
    return is_pil_image(value) or (is_array(value) and value.ndim == 2)


class LatentWorldModelPipeline(JepaPipeline):
    r"""
    Runs an EPM-JEPA latent world model on frame sequences: encodes the frames, predicts the latent of the frame after
    the last one from the last `context_length` frames, and scores each frame from `context_length` on against the EMA
    target encoder's latent (the per-step surprisal the model's gate watches).

    Inputs (`inputs`, one sequence or a list of sequences):
        A sequence is a numpy array or torch tensor of shape `(T, H, W)` (single-channel models), `(T, C, H, W)` or
        `(T, H, W, C)` with integer pixels in `0..255` (e.g. `uint8`) or floats in `[0, 1]`; or a list of frames
        (PIL images, converted to the model's channels, or 2-D arrays / tensors `(H, W)`). Frames must already have
        the model's size (`config.image_size`, 64x64 for Moving MNIST): they are not resized. A sequence needs at
        least `config.context_length` frames.
        A list whose elements are themselves sequences (3-D / 4-D arrays or lists of frames), or a 5-D array
        `(N, T, ...)`, gives one result per sequence, in order. A list of PIL images / 2-D arrays is ONE sequence.

    Call arguments:
        warm_experience (`bool`, *optional*, defaults to `False`): before predicting, write every transition of the
            sequence into the model's experience buffer (`model.warm_experience(..., gated=False)`, so it needs at
            least `context_length + 1` frames); the predicted latent and the surprisal are then computed with the
            updated buffer. The buffer keeps what was written (sequences of a list are written one after another,
            each before its own prediction); `model.reset_experience()` empties it. Only for tracks with a buffer
            (`"ei"`, `"epm"`). With `False` (the default) the buffer and the surprisal gate are left untouched.
        return_tensors (`bool`, *optional*, defaults to `False`): return `predicted_latent` and `surprisal` as float
            tensors instead of lists of floats.
        batch_size: sequences run one per forward pass (they may differ in length); only `batch_size=1` is accepted.

    Returns (per sequence) a dict:
        `predicted_latent`: the predicted latent of frame `T` (the frame after the last one), a list of
            `latent_dim` floats (`model.predict_next_latent`);
        `surprisal`: the squared prediction error, averaged over latent dimensions, of frames `context_length ..
            T-1` (each predicted from the `context_length` frames before it) against the EMA target encoder's
            latents, a list of `T - context_length` floats, empty when `T == context_length` (`model(...).surprisal`);
        `num_frames`: `T`.

    The model runs in eval mode inside the pipeline (its mode is restored afterwards).
    """

    model_types = (MODEL_TYPE,)
    _load_image_processor = None

    def __init__(self, *args, **kwargs):
        model = kwargs["model"] if "model" in kwargs else (args[0] if args else None)
        model_type = getattr(getattr(model, "config", None), "model_type", None)
        if model_type != MODEL_TYPE or not hasattr(model, "predict_next_latent"):
            raise TypeError(
                f"model: the latent-world-model pipeline needs an EPM-JEPA world model (config.model_type "
                f"{MODEL_TYPE!r}), got {type(model).__name__} with model_type {model_type!r}"
            )
        super().__init__(*args, **kwargs)

    # ------------------------------------------------------------------ argument handling

    @property
    def context_length(self) -> int:
        return int(self.model.config.context_length)

    def _has_buffer(self) -> bool:
        return getattr(self.model, "experience_buffer", None) is not None

    def _check_warm(self, warm_experience) -> bool:
        warm_experience = check_flag(warm_experience, "warm_experience")
        if warm_experience and not self._has_buffer():
            track = getattr(self.model.config, "track", None)
            raise ValueError(
                f"warm_experience=True needs a model with an experience buffer (track 'ei' or 'epm'); this model has "
                f"track {track!r}, which keeps no experience"
            )
        return warm_experience

    def _sanitize_parameters(self, warm_experience=None, return_tensors=None, **kwargs):
        preprocess_params, forward_params, postprocess_params = {}, {}, {}
        if warm_experience is not None:
            warm_experience = self._check_warm(warm_experience)
            preprocess_params["warm_experience"] = warm_experience
            forward_params["warm_experience"] = warm_experience
        if return_tensors is not None:
            postprocess_params["return_tensors"] = check_flag(return_tensors, "return_tensors")
        return preprocess_params, forward_params, postprocess_params

    def __call__(self, inputs=None, **kwargs):
        """Predict the next latent (and score the given frames) for one sequence or a list; see the class docstring."""
        if inputs is None:
            inputs = kwargs.pop("frames", None)
        if inputs is None:
            raise ValueError("inputs: pass a frame sequence (or a list of sequences) as the first argument")
        batch_size = kwargs.get("batch_size")
        batch_size = self._batch_size if batch_size is None else batch_size
        if batch_size is not None and batch_size != 1:
            raise ValueError(
                f"batch_size={batch_size!r}: the latent-world-model pipeline runs one sequence per forward pass "
                "(sequences may differ in length); pass batch_size=1 or leave it out"
            )
        warm = kwargs.get("warm_experience")
        warm = self._check_warm(warm) if warm is not None else self._preprocess_params.get("warm_experience", False)
        # Validate and convert every sequence before anything runs (and before any buffer write).
        if is_array(inputs) and inputs.ndim == 5:
            if len(inputs) == 0:
                raise ValueError(f"inputs: got an empty batch of sequences (shape {tuple(inputs.shape)})")
            sequences = [self._to_pixel_values(s, index=i, warm_experience=warm) for i, s in enumerate(inputs)]
        elif isinstance(inputs, (list, tuple)):
            if len(inputs) == 0:
                raise ValueError("inputs: got an empty list (pass a frame sequence or a list of sequences)")
            if all(_is_frame(item) for item in inputs):
                sequences = self._to_pixel_values(inputs, warm_experience=warm)
            else:
                sequences = [self._to_pixel_values(s, index=i, warm_experience=warm) for i, s in enumerate(inputs)]
        else:
            sequences = self._to_pixel_values(inputs, warm_experience=warm)
        return super().__call__(sequences, **kwargs)

    # ------------------------------------------------------------------ frame conversion

    def _to_pixel_values(self, sequence, index=None, warm_experience=False) -> torch.Tensor:
        """One sequence -> float32 `(T, C, H, W)` pixels in [0, 1], checked against the model's config."""
        config = self.model.config
        channels, size = int(config.num_channels), int(config.image_size)
        where = "inputs" if index is None else f"inputs[{index}]"
        if isinstance(sequence, (list, tuple)):
            if len(sequence) == 0:
                raise ValueError(
                    f"{where}: a sequence needs at least context_length={self.context_length} frames, got 0"
                )
            if not all(_is_frame(frame) for frame in sequence):
                kinds = sorted({type(frame).__name__ for frame in sequence})
                raise TypeError(
                    f"{where}: a list sequence must hold frames (PIL images or 2-D arrays / tensors (H, W)), got "
                    f"{', '.join(kinds)}"
                )
            frames = [self._frame_tensor(frame, channels, where) for frame in sequence]
            if len({tuple(f.shape) for f in frames}) > 1:
                raise ValueError(f"{where}: frames differ in shape: {sorted({tuple(f.shape) for f in frames})}")
            integer = [not f.is_floating_point() for f in frames]
            if any(integer) and not all(integer):
                raise TypeError(f"{where}: mix of integer (0..255) and floating-point ([0, 1]) frames")
            tensor = torch.stack(frames)
        elif is_array(sequence):
            tensor = (
                array_to_tensor(sequence, where, "frames")
                if isinstance(sequence, np.ndarray)
                else sequence.detach().cpu()
            )
        else:
            raise TypeError(
                f"{where}: a sequence must be a numpy array or torch tensor (T, H, W) / (T, C, H, W) / (T, H, W, C), "
                f"or a list of PIL images or (H, W) arrays; got {type(sequence).__name__}"
            )
        tensor = pixels_to_unit_float(
            tensor,
            where,
            "frames",
            holds="the frames hold",
            note=" (nothing was run and the experience buffer is unchanged)",
        )
        shape = tuple(tensor.shape)
        expected = f"(T, {size}, {size})" + (" or " if channels == 1 else "") + f"(T, {channels}, {size}, {size})"
        if tensor.ndim == 3 and channels == 1:
            tensor = tensor[:, None]
        elif tensor.ndim == 4 and tensor.shape[1] != channels and tensor.shape[-1] == channels:
            tensor = tensor.permute(0, 3, 1, 2)
        if tensor.ndim != 4 or tensor.shape[1] != channels:
            raise ValueError(f"{where}: frames must have shape {expected} for this model, got {shape}")
        if tuple(tensor.shape[2:]) != (size, size):
            raise ValueError(
                f"{where}: this model takes {size}x{size} frames (config.image_size={size}), got "
                f"{tensor.shape[2]}x{tensor.shape[3]} frames (sequence shape {shape}); resize or pad them first"
            )
        frames, needed = tensor.shape[0], self.context_length + (1 if warm_experience else 0)
        if frames < needed:
            reason = (
                f"warm_experience=True needs at least context_length + 1 = {needed} frames (one transition)"
                if warm_experience and frames >= self.context_length
                else f"a sequence needs at least context_length={self.context_length} frames"
            )
            raise ValueError(f"{where}: {reason}, got {frames}")
        return tensor.contiguous()

    @staticmethod
    def _frame_tensor(frame, channels: int, where: str) -> torch.Tensor:
        """A PIL image or a 2-D array / tensor -> `(H, W)` (one channel) or `(C, H, W)`, dtype kept."""
        if is_pil_image(frame):
            mode = "L" if channels == 1 else "RGB"
            array = np.array(frame if frame.mode == mode else frame.convert(mode))  # a writable copy
            tensor = torch.from_numpy(array)
            return tensor if tensor.ndim == 2 else tensor.permute(2, 0, 1)
        if isinstance(frame, np.ndarray):
            return array_to_tensor(frame, where, "frames")
        return frame.detach().cpu()

    # ------------------------------------------------------------------ pipeline steps

    def preprocess(self, inputs, warm_experience=False):
        pixel_values = self._to_pixel_values(inputs, warm_experience=warm_experience)[None]
        if self.dtype is not None:
            pixel_values = pixel_values.to(self.dtype)
        return {"pixel_values": pixel_values}

    def _forward(self, model_inputs, warm_experience=False):
        pixel_values = model_inputs["pixel_values"]
        with eval_mode(self.model) as model:
            if warm_experience:
                model.warm_experience(pixel_values, gated=False)
            predicted_latent = model.predict_next_latent(pixel_values)
            if pixel_values.shape[1] > self.context_length:
                output = model(pixel_values=pixel_values, update_experience=False, return_dict=True)
                surprisal = output.surprisal
            else:
                surprisal = predicted_latent.new_zeros((pixel_values.shape[0], 0), dtype=torch.float32)
        # Per-sample tensors only, so outputs can be split back into single results.
        num_frames = torch.full((pixel_values.shape[0],), pixel_values.shape[1], dtype=torch.long)
        return {"predicted_latent": predicted_latent, "surprisal": surprisal, "num_frames": num_frames}

    def postprocess(self, model_outputs, return_tensors=False):
        predicted = model_outputs["predicted_latent"][0]
        surprisal = model_outputs["surprisal"][0]
        return {
            "predicted_latent": predicted.clone() if return_tensors else predicted.float().tolist(),
            "surprisal": surprisal.clone() if return_tensors else surprisal.float().tolist(),
            "num_frames": int(model_outputs["num_frames"].reshape(-1)[0]),
        }
