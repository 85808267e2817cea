"""Dataset files for tests: folders, archives of them and uploads."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

from django.core.files.uploadedfile import SimpleUploadedFile


def png_bytes(colour=(200, 30, 30), size=(40, 30)) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, format="PNG")
    return out.getvalue()


SAMPLE = {
    "train.csv": "x,y\n1,2\n3,4\n5,6\n",
    "labels.jsonl": '{"id": 1, "label": "cat"}\n{"id": 2, "label": "dog"}\n',
    "images/cat.png": png_bytes(),
    "images/dog.png": png_bytes((30, 30, 200)),
}


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, body in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body.encode() if isinstance(body, str) else body)
    return root


def zip_of(files: dict[str, str | bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, body in files.items():
            archive.writestr(name, body)
    return out.getvalue()


def tar_gz_of(members: list[tarfile.TarInfo], bodies: dict[str, bytes] | None = None) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for info in members:
            body = (bodies or {}).get(info.name)
            archive.addfile(info, io.BytesIO(body) if body is not None else None)
    return out.getvalue()


def upload(body: bytes, name: str = "data.zip") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, body, content_type="application/octet-stream")
