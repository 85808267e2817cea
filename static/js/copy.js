// Buttons with data-copy="<selector>" copy that element's text to the clipboard.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("[data-copy]");
  if (!button) return;
  const source = document.querySelector(button.dataset.copy);
  try {
    await navigator.clipboard.writeText(source.textContent.trim());
    button.textContent = "Copied";
  } catch (error) {
    window.getSelection().selectAllChildren(source);
    button.textContent = "Press Ctrl+C";
  }
});
