// The spend in the header (docs/console.md "Spend"): what the signed-in user spent today and
// this month, against their limits (GET /usage); money arrives as decimal strings and is
// shown as it came. Text is set with textContent only.

/** "0.42 / 1.50 USD" with a limit, "0.42 USD" without. */
function amount(period, currency) {
  return period.limit === null
    ? `${period.spent} ${currency}`
    : `${period.spent} / ${period.limit} ${currency}`;
}

/**
 * The spend, wired to its element. `api(path)` reads the API. Returns `refresh()`, to call
 * when it may have changed (a run ended).
 */
export function spend({ element, api }) {
  return async function refresh() {
    let usage;
    try {
      usage = await api("/usage");
    } catch {
      return; // the spend is a hint: a failed read leaves the last one shown
    }
    const [day, month] = usage.periods;
    const reached = usage.periods.some((p) => p.remaining === "0.00");
    element.textContent = `Today ${amount(day, usage.currency)} · This month ${amount(month, usage.currency)}`;
    element.classList.toggle("spend-reached", reached);
    element.title = reached ? "A spending limit is reached: new runs are refused until it resets." : "";
    element.hidden = false;
  };
}
