"""`ReasoningData`: a synthetic reasoning task, its tokenizer and its encoded train/eval splits."""

import logging

import torch

from .common import ReasoningExample
from .encoding import encode_reasoning_examples
from .registry import load_reasoning_task

logger = logging.getLogger(__name__)


class ReasoningData:
    """A task, its word-level tokenizer and the encoded train/eval splits (fixed-shape tensors), shared by every system
    of a comparison so that all see the same examples. `args`: the JEPA-Reasoner data arguments
    (`hf_jepa.recipes.jepa_reasoner.JepaReasonerDataArguments`).

        Train and eval examples come from different generator seeds (`task_seed` and `task_seed + 1`); exact duplicates of
        training examples are removed from the eval split, so accuracy is measured on unseen examples.
    """

    def __init__(self, args):
        self.args = args
        options = {}
        if args.task == "tree_search":
            options = {"num_nodes": args.num_nodes, "node_vocab_size": args.node_vocab_size}
        elif args.task == "arithmetic":
            options = {"min_steps": args.min_operations, "max_steps": args.max_operations}
        self.task = load_reasoning_task(args.task, seed=args.task_seed, **options)
        self.tokenizer = self.task.build_tokenizer()
        self.train_examples = self.task.generate(args.num_train_examples, seed=args.task_seed)
        seen = {(e.prompt, e.answer) for e in self.train_examples}
        candidates = self.task.generate(args.num_eval_examples * 2 + 16, seed=args.task_seed + 1)
        self.eval_examples = [e for e in candidates if (e.prompt, e.answer) not in seen][: args.num_eval_examples]
        self.max_prompt_length = self.task.max_prompt_length
        self.max_answer_length = self.task.max_answer_length + 1  # + [EOS]
        self.train = self.encode(self.train_examples)
        self.eval = self.encode(self.eval_examples)
        logger.info(
            "JEPA-Reasoner data: synthetic %s (%d train / %d eval examples, vocabulary %d, prompt <= %d, "
            "answer <= %d tokens)",
            args.task,
            len(self.train_examples),
            len(self.eval_examples),
            len(self.tokenizer),
            self.max_prompt_length,
            self.max_answer_length,
        )

    @property
    def source(self) -> str:
        return f"synthetic {self.args.task} (hf-jepa generator, seed {self.args.task_seed})"

    @property
    def vocab_size(self) -> int:
        return len(self.tokenizer)

    def encode(self, examples: list[ReasoningExample]) -> dict[str, torch.Tensor]:
        return encode_reasoning_examples(
            examples, self.tokenizer, max_prompt_length=self.max_prompt_length, max_answer_length=self.max_answer_length
        )

    def encode_prompts(self, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Left-padded `(prompt_ids, prompt_mask)` for raw prompt strings (e.g. corrupted ones)."""
        ids = [self.tokenizer.convert_tokens_to_ids(p.split()) for p in prompts]
        width = self.max_prompt_length
        prompt_ids = torch.full((len(ids), width), self.tokenizer.pad_token_id, dtype=torch.long)
        prompt_mask = torch.zeros((len(ids), width), dtype=torch.long)
        for row, tokens in enumerate(ids):
            if len(tokens) > width:
                raise ValueError(f"prompt {row} has {len(tokens)} tokens, more than max_prompt_length={width}")
            prompt_ids[row, width - len(tokens) :] = torch.tensor(tokens, dtype=torch.long)
            prompt_mask[row, width - len(tokens) :] = 1
        return prompt_ids, prompt_mask

    def to_dataset(self):
        """The two splits as a `datasets.DatasetDict`: `train` (`train_examples`, row i = `self.train[...][i]`) and
        `test` (`eval_examples`, the held-out split the recipe evaluates on). Columns: `prompt` and `answer` strings,
        then every tensor of `encode_reasoning_examples` as fixed-length int64 lists (`input_ids`, `attention_mask`,
        `labels`, `prompt_ids`, `prompt_mask`, `answer_ids`, `answer_mask`, `prompt_lengths`, `answer_lengths`).
        `dataset["train"].with_format("torch")[index]` gives exactly `self.batch(self.train, index, keys)`'s tensors:
        the recipe's batch for the same rows."""
        import datasets

        splits = {}
        for name, examples, encoded in (
            ("train", self.train_examples, self.train),
            ("test", self.eval_examples, self.eval),
        ):
            features = {"prompt": datasets.Value("string"), "answer": datasets.Value("string")}
            columns = {"prompt": [e.prompt for e in examples], "answer": [e.answer for e in examples]}
            for key, tensor in encoded.items():
                value = datasets.Value("int64")
                features[key] = value if tensor.ndim == 1 else datasets.List(value, length=tensor.shape[1])
                columns[key] = tensor.numpy()
            splits[name] = datasets.Dataset.from_dict(columns, features=datasets.Features(features))
        return datasets.DatasetDict(splits)

    def batch(self, split: dict[str, torch.Tensor], index: torch.Tensor, keys) -> dict[str, torch.Tensor]:
        return {key: split[key][index] for key in keys}

    def decode(self, token_ids: torch.Tensor) -> list[str]:
        """Generated ids -> answer strings: cut at the first `[EOS]`, special tokens dropped."""
        answers = []
        eos = self.tokenizer.eos_token_id
        for row in token_ids.tolist():
            if eos in row:
                row = row[: row.index(eos)]
            answers.append(self.tokenizer.decode(row, skip_special_tokens=True).strip())
        return answers

    def accuracy(self, examples: list[ReasoningExample], answers: list[str], **score_kwargs) -> float:
        if not examples:
            return float("nan")
        return sum(bool(self.task.score(e, a, **score_kwargs)) for e, a in zip(examples, answers)) / len(examples)
