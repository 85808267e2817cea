"""Datasets for a job: fetched from the portal once per workstation, then linked in.

The launcher calls `deliver()` before the job's script starts. Each dataset the job was
given (.nightshift/datasets.json) ends up, read-only, at datasets/<name>/ (and each
published model it was given at models/<name>/):

- a version the portal stores is fetched as its canonical archive (an uncompressed tar)
  from the portal, with the job's own credential (.nightshift/credential), checked against
  its SHA-256 while it streams, and unpacked into this workstation's dataset cache;
- a version registered from a shared file system is linked where it is, never copied.

The cache (NIGHTSHIFT_DATA_CACHE, or the workstation's NightshiftDataCache attribute, which
the execute-node kit sets) holds one entry per content:

    CACHE/objects/SHA256/files/      the dataset's files, read-only
    CACHE/objects/SHA256/index.json  each file's size and time, and when it was last hashed
    CACHE/objects/SHA256/COMPLETE    written last: an entry without it was cut short
    CACHE/locks/SHA256.lock          flock: exclusive while fetching, shared while in use
    CACHE/deliveries.jsonl           one line per job and dataset: fetched, or reused

Jobs that start together wait for the one that fetches. Each use compares the files with
the index (a file changed, cut short or removed is found at once), and an entry not hashed
for NIGHTSHIFT_DATA_VERIFY_HOURS is hashed again in full; a damaged entry is fetched again.
Past the cache's size cap the entries used longest ago that no job holds are removed.
Without a cache the job fetches into its own sandbox, for itself only.

Where HTCondor moves a job's files (spool mode), its file-transfer plugin (dataset_plugin.py)
runs this same delivery before the job starts and leaves the launcher a receipt.

Standard library only: it runs with whatever Python the workstation has.
"""

import contextlib
import fcntl
import hashlib
import io
import json
import os
import shutil
import socket
import stat
import tarfile
import time
import urllib.error
import urllib.request

try:
    import cache_keeper
except ImportError:  # imported as jobs.runtime.nightshift_data (the portal's tests)
    from . import cache_keeper

HELPER_DIR = os.path.dirname(os.path.abspath(__file__))
MANIFEST = os.path.join(HELPER_DIR, "datasets.json")
CREDENTIAL = os.path.join(HELPER_DIR, "credential")
# What this job's delivery did, for the job page and the tests: one JSON object per dataset.
REPORT = os.path.join(HELPER_DIR, "datasets-delivered.json")
LINKS = "datasets"
# Published models travel as datasets do, to models/<name> (their records say "folder").
MODEL_LINKS = "models"
FOLDERS = (LINKS, MODEL_LINKS)
# Outside the helper folder, which travels back to the portal (spool mode): data must not.
SANDBOX_CACHE = ".nightshift-data"
COMPLETE = "COMPLETE"
LAST_USED = "LAST_USED"
INDEX = "index.json"
DEFAULT_CACHE_GB = 200.0
DEFAULT_VERIFY_HOURS = 24.0
FETCH_ATTEMPTS = 3
CHUNK = 1024 * 1024
# This workstation's name, as its machine ad gives it (sent with each fetch).
WORKSTATION = [socket.gethostname()]
# The locks on the entries in use: kept open (not collected) so that the job inherits them.
HELD = []


# The receipt the plugin (dataset_plugin.py) leaves at a URL's local file name, which the
# launcher reads; and the name of the job's own copy of the plugin (staging writes it into the
# helper folder; HTCondor puts it at the top of the sandbox).
RECEIPT_KEY = "nightshift-dataset-receipt"
PLUGIN_NAME = "nightshift_dataset_plugin.py"


def use_helper_dir(folder):
    """Points the module at a job's helper folder (the plugin runs from the sandbox's top)."""
    global HELPER_DIR, MANIFEST, CREDENTIAL, REPORT
    HELPER_DIR = folder
    MANIFEST = os.path.join(folder, "datasets.json")
    CREDENTIAL = os.path.join(folder, "credential")
    REPORT = os.path.join(folder, "datasets-delivered.json")


def machine_attribute(name):
    """A string attribute of this workstation's machine ad, or None."""
    path = os.environ.get("_CONDOR_MACHINE_AD") or ".machine.ad"
    try:
        with open(path, encoding="utf-8", errors="replace") as ad:
            for line in ad:
                key, _, value = line.partition("=")
                if key.strip().lower() == name.lower():
                    value = value.strip()
                    if value.startswith('"') and value.endswith('"'):
                        return value[1:-1]
                    return value
    except OSError:
        return None
    return None


class DeliveryError(Exception):
    """A dataset the job cannot have; the message says why, in the user's terms."""


SETTINGS = {  # the variable a test or a site sets, and the kit's machine attribute
    "cache": ("NIGHTSHIFT_DATA_CACHE", "NightshiftDataCache"),
    "cap_gb": ("NIGHTSHIFT_DATA_CACHE_GB", "NightshiftDataCacheGb"),
    "verify_hours": ("NIGHTSHIFT_DATA_VERIFY_HOURS", "NightshiftDataVerifyHours"),
    "keeper": ("NIGHTSHIFT_CACHE_KEEPER", "NightshiftCacheKeeper"),
}


def setting(name, machine_attribute):
    variable, attribute = SETTINGS[name]
    return os.environ.get(variable) or machine_attribute(attribute) or None


def number(text, default):
    try:
        return float(text) if text not in (None, "") else default
    except ValueError:
        return default


class HashingReader(io.RawIOBase):
    """The response's bytes, hashed and counted as tarfile reads them."""

    def __init__(self, stream, progress=None):
        self.stream, self.digest, self.count, self.progress = stream, hashlib.sha256(), 0, progress

    def readable(self):
        return True

    def readinto(self, buffer):
        data = self.stream.read(len(buffer))
        self.digest.update(data)
        self.count += len(data)
        if self.progress is not None:
            self.progress(self.count)
        buffer[: len(data)] = data
        return len(data)

    def drain(self):
        while self.read(CHUNK):
            pass


def safe_member_path(name):
    """A member's path inside the dataset, or None: nothing absolute, no '..', no odd names."""
    if not name or name.startswith("/") or "\\" in name or "\x00" in name:
        return None
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return None
    return parts


def unpack(stream, target, expected):
    """Unpacks a canonical archive into `target`, checking it is what the portal recorded:
    only regular files, safe names, the right SHA-256, file count and size."""
    reader = HashingReader(stream)
    files, size = {}, 0
    with tarfile.open(fileobj=reader, mode="r|") as archive:
        for member in archive:
            parts = safe_member_path(member.name)
            if parts is None or not member.isfile():
                raise DeliveryError(
                    f"the archive of {expected['reference']} holds {member.name!r}, which is "
                    "not a plain file inside it"
                )
            path = os.path.join(target, *parts)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            source = archive.extractfile(member)
            with open(path, "xb") as out:
                shutil.copyfileobj(source, out, CHUNK)
            os.chmod(path, 0o444)
            os.utime(path, (0, 0))
            files["/".join(parts)] = member.size
            size += member.size
    reader.drain()
    if reader.digest.hexdigest() != expected["sha256"]:
        raise DeliveryError(
            f"what arrived for {expected['reference']} has SHA-256 "
            f"{reader.digest.hexdigest()}, not {expected['sha256']}"
        )
    if len(files) != expected["file_count"] or size != expected["size_bytes"]:
        raise DeliveryError(
            f"what arrived for {expected['reference']} has {len(files)} files and "
            f"{size} bytes, not {expected['file_count']} and "
            f"{expected['size_bytes']}"
        )
    for directory, subdirectories, _ in os.walk(target):
        for name in subdirectories:
            os.chmod(os.path.join(directory, name), 0o555)  # noqa: S103 - read-only, for every job
    os.chmod(target, 0o555)  # noqa: S103 - read-only, for every job
    return reader.count


def fetch(dataset, target, credential, log, workstation=None):
    """Fetches and unpacks one dataset from the portal; the bytes received."""
    if not dataset["url"].startswith(("https://", "http://")):
        raise DeliveryError(f"{dataset['reference']} has no portal URL to fetch it from")
    last = None
    for attempt in range(1, FETCH_ATTEMPTS + 1):
        headers = {
            "Authorization": f"Bearer {credential}",
            "User-Agent": "nightshift-launcher",
            "X-Nightshift-Workstation": workstation or WORKSTATION[0],
        }
        request = urllib.request.Request(dataset["url"], headers=headers)  # noqa: S310 - checked above
        try:
            with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - checked above
                return unpack(response, target, dataset)
        except urllib.error.HTTPError as exc:
            detail = exc.read(2000).decode("utf-8", "replace")
            with contextlib.suppress(ValueError, AttributeError, KeyError, TypeError):
                detail = json.loads(detail)["error"]["message"]
            if exc.code in (401, 403, 404, 410):
                raise DeliveryError(
                    f"the portal refused {dataset['reference']}: {detail}"
                ) from None
            last = f"the portal answered {exc.code}: {detail}"
        except (TimeoutError, urllib.error.URLError, ConnectionError, tarfile.TarError) as exc:
            last = str(getattr(exc, "reason", exc))
        log(f"fetching {dataset['reference']} failed (attempt {attempt}): {last}")
        remove_tree(target)
        time.sleep(min(2**attempt, 10))
    raise DeliveryError(f"{dataset['reference']} could not be fetched from the portal: {last}")


def remove_tree(folder):
    """Removes an entry or a partial unpack, read-only folders included; COMPLETE first,
    so that a removal cut short is never taken for complete."""
    if not os.path.lexists(folder):
        return
    with contextlib.suppress(OSError):
        os.remove(os.path.join(folder, COMPLETE))
    for directory, _, _ in os.walk(folder):
        with contextlib.suppress(OSError):
            os.chmod(directory, 0o755)  # noqa: S103 - writable again, to be removed
    shutil.rmtree(folder, ignore_errors=True)


def file_index(files_dir):
    index = {}
    for directory, _, names in os.walk(files_dir):
        for name in names:
            path = os.path.join(directory, name)
            status = os.lstat(path)
            relative = os.path.relpath(path, files_dir).replace(os.sep, "/")
            index[relative] = [status.st_size, status.st_mtime_ns, stat.S_ISREG(status.st_mode)]
    return index


def canonical_digest(files_dir):
    """The SHA-256 of the canonical archive these files make (as the portal packs it)."""
    digest = hashlib.sha256()

    class Sink(io.RawIOBase):
        def writable(self):
            return True

        def write(self, data):
            digest.update(data)
            return len(data)

    with tarfile.open(fileobj=Sink(), mode="w|", format=tarfile.PAX_FORMAT) as archive:
        for relative in sorted(file_index(files_dir)):
            info = tarfile.TarInfo(relative)
            path = os.path.join(files_dir, *relative.split("/"))
            info.size, info.mode, info.mtime = os.lstat(path).st_size, 0o444, 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with open(path, "rb") as data:
                archive.addfile(info, data)
    return digest.hexdigest()


def entry_damage(entry, dataset, verify_hours):
    """Why a complete cache entry cannot be used as it is, or None."""
    try:
        with open(os.path.join(entry, INDEX), encoding="utf-8") as stream:
            recorded = json.load(stream)
    except (OSError, ValueError):
        return "its index is missing"
    files_dir = os.path.join(entry, "files")
    now = file_index(files_dir)
    was = recorded.get("files", {})
    if now != was:
        changed = sorted(name for name in set(now) | set(was) if now.get(name) != was.get(name))
        return f"{len(changed)} of its files changed or went missing ({', '.join(changed[:3])})"
    if time.time() - recorded.get("verified_at", 0) > verify_hours * 3600:
        digest = canonical_digest(files_dir)
        if digest != dataset["sha256"]:
            return f"its files hash to {digest}, not {dataset['sha256']}"
        recorded["verified_at"] = time.time()
        write_index(entry, recorded)
    return None


def write_index(entry, index):
    temporary = os.path.join(entry, INDEX + ".tmp")
    with open(temporary, "w", encoding="utf-8") as stream:
        json.dump(index, stream)
    os.replace(temporary, os.path.join(entry, INDEX))


def find_cache(machine_attribute, log):
    folder = setting("cache", machine_attribute)
    keeper = setting("keeper", machine_attribute)
    if keeper and folder != "none":
        return cache_keeper.KeeperCache(keeper)
    if folder == "none":
        log(
            "the dataset cache is turned off for this job: fetching into its sandbox, for "
            "this job only"
        )
        return None
    if not folder:
        log(
            "this workstation has no dataset cache (the execute-node kit sets "
            "NightshiftDataCache): fetching into the job's sandbox, for this job only"
        )
        return None
    try:
        for part in ("objects", "locks"):
            os.makedirs(os.path.join(folder, part), exist_ok=True)
        probe = os.path.join(folder, "locks", f".probe-{os.getpid()}")
        open(probe, "w").close()  # noqa: SIM115
        os.remove(probe)
    except OSError as exc:
        log(
            f"the dataset cache {folder} cannot be used ({exc.strerror}): fetching into the "
            "job's sandbox, for this job only"
        )
        return None
    return folder


def cached(cache, dataset, credential, log, verify_hours, held=HELD, workstation=None):
    """The folder of `dataset`'s files in the cache, fetched first if no job has (or if the
    entry is damaged); the bytes received. The entry's lock is kept in `held`: for the job's
    life, or by the cache keeper for as long as the job that asked stays connected."""
    sha = dataset["sha256"]
    entry = os.path.join(cache, "objects", sha)
    handle = open(os.path.join(cache, "locks", f"{sha}.lock"), "a")  # noqa: SIM115 - held until exit
    fcntl.flock(handle, fcntl.LOCK_SH)
    received = 0
    damage = None
    if os.path.isfile(os.path.join(entry, COMPLETE)):
        damage = entry_damage(entry, dataset, verify_hours)
        if damage is None:
            log(f"{dataset['reference']}: reusing this workstation's copy, nothing fetched")
    if damage is not None or not os.path.isfile(os.path.join(entry, COMPLETE)):
        fcntl.flock(handle, fcntl.LOCK_UN)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            log(f"{dataset['reference']}: another job is fetching it here; waiting")
            fcntl.flock(handle, fcntl.LOCK_EX)
        complete = os.path.isfile(os.path.join(entry, COMPLETE))
        if complete and damage is None:
            log(f"{dataset['reference']}: another job has just fetched it here, nothing fetched")
        elif complete and entry_damage(entry, dataset, verify_hours) is None:
            log(f"{dataset['reference']}: another job has just fetched it again, nothing fetched")
        else:
            if damage is not None:
                log(
                    f"{dataset['reference']}: this workstation's copy is damaged ({damage}); "
                    "fetching it again"
                )
            elif os.path.lexists(entry):
                log(f"{dataset['reference']}: removing a fetch that was cut short")
            remove_tree(entry)
            os.makedirs(entry)
            started = time.monotonic()
            log(
                f"{dataset['reference']}: fetching {dataset['size_bytes'] / 1e6:,.1f} MB from "
                "the portal into this workstation's cache, once for every later job"
            )
            try:
                files = os.path.join(entry, "files")
                received = fetch(dataset, files, credential, log, workstation)
            except BaseException:
                remove_tree(entry)
                raise
            write_index(
                entry,
                {
                    "sha256": sha,
                    "reference": dataset["reference"],
                    "files": file_index(os.path.join(entry, "files")),
                    "verified_at": time.time(),
                },
            )
            with open(os.path.join(entry, COMPLETE), "w") as marker:
                marker.write(f"{time.time()}\n")
            seconds = time.monotonic() - started
            log(
                f"{dataset['reference']}: fetched and checked in {seconds:.1f} s "
                f"({received / 1e6 / max(seconds, 1e-3):,.0f} MB/s)"
            )
        fcntl.flock(handle, fcntl.LOCK_SH)
    with open(os.path.join(entry, LAST_USED), "a"):
        os.utime(os.path.join(entry, LAST_USED))
    os.set_inheritable(handle.fileno(), True)
    held.append(handle)
    return os.path.join(entry, "files"), received


def tree_size(folder):
    """Bytes a folder takes on disk (the launcher's environment cache counts the same way)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


def make_room(cache, keep, cap_gb, log):
    """Past the size cap, removes the entries used longest ago that no job holds."""
    objects = os.path.join(cache, "objects")
    size = tree_size(objects)
    cap = cap_gb * 1024**3
    if size <= cap:
        return

    def last_used(sha):
        try:
            return os.stat(os.path.join(objects, sha, LAST_USED)).st_mtime
        except OSError:
            return 0.0

    for sha in sorted((s for s in os.listdir(objects) if s not in keep), key=last_used):
        if size <= cap:
            break
        with open(os.path.join(cache, "locks", f"{sha}.lock"), "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # in use
            freed = tree_size(os.path.join(objects, sha))
            remove_tree(os.path.join(objects, sha))
            size -= freed
            log(
                f"removed dataset {sha[:12]} from the cache ({freed / 1e6:,.0f} MB), to stay "
                "under its size cap"
            )


def link(name, target, folder=LINKS):
    """datasets/<name> (or a model's models/<name>) -> target; a link left by an earlier
    run is replaced."""
    if folder not in FOLDERS:
        raise DeliveryError(f"{name} is to go in {folder!r}, which is not one of {FOLDERS}")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    if os.path.islink(path):
        os.remove(path)
    elif os.path.lexists(path):
        what = "model" if folder == MODEL_LINKS else "dataset"
        raise DeliveryError(
            f"the job's own files have {path}, where {what} {name} goes: "
            "rename that folder in the project"
        )
    os.symlink(target, path)


def read_manifest():
    with open(MANIFEST, encoding="utf-8") as stream:
        datasets = json.load(stream)["datasets"]
    credential = ""
    if os.path.isfile(CREDENTIAL):
        with open(CREDENTIAL, encoding="ascii") as stream:
            credential = stream.read().strip()
    return datasets, credential


def put_in_place(dataset, cache, credential, log, say, verify_hours, receipt=None):
    """One dataset at datasets/<name>; what it took. With the plugin's `receipt` the
    dataset is already here: it is only locked (in the cache) for the job and linked."""
    started = time.monotonic()
    if dataset["kind"] == "shared":
        path = dataset["path"]
        if not os.path.isdir(path):
            raise DeliveryError(
                f"{dataset['reference']} is on the shared file system at "
                f"{path}, which {WORKSTATION[0]} does not mount"
            )
        target, received, how = path, 0, "linked"
        log(f"{dataset['reference']}: linked from the shared file system at {path}")
    elif isinstance(cache, cache_keeper.KeeperCache) and (
        kept := cache_keeper.dataset(cache, dataset, credential, log, HELD, WORKSTATION[0])
    ):
        target, received = kept
        how = "fetched" if received else "reused"
    elif cache is not None and not isinstance(cache, cache_keeper.KeeperCache):
        if receipt is None:
            say(f"getting dataset {dataset['reference']}")
        target, received = cached(cache, dataset, credential, log, verify_hours)
        how = "fetched" if received else "reused"
    else:
        target = os.path.join(os.path.abspath(SANDBOX_CACHE), dataset["sha256"])
        if receipt is not None and os.path.isdir(target):
            received, how = 0, receipt["how"]
        else:
            say(f"fetching dataset {dataset['reference']} into the job's sandbox")
            remove_tree(target)
            received, how = fetch(dataset, target, credential, log), "fetched into the sandbox"
    link(dataset["name"], target, dataset.get("folder", LINKS))
    record = {
        "name": dataset["name"],
        "reference": dataset["reference"],
        "sha256": dataset["sha256"],
        "how": how,
        "bytes_received": received,
        "seconds": round(time.monotonic() - started, 3),
        "workstation": WORKSTATION[0],
        "job": os.environ.get("NIGHTSHIFT_JOB_ID", ""),
        "time": time.time(),
        "by": "launcher",
    }
    if receipt is not None:
        # What the plugin did before the job started counts; the launcher's own pass
        # normally only reuses what it put there.
        record["by"] = receipt["by"]
        record["seconds"] = round(receipt["seconds"] + record["seconds"], 3)
        if not received:
            record["how"] = receipt["how"]
        record["bytes_received"] = receipt["bytes_received"] + received
    return record


def read_receipt(sha):
    """The plugin's receipt for a version (removed once read), or None."""
    try:
        with open(sha, encoding="utf-8") as stream:
            receipt = json.load(stream)
    except (OSError, ValueError):
        return None
    os.remove(sha)
    if not isinstance(receipt, dict) or receipt.get(RECEIPT_KEY) != sha:
        return None
    return receipt


def deliver(machine_attribute, log, say):
    """Puts every dataset of the job in place; returns what each delivery did."""
    if not os.path.isfile(MANIFEST):
        return []
    datasets, credential = read_manifest()
    WORKSTATION[0] = machine_attribute("Name") or socket.gethostname()
    cache = None
    if any(d["kind"] == "archive" for d in datasets):
        cache = find_cache(machine_attribute, log)
    verify_hours = number(setting("verify_hours", machine_attribute), DEFAULT_VERIFY_HOURS)
    report = []
    for dataset in datasets:
        receipt = read_receipt(dataset["sha256"]) if dataset["kind"] == "archive" else None
        record = put_in_place(dataset, cache, credential, log, say, verify_hours, receipt)
        report.append(record)
        if (
            cache is not None
            and not isinstance(cache, cache_keeper.KeeperCache)
            and dataset["kind"] == "archive"
        ):
            with open(os.path.join(cache, "deliveries.jsonl"), "a", encoding="utf-8") as stream:
                stream.write(json.dumps(record) + "\n")
    if cache is not None and not isinstance(cache, cache_keeper.KeeperCache):
        cap = number(setting("cap_gb", machine_attribute), DEFAULT_CACHE_GB)
        make_room(cache, {d["sha256"] for d in datasets}, cap, log)
    with open(REPORT, "w", encoding="utf-8") as stream:
        json.dump(report, stream)
    remove_plugin_copy()
    os.environ["NIGHTSHIFT_DATASETS_DIR"] = os.path.abspath(LINKS)
    os.environ["NIGHTSHIFT_MODELS_DIR"] = os.path.abspath(MODEL_LINKS)
    return report


def remove_plugin_copy():
    """HTCondor leaves the job's copy of the plugin at the top of its sandbox: not the job's."""
    ours = os.path.join(HELPER_DIR, PLUGIN_NAME)
    with contextlib.suppress(OSError):
        with open(PLUGIN_NAME, "rb") as left, open(ours, "rb") as kept:
            same = left.read() == kept.read()
        if same:
            os.remove(PLUGIN_NAME)
