import pytest
from django.core.management import call_command

from tests.factories import LabFactory

pytestmark = pytest.mark.django_db


def test_the_config_names_every_labs_group_with_equal_shares(capsys):
    LabFactory(name="Vision")
    LabFactory(name="NLP; rm -rf /")
    call_command("fair_share_config")
    out = capsys.readouterr().out
    assert "GROUP_NAMES = group_nlp_rm_rf, group_vision, nightshift" in out
    assert "GROUP_QUOTA_DYNAMIC_group_vision = 0.3333" in out
    assert "GROUP_ACCEPT_SURPLUS = True" in out
