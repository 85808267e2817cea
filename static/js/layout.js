// The page's layout on any screen (site.css does the rest).
// - On a phone the navigation folds into a menu; without this script it stays open, so
//   that every link is reachable either way.
// - On a phone a table scrolls inside its own box, so every table takes the keyboard's
//   focus, to be scrolled without a mouse. Given once, not on each resize: a window turned
//   or narrowed must not leave a scrolling table out of reach for a moment.
document.documentElement.classList.add("js");

function reachableTables() {
  for (const table of document.querySelectorAll("table:not([tabindex])")) {
    table.setAttribute("tabindex", "0");
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
  // Tables that pages fill in later (the job list refreshes itself).
  new MutationObserver(reachableTables).observe(document.body, { childList: true, subtree: true });
});
