"""What a job really uses: samples taken while it runs, and a summary once it ends."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from condor_bridge.explain import size_text

from .energy import energy_text


class UsageSample(models.Model):
    """What one job used at one moment of one of its runs (HTCondor's figures, and the job
    helper's nvidia-smi samples where the workstation does not monitor its GPUs)."""

    class GpuSource(models.TextChoices):
        NONE = "", "Not measured"
        HTCONDOR = "htcondor", "HTCondor's GPU monitor"
        HELPER = "helper", "The job helper's nvidia-smi samples"

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="usage_samples")
    # The run it belongs to (JobCurrentStartDate): an evicted and resumed job has several.
    run_started_at = models.DateTimeField()
    workstation = models.CharField(max_length=200, blank=True)
    taken_at = models.DateTimeField()
    # Cores kept busy, on average over the run so far (HTCondor's CpusUsage).
    cpus = models.FloatField(null=True, blank=True)
    memory_mb = models.FloatField(null=True, blank=True)
    memory_peak_mb = models.FloatField(null=True, blank=True)
    disk_mb = models.FloatField(null=True, blank=True)
    # How busy the job's GPUs were since the previous sample, 0 to 1 per GPU it was given.
    gpu_utilization = models.FloatField(null=True, blank=True)
    # HTCondor's own figure: GPUs' worth of work, averaged over the run so far.
    gpus_busy = models.FloatField(null=True, blank=True)
    # Of the job's GPUs, how many did any work (known from per-device samples).
    gpus_active = models.PositiveSmallIntegerField(null=True, blank=True)
    gpu_memory_mb = models.FloatField(null=True, blank=True)
    gpu_source = models.CharField(max_length=20, choices=GpuSource.choices, blank=True)
    # From the job's final ad (history), after it left the queue.
    final = models.BooleanField(default=False)

    class Meta:
        ordering = ["job_id", "taken_at", "id"]
        indexes = [models.Index(fields=["job", "-taken_at"], name="usage_sample_job_latest")]

    def __str__(self) -> str:
        return f"{self.job_id} at {self.taken_at:%Y-%m-%d %H:%M:%S}"


class JobUsageSummary(models.Model):
    """What a job used over its whole life, beside what it asked for; written once it ends.

    Reports group these by user and lab (copied from the job, as usage records are)."""

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="usage_summary")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    lab = models.ForeignKey(
        "labs.Lab", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    ended_at = models.DateTimeField()
    measured_s = models.FloatField(default=0, help_text="Wall time the figures cover.")
    samples = models.PositiveIntegerField(default=0)
    cpus_requested = models.PositiveSmallIntegerField(default=0)
    memory_requested_mb = models.PositiveIntegerField(default=0)
    disk_requested_mb = models.PositiveIntegerField(default=0)
    gpus_requested = models.PositiveSmallIntegerField(default=0)
    cpus_used = models.FloatField(null=True, blank=True)
    memory_peak_mb = models.FloatField(null=True, blank=True)
    disk_peak_mb = models.FloatField(null=True, blank=True)
    # Average busy share of each GPU it asked for (0.35: 35 %), over the time measured.
    gpu_utilization = models.FloatField(null=True, blank=True)
    gpus_active = models.PositiveSmallIntegerField(null=True, blank=True)
    # Share of the measured time its GPUs did nothing (data loading, waiting).
    gpu_idle_share = models.FloatField(null=True, blank=True)
    gpu_memory_peak_mb = models.FloatField(null=True, blank=True)
    gpu_source = models.CharField(max_length=20, choices=UsageSample.GpuSource.choices, blank=True)
    # GPU-hours held (wall time x GPUs, from the usage records), and of them those idle.
    gpu_hours = models.FloatField(default=0)
    idle_gpu_hours = models.FloatField(default=0)
    # The GPUs' energy above their idle draw, from the job helper's power samples (usage.energy).
    gpu_energy_kwh = models.FloatField(null=True, blank=True)
    co2e_kg = models.FloatField(null=True, blank=True)
    energy_simulated = models.BooleanField(default=False, db_default=False)
    energy_idle_estimated = models.BooleanField(default=False, db_default=False)

    class Meta:
        ordering = ["-ended_at"]
        indexes = [models.Index(fields=["lab", "ended_at"]), models.Index(fields=["ended_at"])]
        verbose_name_plural = "job usage summaries"

    def __str__(self) -> str:
        return f"usage of {self.job_id}"

    @property
    def gpu_measured(self) -> bool:
        return self.gpu_utilization is not None

    @property
    def energy_text(self) -> str:
        return energy_text(self.gpu_energy_kwh, self.co2e_kg)

    @property
    def energy_note(self) -> str:
        """How far the energy figure can be trusted, in words; "" where fully measured."""
        notes = []
        if self.energy_simulated:
            notes.append("simulated GPUs: the figures are the simulator's, not a meter's")
        if self.energy_idle_estimated:
            notes.append("idle draw taken as the lowest the job's samples saw")
        return "; ".join(notes)

    @property
    def memory_text(self) -> str:
        if self.memory_peak_mb is None:
            return "not measured"
        return f"{size_text(self.memory_peak_mb)} of {size_text(self.memory_requested_mb)}"
