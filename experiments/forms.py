"""The forms that start experiments: the job form with a sweep, a matrix, a study."""

import csv
import io

from django import forms

from jobs.web import JobSubmitForm


def parse_space(text: str) -> dict:
    """`lr = log_uniform 1e-5 0.1` and `opt = choice adam sgd` lines -> distributions."""
    space = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, rest = line.partition("=")
        words = rest.split()
        if not sep or not name.strip() or not words:
            raise forms.ValidationError(f"Line {number}: write name = kind low high.")
        kind, values = words[0], words[1:]
        if kind == "choice":
            space[name.strip()] = {
                "kind": "choice",
                "choices": [_number_or_text(v) for v in values],
            }
            continue
        try:
            low, high = (float(v) for v in values)
        except ValueError:
            raise forms.ValidationError(
                f"Line {number}: {kind} needs its lowest and highest value."
            ) from None
        space[name.strip()] = {"kind": kind, "low": low, "high": high}
    return space


MAX_ROWS_CSV_BYTES = 1024 * 1024


def _number_or_text(value: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            continue
    return value


SWEEP_FIELDS = ("sweep_grid", "sweep_rows", "sweep_random", "sweep_count", "sweep_seed")
_JOB_FIELDS = list(JobSubmitForm.base_fields)


class JobOrSweepForm(JobSubmitForm):
    """The job form, with optional sweep fields: filled in, the job runs as a sweep, once for
    each set of parameter values."""

    sweep_grid = forms.CharField(
        label="Parameter sweep (optional)",
        required=False,
        max_length=20000,
        widget=forms.Textarea(
            attrs={"rows": 3, "placeholder": "lr = 0.1, 0.01, 0.001\nbatch = 32, 64"}
        ),
        help_text="One parameter per line: name = value, value, …. Every combination runs as "
        "its own job, all submitted together as a sweep; write {name} in the arguments or "
        "environment values where the value goes, e.g. --lr={lr}.",
    )
    sweep_rows = forms.FileField(
        label="…or parameter sets (CSV)",
        required=False,
        help_text="A CSV file: parameter names in its first row, then one run per row.",
    )
    sweep_random = forms.CharField(
        label="…or random samples",
        required=False,
        max_length=5000,
        widget=forms.Textarea(
            attrs={"rows": 2, "placeholder": "lr = log_uniform 1e-5 0.1\nopt = choice adam sgd"}
        ),
        help_text="One parameter per line: uniform, log_uniform or int_uniform with its "
        "lowest and highest value, or choice with its options; with how many samples below.",
    )
    sweep_count = forms.IntegerField(label="Random samples", required=False, min_value=1)
    sweep_seed = forms.IntegerField(
        label="Seed of the samples", required=False, min_value=0, initial=0
    )
    # Where the job form always showed them: after the arguments they fill in.
    field_order = [
        *_JOB_FIELDS[: _JOB_FIELDS.index("arguments") + 1],
        *SWEEP_FIELDS,
        *_JOB_FIELDS[_JOB_FIELDS.index("arguments") + 1 :],
    ]

    def clean_sweep_grid(self) -> dict[str, list] | None:
        """`lr = 0.1, 0.01` lines -> {"lr": [0.1, 0.01]}; numbers become numbers."""
        text = (self.cleaned_data.get("sweep_grid") or "").replace("\r\n", "\n")
        grid: dict[str, list] = {}
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            name, sep, values = line.partition("=")
            name = name.strip()
            if not sep or not name:
                raise forms.ValidationError(f"Line {number}: write name = value, value, ….")
            if name in grid:
                raise forms.ValidationError(f"{name} is given twice; keep one line.")
            grid[name] = [
                _number_or_text(value.strip()) for value in values.split(",") if value.strip()
            ]
        return grid or None

    def clean_sweep_random(self) -> dict | None:
        return parse_space(self.cleaned_data.get("sweep_random") or "") or None

    def clean_sweep_rows(self) -> list[dict] | None:
        upload = self.cleaned_data.get("sweep_rows")
        if not upload:
            return None
        if upload.size is not None and upload.size > MAX_ROWS_CSV_BYTES:
            raise forms.ValidationError("A CSV of parameter sets is at most 1 MB.")
        try:
            text = upload.read(MAX_ROWS_CSV_BYTES).decode("utf-8-sig")
        except UnicodeDecodeError:
            raise forms.ValidationError("The CSV file is not UTF-8 text.") from None
        rows = list(csv.DictReader(io.StringIO(text)))
        if any(None in row or None in row.values() for row in rows):
            raise forms.ValidationError("Every row needs one value per column of the header.")
        return [
            {name.strip(): _number_or_text(value.strip()) for name, value in row.items()}
            for row in rows
        ]

    def sweep_plan(self) -> dict | None:
        """The sweep the form describes: {"grid": ...}, {"rows": ...}, {"random": ...} or
        None for a single job."""
        data = self.cleaned_data
        if data.get("sweep_grid"):
            return {"grid": data["sweep_grid"]}
        if data.get("sweep_rows") is not None:
            return {"rows": data["sweep_rows"]}
        if data.get("sweep_random"):
            return {
                "random": data["sweep_random"],
                "count": data.get("sweep_count"),
                "seed": data.get("sweep_seed") or 0,
            }
        return None

    def clean(self):
        cleaned = super().clean()
        given = [
            name
            for name in ("sweep_grid", "sweep_rows", "sweep_random")
            if cleaned.get(name) not in (None, "", {}, [])
        ]
        if len(given) > 1:
            self.add_error(
                "sweep_grid",
                "Describe the sweep one way: a grid, a CSV of parameter sets, or random samples.",
            )
        if cleaned.get("sweep_random") and not cleaned.get("sweep_count"):
            self.add_error("sweep_count", "Say how many random samples to run.")
        return cleaned


MATRIX_ROWS = 4


class MatrixForm(JobSubmitForm):
    """An evaluation matrix: the job form's resources and arguments, with systems and
    datasets as rows (system_name_N, system_file_N, system_entry_N; dataset_name_N,
    dataset_path_N, dataset_file_N) instead of one script."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for name in (
            "script",
            "requirements",
            "entry_command",
            "source_job",
            "staged_upload",
            "staged_requirements",
            "notify_by_email",
            "datasets",
        ):
            del self.fields[name]
        self.fields["name"].label = "Evaluation name"
        self.fields["arguments"].help_text = (
            "One argument per line, for every system; {system} and {dataset} become the "
            "system's name and the dataset's path."
        )

    def rows(self, prefix: str, fields: tuple[str, ...]) -> list[dict]:
        """What was typed in each row, for showing the form again."""
        rows = []
        for number in range(MATRIX_ROWS):
            rows.append(
                {
                    "number": number,
                    **{field: self.data.get(f"{prefix}_{field}_{number}", "") for field in fields},
                }
            )
        return rows

    def system_rows(self) -> list[dict]:
        return self.rows("system", ("name", "entry", "model"))

    def dataset_rows(self) -> list[dict]:
        return self.rows("dataset", ("name", "path"))

    def clean(self):
        cleaned = forms.Form.clean(self)
        systems, datasets = [], []
        for number in range(MATRIX_ROWS):
            name = self.data.get(f"system_name_{number}", "").strip()
            upload = self.files.get(f"system_file_{number}")
            entry = self.data.get(f"system_entry_{number}", "").strip() or None
            model = self.data.get(f"system_model_{number}", "").strip()[:200] or None
            if model and upload is None and systems:
                # A model's row without a file: evaluated by the first system's script.
                upload, entry = systems[0][1], entry or systems[0][2]
            if name or upload or model:
                if not (name and upload):
                    self.add_error(None, f"System row {number + 1}: give a name and a file.")
                    continue
                systems.append((name, upload, entry, model))
            name = self.data.get(f"dataset_name_{number}", "").strip()
            path = self.data.get(f"dataset_path_{number}", "").strip() or None
            upload = self.files.get(f"dataset_file_{number}")
            if name or path or upload:
                if not name or (path is None) == (upload is None):
                    self.add_error(
                        None,
                        f"Dataset row {number + 1}: give a name, and a path or a file (not both).",
                    )
                    continue
                datasets.append((name, path, upload))
        cleaned["systems"], cleaned["datasets"] = systems, datasets
        return cleaned


class StudyForm(JobSubmitForm):
    """A hyperparameter study: the job form, with a search space and a budget instead of a
    sweep grid."""

    space = forms.CharField(
        label="Search space",
        max_length=5000,
        widget=forms.Textarea(
            attrs={
                "rows": 3,
                "placeholder": "lr = log_uniform 1e-5 0.1\nlayers = int_uniform 2 8\n"
                "optimizer = choice adam sgd",
            }
        ),
        help_text="One hyperparameter per line: name = uniform, log_uniform or int_uniform "
        "with its lowest and highest value, or choice with its options. Write {name} in the "
        "arguments where its value goes.",
    )
    objective = forms.CharField(
        label="Objective",
        max_length=40,
        help_text="The metric to optimise, as your script logs it with nightshift.log().",
    )
    direction = forms.ChoiceField(choices=[("minimize", "Minimise"), ("maximize", "Maximise")])
    max_trials = forms.IntegerField(label="Trials", min_value=1, initial=20)
    parallel = forms.IntegerField(label="At once", min_value=1, max_value=50, initial=4)
    sampler = forms.ChoiceField(choices=[("tpe", "TPE"), ("random", "Random")])
    pruner = forms.ChoiceField(
        choices=[("median", "Median"), ("asha", "Successive halving"), ("none", "None")]
    )
    gpu_hours = forms.FloatField(label="GPU-hour budget", required=False, min_value=0.01)
    deadline_minutes = forms.IntegerField(label="Deadline (minutes)", required=False, min_value=1)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for name in ("source_job", "notify_by_email"):
            del self.fields[name]
        self.fields["name"].label = "Study name"

    def clean_space(self) -> dict:
        return parse_space(self.cleaned_data["space"])

    def plan(self) -> dict:
        data = self.cleaned_data
        return {
            key: data.get(key)
            for key in (
                "space",
                "objective",
                "direction",
                "max_trials",
                "parallel",
                "sampler",
                "pruner",
                "gpu_hours",
                "deadline_minutes",
            )
        }
