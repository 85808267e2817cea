"""The one place that picks and configures the HTCondor bridge for the portal."""

from __future__ import annotations

from functools import cache

from django.conf import settings

from condor_bridge import FileMode
from plumbing.metrics import schedd_call_done


@cache
def get_bridge():
    if settings.CONDOR_BRIDGE == "fake":
        from condor_bridge.fake import FakeBridge

        return FakeBridge(
            mode=FileMode(settings.CONDOR_FILE_MODE),
            instance=settings.NIGHTSHIFT_INSTANCE,
            observer=schedd_call_done,
        )
    from condor_bridge.schedd import HTCondorBridge

    return HTCondorBridge(
        collector=settings.CONDOR_COLLECTOR,
        schedd_name=settings.CONDOR_SCHEDD_NAME,
        token_dir=str(settings.CONDOR_TOKEN_DIR),
        mode=FileMode(settings.CONDOR_FILE_MODE),
        instance=settings.NIGHTSHIFT_INSTANCE,
        observer=schedd_call_done,
    )
