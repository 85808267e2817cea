"""A student's job, end to end: web upload -> Celery -> real HTCondor pool -> outputs."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from condor_bridge import JobState as CondorState
from jobs import specs, submission
from jobs.bridge import get_bridge
from jobs.models import Job, JobState
from tests.conftest import script_upload
from tests.helpers import htcondor_copies, wait_for
from tests.kits.integration import upload
from tests.pipeline import wait_for_state

pytestmark = [pytest.mark.condor, pytest.mark.timeout(300)]

WRITES_A_FILE = """
import os, sys
print("training on", os.environ.get("CUDA_VISIBLE_DEVICES"))
os.makedirs("outputs", exist_ok=True)
with open("outputs/model.txt", "w") as f:
    f.write("weights:" + ",".join(sys.argv[1:]))
print("done")
"""


def condor_count(job: Job) -> int:
    """How many HTCondor jobs, queue plus history, carry this job's Nightshift id."""
    return len(htcondor_copies(get_bridge(), str(job.public_id)))


def test_a_script_that_writes_a_file_completes_and_the_file_downloads(web, live_pipeline):
    job = upload(web, WRITES_A_FILE, name="writes a file", arguments="--epochs=2\nlr 0.1")
    wait_for_state(job, {JobState.COMPLETED, JobState.FAILED})
    assert job.state == JobState.COMPLETED, job.events.all()
    assert job.exit_code == 0
    assert job.workstation
    wait_for(lambda: Job.objects.get(pk=job.pk).outputs_ready, timeout=60, what="outputs")
    response = web.get(reverse("jobs:output", args=[job.public_id, "outputs/model.txt"]))
    assert b"".join(response.streaming_content) == b"weights:--epochs=2,lr 0.1"
    stdout = web.get(reverse("jobs:log", args=[job.public_id, "stdout"]))
    assert b"done" in b"".join(stdout.streaming_content)
    kinds = list(job.events.values_list("kind", flat=True))
    assert kinds[:2] == ["created", "submitted"] and "completed" in kinds
    assert condor_count(job) == 1


def test_a_script_that_exits_3_fails_with_exit_code_3(web, live_pipeline):
    job = upload(web, "import sys\nprint('oops', file=sys.stderr)\nsys.exit(3)\n", name="exits 3")
    wait_for_state(job, {JobState.COMPLETED, JobState.FAILED})
    assert (job.state, job.exit_code) == (JobState.FAILED, 3)
    status = json.loads(web.get(reverse("jobs:status", args=[job.public_id])).content)
    assert "oops" in status["logs"]["stderr"]["text"]


def test_more_gpu_memory_than_any_machine_has_is_refused_with_the_reason(web, live_pipeline):
    data = {
        "name": "too big",
        "gpus": 1,
        "gpu_memory_gb": 200,
        "cpus": 1,
        "memory_gb": 0.25,
        "script": script_upload("print('never')\n"),
    }
    response = web.post(reverse("jobs:new"), data)
    assert response.status_code == 400
    assert "the largest GPU in the pool has 46.5 GB" in response.content.decode()
    assert not Job.objects.filter(name="too big").exists()


def test_a_job_no_machine_can_run_any_more_stays_idle_and_says_why(web, live_pipeline):
    # As if the only big-GPU workstation had left the pool after the job was accepted.
    user = get_user_model().objects.get(username="ada")
    job = submission.job_submit(
        user=user,
        spec=specs.JobSpec(name="too big", gpus=1, gpu_memory_gb=200, memory_mb=256),
        script=script_upload("print('never')\n"),
        check_pool=False,
    )
    wait_for(lambda: Job.objects.get(pk=job.pk).match_problem, timeout=60, what="match problem")
    job.refresh_from_db()
    assert job.state == JobState.IDLE
    page = web.get(reverse("jobs:detail", args=[job.public_id])).content.decode()
    assert "No workstation can run this job." in page
    assert "at least 200 GB" in page and "46.5 GB" in page
    web.post(reverse("jobs:cancel", args=[job.public_id]))


def test_a_two_gpu_job_lands_on_the_two_gpu_workstation(web, live_pipeline):
    # Long enough for a sync to see it running (the timeline names the GPU model then).
    script = "import os, time\nprint(os.environ['CUDA_VISIBLE_DEVICES'])\ntime.sleep(4)\n"
    job = upload(web, script, name="two gpus", gpus=2)
    wait_for_state(job, {JobState.COMPLETED, JobState.FAILED})
    assert job.state == JobState.COMPLETED
    assert job.workstation == "ws-volta"
    assert job.gpu_model == "Tesla V100-PCIE-16GB"
    assert job.events.get(kind="started").detail == "Running on ws-volta (Tesla V100-PCIE-16GB)"
    devices = (job.directory / "stdout.txt").read_text().strip().split(",")
    assert len(devices) == 2 and len(set(devices)) == 2


def test_cancel_ends_removed(web, live_pipeline):
    job = upload(web, "import time\nprint('started', flush=True)\ntime.sleep(300)\n", name="long")
    wait_for_state(job, {JobState.RUNNING})
    response = web.post(reverse("jobs:cancel", args=[job.public_id]))
    assert response.status_code == 302
    wait_for_state(job, {JobState.REMOVED}, timeout=60)
    assert "Cancelled by user" in job.events.last().detail
    assert job.events.filter(kind="cancel requested", actor__username="ada").exists()


def test_the_worker_killed_mid_submission_still_submits_exactly_once(web, live_pipeline):
    live_pipeline.kill_worker()
    live_pipeline.start_worker(NIGHTSHIFT_FAULT_PAUSE_AFTER_SUBMIT_S="30")
    job = upload(web, "print('survived')\n", name="survivor")
    # The schedd has the job, the portal has not recorded it: kill the worker now.
    wait_for(lambda: get_bridge().find(str(job.public_id)), timeout=60, what="the schedd submit")
    job.refresh_from_db()
    assert job.cluster_id is None
    live_pipeline.kill_worker()
    live_pipeline.start_worker()
    wait_for_state(job, {JobState.COMPLETED, JobState.FAILED}, timeout=180)
    assert job.state == JobState.COMPLETED
    assert condor_count(job) == 1
    assert "found already submitted" in job.events.get(kind="submitted").detail


HOSTILE_ARGUMENTS = [
    "$(HOME)",
    "$ENV(PATH)",
    "$RANDOM_CHOICE(a,b)",
    "$$(OpSys)",
    "a$$b",
    '+Owner = "root"',
    "queue 1000",
    'it\'s "quoted"',
    "'unbalanced",
    "\u202eright-to-left\u202c 日本語",
    "x" * 2000,
]


HOSTILE_ENV = '$(HOME) $$(OpSys) $ENV(PATH) "double" \'single\' +Owner = "root" \u202e日本'


def test_hostile_arguments_reach_the_script_literally_and_set_nothing_else(web, live_pipeline):
    script = "import json, os, sys\nprint(json.dumps([sys.argv[1:], os.environ.get('EVIL')]))\n"
    job = upload(
        web,
        script,
        name="hostile",
        arguments="\n".join(HOSTILE_ARGUMENTS),
        env_key=["EVIL"],
        env_value=[HOSTILE_ENV],
    )
    wait_for_state(job, {JobState.COMPLETED, JobState.FAILED})
    assert job.state == JobState.COMPLETED
    argv, evil = json.loads((job.directory / "stdout.txt").read_text())
    assert argv == HOSTILE_ARGUMENTS
    assert evil == HOSTILE_ENV
    observation = get_bridge().find(str(job.public_id))
    assert observation.state is CondorState.COMPLETED


def test_the_portal_runs_a_job_in_spool_mode_without_a_shared_folder(
    web, live_pipeline, settings, tmp_path
):
    # The job folder is outside the pool's root: the script must be spooled, the outputs
    # retrieved by the worker when the job ends.
    jobs_dir = tmp_path / "spooled-jobs"
    settings.JOBS_DIR, settings.JOB_DIR_UID = jobs_dir, None
    live_pipeline.kill_worker()
    live_pipeline.start_worker(
        CONDOR_FILE_MODE="spool", NIGHTSHIFT_JOBS_DIR=str(jobs_dir), NIGHTSHIFT_JOB_DIR_UID=""
    )
    try:
        job = upload(web, WRITES_A_FILE, name="spooled", arguments="spool")
        wait_for_state(job, {JobState.COMPLETED, JobState.FAILED})
        assert job.state == JobState.COMPLETED
        wait_for(lambda: Job.objects.get(pk=job.pk).outputs_ready, timeout=60, what="retrieve")
        response = web.get(reverse("jobs:output", args=[job.public_id, "outputs/model.txt"]))
        assert b"".join(response.streaming_content) == b"weights:spool"
        assert "done" in (job.directory / "stdout.txt").read_text()
    finally:
        live_pipeline.kill_worker()
        live_pipeline.start_worker()


def test_a_job_over_its_runtime_limit_is_held_and_the_page_says_why(web, live_pipeline):
    job = upload(web, "import time\ntime.sleep(600)\n", name="too slow", max_runtime_minutes=1)
    wait_for_state(job, {JobState.HELD}, timeout=180)
    assert job.hold_reason == "The job ran longer than its maximum runtime of 1 minute."
    page = web.get(reverse("jobs:detail", args=[job.public_id])).content.decode()
    assert "HTCondor is holding this job:" in page
    assert (job.hold_reason_code, job.hold_reason_subcode) == (3, 1)
    assert "It ran longer than its maximum runtime." in page
    assert job.events.filter(kind="held", detail=job.hold_reason).exists()
    web.post(reverse("jobs:cancel", args=[job.public_id]))
    wait_for_state(job, {JobState.REMOVED}, timeout=60)


def test_a_script_installs_its_requirements_from_the_package_index(web, live_pipeline):
    """A real package from the registry, not a bundled wheel: pip on the workstation trusts
    what the host trusts and uses its index settings, which the pool carries into its root."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    requirements = SimpleUploadedFile("requirements.txt", b"tomli-w==1.2.0\n")
    job = upload(
        web,
        "import tomli_w\nprint('dumped', tomli_w.dumps({'lr': 0.1}).strip())\n",
        name="from the index",
        requirements=requirements,
    )
    wait_for_state(job, {JobState.COMPLETED, JobState.FAILED}, timeout=240)
    stdout = (job.directory / "stdout.txt").read_text()
    install_log = (job.directory / ".nightshift" / "install.log").read_text()
    assert job.state == JobState.COMPLETED, (stdout, install_log)
    assert "dumped lr = 0.1" in stdout
    assert "+ tomli-w==1.2.0" in install_log or "reusing environment" in install_log


def test_a_project_with_requirements_installs_them_and_runs(web, live_pipeline):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.projects import project_with_requirements

    archive = SimpleUploadedFile("project.zip", project_with_requirements())
    job = upload(
        web,
        "",
        name="project",
        entry_command="python src/train.py --epochs 2",
        **{"script": archive},
    )
    wait_for_state(job, {JobState.COMPLETED, JobState.FAILED}, timeout=240)
    stdout = (job.directory / "stdout.txt").read_text()
    install_log = (job.directory / ".nightshift" / "install.log").read_text()
    assert job.state == JobState.COMPLETED, (stdout, install_log)
    assert 'hello from epochs = "2"' in stdout
    assert "environment requirements-" in install_log
    status = json.loads(web.get(reverse("jobs:status", args=[job.public_id])).content)
    assert "environment requirements-" in status["logs"]["install"]["text"]
    # What was installed is part of the job's reproducibility record.
    page = web.get(reverse("jobs:detail", args=[job.public_id])).content.decode()
    assert "tomli-w==1.2.0" in page
