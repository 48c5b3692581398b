// Building the conversation's DOM. Everything a model or a user wrote is set with
// textContent or as an attribute value, never parsed as HTML: it is untrusted.

/** document.createElement with a class, attributes and children (strings become text). */
export function el(tag, options = {}, ...children) {
  const node = document.createElement(tag);
  const { className, text, attrs } = options;
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value !== undefined && value !== null && value !== false) node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

const SAFE_URL = /^https?:\/\//i;

export function safeImageUrl(url) {
  return typeof url === "string" && SAFE_URL.test(url) ? url : null;
}

export function timeLabel(iso) {
  const moment = iso ? new Date(iso) : new Date();
  return moment.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

/** A day heading's words: "Today", "Yesterday" or the date, for a YYYY-MM-DD day. */
export function dayLabel(day) {
  const [year, month, date] = day.split("-").map(Number);
  const then = new Date(year, month - 1, date);
  const today = new Date();
  today.setHours(0, 0, 0, 0);
  const days = Math.round((today - then) / 86400000);
  if (days === 0) return "Today";
  if (days === 1) return "Yesterday";
  return then.toLocaleDateString([], { weekday: "long", year: "numeric", month: "long", day: "numeric" });
}

export function localDay(moment = new Date()) {
  const pad = (n) => String(n).padStart(2, "0");
  return `${moment.getFullYear()}-${pad(moment.getMonth() + 1)}-${pad(moment.getDate())}`;
}

/** A user's message: its text and its images. */
export function userMessage({ text, images = [], timestamp }) {
  const bubble = el("div", { className: "bubble" });
  if (images.length) {
    bubble.append(
      el(
        "div",
        { className: "msg-images" },
        ...images.map((image) =>
          el("img", { attrs: { src: image.url, alt: image.alt || "Attached image", loading: "lazy" } }),
        ),
      ),
    );
  }
  if (text) bubble.append(el("p", { className: "msg-text", text }));
  return el(
    "article",
    { className: "msg msg-user", attrs: { "aria-label": "You said" } },
    bubble,
    el("time", { className: "msg-time", text: timeLabel(timestamp), attrs: { datetime: timestamp || new Date().toISOString() } }),
  );
}

/** An agent's turn: the model's reasoning (collapsed), tool cards, the answer (an aria-live
 * region while it streams), the rendered ui_schema and the run's end (stopped, failed).
 * Returns its parts. */
export function agentTurn({ timestamp } = {}) {
  const reasoning = el("div", { className: "reasoning-list" });
  const tools = el("div", { className: "tools" });
  const answer = el("div", { className: "answer", attrs: { "aria-live": "polite", "aria-atomic": "false" } });
  const ui = el("div", { className: "ui" });
  const status = el("div", { className: "turn-status", attrs: { role: "status" } });
  const time = el("time", { className: "msg-time", text: timeLabel(timestamp), attrs: { datetime: timestamp || new Date().toISOString() } });
  const article = el(
    "article",
    { className: "msg msg-agent", attrs: { "aria-label": "Agent answered" } },
    el("div", { className: "bubble" }, reasoning, tools, answer, ui, status),
    time,
  );
  return { article, reasoning, tools, answer, ui, status };
}

/** A model's reasoning before its answer (AG-UI's reasoning message), collapsed in a details
 * element: "Reasoning…" while it streams, "Reasoning" once done; a stage other than the
 * worker's (the memory stage) is named. append() adds the text as it arrives. */
export function reasoningBlock({ stage } = {}) {
  const label = stage && stage !== "worker" ? `Reasoning (${stage})` : "Reasoning";
  const title = el("span", { className: "reasoning-title", text: `${label}…` });
  const text = el("div", { className: "reasoning-text" });
  const block = el("details", { className: "reasoning" }, el("summary", {}, title), text);
  return {
    block,
    append(delta) {
      text.append(delta || "");
    },
    finish() {
      title.textContent = label;
    },
  };
}

export function statusLine(kind, text) {
  const mark =
    kind === "thinking"
      ? el("span", { className: "dots", attrs: { "aria-hidden": "true" } }, el("i"), el("i"), el("i"))
      : el("span", { className: "status-icon", attrs: { "aria-hidden": "true" } });
  return el("p", { className: `status-line status-${kind}` }, mark, el("span", { text }));
}

const TOOL_STATUS_TEXT = {
  running: "Running…",
  waiting: "Waiting for approval",
  success: "Succeeded",
  failure: "Failed",
  partial: "Partly done",
};

function pretty(value) {
  if (value === undefined || value === null || value === "") return "";
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  return JSON.stringify(value, null, 2);
}

/** A tool call as a collapsible card: name and status in the summary; arguments, result and
 * error inside. update() fills it as the events arrive. */
export function toolCard(name) {
  const statusBadge = el("span", { className: "tool-status tool-status-running", text: TOOL_STATUS_TEXT.running });
  const nameText = el("span", { className: "tool-name", text: name || "tool" });
  const args = el("pre", { className: "tool-args" });
  const result = el("pre", { className: "tool-result" });
  const error = el("pre", { className: "tool-error" });
  const argsBlock = el("div", { className: "tool-part" }, el("h4", { text: "Arguments" }), args);
  const resultBlock = el("div", { className: "tool-part", attrs: { hidden: true } }, el("h4", { text: "Result" }), result);
  const errorBlock = el("div", { className: "tool-part", attrs: { hidden: true } }, el("h4", { text: "Error" }), error);
  const card = el(
    "details",
    { className: "tool-card" },
    el(
      "summary",
      {},
      el("span", { className: "tool-icon", text: "⚙", attrs: { "aria-hidden": "true" } }),
      el("span", { className: "visually-hidden", text: "Tool call " }),
      nameText,
      statusBadge,
    ),
    el("div", { className: "tool-body" }, argsBlock, resultBlock, errorBlock),
  );
  let rawArgs = "";
  return {
    card,
    appendArgs(delta) {
      rawArgs += delta || "";
      args.textContent = pretty(rawArgs);
    },
    setArgs(value) {
      args.textContent = pretty(value);
    },
    setName(value) {
      if (value) nameText.textContent = value;
    },
    setStatus(kind) {
      statusBadge.className = `tool-status tool-status-${kind}`;
      statusBadge.textContent = TOOL_STATUS_TEXT[kind];
    },
    finish({ status, result: value, error: problem }) {
      const kind = TOOL_STATUS_TEXT[status] ? status : "success";
      statusBadge.className = `tool-status tool-status-${kind}`;
      statusBadge.textContent = TOOL_STATUS_TEXT[kind];
      if (value !== undefined && value !== null && value !== "") {
        result.textContent = pretty(value);
        resultBlock.hidden = false;
      }
      if (problem) {
        error.textContent = pretty(problem);
        errorBlock.hidden = false;
      }
    },
  };
}

/** A compiled ui_schema (UiSchemaRenderer): every node type of agent_runs/ui_schema.py.
 * onAction(prompt) runs when a suggested action is chosen. */
// What a card shows beyond its title (and beyond the badge saying a run succeeded, which the
// answer itself says).
const UI_CONTENT = ".ui-text-body, .ui-text-caption, .ui-badge, .ui-list, .ui-kv, .ui-image, .ui-action";

function addsSomething(root) {
  const content = [root, ...root.querySelectorAll(UI_CONTENT)].filter((node) => node.matches(UI_CONTENT));
  return content.some((node) => !(node.matches(".ui-badge-success") && node.textContent === "SUCCESS"));
}

// A turn's card (its ui_schema), or null when it would add nothing to the answer: a text of
// the card that only repeats the answer is left out, and a card left with nothing more than
// a title and a success badge is.
export function uiSchema(schema, onAction, { answer = "" } = {}) {
  if (!schema || typeof schema !== "object" || !schema.root) return null;
  const root = uiNode(schema.root, onAction, answer.trim());
  if (!root || !addsSomething(root)) return null;
  root.classList.add("ui-root");
  if (schema.locale) root.setAttribute("lang", schema.locale);
  return root;
}

function uiNode(node, onAction, answer) {
  if (!node || typeof node !== "object") return null;
  switch (node.type) {
    case "stack":
      return uiStack(node, onAction, answer);
    case "text": {
      if (answer && String(node.content ?? "").trim() === answer) return null;
      const role = ["title", "body", "caption"].includes(node.role) ? node.role : "body";
      const tag = role === "title" ? "h3" : "p";
      return el(tag, { className: `ui-text ui-text-${role}`, text: String(node.content ?? "") });
    }
    case "badge": {
      const status = ["info", "success", "warning", "error", "pending"].includes(node.status) ? node.status : "info";
      return el("span", { className: `ui-badge ui-badge-${status}`, text: String(node.label ?? "") });
    }
    case "list":
      return el("ul", { className: "ui-list" }, ...(node.items || []).map((item) => el("li", { text: String(item) })));
    case "key_value":
      return el(
        "dl",
        { className: "ui-kv" },
        ...(node.items || []).map((item) =>
          el("div", { className: "ui-kv-row" }, el("dt", { text: String(item.key ?? "") }), el("dd", { text: String(item.value ?? "") })),
        ),
      );
    case "image": {
      const url = safeImageUrl(node.url);
      if (!url) return null;
      return el("img", { className: "ui-image", attrs: { src: url, alt: String(node.alt || ""), loading: "lazy" } });
    }
    case "divider":
      return el("hr", { className: "ui-divider" });
    case "action": {
      const prompt = node.action && node.action.prompt;
      if (!prompt) return null;
      const button = el("button", { className: "ui-action", text: String(node.label ?? prompt), attrs: { type: "button", "data-prompt": prompt } });
      button.addEventListener("click", () => onAction(prompt));
      return button;
    }
    default:
      return null;
  }
}

function uiStack(node, onAction, answer) {
  const appearance = node.appearance === "plain" ? "plain" : "card";
  const stack = el("div", { className: `ui-stack ui-stack-${appearance}` });
  let actions = null;
  let badges = null;
  for (const child of node.children || []) {
    const rendered = uiNode(child, onAction, answer);
    if (!rendered) continue;
    // Neighbouring actions make one row of buttons, neighbouring badges one line.
    if (child.type === "action") {
      if (!actions) {
        actions = el("div", { className: "ui-actions", attrs: { role: "group", "aria-label": "Suggested actions" } });
        stack.append(actions);
      }
      actions.append(rendered);
      badges = null;
      continue;
    }
    if (child.type === "badge") {
      if (!badges) {
        badges = el("div", { className: "ui-badges" });
        stack.append(badges);
      }
      badges.append(rendered);
      actions = null;
      continue;
    }
    actions = null;
    badges = null;
    stack.append(rendered);
  }
  return stack;
}
