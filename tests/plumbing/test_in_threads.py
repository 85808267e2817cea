"""plumbing.db.in_threads: calls that are each their own transaction, spread over threads
with a connection each, their results in order; in the caller's thread where other
connections could not see the caller's rows."""

import threading

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction

from jobs.models import Job
from plumbing.db import in_threads
from tests.factories import UserFactory


@pytest.mark.django_db(transaction=True)
def test_calls_run_in_the_callers_thread_and_others_and_come_back_in_order():
    threads: set[int] = set()

    def square(n: int) -> int:
        threads.add(threading.get_ident())
        with connection.cursor() as cursor:
            cursor.execute("SELECT %s * %s", [n, n])
            return cursor.fetchone()[0]

    assert in_threads(square, list(range(7)), threads=2) == [0, 1, 4, 9, 16, 25, 36]
    assert len(threads) == 2 and threading.get_ident() in threads


@pytest.mark.django_db(transaction=True)
def test_each_new_thread_closes_its_connection_when_done():
    used = {}

    def count_jobs(n: int) -> int:
        used[threading.get_ident()] = connections[DEFAULT_DB_ALIAS]
        return Job.objects.count()

    in_threads(count_jobs, [1, 2, 3, 4], threads=2)

    others = [wrapper for ident, wrapper in used.items() if ident != threading.get_ident()]
    assert len(others) == 1 and others[0] is not connections[DEFAULT_DB_ALIAS]
    assert others[0].connection is None
    assert connection.connection is not None  # the caller's own stays open


@pytest.mark.django_db(transaction=True)
def test_what_a_call_raises_reaches_the_caller():
    def fail_on_three(n: int) -> int:
        if n == 3:
            raise ValueError("three")
        return n

    with pytest.raises(ValueError, match="three"):
        in_threads(fail_on_three, [1, 2, 3, 4], threads=2)


@pytest.mark.django_db
def test_inside_a_transaction_the_calls_run_in_the_callers_thread_and_see_its_rows():
    owner = UserFactory()
    threads: set[int] = set()

    def names(n: int) -> list[str]:
        threads.add(threading.get_ident())
        return list(Job.objects.filter(owner=owner).values_list("name", flat=True))

    with transaction.atomic():
        Job.objects.create(owner=owner, name="not yet committed", output_dir="/x")
        found = in_threads(names, [1, 2], threads=2)

    assert found == [["not yet committed"], ["not yet committed"]]
    assert threads == {threading.get_ident()}
