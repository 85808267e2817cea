import pytest

from tests.helpers import OwnerAtDesk, owners_present, wait_for


@pytest.fixture
def desks():
    """Owners who come back to their desks in a test, all gone again after it."""
    owner = OwnerAtDesk()
    yield owner
    owner.leave_all()
    wait_for(lambda: not owners_present(), timeout=60, what="owners gone from every desk")
