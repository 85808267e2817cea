#!/usr/bin/env python3
"""HTCondor's file-transfer plugin for a job's datasets: nightshift://PORTAL/SHA256 URLs.

Where HTCondor moves a job's files (the portal's spool mode), the submit description lists
each dataset version the portal stores as such a URL in transfer_input_files. HTCondor runs
this plugin (the multi-file protocol: `-classad`, or `-infile IN -outfile OUT`) after the
job's other input files have arrived, so the job's manifest and credential are already in the
sandbox. It puts each dataset in place as the launcher would (nightshift_data.deliver's
steps, through the workstation's cache), writes a receipt at the URL's local file name for
the launcher, and reports the bytes it fetched to HTCondor, which keeps them in the job's
TransferInputStats. A failure goes to HTCondor with its reason, and HTCondor holds the job
with that reason. The URL names no secret.

The execute-node kit installs this file (with nightshift_data.py beside it) as a workstation
plugin; every such job also brings its own copy, which hands over to the workstation's (the
machine attribute NightshiftDataPlugin names it) and does the work itself where a workstation
has none.

Standard library only: it runs with whatever Python the workstation has.
"""

import json
import os
import re
import socket
import sys
import time

# nightshift_data.py is in the job's helper folder beside the job's copy, and beside the kit's.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, ".nightshift"), HERE]

import nightshift_data  # noqa: E402 - found through the path above
from nightshift_data import (  # noqa: E402
    DEFAULT_VERIFY_HOURS,
    HELD,
    RECEIPT_KEY,
    WORKSTATION,
    DeliveryError,
    find_cache,
    machine_attribute,
    number,
    put_in_place,
    read_manifest,
    setting,
)

SCHEME = "nightshift"
PLUGIN_URL = re.compile(r"nightshift://[A-Za-z0-9.:\[\]-]+/([0-9a-f]{64})")


PLUGIN_AD = f"""MultipleFileSupport = true
PluginVersion = "1.0"
PluginType = "FileTransfer"
SupportedMethods = "{SCHEME}"
"""
_CLASSAD_STRING = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def classad_string(text):
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def plugin_requests(text):
    """(URL, local file name) for each ad in the starter's -infile."""
    requests = []
    for block in re.findall(r"\[(.*?)\]", text, re.S):
        fields = {k.lower(): re.sub(r"\\(.)", r"\1", v) for k, v in _CLASSAD_STRING.findall(block)}
        if "url" in fields and "localfilename" in fields:
            requests.append((fields["url"], fields["localfilename"]))
    return requests


def plugin_result(url, local, success, received=0, error=None, started=None):
    now = time.time()
    fields = {
        "TransferUrl": classad_string(url),
        "TransferFileName": classad_string(os.path.basename(local)),
        "TransferProtocol": classad_string(SCHEME),
        "TransferType": '"download"',
        "TransferSuccess": "true" if success else "false",
        "TransferTotalBytes": str(int(received)),
        "TransferStartTime": str(int(started or now)),
        "TransferEndTime": str(int(now)),
    }
    if error:
        fields["TransferError"] = classad_string(error)
    return "[ " + "; ".join(f"{key} = {value}" for key, value in fields.items()) + "; ]\n"


def plugin_entry(arguments):
    """As HTCondor runs it: the workstation's plugin (the kit's, which the machine attribute
    NightshiftDataPlugin names), or the job's own copy, which hands over to the workstation's
    where there is one."""
    installed = machine_attribute("NightshiftDataPlugin")
    if installed and os.path.realpath(installed) == os.path.realpath(sys.argv[0]):
        return plugin_main(arguments)
    if installed and os.path.isfile(installed) and os.access(installed, os.X_OK):
        os.execv(installed, [installed, *arguments])  # noqa: S606 - the kit's own plugin
    return plugin_main(arguments, by="the job's own plugin")


def plugin_main(arguments, by="the workstation's plugin"):
    """HTCondor's multi-file plugin protocol: -classad, or -infile IN -outfile OUT."""
    if arguments[:1] == ["-classad"]:
        sys.stdout.write(PLUGIN_AD)
        return 0
    try:
        infile = arguments[arguments.index("-infile") + 1]
        outfile = arguments[arguments.index("-outfile") + 1]
    except (ValueError, IndexError):
        sys.stderr.write("usage: dataset_plugin.py -classad | -infile IN -outfile OUT\n")
        return 1
    if "-upload" in arguments:
        with open(outfile, "w", encoding="utf-8") as out:
            out.write("")
        sys.stderr.write("nightshift:// URLs are for input only\n")
        return 1
    with open(infile, encoding="utf-8") as stream:
        requests = plugin_requests(stream.read())
    results, failed = [], False
    for url, local in requests:
        started = time.time()
        try:
            received = plugin_transfer(url, local, by)
            results.append(plugin_result(url, local, True, received, started=started))
        except (DeliveryError, OSError, ValueError, KeyError) as exc:
            failed = True
            message = str(exc) if isinstance(exc, DeliveryError) else f"{type(exc).__name__}: {exc}"
            error = f"Nightshift could not put a dataset in place: {message}"
            results.append(plugin_result(url, local, False, error=error, started=started))
    with open(outfile, "w", encoding="utf-8") as out:
        out.write("".join(results))
    return 1 if failed else 0


def plugin_transfer(url, local, by):
    """One nightshift:// URL: the dataset put in place in the sandbox; the bytes fetched."""
    match = PLUGIN_URL.fullmatch(url)
    if not match:
        raise DeliveryError(f"{url} is not a nightshift://PORTAL/SHA256 dataset URL")
    sha = match.group(1)
    sandbox = os.path.dirname(os.path.abspath(local))
    os.chdir(sandbox)
    nightshift_data.use_helper_dir(os.path.join(sandbox, ".nightshift"))
    datasets, credential = read_manifest()
    # Two of the job's datasets may hold the same content: one URL, one fetch, two links.
    given = [d for d in datasets if d["sha256"] == sha and d["kind"] == "archive"]
    if not given:
        raise DeliveryError(f"the job was not given the dataset version {sha}")
    with open(os.path.join(nightshift_data.HELPER_DIR, "install.log"), "ab") as stream:

        def log(message):
            stamp = time.strftime("%H:%M:%S")
            stream.write(f"[{stamp}] HTCondor's file transfer ({by}): {message}\n".encode())
            stream.flush()

        WORKSTATION[0] = machine_attribute("Name") or socket.gethostname()
        cache = find_cache(machine_attribute, log)
        verify_hours = number(setting("verify_hours", machine_attribute), DEFAULT_VERIFY_HOURS)
        records = [
            put_in_place(dataset, cache, credential, log, lambda _: None, verify_hours)
            for dataset in given
        ]
        for handle in HELD:
            handle.close()
        HELD.clear()
    received = sum(record["bytes_received"] for record in records)
    receipt = {
        RECEIPT_KEY: sha,
        "how": records[0]["how"],
        "bytes_received": received,
        "seconds": sum(record["seconds"] for record in records),
        "by": f"HTCondor's file transfer ({by})",
    }
    with open(local, "w", encoding="utf-8") as out:
        json.dump(receipt, out)
    return received


if __name__ == "__main__":
    sys.exit(plugin_entry(sys.argv[1:]))
