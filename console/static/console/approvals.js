// An approval a run waits for (an AG-UI 1.0 interrupt, docs/console.md "Approvals"): the
// tool, its arguments and Approve / Reject. Everything the model wrote (the arguments) is set
// with textContent, never parsed as HTML.
import { el, timeLabel } from "./render.js";

const DECIDED_TEXT = { true: "Approved", false: "Rejected" };

function pretty(value) {
  return JSON.stringify(value ?? {}, null, 2);
}

/** When an approval must be answered by: its time, with its date unless it is today. */
function deadline(iso) {
  const moment = new Date(iso);
  if (moment.toDateString() === new Date().toDateString()) return timeLabel(iso);
  return moment.toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

/** A card for `interrupt` (as the run's run_interrupted event or GET /interrupts gives it).
 * onDecide(approved) runs when a button is pressed. Returns the card and how to show what
 * became of the answer: decided(approved, {waiting}), sent(), refused(text, {final}). */
export function approvalCard(interrupt, onDecide) {
  const toolName = interrupt.metadata?.toolName || interrupt.toolName || "tool";
  const args = interrupt.metadata?.arguments ?? interrupt.arguments ?? {};
  const titleId = `approval-title-${interrupt.id}`;
  const approve = el("button", { className: "primary approval-approve", text: "Approve", attrs: { type: "button" } });
  const reject = el("button", { className: "secondary approval-reject", text: "Reject", attrs: { type: "button" } });
  const outcome = el("p", { className: "approval-outcome", attrs: { hidden: true } });
  const expired = interrupt.expiresAt && Date.parse(interrupt.expiresAt) <= Date.now();
  const card = el(
    "section",
    { className: "approval-card", attrs: { "aria-labelledby": titleId, tabindex: "-1", "data-interrupt-id": interrupt.id } },
    el("h4", { className: "approval-title", attrs: { id: titleId } }, "Approval needed: ", el("span", { className: "tool-name", text: toolName })),
    interrupt.message ? el("p", { className: "approval-message", text: interrupt.message }) : null,
    el("div", { className: "tool-part" }, el("h5", { text: "Arguments" }), el("pre", { className: "approval-args", text: pretty(args) })),
    interrupt.expiresAt
      ? el("p", { className: "approval-expiry muted small" }, "Answer by ", el("time", { text: deadline(interrupt.expiresAt), attrs: { datetime: interrupt.expiresAt } }))
      : null,
    el("div", { className: "approval-actions", attrs: { role: "group", "aria-label": `Answer: run ${toolName}?` } }, approve, reject),
    outcome,
  );
  approve.addEventListener("click", () => onDecide(true));
  reject.addEventListener("click", () => onDecide(false));
  const say = (text, kind) => {
    outcome.textContent = text;
    outcome.className = `approval-outcome approval-outcome-${kind}`;
    outcome.hidden = false;
  };
  const buttons = (enabled) => {
    approve.disabled = !enabled;
    reject.disabled = !enabled;
  };
  if (expired) {
    buttons(false);
    say("This approval has expired: the run will not go on.", "refused");
  }
  return {
    card,
    expired,
    decided(approved, { waiting = false } = {}) {
      buttons(false);
      card.dataset.decision = approved ? "approved" : "rejected";
      say(waiting ? `${DECIDED_TEXT[approved]}: answer the other approvals to go on.` : `${DECIDED_TEXT[approved]}.`, approved ? "approved" : "rejected");
    },
    refused(text, { final = false } = {}) {
      delete card.dataset.decision;
      say(text, "refused");
      buttons(!final);
    },
  };
}
