"""An in-memory bridge with the real bridge's API, for fast unit tests.

The contract tests (tests/condor_bridge/test_bridge_contract.py) run the same assertions
against this fake and against the personal pool, so that the two cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from .observe import Observer, timed
from .states import STATUS_TO_STATE, files_never_arrived
from .submit import FOLDER_READY_ATTR, build_cluster_description, build_submit_description
from .types import (
    JOB_ID_PATTERN,
    WITHDRAWN_ID,
    WITHDRAWN_REASON,
    BridgeError,
    ClusterMaking,
    FileMode,
    GpuModel,
    JobObservation,
    JobRequest,
    JobState,
    JobUsage,
    PoolMachine,
    SubmitResult,
    adopted_cluster,
    made,
    not_made_yet,
)

# The same four workstations the personal pool simulates (deploy/personal-pool/).
PERSONAL_POOL = (
    PoolMachine(
        "ws-ampere", "Unclaimed", 2, 2, 4096, 4096, 1, 1, GpuModel("A100-SXM4-40GB", 47661, 8.0)
    ),
    PoolMachine(
        "ws-fermi", "Unclaimed", 2, 2, 4096, 4096, 1, 1, GpuModel("GeForce GTX 480", 1536, 2.0)
    ),
    PoolMachine("ws-office", "Unclaimed", 2, 2, 4096, 4096),
    PoolMachine(
        "ws-volta",
        "Unclaimed",
        4,
        4,
        8192,
        8192,
        2,
        2,
        GpuModel("Tesla V100-PCIE-16GB", 24220, 7.0),
    ),
)

FAKE_SCHEDD_NAME = "fake-schedd"
# Where a cluster's template takes a value from each run's item (build_cluster_description).
_ITEM_MACRO = re.compile(r"\$\((nsv\d+)\)")
_FINAL = (JobState.COMPLETED, JobState.REMOVED)
_RUN_STATES = (JobState.RUNNING, JobState.TRANSFERRING, JobState.SUSPENDED)
# HTCondor's JobStatus numbers; a job spooling its input is held (5) in the real queue.
_STATUS_CODE = {state: code for code, state in STATUS_TO_STATE.items()}


class FakeBridge:
    def __init__(
        self,
        *,
        mode: FileMode = FileMode.SHARED,
        instance: str = "default",
        machines: Iterable[PoolMachine] = PERSONAL_POOL,
        observer: Observer | None = None,
        schedd_name: str | None = None,
        pool_schedds: Iterable[str] | None = None,
    ) -> None:
        if not JOB_ID_PATTERN.fullmatch(instance):
            raise ValueError(f"instance {instance!r} must be letters, digits and dashes")
        # The one schedd a fake stands for; several fakes (one per name) are several schedds.
        self.schedd_name = schedd_name or FAKE_SCHEDD_NAME
        # The schedds the fake pool's collector lists: a fake for a schedd not among them
        # answers nothing, as the real bridge then locates none.
        self.pool_schedds = sorted(pool_schedds or [self.schedd_name])
        self.mode = FileMode(mode)
        self.instance = instance
        self.observer = observer
        self.machines = list(machines)
        self.submitted: dict[str, dict[str, str]] = {}  # job id -> submit description
        self.actions: list[tuple[str, int, int, str]] = []
        self.retrieved: list[tuple[int, int]] = []
        self.submit_calls = 0
        self.down = False  # True: every call fails as if the schedd were unreachable
        # Raised between a spool-mode submit and its spool, as by a submitter killed there:
        # the job stays in the queue awaiting its input files, as HTCondor keeps it.
        self.spool_fault: type[BaseException] | None = None
        self.withdrawn: list[JobObservation] = []  # jobs taken out for input that never came
        self._jobs: dict[str, JobObservation] = {}
        # Earlier copies of an id submitted again without looking first: HTCondor queues a
        # second job beside the first, each with its own cluster.
        self._earlier_copies: list[JobObservation] = []
        self._sweeps: dict[str, str] = {}  # job id -> the sweep whose cluster it is in
        # Late clusters: the runs the schedd has yet to make, in order, and how many of the
        # cluster's jobs it keeps in its queue at once; the cluster's own folder-ready value,
        # which the jobs made later take.
        self._unmade: dict[int, list[tuple[str, dict[str, str]]]] = {}
        self._at_most: dict[int, int] = {}
        self._next_proc: dict[int, int] = {}
        self._cluster_ready: dict[int, str] = {}
        self._usage: dict[str, dict[str, float]] = {}  # job id -> measured figures
        self._clusters = itertools.count(1)
        self._lock = threading.Lock()

    # -- test controls ---------------------------------------------------------------
    def set_state(
        self, job_id: str, state: JobState, *, at: datetime | None = None, **fields: object
    ) -> JobObservation:
        """Move a job as HTCondor would; leaving the queue when it reaches a final state.

        HTCondor's accounting follows along: a run that ends adds its wall time, and its
        committed time when the job completed (`committed_s` overrides, as a checkpoint
        would). `at` dates the change (default: now).
        """
        committed_s = fields.pop("committed_s", None)
        with self._lock:
            job = self._jobs[job_id]
            now = at or datetime.now(tz=UTC)
            changes: dict[str, object] = {"state": state, "entered_state_at": now}
            if job.run_started_at is not None and state not in _RUN_STATES:
                run_s = max((now - job.run_started_at).total_seconds(), 0.0)
                done = run_s if state is JobState.COMPLETED else 0.0
                changes |= {
                    "wall_time_s": job.wall_time_s + run_s,
                    "committed_time_s": job.committed_time_s
                    + (done if committed_s is None else float(committed_s)),
                    "run_started_at": None,
                    "last_workstation": job.workstation,
                    "last_pool": job.pool,
                }
                if state in (JobState.IDLE, JobState.HELD, JobState.REMOVED):
                    changes["last_vacated_at"] = now
            if state is JobState.RUNNING and job.run_started_at is None:
                if self.submitted.get(job_id, {}).get(f"My.{FOLDER_READY_ATTR}") == "false":
                    # HTCondor matches no run whose folder the portal has not said is ready.
                    raise AssertionError(f"job {job_id} started before its folder was ready")
                gpus = int(self.submitted.get(job_id, {}).get("request_gpus", 0))
                changes |= {
                    "num_starts": job.num_starts + 1,
                    "started_at": now,
                    "run_started_at": now,
                    "gpus_assigned": gpus,
                    "workstation": self._workstation_for(gpus),
                    "pool": "",  # the home pool, unless the test says it flocked (pool=...)
                }
            if state in _FINAL:
                changes |= {"in_queue": False, "finished_at": now}
            if state is not JobState.TRANSFERRING:
                # As HTCondor's ads say: only a job held for its input files awaits them.
                changes["awaiting_input"] = False
            changes |= fields
            self._jobs[job_id] = dataclasses.replace(job, **changes)
            if state in _FINAL:
                self._make_late_jobs(job.cluster_id)
            return self._jobs[job_id]

    def set_usage(self, job_id: str, **figures: float | None) -> None:
        """What HTCondor has measured of the job so far (JobUsage's measured fields:
        cpus_used, memory_mb, memory_peak_mb, disk_mb, gpus_used, gpu_memory_peak_mb)."""
        allowed = {
            "cpus_used",
            "memory_mb",
            "memory_peak_mb",
            "disk_mb",
            "gpus_used",
            "gpu_memory_peak_mb",
        }
        if set(figures) - allowed:
            raise TypeError(f"not a measured figure: {sorted(set(figures) - allowed)}")
        with self._lock:
            self._usage.setdefault(job_id, {}).update(figures)

    def _usage_of(self, job: JobObservation) -> JobUsage:
        description = self.submitted.get(job.job_id, {})
        return JobUsage(
            job_id=job.job_id,
            state=job.state,
            in_queue=job.in_queue,
            workstation=job.workstation,
            num_starts=job.num_starts,
            run_started_at=job.run_started_at,
            cpus_requested=int(description.get("request_cpus", 0)),
            memory_requested_mb=int(description.get("request_memory", 0)),
            disk_requested_mb=int(description.get("request_disk", 0)) // 1024,
            gpus_requested=int(description.get("request_gpus", 0)),
            **self._usage.get(job.job_id, {}),
        )

    def _workstation_for(self, gpus: int) -> str:
        """The first workstation with enough GPUs, as the negotiator would pick one."""
        fitting = [m.name for m in self.machines if m.total_gpus >= gpus]
        return fitting[0] if fitting else ""

    def _check_up(self, action: str) -> None:
        # Named as the real bridge names its calls to the observer.
        call = "collector" if action in ("pool status", "schedd list") else action
        call = "act" if call in ("remove", "hold", "release", "vacate") else call
        with timed(self.observer, call):
            if self.down:
                raise BridgeError(
                    f"{action}: Failed to connect to schedd (fake is down)", transient=True
                )
            if call != "collector" and self.schedd_name not in self.pool_schedds:
                raise BridgeError(
                    f"cannot locate the schedd: the collector lists no {self.schedd_name!r}",
                    transient=True,
                )

    # -- the real bridge's API -------------------------------------------------------
    def description(self, request: JobRequest) -> dict[str, str]:
        return build_submit_description(request, mode=self.mode, instance=self.instance)

    def submit(
        self,
        request: JobRequest,
        *,
        check_existing: bool = True,
        submitted_after: datetime | None = None,
    ) -> SubmitResult:
        self._check_up("submit")
        if check_existing:
            existing = self.find(request.job_id, submitted_after=submitted_after)
            if existing is not None and files_never_arrived(existing):
                self._withdraw(existing.cluster_id)
                existing = None
            if existing is not None:
                return SubmitResult(existing.cluster_id, existing.proc_id, adopted=True)
        description = self.description(request)
        with self._lock:
            self.submit_calls += 1
            cluster = next(self._clusters)
            self.submitted[request.job_id] = description
            self._keep_earlier_copy(request.job_id)
            self._jobs[request.job_id] = JobObservation(
                job_id=request.job_id,
                cluster_id=cluster,
                proc_id=0,
                state=JobState.TRANSFERRING if self.mode is FileMode.SPOOL else JobState.IDLE,
                in_queue=True,
                status_detail="uploading input" if self.mode is FileMode.SPOOL else "",
                awaiting_input=self.mode is FileMode.SPOOL,
                entered_state_at=datetime.now(tz=UTC),
            )
        if self.mode is FileMode.SPOOL:
            self._spool([request.job_id])
        return SubmitResult(cluster, 0, adopted=False)

    def submit_cluster(
        self,
        requests: list[JobRequest],
        *,
        sweep_id: str,
        check_existing: bool = True,
        descriptions: list[dict[str, str]] | None = None,
        folders_ready: bool = True,
        materialize_at_most: int | None = None,
    ) -> list[SubmitResult]:
        self._check_up("submit")
        if check_existing:
            making = next(
                (
                    ClusterMaking(
                        cluster, self._next_proc[cluster], self._next_proc[cluster] + len(unmade)
                    )
                    for cluster, unmade in self._unmade.items()
                    if any(self._sweeps.get(job_id) == sweep_id for job_id, _ in unmade)
                ),
                None,
            )
            found = self.find_sweep(sweep_id, expected=len(requests))
            stranded = {run.cluster_id for run in found if files_never_arrived(run)}
            for cluster_id in stranded:
                self._withdraw(cluster_id)
            adopted = adopted_cluster(
                requests, [r for r in found if r.cluster_id not in stranded], sweep_id, making
            )
            if adopted is not None:
                return adopted
        template, items = build_cluster_description(
            requests,
            mode=self.mode,
            sweep_id=sweep_id,
            instance=self.instance,
            descriptions=descriptions,
            folders_ready=folders_ready,
            materialize_at_most=materialize_at_most,
        )
        with self._lock:
            self.submit_calls += 1
            cluster = next(self._clusters)
            # What each run's ad gets: the template with its own item values.
            runs = [
                (
                    request.job_id,
                    {
                        key: _ITEM_MACRO.sub(lambda name, item=item: item[name.group(1)], value)
                        for key, value in template.items()
                    },
                )
                for request, item in zip(requests, items, strict=True)
            ]
            for job_id, _ in runs:
                self._sweeps[job_id] = sweep_id
            self._unmade[cluster] = runs
            self._at_most[cluster] = materialize_at_most or len(runs)
            self._cluster_ready[cluster] = template.get(f"My.{FOLDER_READY_ATTR}", "true")
            self._next_proc[cluster] = 0
            self._make_late_jobs(cluster)
        if self.mode is FileMode.SPOOL:
            self._spool([request.job_id for request in requests])
        return [SubmitResult(cluster, proc, adopted=False) for proc in range(len(requests))]

    def _make_late_jobs(self, cluster: int) -> None:
        """As the schedd does (the caller holds the lock): the cluster's next runs become
        jobs while it has fewer than its limit in the queue (all at once for a cluster not
        made late)."""
        unmade = self._unmade.get(cluster)
        if not unmade:
            return
        in_queue = sum(
            1 for job in self._jobs.values() if job.cluster_id == cluster and job.in_queue
        )
        while unmade and in_queue < self._at_most[cluster]:
            job_id, description = unmade.pop(0)
            if f"My.{FOLDER_READY_ATTR}" in description:
                description[f"My.{FOLDER_READY_ATTR}"] = self._cluster_ready[cluster]
            self.submitted[job_id] = description
            self._keep_earlier_copy(job_id)
            self._jobs[job_id] = JobObservation(
                job_id=job_id,
                cluster_id=cluster,
                proc_id=self._next_proc[cluster],
                state=JobState.TRANSFERRING if self.mode is FileMode.SPOOL else JobState.IDLE,
                in_queue=True,
                status_detail="uploading input" if self.mode is FileMode.SPOOL else "",
                awaiting_input=self.mode is FileMode.SPOOL,
                entered_state_at=datetime.now(tz=UTC),
            )
            self._next_proc[cluster] += 1
            in_queue += 1
        if not unmade:
            del self._unmade[cluster]

    def clusters_making(self) -> dict[int, int]:
        self._check_up("query")
        with self._lock:
            return {cluster: self._next_proc[cluster] for cluster in self._unmade}

    def _keep_earlier_copy(self, job_id: str) -> None:
        earlier = self._jobs.get(job_id)
        if earlier is not None and earlier.in_queue:
            self._earlier_copies.append(earlier)

    def _spool(self, job_ids: list[str]) -> None:
        if self.spool_fault is not None:
            raise self.spool_fault
        for job_id in job_ids:
            self.set_state(job_id, JobState.IDLE, status_detail="", awaiting_input=False)

    def withdraw(self, cluster_id: int) -> None:
        self._check_up("act")
        self._withdraw(cluster_id)

    def _withdraw(self, cluster_id: int) -> None:
        """As the real bridge does: the cluster's jobs leave under an id no job has."""
        with self._lock:
            for job_id, job in list(self._jobs.items()):
                if job.cluster_id == cluster_id:
                    self.withdrawn.append(
                        dataclasses.replace(
                            job,
                            job_id=WITHDRAWN_ID,
                            state=JobState.REMOVED,
                            in_queue=False,
                            status_detail=WITHDRAWN_REASON,
                            awaiting_input=False,
                        )
                    )
                    del self._jobs[job_id]
                    self._sweeps.pop(job_id, None)

    def find_sweep(self, sweep_id: str, *, expected: int) -> list[JobObservation]:
        self._check_up("query")
        if not JOB_ID_PATTERN.fullmatch(sweep_id):
            raise ValueError(f"not a Nightshift sweep id: {sweep_id!r}")
        return [
            self._jobs[job_id]
            for job_id, sweep in self._sweeps.items()
            if sweep == sweep_id and job_id in self._jobs
        ]

    def find(
        self, job_id: str, *, submitted_after: datetime | None = None
    ) -> JobObservation | None:
        self._check_up("query")
        if not JOB_ID_PATTERN.fullmatch(job_id):
            raise ValueError(f"not a Nightshift job id: {job_id!r}")
        return self._jobs.get(job_id)

    def job_ad(self, job_id: str) -> dict[str, Any] | None:
        """The attributes the real ad would have that matter to Nightshift's admins."""
        self._check_up("query")
        job = self._jobs.get(job_id)
        if job is None:
            return None
        description = self.submitted[job_id]
        ad: dict[str, Any] = {
            "ClusterId": job.cluster_id,
            "ProcId": job.proc_id,
            "JobStatus": _STATUS_CODE[job.state],
            "NightshiftJobId": job_id,
            "NightshiftInstance": self.instance,
            "RequestCpus": int(description["request_cpus"]),
            "AcctGroup": description["accounting_group"],
        }
        if "accounting_group_user" in description:
            ad["AcctGroupUser"] = description["accounting_group_user"]
        if "request_gpus" in description:
            ad["RequestGPUs"] = int(description["request_gpus"])
        if f"My.{FOLDER_READY_ATTR}" in description:
            ad[FOLDER_READY_ATTR] = description[f"My.{FOLDER_READY_ATTR}"] == "true"
        return dict(sorted(ad.items()))

    def active_jobs(self) -> list[JobObservation]:
        self._check_up("query")
        return [job for job in [*self._earlier_copies, *self._jobs.values()] if job.in_queue]

    def finished_jobs(self, job_ids: Iterable[str]) -> list[JobObservation]:
        self._check_up("history")
        found = []
        for job_id in set(job_ids):
            if not JOB_ID_PATTERN.fullmatch(job_id):
                raise ValueError(f"not a Nightshift job id: {job_id!r}")
            job = self._jobs.get(job_id)
            if job is not None and not job.in_queue:
                found.append(job)
        return found

    def running_usage(self) -> list[JobUsage]:
        self._check_up("query")
        return [
            self._usage_of(job)
            for job in self._jobs.values()
            if job.in_queue and job.state is JobState.RUNNING
        ]

    def finished_usage(self, job_ids: Iterable[str]) -> list[JobUsage]:
        return [self._usage_of(job) for job in self.finished_jobs(job_ids)]

    def _by_cluster(self, cluster_id: int, proc_id: int) -> JobObservation | None:
        for job in [*self._earlier_copies, *self._jobs.values()]:
            if (job.cluster_id, job.proc_id) == (cluster_id, proc_id):
                return job
        return None

    def act(
        self, action: str, cluster_id: int, proc_id: int, reason: str = "", reason_code: int = 1
    ) -> None:
        if action not in ("remove", "hold", "release", "vacate"):
            raise ValueError(f"unknown action {action!r}")
        self._check_up(action)
        self.actions.append((action, cluster_id, proc_id, reason))
        job = self._by_cluster(cluster_id, proc_id)
        if job is None and not made((cluster_id, proc_id), self.clusters_making()):
            raise not_made_yet(action, cluster_id, proc_id)
        if job is None or not job.in_queue:
            return
        if job in self._earlier_copies:
            if action == "remove":
                with self._lock:
                    self._earlier_copies.remove(job)
            return
        if action == "remove":
            self.set_state(job.job_id, JobState.REMOVED, status_detail=reason)
        elif action == "hold":
            self.set_state(
                job.job_id,
                JobState.HELD,
                hold_reason=reason or "Python-initiated action",
                hold_reason_code=1,
                hold_reason_subcode=reason_code if reason else 0,
            )
        elif action == "release" and job.state is JobState.HELD:
            self.set_state(
                job.job_id,
                JobState.IDLE,
                hold_reason="",
                hold_reason_code=None,
                hold_reason_subcode=None,
            )
        elif action == "vacate" and job.state is JobState.RUNNING:
            self.set_state(job.job_id, JobState.IDLE)

    def release_runs(self, cluster_id: int, below_proc: int | None) -> None:
        self._check_up("edit")
        with self._lock:
            if below_proc is None and cluster_id in self._cluster_ready:
                self._cluster_ready[cluster_id] = "true"
            for job in self._jobs.values():
                description = self.submitted.get(job.job_id, {})
                if (
                    job.in_queue
                    and job.cluster_id == cluster_id
                    and (below_proc is None or job.proc_id < below_proc)
                    and description.get(f"My.{FOLDER_READY_ATTR}") == "false"
                ):
                    description[f"My.{FOLDER_READY_ATTR}"] = "true"

    def remove_sweep(self, sweep_id: str, reason: str) -> None:
        self._check_up("remove")
        if not JOB_ID_PATTERN.fullmatch(sweep_id):
            raise ValueError(f"not a Nightshift sweep id: {sweep_id!r}")
        with self._lock:
            for cluster, unmade in list(self._unmade.items()):
                if any(self._sweeps.get(job_id) == sweep_id for job_id, _ in unmade):
                    # The schedd removes the cluster's own ad, and with it the runs to make.
                    for job_id, _ in unmade:
                        self._sweeps.pop(job_id, None)
                    del self._unmade[cluster]
        for job_id, sweep in list(self._sweeps.items()):
            job = self._jobs[job_id]
            if sweep == sweep_id and job.in_queue:
                self.actions.append(("remove", job.cluster_id, job.proc_id, reason))
                self.set_state(job_id, JobState.REMOVED, status_detail=reason)

    def retrieve(self, cluster_id: int, proc_id: int) -> None:
        self._check_up("retrieve")
        if self.mode is FileMode.SPOOL:
            self.retrieved.append((cluster_id, proc_id))

    def pool_machines(self) -> list[PoolMachine]:
        self._check_up("pool status")
        return list(self.machines)

    def schedulers(self) -> list[str]:
        self._check_up("schedd list")
        return list(self.pool_schedds)

    def ping(self) -> None:
        self._check_up("query")
