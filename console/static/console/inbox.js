// The inbox in the header (docs/console.md "The approvals inbox"): how many approvals wait for
// the signed-in user across their threads (GET /interrupts?status=pending), and, opened, the
// list of them; picking one opens its thread, where its card is. Text is set with
// textContent only.
import { el } from "./render.js";

const PAGE = 100; // the API's largest page: past it the badge says "100+"

/** The time an approval was asked, with its date unless it is today. */
function askedLabel(iso) {
  const moment = new Date(iso);
  const time = moment.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  if (moment.toDateString() === new Date().toDateString()) return time;
  return `${moment.toLocaleDateString([], { month: "short", day: "numeric" })}, ${time}`;
}

/**
 * The inbox, wired to its elements. `api(path)` reads the API; `threadTitle(threadId)` names
 * a thread (or null); `onPick(threadId)` opens a thread. Returns `refresh()`, to call when
 * the count may have changed (a run ended, an approval was answered, the page came back).
 */
export function inbox({ toggle, count, panel, list, empty, api, threadTitle, onPick }) {
  let approvals = [];
  let refreshing = null;

  const open = (opened) => {
    panel.hidden = !opened;
    toggle.setAttribute("aria-expanded", String(opened));
  };

  const item = (interrupt) => {
    const toolName = interrupt.toolName || interrupt.metadata?.toolName || "tool";
    const button = el(
      "button",
      { className: "inbox-item", attrs: { type: "button", "data-thread-id": interrupt.threadId, "data-interrupt-id": interrupt.id } },
      el("span", { className: "inbox-tool", text: `Approve ${toolName}?` }),
      el(
        "span",
        { className: "inbox-meta" },
        el("span", { className: "inbox-thread", text: threadTitle(interrupt.threadId) || "A thread" }),
        el("time", { text: askedLabel(interrupt.createdAt), attrs: { datetime: interrupt.createdAt } }),
      ),
    );
    button.addEventListener("click", () => {
      open(false);
      onPick(interrupt.threadId);
    });
    return el("li", {}, button);
  };

  const show = (more) => {
    const n = approvals.length;
    const words = more ? `${n}+` : String(n);
    count.textContent = words;
    count.hidden = n === 0;
    toggle.classList.toggle("inbox-waiting", n > 0);
    toggle.setAttribute("aria-label", n === 0 ? "Approvals: none pending" : `Approvals: ${words} pending`);
    // The list is drawn anew: keep the focus in it when it was there (the panel is open).
    const focused = list.contains(document.activeElement);
    list.replaceChildren(...approvals.map(item));
    empty.hidden = n > 0;
    if (focused) (list.querySelector("button") || toggle).focus();
  };

  async function load() {
    // The pending interrupts of every thread of the caller's, newest first; client tools'
    // calls are their client's to answer, not a person's.
    const page = await api(`/interrupts?${new URLSearchParams({ status: "pending", limit: String(PAGE) })}`);
    approvals = page.interrupts.filter((interrupt) => interrupt.kind === "approval");
    show(Boolean(page.next));
  }

  /** Read the count again; concurrent calls share one request after the one in flight. */
  async function refresh() {
    if (refreshing) {
      await refreshing.catch(() => {});
    }
    refreshing = load();
    try {
      await refreshing;
    } catch {
      // The badge keeps what it last knew; the next refresh tries again.
    } finally {
      refreshing = null;
    }
  }

  toggle.addEventListener("click", () => {
    const opening = panel.hidden;
    open(opening);
    if (opening) {
      refresh();
      (list.querySelector("button") || panel).focus();
    }
  });
  panel.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      open(false);
      toggle.focus();
    }
  });
  document.addEventListener("click", (event) => {
    if (!panel.hidden && !panel.contains(event.target) && !toggle.contains(event.target)) open(false);
  });
  // Answered on another device meanwhile: read again when the page is looked at again.
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") refresh();
  });

  return { refresh };
}
