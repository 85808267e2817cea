"""axe-core (WCAG 2.1 A and AA) on every page a browser test shows.

axe-core comes with axe-playwright-python. It is added to every document as an init
script, which the pages' Content Security Policy does not apply to, and it checks each
page once it has loaded; a serious or critical violation fails the test that showed the
page. Pages a test leaves before the check ends are checked again by the next test that
waits on them, so nothing here slows a test down.
"""

from __future__ import annotations

import json
from pathlib import Path

import axe_playwright_python

AXE_SOURCE = (Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text()
MARKER = "nightshift-axe:"
# The WCAG 2.1 A and AA rules, as axe-core tags them.
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
FAILING_IMPACTS = ("serious", "critical")

_RUNNER = """
(() => {
  if (window.top !== window) return;
  const check = () => axe.run(document, {
      runOnly: {type: "tag", values: %(tags)s}, resultTypes: ["violations"],
  }).then((results) => {
    const violations = results.violations
      .filter((v) => %(impacts)s.includes(v.impact))
      .map((v) => ({id: v.id, impact: v.impact, help: v.help,
                    targets: v.nodes.slice(0, 5).map((n) => n.target.join(" "))}));
    console.debug("%(marker)s" + JSON.stringify({url: location.href, violations}));
  }).catch(() => {});
  // After the page's own scripts have filled it in (charts, live panels).
  window.addEventListener("load", () => setTimeout(check, 300));
})();
"""


def init_script() -> str:
    runner = _RUNNER % {
        "tags": json.dumps(WCAG_TAGS), "impacts": json.dumps(FAILING_IMPACTS), "marker": MARKER,
    }  # fmt: skip
    return AXE_SOURCE + "\n" + runner


class AccessibilityWatch:
    """Installed on a browser context: collects axe-core's findings from every page."""

    def __init__(self, context) -> None:
        self.checked: list[str] = []
        self.violations: list[str] = []
        context.add_init_script(script=init_script())
        context.on("console", self._on_console)

    def _on_console(self, message) -> None:
        if not message.text.startswith(MARKER):
            return
        report = json.loads(message.text[len(MARKER) :])
        self.checked.append(report["url"])
        for violation in report["violations"]:
            self.violations.append(
                f"{report['url']}: {violation['impact']} {violation['id']} "
                f"({violation['help']}) at {', '.join(violation['targets'])}"
            )
