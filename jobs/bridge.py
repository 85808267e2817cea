"""The one place that picks and configures the HTCondor bridge for the portal."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from django.conf import settings

from condor_bridge import FileMode
from plumbing.metrics import schedd_call_done


@dataclass(frozen=True)
class BridgeSettings:
    """Everything that decides which bridge the portal talks to."""

    kind: str
    collector: str
    schedd_name: str | None
    token_dir: str
    mode: FileMode
    instance: str

    @classmethod
    def current(cls, schedd: str = "") -> BridgeSettings:
        """For `schedd`, by its collector name; "": the default one (CONDOR_SCHEDD_NAME, or
        the collector's only schedd), where every job went before there were several."""
        spool = schedd in settings.CONDOR_SPOOL_SCHEDDS
        return cls(
            kind=settings.CONDOR_BRIDGE,
            collector=settings.CONDOR_COLLECTOR,
            schedd_name=schedd or settings.CONDOR_SCHEDD_NAME,
            token_dir=str(settings.CONDOR_TOKEN_DIR),
            mode=FileMode.SPOOL if spool else FileMode(settings.CONDOR_FILE_MODE),
            instance=settings.NIGHTSHIFT_INSTANCE,
        )


def get_bridge(schedd: str = ""):
    """The bridge to `schedd` ("": the default one) the settings name, made once per
    distinct settings.

    Keyed on the settings rather than made once for good: a bridge made while settings were
    overridden (a request a test's browser sent as the test ended, say) must not outlive the
    override and answer for the restored settings. CI once lost a dozen tests to a fake
    bridge cached that way.
    """
    return bridge_for(BridgeSettings.current(schedd))


@cache
def bridge_for(chosen: BridgeSettings):
    if chosen.kind == "fake":
        from condor_bridge.fake import FakeBridge

        return FakeBridge(
            mode=chosen.mode,
            instance=chosen.instance,
            observer=schedd_call_done,
            schedd_name=chosen.schedd_name,
        )
    from condor_bridge.schedd import HTCondorBridge

    return HTCondorBridge(
        collector=chosen.collector,
        schedd_name=chosen.schedd_name,
        token_dir=chosen.token_dir,
        mode=chosen.mode,
        instance=chosen.instance,
        observer=schedd_call_done,
    )


# A fresh bridge next time (a test's fresh fake, or the pool after a restart).
get_bridge.cache_clear = bridge_for.cache_clear  # type: ignore[attr-defined]
