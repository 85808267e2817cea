"""condor_bridge.calls.submit_items_from_file: a cluster's items go to HTCondor in a file
it reads itself, one line per run, values split only on the unit separator."""

import glob
import tempfile
from pathlib import Path

import pytest

from condor_bridge.calls import ITEM_SEPARATOR, submit_items_from_file


class RecordingSchedd:
    def __init__(self):
        self.calls = []

    def submit(self, submit, **kwargs):
        queue = kwargs.get("queue")
        lines = Path(queue.split(" from ", 1)[1]).read_text() if queue else None
        self.calls.append((kwargs, lines))
        return "result"


def leftover_item_files() -> list[str]:
    return glob.glob(f"{tempfile.gettempdir()}/nightshift-items-*")


def test_each_item_is_a_line_of_its_values_in_the_first_items_order():
    schedd = RecordingSchedd()
    items = [{"nsv0": "a b, c", "nsv1": "'$(HOME)'"}, {"nsv1": "2", "nsv0": ""}]
    assert submit_items_from_file(schedd, "template", items, spool=True) == "result"
    [(kwargs, lines)] = schedd.calls
    assert kwargs["queue"].startswith("nsv0,nsv1 from ")
    assert kwargs["spool"] is True
    assert lines == f"a b, c{ITEM_SEPARATOR}'$(HOME)'\n{ITEM_SEPARATOR}2\n"
    assert leftover_item_files() == []


@pytest.mark.parametrize("value", ["two\nlines", f"split{ITEM_SEPARATOR}here"])
def test_a_value_that_would_change_the_lines_is_refused_before_the_schedd_is_asked(value):
    schedd = RecordingSchedd()
    with pytest.raises(ValueError, match="newlines"):
        submit_items_from_file(schedd, "template", [{"nsv0": "fine"}, {"nsv0": value}], spool=False)
    assert schedd.calls == []
    assert leftover_item_files() == []
