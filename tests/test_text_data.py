"""hf_jepa.data.text: the embedded pydoc corpus, corpus loading, WordPiece tokenizers, downstream tasks, ambiguity."""

import math
import sys
from collections import defaultdict

import pytest

from hf_jepa.data.text import (
    AMBIGUITY_OBJECTS,
    COARSE_LABELS,
    SPECIAL_TOKENS,
    TOPIC_GROUPS,
    AmbiguityCorpus,
    embedded_sentences,
    extract_sentences,
    is_clean_sentence,
    load_fever,
    load_imdb,
    load_ms_marco,
    load_snli,
    load_text_corpus,
    retrieval_task,
    split_sentences,
    text_source_description,
    topic_classification_task,
    topic_groups,
    train_wordpiece_tokenizer,
)


@pytest.fixture(scope="module")
def sentences():
    return embedded_sentences()


@pytest.fixture(scope="module")
def corpus():
    return load_text_corpus("embedded")


@pytest.fixture(scope="module")
def tokenizer(corpus):
    return train_wordpiece_tokenizer(corpus["train"]["text"], vocab_size=1000)


# -- sentence extraction -----------------------------------------------------------------------------------------------


def test_extraction_rules_on_a_crafted_page():
    page = "\n".join(
        [
            'The "demo" statement',
            "********************",
            "",
            "The demo statement is a convenient way to show the rules of the",
            "extractor.  It keeps the built-",
            'in prose, e.g. "list" examples.  Code after a colon is dropped, like this:',
            "",
            "   if demo: print(x)",
            "",
            "   Still inside the literal block, even though It Looks Like Prose.",
            "",
            "Grammar productions such as these are never kept in the output.",
            '   demo_stmt ::= "demo" expression',
            "",
            "* Bullet items become their own paragraphs and lose their",
            "  markers entirely.",
            "* A second bullet item is a second paragraph of its own.",
            "",
            "str.demo(x)",
            "",
            "   Return the demo of *x* with the **usual** rules applied here.",
            "",
            "The footnote marker goes away after this sentence [1].",
            "",
            ">>> demo(1)",
            "Doctest output that Looks Like A Sentence.",
        ]
    )
    # Dropped: the heading, "...like this:" (no terminal period), the literal block after it (both blocks), the
    # block holding a grammar production, the signature line `str.demo(x)`, the doctest block.
    assert extract_sentences(page) == [
        "The demo statement is a convenient way to show the rules of the extractor.",
        'It keeps the built-in prose, e.g. "list" examples.',
        "Bullet items become their own paragraphs and lose their markers entirely.",
        "A second bullet item is a second paragraph of its own.",
        "Return the demo of x with the usual rules applied here.",
        "The footnote marker goes away after this sentence.",
    ]


def test_split_sentences_keeps_abbreviations():
    text = 'Use a container, e.g. "list" or i.e. Tuples here. Then stop! "None" is a value? Yes. Done etc. Ok.'
    assert split_sentences(text) == [
        'Use a container, e.g. "list" or i.e. Tuples here.',
        "Then stop!",
        '"None" is a value?',
        "Yes.",
        "Done etc.",
        "Ok.",
    ]
    assert split_sentences("Version 3.11 is here. the lowercase start is not a boundary.") == [
        "Version 3.11 is here. the lowercase start is not a boundary."
    ]


def test_embedded_sentences_are_clean_unique_and_deterministic(sentences):
    assert len(sentences) > 1500  # 2,103 on CPython 3.11.7
    texts = [row["text"] for row in sentences]
    assert len(set(texts)) == len(texts)
    for text in texts:
        assert is_clean_sentence(text), text
        assert 5 <= len(text.split()) <= 64
        assert ">>>" not in text and "::=" not in text and "\n" not in text
    by_topic = defaultdict(list)
    for row in sentences:
        by_topic[row["topic"]].append(row["position"])
    for positions in by_topic.values():
        assert positions == list(range(len(positions)))
    assert [(row["topic"], row["position"]) for row in sentences] == sorted(
        (row["topic"], row["position"]) for row in sentences
    )
    assert embedded_sentences() == sentences
    short = embedded_sentences(min_words=8, max_words=20)
    assert short and all(8 <= len(row["text"].split()) <= 20 for row in short)
    with pytest.raises(ValueError, match="min_words"):
        embedded_sentences(min_words=10, max_words=5)


def test_topic_groups_map_every_topic_once():
    listed = [topic for topics in TOPIC_GROUPS.values() for topic in topics]
    assert len(listed) == len(set(listed))
    assert 4 <= len(TOPIC_GROUPS) <= 8 and COARSE_LABELS[-1] == "other"
    mapping = topic_groups()
    assert set(mapping.values()) <= set(COARSE_LABELS)
    if sys.version_info[:2] == (3, 11):  # the mapping lists CPython 3.11's 79 topics explicitly
        assert len(mapping) == 79 and "other" not in mapping.values()


# -- corpus loading ----------------------------------------------------------------------------------------------------


def test_load_text_corpus_embedded_splits(corpus, sentences):
    sizes = {name: corpus[name].num_rows for name in ("train", "validation", "test")}
    assert sum(sizes.values()) == len(sentences)
    assert abs(sizes["train"] / len(sentences) - 0.8) < 0.01 and abs(sizes["test"] / len(sentences) - 0.1) < 0.01
    texts = [set(corpus[name]["text"]) for name in sizes]
    assert not (texts[0] & texts[1]) and not (texts[0] & texts[2]) and not (texts[1] & texts[2])
    assert corpus["train"].features["label"].names == list(COARSE_LABELS)
    assert set(corpus["train"].column_names) == {"text", "topic", "position", "label"}
    assert "embedded" in text_source_description(corpus)
    assert load_text_corpus()["test"]["text"] == corpus["test"]["text"]  # default source, same seed
    assert load_text_corpus(split_seed=1)["test"]["text"] != corpus["test"]["text"]
    with pytest.raises(ValueError, match="split_fractions"):
        load_text_corpus(split_fractions=(0.5, 0.5, 0.5))


def test_load_text_corpus_local_sources(tmp_path):
    from datasets import Dataset, DatasetDict

    lines = [f"Sentence number {index} is a line of the file." for index in range(50)]
    txt = tmp_path / "sentences.txt"
    txt.write_text("\n".join(lines[:25]) + "\n\n" + "\n".join(lines[25:]) + "\n")
    loaded = load_text_corpus(str(txt))
    assert sorted(t for split in loaded.values() for t in split["text"]) == sorted(lines)
    assert "local" in text_source_description(loaded)

    parquet = tmp_path / "sentences.parquet"
    Dataset.from_dict({"text": lines, "label": [i % 2 for i in range(50)]}).to_parquet(str(parquet))
    loaded = load_text_corpus(parquet)
    assert sum(split.num_rows for split in loaded.values()) == 50 and "label" in loaded["train"].column_names

    saved = tmp_path / "saved"
    DatasetDict(
        train=Dataset.from_dict({"text": lines[:40]}),
        validation=Dataset.from_dict({"text": lines[40:45]}),
        test=Dataset.from_dict({"text": lines[45:]}),
    ).save_to_disk(str(saved))
    assert load_text_corpus(saved)["test"]["text"] == lines[45:]

    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_text_corpus(tmp_path / "missing.txt")
    no_text = tmp_path / "no_text.parquet"
    Dataset.from_dict({"sentence": lines}).to_parquet(str(no_text))
    with pytest.raises(ValueError, match="no 'text' column"):
        load_text_corpus(no_text)


def test_online_sources_fail_clearly_offline():
    # conftest sets HF_HUB_OFFLINE=1 / HF_DATASETS_OFFLINE=1: nothing may touch the network.
    with pytest.raises(RuntimeError, match="embedded"):
        load_text_corpus("c4")
    for loader, hub_id in (
        (load_imdb, "stanfordnlp/imdb"),
        (load_snli, "stanfordnlp/snli"),
        (load_fever, "mteb/fever"),
        (load_ms_marco, "microsoft/ms_marco"),
    ):
        with pytest.raises(RuntimeError, match="offline|OFFLINE") as error:
            loader()
        assert hub_id in str(error.value)


# -- tokenizer ---------------------------------------------------------------------------------------------------------


def test_wordpiece_tokenizer_specials_and_round_trip(tokenizer, corpus, tmp_path):
    from transformers import AutoTokenizer

    assert tokenizer.convert_tokens_to_ids(list(SPECIAL_TOKENS)) == [0, 1, 2, 3, 4]
    assert (tokenizer.pad_token_id, tokenizer.unk_token_id, tokenizer.cls_token_id) == (0, 1, 2)
    assert (tokenizer.sep_token_id, tokenizer.mask_token_id) == (3, 4)
    assert 100 < len(tokenizer) <= 1000
    text = corpus["test"]["text"][0]
    ids = tokenizer(text)["input_ids"]
    assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
    assert tokenizer.decode(ids, skip_special_tokens=True).replace(" ", "") == text.lower().replace(" ", "")
    pair = tokenizer("first part", "second part")
    assert pair["input_ids"].count(tokenizer.sep_token_id) == 2 and set(pair["token_type_ids"]) == {0, 1}

    again = train_wordpiece_tokenizer(corpus["train"]["text"], vocab_size=1000, save_directory=tmp_path / "tok")
    assert again.get_vocab() == tokenizer.get_vocab()  # deterministic
    loaded = AutoTokenizer.from_pretrained(tmp_path / "tok")  # offline: conftest sets HF_HUB_OFFLINE
    assert loaded(text)["input_ids"] == ids
    assert loaded.mask_token == "[MASK]" and loaded.model_max_length == 512


def test_wordpiece_tokenizer_case_and_errors(tmp_path):
    from transformers import AutoTokenizer

    texts = ["Python Objects have Types.", "python objects have types."] * 20
    cased = train_wordpiece_tokenizer(texts, vocab_size=200, lowercase=False, save_directory=tmp_path)
    assert "Python" in cased.tokenize("Python objects")
    assert AutoTokenizer.from_pretrained(tmp_path).tokenize("Python objects") == cased.tokenize("Python objects")
    with pytest.raises(ValueError, match="texts"):
        train_wordpiece_tokenizer(["", "  "])
    with pytest.raises(ValueError, match="texts"):
        train_wordpiece_tokenizer("a single string")
    with pytest.raises(ValueError, match="vocab_size"):
        train_wordpiece_tokenizer(texts, vocab_size=5)


# -- downstream tasks --------------------------------------------------------------------------------------------------


def test_topic_classification_task(corpus):
    task = topic_classification_task(corpus)
    assert len(task.train_texts) == len(task.train_labels) == corpus["train"].num_rows
    assert len(task.test_texts) == len(task.test_labels) == corpus["test"].num_rows
    assert task.label_names == list(COARSE_LABELS) and task.num_labels == len(COARSE_LABELS)
    assert set(task.train_labels) >= set(range(len(TOPIC_GROUPS)))  # every coarse class is represented
    with pytest.raises(ValueError, match="split"):
        topic_classification_task(corpus, test_split="dev")


def test_retrieval_task_has_exactly_the_next_sentence_as_positive(sentences, corpus):
    task = retrieval_task(sentences, num_queries=300, seed=0)
    assert len(task.queries) == 300 == len(task.positives)
    index = {(row["topic"], row["position"]): row["text"] for row in sentences}
    position = {row["text"]: (row["topic"], row["position"]) for row in sentences}
    assert not set(task.queries) & set(task.documents)
    assert len(set(task.documents)) == len(task.documents)
    for query, positives, topic in zip(task.queries, task.positives, task.query_topics):
        assert len(positives) == 1
        query_topic, query_position = position[query]
        assert query_topic == topic
        assert task.documents[positives[0]] == index[(query_topic, query_position + 1)]
    assert task.relevance().sum(dim=1).tolist() == [1] * 300
    assert retrieval_task(sentences, num_queries=300, seed=0) == task
    assert retrieval_task(sentences, num_queries=300, seed=1).queries != task.queries
    pooled = retrieval_task(corpus, num_queries=None)  # a DatasetDict: all splits pooled
    assert len(pooled.queries) + len(pooled.documents) == len(sentences)
    with pytest.raises(ValueError, match="num_queries"):
        retrieval_task(sentences, num_queries=len(sentences))
    with pytest.raises(ValueError, match="position"):
        retrieval_task([{"text": "A sentence without a topic."}])


# -- synthetic ambiguity corpus ----------------------------------------------------------------------------------------


def _fillers_by_subject(corpus, count=4000, seed=0):
    sample = corpus.sample(count, seed=seed)
    seen = defaultdict(set)
    for subject, filler in zip(sample.subjects, sample.fillers):
        seen[subject].add(filler)
    return seen


def test_ambiguity_one_makes_the_filler_a_function_of_the_context():
    corpus = AmbiguityCorpus(ambiguity=1)
    assert corpus.ambiguity_nats == 0.0
    for subject, fillers in _fillers_by_subject(corpus).items():
        assert fillers == set(corpus.valid_fillers(subject)) and len(fillers) == 1


@pytest.mark.parametrize("ambiguity", [2, 8])
def test_ambiguity_k_covers_exactly_k_fillers(ambiguity):
    corpus = AmbiguityCorpus(ambiguity=ambiguity)
    assert math.isclose(corpus.ambiguity_nats, math.log(ambiguity))
    seen = _fillers_by_subject(corpus, count=6000)
    assert len(seen) == 32
    for subject, fillers in seen.items():
        assert fillers == set(corpus.valid_fillers(subject)) and len(fillers) == ambiguity
    # nested valid sets: K=1's filler is one of K's
    for subject in seen:
        assert AmbiguityCorpus(ambiguity=1).valid_fillers(subject)[0] in corpus.valid_fillers(subject)


def test_ambiguity_sample_spans_determinism_and_candidates():
    corpus = AmbiguityCorpus(ambiguity=4, seed=3)
    sample = corpus.sample(2000)
    for text, word, start, end, filler in zip(
        sample.texts, sample.span_word_index, sample.span_char_start, sample.span_char_end, sample.fillers
    ):
        assert text.split()[word] == filler and text[start:end] == filler
    assert corpus.sample(2000) == sample
    assert corpus.sample(10).texts == sample.texts[:10]  # prefix-stable across chunk boundaries too
    assert corpus.sample(5, start=1500).texts == sample.texts[1500:1505]
    assert corpus.sample(50, seed=4).texts != sample.texts[:50]

    exact = corpus.candidates(1234, num_candidates=None)
    assert len(exact) == 4 and len(set(exact)) == 4 and sample.texts[1234] in exact
    words = [candidate.split() for candidate in exact]
    slot = sample.span_word_index[1234]
    assert all(w[:slot] == words[0][:slot] and w[slot + 1 :] == words[0][slot + 1 :] for w in words)
    padded = corpus.candidates(1234)
    assert len(padded) == 16 and all(padded.count(c) == 4 for c in exact)  # 4 divides 16: exactly uniform
    wide = AmbiguityCorpus(ambiguity=32)
    drawn = wide.candidates(7)
    assert len(drawn) == len(set(drawn)) == 16
    assert set(drawn) <= set(wide.candidates(7, num_candidates=None))
    assert wide.candidates(7) == drawn


def test_ambiguity_corpus_errors():
    with pytest.raises(ValueError, match="ambiguity"):
        AmbiguityCorpus(ambiguity=0)
    with pytest.raises(ValueError, match="ambiguity"):
        AmbiguityCorpus(ambiguity=len(AMBIGUITY_OBJECTS) + 1)
    with pytest.raises(ValueError, match="num_sentences"):
        AmbiguityCorpus().sample(0)
    with pytest.raises(ValueError, match="sentence_index"):
        AmbiguityCorpus().candidates(-1)
    with pytest.raises(ValueError, match="subject"):
        AmbiguityCorpus().valid_fillers("unicorn")
