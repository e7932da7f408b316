"""GSM8K readiness: answer extraction and few-shot prompts on GSM8K-format items, the word-level GSM8K tokens, local
GSM8K folders, the few-shot data's width and truncation, and `hf-jepa reproduce jepa-reasoner --set protocol=gsm8k`
end to end at the tiny size (train, save, reload from the saved folders, same answers)."""

import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from hf_jepa.cli import main
from hf_jepa.data.reasoning import (
    Gsm8kFewShotData,
    gsm8k_extract_answer,
    gsm8k_few_shot_prompt,
    gsm8k_words,
    load_gsm8k_pairs,
)
from hf_jepa.reproductions.jepa_reasoner import reproduce_jepa_reasoner
from hf_jepa.testing.gsm8k_examples import GSM8K_FORMAT_ITEMS

PAIRS = [(question, answer) for question, answer, _ in GSM8K_FORMAT_ITEMS]


@pytest.mark.parametrize("question,answer,final", GSM8K_FORMAT_ITEMS, ids=[i[2] for i in GSM8K_FORMAT_ITEMS])
def test_extraction_on_gsm8k_format_items(question, answer, final):
    # The fixture itself is consistent: every calculator annotation computes, the last line is "#### n".
    for expression, value in re.findall(r"<<([^=]+)=([^>]+)>>", answer):
        assert abs(eval(expression, {}) - float(value)) < 1e-9, expression  # noqa: S307 - fixture arithmetic
    assert answer.splitlines()[-1].startswith("#### ")
    assert gsm8k_extract_answer(answer) == final
    # The word-level form the models read and write gives the same number ("#### 5 , 0 0 0" -> "5000").
    assert gsm8k_extract_answer(gsm8k_words(answer)) == final


@pytest.mark.parametrize(
    "text,expected",
    [
        ("#### 1,000", "1000"),
        ("#### 1 , 0 0 0", "1000"),
        ("#### 1,234,567.50", "1234567.5"),
        ("#### -7", "-7"),
        ("#### - 7", "-7"),
        ("#### -$5", "-5"),
        ("#### $72", "72"),
        ("#### $ 7 2", "72"),
        ("#### 6.25", "6.25"),
        ("#### 6 . 2 5", "6.25"),  # a decimal written digit by digit keeps all its digits
        ("#### .5", "0.5"),
        ("#### 0.50", "0.5"),
        ("#### 72.0", "72"),
        ("#### 007", "7"),
        ("#### -0", "0"),
        ("#### 72 apples in total.", "72"),
        ("#### 72.", "72"),
        ("#### 72\n\nQuestion: next one #### 5", "5"),  # the last #### counts
        ("#### 7\n2", "7"),  # a newline never joins digits
        ("A #### 5 then #### 1 2", "12"),
        ("####72", "72"),
        ("She sold 72 clips.", None),
        ("#### apples", None),
        ("#### -", None),
        ("#### $", None),
        ("", None),
    ],
)
def test_extraction_edge_cases(text, expected):
    assert gsm8k_extract_answer(text) == expected


def test_extraction_rejects_non_strings():
    assert gsm8k_extract_answer(None) is None and gsm8k_extract_answer(72) is None


def test_few_shot_prompt_exact_and_k5_k8():
    shots = [("What is 2 plus 3?", "2+3 = <<2+3=5>>5\n#### 5"), (" Is 10 less 4 six? ", "10-4 = <<10-4=6>>6\n#### 6 ")]
    assert gsm8k_few_shot_prompt("How many?", shots, k=2) == (
        "Question: What is 2 plus 3?\nAnswer: 2+3 = <<2+3=5>>5\n#### 5\n\n"
        "Question: Is 10 less 4 six?\nAnswer: 10-4 = <<10-4=6>>6\n#### 6\n\n"
        "Question: How many?\nAnswer:"
    )
    assert gsm8k_few_shot_prompt("How many?", shots, k=0) == "Question: How many?\nAnswer:"
    for k in (5, 8):
        prompt = gsm8k_few_shot_prompt(PAIRS[9][0], PAIRS, k=k)
        blocks = prompt.split("\n\nQuestion: ")
        assert len(blocks) == k + 1 and prompt.count("\nAnswer:") == k + 1
        assert blocks[0] == f"Question: {PAIRS[0][0]}\nAnswer: {PAIRS[0][1]}"
        assert blocks[k - 1] == f"{PAIRS[k - 1][0]}\nAnswer: {PAIRS[k - 1][1]}"  # the first k shots, in order
        assert blocks[-1] == f"{PAIRS[9][0]}\nAnswer:"
        # Every exemplar's final number survives the prompt.
        assert re.findall(r"#### ([\d,.-]+)", prompt) == [a.rsplit("#### ", 1)[1] for _, a in PAIRS[:k]]
    with pytest.raises(ValueError, match=r"at least k=8 .*got 5"):
        gsm8k_few_shot_prompt("q", PAIRS[:5], k=8)
    for bad in (-1, True, 2.0):
        with pytest.raises(ValueError, match="k must be an integer >= 0"):
            gsm8k_few_shot_prompt("q", PAIRS, k=bad)
    with pytest.raises(ValueError, match=r"shots\[1\]"):
        gsm8k_few_shot_prompt("q", [("a", "b"), ("only one",)], k=2)


def test_gsm8k_words():
    answer = PAIRS[0][1]
    assert gsm8k_words(answer) == (
        "Natalia sold 4 8 / 2 = << 4 8 / 2 = 2 4 >> 2 4 clips in May . "
        "Natalia sold 4 8 + 2 4 = << 4 8 + 2 4 = 7 2 >> 7 2 clips altogether in April and May . #### 7 2"
    )
    assert gsm8k_words("Janet\u2019s farmers' $1,250.") == "Janet \u2019 s farmers ' $ 1 , 2 5 0 ."
    assert gsm8k_words("Natalia's") == "Natalia's"
    for _, text in PAIRS:
        assert gsm8k_words(gsm8k_words(text)) == gsm8k_words(text)
    with pytest.raises(ValueError, match="text must be a string"):
        gsm8k_words(None)


def test_local_gsm8k_folders(tmp_path):
    jsonl = tmp_path / "jsonl"
    jsonl.mkdir()
    for split, rows in (("train", PAIRS[:7]), ("test", PAIRS[7:])):
        (jsonl / f"{split}.jsonl").write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in rows))
    hub_layout = tmp_path / "hub" / "main"
    hub_layout.mkdir(parents=True)
    table = pa.table({"question": [q for q, _ in PAIRS[7:]], "answer": [a for _, a in PAIRS[7:]]})
    pq.write_table(table, hub_layout / "test-00000-of-00001.parquet")
    assert load_gsm8k_pairs(str(jsonl), "train") == PAIRS[:7]
    assert load_gsm8k_pairs(str(jsonl), "test") == load_gsm8k_pairs(str(tmp_path / "hub"), "test") == PAIRS[7:]
    with pytest.raises(ValueError, match=r"data: .* holds no train\*\.parquet"):
        load_gsm8k_pairs(str(tmp_path / "hub"), "train")
    with pytest.raises(ValueError, match="data must be 'synthetic', 'gsm8k' or a local GSM8K folder"):
        load_gsm8k_pairs(str(tmp_path / "missing"), "test")
    (jsonl / "train.jsonl").write_text(json.dumps({"question": "q"}) + "\n")
    with pytest.raises(ValueError, match="row 0 .* 'question' and 'answer'"):
        load_gsm8k_pairs(str(jsonl), "train")


def test_few_shot_data_width_truncation_and_scoring():
    data = Gsm8kFewShotData(PAIRS[:8], PAIRS[8:], max_shots=2, seed=0)
    assert data.exemplars == [tuple(gsm8k_words(t) for t in pair) for pair in PAIRS[:2]]
    assert len(data.train_examples) == 6 and data.stats["prompt_width"] == data.stats["prompt_tokens_needed"]
    ids, mask, cut = data.test_prompts(2)
    assert ids.shape == (2, data.max_prompt_length) and cut == 0
    expected = gsm8k_words(gsm8k_few_shot_prompt(PAIRS[9][0], PAIRS[:2], k=2)).split()
    vocab = data.tokenizer.get_vocab()
    assert "car" in expected and "car" not in vocab  # a test word never seen in training reads as [UNK]
    expected = [token if token in vocab else "[UNK]" for token in expected]
    assert data.tokenizer.convert_ids_to_tokens(ids[1][mask[1] == 1].tolist()) == expected
    with pytest.raises(ValueError, match=r"shots: k must be an integer in 0 \.\. 2"):
        data.test_prompts(3)
    # The decoded answer stops before a next "Question :" block and scores by its final number.
    generated = data.tokenizer(["#### 3 0 Question : more #### 9"], add_special_tokens=False)["input_ids"]
    assert data.decode(torch.tensor(generated)) == ["#### 3 0"]
    assert data.score(PAIRS[9][1], "#### 3 0") and not data.score(PAIRS[9][1], "3 0")

    # A context that cannot hold the 2-shot prompts: the oldest tokens go, and the cut prompts are counted.
    tight = Gsm8kFewShotData(PAIRS[:8], PAIRS[8:], max_shots=2, context_length=120, max_answer_tokens=40)
    ids, mask, cut = tight.test_prompts(2)
    assert tight.max_prompt_length == 120 - 1 - 41 and cut == 2 and bool(mask[:, 0].all())
    assert tight.tokenizer.convert_ids_to_tokens(ids[1].tolist())[-3:] == ["?", "Answer", ":"]
    with pytest.raises(ValueError, match="context_length=60 leaves 18 prompt tokens"):
        Gsm8kFewShotData(PAIRS[:8], PAIRS[8:], max_shots=2, context_length=60, max_answer_tokens=40)
    with pytest.raises(ValueError, match="shots: 8 exemplars needed"):
        Gsm8kFewShotData(PAIRS[:8], PAIRS[8:], max_shots=8, max_shot_tokens=40)


def test_gsm8k_protocol_end_to_end_tiny(tmp_path):
    out = tmp_path / "run"
    result = reproduce_jepa_reasoner(output_dir=str(out), quick=True, protocol="gsm8k", shots=(1, 2))
    summary = json.loads((out / "results.json").read_text())
    assert summary["preset"] == "tiny" and summary["shots"] == [1, 2] and summary["device"] == "cpu"
    assert set(summary["accuracy"]) == {"JEPA-Reasoner + Dual-Talker", "coupled transformer"}
    for name, by_k in summary["accuracy"].items():
        for k in ("1", "2"):
            detail = summary["details"][name][k]
            assert 0.0 <= by_k[k] <= 1.0 and detail["examples"] == summary["data_stats"]["test_problems"] == 12
            assert by_k[k] == detail["correct"] / detail["examples"]
    table = (out / "results.md").read_text()
    assert table == result.table + "\n"
    header = "| system | parameters | 1-shot | 2-shot |"
    assert header in table and "| JEPA-Reasoner + Dual-Talker |" in table and "| coupled transformer |" in table
    assert (out / "accuracy_vs_shots.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for folder in ("reasoner", "dual-talker/pair", "coupled"):
        assert (out / folder / "model.safetensors").is_file()

    # The same evaluation from the saved folders (no training): the same answers, bit for bit.
    again = reproduce_jepa_reasoner(
        output_dir=str(tmp_path / "reloaded"),
        quick=True,
        protocol="gsm8k",
        shots=(1, 2),
        talker=str(out / "dual-talker"),
        coupled=str(out / "coupled"),
    )
    assert again.summary["runs"]["coupled"] == {"loaded_from": str(out / "coupled")}
    assert again.summary["accuracy"] == summary["accuracy"]
    for name in summary["details"]:
        for k in ("1", "2"):
            assert again.summary["details"][name][k]["first_answers"] == summary["details"][name][k]["first_answers"]
    # Another seed draws other synthetic problems, so another vocabulary: the saved models do not fit it.
    with pytest.raises(ValueError, match="talker: the model in .* has a 78-token vocabulary, this run's tokenizer 79"):
        reproduce_jepa_reasoner(
            output_dir=str(tmp_path / "other"), quick=True, protocol="gsm8k", shots=(1,), seed=3,
            talker=str(out / "dual-talker"), coupled=str(out / "coupled"),
        )  # fmt: skip


@pytest.mark.parametrize(
    "options,match",
    [
        (dict(protocol="gsm8k", preset="huge"), r"preset must be one of \('tiny', 'cpu_fast', 'full'\)"),
        (dict(protocol="gsm8k", shots=(-1, 8)), "shots must be a non-empty list"),
        (dict(protocol="gsm8k", shots=()), "shots must be a non-empty list"),
        (dict(protocol="gsm8k", test_examples=0), "test_examples must be an integer >= 1"),
        (dict(protocol="gsm8k", allow_full_on_cpu="yes"), "allow_full_on_cpu must be true or false"),
        (dict(protocol="gsm8k", data="no/such/folder"), "data must be 'synthetic', 'gsm8k' or a local GSM8K folder"),
        (dict(protocol="gsm8k", reasoner="r", talker="t"), "reasoner and talker: give one"),
        (dict(protocol="gsm8k", tasks=("cfg",)), r"\['tasks'\]: not options of protocol=gsm8k"),
        (dict(protocol="gsm8k", budget_minutes=1.0), r"\['budget_minutes'\]: not options of protocol=gsm8k"),
        (dict(protocol="gsm8k", steps_scale=0), "steps_scale must be a positive number"),
        (dict(shots=(8,)), r"\['shots'\]: options of protocol=gsm8k only"),
    ],
)
def test_bad_options_name_the_option(options, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        reproduce_jepa_reasoner(output_dir=str(tmp_path), **options)


def test_bad_folders_and_full_preset_on_cpu(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="reasoner: .* is a file, not a model folder"):
        reproduce_jepa_reasoner(output_dir=str(tmp_path / "o"), protocol="gsm8k", reasoner=str(tmp_path / "file"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="coupled: folder .* has no config.json"):
        reproduce_jepa_reasoner(output_dir=str(tmp_path / "o"), protocol="gsm8k", coupled=str(tmp_path / "empty"))
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="preset=full .* needs a GPU.*allow_full_on_cpu=true"):
            reproduce_jepa_reasoner(output_dir=str(tmp_path / "o"), protocol="gsm8k", preset="full")


def test_cli_one_line_errors(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["reproduce", "jepa-reasoner", "--set", "protocol=gsm8k", "preset=huge"])
    error = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and len(error.splitlines()) == 1 and "preset must be one of" in error
    with pytest.raises(SystemExit) as exit_info:
        main(["reproduce", "jepa-reasoner", "--data", "gsm8k", "--set", "protocol=gsm8k", "data=synthetic"])
    error = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "give the data once" in error


def test_full_preset_has_the_paper_sizes_and_fits_8_shots():
    """preset=full on GSM8K-format text (the fixture): the paper's 2,048 positions, 50,304-row embeddings and
    parameter counts (built on the meta device, never trained here)."""
    from hf_jepa.modeling.jepa_reasoner import CoupledTransformerLM, DualTalkerModel, JepaReasonerModel
    from hf_jepa.reproductions.jepa_reasoner_gsm8k import FULL_CONTEXT, MAX_ANSWER_TOKENS, MAX_SHOT_TOKENS, _configs

    data = Gsm8kFewShotData(
        PAIRS[:8] * 2,  # 16 problems: 8 exemplars + 8 training examples
        PAIRS[8:],
        max_shots=8,
        max_answer_tokens=MAX_ANSWER_TOKENS,
        max_shot_tokens=MAX_SHOT_TOKENS,
        context_length=FULL_CONTEXT,
        vocab_size=50304,
    )
    assert data.stats["prompt_width"] == data.stats["prompt_tokens_needed"] < FULL_CONTEXT - 1 - 257  # no cut
    assert data.test_prompts(8)[2] == 0 and len(data.tokenizer) < data.vocab_size == 50304
    configs = _configs("full", data)
    assert configs["reasoner"].max_position_embeddings == configs["coupled"].max_position_embeddings == 2048
    assert configs["reasoner"].num_reasoning_steps == data.max_answer_length == 257
    assert configs["dual"].max_position_embeddings >= data.max_prompt_length + 2 * 257
    with torch.device("meta"):
        sizes = [
            sum(p.numel() for n, p in model.named_parameters() if not n.startswith("target_encoder."))
            for model in (
                JepaReasonerModel(configs["reasoner"]),
                DualTalkerModel(configs["dual"]),
                CoupledTransformerLM(configs["coupled"]),
            )
        ]
    assert sizes == [898_394_112, 194_528_256, 890_715_648]


def test_cli_runs_the_protocol_on_a_local_gsm8k_copy(tmp_path, capsys):
    folder = tmp_path / "gsm8k"
    folder.mkdir()
    for split, rows in (("train", PAIRS[:8]), ("test", PAIRS[8:])):
        (folder / f"{split}.jsonl").write_text(
            "".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in rows)
        )
    out = tmp_path / "run"
    argv = ["reproduce", "jepa-reasoner", "--quick", "--no-progress", "--output-dir", str(out), "--set"]
    assert main([*argv, "protocol=gsm8k", f"data={folder}", "shots=[1,2]", "test_examples=1"]) == 0
    printed = capsys.readouterr().out
    assert f"GSM8K (local copy: {folder})" in printed and "| system | parameters | 1-shot | 2-shot |" in printed
    summary = json.loads((out / "results.json").read_text())
    assert summary["data_stats"]["test_problems"] == 1 and summary["data_stats"]["train_examples"] == 6
    assert summary["data_stats"]["max_answer_tokens"] == 256  # the real-GSM8K answer budget
