"""Data builders: turn a source (Hub id, local files, embedded fallback, generator) into batches of tensors."""

from .masking import MultiBlockMaskSampler, SpanMaskingCollator
from .mnist import MNIST_HUB_ID, MnistSplits, embedded_digits, images_to_tensor, load_mnist, mnist_source_description
from .modular_arithmetic import (
    TRAIN_OPERATIONS,
    ModularArithmeticTask,
    normalize_images,
    random_shift,
    unseen_operations,
)
from .moving_mnist import (
    SHIFT_GRAVITY,
    TRAIN_GRAVITY,
    MovingMnist,
    render_frames,
    simulate_trajectories,
)
from .text import (
    COARSE_LABELS,
    TOPIC_GROUPS,
    AmbiguityCorpus,
    RetrievalTask,
    TopicClassificationTask,
    embedded_sentences,
    load_fever,
    load_imdb,
    load_ms_marco,
    load_snli,
    load_text_corpus,
    retrieval_task,
    text_source_description,
    topic_classification_task,
    topic_groups,
    train_wordpiece_tokenizer,
)


__all__ = [
    "COARSE_LABELS",
    "TOPIC_GROUPS",
    "AmbiguityCorpus",
    "MultiBlockMaskSampler",
    "RetrievalTask",
    "SpanMaskingCollator",
    "TopicClassificationTask",
    "embedded_sentences",
    "load_fever",
    "load_imdb",
    "load_ms_marco",
    "load_snli",
    "load_text_corpus",
    "retrieval_task",
    "text_source_description",
    "topic_classification_task",
    "topic_groups",
    "train_wordpiece_tokenizer",
    "MNIST_HUB_ID",
    "MnistSplits",
    "SHIFT_GRAVITY",
    "TRAIN_GRAVITY",
    "TRAIN_OPERATIONS",
    "ModularArithmeticTask",
    "MovingMnist",
    "embedded_digits",
    "images_to_tensor",
    "load_mnist",
    "mnist_source_description",
    "normalize_images",
    "random_shift",
    "render_frames",
    "simulate_trajectories",
    "unseen_operations",
]
