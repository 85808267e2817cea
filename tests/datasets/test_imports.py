"""Importing a dataset: an upload or a shared folder is checked, packed once and hashed,
and becomes a version only if every check passes; bad input is refused with its reason and
leaves nothing behind."""

import tarfile

import pytest

from audit.models import AuditEntry
from datasets import services, storage
from datasets.models import Dataset, DatasetImport
from tests.datasets.files import SAMPLE, tar_gz_of, upload, write_tree, zip_of
from tests.factories import LabFactory, MembershipFactory

pytestmark = pytest.mark.django_db


def imported(user, body, name="cats", filename="data.zip", **fields):
    started = services.dataset_import_from_upload(
        user=user, name=name, upload=upload(body, filename), **fields
    )
    return services.dataset_import_run(started.pk)


def nothing_left(settings):
    incoming = settings.DATASETS_DIR / "incoming"
    objects = settings.DATASETS_DIR / "objects"
    return (not incoming.exists() or not any(incoming.iterdir())) and (
        not objects.exists() or not any(objects.iterdir())
    )


def test_an_uploaded_zip_becomes_version_1_with_its_hash_counts_and_preview(student):
    done = imported(student, zip_of(SAMPLE), description="Cats and dogs")
    assert done.state == "done", done.message
    version = done.version
    assert (version.reference, version.file_count, version.source) == ("cats@1", 4, "upload")
    assert version.dataset.description == "Cats and dogs"
    assert storage.archive_path(version.sha256).stat().st_size > version.size_bytes
    assert {t["path"] for t in version.preview["tables"]} == {"train.csv", "labels.jsonl"}
    assert (storage.thumbnails_dir(version.sha256) / "1.png").is_file()
    assert AuditEntry.objects.filter(
        action="dataset.version.create", detail__contains=version.sha256
    ).exists()


def test_a_single_file_is_a_dataset_of_one_file(student):
    done = imported(student, b"a,b\n1,2\n", filename="table.csv")
    assert done.version.preview["files"] == [{"path": "table.csv", "size": 8}]


def test_the_same_content_again_makes_no_new_version_and_says_so(student):
    first = imported(student, zip_of(SAMPLE))
    again = imported(student, tar_gz_of_sample(), filename="data.tar.gz")
    assert again.version == first.version
    assert again.message == "The content is the same as version 1."
    changed = imported(student, zip_of(dict(SAMPLE, extra="1")))
    assert changed.version.number == 2 and changed.version.sha256 != first.version.sha256


def tar_gz_of_sample():
    members, bodies = [], {}
    for name, body in SAMPLE.items():
        data = body.encode() if isinstance(body, str) else body
        info = tarfile.TarInfo(name)
        info.size = len(data)
        members.append(info)
        bodies[name] = data
    return tar_gz_of(members, bodies)


def symlink_member():
    info = tarfile.TarInfo("evil")
    info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
    return tar_gz_of([info])


def escaping_member():
    info = tarfile.TarInfo("../../escaped.txt")
    info.size = 1
    return tar_gz_of([info], {"../../escaped.txt": b"x"})


def device_member():
    info = tarfile.TarInfo("dev")
    info.type = tarfile.CHRTYPE
    return tar_gz_of([info])


@pytest.mark.parametrize(
    "body, filename, reason",
    [
        (lambda: zip_of({"../up.txt": "x"}), "data.zip", "'..' would reach outside"),
        (lambda: zip_of({"/etc/cron.d/x": "x"}), "data.zip", "absolute paths"),
        (lambda: zip_of({"bomb.bin": b"\0" * 5_000_000}), "data.zip", "zip bomb"),
        (symlink_member, "data.tar.gz", "links are not allowed"),
        (escaping_member, "data.tar.gz", "'..' would reach outside"),
        (device_member, "data.tar.gz", "only files and folders"),
        (lambda: b"PK\x03\x04 not really", "data.zip", "not a readable .zip"),
    ],
)
def test_a_hostile_or_broken_archive_fails_with_its_reason_and_leaves_nothing(
    student, settings, body, filename, reason
):
    done = imported(student, body(), filename=filename)
    assert done.state == "failed" and reason in done.message, done.message
    assert not Dataset.objects.exists()
    assert nothing_left(settings)


def test_too_many_files_fail_with_the_limit(student, settings):
    settings.DATASET_MAX_FILES = 3
    done = imported(student, zip_of(SAMPLE))
    assert done.state == "failed" and "limit is 3" in done.message, done.message


@pytest.mark.parametrize(
    "name", ["../etc", "a/b", "", ".hidden", "x" * 81, "semi;colon", "new\nline", "spa ce"]
)
def test_hostile_names_are_refused_before_anything_is_kept(student, settings, name):
    with pytest.raises(services.DatasetError) as refused:
        services.dataset_import_from_upload(user=student, name=name, upload=upload(b"x", "a.txt"))
    assert refused.value.field == "name"
    assert not DatasetImport.objects.exists() and nothing_left(settings)


def test_an_uploads_own_name_cannot_reach_a_path(student, settings):
    done = imported(student, b"a,b\n", filename="../../../etc/cron.d/x.csv")
    assert [f["path"] for f in done.version.preview["files"]] == ["x.csv"]
    assert not (settings.DATASETS_DIR.parent / "etc").exists()
    with pytest.raises(services.DatasetError, match="name cannot be used"):
        services.dataset_import_from_upload(
            user=student, name="x", upload=upload(b"x", "tab\there.csv")
        )


def test_sharing_needs_a_lab_of_ones_own_and_everyone_needs_an_admin(student):
    other_lab = LabFactory(name="NLP")
    with pytest.raises(services.DatasetError, match="one of your labs"):
        services.dataset_import_from_upload(
            user=student, name="x", upload=upload(b"x", "a.txt"), visibility="lab", lab=other_lab
        )
    with pytest.raises(services.DatasetError, match="Only administrators"):
        services.dataset_import_from_upload(
            user=student, name="x", upload=upload(b"x", "a.txt"), visibility="site"
        )
    MembershipFactory(lab=other_lab, user=student)
    done = services.dataset_import_run(
        services.dataset_import_from_upload(
            user=student,
            name="x",
            upload=upload(b"x", "a.txt"),
            visibility="lab",
            lab=other_lab,
        ).pk
    )
    assert (done.version.dataset.visibility, done.version.dataset.lab) == ("lab", other_lab)


def test_a_shared_folder_is_hashed_in_place_and_nothing_is_copied(student, settings, tmp_path):
    settings.DATASET_ROOTS = [tmp_path / "shared"]
    folder = write_tree(tmp_path / "shared" / "imagenet-mini", SAMPLE)
    started = services.dataset_import_from_path(user=student, name="imagenet", path=str(folder))
    done = services.dataset_import_run(started.pk)
    assert done.state == "done", done.message
    assert (done.version.shared_path, done.version.source) == (str(folder), "path")
    assert not (settings.DATASETS_DIR / "objects").exists() or not any(
        (settings.DATASETS_DIR / "objects").iterdir()
    )
    uploaded = imported(student, zip_of(SAMPLE), name="same-files")
    assert uploaded.version.sha256 == done.version.sha256  # the content decides, not the way in


def test_a_path_outside_the_allowed_roots_is_refused_even_through_a_link(
    student, settings, tmp_path
):
    settings.DATASET_ROOTS = [tmp_path / "shared"]
    (tmp_path / "shared").mkdir()
    secret = write_tree(tmp_path / "home", {"id_rsa": "key"})
    (tmp_path / "shared" / "innocent").symlink_to(secret, target_is_directory=True)
    for path in (
        str(secret),
        str(tmp_path / "shared" / "innocent"),
        str(tmp_path / "shared" / ".." / "home"),
    ):
        with pytest.raises(services.DatasetError, match="outside the shared folders"):
            services.dataset_import_from_path(user=student, name="x", path=path)
    with pytest.raises(services.DatasetError, match="absolute path"):
        services.dataset_import_from_path(user=student, name="x", path="shared/x")
    assert not DatasetImport.objects.exists()


def test_without_shared_roots_a_path_is_refused(student, tmp_path):
    with pytest.raises(services.DatasetError, match="no shared file system"):
        services.dataset_import_from_path(user=student, name="x", path=str(tmp_path))


def test_deleting_removes_stored_content_no_other_version_holds(student, other_student):
    mine = imported(student, zip_of(SAMPLE)).version
    theirs = imported(other_student, zip_of(SAMPLE), name="also-cats").version
    unique = imported(student, zip_of({"only.txt": "mine"}), name="solo").version
    services.dataset_delete(user=student, dataset=unique.dataset)
    assert not storage.archive_path(unique.sha256).exists()
    services.dataset_delete(user=student, dataset=mine.dataset)
    assert storage.archive_path(theirs.sha256).exists()  # the other dataset still holds it
    assert AuditEntry.objects.filter(action="dataset.delete").count() == 2
