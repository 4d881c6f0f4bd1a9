"""A caller-only task's own queue (`TaskQueue`) pops in exactly the order of the shared,
locked `ReadyQueue` (Note [Ready queue order], Note [Device threads])."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxstream.autograd.ready_queue import ReadyQueue, TaskQueue


class _Task:
    """What a queue reads of a graph task."""

    def __init__(self, caller_only: bool) -> None:
        self.reentrant_depth = 0
        self.exception = None
        self.caller_only = caller_only
        self.outstanding_tasks = 0

    def add_outstanding(self) -> None:
        self.outstanding_tasks += 1


class _Node:
    def __init__(self, sequence_nr: int) -> None:
        self.sequence_nr = sequence_nr


# Repeated sequence numbers stand for AccumulateGrad nodes, which share the largest one.
@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 6), max_size=4), min_size=1, max_size=12))
def test_a_task_queue_pops_in_the_shared_queues_order(rounds):
    """Rounds of pushes, each followed by one pop, as a node that readies others does."""
    popped = {}
    for queue, task in ((ReadyQueue(), _Task(False)), (TaskQueue(), _Task(True))):
        order, pushed = [], 0
        for pushes in rounds:
            for sequence_nr in pushes:
                queue.push(task, _Node(sequence_nr), [pushed])  # the inputs name the push
                pushed += 1
            if len(queue):
                order.append(queue.pop()[4][0])
        while len(queue):
            order.append(queue.pop()[4][0])
        assert task.outstanding_tasks == pushed == len(order)
        popped[type(queue)] = order
    assert popped[TaskQueue] == popped[ReadyQueue]


def test_a_task_queue_refuses_nodes_of_a_failed_task_and_drops_them():
    queue, task, first = TaskQueue(), _Task(True), _Node(1)
    queue.push(task, first, [])
    queue.push(task, None, [])  # a wake-up stays
    task.exception = RuntimeError("failed")
    queue.push(task, _Node(2), [])
    assert queue.nodes_of(task) == [first] and len(queue) == 2
    queue.drop_tasks_of(task)
    assert len(queue) == 1 and queue.pop()[3] is None
    with pytest.raises(IndexError):
        queue.pop()
