"""Live sessions: a running job's own web services (TensorBoard, a served endpoint), opened
through the portal by the job's owner alone, unless they share it."""
