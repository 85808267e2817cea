// Names for the admin's script-made controls, which Django and select2 leave unnamed
// (axe-core: aria-prohibited-attr, aria-input-field-name). They appear after the page
// loads and again as inline rows are added, so every change is looked at.
(function () {
  "use strict";
  function name(root) {
    // SelectFilter2's search icons: a span may not carry aria-label; an image may.
    root.querySelectorAll(".search-label-icon[aria-label]:not([role])").forEach((icon) => {
      icon.setAttribute("role", "img");
    });
    // select2 names its combobox by the selection alone, empty until one is made: name it
    // by the field's label as well (select2-id_lab-container belongs to the field id_lab).
    root.querySelectorAll(".select2-selection__rendered[id^=select2-][id$=-container]")
      .forEach((shown) => {
        const fieldId = shown.id.slice("select2-".length, -"-container".length);
        const label = document.querySelector(`label[for="${CSS.escape(fieldId)}"]`);
        const box = shown.closest(".select2-selection");
        if (!label || !box || box.dataset.named) return;
        label.id = label.id || `${fieldId}-label`;
        box.setAttribute("aria-labelledby", `${label.id} ${shown.id}`);
        shown.setAttribute("aria-label", label.textContent.replace(/:\s*$/, "").trim());
        box.dataset.named = "yes";
      });
  }
  function start() {
    name(document);
    new MutationObserver(() => name(document)).observe(document.body, { childList: true, subtree: true });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
