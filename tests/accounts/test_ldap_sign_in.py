"""LDAP sign-in end to end against a real OpenLDAP server (Debian's slapd) that the tests start."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from labs.models import Lab, Membership
from tests.helpers import free_port

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BASE = "dc=campus,dc=example"
ADMIN_DN, ADMIN_PASSWORD = f"cn=admin,{BASE}", "directory-admin-secret"
VISION_DN = f"cn=vision,ou=groups,{BASE}"
SLAPD_CONF = """
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile {dir}/slapd.pid
database mdb
maxsize 10485760
suffix "{base}"
rootdn "{admin}"
rootpw {password}
directory {dir}/db
"""


@pytest.fixture(scope="module")
def slapd(tmp_path_factory):
    """A throw-away OpenLDAP server on a loopback port, loaded with tests/fixtures/campus.ldif."""
    folder = tmp_path_factory.mktemp("slapd")
    (folder / "db").mkdir()
    conf = folder / "slapd.conf"
    conf.write_text(
        SLAPD_CONF.format(dir=folder, base=BASE, admin=ADMIN_DN, password=ADMIN_PASSWORD)
    )
    uri = f"ldap://127.0.0.1:{free_port()}"
    server = subprocess.Popen(
        ["/usr/sbin/slapd", "-d", "0", "-h", f"{uri}/", "-f", str(conf)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    load = [
        "ldapadd",
        "-x",
        "-H",
        uri,
        "-D",
        ADMIN_DN,
        "-w",
        ADMIN_PASSWORD,
        "-f",
        str(FIXTURES / "campus.ldif"),
    ]
    for _ in range(50):
        if subprocess.run(load, capture_output=True).returncode == 0:
            break
        time.sleep(0.2)
    else:
        server.kill()
        pytest.fail(f"slapd did not start: {server.stderr.read().decode()[-2000:]}")
    yield uri
    server.terminate()
    server.wait(timeout=10)


@pytest.fixture
def ldap_settings(settings, slapd):
    import ldap
    from django_auth_ldap.config import GroupOfNamesType, LDAPSearch

    settings.AUTH_LDAP_SERVER_URI = slapd
    settings.AUTH_LDAP_BIND_DN = ADMIN_DN
    settings.AUTH_LDAP_BIND_PASSWORD = ADMIN_PASSWORD
    settings.AUTH_LDAP_USER_SEARCH = LDAPSearch(
        f"ou=people,{BASE}", ldap.SCOPE_SUBTREE, "(uid=%(user)s)"
    )
    settings.AUTH_LDAP_USER_ATTR_MAP = {
        "first_name": "givenName",
        "last_name": "sn",
        "email": "mail",
    }
    settings.AUTH_LDAP_GROUP_SEARCH = LDAPSearch(
        f"ou=groups,{BASE}", ldap.SCOPE_SUBTREE, "(objectClass=groupOfNames)"
    )
    settings.AUTH_LDAP_GROUP_TYPE = GroupOfNamesType()
    backends = list(settings.AUTHENTICATION_BACKENDS)
    backends.insert(1, "django_auth_ldap.backend.LDAPBackend")
    settings.AUTHENTICATION_BACKENDS = backends
    return settings


def sign_in(client, username, password):
    return client.post(reverse("login"), {"username": username, "password": password})


def test_a_directory_user_signs_in_and_joins_the_lab_of_their_group(client, ldap_settings):
    vision = Lab.objects.create(name="Vision", ldap_group=VISION_DN)
    Lab.objects.create(name="NLP", ldap_group=f"cn=nlp,ou=groups,{BASE}")
    response = sign_in(client, "grace", "grace-ldap-secret")
    assert response.status_code == 302
    grace = get_user_model().objects.get(username="grace")
    assert (grace.email, grace.get_full_name()) == ("grace@campus.example", "Grace Hopper")
    assert [m.lab for m in Membership.objects.filter(user=grace)] == [vision]
    assert Membership.objects.get(user=grace).source == "ldap"


def test_leaving_the_group_leaves_the_lab_but_not_a_lab_joined_by_hand(client, ldap_settings):
    nlp = Lab.objects.create(name="NLP", ldap_group=f"cn=nlp,ou=groups,{BASE}")
    hand_made = Lab.objects.create(name="Robotics", ldap_group=f"cn=robotics,ou=groups,{BASE}")
    grace = get_user_model().objects.create_user("grace")
    Membership.objects.create(lab=nlp, user=grace, source="ldap")  # she was in nlp once
    Membership.objects.create(lab=hand_made, user=grace)
    sign_in(client, "grace", "grace-ldap-secret")
    assert list(Membership.objects.filter(user=grace).values_list("lab__name", flat=True)) == [
        "Robotics"
    ]


def test_a_wrong_directory_password_is_refused(client, ldap_settings):
    response = sign_in(client, "grace", "not-her-password")
    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.content.decode()
    assert not get_user_model().objects.filter(username="grace").exists()


def test_local_accounts_still_sign_in_beside_ldap(client, ldap_settings, student):
    assert sign_in(client, "student", "a-long-test-password").status_code == 302


def test_the_environment_turns_ldap_on(tmp_path):
    """The settings module wires django-auth-ldap from NIGHTSHIFT_LDAP_* variables."""
    probe = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.AUTHENTICATION_BACKENDS[1]); print(s.AUTH_LDAP_USER_SEARCH.base_dn); "
        "print(s.AUTH_LDAP_GROUP_SEARCH.base_dn)"
    )
    env = os.environ | {
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "NIGHTSHIFT_LDAP_URI": "ldap://ldap.example",
        "NIGHTSHIFT_LDAP_USER_BASE": f"ou=people,{BASE}",
        "NIGHTSHIFT_LDAP_GROUP_BASE": f"ou=groups,{BASE}",
    }
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True, cwd=repo
    )
    out = done.stdout.split()
    assert out == ["django_auth_ldap.backend.LDAPBackend", f"ou=people,{BASE}", f"ou=groups,{BASE}"]
