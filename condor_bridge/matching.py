"""Which workstations could run a request: the same rules HTCondor's matchmaker applies."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .types import JobRequest, PoolMachine


@dataclass(frozen=True)
class MatchSummary:
    machines_total: int
    machines_matching: int
    machines_free_now: int
    gpus_matching: int
    gpus_free_now: int
    reason: str  # why nothing matches; empty when something does
    busy_reason: str = ""  # why nothing that matches is free right now
    blocking_field: str = ""  # the JobRequest field to change when nothing matches

    @property
    def can_ever_run(self) -> bool:
        return self.machines_matching > 0


def machine_fits(request: JobRequest, machine: PoolMachine) -> bool:
    """Could `machine` run `request` when it is empty?"""
    if request.cpus > machine.total_cpus or request.memory_mb > machine.total_memory_mb:
        return False
    if request.container_image and not machine.runs_containers:
        return False
    if request.gpus == 0:
        return True
    if machine.gpu is None or machine.total_gpus < request.gpus:
        return False
    if request.gpu_memory_gb is not None and machine.gpu.memory_mb < round(
        request.gpu_memory_gb * 1024
    ):
        return False
    return request.gpu_capability is None or machine.gpu.capability >= request.gpu_capability


def machine_free_for(request: JobRequest, machine: PoolMachine) -> bool:
    return (
        machine_fits(request, machine)
        and machine.free_cpus >= request.cpus
        and machine.free_memory_mb >= request.memory_mb
        and machine.free_gpus >= request.gpus
    )


def _why_nothing_matches(request: JobRequest, machines: list[PoolMachine]) -> tuple[str, str]:
    """(the request field to change, why nothing matches), in the words a student uses."""
    if not machines:
        return "", "No workstation is in the pool right now."
    if request.container_image and not any(m.runs_containers for m in machines):
        return "container_image", (
            "This environment runs in a container, and no workstation in the pool runs "
            "containers. Choose another environment."
        )
    gpu_machines = [m for m in machines if m.gpu is not None and m.total_gpus > 0]
    if request.gpus and not gpu_machines:
        return "gpus", "No workstation in the pool has a GPU."
    if request.gpus and max(m.total_gpus for m in gpu_machines) < request.gpus:
        most = max(m.total_gpus for m in gpu_machines)
        return "gpus", f"You asked for {request.gpus} GPUs; no workstation has more than {most}."
    if request.gpu_memory_gb is not None and gpu_machines:
        largest = max(m.gpu.memory_mb for m in gpu_machines if m.gpu)
        if largest < round(request.gpu_memory_gb * 1024):
            return "gpu_memory_gb", (
                f"You asked for a GPU with at least {request.gpu_memory_gb:g} GB; "
                f"the largest GPU in the pool has {largest / 1024:.1f} GB."
            )
    if request.gpu_capability is not None and gpu_machines:
        best = max(m.gpu.capability for m in gpu_machines if m.gpu)
        if best < request.gpu_capability:
            return "gpu_capability", (
                f"You asked for compute capability {request.gpu_capability:g} or newer; "
                f"the newest GPU in the pool has {best:g}."
            )
    most_memory = max(m.total_memory_mb for m in machines)
    if request.memory_mb > most_memory:
        return "memory_mb", (
            f"You asked for {request.memory_mb} MB of memory; "
            f"no workstation has more than {most_memory} MB."
        )
    most_cpus = max(m.total_cpus for m in machines)
    if request.cpus > most_cpus:
        return (
            "cpus",
            f"You asked for {request.cpus} CPUs; no workstation has more than {most_cpus}.",
        )
    return (
        "",
        "No single workstation has all of the GPUs, GPU memory, CPUs and memory you asked for.",
    )


def _why_all_busy(fitting: list[PoolMachine]) -> str:
    count = len(fitting)
    if all(m.state == "Owner" for m in fitting):
        which = (
            "The matching workstation is"
            if count == 1
            else f"All {count} matching workstations are"
        )
        return f"{which} in use by their owners right now."
    if count == 1:
        return f"1 matching workstation ({fitting[0].name}), busy right now."
    both = "both" if count == 2 else "all"
    return f"{count} matching workstations, {both} busy right now."


def summarize_matches(request: JobRequest, machines: Iterable[PoolMachine]) -> MatchSummary:
    machines = list(machines)
    fitting = [m for m in machines if machine_fits(request, m)]
    free = [m for m in fitting if machine_free_for(request, m)]
    field, reason = ("", "") if fitting else _why_nothing_matches(request, machines)
    return MatchSummary(
        busy_reason=_why_all_busy(fitting) if fitting and not free else "",
        blocking_field=field,
        machines_total=len(machines),
        machines_matching=len(fitting),
        machines_free_now=len(free),
        gpus_matching=sum(m.total_gpus for m in fitting) if request.gpus else 0,
        gpus_free_now=sum(m.free_gpus for m in free) if request.gpus else 0,
        reason=reason,
    )
