"""Model cards are Markdown shown safely: raw HTML is text, and links go only to http,
https and mailto, on the page and in the API's card_html."""

import pytest
from django.urls import reverse

from model_registry.cards import card_html, card_summary
from model_registry.models import ModelVersion
from tests.model_registry.conftest import published

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE = """# Evil <script>alert(1)</script>

<script>document.cookie</script>
<img src=x onerror="alert(2)">
<iframe src="https://evil.example"></iframe>
<a href="javascript:alert(3)">raw link</a>
[markdown link](javascript:alert(4)) and [data](data:text/html;base64,PHNjcmlwdD4=)
<div style="background:url(javascript:alert(5))" onclick="alert(6)">styled</div>
![image](https://evil.example/x.png "t" onerror=alert(7))
<svg onload=alert(8)>

[ok](https://example.org/paper)
"""
# What would be markup, or a link or source a browser would follow; "\x02" and "\x03" are
# Markdown's own placeholders, never to be shown.
DANGEROUS = (
    "<script",
    "<img",
    "<iframe",
    "<svg",
    "<div",
    '<a href="javascript:',
    '<a href="data:',
    "\x02",
    "\x03",
)


def test_raw_html_is_shown_as_text_and_only_safe_links_are_kept():
    html = str(card_html(HOSTILE))
    for dangerous in DANGEROUS:
        assert dangerous not in html, dangerous
    assert "&lt;script&gt;document.cookie&lt;/script&gt;" in html
    assert '<a href="https://example.org/paper" rel="noopener noreferrer nofollow">ok</a>' in html
    assert "<h1>" in html


def test_markdown_tables_and_code_render():
    html = str(card_html("| a | b |\n|---|---|\n| 1 | 2 |\n\n```\nx = <b>\n```"))
    assert "<table>" in html and "<td>1</td>" in html
    assert "<pre><code>x = &lt;b&gt;" in html


def test_the_summary_is_the_first_paragraph_as_plain_text():
    assert card_summary("# Title\n\nA *fine* <b>model</b> & more.\n\nRest.") == (
        "A fine <b>model</b> & more."
    )
    assert card_summary("") == ""


def test_a_hostile_card_is_harmless_on_the_page_and_in_the_api(people, finished_job, client):
    version = published(
        people.student, finished_job(people.student, lab=people.lab.name), card=HOSTILE
    )
    assert version["card"] == HOSTILE  # kept as written
    for dangerous in DANGEROUS:
        assert dangerous not in version["card_html"], dangerous
    client.force_login(people.labmate)
    page = client.get(reverse("models:version", args=[ModelVersion.objects.get().pk]))
    body = page.content.decode()
    start = body.index('data-role="card"')
    card = body[start : body.index("</section>", start)]
    for dangerous in DANGEROUS:
        assert dangerous not in card, dangerous
    listing = client.get(reverse("models:list")).content.decode()
    assert "<script>document" not in listing
