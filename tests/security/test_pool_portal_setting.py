"""`pool portal URL TOKEN_FILE` writes the URL into HTCondor's configuration: only a plain
http(s) URL gets there. Anything else is refused before the pool is touched."""

import subprocess
from pathlib import Path

import pytest

POOL = Path(__file__).resolve().parents[2] / "deploy/personal-pool/pool"


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/$(touch /tmp/owned)",
        "http://127.0.0.1:8000/\nSTART = True",
        "http://127.0.0.1:8000/ `id`",
        "ftp://127.0.0.1/",
        "http://user@127.0.0.1/",
    ],
)
def test_a_url_that_is_not_plain_is_refused(url, tmp_path):
    token = tmp_path / "kit.token"
    token.write_text("nightshift_x\n")
    root = tmp_path / "root"
    done = subprocess.run(
        [str(POOL), "portal", url, str(token)],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "NIGHTSHIFT_POOL_ROOT": str(root)},
        timeout=30,
    )
    assert done.returncode != 0
    assert "not a plain http(s) URL" in done.stderr or "usage: pool portal" in done.stderr
    assert not root.exists()
