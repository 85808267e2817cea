"""Hyperparameter optimisation: an Optuna study whose trials are Nightshift jobs.

Optuna decides (samplers TPE or random; pruners median or successive halving); Nightshift
runs. The study's state lives in the portal's PostgreSQL twice over: Optuna's own tables
(its RDB storage) and the study's sweep and jobs. `study_advance` is idempotent and runs on
every beat tick, so that a study survives restarts of the web, the workers and beat:

1. each trial job that ended is told to Optuna, with the last value of the objective it
   logged (`nightshift.log`), or as pruned or failed;
2. each running trial's new intermediate values are reported, and a trial Optuna would
   prune is asked to stop (`nightshift.should_stop()`), then removed after a grace period;
3. the budget is checked: N trials, GPU-hours, a deadline;
4. new trials are asked for until P run at once.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import optuna
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Sum
from django.utils import timezone
from sqlalchemy.pool import NullPool

from accounting.models import UsageRecord
from audit.services import audit_record
from condor_bridge import BridgeError
from condor_bridge.submit import HELPER_DIR, METRICS_FILE
from jobs.models import FINAL_STATES, Job, JobEvent, JobOutcome, JobState
from jobs.selectors import job_metrics
from jobs.services import (
    CONTROL_DIR,
    JobActionError,
    JobSpec,
    JobSubmissionError,
    QuotaExceeded,
    StagedFiles,
    check_may_submit,
    content_hashes,
    get_bridge,
    install_helper,
    job_enqueue_submit,
    job_validate_request,
    quota_check,
    schedd_choose,
    stage_files,
)
from plumbing.tasks import enqueue

from . import parameters
from .models import Sweep
from .parameters import NAME, Distribution, ParameterError
from .plans import check_placeholders
from .run_folders import copy_inputs, staged_tree
from .runs import check_runs, fill_run

optuna.logging.set_verbosity(optuna.logging.WARNING)

STUDIES_DIR = ".studies"
STOP_FILE = f"{HELPER_DIR}/{CONTROL_DIR}/stop"
SAMPLERS = ("tpe", "random")
PRUNERS = ("none", "median", "asha")
MAX_PARALLEL = 50


@dataclass(frozen=True)
class StudyPlan:
    """What the user asked for; kept as the sweep's definition."""

    space: dict
    objective: str
    direction: str = "minimize"
    sampler: str = "tpe"
    pruner: str = "median"
    parallel: int = 4
    max_trials: int = 20
    gpu_hours: float | None = None
    deadline_minutes: int | None = None
    seed: int | None = None
    prune_grace_s: int = 120

    @classmethod
    def from_json(cls, data: object) -> StudyPlan:
        if not isinstance(data, dict):
            raise JobSubmissionError("study", "Describe the study.")
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise JobSubmissionError("study", f"Unknown setting {unknown[0]!r}.")
        try:
            plan = cls(**data)
        except TypeError:
            raise JobSubmissionError("study", "Give the search space and the objective.") from None
        plan.check()
        return plan

    def check(self) -> None:
        def whole(field: str, value, low: int, high: int) -> None:
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise JobSubmissionError(
                    field, f"{field} must be a whole number from {low} to {high}."
                )

        if not isinstance(self.space, dict) or not self.space:
            raise JobSubmissionError("space", "Give at least one hyperparameter to search.")
        try:
            for name, distribution in self.space.items():
                if not isinstance(name, str) or not NAME.fullmatch(name):
                    raise ParameterError("space", f"{name!r} is not a parameter name.")
                Distribution.from_json(name, distribution)
        except ParameterError as exc:
            raise JobSubmissionError("space", exc.message) from None
        if not isinstance(self.objective, str) or not NAME.fullmatch(self.objective):
            raise JobSubmissionError(
                "objective", "Name the metric to optimise, as the script logs it."
            )
        if self.direction not in ("minimize", "maximize"):
            raise JobSubmissionError("direction", "The direction is minimize or maximize.")
        if self.sampler not in SAMPLERS:
            raise JobSubmissionError("sampler", f"The sampler is one of {', '.join(SAMPLERS)}.")
        if self.pruner not in PRUNERS:
            raise JobSubmissionError("pruner", f"The pruner is one of {', '.join(PRUNERS)}.")
        whole("parallel", self.parallel, 1, MAX_PARALLEL)
        whole("max_trials", self.max_trials, 1, settings.MAX_SWEEP_RUNS)
        whole("prune_grace_s", self.prune_grace_s, 0, 3600)
        if self.deadline_minutes is not None:
            whole("deadline_minutes", self.deadline_minutes, 1, 60 * 24 * 90)
        if self.seed is not None:
            whole("seed", self.seed, 0, 2**31 - 1)
        if self.gpu_hours is not None and (
            isinstance(self.gpu_hours, bool)
            or not isinstance(self.gpu_hours, int | float)
            or not math.isfinite(self.gpu_hours)
            or self.gpu_hours <= 0
        ):
            raise JobSubmissionError("gpu_hours", "The GPU-hour budget must be above 0.")


_storages: dict[str, optuna.storages.RDBStorage] = {}


def optuna_storage() -> optuna.storages.RDBStorage:
    """Optuna's RDB storage in the portal's own PostgreSQL database. Its connections are not
    pooled: a study advances every few seconds, and no idle connection should outlive it."""
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    url = (
        f"postgresql+psycopg2://{db.get('USER') or 'postgres'}{password}@"
        f"{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    )
    if url not in _storages:
        _storages[url] = optuna.storages.RDBStorage(url, engine_kwargs={"poolclass": NullPool})
    return _storages[url]


def _study_name(sweep: Sweep) -> str:
    return f"nightshift-{sweep.public_id}"


def plan_of(sweep: Sweep) -> StudyPlan:
    """The study's settings, from its definition (which also keeps its spec and files)."""
    known = {field.name for field in dataclasses.fields(StudyPlan)}
    return StudyPlan(**{key: value for key, value in sweep.definition.items() if key in known})


def _load(sweep: Sweep) -> optuna.Study:
    plan = plan_of(sweep)
    # The sampler is made again at every advance: seeded alike each time, it would draw the
    # same values again. Its seed moves on with the trials asked for so far.
    seed = None if plan.seed is None else plan.seed + sweep.runs.count()
    if plan.sampler == "random":
        sampler = optuna.samplers.RandomSampler(seed=seed)
    else:
        sampler = optuna.samplers.TPESampler(
            seed=seed, n_startup_trials=min(10, max(2, plan.max_trials // 3))
        )
    pruner = {
        "none": optuna.pruners.NopPruner(),
        "median": optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=1),
        "asha": optuna.pruners.SuccessiveHalvingPruner(),
    }[plan.pruner]
    return optuna.load_study(
        study_name=_study_name(sweep), storage=optuna_storage(), sampler=sampler, pruner=pruner
    )


def _distributions(space: dict) -> dict[str, optuna.distributions.BaseDistribution]:
    result = {}
    for name, data in space.items():
        parsed = Distribution.from_json(name, data)
        if parsed.kind == "choice":
            result[name] = optuna.distributions.CategoricalDistribution(list(parsed.choices))
        elif parsed.kind == "int_uniform":
            result[name] = optuna.distributions.IntDistribution(int(parsed.low), int(parsed.high))
        else:
            result[name] = optuna.distributions.FloatDistribution(
                parsed.low, parsed.high, log=parsed.kind == "log_uniform"
            )
    return result


def template_dir(sweep: Sweep) -> Path:
    """Where a study keeps the files every trial starts from."""
    return settings.JOBS_DIR / STUDIES_DIR / str(sweep.public_id)


def study_submit(*, user, spec: JobSpec, plan: StudyPlan, script, requirements=None) -> Sweep:
    """Accept a study: check it, keep its files once, create the Optuna study, and let the
    next advance start its first trials."""
    check_may_submit(user, script=script, copy_from=None)
    job_validate_request(user=user, spec=spec)
    check_placeholders(spec, set(plan.space))
    example = {name: _example(data) for name, data in plan.space.items()}
    run_specs = [_trial_spec(spec, i, example) for i in range(plan.parallel)]
    # Only `parallel` trials are ever unfinished at once: the quota is checked for those.
    lab, remove_after_s = check_runs(user, spec, run_specs, check_pool=True)
    sweep = Sweep(
        owner=user,
        lab=lab,
        name=spec.name.strip(),
        kind=Sweep.Kind.STUDY,
        definition={
            **dataclasses.asdict(plan),
            "spec": _spec_json(spec),
            "remove_after_s": remove_after_s,
        },
    )
    folder = template_dir(sweep)
    folder.mkdir(parents=True)
    try:
        staged = stage_files(
            folder, spec=spec, script=script, copy_from=None, requirements=requirements, user=user
        )
        sweep.definition["staged"] = dataclasses.asdict(staged) | {
            "sha256": content_hashes(folder, staged)
        }
        with transaction.atomic():
            sweep.save()
            audit_record(
                action="study.submit",
                actor=user,
                target=sweep,
                detail=f"{plan.max_trials} trials, {plan.parallel} at once; "
                f"{plan.sampler}, {plan.pruner}; objective {plan.objective}",
            )
            optuna.create_study(
                study_name=_study_name(sweep), storage=optuna_storage(), direction=plan.direction
            )
            sweep_pk = sweep.pk
            transaction.on_commit(lambda: _enqueue_advance(sweep_pk))
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return sweep


def _trial_spec(spec: JobSpec, number: int, values: dict) -> JobSpec:
    """The job a trial runs: the study's, with the trial's values in place."""
    return dataclasses.replace(
        spec,
        name=f"{spec.name} [{number}]",
        arguments=[parameters.substitute(a, values) for a in spec.arguments],
        environment={k: parameters.substitute(v, values) for k, v in spec.environment.items()},
        entry_command=(
            parameters.substitute(spec.entry_command, values)
            if spec.entry_command
            else spec.entry_command
        ),
        notify_by_email=False,
    )


def _example(data: dict):
    parsed = Distribution.from_json("x", data)
    return parsed.choices[0] if parsed.kind == "choice" else parsed.low


def _spec_json(spec: JobSpec) -> dict:
    return dataclasses.asdict(spec)


def _enqueue_advance(sweep_pk: int) -> None:
    enqueue("jobs.tasks.advance_study", sweep_pk)


@dataclass
class AdvanceReport:
    told: int = 0
    reported: int = 0
    pruned: int = 0
    started: int = 0
    finished: bool = False


def _objective_series(job: Job, objective: str) -> list[tuple[int, float]]:
    rows = job_metrics(job.directory, job.directory / METRICS_FILE).rows
    series = []
    for row in rows:
        value = row.get(objective)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            series.append((int(row["step"]), float(value)))
    return series


def _gpu_hours(sweep: Sweep) -> float:
    seconds = UsageRecord.objects.filter(job__sweep=sweep).aggregate(
        total=Sum(F("wall_s") * F("gpus"))
    )["total"]
    return (seconds or 0.0) / 3600


def study_advance(sweep_pk: int) -> AdvanceReport:
    """One step of a study (see the module's docstring). Safe to run at any time, twice at
    once included: the study's row is locked for the step."""
    report = AdvanceReport()
    with transaction.atomic():
        sweep = Sweep.objects.select_for_update(skip_locked=True).filter(pk=sweep_pk).first()
        if sweep is None or not sweep.is_study:
            return report
        plan = plan_of(sweep)
        study = _load(sweep)
        trials = {trial.number: trial for trial in study.get_trials(deepcopy=False)}
        jobs = list(sweep.runs.order_by("sweep_index"))
        now = timezone.now()
        for job in jobs:
            trial = trials.get(job.sweep_index)
            if trial is None or trial.state != optuna.trial.TrialState.RUNNING:
                continue
            series = _objective_series(job, plan.objective)
            live = optuna.trial.Trial(study, trial._trial_id)
            # Every value the trial logged, also for one that ended between two steps of
            # the study: the pruner compares running trials with these.
            for step, value in series:
                if step not in trial.intermediate_values:
                    live.report(value, step)
                    report.reported += 1
            if job.state in FINAL_STATES:
                pruned = job.events.filter(kind__in=("pruned", "prune requested")).exists()
                if pruned:
                    study.tell(job.sweep_index, state=optuna.trial.TrialState.PRUNED)
                elif job.state == JobState.COMPLETED and series:
                    study.tell(job.sweep_index, series[-1][1])
                else:
                    study.tell(job.sweep_index, state=optuna.trial.TrialState.FAIL)
                report.told += 1
                continue
            if plan.pruner != "none" and series and live.should_prune():
                report.pruned += _prune(job, plan, now)
        unfinished = [job for job in jobs if job.state not in FINAL_STATES]
        reason = _stop_reason(sweep, plan, len(jobs), now)
        if reason and not sweep.stop_reason:
            sweep.stop_reason = reason
            sweep.save(update_fields=["stop_reason"])
            if reason != f"reached {plan.max_trials} trials":
                _cancel_trials(sweep, unfinished, reason)
        if not sweep.stop_reason:
            for _ in range(
                max(0, min(plan.parallel - len(unfinished), plan.max_trials - len(jobs)))
            ):
                refusal = _quota_refusal(sweep)
                if refusal:
                    # Waits for capacity: the next advance tries again.
                    if sweep.last_error != refusal:
                        sweep.last_error = refusal
                        sweep.save(update_fields=["last_error"])
                    break
                trial = study.ask(_distributions(plan.space))
                _start_trial(sweep, plan, trial)
                report.started += 1
        if sweep.stop_reason and not unfinished and not report.started and not sweep.finished_at:
            sweep.finished_at = now
            sweep.save(update_fields=["finished_at"])
            report.finished = True
    return report


def _quota_refusal(sweep: Sweep) -> str:
    """Why the owner's quota has no room for one more trial now, or ""."""
    spec = sweep.definition["spec"]
    try:
        quota_check(
            user=sweep.owner, lab=sweep.lab, gpus=spec["gpus"], max_runtime_s=spec["max_runtime_s"]
        )
    except QuotaExceeded as exc:
        return f"Waiting for quota: {exc.message}"
    return ""


def _stop_reason(sweep: Sweep, plan: StudyPlan, trials: int, now) -> str:
    if sweep.stop_reason:
        return sweep.stop_reason
    if plan.deadline_minutes and now >= sweep.created_at + timedelta(minutes=plan.deadline_minutes):
        return f"reached its deadline of {plan.deadline_minutes} minutes"
    if plan.gpu_hours is not None and _gpu_hours(sweep) >= plan.gpu_hours:
        return f"used its budget of {plan.gpu_hours:g} GPU-hours"
    if trials >= plan.max_trials:
        return f"reached {plan.max_trials} trials"
    return ""


def _prune(job: Job, plan: StudyPlan, now) -> int:
    """Ask a trial to stop (the helper's should_stop); remove it once the grace is over."""
    requested = job.events.filter(kind="prune requested").order_by("at").first()
    if requested is None:
        stop = job.directory / STOP_FILE
        try:
            stop.write_text("pruned\n")
            os.chmod(stop, 0o644)
        except OSError:
            pass  # no folder to write to (spool mode): removed after the grace period
        JobEvent.objects.create(
            job=job,
            kind="prune requested",
            state=job.state,
            detail="Optuna pruned this trial: its intermediate values "
            "are worse than the other trials'.",
        )
        return 1
    if now - requested.at >= timedelta(seconds=plan.prune_grace_s) and job.is_submitted:
        try:
            get_bridge(job.schedd).act(
                "remove",
                job.cluster_id,
                job.proc_id,
                reason="Pruned by its study, and did not stop in time",
            )
        except BridgeError:
            return 0
        JobEvent.objects.create(
            job=job,
            kind="pruned",
            state=job.state,
            detail="Removed: pruned, it did not stop within the grace period.",
        )
    return 0


def _cancel_trials(sweep: Sweep, unfinished: list[Job], reason: str) -> None:
    for job in unfinished:
        if job.is_submitted:
            try:
                get_bridge(job.schedd).act(
                    "remove", job.cluster_id, job.proc_id, reason=f"Its study {reason}"
                )
            except BridgeError:
                continue
            JobEvent.objects.create(
                job=job, kind="cancel requested", state=job.state, detail=f"Its study {reason}."
            )
        else:
            job.state, job.finished_at = JobState.REMOVED, timezone.now()
            job.outcome = JobOutcome.CANCELLED
            job.status_detail = f"Its study {reason} before it reached HTCondor."
            job.save(update_fields=["state", "finished_at", "outcome", "status_detail"])


def _start_trial(sweep: Sweep, plan: StudyPlan, trial: optuna.trial.Trial) -> Job:
    """A job for Optuna's next trial: the study's files, with the trial's values."""
    values = dict(trial.params)
    run = _trial_spec(JobSpec(**sweep.definition["spec"]), trial.number, values)
    job = Job(
        owner=sweep.owner,
        name=run.name,
        lab=sweep.lab,
        gpus=run.gpus,
        sweep=sweep,
        sweep_index=trial.number,
        parameters=values,
        schedd=schedd_choose(lab=sweep.lab),
    )
    job.output_dir = str(settings.JOBS_DIR / str(job.public_id))
    staged_data = dict(sweep.definition["staged"])
    hashes = staged_data.pop("sha256")

    staged = StagedFiles(**staged_data)
    folder = template_dir(sweep)
    copy_inputs(folder, job.directory, staged_tree(folder))
    try:
        fill_run(
            job,
            run,
            staged,
            hashes,
            user=sweep.owner,
            lab=sweep.lab,
            remove_after_s=sweep.definition.get("remove_after_s"),
        )
        install_helper(job.directory, software=staged.software, datasets=staged.datasets)
        job.save()
        JobEvent.objects.create(
            job=job,
            kind="created",
            state=job.state,
            detail=f"Trial {trial.number} of study “{sweep.name}”: "
            + ", ".join(f"{k} = {v}" for k, v in values.items()),
        )
    except BaseException:
        shutil.rmtree(job.directory, ignore_errors=True)
        raise
    job_pk = job.pk
    transaction.on_commit(lambda: job_enqueue_submit(job_pk))
    return job


def study_cancel(*, sweep: Sweep, user) -> None:
    """Stop a study: no more trials, and the unfinished ones removed."""
    if sweep.owner_id != user.pk and not user.is_staff:
        raise JobActionError("Only the study's owner can stop it.")
    with transaction.atomic():
        sweep = Sweep.objects.select_for_update().get(pk=sweep.pk)
        if sweep.stop_reason:
            raise JobActionError(f"This study has already stopped: it {sweep.stop_reason}.")
        sweep.stop_reason = f"was stopped by {user.get_username()}"
        sweep.save(update_fields=["stop_reason"])
        unfinished = list(sweep.runs.exclude(state__in=FINAL_STATES))
        _cancel_trials(sweep, unfinished, sweep.stop_reason)
        audit_record(action="study.cancel", actor=user, target=sweep, detail=sweep.stop_reason)
    _enqueue_advance(sweep.pk)


def studies_advance() -> int:
    """Advance every study that has not finished (beat's schedule)."""
    pks = list(
        Sweep.objects.filter(kind=Sweep.Kind.STUDY, finished_at__isnull=True).values_list(
            "pk", flat=True
        )
    )
    for pk in pks:
        study_advance(pk)
    return len(pks)
