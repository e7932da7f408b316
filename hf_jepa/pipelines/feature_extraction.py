"""`jepa-feature-extraction` pipeline: text (T-JEPA and its baselines) or images (I-JEPA) -> pooled embeddings from
the model's target encoder (`model.embed`).

::

    from transformers import pipeline
    import hf_jepa  # registers the task

    extract = pipeline("jepa-feature-extraction", model="path/or/org/t-jepa")  # loads the tokenizer saved beside it
    extract("A sentence.")                           # [float, ...]: one embedding
    extract(["One.", "Two."], batch_size=2)          # one embedding per text
    extract(long_text, truncation=True)              # cut to max_position_embeddings tokens
    extract("A sentence.", return_tensors=True)      # a (hidden,) float tensor

    image_extract = pipeline("jepa-feature-extraction", model="path/or/org/i-jepa")
    image_extract(pil_image)                         # or an array (H, W) / (C, H, W) / (H, W, C), uint8 or float

This file imports only numpy, torch, PIL, transformers and `.base` (no `hf_jepa` imports): `pipe.save_pretrained`
copies both next to the weights so `pipeline(model=dir, trust_remote_code=True)` works where hf_jepa is not installed.
"""

import numpy as np
import torch
import torch.nn.functional as F

from .base import JepaPipeline, array_to_tensor, check_flag, eval_mode, is_array, is_pil_image, pixels_to_unit_float

__all__ = ["JepaFeatureExtractionPipeline"]

TEXT_MODEL_TYPES = ("t_jepa",)
IMAGE_MODEL_TYPES = ("i_jepa",)


class _Encoded:
    """An input already checked and converted by `__call__` (so errors can name its index); `preprocess` unwraps it."""

    __slots__ = ("tensors",)

    def __init__(self, tensors: dict):
        self.tensors = tensors


class JepaFeatureExtractionPipeline(JepaPipeline):
    r"""
    Pooled embeddings of a JEPA family's evaluation encoder: `model.embed(...)`, i.e. the EMA target encoder when the
    model has one (T-JEPA's `"jepa"` and `"byol"` objectives, I-JEPA), else the (only) encoder, mean-pooled over the
    tokens (text) or patches (images).

    Text models (`config.model_type == "t_jepa"`, any objective): `inputs` is a string or a list of strings, tokenised
    with the pipeline's tokenizer (`pipeline(task, model=dir)` loads the one saved beside the model with
    `tokenizer.save_pretrained(dir)`; or pass `tokenizer=`), special tokens included (`[CLS] ... [SEP]`, as in
    training). A text longer than `config.backbone_config.max_position_embeddings` tokens raises unless
    `truncation=True` is passed, which cuts it to that length. A tokenizer with more tokens than the model's
    vocabulary (`len(tokenizer) > config.backbone_config.vocab_size`) is refused when the pipeline is created.

    Image models (`config.model_type == "i_jepa"`): `inputs` is an image or a list of images: PIL images (converted
    to the model's channels), numpy arrays or torch tensors `(H, W)`, `(C, H, W)` or `(H, W, C)` with integer pixels
    in `0..255` (e.g. uint8) or floats in `[0, 1]`; a 4-D array `(N, C, H, W)` / `(N, H, W, C)` is `N` images.
    Pixels are scaled to [0, 1], resized to `config.image_size` (bilinear, antialiased) when their size differs, and
    normalised with `config.pixel_mean` / `config.pixel_std`.

    Call arguments:
        truncation (`bool`, *optional*, defaults to `False`): text only, see above.
        use_target_encoder (`bool`, *optional*, defaults to `True`): `False` embeds with the context encoder.
        return_tensors (`bool`, *optional*, defaults to `False`): return a float tensor `(hidden,)` per input instead
            of a list of floats.
        batch_size (`int`): inputs per forward pass; texts of a batch are right-padded (padding is masked out of
            attention and pooling), so results equal `batch_size=1` up to float rounding.

    Returns one embedding per input (a single one for a single input). The model runs in eval mode (its mode is
    restored afterwards).
    """

    model_types = TEXT_MODEL_TYPES + IMAGE_MODEL_TYPES
    _load_tokenizer = None  # a T-JEPA directory holds its tokenizer: loaded when present, never required
    _load_image_processor = False  # images are normalised with the model config's own pixel statistics

    def __init__(self, *args, **kwargs):
        model = kwargs["model"] if "model" in kwargs else (args[0] if args else None)
        model_type = getattr(getattr(model, "config", None), "model_type", None)
        if model_type not in TEXT_MODEL_TYPES + IMAGE_MODEL_TYPES or not hasattr(model, "embed"):
            raise TypeError(
                f"model: the jepa-feature-extraction pipeline needs a T-JEPA text model (model_type 't_jepa') or an "
                f"I-JEPA image model (model_type 'i_jepa'), got {type(model).__name__} with model_type {model_type!r}"
            )
        super().__init__(*args, **kwargs)
        if self.is_text and self.tokenizer is not None:
            vocab = int(self.model.config.backbone_config.vocab_size)
            if len(self.tokenizer) > vocab:
                raise ValueError(
                    f"tokenizer: it has {len(self.tokenizer)} tokens but the model's vocabulary has {vocab} "
                    "(config.backbone_config.vocab_size): the tokenizer does not belong to this model"
                )

    @property
    def is_text(self) -> bool:
        return self.model.config.model_type in TEXT_MODEL_TYPES

    # ------------------------------------------------------------------ arguments

    def _sanitize_parameters(self, truncation=None, use_target_encoder=None, return_tensors=None, **kwargs):
        preprocess_params, forward_params, postprocess_params = {}, {}, {}
        if truncation is not None:
            preprocess_params["truncation"] = check_flag(truncation, "truncation")
        if use_target_encoder is not None:
            forward_params["use_target_encoder"] = check_flag(use_target_encoder, "use_target_encoder")
        if return_tensors is not None:
            postprocess_params["return_tensors"] = check_flag(return_tensors, "return_tensors")
        return preprocess_params, forward_params, postprocess_params

    def __call__(self, inputs=None, **kwargs):
        """Embed one input or a list of inputs; see the class docstring."""
        if inputs is None:
            raise ValueError("inputs: pass a text or an image (or a list of them) as the first argument")
        truncation = kwargs.get("truncation")
        truncation = (
            check_flag(truncation, "truncation")
            if truncation is not None
            else self._preprocess_params.get("truncation", False)
        )
        # Check and convert every input first, so that an error names the input it is about.
        if isinstance(inputs, (list, tuple)):
            if len(inputs) == 0:
                raise ValueError("inputs: got an empty list")
            inputs = [_Encoded(self._prepare(item, f"inputs[{i}]", truncation)) for i, item in enumerate(inputs)]
        elif not self.is_text and is_array(inputs) and inputs.ndim == 4:
            if len(inputs) == 0:
                raise ValueError(f"inputs: got an empty batch of images (shape {tuple(inputs.shape)})")
            inputs = [_Encoded(self._prepare(image, f"inputs[{i}]", truncation)) for i, image in enumerate(inputs)]
        elif isinstance(inputs, str) or is_array(inputs) or is_pil_image(inputs):
            inputs = _Encoded(self._prepare(inputs, "inputs", truncation))
        # else: a generator or a Dataset, converted item by item in `preprocess`
        return super().__call__(inputs, **kwargs)

    # ------------------------------------------------------------------ conversion

    def _prepare(self, item, where: str, truncation: bool) -> dict:
        return self._prepare_text(item, where, truncation) if self.is_text else self._prepare_image(item, where)

    def _prepare_text(self, text, where: str, truncation: bool) -> dict:
        if not isinstance(text, str):
            raise TypeError(
                f"{where}: this T-JEPA model embeds text (a string or a list of strings), got {type(text).__name__}"
            )
        if not text.strip():
            raise ValueError(f"{where}: empty text (nothing to embed)")
        if self.tokenizer is None:
            raise ValueError(
                "this pipeline has no tokenizer: save it beside the model (tokenizer.save_pretrained(model_dir)) or "
                "pass pipeline(..., tokenizer=...)"
            )
        limit = int(self.model.config.backbone_config.max_position_embeddings)
        encoded = self.tokenizer(
            text,
            truncation=truncation,
            max_length=limit if truncation else None,
            return_special_tokens_mask=True,
            return_attention_mask=True,
        )
        length = len(encoded["input_ids"])
        if length > limit:
            raise ValueError(
                f"{where}: the text is {length} tokens long, longer than the model's max_position_embeddings "
                f"({limit}); pass truncation=True to cut it to {limit} tokens"
            )
        if length == 0 or all(encoded["special_tokens_mask"]):
            raise ValueError(f"{where}: empty text (it has no tokens besides special ones)")
        return {
            "input_ids": torch.tensor([encoded["input_ids"]], dtype=torch.long),
            "attention_mask": torch.tensor([encoded["attention_mask"]], dtype=torch.long),
        }

    def _prepare_image(self, image, where: str) -> dict:
        config = self.model.config
        channels, size = int(config.num_channels), int(config.image_size)
        if isinstance(image, str):
            raise TypeError(f"{where}: this I-JEPA model embeds images, got a string")
        if is_pil_image(image):
            mode = "L" if channels == 1 else "RGB"
            array = np.array(image if image.mode == mode else image.convert(mode))
            tensor = torch.from_numpy(array)
        elif isinstance(image, np.ndarray):
            tensor = array_to_tensor(image, where, "images")
        elif isinstance(image, torch.Tensor):
            tensor = image.detach().cpu()
        else:
            raise TypeError(
                f"{where}: an image must be a PIL image, or a numpy array / torch tensor (H, W), (C, H, W) or "
                f"(H, W, C); got {type(image).__name__}"
            )
        tensor = pixels_to_unit_float(tensor, where, "images", holds="the image holds")
        shape = tuple(tensor.shape)
        if tensor.ndim == 2:
            tensor = tensor[None].expand(channels, -1, -1)  # grey -> every channel
        elif tensor.ndim == 3 and tensor.shape[0] != channels and tensor.shape[-1] == channels:
            tensor = tensor.permute(2, 0, 1)
        if tensor.ndim != 3 or tensor.shape[0] != channels:
            raise ValueError(
                f"{where}: images must have shape (H, W), ({channels}, H, W) or (H, W, {channels}) for this model "
                f"(config num_channels={channels}), got {shape}"
            )
        if tensor.shape[1] == 0 or tensor.shape[2] == 0:
            raise ValueError(f"{where}: the image is empty (shape {shape})")
        if tuple(tensor.shape[1:]) != (size, size):
            tensor = F.interpolate(
                tensor[None], size=(size, size), mode="bilinear", align_corners=False, antialias=True
            )[0]
        mean = torch.tensor(config.pixel_mean, dtype=torch.float32).reshape(-1, 1, 1)
        std = torch.tensor(config.pixel_std, dtype=torch.float32).reshape(-1, 1, 1)
        pixel_values = ((tensor - mean) / std)[None].contiguous()
        if self.dtype is not None and self.dtype.is_floating_point:
            pixel_values = pixel_values.to(self.dtype)
        return {"pixel_values": pixel_values}

    # ------------------------------------------------------------------ batching

    def _collate(self, items: list[dict]) -> dict:
        """Right-pad token ids (pad id, attention 0) or stack images (the batches of `JepaPipeline.get_iterator`)."""
        if "pixel_values" in items[0]:
            return {"pixel_values": torch.cat([item["pixel_values"] for item in items])}
        pad_id = getattr(self.tokenizer, "pad_token_id", None)
        pad_id = int(self.model.config.pad_token_id if pad_id is None else pad_id)
        length = max(item["input_ids"].shape[1] for item in items)
        input_ids = torch.full((len(items), length), pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(items), length), dtype=torch.long)
        for row, item in enumerate(items):
            n = item["input_ids"].shape[1]
            input_ids[row, :n] = item["input_ids"][0]
            attention_mask[row, :n] = item["attention_mask"][0]
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    # ------------------------------------------------------------------ pipeline steps

    def preprocess(self, inputs, truncation=False):
        if isinstance(inputs, _Encoded):
            return dict(inputs.tensors)
        return self._prepare(inputs, "inputs", truncation)

    def _forward(self, model_inputs, use_target_encoder=True):
        with eval_mode(self.model) as model:
            if "pixel_values" in model_inputs:
                embeddings = model.embed(model_inputs["pixel_values"], use_target_encoder=use_target_encoder)
            else:
                embeddings = model.embed(
                    model_inputs["input_ids"], model_inputs["attention_mask"], use_target_encoder=use_target_encoder
                )
        return {"embeddings": embeddings}  # (batch, hidden): per-sample, so batches split back into results

    def postprocess(self, model_outputs, return_tensors=False):
        embedding = model_outputs["embeddings"][0]
        return embedding.clone() if return_tensors else embedding.float().tolist()
