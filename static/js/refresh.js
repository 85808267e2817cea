// Replaces a region with a fresh server-rendered fragment every few seconds.
(function () {
  "use strict";
  for (const region of document.querySelectorAll("[data-fragment-url]")) {
    const url = region.dataset.fragmentUrl;
    const every = Number(region.dataset.refreshMs || 5000);
    const refresh = async () => {
      try {
        const response = await fetch(url, { credentials: "same-origin" });
        if (response.ok) region.innerHTML = await response.text();
      } catch (error) {
        console.warn("refresh failed", error);
      }
      // Regions whose content is all final (data-all-final) stop polling; one that asks to
      // (data-reload-when-final) then reloads its page, whose other parts it has outdated.
      if (!region.querySelector('[data-all-final="true"]')) setTimeout(refresh, every);
      else if ("reloadWhenFinal" in region.dataset) window.location.reload();
    };
    if (!region.querySelector('[data-all-final="true"]')) setTimeout(refresh, every);
  }
})();
