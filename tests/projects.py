"""Test projects: archives with a requirements.txt."""

import base64
import hashlib
import io
import zipfile


def tiny_wheel(name: str = "tinypkg", version: str = "0.1") -> tuple[str, bytes]:
    """A real, minimal wheel of a pure-Python package, made in memory."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"GREETING = 'hello from {name} {version}'\n".encode(),
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: nightshift-tests\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        for path, data in files.items():
            wheel.writestr(path, data)
    return f"{name}-{version}-py3-none-any.whl", buffer.getvalue()


def project_zip(members: dict[str, bytes | str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def project_with_requirements() -> bytes:
    """src/train.py imports a package that requirements.txt asks for from the package index."""
    return project_zip(
        {
            "src/train.py": "import sys, tomli_w\n"
            "print('hello from', tomli_w.dumps({'epochs': sys.argv[-1]}).strip())\n"
            "open('outputs/done.txt', 'w').write('ok')\n",
            "requirements.txt": "tomli-w==1.2.0\n",
        }
    )


def project_with_bundled_wheel() -> bytes:
    """requirements.txt installs a wheel the archive carries: a local path, which a site
    accepts only with NIGHTSHIFT_REQUIREMENTS_ALLOW=local."""
    wheel_name, wheel = tiny_wheel()
    return project_zip(
        {
            "src/train.py": "import tinypkg\nprint(tinypkg.GREETING)\n",
            f"wheels/{wheel_name}": wheel,
            "requirements.txt": f"./wheels/{wheel_name}\n",
        }
    )
