"""hf_jepa.data.reasoning: the word-level tokenizer, the synthetic JEPA-Reasoner tasks and their batching."""

import ast
import itertools
import operator
import re
from collections import deque

import numpy as np
import pytest
import torch

from hf_jepa.data.reasoning import (
    CFG_GRAMMAR,
    CFG_START,
    CFG_TERMINALS,
    IGNORE_INDEX,
    REASONING_SPECIAL_TOKENS,
    ArithmeticWordProblems,
    CfgTask,
    ReasoningExample,
    TreeSearchTask,
    build_reasoning_tokenizer,
    check_known_tokens,
    encode_reasoning_examples,
    gsm8k_extract_answer,
    gsm8k_few_shot_prompt,
    load_gsm8k,
    load_reasoning_task,
    reasoning_dataset,
)

# -- tokenizer ---------------------------------------------------------------------------------------------------------


def test_tokenizer_special_ids_order_and_round_trip(tmp_path):
    from transformers import AutoTokenizer

    tokenizer = build_reasoning_tokenizer(["b", "a", "b", ",", "[SEP]", "?"])
    assert [tokenizer.convert_tokens_to_ids(t) for t in REASONING_SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    assert (
        tokenizer.pad_token_id,
        tokenizer.unk_token_id,
        tokenizer.bos_token_id,
        tokenizer.eos_token_id,
        tokenizer.sep_token_id,
    ) == (0, 1, 2, 3, 4)
    assert tokenizer.convert_ids_to_tokens([5, 6, 7, 8]) == ["b", "a", ",", "?"]  # order kept, duplicates dropped
    assert len(tokenizer) == 9
    ids = tokenizer("b a , ?  a")["input_ids"]
    assert ids == [5, 6, 7, 8, 6]  # no special tokens added
    # Every token after one space, so a decoded continuation reads after its prompt ("b a" + " , ?").
    assert tokenizer.decode([2] + ids + [3, 0, 0], skip_special_tokens=True) == " b a , ? a"
    assert "b a" + tokenizer.decode(ids[2:4]) == "b a , ?"
    assert tokenizer("a zz")["input_ids"] == [6, 1]

    tokenizer.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    assert reloaded.get_vocab() == tokenizer.get_vocab()
    assert reloaded.decode(ids) == " b a , ? a"
    assert (reloaded.pad_token, reloaded.unk_token, reloaded.bos_token, reloaded.eos_token, reloaded.sep_token) == (
        "[PAD]",
        "[UNK]",
        "[BOS]",
        "[EOS]",
        "[SEP]",
    )
    assert reloaded("b a , ?")["input_ids"] == [5, 6, 7, 8]
    assert reloaded.decode([4, 5, 6, 3], skip_special_tokens=True) == " b a"


def test_tokenizer_rejects_bad_vocab_and_unknown_tokens():
    with pytest.raises(ValueError, match="whitespace"):
        build_reasoning_tokenizer(["a b"])
    with pytest.raises(ValueError, match="single string"):
        build_reasoning_tokenizer("abc")
    tokenizer = build_reasoning_tokenizer(["a", "b"])
    assert check_known_tokens(tokenizer, "a b a") == [5, 6, 5]
    with pytest.raises(ValueError, match=r"2 token\(s\).*'zz'.*'c'"):
        check_known_tokens(tokenizer, "a zz b c zz")


# -- tree search -------------------------------------------------------------------------------------------------------


def bfs_path(prompt: str) -> list[str]:
    """An independent solver: undirected BFS from the node that is never a child to the target."""
    edge_part, target = prompt.split("?")
    edges = [tuple(chunk.split()) for chunk in edge_part.split(",")]
    children = {child for _, child in edges}
    (root,) = {parent for parent, _ in edges} - children
    neighbours = {}
    for a, b in edges:
        neighbours.setdefault(a, []).append(b)
        neighbours.setdefault(b, []).append(a)
    previous, queue = {root: None}, deque([root])
    while queue:
        node = queue.popleft()
        for nxt in neighbours[node]:
            if nxt not in previous:
                previous[nxt] = node
                queue.append(nxt)
    path, node = [], target.strip()
    while node is not None:
        path.append(node)
        node = previous[node]
    return path[::-1]


def test_tree_search_answers_are_root_to_target_paths():
    task = TreeSearchTask(num_nodes=12, node_vocab_size=40)
    examples = task.generate(300, seed=3)
    first_tokens_are_roots, depths = [], set()
    for example in examples:
        tokens = example.prompt.split()
        edges = " ".join(tokens[:-2]).split(",")
        assert len(edges) == 11 and tokens[-2] == "?"
        labels = {label for edge in edges for label in edge.split()}
        assert len(labels) == 12 and all(re.fullmatch(r"n\d+", x) and int(x[1:]) < 40 for x in labels)
        parents = [edge.split()[0] for edge in edges]
        assert max(parents.count(p) for p in parents) <= 2  # binary
        answer = example.answer.split()
        assert answer == bfs_path(example.prompt)
        assert task.is_valid_path(example.prompt, example.answer)
        assert task.score(example, " " + example.answer + " ")
        # The root is never stated: not the target, never a child, and only a parent in the edge list.
        assert answer[0] != tokens[-1] and len(answer) >= 2
        first_tokens_are_roots.append(tokens[0] == answer[0])
        depths.add(len(answer))
        assert len(answer) <= task.max_answer_length and len(tokens) <= task.max_prompt_length
    assert not all(first_tokens_are_roots)  # random edge order: the first edge does not give the root away
    assert len(depths) >= 4


def test_tree_search_is_valid_path_rejects_wrong_paths():
    task = TreeSearchTask()
    prompt = "n7 n2 , n12 n7 , n12 n33 ? n2"
    assert task.is_valid_path(prompt, "n12 n7 n2")
    for wrong in ("n7 n2", "n12 n2", "n12 n33 n2", "n12 n7 n2 n7", "", "n33 n12 n7 n2"):
        assert not task.is_valid_path(prompt, wrong)
    example = ReasoningExample(prompt, "n12 n7 n2")
    assert task.score(example, "n12 n7 n2") and not task.score(example, "n12 n2")
    with pytest.raises(ValueError, match="two parents"):
        task.is_valid_path("n1 n2 , n3 n2 ? n2", "n1 n2")
    with pytest.raises(ValueError, match="one tree"):
        task.is_valid_path("n1 n2 , n3 n4 ? n2", "n1 n2")


def test_tree_search_determinism_and_arguments():
    task = TreeSearchTask(seed=5)
    assert task.generate(20) == task.generate(20, seed=5) == TreeSearchTask(seed=5).generate(20)
    assert task.generate(20, seed=6) != task.generate(20)
    assert task.generate(30)[:20] == task.generate(20)  # example i depends only on (seed, i)
    with pytest.raises(ValueError, match="node_vocab_size"):
        TreeSearchTask(num_nodes=10, node_vocab_size=9)
    with pytest.raises(ValueError, match="num_nodes"):
        TreeSearchTask(num_nodes=1)
    with pytest.raises(ValueError, match="num_examples"):
        task.generate(0)
    with pytest.raises(ValueError, match="seed"):
        task.generate(3, seed=-1)


# -- context-free grammar ----------------------------------------------------------------------------------------------


def language_up_to(max_length: int) -> set[tuple[str, ...]]:
    """Every sentence of CFG_GRAMMAR with at most `max_length` tokens, by exhaustive leftmost derivation."""
    sentences, seen, queue = set(), set(), deque([(CFG_START,)])
    while queue:
        form = queue.popleft()
        index = next((i for i, s in enumerate(form) if s in CFG_GRAMMAR), None)
        if index is None:
            sentences.add(form)
            continue
        for production in CFG_GRAMMAR[form[index]]:
            new = form[:index] + production + form[index + 1 :]
            if len(new) <= max_length and new not in seen:  # no epsilon rules: forms never shrink
                seen.add(new)
                queue.append(new)
    return sentences


def test_cfg_recogniser_matches_the_grammar_exhaustively():
    language = language_up_to(5)
    assert ("x",) in language and ("(", "x", "+", "y", ")") in language and len(language) > 100
    for length in range(0, 6):
        for tokens in itertools.product(CFG_TERMINALS, repeat=length):
            assert CfgTask.is_valid(tokens) == (tokens in language), tokens


def test_cfg_recogniser_on_hand_written_strings():
    valid = ["x", "[ x + y ] * ( z - x )", "( ( ( x ) ) )", "x * y * z + [ ( x - y ) * z ] - y", "[ ( [ x ] ) ]"]
    invalid = [
        "",
        "x y",
        "( x ]",
        "[ x )",
        "( x + y",
        "x + ) y (",
        "x +",
        "* x",
        "( )",
        "x + + y",
        "] x [",
        "x * ( y + z ) )",
        "[ x ] [ y ]",
        "x - - y",
        "q",
    ]
    assert all(CfgTask.is_valid(s) for s in valid)
    assert not any(CfgTask.is_valid(s) for s in invalid)


def test_cfg_sampling_generation_and_scoring():
    task = CfgTask(seed=1)
    rng = np.random.default_rng(0)
    sentences = [task.sample_sentence(rng) for _ in range(400)]
    assert all(CfgTask.is_valid(s) and 8 <= len(s) <= 30 for s in sentences)
    depths = []
    for s in sentences:
        level = deepest = 0
        for token in s:
            level += token in "(["
            level -= token in ")]"
            deepest = max(deepest, level)
        depths.append(deepest)
    assert max(depths) >= 3  # real nesting
    shuffled = [list(np.random.default_rng(i).permutation(s)) for i, s in enumerate(sentences)]
    assert sum(CfgTask.is_valid(s) for s in shuffled) < 0.1 * len(shuffled)

    examples = task.generate(300, prefix_fraction=0.5)
    assert examples == task.generate(300, seed=1) and examples != task.generate(300, seed=2)
    for example in examples:
        prompt, answer = example.prompt.split(), example.answer.split()
        assert prompt and answer and len(prompt) <= task.max_prompt_length and len(answer) <= task.max_answer_length
        assert abs(len(prompt) - len(answer)) <= 1
        assert task.score(example, example.answer)
        assert not task.score(example, example.answer + " x")
    example = ReasoningExample("( x +", "y )")
    assert task.score(example, "[ y * z ] )")  # any valid completion counts
    assert not task.score(example, "y ]")
    assert task.score(ReasoningExample("( y -", "y )"), "y )", original_prompt="( x +")
    assert not task.score(ReasoningExample("( y -", "y )"), "y )", original_prompt="[ x +")
    short = task.generate(50, prefix_fraction=0.2)
    assert np.mean([len(e.prompt.split()) for e in short]) < np.mean([len(e.prompt.split()) for e in examples])
    for fraction in (0.0, 1.0, -0.5):
        with pytest.raises(ValueError, match="prefix_fraction"):
            task.generate(3, prefix_fraction=fraction)


def test_cfg_corrupt_prompt():
    task = CfgTask()
    prompt = "[ x + y ] * ( z - x ) + y * ["
    n = len(prompt.split())
    assert task.corrupt_prompt(prompt, 0.0, seed=0) == prompt
    for rate in (0.1, 0.25, 0.5, 1.0):
        for seed in range(5):
            corrupted = task.corrupt_prompt(prompt, rate, seed=seed)
            assert corrupted == task.corrupt_prompt(prompt, rate, seed=seed)
            changed = [a != b for a, b in zip(prompt.split(), corrupted.split())]
            assert len(changed) == n and sum(changed) == round(rate * n)
            assert set(corrupted.split()) <= set(CFG_TERMINALS)
    assert len({task.corrupt_prompt(prompt, 0.5, seed=s) for s in range(5)}) > 1
    for rate in (-0.1, 1.5):
        with pytest.raises(ValueError, match="rate"):
            task.corrupt_prompt(prompt, rate, seed=0)


# -- arithmetic word problems ------------------------------------------------------------------------------------------


def join_numbers(tokens: list[str]) -> list:
    """Tokens with runs of single digits merged into ints (the digit-by-digit number format)."""
    out = []
    for token in tokens:
        if token.isdigit() and out and isinstance(out[-1], int):
            out[-1] = out[-1] * 10 + int(token)
        else:
            out.append(int(token) if token.isdigit() else token)
    return out


def solve_question(question: str) -> int:
    """An independent solver that reads the question text: one number per sentence and a keyword for the op."""
    sentences = [join_numbers(s.split()) for s in question.split(" . ")]
    value = next(x for x in sentences[0] if isinstance(x, int))
    for sentence in sentences[1:-1]:
        numbers = [x for x in sentence if isinstance(x, int)]
        if "more" in sentence:
            value += numbers[0]
        elif "sells" in sentence or "loses" in sentence or ("gives" in sentence and "to" in sentence):
            value -= numbers[0]
        elif "doubles" in sentence or "triples" in sentence:
            value *= 2 if "doubles" in sentence else 3
        elif "groups" in sentence:
            assert value % numbers[0] == 0
            value //= numbers[0]
        else:
            raise AssertionError(sentence)
    assert sentences[-1][:2] == ["How", "many"]
    return value


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def calculate(expression: str) -> float:
    node = ast.parse(expression, mode="eval").body
    assert isinstance(node, ast.BinOp) and type(node.op) in _OPS
    return _OPS[type(node.op)](node.left.value, node.right.value)


def test_arithmetic_solutions_check_out():
    task = ArithmeticWordProblems(seed=4, min_steps=2, max_steps=4)
    tokenizer = task.build_tokenizer()
    examples = task.generate(300)
    ops_seen = set()
    for example in examples:
        check_known_tokens(tokenizer, example.prompt + " " + example.answer)  # closed vocabulary
        assert len(example.prompt.split()) <= task.max_prompt_length
        assert len(example.answer.split()) <= task.max_answer_length
        annotations = re.findall(r"<< (.*?) >> ((?:\d )+)", example.answer)
        assert 2 <= len(annotations) <= 4
        previous = solve_question(example.prompt.split(" . ")[0] + " . How many ?")  # the starting amount
        for inside, after in annotations:
            left, right = inside.replace(" ", "").split("=")
            ops_seen.add(re.sub(r"\d", "", left))
            result = calculate(left)
            assert result == int(right) == int(after.replace(" ", "")), example.answer
            assert int(re.match(r"\d+", left).group()) == previous  # each step starts from the last result
            assert 0 <= result < 1000 and float(result).is_integer()
            previous = int(result)
        final = gsm8k_extract_answer(example.answer)
        assert final == str(previous) == str(solve_question(example.prompt))
        assert example.answer.split()[-len(str(previous)) - 1 :] == ["####", *str(previous)]
        assert task.score(example, f"whatever #### {' '.join(final)}")
        assert not task.score(example, f"#### {int(final) + 1}") and not task.score(example, final)
    assert ops_seen == {"+", "-", "*", "/"}
    assert task.generate(10) == ArithmeticWordProblems(seed=4).generate(10) != task.generate(10, seed=5)


def test_gsm8k_answer_extraction_and_few_shot_prompt():
    assert gsm8k_extract_answer("She sold 48/2 = <<48/2=24>>24 clips.\n#### 1,234") == "1234"
    assert gsm8k_extract_answer("A #### 5 then #### 1 2") == "12"
    assert ArithmeticWordProblems.extract_answer("#### 0 7 [EOS]") == "7"
    assert gsm8k_extract_answer("#### -3") == "-3"
    assert gsm8k_extract_answer("no final answer 12") is None
    assert gsm8k_extract_answer("#### apples") is None

    shots = [(f"Q{i} ?", f"A{i} #### {i}") for i in range(10)]
    prompt = gsm8k_few_shot_prompt("How many?", shots)
    blocks = prompt.split("\n\n")
    assert len(blocks) == 9
    assert blocks[0] == "Question: Q0 ?\nAnswer: A0 #### 0" and blocks[7].startswith("Question: Q7 ?")
    assert blocks[-1] == "Question: How many?\nAnswer:"
    assert gsm8k_few_shot_prompt("q", shots[:2], k=2).count("Question:") == 3
    with pytest.raises(ValueError, match="k=8"):
        gsm8k_few_shot_prompt("q", shots[:7])


def test_load_gsm8k_is_online_only():
    with pytest.raises(RuntimeError, match="ArithmeticWordProblems"):
        load_gsm8k("test")


def test_load_reasoning_task():
    assert isinstance(load_reasoning_task("tree_search", num_nodes=5), TreeSearchTask)
    assert isinstance(load_reasoning_task("cfg"), CfgTask)
    assert load_reasoning_task("arithmetic", max_steps=6).max_steps == 6
    with pytest.raises(ValueError, match="arithmetic.*cfg.*tree_search"):
        load_reasoning_task("sudoku")


# -- batching ----------------------------------------------------------------------------------------------------------


def test_encode_layout_padding_and_labels():
    tokenizer = build_reasoning_tokenizer(["a", "b", "c"])  # a=5 b=6 c=7
    examples = [ReasoningExample("a b c", "c"), ReasoningExample("b", "a b")]
    batch = encode_reasoning_examples(examples, tokenizer, max_prompt_length=4, max_answer_length=4)
    assert batch["prompt_ids"].tolist() == [[0, 5, 6, 7], [0, 0, 0, 6]]
    assert batch["prompt_mask"].tolist() == [[0, 1, 1, 1], [0, 0, 0, 1]]
    assert batch["answer_ids"].tolist() == [[7, 3, 0, 0], [5, 6, 3, 0]]
    assert batch["answer_mask"].tolist() == [[1, 1, 0, 0], [1, 1, 1, 0]]
    assert batch["input_ids"].tolist() == [[0, 5, 6, 7, 4, 7, 3, 0, 0], [0, 0, 0, 6, 4, 5, 6, 3, 0]]
    assert batch["attention_mask"].tolist() == [[0, 1, 1, 1, 1, 1, 1, 0, 0], [0, 0, 0, 1, 1, 1, 1, 1, 0]]
    m = IGNORE_INDEX
    assert batch["labels"].tolist() == [[m, m, m, m, m, 7, 3, m, m], [m, m, m, m, m, 5, 6, 3, m]]
    assert batch["prompt_lengths"].tolist() == [3, 1] and batch["answer_lengths"].tolist() == [1, 2]
    assert all(t.dtype == torch.long for t in batch.values())

    with pytest.raises(ValueError, match="example 0: the prompt has 3 tokens.*max_prompt_length=2"):
        encode_reasoning_examples(examples, tokenizer, max_prompt_length=2, max_answer_length=4)
    with pytest.raises(ValueError, match=r"example 1: the answer has 2 tokens \+ \[EOS\].*max_answer_length=2"):
        encode_reasoning_examples(examples, tokenizer, max_prompt_length=4, max_answer_length=2)
    with pytest.raises(ValueError, match="example 2: .*'zz'"):
        encode_reasoning_examples(examples + [ReasoningExample("a zz", "b")], tokenizer, 4, 4)
    unknown = encode_reasoning_examples([ReasoningExample("a zz", "b")], tokenizer, 4, 4, allow_unknown=True)
    assert unknown["prompt_ids"].tolist() == [[0, 0, 5, 1]]
    fitted = encode_reasoning_examples(examples, tokenizer, None, None)
    assert fitted["prompt_ids"].shape == (2, 3) and fitted["answer_ids"].shape == (2, 3)
    with pytest.raises(ValueError, match="answer"):
        ReasoningExample("a", " ")


def test_encode_tasks_round_trip_and_dataset():
    for name in ("tree_search", "cfg", "arithmetic"):
        task = load_reasoning_task(name)
        tokenizer = task.build_tokenizer()
        examples = task.generate(64, seed=9)
        batch = encode_reasoning_examples(examples, tokenizer, task.max_prompt_length, task.max_answer_length)
        width = task.max_prompt_length + 1 + task.max_answer_length
        assert batch["input_ids"].shape == batch["labels"].shape == (64, width)
        assert (batch["input_ids"][:, task.max_prompt_length] == tokenizer.sep_token_id).all()
        for row, example in enumerate(examples[:8]):
            assert tokenizer.decode(batch["prompt_ids"][row], skip_special_tokens=True).strip() == example.prompt
            assert tokenizer.decode(batch["answer_ids"][row], skip_special_tokens=True).strip() == example.answer
            kept = batch["labels"][row][batch["labels"][row] != IGNORE_INDEX]
            assert tokenizer.decode(kept, skip_special_tokens=True).strip() == example.answer
    dataset = reasoning_dataset(examples, tokenizer, task.max_prompt_length, task.max_answer_length)
    assert len(dataset) == 64 and dataset[3]["answer"] == examples[3].answer
    assert torch.equal(dataset[3]["input_ids"], batch["input_ids"][3])
