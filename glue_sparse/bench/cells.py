"""Which cells a GLUE average stands on when a grid is reported in parts: one rule for an arm's own summary
and for the comparisons (targets) between arms, so a report read mid-run says the same in both places."""

from __future__ import annotations

from typing import Mapping


def averaged_seeds(seed_tasks: Mapping[int, set[str]]) -> tuple[list[int], set[str]]:
    """(the seeds a GLUE average is taken over, the tasks it averages): the seeds that ran the most tasks, on the
    tasks all of them ran. A seed still running (seed 2 on three of five tasks) neither narrows the average to
    its tasks, which would move the arm off a five-task frontier, nor skews a five-task mean; it joins when
    it has run as many tasks. Empty where no seed ran a task."""
    seed_tasks = {seed: tasks for seed, tasks in seed_tasks.items() if tasks}
    if not seed_tasks:
        return [], set()
    widest = max(len(tasks) for tasks in seed_tasks.values())
    seeds = sorted(seed for seed, tasks in seed_tasks.items() if len(tasks) == widest)
    return seeds, set.intersection(*(seed_tasks[seed] for seed in seeds))
