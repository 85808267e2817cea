"""The OpenAPI document: generated without warnings, valid, complete, and true of the API."""

import json

import pytest
import schemathesis
from django.core.management import call_command
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import positive_data_acceptance

from accounts import services as account_services


def generated_schema(tmp_path) -> dict:
    out = tmp_path / "schema.json"
    # --fail-on-warn turns any drf-spectacular warning into a failure; --validate checks
    # the document against the OpenAPI 3 specification.
    call_command(
        "spectacular",
        "--validate",
        "--fail-on-warn",
        "--format",
        "openapi-json",
        "--file",
        str(out),
    )
    return json.loads(out.read_text())


@pytest.mark.django_db
def test_the_schema_generates_without_warnings_and_validates(tmp_path):
    schema = generated_schema(tmp_path)
    assert schema["openapi"].startswith("3.")
    assert "/api/v1/jobs/" in schema["paths"]


@pytest.mark.django_db
def test_every_operation_has_a_summary_and_every_field_a_description(tmp_path):
    schema = generated_schema(tmp_path)
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            assert operation.get("summary"), f"{method.upper()} {path} has no summary"
    for name, component in schema["components"]["schemas"].items():
        for field, spec in component.get("properties", {}).items():
            assert spec.get("description"), f"{name}.{field} is not described"


@pytest.mark.django_db
def test_the_schema_and_the_docs_are_served(client):
    schema = client.get(reverse("api:schema"), {"format": "json"})
    assert schema.status_code == 200
    assert json.loads(schema.content)["info"]["title"] == "Nightshift API"
    docs = client.get(reverse("api:docs"))
    assert docs.status_code == 200
    assert b"swagger-ui" in docs.content
    assert b"cdn.jsdelivr" not in docs.content  # served from static/, works offline


@pytest.fixture
def live_schema(live_server, fake_bridge, django_user_model):
    user = django_user_model.objects.create_user("fuzzer", password="a-long-test-password")
    secret = account_services.token_create(user=user, name="schemathesis").secret
    schema = schemathesis.openapi.from_url(f"{live_server.url}/api/v1/schema/?format=json")
    schema.config.headers = {"Authorization": f"Bearer {secret}"}
    return schema


# positive_data_acceptance is left out on purpose: the schema cannot say that a script must
# end in .py or that a request must fit some workstation, so schema-valid input may be
# refused, with a 400 that names the field. Every other check runs, negative data included.
# Examples per operation: enough to find a 500 or a lie in the schema, small enough for CI.
EXAMPLES_PER_OPERATION = 10


@pytest.mark.timeout(600)
def test_the_live_api_never_fails_and_conforms_to_its_schema(live_schema):
    """Schemathesis against the running server: no 500s; statuses, types, bodies as documented."""
    failures = []
    for result in live_schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case):
            case.call_and_validate(excluded_checks=[positive_data_acceptance])

        try:
            check()
        except (Exception, BaseExceptionGroup) as exc:  # gather every operation's failure
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)


@pytest.mark.django_db
def test_a_strict_validator_accepts_the_document(tmp_path):
    # drf-spectacular's own --validate checks the document's shape; openapi-spec-validator
    # also checks that every example and default fits its own schema, as strict clients and
    # gateways do.
    from openapi_spec_validator import validate

    validate(generated_schema(tmp_path))
