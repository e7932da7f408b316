"""`JepaPipeline`: what every hf-jepa pipeline shares - no preprocessing component is required by default, input type
checks for images and arrays, flag arguments, pixel conversion, eval mode around the forward pass, batching with a
pipeline's own collate function, and a `save_pretrained` that does not leave `custom_pipelines` on the model's config.

The pipeline modules import this one relatively, so `pipe.save_pretrained(dir)` copies it beside them (transformers
copies a custom object's relative imports) and the folder still loads without hf_jepa."""

import collections.abc
import contextlib

import numpy as np
import torch
from transformers import Pipeline


class FlagTypeError(TypeError, ValueError):
    """A flag argument that is not True or False: a `TypeError` (its kind) and a `ValueError` (a bad argument value,
    which is how the latent-reasoning pipeline reports every bad argument)."""


def is_pil_image(value) -> bool:
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - PIL is a transformers vision dependency
        return False
    return isinstance(value, Image.Image)


def is_array(value) -> bool:
    return isinstance(value, (np.ndarray, torch.Tensor))


def check_flag(value, name: str) -> bool:
    """`value` as a Python bool: True or False (a numpy bool is accepted); anything else raises `FlagTypeError`
    naming the argument `name`."""
    if isinstance(value, np.bool_):
        value = bool(value)
    if not isinstance(value, bool):
        raise FlagTypeError(f"{name} must be True or False, got {value!r}")
    return value


@contextlib.contextmanager
def eval_mode(model):
    """Run the block with `model` in eval mode (dropout off, BatchNorm on its running statistics, so a batch may hold
    a single input); the model's mode is restored afterwards, also when the block raises."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def array_to_tensor(array: np.ndarray, where: str, noun: str) -> torch.Tensor:
    """A numpy array of pixels as a tensor, sharing the array's memory when it can (a copy when the array is
    read-only or not contiguous). Integer arrays other than uint8 are range-checked and converted to uint8 here
    (torch lacks ops for some integer types); other dtypes but bool and float raise. Errors start with `where` and
    call the inputs `noun` ("images", "frames")."""
    kind = array.dtype
    if kind != np.bool_ and not np.issubdtype(kind, np.integer) and not np.issubdtype(kind, np.floating):
        raise TypeError(f"{where}: {noun} must hold uint8 pixels (0..255) or floats in [0, 1], got dtype {array.dtype}")
    if np.issubdtype(kind, np.integer) and kind != np.uint8:
        if array.size and (array.min() < 0 or array.max() > 255):
            raise ValueError(f"{where}: integer {noun} must hold pixels in 0..255")
        array = array.astype(np.uint8)
    array = np.ascontiguousarray(array)
    return torch.from_numpy(array if array.flags.writeable else array.copy())


def pixels_to_unit_float(tensor: torch.Tensor, where: str, noun: str, holds: str, note: str = "") -> torch.Tensor:
    """A pixel tensor as float32 in [0, 1]: integer pixels (0..255) are divided by 255, floats are checked to be
    finite and in [0, 1]; boolean and complex tensors raise `TypeError`, values out of range `ValueError`. Errors
    start with `where` and call the inputs `noun` ("images", "frames"); `holds` opens the non-finite message ("the
    image holds"), which ends with `note`."""
    if tensor.dtype == torch.bool:
        raise TypeError(f"{where}: boolean {noun} are ambiguous: pass uint8 pixels (0..255) or floats in [0, 1]")
    if tensor.is_complex():
        raise TypeError(f"{where}: complex {noun} are not supported")
    if not tensor.is_floating_point():
        if tensor.dtype != torch.uint8:  # torch has no min/max for some unsigned types
            tensor = tensor.to(torch.int64)
        if tensor.numel() and (int(tensor.min()) < 0 or int(tensor.max()) > 255):
            raise ValueError(f"{where}: integer {noun} must hold pixels in 0..255")
        return tensor.to(torch.float32) / 255.0
    tensor = tensor.to(torch.float32)
    if tensor.numel() and not torch.isfinite(tensor).all():
        count = int((~torch.isfinite(tensor)).sum())
        raise ValueError(f"{where}: {holds} {count} NaN or inf value(s); pixels must be finite, in [0, 1]{note}")
    if tensor.numel() and (tensor.min() < 0 or tensor.max() > 1):
        raise ValueError(f"{where}: floating-point {noun} must hold pixels in [0, 1] (use uint8 for 0..255 pixels)")
    return tensor


class JepaPipeline(Pipeline):
    """Base of the hf-jepa pipelines. Subclasses set `_load_tokenizer` / `_load_image_processor` to None ("load when
    present") where they can use one."""

    _load_tokenizer = False
    _load_feature_extractor = False
    _load_processor = False
    _load_video_processor = False
    _load_image_processor = False
    # The `config.model_type`s this task runs on: a saved folder of one of them declares the task in `custom_pipelines`
    # (`hf_jepa.trainers.custom_pipelines`), so it loads with `trust_remote_code=True` where hf_jepa is not installed.
    model_types: tuple[str, ...] = ()
    # A subclass that pads its own batches defines `_collate(items: list[dict]) -> dict`; `get_iterator` then batches
    # with it instead of transformers' tokenizer / image-processor padding.
    _collate = None

    def get_iterator(self, inputs, num_workers, batch_size, preprocess_params, forward_params, postprocess_params):
        """`Pipeline.get_iterator`, batching with the pipeline's own `_collate` when it has one and `batch_size > 1`
        (transformers' default collate pads on the tokenizer's side and needs an image processor for images)."""
        if batch_size == 1 or self._collate is None:
            return super().get_iterator(
                inputs, num_workers, batch_size, preprocess_params, forward_params, postprocess_params
            )
        from torch.utils.data import DataLoader
        from transformers.pipelines.pt_utils import PipelineDataset, PipelineIterator

        if isinstance(inputs, collections.abc.Sized):
            dataset = PipelineDataset(inputs, self.preprocess, preprocess_params)
        else:
            dataset = PipelineIterator(inputs, self.preprocess, preprocess_params)
            num_workers = min(num_workers, 1)
        loader = DataLoader(dataset, num_workers=num_workers, batch_size=batch_size, collate_fn=self._collate)
        model_iterator = PipelineIterator(loader, self.forward, forward_params, loader_batch_size=batch_size)
        return PipelineIterator(model_iterator, self.postprocess, postprocess_params)

    def save_pretrained(self, save_directory, **kwargs):
        """Save the model, its tokenizer or image processor and the pipeline's code; `config.json` gets
        `custom_pipelines`, so the directory loads with `pipeline(model=dir, trust_remote_code=True)` without hf_jepa.
        Where hf_jepa is installed its config classes hide their own tasks from `custom_pipelines`, so the plain
        task name loads the folder without `trust_remote_code` (docs/guides/remote-code.md).

        Unlike `Pipeline.save_pretrained`, the model's in-memory config is left as it was (no `custom_pipelines`
        leaking into later `model.save_pretrained` / `push_to_hub` calls)."""
        config = self.model.config
        missing = object()
        previous = config.__dict__.get("custom_pipelines", missing)
        try:
            super().save_pretrained(save_directory, **kwargs)
        finally:
            if previous is missing:
                config.__dict__.pop("custom_pipelines", None)
            else:
                config.custom_pipelines = previous
