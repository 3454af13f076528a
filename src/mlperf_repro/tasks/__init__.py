"""Benchmark tasks (the rules table's ``task``): see :mod:`.registry`.

A new task is a module here that calls :func:`register_task`, imported below."""

from __future__ import annotations

from . import llm, text_to_video
from .registry import (
    TASKS,
    Evaluator,
    Task,
    evaluator_names,
    find_evaluator,
    known_tasks,
    register_task,
    task_for,
    task_named,
)

__all__ = [
    "TASKS",
    "Evaluator",
    "Task",
    "evaluator_names",
    "find_evaluator",
    "known_tasks",
    "llm",
    "register_task",
    "task_for",
    "task_named",
    "text_to_video",
]
