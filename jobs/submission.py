"""Accepting a job: validate, check the quotas, record it, and hand it to HTCondor once."""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from audit.services import audit_record
from condor_bridge import (
    BridgeError,
    InvalidJobRequest,
    JobRequest,
    MatchSummary,
    PoolMachine,
    summarize_matches,
)
from condor_bridge.submit import description_text
from condor_bridge.types import check_text
from labs.models import Lab
from plumbing import metrics
from plumbing.tasks import enqueue

from .admission import QuotaExceeded, account_approved, quota_check, quota_lock, submissions_paused
from .archives import is_archive
from .bridge import get_bridge
from .models import Job, JobOutcome, JobState
from .schedulers import schedd_choose
from .software import SoftwareNotFound, software_lookup
from .specs import (
    PARAMETERS_VARIABLE,
    RESERVED_ENVIRONMENT,
    AccountNotApproved,
    JobSpec,
    JobSubmissionError,
    QuotaRefusal,
    SubmissionsPaused,
    job_request_of,
    new_seed,
    parse_entry_command,
    request_fields,
    request_from_json,
)
from .staging import (
    StagedFiles,
    content_hashes,
    install_helper,
    live_secret_install,
    safe_script_name,
    stage_files,
)
from .timeline import job_event_record

logger = logging.getLogger(__name__)

# The Celery options of a task that submits (jobs.tasks, experiments.tasks): a submission
# waits out a scheduler that is down for as long as it takes.
SUBMISSION_RETRIES = {
    "bind": True,
    "acks_late": True,
    "autoretry_for": (BridgeError,),
    "retry_backoff": 2,
    "retry_backoff_max": 60,
    "retry_jitter": True,
    "max_retries": None,
}


def lab_for_submission(*, user, lab_id: int | None) -> Lab | None:
    """The lab a job is charged to: the one asked for, which must be the user's, or their
    first lab, or none for a user in no lab."""
    labs = Lab.objects.filter(memberships__user=user)
    if lab_id is not None:
        lab = labs.filter(pk=lab_id).first()
        if lab is None:
            raise JobSubmissionError("lab", "You are not a member of that lab.")
        return lab
    return labs.order_by("memberships__joined_at", "name").first()


def _check_quota(user, lab: Lab | None, spec: JobSpec) -> int | None:
    """The runtime limit the quota sets for this job; QuotaRefusal when it does not fit."""
    try:
        return quota_check(user=user, lab=lab, gpus=spec.gpus, max_runtime_s=spec.max_runtime_s)
    except QuotaExceeded as exc:
        raise QuotaRefusal(exc.field or "quota", exc.message) from None


def job_validate_request(*, user, spec: JobSpec, script_name: str = "train.py") -> JobRequest:
    """The JobRequest `spec` would become; raises JobSubmissionError naming the field."""
    return job_validate_runs(user=user, specs=[spec], script_name=script_name)[0]


def job_validate_runs(
    *, user, specs: list[JobSpec], script_name: str = "train.py"
) -> list[JobRequest]:
    """The JobRequests of many runs of one job that differ only in their names, arguments,
    environment values and entry commands (a sweep's), each checked as a job would be; what
    needs the database (the lab, the software) is looked up once, from the first."""
    first = specs[0]
    if not first.name.strip():
        raise JobSubmissionError("name", "Give the job a name.")
    if first.finish_by is not None:
        check_deadline(first)
    python, container_image = first.python, first.container_image
    if first.software:
        try:
            choice = software_lookup(user, first.software)
        except SoftwareNotFound as exc:
            raise JobSubmissionError("software_environment", str(exc)) from None
        python = choice.python or python
        container_image = choice.container_image or container_image
    # The lab's accounting group too: the preview shows it, and reservations go by it.
    lab = lab_for_submission(user=user, lab_id=first.lab_id)
    requests = []
    for spec in specs:
        if not spec.name.strip():
            raise JobSubmissionError("name", "Give the job a name.")
        for key in spec.environment:
            if key.startswith("NIGHTSHIFT_") or key in RESERVED_ENVIRONMENT:
                raise JobSubmissionError(
                    "environment", f"{key} is set by Nightshift; choose another name."
                )
        if first.software:
            spec = dataclasses.replace(spec, python=python, container_image=container_image)
        try:
            check_text("name", spec.name, max_length=200)
            if spec.entry_command:
                check_text("entry_command", spec.entry_command, max_length=4096)
            requests.append(
                request_from_json(
                    request_fields(spec, script_name=script_name, user=user, lab=lab),
                    job_id="validation",
                    job_dir=str(settings.JOBS_DIR),
                )
            )
        except InvalidJobRequest as exc:
            raise JobSubmissionError(exc.field, exc.message) from exc
    return requests


def check_deadline(spec: JobSpec) -> None:
    """A deadline still to come, and one the maximum runtime alone does not overrun."""
    now = timezone.now()
    if spec.finish_by <= now + timedelta(minutes=5):
        raise JobSubmissionError("finish_by", "Choose a time to finish by that is still to come.")
    if spec.max_runtime_s and now + timedelta(seconds=spec.max_runtime_s) > spec.finish_by:
        ends = timezone.localtime(now + timedelta(seconds=spec.max_runtime_s))
        raise JobSubmissionError(
            "finish_by",
            f"It cannot finish by then: its maximum runtime alone, started now, "
            f"ends at {ends:%a %d %b %H:%M}.",
        )


PREVIEW_JOB_ID = "00000000-0000-4000-8000-000000000000"


def job_preview_description(*, user, spec: JobSpec, uploaded_name: str = "train.py") -> str:
    """The exact submit description `spec` becomes (the job's own id is given at submit)."""
    if is_archive(uploaded_name) and spec.entry_command:
        script_name, entry_arguments = parse_entry_command(spec.entry_command)
        spec = dataclasses.replace(spec, arguments=[*entry_arguments, *spec.arguments])
        # The archive's own top-level names are known once it is unpacked.
        extra = {"input_files": ["project"]}
    else:
        script_name, extra = safe_script_name(uploaded_name), {}
    job_validate_request(user=user, spec=spec)
    stored = request_fields(spec, script_name=script_name, user=user, **extra)
    request = request_from_json(
        stored, job_id=PREVIEW_JOB_ID, job_dir=str(settings.JOBS_DIR / PREVIEW_JOB_ID)
    )
    description = get_bridge().description(request)
    return "\n".join(f"{key} = {value}" for key, value in description.items()) + "\nqueue\n"


def job_match_summary(*, user, spec: JobSpec) -> MatchSummary | None:
    """How many workstations could run `spec`, and are free now; None if the pool is down."""
    return request_match_summary(job_validate_request(user=user, spec=spec))


def job_match_answer(*, user, spec: JobSpec) -> dict | None:
    """The form's live answer: what matches `spec` (MatchSummary's fields) and what other
    apps add (match_extras), from one pool query; None if the pool is down."""
    request = job_validate_request(user=user, spec=spec)
    try:
        machines = get_bridge().pool_machines()
    except BridgeError:
        return None
    summary = summarize_matches(request, machines)
    extras = match_extras(user=user, request=request, machines=machines)
    return {**dataclasses.asdict(summary), **extras}


def request_match_summary(request: JobRequest) -> MatchSummary | None:
    try:
        machines = get_bridge().pool_machines()
    except BridgeError:
        return None
    return summarize_matches(request, machines)


def check_pool_can_run(request: JobRequest) -> None:
    """Refuse a request that no workstation in the pool could ever run, saying why. When
    the pool cannot be asked it passes: the job waits, and its page explains once it answers."""
    summary = request_match_summary(request)
    if summary is not None and not summary.can_ever_run:
        raise JobSubmissionError(
            summary.blocking_field or "gpus",
            f"{summary.reason} Change the request so that a workstation can run it.",
        )


def job_request_fill(
    job: Job,
    spec: JobSpec,
    staged: StagedFiles,
    *,
    entry_arguments: list[str],
    input_files: list[str],
    user,
    lab: Lab | None,
    remove_after_s: int | None,
    seed: int,
) -> None:
    """What HTCondor is asked for a job (or one run of a sweep, a matrix or a study), from
    its spec and its staged files: the entry command's arguments before the spec's own.
    Checked here as the bridge will read it, so that a refusal names the field."""
    job.request = request_fields(
        dataclasses.replace(spec, arguments=[*entry_arguments, *spec.arguments]),
        script_name=staged.script_name,
        user=user,
        input_files=input_files,
        install_requirements=staged.install_requirements,
        lab=lab,
        remove_after_s=remove_after_s,
        seed=seed,
        software=staged.software,
        datasets=staged.datasets,
    )
    try:
        job_request_of(job)
    except InvalidJobRequest as exc:
        raise JobSubmissionError(exc.field, exc.message) from exc


def check_may_submit(user, *, script, copy_from: Job | None) -> None:
    """An approved account, and files to run: an upload, or a job of the user's to copy; and
    a portal that is not drained for maintenance."""
    paused = submissions_paused()
    if paused is not None:
        raise SubmissionsPaused("drain", paused)
    if not account_approved(user):
        raise AccountNotApproved(
            "account",
            "Your account waits for approval by a lab lead or an administrator; "
            "you can submit jobs once it is approved.",
        )
    if copy_from is not None and copy_from.owner_id != user.pk:
        raise JobSubmissionError("script", "That job is not yours to copy.")
    if copy_from is None and script is None:
        raise JobSubmissionError("script", "Choose a Python script or a project archive to upload.")


def job_submit(
    *,
    user,
    spec: JobSpec,
    script: UploadedFile | None = None,
    copy_from: Job | None = None,
    requirements: UploadedFile | None = None,
    check_pool: bool = True,
    parameters: dict | None = None,
    seed: int | None = None,
    reproduces: Job | None = None,
) -> Job:
    """Accept a job: store its files, record it, and queue its submission to HTCondor.

    The files are an uploaded script, an uploaded project archive (with spec's entry
    command), or those of `copy_from`, an earlier job of the same user (clone, re-run).
    A request that no workstation in the pool could ever run is refused with the
    reason; when the pool cannot be asked, the job is accepted and waits, and the job
    page explains it once the pool answers.
    """
    check_may_submit(user, script=script, copy_from=copy_from)
    request = job_validate_request(user=user, spec=spec)
    lab = lab_for_submission(user=user, lab_id=spec.lab_id)
    _check_quota(user, lab, spec)
    if check_pool:
        check_pool_can_run(request)

    job = Job(
        owner=user,
        name=spec.name.strip(),
        notify_by_email=spec.notify_by_email,
        lab=lab,
        gpus=spec.gpus,
        parameters=parameters or {},
        reproduces=reproduces,
        schedd=schedd_choose(lab=lab),
    )
    job.output_dir = str(settings.JOBS_DIR / str(job.public_id))
    directory = job.directory
    directory.mkdir(parents=True, exist_ok=False)
    try:
        staged = stage_files(
            directory,
            spec=spec,
            script=script,
            copy_from=copy_from,
            requirements=requirements,
            user=user,
        )
        job.source = {**staged.source, "sha256": content_hashes(directory, staged)}
        environment = dict(spec.environment)
        if parameters:
            environment[PARAMETERS_VARIABLE] = json.dumps(parameters)
        job_request_fill(
            job,
            dataclasses.replace(spec, environment=environment),
            staged,
            entry_arguments=staged.entry_arguments,
            input_files=staged.input_files,
            user=user,
            lab=lab,
            remove_after_s=_check_quota(user, lab, spec),
            seed=new_seed() if seed is None else seed,
        )
        install_helper(directory, software=staged.software, datasets=staged.datasets)
        if "notebook" in spec.live_services:
            job.live_secret = live_secret_install(directory)
        with transaction.atomic():
            # Checked again with the quota locked: a racing submission may have used it.
            quota_lock(user, lab)
            _check_quota(user, lab, spec)
            job.save()
            job_event_record(job, "created", staged.origin, actor=user)
            audit_record(
                action="job.submit",
                actor=user,
                target=job,
                detail=f"{staged.origin}; lab {lab.name if lab else 'none'}",
            )
            job_pk = job.pk
            transaction.on_commit(lambda: job_enqueue_submit(job_pk))
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return job


def job_enqueue_submit(job_pk: int) -> None:
    enqueue("jobs.tasks.submit_job", job_pk)


@dataclass(frozen=True)
class BatchSubmitter:
    """An app that submits some jobs itself, many as one HTCondor cluster (experiments'
    sweeps). `owns()` selects its jobs, which the sync then leaves alone; `resend_silent`
    sends again, whole, its batches that no submission task has touched since before the
    filter `silent` allows, and says how many it sent."""

    owns: Callable[[], Q]
    resend_silent: Callable[[Q, datetime], int]


_batch_submitters: list[BatchSubmitter] = []


def batch_submitter_register(submitter: BatchSubmitter) -> None:
    """Called from the submitting app's AppConfig.ready()."""
    if submitter not in _batch_submitters:
        _batch_submitters.append(submitter)


def batch_submitters() -> tuple[BatchSubmitter, ...]:
    return tuple(_batch_submitters)


# What other apps add to the form's live answer (jobs.views.job_match): each is called with
# the user, the request being drafted and the pool's machines (already queried for the
# match), and returns fields to merge (a predicted start).
_match_extras: list[Callable[..., dict]] = []


def match_extra_register(extra: Callable[..., dict]) -> None:
    """Called from the app's AppConfig.ready()."""
    if extra not in _match_extras:
        _match_extras.append(extra)


def match_extras(*, user, request: JobRequest, machines: list[PoolMachine]) -> dict:
    answer: dict = {}
    for extra in _match_extras:
        answer.update(extra(user=user, request=request, machines=machines))
    return answer


def job_submit_to_pool(job_pk: int) -> Job:
    """Hand a queued job to HTCondor, exactly once. Transient failures re-raise for retry.

    The attempt is committed before the schedd is contacted. A first attempt therefore
    knows nothing can be in the schedd yet and skips the lookup; any later attempt (after
    a crash, a killed worker or a redelivered task) looks the job up and adopts it.
    """
    with transaction.atomic():
        job = Job.objects.select_for_update(no_key=True).get(pk=job_pk)
        if job.is_submitted or job.is_final:
            return job
        job.submit_attempts += 1
        job.submit_requested_at = timezone.now()
        job.save(update_fields=["submit_attempts", "submit_requested_at"])
        first_attempt = job.submit_attempts == 1

    bridge = get_bridge(job.schedd)
    transient_error = None
    with transaction.atomic():
        job = Job.objects.select_for_update(no_key=True).get(pk=job_pk)
        if job.is_submitted or job.is_final:
            return job
        try:
            result = bridge.submit(
                job_request_of(job),
                check_existing=not first_attempt,
                submitted_after=job.created_at,
            )
        except BridgeError as exc:
            job.last_error = str(exc)
            if exc.transient:
                job.status_detail = "The scheduler is not answering; Nightshift keeps trying."
                job.save(update_fields=["last_error", "status_detail"])
                transient_error = exc
                metrics.submission_done(kind="job", outcome="retrying")
            else:
                _fail_before_submission(job, "HTCondor refused the job.", str(exc))
                metrics.submission_done(kind="job", outcome="refused")
                return job
        except InvalidJobRequest as exc:
            _fail_before_submission(job, "The job request is invalid.", str(exc))
            metrics.submission_done(kind="job", outcome="invalid")
            return job
        else:
            if settings.FAULT_PAUSE_AFTER_SUBMIT_S:
                time.sleep(settings.FAULT_PAUSE_AFTER_SUBMIT_S)
            job.cluster_id, job.proc_id = result.cluster_id, result.proc_id
            job.state, job.status_detail = JobState.IDLE, ""
            job.submitted_at = timezone.now()
            job.submit_description = description_text(bridge.description(job_request_of(job)))
            job.save()
            how = "found already submitted" if result.adopted else "submitted"
            job_event_record(job, "submitted", f"HTCondor job {job.condor_id} ({how})")
            metrics.submission_done(
                kind="job",
                outcome="submitted",
                waited_s=(job.submitted_at - job.created_at).total_seconds(),
            )
    if transient_error is not None:
        raise transient_error
    return job


def _fail_before_submission(job: Job, detail: str, error: str) -> None:
    job.state, job.finished_at = JobState.FAILED, timezone.now()
    job.outcome = JobOutcome.FAILED
    job.status_detail, job.last_error = detail, error
    job.save()
    job_event_record(job, "rejected", error)
