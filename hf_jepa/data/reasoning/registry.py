"""The reasoning tasks by name: `REASONING_TASKS` and `load_reasoning_task`."""

from .arithmetic import ArithmeticWordProblems
from .cfg import CfgTask
from .common import ReasoningTask
from .tree_search import TreeSearchTask

REASONING_TASKS = {"tree_search": TreeSearchTask, "cfg": CfgTask, "arithmetic": ArithmeticWordProblems}


def load_reasoning_task(name: str, **kwargs) -> ReasoningTask:
    """A task by name: "tree_search" (`TreeSearchTask`), "cfg" (`CfgTask`), "arithmetic" (`ArithmeticWordProblems`);
    `kwargs` go to its constructor."""
    if name not in REASONING_TASKS:
        raise ValueError(f"name must be one of {sorted(REASONING_TASKS)}, got {name!r}")
    return REASONING_TASKS[name](**kwargs)
