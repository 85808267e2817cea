"""What users and API clients see does not change when the code moves: every URL route with
its name, and the OpenAPI document, match the snapshots taken before the apps were split.

docs/routes.md, the route map, is made from the same routes. A deliberate change to either
regenerates its snapshot and the map (and shows up in review):
    python tests/portal/test_public_surface.py
"""

import json
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import URLPattern, URLResolver, get_resolver

SNAPSHOTS = Path(__file__).with_name("snapshots")
ROUTE_MAP = Path(__file__).resolve().parents[2] / "docs" / "routes.md"
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


def _code_of(callback) -> str:
    view = getattr(callback, "view_class", None) or getattr(callback, "cls", None) or callback
    return f"{view.__module__}.{view.__qualname__}"


def route_map() -> str:
    """docs/routes.md: every route but the admin's, with the code that answers it."""

    def walk(patterns, prefix: str, namespace: str):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                inner = namespace + (f"{pattern.namespace}:" if pattern.namespace else "")
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern), inner)
            elif isinstance(pattern, URLPattern):
                yield prefix + str(pattern.pattern), namespace + (pattern.name or ""), pattern

    rows = sorted(
        (f"/{route}", name, _code_of(pattern.callback))
        for route, name, pattern in walk(get_resolver().url_patterns, "", "")
        if not route.startswith("admin/")
    )
    lines = [
        "# Routes: from a URL to the code that answers it",
        "",
        "Every URL the portal answers, its name (for `reverse()` and `{% url %}`) and its view.",
        "`/admin/` is Django's admin, built from each app's `admin.py`. This file is generated:",
        "`python tests/portal/test_public_surface.py` writes it, and a test keeps it current.",
        "",
        "| URL | name | view |",
        "| --- | --- | --- |",
    ]
    lines += [f"| `{route}` | `{name or '-'}` | `{code}` |" for route, name, code in rows]
    return "\n".join(lines) + "\n"


def openapi_document(tmp_path: Path) -> dict:
    out = tmp_path / "schema.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(out))
    return json.loads(out.read_text())


def test_every_url_route_and_name_is_the_same():
    assert url_routes() == URLS.read_text().splitlines()


def test_the_route_map_names_the_code_of_every_route():
    assert route_map() == ROUTE_MAP.read_text()


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
    ROUTE_MAP.write_text(route_map())
    with tempfile.TemporaryDirectory() as folder:
        document = openapi_document(Path(folder))
    OPENAPI.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(f"wrote {URLS}, {OPENAPI} and {ROUTE_MAP}")
