"""A job takes over an already claimed slot (the schedd hands a finished job's claim to the
same submitter's next idle job) only if that slot holds exactly the GPUs the job asks for;
the slots the negotiator offers fresh are not concerned. Evaluated by HTCondor's own ClassAd
library, with the slot ads as the personal pool's startds publish them."""

import classad2
import pytest

from condor_bridge import FileMode, JobRequest, build_submit_description
from condor_bridge.submit import reused_slot_requirement

PARTITIONABLE = {
    "PartitionableSlot": True,
    "Cpus": 4,
    "Memory": 8192,
    "GPUs": 0,
    "TotalSlotGPUs": 2,
}
STATIC_WITH_A_GPU = {"Cpus": 1, "Memory": 2048, "GPUs": 1, "TotalSlotGPUs": 1}


def claimed(gpus):
    return {"DynamicSlot": True, "Cpus": 1, "Memory": 256, "GPUs": gpus, "TotalSlotGPUs": gpus}


def slot_takes(job_gpus, slot):
    job = classad2.ClassAd({"RequestGPUs": job_gpus})
    job["Requirements"] = classad2.ExprTree(reused_slot_requirement(job_gpus))
    return classad2.ClassAd(slot).matches(job)


def test_a_job_without_gpus_is_not_handed_a_claimed_slot_that_holds_one():
    assert not slot_takes(0, claimed(1))
    assert not slot_takes(0, claimed(2))
    assert slot_takes(0, claimed(0))


def test_a_gpu_job_is_handed_a_claimed_slot_only_with_exactly_its_gpus():
    assert slot_takes(1, claimed(1))
    assert not slot_takes(1, claimed(2))
    assert not slot_takes(2, claimed(1))


def test_a_claimed_slot_of_a_pool_without_gpus_takes_a_job_without_gpus():
    slot = claimed(0)
    del slot["GPUs"], slot["TotalSlotGPUs"]
    assert slot_takes(0, slot)


@pytest.mark.parametrize(
    "slot", [PARTITIONABLE, STATIC_WITH_A_GPU], ids=["partitionable", "static"]
)
@pytest.mark.parametrize("job_gpus", [0, 1, 2])
def test_slots_offered_fresh_are_not_concerned(slot, job_gpus):
    assert slot_takes(job_gpus, slot)


@pytest.mark.parametrize("gpus", [0, 1, 2])
def test_every_submission_carries_it(gpus, tmp_path):
    request = JobRequest(
        job_id="00000000-0000-4000-8000-000000000000",
        job_dir=str(tmp_path),
        script_name="train.py",
        gpus=gpus,
    )
    description = build_submit_description(request, mode=FileMode.SHARED)
    assert reused_slot_requirement(gpus) in description["requirements"]
