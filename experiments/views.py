"""The experiment pages: a sweep's comparison, and the forms that start sweeps, matrices and
studies. The new-job page is jobs'; experiments hands it the job form with a sweep's fields."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from jobs.models import JobState
from jobs.services import JobActionError, JobSubmissionError
from jobs.web import FORM_FIELD_FOR, JobForm, show_refusal, submit_job

from . import matrices, readouts, selectors, studies, sweeps
from .forms import JobOrSweepForm, MatrixForm, StudyForm
from .lookups import actionable_sweep_or_403, visible_sweep_or_404
from .models import Sweep
from .parameters import text_of

# Service fields that the sweep forms spell differently, besides the job form's.
SWEEP_FORM_FIELD_FOR = {
    **FORM_FIELD_FOR,
    "parameters": "sweep_grid",
    "count": "sweep_count",
    "seed": "sweep_seed",
}


def submit_job_or_sweep(request: HttpRequest, form: JobOrSweepForm, **files) -> HttpResponse:
    """A sweep when the form describes one, else a job; then its page."""
    plan = form.sweep_plan()
    if plan is None:
        return submit_job(request, form, **files)
    sweep = sweeps.sweep_submit(
        user=request.user, spec=form.to_spec(), plan=sweeps.SweepPlan.from_json(plan), **files
    )
    messages.success(
        request, f"“{sweep.name}”: {sweep.planned_runs:,} runs are on their way to the pool."
    )
    return redirect("jobs:sweep", public_id=sweep.public_id)


JOB_OR_SWEEP_FORM = JobForm(
    form_class=JobOrSweepForm, submit=submit_job_or_sweep, field_for=SWEEP_FORM_FIELD_FOR
)


def _sweep_comparison(request: HttpRequest, sweep) -> readouts.SweepComparison:
    return readouts.sweep_comparison(
        sweep,
        metric=request.GET.get("metric"),
        goal=request.GET.get("goal"),
        state=request.GET.get("state"),
        sort=request.GET.get("sort", "index"),
    )


@login_required
@require_GET
def sweep_detail(request: HttpRequest, public_id) -> HttpResponse:
    sweep = visible_sweep_or_404(request.user, public_id)
    names, results, rows = _sweep_comparison(request, sweep)
    for row in rows:
        row.run.parameter_values = [text_of(row.run.parameters.get(n, "")) for n in names]
    counts = selectors.sweep_state_counts(sweep)
    state_counts = [
        (state, label, counts[state]) for state, label in JobState.choices if counts.get(state)
    ]
    can_cancel = (sweep.owner_id == request.user.pk or request.user.is_staff) and (
        any(not row.run.is_final for row in results.results)
        or (sweep.is_study and not sweep.stop_reason)
        or sweep.is_preparing
    )
    numeric = [
        n
        for n in names
        if all(isinstance(r.run.parameters.get(n), int | float) for r in results.results)
    ]
    ranked = sorted(
        (r for r in results.results if r.best is not None),
        key=lambda r: r.best,
        reverse=results.goal == "max",
    )
    chart = {
        "metric": results.metric,
        "goal": results.goal,
        "numeric_parameters": numeric,
        "runs": [
            {
                "index": r.run.sweep_index,
                "best": r.best,
                "parameters": r.run.parameters,
                "metrics_url": reverse("jobs:metrics", args=[r.run.public_id]),
            }
            for r in results.results
        ],
        "compare": [r.run.sweep_index for r in ranked[:5]],
    }
    query = request.GET.copy()
    query.pop("sort", None)
    matrix = None
    if sweep.kind == Sweep.Kind.MATRIX:
        by_cell = {
            (r.run.parameters.get("system"), r.run.parameters.get("dataset")): r
            for r in results.results
        }
        datasets = [d["name"] for d in sweep.definition.get("datasets", [])]
        matrix = {
            "datasets": datasets,
            "rows": [
                (system["name"], [by_cell.get((system["name"], d)) for d in datasets])
                for system in sweep.definition.get("systems", [])
            ],
        }
    return render(
        request,
        "experiments/sweep.html",
        {
            "matrix": matrix,
            "study": studies.plan_of(sweep) if sweep.is_study else None,
            "sweep": sweep,
            "stage": selectors.sweep_stage(sweep),
            "rows": rows,
            "runs_total": len(results.results),
            "parameter_names": names,
            "state_counts": state_counts,
            "can_cancel": can_cancel,
            "results": results,
            "chart": chart,
            "sort": request.GET.get("sort", "index"),
            "query": query.urlencode(),
            "states": JobState.choices,
            "state_filter": request.GET.get("state", ""),
        },
    )


@login_required
@require_GET
def sweep_progress(request: HttpRequest, public_id) -> HttpResponse:
    """How far a sweep's way to HTCondor has got: the sweep page's self-refreshing part."""
    sweep = visible_sweep_or_404(request.user, public_id)
    return render(
        request,
        "experiments/_sweep_progress.html",
        {"sweep": sweep, "stage": selectors.sweep_stage(sweep)},
    )


@login_required
@require_GET
def sweep_results_csv(request: HttpRequest, public_id) -> HttpResponse:
    sweep = visible_sweep_or_404(request.user, public_id)
    response = HttpResponse(
        readouts.sweep_results_csv(_sweep_comparison(request, sweep)), content_type="text/csv"
    )
    response["Content-Disposition"] = f'attachment; filename="sweep-{sweep.public_id}.csv"'
    return response


@login_required
@require_POST
def sweep_cancel(request: HttpRequest, public_id) -> HttpResponse:
    sweep = actionable_sweep_or_403(request.user, public_id)
    try:
        if sweep.is_study:
            studies.study_cancel(sweep=sweep, user=request.user)
            messages.success(
                request,
                f"“{sweep.name}” asks for no more trials, and its "
                "unfinished ones are being removed.",
            )
        else:
            cancelled = sweeps.sweep_cancel(sweep=sweep, user=request.user)
            messages.success(
                request,
                f"Cancelling {cancelled} run{'s' if cancelled != 1 else ''} of “{sweep.name}”.",
            )
    except JobActionError as exc:
        messages.error(request, str(exc))
    return redirect("jobs:sweep", public_id=sweep.public_id)


@login_required
def matrix_new(request: HttpRequest) -> HttpResponse:
    form = MatrixForm(request.POST or None, request.FILES or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            sweep = matrices.matrix_submit(
                user=request.user,
                spec=form.to_spec(),
                systems=[matrices.MatrixSystem(*row) for row in data["systems"]],
                datasets=[matrices.MatrixDataset(*row) for row in data["datasets"]],
            )
        except JobSubmissionError as exc:
            show_refusal(form, exc, SWEEP_FORM_FIELD_FOR)
        else:
            messages.success(
                request, f"“{sweep.name}”: {sweep.runs.count()} runs are on their way to the pool."
            )
            return redirect("jobs:sweep", public_id=sweep.public_id)
    return render(
        request, "experiments/matrix_new.html", {"form": form}, status=400 if form.errors else 200
    )


@login_required
def study_new(request: HttpRequest) -> HttpResponse:
    form = StudyForm(request.POST or None, request.FILES or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            sweep = studies.study_submit(
                user=request.user,
                spec=form.to_spec(),
                script=data["script"],
                plan=studies.StudyPlan.from_json(form.plan()),
                requirements=data.get("requirements"),
            )
        except JobSubmissionError as exc:
            show_refusal(form, exc, SWEEP_FORM_FIELD_FOR)
        else:
            messages.success(
                request,
                f"“{sweep.name}” has started: its first trials are on their way to the pool.",
            )
            return redirect("jobs:sweep", public_id=sweep.public_id)
    return render(
        request, "experiments/study_new.html", {"form": form}, status=400 if form.errors else 200
    )
