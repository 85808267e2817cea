"""Queue a Celery task by its registered name.

Services sit below the thin task modules that call them, so a service that queues a task
looks it up by name instead of importing it: no import loop, and the task still runs in
place where Celery is told to (task_always_eager). Each app's AppConfig.ready() imports its
tasks module, so every name is registered in every process.
"""

from __future__ import annotations

from celery import current_app


def enqueue(task_name: str, *args) -> None:
    current_app.tasks[task_name].delay(*args)
