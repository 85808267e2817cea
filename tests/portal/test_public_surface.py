"""What users and API clients see does not change when the code moves: every URL route with
its name, and the OpenAPI document, match the snapshots taken before the apps were split.

A deliberate change to either regenerates its snapshot (and shows up in review):
    python tests/portal/test_public_surface.py
"""

import json
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import URLPattern, URLResolver, get_resolver

SNAPSHOTS = Path(__file__).with_name("snapshots")
OPENAPI = SNAPSHOTS / "openapi-v1.json"
URLS = SNAPSHOTS / "urls.tsv"


def url_routes() -> list[str]:
    """Every route as "pattern<TAB>namespace:name", sorted."""

    def walk(patterns, prefix: str, namespace: str):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                inner = namespace + (f"{pattern.namespace}:" if pattern.namespace else "")
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern), inner)
            elif isinstance(pattern, URLPattern):
                yield f"{prefix}{pattern.pattern}\t{namespace}{pattern.name or ''}"

    return sorted(route for route in walk(get_resolver().url_patterns, "", "") if route.strip())


def openapi_document(tmp_path: Path) -> dict:
    out = tmp_path / "schema.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(out))
    return json.loads(out.read_text())


def test_every_url_route_and_name_is_the_same():
    assert url_routes() == URLS.read_text().splitlines()


@pytest.mark.django_db
def test_the_openapi_document_is_the_same(tmp_path):
    # Compared as data: key order is not part of the document; list order (parameters,
    # enums, required fields) is fixed by drf-spectacular and is compared.
    assert openapi_document(tmp_path) == json.loads(OPENAPI.read_text())


if __name__ == "__main__":
    import os
    import tempfile

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    django.setup()
    URLS.write_text("\n".join(url_routes()) + "\n")
    with tempfile.TemporaryDirectory() as folder:
        document = openapi_document(Path(folder))
    OPENAPI.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(f"wrote {URLS} and {OPENAPI}")
