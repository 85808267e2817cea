"""The pool's workstations from the collector's slot ads: what each has, and what is free.
Pure: the ads are read as mappings (htcondor2's, or plain dicts in the tests)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .states import workstation_of
from .types import GpuModel, LendingTerms, PoolMachine

MACHINE_PROJECTION = [
    "Name",
    "Machine",
    "State",
    "Activity",
    "PartitionableSlot",
    "DynamicSlot",
    "Cpus",
    "TotalSlotCpus",
    "Memory",
    "TotalSlotMemory",
    "GPUs",
    "TotalSlotGPUs",
    "GPUs_DeviceName",
    "GPUs_GlobalMemoryMb",
    "GPUs_Capability",
    "HasContainer",
    "HasDocker",
    "HasSingularity",
    # The owners' terms, as the kit's cron publishes them (docs/lending.md).
    "NightshiftLendOpen",
    "NightshiftLendGpus",
    "NightshiftLendMemory",
    "NightshiftLendLabs",
    "NightshiftReclaimBy",
]


def _whole(value: Any) -> int | None:
    # htcondor2 reads `undefined` as classad2.Value.Undefined, an IntEnum (equal to 2): only
    # a plain int is a number here.
    return value if type(value) is int else None


def terms_from_slot_ad(ad: Any) -> LendingTerms:
    """The owners' terms a slot ad carries; a value of the wrong type counts as unset."""
    labs = ad.get("NightshiftLendLabs")
    return LendingTerms(
        open=ad.get("NightshiftLendOpen") is not False,
        gpus=_whole(ad.get("NightshiftLendGpus")),
        memory_mb=_whole(ad.get("NightshiftLendMemory")),
        accounting_groups=tuple(g.strip() for g in labs.split(",") if g.strip())
        if isinstance(labs, str)
        else None,
        reclaim_by=_whole(ad.get("NightshiftReclaimBy")),
    )


def _machine_name(slot_ad: Any) -> str:
    return workstation_of(str(slot_ad.get("Name", ""))) or str(slot_ad.get("Machine", ""))


def machines_from_slot_ads(ads: Iterable[Any]) -> list[PoolMachine]:
    """Sum slot ads per workstation: partitionable slots hold what is still free."""
    grouped: dict[str, list[Any]] = {}
    for ad in ads:
        if ad.get("DynamicSlot") is True:
            continue  # its resources are already counted out of the partitionable slot
        if "Cpus" not in ad:
            continue  # a startd daemon ad, not a slot
        grouped.setdefault(_machine_name(ad), []).append(ad)
    machines = []
    for name, slots in sorted(grouped.items()):
        total_cpus = free_cpus = total_memory = free_memory = total_gpus = free_gpus = 0
        gpu = None
        states = set()
        runs_containers = any(
            slot.get(attr) is True
            for slot in slots
            for attr in ("HasContainer", "HasDocker", "HasSingularity")
        )
        for slot in slots:
            partitionable = slot.get("PartitionableSlot") is True
            cpus = int(slot.get("TotalSlotCpus") or slot.get("Cpus") or 0)
            memory = int(slot.get("TotalSlotMemory") or slot.get("Memory") or 0)
            gpus = int(slot.get("TotalSlotGPUs") or slot.get("GPUs") or 0)
            # A slot whose owner has it back (state Owner) has resources, none of them free.
            unclaimed = slot.get("State") == "Unclaimed" or (
                partitionable and slot.get("State") != "Owner"
            )
            total_cpus += cpus
            total_memory += memory
            total_gpus += gpus
            if unclaimed:
                free_cpus += int(slot.get("Cpus") or 0)
                free_memory += int(slot.get("Memory") or 0)
                free_gpus += int(slot.get("GPUs") or 0)
            if gpus and slot.get("GPUs_DeviceName"):
                gpu = GpuModel(
                    name=str(slot.get("GPUs_DeviceName")),
                    memory_mb=int(slot.get("GPUs_GlobalMemoryMb") or 0),
                    capability=float(slot.get("GPUs_Capability") or 0),
                )
            states.add(str(slot.get("State", "")))
        state = "Claimed" if free_cpus < total_cpus else ("Unclaimed" if states else "")
        if states - {"Unclaimed", "Claimed"}:
            state = sorted(states - {"Unclaimed", "Claimed"})[0]
        machines.append(
            PoolMachine(
                name=name,
                state=state,
                total_cpus=total_cpus,
                free_cpus=free_cpus,
                total_memory_mb=total_memory,
                free_memory_mb=free_memory,
                total_gpus=total_gpus,
                free_gpus=free_gpus,
                gpu=gpu,
                runs_containers=runs_containers,
                terms=terms_from_slot_ad(
                    next((slot for slot in slots if slot.get("PartitionableSlot")), slots[0])
                ),
            )
        )
    return machines
