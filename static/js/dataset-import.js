// Follows a dataset import: every two seconds the page asks for itself again and swaps in
// its status. Once the import is done the server answers with a redirect to the dataset:
// the page then loads itself, so that the browser follows that redirect with its message.
(() => {
  const status = document.querySelector("[data-role=import-status]");
  if (!status || status.dataset.finished === "true") return;
  const follow = async () => {
    try {
      const response = await fetch(window.location.href, {credentials: "same-origin"});
      if (response.redirected) {
        window.location.reload();
        return;
      }
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = page.querySelector("[data-role=import-status]");
      if (fresh) {
        status.replaceChildren(...fresh.childNodes);
        status.dataset.finished = fresh.dataset.finished;
      }
    } catch (error) {
      // A dropped connection: try again at the next tick.
    }
    if (status.dataset.finished !== "true") window.setTimeout(follow, 2000);
  };
  window.setTimeout(follow, 2000);
})();
