from django import forms
from django.conf import settings

from condor_bridge.types import MAX_CPUS, MAX_GPU_MEMORY_GB, MAX_GPUS
from jobs.services import JobSpec, data_choices, software_choices
from labs.models import Lab

from .sessions import NOTEBOOK_PACKAGE, notebook_problem


class EnvironmentChoiceField(forms.ChoiceField):
    """Offers the environments that run JupyterLab, and takes any the user may use: one
    without JupyterLab (from an old page, or a link) is then refused with the line to add,
    rather than as "not one of the available choices"."""

    usable: frozenset[str] = frozenset()

    def valid_value(self, value) -> bool:
        return value in self.usable


class SessionForm(forms.Form):
    """A notebook session in plain terms: what to run it on, with what, for how long."""

    name = forms.CharField(label="Name", max_length=200, initial="Notebook session")
    lab = forms.ModelChoiceField(
        label="Lab",
        queryset=Lab.objects.none(),
        required=False,
        empty_label=None,
        help_text="The lab whose quota the session counts against, like any job.",
    )
    software_environment = EnvironmentChoiceField(
        label="Environment",
        help_text="Environments with JupyterLab in them, the site's first. Your own needs a "
        "line jupyterlab beside the packages you work with.",
    )
    datasets = forms.MultipleChoiceField(
        label="Datasets",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text='Read-only in the session: nightshift.dataset_path("NAME").',
    )
    gpus = forms.IntegerField(label="GPUs", min_value=0, max_value=MAX_GPUS, initial=1)
    gpu_memory_gb = forms.FloatField(
        label="Minimum GPU memory (GB)",
        required=False,
        min_value=0.1,
        max_value=MAX_GPU_MEMORY_GB,
    )
    cpus = forms.IntegerField(label="CPUs", min_value=1, max_value=MAX_CPUS, initial=2)
    memory_gb = forms.FloatField(label="Memory (GB)", min_value=0.125, max_value=1024, initial=8)
    hours = forms.FloatField(
        label="Time limit (hours)",
        min_value=0.25,
        help_text="The session ends then, with its files kept; a banner warns 10 minutes "
        "before. It also ends after a while without activity, and when the workstation's "
        "owner comes back.",
    )

    def __init__(self, *args, user=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        labs = Lab.objects.filter(memberships__user=user).order_by("memberships__joined_at")
        if user is None or not labs.exists():
            del self.fields["lab"]
        else:
            self.fields["lab"].queryset = labs
        self.environments = {c.reference: c for c in software_choices(user)} if user else {}
        ready = [c for c in self.environments.values() if notebook_problem(c) is None]
        # The site's notebook environment first (it has JupyterLab and the common packages),
        # then the rest as the catalogue orders them.
        ready.sort(key=lambda c: not (c.is_site and NOTEBOOK_PACKAGE in c.packages))
        field = self.fields["software_environment"]
        field.choices = [(c.reference, c.label) for c in ready]
        field.usable = frozenset(self.environments)
        asked = self.initial.get("software_environment")
        # Asked for by a link (?environment=) but without JupyterLab: said on the page, and
        # the site's offered instead.
        self.environment_notice = (
            notebook_problem(self.environments[asked]) if asked in field.usable else None
        )
        if ready and asked not in {c.reference for c in ready}:
            self.initial["software_environment"] = ready[0].reference
        self.fields["datasets"].choices = (
            [(c.reference, c.label) for c in data_choices(user)] if user else []
        )
        self.fields["hours"].max_value = settings.LIVE_SESSION_MAX_HOURS
        self.fields["hours"].validators.append(_at_most(settings.LIVE_SESSION_MAX_HOURS))
        self.fields["hours"].initial = settings.LIVE_SESSION_DEFAULT_HOURS

    def clean_software_environment(self) -> str:
        reference = self.cleaned_data["software_environment"]
        problem = notebook_problem(self.environments[reference])
        if problem:
            raise forms.ValidationError(problem)
        return reference

    def to_spec(self) -> JobSpec:
        data = self.cleaned_data
        return JobSpec(
            name=data["name"].strip(),
            software=data["software_environment"],
            gpus=data["gpus"],
            gpu_memory_gb=data.get("gpu_memory_gb") if data["gpus"] else None,
            cpus=data["cpus"],
            memory_mb=round(data["memory_gb"] * 1024),
            lab_id=data["lab"].pk if data.get("lab") else None,
            datasets=list(data.get("datasets") or []),
            live_services=["notebook"],
            session_limit_s=round(data["hours"] * 3600),
        )


def _at_most(hours: float):
    def check(value: float) -> None:
        if value > hours:
            raise forms.ValidationError(f"A session may last at most {hours:g} hours.")

    return check
