"""A link keeps its contrast in every state a person puts it in: axe-core checks a page the
moment it loads, which can be the moment a test (or a person) holds a link down."""

import pytest

pytestmark = pytest.mark.browser

# The page's own check (tests/kits/accessibility.py) may still be running when this one
# starts, and axe refuses a second run meanwhile: wait for it, as that check does.
CONTRAST_OF = """async (element) => {
  for (let attempt = 0; attempt < 100; attempt++) {
    try {
      const results = await axe.run(element, {runOnly: ["color-contrast"]});
      return results.violations.flatMap((v) => v.nodes.map((n) => n.target.join(" ")));
    } catch (error) {
      if (!String(error).includes("already running")) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  throw new Error("axe stayed busy for 10 s");
}"""


def test_a_link_held_down_on_the_login_page_keeps_its_contrast(page, live_server, db):
    page.goto(f"{live_server.url}/accounts/login/")
    page.wait_for_function("() => window.axe !== undefined")
    for name in ("Forgot your password?", "Create an account"):
        link = page.get_by_role("link", name=name)
        # Releasing the button clicks the link; the page must stay put for the next link, and
        # a navigation racing the test's own would make the test fail for a reason it does not test.
        link.evaluate("(element) => element.addEventListener('click', (e) => e.preventDefault())")
        box = link.bounding_box()
        page.mouse.move(box["x"] + 3, box["y"] + 3)
        page.mouse.down()
        try:
            assert link.evaluate(CONTRAST_OF) == [], f"{name!r} held down"
        finally:
            page.mouse.up()
    assert page.url == f"{live_server.url}/accounts/login/"
