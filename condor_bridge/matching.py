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
    """Could `machine` run `request` when it is empty, on its owners' terms?"""
    return hardware_fits(request, machine) and terms_allow(request, machine)


def terms_allow(request: JobRequest, machine: PoolMachine) -> bool:
    """Do its owners lend what `request` asks for, to its lab (whenever they lend)?"""
    terms = machine.terms
    if terms.accounting_groups is not None and (
        request.accounting_group not in terms.accounting_groups
    ):
        return False
    if terms.gpus is not None and request.gpus > terms.gpus:
        return False
    return terms.memory_mb is None or request.memory_mb <= terms.memory_mb


def hardware_fits(request: JobRequest, machine: PoolMachine) -> bool:
    """Has `machine` what `request` asks for, whatever its owners' terms?"""
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
    terms = machine.terms
    # What its owners lend at once counts what is lent already, as the kit's START does.
    lent_gpus = machine.total_gpus - machine.free_gpus
    lent_memory = machine.total_memory_mb - machine.free_memory_mb
    return (
        machine_fits(request, machine)
        and terms.lent_now
        and machine.free_cpus >= request.cpus
        and machine.free_memory_mb >= request.memory_mb
        and machine.free_gpus >= request.gpus
        and (terms.gpus is None or lent_gpus + request.gpus <= terms.gpus)
        and (terms.memory_mb is None or lent_memory + request.memory_mb <= terms.memory_mb)
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
    hardware = [m for m in machines if hardware_fits(request, m)]
    if hardware:
        return _why_terms_rule_out(request, hardware)
    return (
        "",
        "No single workstation has all of the GPUs, GPU memory, CPUs and memory you asked for.",
    )


def _why_terms_rule_out(request: JobRequest, hardware: list[PoolMachine]) -> tuple[str, str]:
    """Workstations have what it asks for, and their owners' terms rule each of them out."""
    which = (
        "The workstation that could run it is"
        if len(hardware) == 1
        else (f"The {len(hardware)} workstations that could run it are")
    )
    lab_ok = [
        m
        for m in hardware
        if m.terms.accounting_groups is None
        or request.accounting_group in m.terms.accounting_groups
    ]
    if not lab_ok:
        return "", f"{which} lent by their owners to other labs only."
    gpus = [m.terms.gpus for m in lab_ok if m.terms.gpus is not None]
    if request.gpus and len(gpus) == len(lab_ok) and max(gpus) < request.gpus:
        return "gpus", (
            f"You asked for {request.gpus} GPUs; the owners of the workstations that have "
            f"them lend at most {max(gpus)} at once."
        )
    memory = [m.terms.memory_mb for m in lab_ok if m.terms.memory_mb is not None]
    if len(memory) == len(lab_ok) and max(memory) < request.memory_mb:
        return "memory_mb", (
            f"You asked for {request.memory_mb} MB of memory; the owners of the workstations "
            f"that have it lend at most {max(memory)} MB at once."
        )
    return "", f"{which} ruled out by their owners' lending terms."


def _why_all_busy(fitting: list[PoolMachine]) -> str:
    count = len(fitting)
    if all(not m.terms.lent_now for m in fitting):
        which = (
            "The matching workstation's owners are"
            if count == 1
            else f"The owners of all {count} matching workstations are"
        )
        it = "it" if count == 1 else "them"
        return (
            f"{which} not lending {it} right now (outside their hours, paused, or they asked "
            f"for {it} back): the job waits for their terms."
        )
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
