"""A BridgeError says whether retrying can help."""

import pytest
from htcondor2 import HTCondorException

from condor_bridge.calls import bridge_error


@pytest.mark.parametrize(
    "error",
    [
        HTCondorException("Failed to connect to schedd, errmsg=CEDAR:6001"),
        HTCondorException("Unable to locate local daemon"),
        ConnectionRefusedError("refused"),
        HTCondorException(
            "Failed to fetch ads from schedd, errmsg=SECMAN:2004:Server rejected our session id"
        ),
        TimeoutError("timed out"),
    ],
)
def test_an_unreachable_schedd_is_transient(error):
    assert bridge_error("submit", error).transient


@pytest.mark.parametrize(
    "error",
    [
        HTCondorException("Submit requirements not met: request_memory too large"),
        ValueError("Invalid submit description"),
    ],
)
def test_a_rejected_description_is_permanent(error):
    failure = bridge_error("submit", error)
    assert not failure.transient
    assert str(failure).startswith("submit: ")


def test_a_read_is_tried_once_more_when_a_restarted_schedd_rejects_the_session():
    from condor_bridge.calls import again_if_session_stale

    calls = []

    def query():
        calls.append(1)
        if len(calls) == 1:
            raise HTCondorException(
                "Failed to fetch ads, SECMAN:2004:Server rejected our session id"
            )
        return ["ad"]

    assert again_if_session_stale(query) == ["ad"] and len(calls) == 2


def test_other_failures_are_not_tried_again():
    calls = []

    def query():
        calls.append(1)
        raise HTCondorException("Failed to connect to schedd")

    from condor_bridge.calls import again_if_session_stale

    with pytest.raises(HTCondorException):
        again_if_session_stale(query)
    assert len(calls) == 1


def test_an_action_is_tried_once_more_when_it_fails_as_after_a_schedd_restart():
    from condor_bridge.calls import again_if_action_failed

    calls = []

    def act():
        calls.append(1)
        if len(calls) == 1:
            raise HTCondorException("Error when performing action on the schedd.")
        return "done"

    assert again_if_action_failed(act) == "done" and len(calls) == 2


def test_an_action_that_fails_twice_or_cannot_connect_says_so():
    from condor_bridge.calls import again_if_action_failed

    calls = []

    def act():
        calls.append(1)
        raise HTCondorException("Error when performing action on the schedd.")

    with pytest.raises(HTCondorException):
        again_if_action_failed(act)
    assert len(calls) == 2

    def unreachable():
        calls.append(1)
        raise HTCondorException("Failed to connect to schedd")

    calls.clear()
    with pytest.raises(HTCondorException, match="connect"):
        again_if_action_failed(unreachable)
    assert len(calls) == 1
