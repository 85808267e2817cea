// Quota bars: the fill's width comes from data-percent, set here (CSP allows no inline style).
document.querySelectorAll(".bar [data-percent]").forEach((fill) => {
  const percent = Math.max(0, Math.min(100, Number(fill.dataset.percent) || 0));
  fill.style.width = `${percent}%`;
});
