"""What the experiments app offers other apps: a sweep sent (again) to the pool."""

from .sweeps import sweep_enqueue_submit as sweep_enqueue_submit
