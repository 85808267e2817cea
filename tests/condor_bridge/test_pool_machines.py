"""Slot ads summed into workstations, as the collector reports them."""

import classad2

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


def test_the_owners_terms_are_read_from_the_slot_ad():
    ad = slot("Unclaimed") | {
        "NightshiftLendOpen": False,
        "NightshiftLendGpus": 1,
        "NightshiftLendMemory": 4096,
        "NightshiftLendLabs": "group_vision, group_nlp",
        "NightshiftReclaimBy": 1796374860,
    }
    (machine,) = machines_from_slot_ads([ad])
    terms = machine.terms
    assert (terms.open, terms.gpus, terms.memory_mb) == (False, 1, 4096)
    assert terms.accounting_groups == ("group_vision", "group_nlp")
    assert terms.reclaim_by == 1796374860 and not terms.lent_now


def test_terms_the_kit_publishes_as_undefined_restrict_nothing():
    # As the collector gives them: htcondor2 reads `undefined` as an IntEnum equal to 2.
    ad = classad2.ClassAd(
        "[NightshiftLendOpen = undefined; NightshiftLendGpus = undefined;"
        " NightshiftLendMemory = undefined; NightshiftLendLabs = undefined;"
        " NightshiftReclaimBy = undefined]"
    )
    assert ad.get("NightshiftLendMemory") == 2
    (machine,) = machines_from_slot_ads([slot("Unclaimed") | dict(ad.items())])
    assert not machine.terms.restricted and machine.terms.lent_now


def test_terms_of_the_wrong_type_restrict_nothing():
    ad = slot("Unclaimed") | {"NightshiftLendGpus": "1", "NightshiftLendMemory": True}
    (machine,) = machines_from_slot_ads([ad])
    assert not machine.terms.restricted
