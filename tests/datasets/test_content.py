"""A dataset's files are checked, packed into one canonical archive and hashed: the same
files always give the same SHA-256, whatever their times, owners or the order they were
written in, and the archive holds exactly them."""

import hashlib
import io
import os
import tarfile

import pytest

from datasets import content
from tests.datasets.files import SAMPLE, write_tree

LIMITS = content.Limits(max_files=100, max_bytes=10 * 2**20)


def digest_of(root):
    return content.pack(root, content.dataset_files(root, LIMITS), None)


def test_the_same_files_hash_the_same_whatever_their_times_and_order(tmp_path):
    first = write_tree(tmp_path / "a", SAMPLE)
    second = write_tree(tmp_path / "b", dict(reversed(list(SAMPLE.items()))))
    os.utime(second / "train.csv", (1, 1))
    (second / "labels.jsonl").chmod(0o600)
    assert digest_of(first) == digest_of(second)
    assert digest_of(first).file_count == 4


def test_one_changed_byte_or_name_changes_the_hash(tmp_path):
    base = digest_of(write_tree(tmp_path / "a", SAMPLE))
    changed = dict(SAMPLE, **{"train.csv": "x,y\n1,2\n3,4\n5,7\n"})
    renamed = {("test.csv" if k == "train.csv" else k): v for k, v in SAMPLE.items()}
    assert digest_of(write_tree(tmp_path / "b", changed)).sha256 != base.sha256
    assert digest_of(write_tree(tmp_path / "c", renamed)).sha256 != base.sha256


def test_the_hash_is_the_archives_own_and_the_archive_holds_exactly_the_files(tmp_path):
    root = write_tree(tmp_path / "a", SAMPLE)
    out = io.BytesIO()
    digest = content.pack(root, content.dataset_files(root, LIMITS), out)
    assert hashlib.sha256(out.getvalue()).hexdigest() == digest.sha256
    with tarfile.open(fileobj=io.BytesIO(out.getvalue())) as archive:
        members = archive.getmembers()
        assert [m.name for m in members] == sorted(SAMPLE)
        assert all(m.isfile() and m.mode == 0o444 and m.mtime == 0 for m in members)
        body = archive.extractfile("train.csv").read().decode()
    assert body == SAMPLE["train.csv"]
    assert digest.size_bytes == sum(
        len(v if isinstance(v, bytes) else v.encode()) for v in SAMPLE.values()
    )


def test_links_are_refused_even_inside_the_dataset(tmp_path):
    root = write_tree(tmp_path / "a", {"real.txt": "x"})
    (root / "alias.txt").symlink_to(root / "real.txt")
    with pytest.raises(content.DatasetContentError, match="alias.txt: links are not allowed"):
        content.dataset_files(root, LIMITS)


def test_a_linked_folder_is_refused_rather_than_followed(tmp_path):
    outside = write_tree(tmp_path / "secret", {"key": "hunter2"})
    root = write_tree(tmp_path / "a", {"real.txt": "x"})
    (root / "more").symlink_to(outside, target_is_directory=True)
    with pytest.raises(content.DatasetContentError, match="more: links"):
        content.dataset_files(root, LIMITS)


def test_special_files_are_refused(tmp_path):
    root = write_tree(tmp_path / "a", {"real.txt": "x"})
    os.mkfifo(root / "pipe")
    with pytest.raises(content.DatasetContentError, match="pipe: only files and folders"):
        content.dataset_files(root, LIMITS)


def test_names_with_control_characters_are_refused(tmp_path):
    root = write_tree(tmp_path / "a", {"bad\nname.txt": "x"})
    with pytest.raises(content.DatasetContentError, match="cannot be used"):
        content.dataset_files(root, LIMITS)


def test_too_many_files_or_bytes_are_refused_with_the_limit(tmp_path):
    root = write_tree(tmp_path / "a", {f"{i}.txt": "x" * 10 for i in range(5)})
    with pytest.raises(content.DatasetContentError, match="more than 4 files"):
        content.dataset_files(root, content.Limits(max_files=4, max_bytes=10**6))
    with pytest.raises(content.DatasetContentError, match="GB, the limit"):
        content.dataset_files(root, content.Limits(max_files=100, max_bytes=49))


def test_an_empty_folder_is_not_a_dataset(tmp_path):
    (tmp_path / "a" / "empty").mkdir(parents=True)
    with pytest.raises(content.DatasetContentError, match="no files"):
        content.dataset_files(tmp_path / "a", LIMITS)


def test_the_preview_has_the_file_list_table_rows_and_thumbnails(tmp_path):
    root = write_tree(tmp_path / "a", SAMPLE)
    files = content.dataset_files(root, LIMITS)
    summary = content.preview(root, files, tmp_path / "thumbs")
    assert [f["path"] for f in summary["files"]] == sorted(SAMPLE)
    tables = {t["path"]: t["rows"] for t in summary["tables"]}
    assert tables["train.csv"][:2] == [["x", "y"], ["1", "2"]]
    assert tables["labels.jsonl"][0] == ['{"id": 1, "label": "cat"}']
    assert [i["path"] for i in summary["images"]] == ["images/cat.png", "images/dog.png"]
    from PIL import Image

    with Image.open(tmp_path / "thumbs" / "0.png") as thumbnail:
        assert thumbnail.size == (40, 30) and thumbnail.getpixel((5, 5)) == (200, 30, 30)


def test_a_file_that_only_pretends_to_be_an_image_gets_no_thumbnail(tmp_path):
    root = write_tree(tmp_path / "a", {"fake.png": "not an image", "real.txt": "x"})
    summary = content.preview(root, content.dataset_files(root, LIMITS), tmp_path / "thumbs")
    assert summary["images"] == []


def test_an_image_too_large_to_decode_safely_gets_no_thumbnail(tmp_path, monkeypatch):
    monkeypatch.setattr(content, "MOST_PREVIEW_PIXELS", 1000)  # the sample images have 1200
    root = write_tree(tmp_path / "a", SAMPLE)
    summary = content.preview(root, content.dataset_files(root, LIMITS), tmp_path / "thumbs")
    assert summary["images"] == [] and not list((tmp_path / "thumbs").glob("*.png"))
