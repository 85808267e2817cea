// The page's layout on any screen (site.css does the rest).
// - On a phone the navigation folds into a menu; without this script it stays open, so
//   that every link is reachable either way.
// - On a phone a table scrolls inside its own box; there it takes the keyboard's focus
//   too, so that it can be scrolled without a mouse.
document.documentElement.classList.add("js");

function reachableTables() {
  for (const table of document.querySelectorAll("table")) {
    // On a phone every table is its own scrolling box (site.css); one hidden now (in a
    // closed section, or drawn later) may scroll once shown.
    const scrolls = getComputedStyle(table).overflowX !== "visible";
    if (scrolls) {
      table.setAttribute("tabindex", "0");
    } else if (table.getAttribute("tabindex") === "0") {
      table.removeAttribute("tabindex");
    }
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const toggle = document.querySelector(".menu-toggle");
  const nav = document.getElementById("site-nav");
  if (toggle && nav) {
    toggle.addEventListener("click", () => {
      const open = nav.classList.toggle("open");
      toggle.setAttribute("aria-expanded", String(open));
    });
  }
  reachableTables();
  window.addEventListener("resize", reachableTables);
  // Tables that pages fill in later (the job list refreshes itself).
  new MutationObserver(reachableTables).observe(document.body, { childList: true, subtree: true });
});
