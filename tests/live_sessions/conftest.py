import pytest

from labs.models import Membership
from tests.factories import LabFactory, MembershipFactory, UserFactory
from tests.live_sessions.harness import ProxyServer, StandInJob, StandInTunnels


@pytest.fixture
def stand_in_job(tmp_path_factory):
    job = StandInJob(tmp_path_factory.mktemp("job"))
    yield job
    job.stop()


@pytest.fixture
def tunnels(stand_in_job):
    return StandInTunnels(stand_in_job)


@pytest.fixture
def proxy(tunnels):
    server = ProxyServer(tunnels)
    yield server
    server.stop()


@pytest.fixture
def lab_with_people(transactional_db):
    lab = LabFactory(name="Vision")
    owner, lead, stranger = (
        UserFactory(username="ada"),
        UserFactory(username="lead"),
        UserFactory(username="eve"),
    )
    MembershipFactory(lab=lab, user=owner)
    MembershipFactory(lab=lab, user=lead, role=Membership.Role.LEAD)
    return lab, owner, lead, stranger
