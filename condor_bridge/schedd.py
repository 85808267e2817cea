"""The real bridge: every call Nightshift makes to an HTCondor schedd and collector."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import classad2
import htcondor2
from htcondor2 import HTCondorException

from .calls import (
    again_if_action_failed,
    again_if_session_stale,
    bridge_error,
    submit_items_from_file,
)
from .machines import MACHINE_PROJECTION, machines_from_slot_ads
from .observe import Observer, timed
from .states import (
    PROJECTION,
    USAGE_PROJECTION,
    JobAdMemo,
    files_never_arrived,
    map_job_ad,
    map_usage_ad,
)
from .submit import (
    FOLDER_READY_ATTR,
    INSTANCE_ATTR,
    JOB_ID_ATTR,
    SWEEP_ID_ATTR,
    build_cluster_description,
    build_submit_description,
    classad_string,
)
from .types import (
    JOB_ID_PATTERN,
    WITHDRAWN_ID,
    WITHDRAWN_REASON,
    BridgeError,
    ClusterMaking,
    FileMode,
    JobObservation,
    JobRequest,
    JobUsage,
    PoolMachine,
    SubmitResult,
    adopted_cluster,
    made,
    not_made_yet,
)

_ACTIONS = {
    "remove": htcondor2.JobAction.Remove,
    "hold": htcondor2.JobAction.Hold,
    "release": htcondor2.JobAction.Release,
    "vacate": htcondor2.JobAction.Vacate,
}
_config_lock = threading.Lock()
# Allowed clock difference between the portal and the schedd when bounding history scans.
HISTORY_CLOCK_SLACK_S = 300
# HTCondor's SetAttribute_PostSubmitClusterChange, which htcondor2's TransactionFlag does not
# name: an edit of a whole cluster reaches the cluster's own ad as well, so that the jobs a
# late cluster makes afterwards take the new value (condor_qedit sets it for that reason).
CLUSTER_AD_TOO = htcondor2.TransactionFlag(1 << 7)
# A cluster whose schedd has jobs still to make: its own ad (no ProcId) says how far it got.
STILL_MAKING = "ProcId is undefined && JobMaterializeNextProcId < TotalSubmitProcs"


def _id_constraint(job_ids: Iterable[str]) -> str:
    ids = list(job_ids)
    for job_id in ids:
        if not JOB_ID_PATTERN.fullmatch(job_id):
            raise ValueError(f"not a Nightshift job id: {job_id!r}")
    listed = ", ".join(classad_string(job_id) for job_id in ids)
    return f"member({JOB_ID_ATTR}, {{{listed}}})"


def _observed(call: str):
    """Report each call of the method to the bridge's observer: the leaves that talk to a
    daemon, so that no time is counted twice."""

    def wrap(method):
        @functools.wraps(method)
        def observed(self, *args, **kwargs):
            with timed(self.observer, call):
                return method(self, *args, **kwargs)

        return observed

    return wrap


class HTCondorBridge:
    """Talks to one schedd (and its collector) with the portal's IDTOKEN."""

    def __init__(
        self,
        *,
        collector: str = "127.0.0.1:9618",
        schedd_name: str | None = None,
        token_dir: str | None = None,
        mode: FileMode = FileMode.SHARED,
        instance: str = "default",
        timeout_s: int = 20,
        observer: Observer | None = None,
    ) -> None:
        if not JOB_ID_PATTERN.fullmatch(instance):
            raise ValueError(f"instance {instance!r} must be letters, digits and dashes")
        # Sees every call to the schedd or collector (name, seconds, ok): metrics.
        self.observer = observer
        self.collector_address = collector
        self.schedd_name = schedd_name
        self.mode = FileMode(mode)
        self.instance = instance
        self._queue_memo = JobAdMemo()
        with _config_lock:
            if token_dir:
                htcondor2.param["SEC_TOKEN_DIRECTORY"] = token_dir
            htcondor2.param["COLLECTOR_HOST"] = collector
            htcondor2.param["QUERY_TIMEOUT"] = str(timeout_s)
            htcondor2.param["SEC_CLIENT_AUTHENTICATION_METHODS"] = "IDTOKENS"

    # -- connections -----------------------------------------------------------------
    def _collector(self) -> htcondor2.Collector:
        return htcondor2.Collector(self.collector_address)

    def _schedd(self) -> htcondor2.Schedd:
        try:
            if self.schedd_name:
                ad = self._collector().locate(htcondor2.DaemonType.Schedd, self.schedd_name)
            else:
                ad = self._collector().locate(htcondor2.DaemonType.Schedd)
        except (HTCondorException, OSError, ValueError) as exc:
            raise BridgeError(f"cannot locate the schedd: {exc}", transient=True) from exc
        # locate() answers None for a name the collector does not list, and Schedd(None) is
        # the default schedd: the jobs of a stopped schedd would be looked for, and acted
        # on, in another one's queue.
        if ad is None:
            named = repr(self.schedd_name) if self.schedd_name else "schedd"
            raise BridgeError(
                f"cannot locate the schedd: the collector lists no {named}", transient=True
            )
        return htcondor2.Schedd(ad)

    # -- jobs ------------------------------------------------------------------------
    def description(self, request: JobRequest) -> dict[str, str]:
        return build_submit_description(request, mode=self.mode, instance=self.instance)

    def submit(
        self,
        request: JobRequest,
        *,
        check_existing: bool = True,
        submitted_after: datetime | None = None,
    ) -> SubmitResult:
        """Submit exactly once: an id already in the queue or history is adopted.

        A caller that knows no earlier attempt can have reached the schedd passes
        check_existing=False and saves the lookup; `submitted_after` bounds it.
        """
        if check_existing:
            existing = self.find(request.job_id, submitted_after=submitted_after)
            if existing is not None and files_never_arrived(existing):
                self._set_aside(self._schedd(), [existing])
                existing = None
            if existing is not None:
                return SubmitResult(existing.cluster_id, existing.proc_id, adopted=True)
        result = self._submit_to_schedd(htcondor2.Submit(self.description(request)))
        return SubmitResult(result.cluster(), result.first_proc(), adopted=False)

    @_observed("submit")
    def _submit_to_schedd(self, submit: htcondor2.Submit, items: list | None = None) -> Any:
        """One cluster: one job, or one per item of itemdata."""
        schedd = self._schedd()
        spool = self.mode is FileMode.SPOOL
        try:
            if items is None:
                result = schedd.submit(submit, count=1, spool=spool)
            else:
                result = submit_items_from_file(schedd, submit, items, spool=spool)
            if spool:
                try:
                    schedd.spool(result)
                except (HTCondorException, OSError, RuntimeError):
                    # A job whose files never arrived must not wait in the queue forever.
                    self._withdraw(schedd, result.cluster())
                    raise
        except (HTCondorException, OSError, RuntimeError) as exc:
            raise bridge_error("submit", exc) from exc
        return result

    @_observed("act")
    def withdraw(self, cluster_id: int) -> None:
        """Take a cluster whose input files never arrived out of the queue (see _withdraw)."""
        self._withdraw(self._schedd(), cluster_id)

    @staticmethod
    def _withdraw(schedd: htcondor2.Schedd, cluster_id: int) -> None:
        """Take a cluster whose input files never arrived out of the queue. Its ids are
        renamed first: its removed ads stay in the history, where a later look for the job
        (or sweep) submitted again would find them too, and might take them for it."""
        HTCondorBridge._rename_away(schedd, cluster_id)
        try:
            schedd.act(htcondor2.JobAction.Remove, int(cluster_id), reason=WITHDRAWN_REASON)
        except (HTCondorException, OSError, RuntimeError) as exc:
            raise bridge_error("withdraw", exc) from exc

    @staticmethod
    def _set_aside(schedd: htcondor2.Schedd, runs: list[JobObservation]) -> None:
        """Clusters whose files never arrived, out of the way of the retry that submits them
        again: one still waiting for them is withdrawn; one the schedd removed for want of
        them (its submitter stopped mid-spool) is renamed while it is still in the queue."""
        for cluster_id in sorted({run.cluster_id for run in runs}):
            of_cluster = [run for run in runs if run.cluster_id == cluster_id]
            if any(run.awaiting_input for run in of_cluster):
                HTCondorBridge._withdraw(schedd, cluster_id)
            elif any(run.in_queue for run in of_cluster):
                HTCondorBridge._rename_away(schedd, cluster_id)

    @staticmethod
    def _rename_away(schedd: htcondor2.Schedd, cluster_id: int) -> None:
        """A cluster's job and sweep ids renamed, so that no look for the job finds it."""
        try:
            for attr in (JOB_ID_ATTR, SWEEP_ID_ATTR):
                schedd.edit(int(cluster_id), attr, classad_string(WITHDRAWN_ID))
        except (HTCondorException, OSError, RuntimeError) as exc:
            raise bridge_error("withdraw", exc) from exc

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
        """Submit many runs as one cluster with itemdata, exactly once: a cluster that an
        earlier attempt submitted (the schedd creates a cluster whole or not at all) is
        found by its sweep id and adopted. Results come in the order of `requests`.
        `descriptions`: each run's own, as `description(request)` gives it, where the caller
        has built them already (to keep them). `folders_ready=False`: the runs' folders
        may not be whole yet, and no run starts before release_runs says it may.
        `materialize_at_most`: the schedd makes the runs' jobs after the submit, at most
        that many at once (build_cluster_description); run n is then job n of the cluster
        whether or not it is made yet, which is how the runs of a cluster an earlier
        attempt left still making are adopted."""
        if check_existing:
            making = self._sweep_making(sweep_id)
            made_so_far = making.next_proc if making else len(requests)
            found = self.find_sweep(sweep_id, expected=made_so_far)
            unarrived = [run for run in found if files_never_arrived(run)]
            self._set_aside(self._schedd(), unarrived)
            stranded = {run.cluster_id for run in unarrived}
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
        result = self._submit_to_schedd(
            htcondor2.Submit(template), None if len(requests) == 1 else items
        )
        first = result.first_proc()
        return [
            SubmitResult(result.cluster(), first + n, adopted=False) for n in range(len(requests))
        ]

    @_observed("edit")
    def release_runs(self, cluster_id: int, below_proc: int | None) -> None:
        """The runs of a cluster submitted with folders_ready=False whose ProcId is below
        `below_proc` have their folders: HTCondor may start them. Those released before, or
        gone from the queue, are left as they are. `below_proc=None`: every run has its
        folder, those the schedd has yet to make included (the cluster's own ad changes)."""
        constraint = f"ClusterId == {int(cluster_id)}"
        flags = CLUSTER_AD_TOO
        if below_proc is not None:
            constraint += f" && ProcId < {int(below_proc)} && MY.{FOLDER_READY_ATTR} =!= true"
            flags = htcondor2.TransactionFlag.Default
        schedd = self._schedd()
        try:
            schedd.edit(constraint, FOLDER_READY_ATTR, "true", flags=flags)
        except (HTCondorException, OSError, RuntimeError) as exc:
            # The schedd answers a constraint that matches no job with the same error as a
            # failed edit: only a run still waiting makes it one.
            try:
                waiting = schedd.query(constraint, projection=["ProcId"], limit=1)
            except (HTCondorException, OSError, RuntimeError):
                waiting = [None]
            if waiting:
                raise bridge_error("release runs", exc) from exc

    def clusters_making(self) -> dict[int, int]:
        """This instance's clusters whose schedd has jobs still to make (late
        materialization), each with the ProcId it makes next: a recorded job at or past it
        is not gone from the queue, it is not made yet."""
        constraint = f"{INSTANCE_ATTR} == {classad_string(self.instance)} && {STILL_MAKING}"
        ads = self._query(
            constraint,
            ["ClusterId", "JobMaterializeNextProcId"],
            opts=htcondor2.QueryOpt.IncludeClusterAd,
        )
        return {int(ad["ClusterId"]): int(ad["JobMaterializeNextProcId"]) for ad in ads}

    def _sweep_making(self, sweep_id: str) -> ClusterMaking | None:
        """The sweep's cluster, if its schedd has runs of it still to make."""
        if not JOB_ID_PATTERN.fullmatch(sweep_id):
            raise ValueError(f"not a Nightshift sweep id: {sweep_id!r}")
        constraint = f"{SWEEP_ID_ATTR} == {classad_string(sweep_id)} && {STILL_MAKING}"
        ads = self._query(
            constraint,
            ["ClusterId", "JobMaterializeNextProcId", "TotalSubmitProcs"],
            opts=htcondor2.QueryOpt.IncludeClusterAd,
        )
        if not ads:
            return None
        ad = ads[0]
        return ClusterMaking(
            int(ad["ClusterId"]), int(ad["JobMaterializeNextProcId"]), int(ad["TotalSubmitProcs"])
        )

    def find_sweep(self, sweep_id: str, *, expected: int) -> list[JobObservation]:
        """The runs of a sweep's cluster, from the queue and, for those that left it, the
        history (a scan that stops once all `expected` runs are found)."""
        if not JOB_ID_PATTERN.fullmatch(sweep_id):
            raise ValueError(f"not a Nightshift sweep id: {sweep_id!r}")
        constraint = f"{SWEEP_ID_ATTR} == {classad_string(sweep_id)}"
        found = [map_job_ad(ad, in_queue=True) for ad in self._query(constraint)]
        if len(found) < expected:
            found += [
                map_job_ad(ad, in_queue=False)
                for ad in self._history(constraint, expected - len(found))
            ]
        return found

    @_observed("query")
    def _query(
        self,
        constraint: str,
        projection: list[str] = PROJECTION,
        opts: htcondor2.QueryOpt = htcondor2.QueryOpt.Default,
    ) -> list[Any]:
        try:
            return again_if_session_stale(
                lambda: list(
                    self._schedd().query(constraint=constraint, projection=projection, opts=opts)
                )
            )
        except BridgeError:
            raise
        except (HTCondorException, OSError, RuntimeError) as exc:
            raise bridge_error("query", exc) from exc

    @_observed("history")
    def _history(
        self,
        constraint: str,
        match: int,
        since: str | None = None,
        projection: list[str] = PROJECTION,
    ) -> list[Any]:
        try:
            return again_if_session_stale(
                lambda: list(
                    self._schedd().history(
                        constraint=constraint, projection=projection, match=match, since=since
                    )
                )
            )
        except BridgeError:
            raise
        except (HTCondorException, OSError, RuntimeError) as exc:
            raise bridge_error("history", exc) from exc

    def find(
        self, job_id: str, *, submitted_after: datetime | None = None
    ) -> JobObservation | None:
        """The job with this Nightshift id, from the queue or else from the history.

        History is scanned newest first; with `submitted_after` the scan stops at jobs
        that left the queue before then, instead of reading the whole history.
        """
        constraint = _id_constraint([job_id])
        ads = self._query(constraint)
        if ads:
            return map_job_ad(ads[0], in_queue=True)
        since = None
        if submitted_after is not None:
            horizon = int(submitted_after.timestamp()) - HISTORY_CLOCK_SLACK_S
            since = f"EnteredCurrentStatus < {horizon}"
        ads = self._history(constraint, match=1, since=since)
        return map_job_ad(ads[0], in_queue=False) if ads else None

    @_observed("query")
    def job_ad(self, job_id: str) -> dict[str, Any] | None:
        """Every attribute of the job's ad, from the queue or else the history, for admins.

        Plain values stay as they are; expressions become their text.
        """
        constraint = _id_constraint([job_id])
        try:
            schedd = self._schedd()
            ads = list(schedd.query(constraint=constraint)) or list(
                schedd.history(constraint=constraint, projection=[], match=1)
            )
        except BridgeError:
            raise
        except (HTCondorException, OSError, RuntimeError) as exc:
            raise bridge_error("query", exc) from exc
        if not ads:
            return None
        return {key: _plain(value) for key, value in sorted(ads[0].items())}

    def active_jobs(self) -> list[JobObservation]:
        """Every job of this portal instance in the queue, in one query."""
        ads = self._query(f"{INSTANCE_ATTR} == {classad_string(self.instance)}")
        return self._queue_memo.observations(ads, in_queue=True)

    def finished_jobs(self, job_ids: Iterable[str]) -> list[JobObservation]:
        """The given jobs that have left the queue, in one history call."""
        ids = sorted(set(job_ids))
        if not ids:
            return []
        constraint = f"{INSTANCE_ATTR} == {classad_string(self.instance)} && {_id_constraint(ids)}"
        return [map_job_ad(ad, in_queue=False) for ad in self._history(constraint, len(ids))]

    def running_usage(self) -> list[JobUsage]:
        """What every running job of this portal instance uses now, in one query."""
        constraint = f"{INSTANCE_ATTR} == {classad_string(self.instance)} && JobStatus == 2"
        return [
            map_usage_ad(_evaluated(ad), in_queue=True)
            for ad in self._query(constraint, USAGE_PROJECTION)
        ]

    def finished_usage(self, job_ids: Iterable[str]) -> list[JobUsage]:
        """What the given jobs that left the queue used, from their final ads, in one
        history call."""
        ids = sorted(set(job_ids))
        if not ids:
            return []
        constraint = f"{INSTANCE_ATTR} == {classad_string(self.instance)} && {_id_constraint(ids)}"
        ads = self._history(constraint, len(ids), projection=USAGE_PROJECTION)
        return [map_usage_ad(_evaluated(ad), in_queue=False) for ad in ads]

    @_observed("act")
    def act(
        self, action: str, cluster_id: int, proc_id: int, reason: str = "", reason_code: int = 1
    ) -> None:
        """Remove, hold, release or vacate one job. A hold with a reason keeps `reason_code` as
        its HoldReasonSubCode (the code is HTCondor's "user request"), so that Nightshift's
        own holds can be told apart."""
        if action not in _ACTIONS:
            raise ValueError(f"unknown action {action!r}")
        job_spec = f"{int(cluster_id)}.{int(proc_id)}"
        try:
            if reason:
                # htcondor2 drops a plain-string reason; only the (text, code) form
                # reaches the schedd.
                done = again_if_action_failed(
                    lambda: self._schedd().act(
                        _ACTIONS[action], job_spec, reason=(reason, int(reason_code))
                    )
                )
            else:
                done = again_if_action_failed(
                    lambda: self._schedd().act(_ACTIONS[action], job_spec)
                )
        except BridgeError:
            raise
        except (HTCondorException, OSError, RuntimeError) as exc:
            raise bridge_error(action, exc) from exc
        if done.get("TotalNotFound") and not made((cluster_id, proc_id), self.clusters_making()):
            raise not_made_yet(action, cluster_id, proc_id)

    @_observed("act")
    def remove_sweep(self, sweep_id: str, reason: str) -> None:
        """Remove every run of a sweep still in the queue, in one call."""
        if not JOB_ID_PATTERN.fullmatch(sweep_id):
            raise ValueError(f"not a Nightshift sweep id: {sweep_id!r}")
        constraint = (
            f"{INSTANCE_ATTR} == {classad_string(self.instance)} && "
            f"{SWEEP_ID_ATTR} == {classad_string(sweep_id)}"
        )
        try:
            again_if_action_failed(
                lambda: self._schedd().act(
                    htcondor2.JobAction.Remove, constraint, reason=(reason, 1)
                )
            )
        except BridgeError:
            raise
        except (HTCondorException, OSError, RuntimeError) as exc:
            raise bridge_error("remove", exc) from exc

    @_observed("retrieve")
    def retrieve(self, cluster_id: int, proc_id: int) -> None:
        """Bring a spooled job's outputs back into its job folder."""
        if self.mode is not FileMode.SPOOL:
            return
        try:
            self._schedd().retrieve(f"{int(cluster_id)}.{int(proc_id)}")
        except BridgeError:
            raise
        except (HTCondorException, OSError, RuntimeError) as exc:
            raise bridge_error("retrieve", exc) from exc

    # -- pool ------------------------------------------------------------------------
    @_observed("collector")
    def pool_machines(self) -> list[PoolMachine]:
        try:
            ads = self._collector().query(
                htcondor2.AdType.Startd, constraint="true", projection=MACHINE_PROJECTION
            )
        except (HTCondorException, OSError, RuntimeError) as exc:
            raise bridge_error("pool status", exc) from exc
        return machines_from_slot_ads(ads)

    @_observed("collector")
    def schedulers(self) -> list[str]:
        """The names of the schedds the collector knows, this bridge's among them."""
        try:
            ads = self._collector().query(htcondor2.AdType.Schedd, projection=["Name"])
        except (HTCondorException, OSError, RuntimeError) as exc:
            raise bridge_error("schedd list", exc) from exc
        return sorted({str(ad["Name"]) for ad in ads if "Name" in ad})

    def ping(self) -> None:
        """Raise BridgeError unless the schedd answers a query."""
        self._query("false")


def _evaluated(ad: Any) -> dict[str, Any]:
    """The ad's attributes as values: an expression (MemoryUsage is one) evaluated in the ad,
    None where it does not evaluate to a literal."""
    values = {}
    for key, value in ad.items():
        if isinstance(value, classad2.ExprTree):
            try:
                value = ad.eval(key)
            except (ValueError, TypeError, RuntimeError):
                value = None
            if isinstance(value, classad2.ExprTree | classad2.Value):
                value = None
        values[key] = value
    return values


def _plain(value: Any) -> Any:
    """A ClassAd value as Python: literals as they are, expressions as their text."""
    return str(value) if isinstance(value, classad2.ExprTree) else value
