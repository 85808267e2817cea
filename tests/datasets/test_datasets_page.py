"""In Chromium: a student uploads a folder's archive as a dataset, follows the import (a
real worker checks and packs it), and sees its files, first rows and thumbnails; a hostile
archive ends on a page that says why."""

import pytest

from tests.datasets.files import SAMPLE, zip_of

pytestmark = [pytest.mark.browser, pytest.mark.condor, pytest.mark.timeout(300)]


@pytest.fixture
def datasets_beside_the_worker(settings, live_pipeline):
    settings.DATASETS_DIR = live_pipeline.datasets_dir


def import_through_the_form(page, path, name):
    page.get_by_role("link", name="Datasets").click()
    page.get_by_role("heading", name="Datasets").wait_for()
    page.get_by_role("link", name="New dataset").click()
    page.get_by_label("Name").fill(name)
    page.get_by_label("Description").fill("Cats and dogs")
    page.get_by_label("Files").set_input_files(str(path))
    page.get_by_role("button", name="Import").click()


def test_a_student_uploads_a_dataset_and_sees_its_preview(
    logged_in, datasets_beside_the_worker, screenshot, tmp_path
):
    page = logged_in
    archive = tmp_path / "pets.zip"
    archive.write_bytes(zip_of(SAMPLE))
    import_through_the_form(page, archive, "pets")
    page.get_by_role("heading", name="pets").wait_for(timeout=60_000)
    page.get_by_text("Version 1: 4 files, sha256").wait_for()
    thumbnails = page.locator("[data-role=thumbnails] img")
    assert thumbnails.count() == 2
    # Each thumbnail is a request of its own, which may still be loading.
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-role=thumbnails] img')]"
        ".every((img) => img.complete && img.naturalWidth > 0)",
        timeout=30_000,
    )
    page.get_by_text("train.csv: the first rows").click()
    assert "x" in page.locator("[data-role=table-preview]").nth(1).inner_text()
    page.get_by_text("Files", exact=True).click()
    assert "images/dog.png" in page.locator("[data-role=files]").inner_text()
    screenshot("dataset-detail")


def test_a_hostile_archive_ends_on_a_page_that_says_why(
    logged_in, datasets_beside_the_worker, tmp_path
):
    page = logged_in
    archive = tmp_path / "evil.zip"
    archive.write_bytes(zip_of({"../../outside.txt": "x"}))
    import_through_the_form(page, archive, "evil")
    error = page.locator("[data-role=import-error]")
    error.wait_for(timeout=60_000)
    assert "would reach outside" in error.inner_text()


def test_an_upload_cut_off_halfway_continues_where_it_stopped(
    logged_in, datasets_beside_the_worker, tmp_path
):
    """The connection drops twice once more than half has arrived; the page's tus client
    asks the portal where it stopped and sends only the rest."""
    page = logged_in
    size = 40 * 2**20
    blob = tmp_path / "frames.bin"
    blob.write_bytes(bytes(range(256)) * (size // 256))
    sent = {"accepted": 0, "dropped": 0, "heads_after_drop": 0}

    def route(route, request):
        if request.method == "PATCH":
            offset = int(request.headers["upload-offset"])
            if offset >= size // 2 and sent["dropped"] < 2:
                sent["dropped"] += 1
                return route.abort("connectionreset")
            sent["accepted"] += len(request.post_data_buffer or b"")
        elif request.method == "HEAD" and sent["dropped"]:
            sent["heads_after_drop"] += 1
        return route.continue_()

    page.route("**/api/v1/dataset-uploads/**", route)
    import_through_the_form(page, blob, "frames")
    page.get_by_role("heading", name="frames").wait_for(timeout=120_000)
    page.get_by_text("Version 1: 1 file").wait_for()
    assert sent["dropped"] == 2 and sent["heads_after_drop"] >= 1
    # Every byte crossed once: the chunks before the drop were not sent again.
    assert sent["accepted"] == size
