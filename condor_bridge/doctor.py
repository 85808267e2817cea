"""Checks of the portal's connection to an HTCondor pool, each with what is wrong and how to
fix it: the token, the collector, the schedd, authentication and authorization, a test
submit and removal, the GPUs the collector knows, the negotiator, and the clocks. Used by
`manage.py condor_doctor`."""

from __future__ import annotations

import base64
import json
import re
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import htcondor2
from htcondor2 import HTCondorException

# The oldest access point the portal's submit descriptions and queries are known to work
# with (23.0 LTS); tested with 23.9 and the 25.x Python bindings.
MINIMUM_VERSION = (23, 0)
CLOCK_WARN_S = 5
CLOCK_FAIL_S = 60
DOCTOR_ATTR = "NightshiftDoctor"
_PARAMS = ("SEC_TOKEN_DIRECTORY", "SEC_CLIENT_AUTHENTICATION_METHODS", "SEC_CLIENT_AUTHENTICATION")


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False  # passed, with something worth knowing


class _Stop(Exception):
    """A check failed that every later check depends on."""


def _token_payload(text: str) -> dict[str, Any] | None:
    parts = text.strip().split(".")
    if len(parts) != 3:
        return None
    try:
        padded = parts[1] + "=" * (-len(parts[1]) % 4)
        return json.loads(base64.urlsafe_b64decode(padded))
    except ValueError:
        return None


def _check_tokens(token_dir: str | None) -> Check:
    name = "token"
    if not token_dir:
        return Check(
            name,
            False,
            "No token directory is set.",
            "Set CONDOR_TOKEN_DIR to the folder of the portal's IDTOKEN.",
        )
    folder = Path(token_dir)
    create = (
        f"On the access point: condor_token_create -identity nightshift@<UID_DOMAIN> "
        f"-authz READ -authz WRITE > {folder}/portal.token; then chmod 600 it and "
        "make the portal's account its owner."
    )
    if not folder.is_dir():
        return Check(name, False, f"{folder} does not exist.", create)
    files = [p for p in sorted(folder.iterdir()) if p.is_file() and not p.name.startswith(".")]
    if not files:
        return Check(name, False, f"{folder} holds no token.", create)
    problems, found = [], []
    for path in files:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            problems.append(
                f"{path.name} is readable by others (mode {mode:o}); HTCondor "
                "ignores such a token without a word"
            )
            continue
        try:
            payload = _token_payload(path.read_text())
        except OSError as exc:
            problems.append(f"{path.name} cannot be read: {exc.strerror}")
            continue
        if payload is None:
            problems.append(f"{path.name} is not an IDTOKEN")
            continue
        expires = payload.get("exp")
        if expires is not None and expires < time.time():
            ended = time.strftime("%Y-%m-%d", time.gmtime(expires))
            problems.append(f"{path.name} expired on {ended}")
            continue
        scope = payload.get("scope", "")
        found.append(
            f"{path.name}: {payload.get('sub', '?')} from {payload.get('iss', '?')}"
            + (f", limited to {scope}" if scope else "")
        )
    if not found:
        return Check(
            name,
            False,
            "; ".join(problems) + ".",
            f"chmod 600 the token files, or make a new token. {create}",
        )
    detail = "; ".join(found) + ("" if not problems else f" (ignored: {'; '.join(problems)})")
    return Check(name, True, detail, warning=bool(problems))


def _version(text: str) -> tuple[int, int] | None:
    match = re.search(r"\$CondorVersion: (\d+)\.(\d+)", text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def diagnose(
    *, collector: str, schedd_name: str | None, token_dir: str | None, probe_dir: str
) -> Iterator[Check]:
    """Every check in order; a failure that the rest depend on ends the list early. The
    process's HTCondor configuration is put back afterwards."""
    saved = {name: htcondor2.param.get(name) for name in _PARAMS}
    try:
        if token_dir:
            htcondor2.param["SEC_TOKEN_DIRECTORY"] = token_dir
        htcondor2.param["SEC_CLIENT_AUTHENTICATION_METHODS"] = "IDTOKENS"
        yield _check_tokens(token_dir)
        try:
            schedd_ad = yield from _collector_and_schedd(collector, schedd_name)
            identity = yield from _authentication(schedd_ad)
            yield from _submit_and_remove(schedd_ad, identity, probe_dir)
        except _Stop:
            return
        yield _gpus(collector)
        yield _negotiator(collector)
    finally:
        for name, value in saved.items():
            if value is not None:
                htcondor2.param[name] = value


def _collector_and_schedd(collector: str, schedd_name: str | None):
    try:
        pool = htcondor2.Collector(collector)
        ads = pool.query(htcondor2.AdType.Schedd, projection=["Name", "CondorVersion"])
    except (HTCondorException, OSError, RuntimeError) as exc:
        yield Check(
            "collector",
            False,
            f"The collector at {collector} does not answer: {exc}",
            "Check CONDOR_COLLECTOR (host or host:port), that condor_collector runs "
            "there, and that a firewall lets this host reach its port (9618).",
        )
        raise _Stop from exc
    names = sorted(str(ad.get("Name")) for ad in ads)
    yield Check(
        "collector",
        True,
        f"{collector} answers; it knows "
        f"{len(names)} schedd{'s' if len(names) != 1 else ''}"
        + (f" ({', '.join(names[:5])})" if names else ""),
    )
    wanted = f"named {schedd_name!r}" if schedd_name else "at all"
    try:
        if schedd_name:
            schedd_ad = pool.locate(htcondor2.DaemonType.Schedd, schedd_name)
        else:
            schedd_ad = pool.locate(htcondor2.DaemonType.Schedd)
    except (HTCondorException, OSError, RuntimeError, ValueError):
        schedd_ad = None
    if schedd_ad is None:
        yield Check(
            "schedd",
            False,
            f"The collector knows no schedd {wanted}: it is not "
            "running, or reports to another collector.",
            "On the access point: condor_status -schedd, and start it "
            "(condor_on -daemon schedd, or systemctl start condor). If it runs under "
            "another name, set CONDOR_SCHEDD_NAME to that name.",
        )
        raise _Stop
    version = str(schedd_ad.get("CondorVersion", ""))
    parsed = _version(version)
    too_old = parsed is not None and parsed < MINIMUM_VERSION
    yield Check(
        "schedd",
        not too_old,
        f"{schedd_ad.get('Name')} at {schedd_ad.get('MyAddress')}, "
        f"{version.strip('$ ') or 'version unknown'}",
        "Nightshift needs HTCondor 23.0 or newer on the access point." if too_old else "",
    )
    if too_old:
        raise _Stop
    return schedd_ad


def _ping(schedd_ad, authz: str, *, authenticate: bool):
    """HTCondor skips authentication for what anybody may do (READ, often): `authenticate`
    insists, so that the answer names who the schedd thinks the portal is."""
    previous = htcondor2.param.get("SEC_CLIENT_AUTHENTICATION", "OPTIONAL")
    htcondor2.param["SEC_CLIENT_AUTHENTICATION"] = "REQUIRED" if authenticate else "OPTIONAL"
    try:
        return htcondor2.ping(schedd_ad, authz)
    finally:
        htcondor2.param["SEC_CLIENT_AUTHENTICATION"] = previous


def _authentication(schedd_ad):
    try:
        seen_as = _ping(schedd_ad, "READ", authenticate=True)
    except (HTCondorException, OSError, RuntimeError) as exc:
        try:
            _ping(schedd_ad, "READ", authenticate=False)
        except (HTCondorException, OSError, RuntimeError):
            yield Check(
                "authentication",
                False,
                f"The schedd does not answer: {exc}",
                "The collector still lists it, so it may be starting or stopping, or "
                "a firewall blocks its port from this host.",
            )
            raise _Stop from exc
        yield Check(
            "authentication",
            False,
            "The schedd answers but did not accept the portal's token.",
            "The token is not signed by this pool's keys (made for another pool, or "
            "the pool's signing key changed), or the access point does not accept "
            "IDTOKENS (SEC_DEFAULT_AUTHENTICATION_METHODS). Make a new one on the "
            "access point with condor_token_create and replace the file in "
            "CONDOR_TOKEN_DIR.",
        )
        raise _Stop from exc
    identity = str(seen_as.get("MyRemoteUserName", ""))
    yield Check(
        "authentication",
        True,
        f"The schedd knows the portal as {identity} ({seen_as.get('AuthMethods', '?')}).",
    )
    try:
        allowed = _ping(schedd_ad, "WRITE", authenticate=True).get("AuthorizationSucceeded")
    except (HTCondorException, OSError, RuntimeError):
        allowed = False
    if not allowed:
        yield Check(
            "authorization",
            False,
            f"{identity} may read the queue but not submit.",
            f"On the access point, add {identity} to ALLOW_WRITE (or "
            "SCHEDD.ALLOW_WRITE) and run condor_reconfig; a token made with -authz "
            "must include WRITE.",
        )
        raise _Stop
    yield Check("authorization", True, f"{identity} may submit and remove jobs.")
    return identity


def _submit_and_remove(schedd_ad, identity: str, probe_dir: str):
    schedd = htcondor2.Schedd(schedd_ad)
    probe = htcondor2.Submit(
        {
            "executable": "/bin/true",
            "hold": "true",
            "initialdir": probe_dir,
            "should_transfer_files": "NO",
            f"My.{DOCTOR_ATTR}": "true",
            "hold_reason": "condor_doctor's test job; removed at once",
        }
    )
    before = time.time()
    try:
        result = schedd.submit(probe, count=1)
    except (HTCondorException, OSError, RuntimeError) as exc:
        yield Check(
            "submit",
            False,
            f"The schedd refused a test job from {identity}: {exc}",
            "Its reason is above. A 'not a valid user account' reason means the "
            "token's identity must be a real account on the access point.",
        )
        raise _Stop from exc
    after = time.time()
    job = f"{result.cluster()}.{result.first_proc()}"
    try:
        ads = schedd.query(constraint=f"ClusterId == {result.cluster()}", projection=["QDate"])
        queued_at = int(ads[0]["QDate"]) if ads else None
        schedd.act(htcondor2.JobAction.Remove, job, reason=("condor_doctor test job", 1))
        left = _wait(
            lambda: (
                not [
                    ad
                    for ad in schedd.query(
                        constraint=f"ClusterId == {result.cluster()}", projection=["JobStatus"]
                    )
                    if ad["JobStatus"] != 3
                ]
            )
        )
    except (HTCondorException, OSError, RuntimeError) as exc:
        yield Check(
            "submit",
            False,
            f"Test job {job} was submitted but could not be removed: {exc}",
            f"Remove it by hand: condor_rm {job}",
        )
        raise _Stop from exc
    yield Check(
        "submit",
        left,
        f"Test job {job} submitted and removed in {time.time() - before:.2f} s."
        if left
        else f"Test job {job} did not leave the queue within 10 s of its removal.",
        "" if left else f"Look at it: condor_q -l {job}",
    )
    if queued_at is not None:
        yield _clock(queued_at, before, after)


def _clock(queued_at: int, before: float, after: float) -> Check:
    # QDate is the schedd's clock when it queued the job, in whole seconds, sometime between
    # `before` and `after` on ours.
    if queued_at < int(before) - 1:
        skew = queued_at - before
    elif queued_at > after + 1:
        skew = queued_at - after
    else:
        skew = 0.0
    direction = "behind" if skew < 0 else "ahead of"
    detail = (
        f"The schedd's clock is {abs(skew):.0f} s {direction} this host's."
        if skew
        else "The schedd's clock agrees with this host's."
    )
    fix = (
        "Run NTP on both hosts (chrony or systemd-timesyncd): job times, usage and the "
        "search of the history for finished jobs all depend on it."
    )
    if abs(skew) > CLOCK_FAIL_S:
        return Check("clock", False, detail, fix)
    return Check(
        "clock",
        True,
        detail,
        fix if abs(skew) > CLOCK_WARN_S else "",
        warning=abs(skew) > CLOCK_WARN_S,
    )


def _gpus(collector: str) -> Check:
    from .machines import MACHINE_PROJECTION, machines_from_slot_ads

    try:
        ads = htcondor2.Collector(collector).query(
            htcondor2.AdType.Startd, constraint="true", projection=MACHINE_PROJECTION
        )
    except (HTCondorException, OSError, RuntimeError) as exc:
        return Check("gpus", False, f"The collector's list of workstations cannot be read: {exc}")
    machines = machines_from_slot_ads(ads)
    total = sum(m.total_gpus for m in machines)
    with_gpus = sum(1 for m in machines if m.total_gpus)
    models = sorted({m.gpu.name for m in machines if m.gpu and m.gpu.name})
    if not machines:
        return Check(
            "gpus",
            False,
            "The collector lists no workstation at all.",
            "Join the workstations to this pool (deploy/execute-node/join-pool.sh) "
            "and check that their condor_startd reports to this collector.",
        )
    if not total:
        return Check(
            "gpus",
            False,
            f"{len(machines)} workstations report no GPU.",
            "On each workstation: `use FEATURE : GPUs` in its configuration, then "
            "condor_gpu_discovery -properties must list the cards "
            "(deploy/execute-node/README.md).",
        )
    return Check(
        "gpus",
        True,
        f"{total} GPUs on {with_gpus} of {len(machines)} workstations"
        + (f" ({', '.join(models[:4])})" if models else "")
        + ".",
    )


_NEGOTIATOR_PROJECTION = [
    "Name",
    "LastNegotiationCycleEnd0",
    "LastNegotiationCyclePeriod0",
    "LastNegotiationCycleMatches0",
    "LastNegotiationCycleNumIdleJobs0",
    "LastNegotiationCycleSubmittersFailed0",
]
# A negotiator whose last cycle ended longer ago than this many periods (and at least
# NEGOTIATOR_STALE_MIN_S) has stopped cycling.
NEGOTIATOR_STALE_PERIODS = 5
NEGOTIATOR_STALE_MIN_S = 300
RESTART_NEGOTIATOR = (
    "On the central manager: condor_restart -daemon negotiator, then read "
    "its NegotiatorLog (condor_config_val NEGOTIATOR_LOG) for why it stopped "
    "matching."
)


def _negotiator(collector: str, now: float | None = None) -> Check:
    """Whether the pool's matchmaker runs, and talked to every schedd in its last cycle."""
    try:
        ads = htcondor2.Collector(collector).query(
            htcondor2.AdType.Negotiator, projection=_NEGOTIATOR_PROJECTION
        )
    except (HTCondorException, OSError, RuntimeError) as exc:
        return Check("negotiator", False, f"The collector's negotiator ad cannot be read: {exc}")
    if not ads:
        return Check(
            "negotiator",
            False,
            "No negotiator reports to the collector: nothing matches jobs to "
            "workstations, so every job stays idle.",
            "On the central manager: NEGOTIATOR must be in DAEMON_LIST; start it with "
            "condor_on -daemon negotiator and read its NegotiatorLog for why it "
            "stopped.",
        )
    ad = ads[0]
    name = ad.get("Name", "the negotiator")
    ended = int(ad.get("LastNegotiationCycleEnd0", 0) or 0)
    period = int(ad.get("LastNegotiationCyclePeriod0", 0) or 0)
    age = (now if now is not None else time.time()) - ended
    limit = max(NEGOTIATOR_STALE_PERIODS * period, NEGOTIATOR_STALE_MIN_S)
    if not ended or age > limit:
        since = (
            "has not finished a cycle" if not ended else f"last finished a cycle {age:.0f} s ago"
        )
        return Check(
            "negotiator",
            False,
            f"Negotiator {name} {since} (it cycles every {period} s): idle jobs are "
            "not being matched.",
            RESTART_NEGOTIATOR,
        )
    failed = str(ad.get("LastNegotiationCycleSubmittersFailed0", "") or "").strip()
    if failed:
        return Check(
            "negotiator",
            False,
            f"Negotiator {name} could not negotiate with {failed} in its last cycle: "
            "it cannot reach their schedd, so their jobs are never matched.",
            RESTART_NEGOTIATOR + " A line like 'failed to create non-negotiated "
            "security session' means it holds a stale session with a restarted "
            "schedd; the restart clears it.",
        )
    return Check(
        "negotiator",
        True,
        f"Negotiator {name} cycles every {period} s; its last cycle {age:.0f} s ago "
        f"matched {ad.get('LastNegotiationCycleMatches0', 0)} of "
        f"{ad.get('LastNegotiationCycleNumIdleJobs0', 0)} idle jobs.",
    )


def _wait(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.25)
    return condition()
