"""axe-core (WCAG 2.1 A and AA) on every page a browser test shows.

axe-core comes with axe-playwright-python. It is added to every document as an init
script, which the pages' Content Security Policy does not apply to, and it checks each
page once it has loaded, and the last page again as the test ends (a job page changes as
its job runs); a serious or critical violation fails the test that showed the page.
"""

from __future__ import annotations

import json
from pathlib import Path

import axe_playwright_python
from playwright.sync_api import Error as PlaywrightError

AXE_SOURCE = (Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text()
MARKER = "nightshift-axe:"
# The WCAG 2.1 A and AA rules, as axe-core tags them.
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
FAILING_IMPACTS = ("serious", "critical")

_RUNNER = """
(() => {
  if (window.top !== window) return;
  // A job's own web app (TensorBoard, JupyterLab), served through the live proxy, is not
  // a page of the portal's.
  if (location.pathname.startsWith("/live/")) return;
  // A text file or an image the browser shows in a document of its own making is not a
  // page of the portal's.
  if (document.contentType !== "text/html") return;
  const once = () => axe.run(document, {
      runOnly: {type: "tag", values: %(tags)s}, resultTypes: ["violations"],
      // No fetching of stylesheets: axe resolves an @import against the page, not the
      // sheet, and asks the portal for files that do not exist.
      preload: false,
  }).then((results) => ({
    url: location.href,
    violations: results.violations
      .filter((v) => %(impacts)s.includes(v.impact))
      .map((v) => ({id: v.id, impact: v.impact, help: v.help,
                    targets: v.nodes.slice(0, 5).map((n) => n.target.join(" "))})),
  }));
  // One check at a time per page: axe refuses a second run while one is going.
  window.__nightshiftAxeCheck = async () => {
    for (let attempt = 0; attempt < 100; attempt++) {
      try { return await once(); } catch (error) {
        if (!String(error).includes("already running")) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    return null;
  };
  // After the page's own scripts have filled it in (charts, live panels).
  if (%(on_load)s) window.addEventListener("load", () => setTimeout(() => {
    window.__nightshiftAxeCheck().then((report) => {
      if (report) console.debug("%(marker)s" + JSON.stringify(report));
    }).catch(() => {});
  }, 300));
})();
"""


def init_script(*, on_load: bool = True) -> str:
    runner = _RUNNER % {
        "tags": json.dumps(WCAG_TAGS),
        "impacts": json.dumps(FAILING_IMPACTS),
        "marker": MARKER,
        "on_load": json.dumps(on_load),
    }
    return AXE_SOURCE + "\n" + runner


def from_the_page(message) -> bool:
    """False for a console message caused by axe-core itself: an init script has no URL.
    (axe adds a <style> element as it measures, which the portal's policy refuses.)"""
    return bool(message.location.get("url"))


class AccessibilityWatch:
    """Installed on a browser context: collects axe-core's findings from every page, or,
    with `on_load=False`, from the pages `check_now` is asked to check (a crawl that
    visits many pages of one kind checks one of them, and axe-core takes longer than the
    page)."""

    def __init__(self, context, *, on_load: bool = True) -> None:
        self.checked: list[str] = []
        self.violations: list[str] = []
        context.add_init_script(script=init_script(on_load=on_load))
        context.on("console", self._on_console)

    def check_now(self, page) -> None:
        """Checks the page as it is now, e.g. a job page that has changed since it loaded."""
        try:
            page.wait_for_load_state("load")
            report = page.evaluate(
                "() => window.__nightshiftAxeCheck && window.__nightshiftAxeCheck()"
            )
        except PlaywrightError as error:  # the page was navigating away: its next one is checked
            if "context was destroyed" not in str(error):
                raise
            return
        if report:
            self._record(report)

    def _on_console(self, message) -> None:
        if message.text.startswith(MARKER):
            self._record(json.loads(message.text[len(MARKER) :]))

    def _record(self, report: dict) -> None:
        self.checked.append(report["url"])
        for violation in report["violations"]:
            self.violations.append(
                f"{report['url']}: {violation['impact']} {violation['id']} "
                f"({violation['help']}) at {', '.join(violation['targets'])}"
            )
