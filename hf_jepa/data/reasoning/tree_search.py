"""`TreeSearchTask`: path finding in a random binary tree given as an unordered edge list (synthetic)."""

import numpy as np

from .common import ReasoningExample, ReasoningTask, _check_seed


class TreeSearchTask(ReasoningTask):
    """Path finding in a random binary tree given as an unordered edge list.

    Each example draws a tree shape (node `k` attaches to a uniformly drawn earlier node that still has a free child
    slot, in a uniformly drawn free slot, left or right), gives its nodes distinct labels drawn without replacement
    from `n0 .. n{node_vocab_size - 1}`, and a target drawn uniformly among the non-root nodes (so every answer has
    at least two tokens). Prompt: the `num_nodes - 1` edges as `parent child` pairs in random order, separated by
    `,`, then `?` and the target, e.g. `n12 n7 , n12 n33 , n7 n2 ? n2`. The root is never stated: it is the only
    parent that is never a child, so the model has to infer it. Answer: the root-to-target path, e.g. `n12 n7 n2`.

    Args:
        num_nodes: nodes per tree (>= 2).
        node_vocab_size: number of node labels (>= num_nodes).
        seed: default seed of `generate`.
    """

    name = "tree_search"
    _salt = 101

    def __init__(self, num_nodes: int = 15, node_vocab_size: int = 64, seed: int = 0):
        if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 2:
            raise ValueError(f"num_nodes must be an integer >= 2, got {num_nodes!r}")
        if isinstance(node_vocab_size, bool) or not isinstance(node_vocab_size, int) or node_vocab_size < num_nodes:
            raise ValueError(f"node_vocab_size must be an integer >= num_nodes ({num_nodes}), got {node_vocab_size!r}")
        self.num_nodes = num_nodes
        self.node_vocab_size = node_vocab_size
        self.seed = _check_seed(seed)

    def __repr__(self) -> str:
        return f"TreeSearchTask(num_nodes={self.num_nodes}, node_vocab_size={self.node_vocab_size}, seed={self.seed})"

    def node_labels(self) -> list[str]:
        return [f"n{index}" for index in range(self.node_vocab_size)]

    def vocab(self) -> list[str]:
        """All node labels, then `,` and `?`."""
        return self.node_labels() + [",", "?"]

    @property
    def max_prompt_length(self) -> int:
        """`num_nodes - 1` edges of 2 tokens, `num_nodes - 2` commas, `?` and the target: `3 * num_nodes - 2`."""
        return 3 * self.num_nodes - 2

    @property
    def max_answer_length(self) -> int:
        """A path visits each node at most once: `num_nodes` tokens (a chain-shaped tree)."""
        return self.num_nodes

    def _generate_one(self, rng: np.random.Generator) -> ReasoningExample:
        n = self.num_nodes
        parent = [-1] * n
        free = {0: [0, 1]}  # node -> its free child slots (0 = left, 1 = right)
        for node in range(1, n):
            owners = sorted(free)
            owner = owners[int(rng.integers(len(owners)))]
            slots = free[owner]
            slots.pop(int(rng.integers(len(slots))))
            if not slots:
                del free[owner]
            parent[node] = owner
            free[node] = [0, 1]
        labels = [f"n{index}" for index in rng.choice(self.node_vocab_size, size=n, replace=False)]
        target = int(rng.integers(1, n))
        path = [target]
        while parent[path[-1]] >= 0:
            path.append(parent[path[-1]])
        edges = [f"{labels[parent[child]]} {labels[child]}" for child in rng.permutation(np.arange(1, n)).tolist()]
        prompt = " , ".join(edges) + f" ? {labels[target]}"
        return ReasoningExample(prompt, " ".join(labels[node] for node in reversed(path)))

    @staticmethod
    def parse_prompt(prompt: str) -> tuple[dict[str, str], str, str]:
        """`(parent_of, root, target)` of a prompt; ValueError if it is malformed or its edges are not one tree."""
        tokens = prompt.split()
        if tokens.count("?") != 1 or tokens.index("?") != len(tokens) - 2:
            raise ValueError(f"prompt must end with '? <target>' (one '?'), got {prompt!r}")
        target = tokens[-1]
        parent_of: dict[str, str] = {}
        parents = []
        for chunk in " ".join(tokens[:-2]).split(","):
            edge = chunk.split()
            if len(edge) != 2:
                raise ValueError(f"prompt edges must be 'parent child' pairs separated by ',', got {chunk.strip()!r}")
            if edge[1] in parent_of:
                raise ValueError(f"node {edge[1]!r} has two parents in {prompt!r}")
            parent_of[edge[1]] = edge[0]
            parents.append(edge[0])
        roots = {node for node in parents if node not in parent_of}
        if len(roots) != 1:
            raise ValueError(
                f"prompt edges must form one tree (one node that is never a child), roots: {sorted(roots)}"
            )
        root = roots.pop()
        for node in parent_of:  # every node must reach the root: no cycle hanging off the tree
            seen = set()
            while node != root:
                if node in seen or node not in parent_of:
                    raise ValueError(f"prompt edges must form one tree; {node!r} does not lead to the root {root!r}")
                seen.add(node)
                node = parent_of[node]
        if target != root and target not in parent_of:
            raise ValueError(f"target {target!r} is not a node of the tree")
        return parent_of, root, target

    def is_valid_path(self, prompt: str, answer: str) -> bool:
        """Whether `answer` is the path from the root to the target under `prompt`'s edges (ValueError: bad prompt)."""
        parent_of, root, target = self.parse_prompt(prompt)
        path = answer.split()
        if not path or path[0] != root or path[-1] != target:
            return False
        return all(parent_of.get(child) == node for node, child in zip(path, path[1:]))

    def score(self, example: ReasoningExample, predicted_answer: str) -> bool:
        """Exact match of the predicted path (whitespace-insensitive); in a tree the path is unique."""
        return predicted_answer.split() == example.answer.split()
