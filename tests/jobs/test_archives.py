"""Project archives are checked before use; hostile ones are refused with a clear reason."""

import io
import stat
import tarfile
import zipfile

import pytest

from jobs.archives import ArchiveError, ArchiveLimits, check_archive, extract_archive

LIMITS = ArchiveLimits(max_files=100, max_expanded_bytes=10 * 2**20)


def make_zip(path, members):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def make_tar(path, members, *, links=()):
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for name, target, kind in links:
            info = tarfile.TarInfo(name)
            info.type = kind
            info.linkname = target
            archive.addfile(info)
    return path


def test_a_good_project_unpacks_with_its_folders(tmp_path):
    archive = make_zip(tmp_path / "p.zip", {"train.py": b"print(1)", "src/model.py": b"x = 1"})
    target = tmp_path / "out"
    target.mkdir()
    members = extract_archive(archive, target, LIMITS)
    assert {m.name for m in members} == {"train.py", "src/model.py"}
    assert (target / "src" / "model.py").read_bytes() == b"x = 1"


def test_a_tar_gz_project_unpacks_too(tmp_path):
    archive = make_tar(tmp_path / "p.tar.gz", {"./proj/train.py": b"print(1)"})
    target = tmp_path / "out"
    target.mkdir()
    extract_archive(archive, target, LIMITS)
    assert (target / "proj" / "train.py").read_bytes() == b"print(1)"


@pytest.mark.parametrize(
    "name, message",
    [
        ("../evil.py", "'..' would reach outside"),
        ("a/../../evil.py", "'..' would reach outside"),
        ("/etc/cron.d/evil", "absolute paths"),
        ("ok/line\nbreak", "control characters"),
        ("dir\\..\\evil", "control characters or backslashes"),
        (".nightshift/nightshift.py", "used by Nightshift itself"),
        ("-rf/x.py", "top-level names"),
    ],
)
def test_zip_slip_and_odd_names_are_refused(tmp_path, name, message):
    archive = make_zip(tmp_path / "evil.zip", {"train.py": b"", name: b"x"})
    with pytest.raises(ArchiveError, match=message):
        check_archive(archive, LIMITS)


def test_a_zip_symlink_is_refused(tmp_path):
    path = tmp_path / "link.zip"
    with zipfile.ZipFile(path, "w") as archive:
        info = zipfile.ZipInfo("passwd")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(info, "/etc/passwd")
    with pytest.raises(ArchiveError, match="symbolic links are not allowed"):
        check_archive(path, LIMITS)


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE])
def test_tar_symlinks_and_hard_links_are_refused(tmp_path, kind):
    archive = make_tar(tmp_path / "l.tar.gz", {"train.py": b""}, links=[("x", "/etc/passwd", kind)])
    with pytest.raises(ArchiveError, match="links are not allowed"):
        check_archive(archive, LIMITS)


def test_a_tar_device_is_refused(tmp_path):
    path = tmp_path / "dev.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        info = tarfile.TarInfo("null")
        info.type = tarfile.CHRTYPE
        archive.addfile(info)
    with pytest.raises(ArchiveError, match="only files and folders"):
        check_archive(path, LIMITS)


def test_a_zip_bomb_is_refused_by_its_compression_ratio(tmp_path):
    archive = make_zip(tmp_path / "bomb.zip", {"zeros.bin": b"\0" * (5 * 2**20)})
    with pytest.raises(ArchiveError, match="zip bomb"):
        check_archive(archive, LIMITS)


def test_too_many_files_are_refused(tmp_path):
    archive = make_zip(tmp_path / "many.zip", {f"f{i}.txt": b"x" for i in range(101)})
    with pytest.raises(ArchiveError, match="holds 101 files; the limit is 100"):
        check_archive(archive, LIMITS)


def test_too_large_an_expanded_size_is_refused(tmp_path):
    small = ArchiveLimits(max_files=10, max_expanded_bytes=1000)
    archive = make_tar(tmp_path / "big.tar.gz", {"data.bin": bytes(range(256)) * 8})
    with pytest.raises(ArchiveError, match="expands to"):
        check_archive(archive, small)


def test_a_damaged_archive_says_so(tmp_path):
    path = tmp_path / "broken.zip"
    path.write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(ArchiveError, match="not a readable .zip"):
        check_archive(path, LIMITS)


def test_an_empty_archive_is_refused(tmp_path):
    with pytest.raises(ArchiveError, match="holds no files"):
        check_archive(make_zip(tmp_path / "empty.zip", {}), LIMITS)
