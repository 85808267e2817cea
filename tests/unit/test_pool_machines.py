"""Slot ads summed into workstations, as the collector reports them."""

from condor_bridge.machines import machines_from_slot_ads


def slot(state, *, cpus=4, gpus=2, free_cpus=4, free_gpus=2, dynamic=False, name="slot1@ws-a@vm"):
    return {
        "Name": name,
        "State": state,
        "PartitionableSlot": not dynamic,
        "DynamicSlot": dynamic,
        "TotalSlotCpus": cpus,
        "Cpus": free_cpus,
        "TotalSlotMemory": 8192,
        "Memory": 8192,
        "TotalSlotGPUs": gpus,
        "GPUs": free_gpus,
        "GPUs_DeviceName": "Tesla V100",
        "GPUs_GlobalMemoryMb": 16000,
        "GPUs_Capability": 7.0,
    }


def test_an_unclaimed_partitionable_slot_is_all_free():
    (machine,) = machines_from_slot_ads([slot("Unclaimed")])
    assert (machine.state, machine.free_gpus, machine.free_cpus) == ("Unclaimed", 2, 4)


def test_a_workstation_whose_owner_is_back_has_nothing_free():
    (machine,) = machines_from_slot_ads([slot("Owner")])
    assert (machine.state, machine.free_gpus, machine.free_cpus, machine.total_gpus) == (
        "Owner",
        0,
        0,
        2,
    )


def test_what_jobs_hold_is_not_free():
    ads = [
        slot("Unclaimed", free_cpus=3, free_gpus=1),
        slot(
            "Claimed",
            cpus=1,
            gpus=1,
            free_cpus=1,
            free_gpus=1,
            dynamic=True,
            name="slot1_1@ws-a@vm",
        ),
    ]
    (machine,) = machines_from_slot_ads(ads)
    assert (machine.state, machine.free_gpus, machine.total_gpus) == ("Claimed", 1, 2)
