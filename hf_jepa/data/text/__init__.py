"""Text for T-JEPA: an offline English corpus, WordPiece tokenizers, downstream tasks and a synthetic ambiguity corpus.

One module per concern, re-exported here (`from hf_jepa.data.text import X` works for every public name):

- `sentences`: clean sentences from CPython's bundled docs (`embedded_sentences`), with the extraction rules;
- `topics`: the pydoc topics' coarse classes (`TOPIC_GROUPS`, `COARSE_LABELS`);
- `corpus`: `load_text_corpus` from the embedded sentences, C4 (streamed, online) or a local path;
- `wordpiece`: deterministic WordPiece vocabulary learning and a BERT-style tokenizer (`train_wordpiece_tokenizer`);
- `downstream`: offline probes from the embedded corpus (`topic_classification_task`, `retrieval_task`);
- `online`: thin Hub loaders of the paper's downstream sets (`load_imdb`, `load_snli`, `load_fever`, `load_ms_marco`);
- `streamed`: `StreamedTextData`, a text source read as a stream (`datasets` streaming) for large corpora;
- `ambiguity`: the synthetic `AmbiguityCorpus` (a knob on the target's conditional entropy), its `to_dataset` and
  the `ambiguity_model_inputs` transform that turns its rows into the model's input.

Hub dataset ids and the offline check live in `hf_jepa.data.sources`.
"""

# Names outside `__all__` (noqa: F401) stay importable from here, as they were from the single module `text.py`.
from ..sources import C4_HUB_ID, FEVER_HUB_ID, IMDB_HUB_ID, MS_MARCO_HUB_ID, SNLI_HUB_ID  # noqa: F401
from .ambiguity import (
    AMBIGUITY_OBJECTS,
    AMBIGUITY_PLACES,
    AMBIGUITY_SUBJECTS,
    AMBIGUITY_TEMPLATES,
    VALIDATION_SEED_OFFSET,
    AmbiguityCorpus,
    AmbiguitySample,
    ambiguity_model_inputs,
    training_start,
)
from .corpus import SPLIT_NAMES, TEXT_ENV_VAR, embedded_text_dataset, load_text_corpus, text_source_description  # noqa: F401
from .downstream import RetrievalTask, TopicClassificationTask, retrieval_task, topic_classification_task
from .online import load_fever, load_imdb, load_ms_marco, load_snli
from .sentences import embedded_sentences, extract_sentences, is_clean_sentence, split_sentences
from .streamed import StreamedTextData
from .text_data import TextData
from .topics import COARSE_LABELS, OTHER_GROUP, TOPIC_GROUPS, topic_group, topic_groups  # noqa: F401
from .wordpiece import SPECIAL_TOKENS, learn_wordpiece_vocab, train_wordpiece_tokenizer

__all__ = [
    "AMBIGUITY_OBJECTS",
    "AMBIGUITY_PLACES",
    "AMBIGUITY_SUBJECTS",
    "AMBIGUITY_TEMPLATES",
    "AmbiguityCorpus",
    "AmbiguitySample",
    "VALIDATION_SEED_OFFSET",
    "ambiguity_model_inputs",
    "COARSE_LABELS",
    "C4_HUB_ID",
    "RetrievalTask",
    "SPECIAL_TOKENS",
    "TOPIC_GROUPS",
    "StreamedTextData",
    "TextData",
    "TopicClassificationTask",
    "embedded_sentences",
    "embedded_text_dataset",
    "extract_sentences",
    "is_clean_sentence",
    "learn_wordpiece_vocab",
    "load_fever",
    "load_imdb",
    "load_ms_marco",
    "load_snli",
    "load_text_corpus",
    "retrieval_task",
    "split_sentences",
    "text_source_description",
    "topic_classification_task",
    "topic_group",
    "topic_groups",
    "train_wordpiece_tokenizer",
    "training_start",
]
