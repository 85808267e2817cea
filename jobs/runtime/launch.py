"""Nightshift's launcher: install requirements.txt into a virtual environment, then run.

    python3 .nightshift/launch.py train.py --epochs 10

The virtual environment sees the workstation's own packages too (--system-site-packages),
so that a preinstalled PyTorch is used rather than downloaded again. pip's output goes
to .nightshift/install.log, which the job page shows beside stdout and stderr, and what it
resolved (pip freeze) to .nightshift/pip-freeze.txt, for the job's reproducibility record.
"""

import os
import subprocess
import sys

HELPER_DIR = os.path.dirname(os.path.abspath(__file__))
VENV = os.path.join(HELPER_DIR, "venv")
LOG = os.path.join(HELPER_DIR, "install.log")


def say(message: str) -> None:
    print(f"nightshift: {message}", file=sys.stderr, flush=True)


def run_logged(command: list[str], log) -> int:
    log.write(("$ " + " ".join(command) + "\n").encode())
    log.flush()
    # An argument list, never a shell: nothing here is parsed by a shell.
    return subprocess.call(command, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603


def main() -> None:
    if len(sys.argv) < 2:
        say("usage: launch.py SCRIPT [ARGUMENTS...]")
        sys.exit(2)
    script, arguments = sys.argv[1], sys.argv[2:]
    python = sys.executable
    if os.path.isfile("requirements.txt"):
        say("installing requirements.txt into a virtual environment (see the install log)")
        venv_python = os.path.join(VENV, "bin", "python")
        with open(LOG, "ab") as log:
            if not os.path.exists(venv_python):
                status = run_logged([python, "-m", "venv", "--system-site-packages", VENV], log)
                if status:
                    say(f"creating the virtual environment failed (exit {status})")
                    sys.exit(status)
            status = run_logged(
                [venv_python, "-m", "pip", "install", "--disable-pip-version-check",
                 "--no-input", "-r", "requirements.txt"],
                log,
            )  # fmt: skip
        if status:
            say(f"installing requirements.txt failed (exit {status}); see the install log")
            sys.exit(status)
        say("requirements installed")
        python = venv_python
        # What pip resolved, for the job's reproducibility record.
        with open(os.path.join(HELPER_DIR, "pip-freeze.txt"), "wb") as frozen:
            subprocess.call([python, "-m", "pip", "freeze", "--disable-pip-version-check"],  # noqa: S603
                            stdout=frozen, stderr=subprocess.DEVNULL)  # fmt: skip
    sys.stdout.flush()
    os.execv(python, [python, script, *arguments])  # noqa: S606 - the job itself, as asked


if __name__ == "__main__":
    main()
