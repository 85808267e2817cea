"""The portal's bridge follows its settings: one bridge per distinct settings, never one
left over from settings that no longer hold."""

from django.test import override_settings

from condor_bridge.fake import FakeBridge
from condor_bridge.schedd import HTCondorBridge
from jobs.bridge import get_bridge


@override_settings(CONDOR_BRIDGE="htcondor")
def test_a_fake_made_while_settings_were_overridden_is_gone_once_they_are_restored():
    with override_settings(CONDOR_BRIDGE="fake"):
        during = get_bridge()
    after = get_bridge()
    assert isinstance(during, FakeBridge)
    assert isinstance(after, HTCondorBridge)


@override_settings(CONDOR_BRIDGE="fake", NIGHTSHIFT_INSTANCE="first")
def test_the_same_settings_give_the_same_bridge_and_other_settings_another():
    first = get_bridge()
    assert get_bridge() is first
    with override_settings(NIGHTSHIFT_INSTANCE="second"):
        assert get_bridge().instance == "second"
    assert get_bridge() is first


@override_settings(CONDOR_BRIDGE="fake")
def test_clearing_the_cache_gives_a_fresh_fake_with_no_jobs():
    first = get_bridge()
    get_bridge.cache_clear()
    assert get_bridge() is not first
