// The console: threads, a conversation a day at a time, a composer with images, and each
// run's events rendered as they stream. It uses the public HTTP API only (docs/console.md).
import { approvalCard } from "./approvals.js";
import { inbox } from "./inbox.js";
import { spend } from "./spend.js";
import { StreamRefused, followRun } from "./sse.js";
import { agentTurn, dayLabel, el, localDay, reasoningBlock, statusLine, toolCard, uiSchema, userMessage } from "./render.js";

const root = document.getElementById("console");
const API = root.dataset.api;
const CSRF = root.dataset.csrf;
const MAX_IMAGES = 3;
const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];

const $ = (id) => document.getElementById(id);
const ui = {
  threads: $("threads"),
  threadList: $("thread-list"),
  threadsEmpty: $("threads-empty"),
  moreThreads: $("more-threads"),
  newThread: $("new-thread"),
  drawerToggle: $("drawer-toggle"),
  backdrop: $("drawer-backdrop"),
  log: $("log"),
  days: $("days"),
  empty: $("empty-state"),
  loadEarlier: $("load-earlier"),
  composer: $("composer"),
  input: $("composer-input"),
  attach: $("attach-input"),
  previews: $("previews"),
  error: $("composer-error"),
  waiting: $("composer-waiting"),
  send: $("send"),
  stop: $("stop"),
  announcer: $("announcer"),
};

const state = {
  threadId: null, // null: a new thread, created by its first run
  oldestDay: null, // the earliest day shown, the next history call's `before`
  threadsNext: null,
  attachments: [], // {id, file, previewUrl, upload: Promise<{url, mime_type}>, element}
  run: null, // the active run: {runId, threadId, controller}
  loadToken: 0, // discards a thread's history answering after another thread was picked
  approvals: new Map(), // the open thread's pending approvals: id -> {interrupt, view, decision}
};

// The header's inbox: the approvals pending across the user's threads; one picked opens its
// thread, where its card waits.
const approvalsInbox = inbox({
  toggle: $("inbox-toggle"),
  count: $("inbox-count"),
  panel: $("inbox-panel"),
  list: $("inbox-list"),
  empty: $("inbox-empty"),
  api: (path) => api(path),
  threadTitle: (threadId) =>
    ui.threadList.querySelector(`.thread-button[data-thread-id="${CSS.escape(threadId)}"] .thread-title`)?.textContent || null,
  onPick: (threadId) => {
    drawer(false);
    threadOpen(threadId);
  },
});

// The header's spend: today's and this month's against the user's limits.
const spendRefresh = spend({ element: $("spend"), api: (path) => api(path) });

// --- the API --------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, detail) {
    super(detail || `the server answered ${status}`);
    this.status = status;
  }
}

async function api(path, { method = "GET", json, form } = {}) {
  const headers = { Accept: "application/json" };
  let body;
  if (method !== "GET") headers["X-CSRFToken"] = CSRF;
  if (json !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(json);
  } else if (form) {
    body = form;
  }
  const response = await fetch(API + path, { method, headers, body, credentials: "same-origin" });
  if (!response.ok) {
    let detail = "";
    try {
      detail = (await response.json()).detail;
    } catch {
      /* not JSON */
    }
    if (response.status === 401) detail = "You are signed out: reload the page to sign in again.";
    throw new ApiError(response.status, detail);
  }
  return response.status === 204 ? null : response.json();
}

function uuid4() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

function clientTime() {
  const now = new Date();
  const offset = -now.getTimezoneOffset();
  const pad = (n) => String(Math.floor(Math.abs(n))).padStart(2, "0");
  const local = new Date(now.getTime() + offset * 60000).toISOString().slice(0, 19);
  const sign = offset >= 0 ? "+" : "-";
  return {
    device_timezone: Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC",
    client_now_iso: `${local}${sign}${pad(offset / 60)}:${pad(offset % 60)}`,
    client_epoch_ms: now.getTime(),
  };
}

function announce(text) {
  ui.announcer.textContent = "";
  // A fresh text node, so that the same words twice are announced twice.
  requestAnimationFrame(() => (ui.announcer.textContent = text));
}

// --- thread titles: the start of the first user message, as the threads API gives it -----

function threadTitle(thread) {
  if (thread.title) return thread.title.replace(/\s+/g, " ").trim();
  if (thread.title === "") return "Images";
  const created = new Date(thread.createdAt);
  return `Thread of ${created.toLocaleDateString([], { month: "short", day: "numeric", year: "numeric" })}, ${created.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })}`;
}

// --- the threads list ---------------------------------------------------------------------

const RUN_STATUS_TEXT = { queued: "queued", running: "running", completed: "", failed: "failed", cancelled: "stopped" };

function threadItem(thread) {
  const status = thread.latestRun ? RUN_STATUS_TEXT[thread.latestRun.status] : "";
  const when = new Date(thread.updatedAt);
  const button = el(
    "button",
    {
      className: "thread-button",
      attrs: { type: "button", "data-thread-id": thread.threadId, "aria-current": thread.threadId === state.threadId ? "true" : null },
    },
    el("span", { className: "thread-title", text: threadTitle(thread) }),
    el(
      "span",
      { className: "thread-meta" },
      el("time", { text: when.toLocaleDateString([], { month: "short", day: "numeric" }), attrs: { datetime: thread.updatedAt } }),
      // A run an automation job made (docs/automations.md): the job's name.
      thread.latestRun?.automationJob ? el("span", { className: "thread-job", text: `job ${thread.latestRun.automationJob}`, attrs: { title: "Made by this automation job" } }) : null,
      status ? el("span", { className: `thread-status thread-status-${thread.latestRun.status}`, text: status }) : null,
    ),
  );
  button.addEventListener("click", () => {
    drawer(false);
    threadOpen(thread.threadId, thread.latestRun);
  });
  return el("li", {}, button);
}

async function threadsLoad({ more = false } = {}) {
  const query = more && state.threadsNext ? `?limit=20&cursor=${encodeURIComponent(state.threadsNext)}` : "?limit=20";
  try {
    const page = await api(`/threads${query}`);
    if (!more) ui.threadList.replaceChildren();
    ui.threadList.append(...page.threads.map(threadItem));
    state.threadsNext = page.next;
    ui.moreThreads.hidden = !page.next;
    ui.threadsEmpty.hidden = ui.threadList.children.length > 0;
  } catch (error) {
    ui.threadsEmpty.hidden = false;
    ui.threadsEmpty.textContent = `Threads could not be loaded: ${error.message}`;
  }
}

function threadsMarkCurrent() {
  for (const button of ui.threadList.querySelectorAll(".thread-button")) {
    if (button.dataset.threadId === state.threadId) button.setAttribute("aria-current", "true");
    else button.removeAttribute("aria-current");
  }
}

// --- the conversation, a day at a time ----------------------------------------------------

function daySection(day, { prepend = false } = {}) {
  const section = el(
    "section",
    { className: "day", attrs: { "data-day": day, "aria-label": dayLabel(day) } },
    el("h3", { className: "day-label" }, el("span", { text: dayLabel(day) })),
    el("div", { className: "day-messages" }),
  );
  if (prepend) ui.days.prepend(section);
  else ui.days.append(section);
  ui.empty.hidden = true;
  return section.querySelector(".day-messages");
}

/** Where a message of now goes: today's section, made if the newest one shown is older. */
function todayMessages() {
  const today = localDay();
  const sections = ui.days.querySelectorAll("section.day");
  const last = sections[sections.length - 1];
  if (last && last.dataset.day >= today) return last.querySelector(".day-messages");
  if (!state.oldestDay) state.oldestDay = today;
  return daySection(today);
}

function historyMessage(message, reasoning = []) {
  if (message.role === "user") {
    const images = (message.attachments || []).map((image) => ({ url: image.url, alt: "Attached image" }));
    return userMessage({ text: message.content, images, timestamp: message.timestamp });
  }
  const turn = agentTurn({ timestamp: message.timestamp });
  for (const thought of reasoning) {
    const block = reasoningBlock({ stage: thought.stage });
    block.append(thought.content);
    block.finish();
    turn.reasoning.append(block.block);
  }
  turn.answer.textContent = message.content || "";
  turn.answer.removeAttribute("aria-live");
  const rendered = uiSchema(message.ui_schema, sendPrompt, { answer: message.content || "" });
  if (rendered) turn.ui.append(rendered);
  return turn.article;
}

/** A day's messages as the conversation shows them: the reasoning before an answer goes,
 * collapsed, into that answer's turn. */
function historyMessages(messages) {
  const shown = [];
  let reasoning = [];
  for (const message of messages) {
    if (message.role === "reasoning") {
      reasoning.push(message);
      continue;
    }
    shown.push(historyMessage(message, message.role === "user" ? [] : reasoning));
    if (message.role !== "user") reasoning = [];
  }
  return shown;
}

function nearBottom() {
  return ui.log.scrollHeight - ui.log.scrollTop - ui.log.clientHeight < 120;
}

function scrollToBottom() {
  ui.log.scrollTop = ui.log.scrollHeight;
}

function conversationClear() {
  state.approvals.clear();
  composerWaiting();
  ui.days.replaceChildren();
  ui.empty.hidden = false;
  ui.loadEarlier.hidden = true;
  state.oldestDay = null;
}

async function historyDayLoad(threadId, { before = null } = {}) {
  const query = new URLSearchParams({ threadId, include: "reasoning" });
  if (before) query.set("before", before);
  return api(`/history?${query}`);
}

function historyDayShow(snapshot, { prepend }) {
  if (!snapshot.day) return;
  const messages = daySection(snapshot.day, { prepend });
  messages.append(...historyMessages(snapshot.messages));
  state.oldestDay = snapshot.day;
  ui.loadEarlier.hidden = !snapshot.hasMore;
}

async function threadOpen(threadId, latestRun = null) {
  if (state.run) {
    if (threadId !== state.run.threadId) showError("Wait for the answer, or stop it, before opening another thread.");
    return;
  }
  const token = ++state.loadToken;
  state.threadId = threadId;
  threadsMarkCurrent();
  conversationClear();
  ui.empty.hidden = true;
  try {
    const snapshot = await historyDayLoad(threadId);
    if (token !== state.loadToken) return;
    historyDayShow(snapshot, { prepend: false });
    if (!snapshot.day) ui.empty.hidden = false;
    endedWithoutAnswer(snapshot, latestRun);
    scrollToBottom();
    // A run still going on: follow it from its start (its answer is not in history yet).
    if (latestRun && ["queued", "running"].includes(latestRun.status)) {
      runFollow({ threadId, runId: latestRun.runId, turn: null });
    }
  } catch (error) {
    if (token !== state.loadToken) return;
    todayMessages().append(errorNote(`This thread could not be loaded: ${error.message}`));
  }
  // The approvals the thread waits for (made on another device, or before a reload).
  if (await pendingApprovalsShow(threadId, token)) return;
  ui.input.focus();
}

/** Show the thread's pending approvals in a turn of their own; whether there were any. */
async function pendingApprovalsShow(threadId, token) {
  let page;
  try {
    page = await api(`/interrupts?${new URLSearchParams({ threadId, limit: "100" })}`);
  } catch (error) {
    if (token === state.loadToken) todayMessages().append(errorNote(`Approvals could not be loaded: ${error.message}`));
    return false;
  }
  const approvals = page.interrupts.filter((interrupt) => interrupt.kind === "approval").reverse();
  if (token !== state.loadToken || approvals.length === 0) return false;
  ui.empty.hidden = true;
  const turn = agentTurn({ timestamp: approvals[0].createdAt });
  turn.answer.removeAttribute("aria-live");
  todayMessages().append(turn.article);
  approvalsShow(approvals, turn);
  return true;
}

// How a run that ended without an answer ended, as its live stream said it.
function runEndLine(turn, { cancelled, code, message }) {
  if (cancelled) {
    turn.article.classList.add("stopped");
    turn.status.replaceChildren(statusLine("stopped", "Stopped"));
  } else {
    turn.article.classList.add("failed");
    turn.status.replaceChildren(errorNote(`The run failed${code ? ` (${code})` : ""}: ${message || "runtime execution failed"}.`));
  }
}

// The thread's latest run was stopped, or failed, before it answered: history holds its
// user message only, so say how the run ended after it, as the live stream did.
function endedWithoutAnswer(snapshot, latestRun) {
  const last = snapshot.messages[snapshot.messages.length - 1];
  if (!latestRun || !last || last.role !== "user") return;
  if (!["cancelled", "failed"].includes(latestRun.status)) return;
  const turn = agentTurn({ timestamp: latestRun.finishedAt || last.timestamp });
  turn.answer.removeAttribute("aria-live");
  runEndLine(turn, { cancelled: latestRun.status === "cancelled", message: "no answer was given" });
  todayMessages().append(turn.article);
}

async function loadEarlier() {
  if (!state.threadId || !state.oldestDay) return;
  ui.loadEarlier.disabled = true;
  const height = ui.log.scrollHeight;
  const top = ui.log.scrollTop;
  try {
    const snapshot = await historyDayLoad(state.threadId, { before: state.oldestDay });
    historyDayShow(snapshot, { prepend: true });
    if (!snapshot.day) ui.loadEarlier.hidden = true;
    // Keep what the reader was looking at in place.
    ui.log.scrollTop = top + (ui.log.scrollHeight - height);
    announce(snapshot.day ? `Loaded ${dayLabel(snapshot.day)}` : "No earlier days");
  } catch (error) {
    showError(`Earlier days could not be loaded: ${error.message}`);
  } finally {
    ui.loadEarlier.disabled = false;
  }
}

function errorNote(text) {
  return el("p", { className: "inline-error", attrs: { role: "alert" } }, text);
}

// --- attachments --------------------------------------------------------------------------

function showError(text) {
  ui.error.textContent = text;
  ui.error.hidden = !text;
}

function previewsRefresh() {
  ui.previews.hidden = state.attachments.length === 0;
  ui.attach.disabled = state.attachments.length >= MAX_IMAGES;
  ui.attach.closest("label").classList.toggle("disabled", ui.attach.disabled);
}

function attachmentRemove(attachment) {
  state.attachments = state.attachments.filter((kept) => kept !== attachment);
  attachment.element.remove();
  URL.revokeObjectURL(attachment.previewUrl);
  previewsRefresh();
  ui.input.focus();
}

function attachmentsAdd(files) {
  showError("");
  for (const file of files) {
    if (!IMAGE_TYPES.includes(file.type)) {
      showError(`“${file.name}” is not an image: attach PNG, JPEG, GIF or WebP images only.`);
      continue;
    }
    if (state.attachments.length >= MAX_IMAGES) {
      showError(`At most ${MAX_IMAGES} images per message.`);
      break;
    }
    const attachment = { id: uuid4(), file, previewUrl: URL.createObjectURL(file) };
    const status = el("span", { className: "preview-status", text: "Uploading…" });
    const remove = el("button", {
      className: "preview-remove",
      text: "×",
      attrs: { type: "button", "aria-label": `Remove image ${file.name}` },
    });
    remove.addEventListener("click", () => attachmentRemove(attachment));
    attachment.element = el(
      "figure",
      { className: "preview uploading" },
      el("img", { attrs: { src: attachment.previewUrl, alt: `Preview of ${file.name}` } }),
      status,
      remove,
    );
    const form = new FormData();
    form.append("file", file);
    attachment.upload = api("/attachments", { method: "POST", form }).then(
      (stored) => {
        attachment.element.classList.remove("uploading");
        status.textContent = "";
        return stored;
      },
      (error) => {
        attachment.element.classList.add("failed");
        status.textContent = "Failed";
        throw error;
      },
    );
    attachment.upload.catch((error) => showError(`“${file.name}” could not be uploaded: ${error.message}`));
    state.attachments.push(attachment);
    ui.previews.append(attachment.element);
  }
  previewsRefresh();
}

// --- sending and following a run ----------------------------------------------------------

function composerBusy(busy) {
  ui.send.hidden = busy;
  ui.send.disabled = busy;
  ui.stop.hidden = !busy;
  ui.stop.disabled = false;
  for (const button of document.querySelectorAll(".ui-action")) button.disabled = busy;
  ui.newThread.disabled = busy;
}

function sendPrompt(prompt) {
  if (state.run) return;
  send({ text: prompt, attachments: [] });
}

async function send({ text, attachments }) {
  if (state.run) return;
  showError("");
  if (!text && attachments.length === 0) {
    showError("Write a message or attach an image first.");
    ui.input.focus();
    return;
  }
  let uploads;
  try {
    uploads = await Promise.all(attachments.map((attachment) => attachment.upload));
  } catch {
    showError("An image could not be uploaded: remove it and try again.");
    return;
  }
  const newThread = !state.threadId;
  const threadId = state.threadId || uuid4();
  const runId = `console-${uuid4()}`;
  const content = uploads.length
    ? [
        ...(text ? [{ type: "text", text }] : []),
        ...uploads.map((stored) => ({ type: "binary", mimeType: stored.mime_type, url: stored.url })),
      ]
    : text;
  const body = {
    threadId,
    runId,
    messages: [{ id: `msg-${uuid4()}`, role: "user", content }],
    forwardedProps: { runtime_mode: "chat", client_time: clientTime() },
  };
  const controller = new AbortController();
  state.run = { runId, threadId, controller };
  composerBusy(true);
  const messages = todayMessages();
  messages.append(userMessage({ text, images: uploads.map((stored, i) => ({ url: stored.url, alt: attachments[i].file.name })) }));
  const turn = agentTurn();
  turn.status.replaceChildren(statusLine("thinking", "Thinking…"));
  messages.append(turn.article);
  scrollToBottom();
  try {
    await api("/runs", { method: "POST", json: body });
  } catch (error) {
    turn.status.replaceChildren(errorNote(`The message was not sent: ${error.message}`));
    state.run = null;
    composerBusy(false);
    return;
  }
  // Accepted: the composer is emptied only now, so a refused message can be sent again.
  if (text === ui.input.value.trim()) ui.input.value = "";
  for (const attachment of attachments) attachmentRemove(attachment);
  autoGrow();
  if (newThread) {
    state.threadId = threadId;
    if (!state.oldestDay) state.oldestDay = localDay();
  }
  await runFollow({ threadId, runId, turn, controller });
}

/** Render one run's events into `turn` (a new agent turn when null) until it ends. */
async function runFollow({ threadId, runId, turn, controller = new AbortController() }) {
  if (!state.run) {
    state.run = { runId, threadId, controller };
    composerBusy(true);
  }
  if (!turn) {
    turn = agentTurn();
    turn.status.replaceChildren(statusLine("thinking", "Thinking…"));
    todayMessages().append(turn.article);
    scrollToBottom();
  }
  const renderer = turnRenderer(turn, threadId);
  turn.answer.setAttribute("aria-busy", "true");
  try {
    await followRun({
      api: API,
      threadId,
      runId,
      signal: controller.signal,
      onEvent: renderer,
      onState: (connection) => {
        turn.article.classList.toggle("reconnecting", connection === "reconnecting");
        if (connection === "reconnecting") turn.status.replaceChildren(statusLine("reconnecting", "Connection lost: reconnecting…"));
        else if (turn.status.querySelector(".status-reconnecting")) turn.status.replaceChildren();
      },
    });
  } catch (error) {
    const words = error instanceof StreamRefused ? error.message : `The stream failed: ${error.message}`;
    turn.status.replaceChildren(errorNote(words));
  } finally {
    turn.answer.removeAttribute("aria-busy");
    turn.answer.removeAttribute("aria-live");
    if (state.run && state.run.runId === runId) state.run = null;
    composerBusy(false);
    // The list again: a new thread appears, the thread moves to the top, its status changes.
    // The inbox too: the run may have stopped on an approval, or answered some.
    threadsLoad();
    approvalsInbox.refresh();
    spendRefresh();
  }
}

function turnRenderer(turn, threadId) {
  const cards = new Map();
  const thoughts = new Map();
  const thoughtFor = (event) => {
    if (!thoughts.has(event.messageId)) {
      const block = reasoningBlock({ stage: event.stage });
      thoughts.set(event.messageId, block);
      turn.reasoning.append(block.block);
    }
    return thoughts.get(event.messageId);
  };
  let streamed = "";
  let interrupts = []; // the approvals the run stopped on, shown once it has ended
  const stick = () => nearBottom() && scrollToBottom();
  const cardFor = (event) => {
    const id = event.toolCallId || event.tool_call_id;
    if (!cards.has(id)) {
      const card = toolCard(event.toolCallName || event.tool_name);
      cards.set(id, card);
      turn.tools.append(card.card);
    }
    return cards.get(id);
  };
  const clearThinking = () => {
    if (turn.status.querySelector(".status-thinking")) turn.status.replaceChildren();
  };
  return (event) => {
    switch (event.type) {
      case "TEXT_MESSAGE_CONTENT":
        clearThinking();
        // Appended as a text node of its own: a screen reader reads the new words only.
        streamed += event.delta || "";
        turn.answer.append(event.delta || "");
        break;
      case "TEXT_MESSAGE_END": {
        clearThinking();
        // The deltas are the answer; the whole answer only fills in for a model that sent none.
        if (!streamed && event.answer) turn.answer.textContent = event.answer;
        const rendered = uiSchema(event.ui_schema, sendPrompt, { answer: streamed || event.answer || "" });
        if (rendered) {
          turn.ui.replaceChildren(rendered);
          for (const button of rendered.querySelectorAll(".ui-action")) button.disabled = true;
        }
        if (event.status === "failed" && event.error) turn.status.replaceChildren(errorNote(String(event.error)));
        announce("The agent answered.");
        break;
      }
      case "REASONING_MESSAGE_START":
        thoughtFor(event);
        break;
      case "REASONING_MESSAGE_CONTENT":
        // Collapsed: the reasoning grows unseen until the reader opens it.
        thoughtFor(event).append(event.delta);
        break;
      case "REASONING_MESSAGE_END":
        thoughtFor(event).finish();
        break;
      case "TOOL_CALL_START":
        clearThinking();
        cardFor(event);
        break;
      case "TOOL_CALL_ARGS": {
        const card = cardFor(event);
        if (event.args && typeof event.args === "object") card.setArgs(event.args);
        else card.appendArgs(event.delta);
        break;
      }
      case "TOOL_CALL_RESULT": {
        const card = cardFor(event);
        card.setName(event.tool_name);
        if (event.tool_call_args) card.setArgs(event.tool_call_args);
        card.finish({ status: event.status, result: event.result ?? event.content, error: event.error });
        break;
      }
      case "RUN_ERROR":
        clearThinking();
        runEndLine(turn, { cancelled: event.code === "cancelled", code: event.code, message: event.message });
        announce(event.code === "cancelled" ? "The run was stopped." : "The run failed.");
        for (const card of cards.values()) card.card.querySelector(".tool-status-running")?.replaceChildren("Not finished");
        for (const block of thoughts.values()) block.finish();
        break;
      case "CUSTOM":
        // The run stops on tool calls waiting for an answer (its RUN_FINISHED comes next).
        if (event.name === "run_interrupted") {
          interrupts = (event.value && event.value.interrupts) || [];
          for (const interrupt of interrupts) cards.get(interrupt.toolCallId)?.setStatus("waiting");
        }
        break;
      case "RUN_FINISHED":
        clearThinking();
        if (interrupts.length && state.threadId === threadId) {
          approvalsShow(interrupts, turn);
          announce("The agent waits for your approval.");
        }
        break;
      default:
        break;
    }
    stick();
  };
}

// --- approvals: the tool calls a run stopped on, answered by a run that resumes it --------

/** Cards for `interrupts` in `turn` (its pending approvals), focus on the first. */
function approvalsShow(interrupts, turn) {
  const list = el("div", { className: "approvals" });
  for (const interrupt of interrupts) {
    if (state.approvals.has(interrupt.id)) continue;
    const entry = { interrupt, decision: null };
    entry.view = approvalCard(interrupt, (approved) => approvalDecide(entry, approved));
    if (!entry.view.expired) state.approvals.set(interrupt.id, entry);
    list.append(entry.view.card);
  }
  turn.status.before(list);
  composerWaiting();
  const first = list.querySelector(".approval-card");
  if (first) {
    first.focus();
    first.scrollIntoView({ block: "nearest" });
  }
}

function approvalDecide(entry, approved) {
  if (state.run || entry.decision !== null) return;
  entry.decision = approved;
  const open = [...state.approvals.values()];
  const waiting = open.some((other) => other.decision === null);
  entry.view.decided(approved, { waiting });
  // The pressed button is disabled now: keep the focus on its card.
  entry.view.card.focus();
  announce(approved ? "Approved." : "Rejected.");
  // One resume answers every open interrupt of the thread (AG-UI 1.0): wait for them all.
  if (!waiting) approvalsSend(open);
}

/** The run that answers the approvals: POST /ag-ui with `resume` and no new user message,
 * followed as any turn. */
async function approvalsSend(answered) {
  const threadId = state.threadId;
  const runId = `console-${uuid4()}`;
  const body = {
    threadId,
    runId,
    messages: [],
    resume: answered.map((entry) => ({
      interruptId: entry.interrupt.id,
      status: "resolved",
      payload: { approved: entry.decision },
    })),
    forwardedProps: { runtime_mode: "chat", client_time: clientTime() },
  };
  const controller = new AbortController();
  state.run = { runId, threadId, controller };
  composerBusy(true);
  try {
    await api("/ag-ui", { method: "POST", json: body });
  } catch (error) {
    state.run = null;
    composerBusy(false);
    // Answered elsewhere (409), expired (410) or gone (404): it cannot be answered here.
    const final = [404, 409, 410].includes(error.status);
    for (const entry of answered) {
      entry.decision = null;
      entry.view.refused(`The answer was not sent: ${error.message}`, { final });
      if (final) state.approvals.delete(entry.interrupt.id);
    }
    composerWaiting();
    answered[0].view.card.focus();
    return;
  }
  for (const entry of answered) state.approvals.delete(entry.interrupt.id);
  composerWaiting();
  approvalsInbox.refresh(); // answered: no longer pending
  await runFollow({ threadId, runId, turn: null, controller });
}

/** The message box says so while the thread waits on an approval. */
function composerWaiting() {
  ui.waiting.hidden = state.approvals.size === 0;
}

async function stop() {
  if (!state.run) return;
  ui.stop.disabled = true;
  const { runId, threadId } = state.run;
  try {
    await api(`/runs/${encodeURIComponent(runId)}/cancel?threadId=${encodeURIComponent(threadId)}`, { method: "POST" });
  } catch (error) {
    ui.stop.disabled = false;
    showError(`The run could not be stopped: ${error.message}`);
  }
}

// --- the composer and the drawer ----------------------------------------------------------

function autoGrow() {
  ui.input.style.height = "auto";
  ui.input.style.height = `${Math.min(ui.input.scrollHeight, 200)}px`;
}

function submit() {
  if (state.run) return;
  send({ text: ui.input.value.trim(), attachments: [...state.attachments] });
}

function drawer(open) {
  document.body.classList.toggle("drawer-open", open);
  ui.drawerToggle.setAttribute("aria-expanded", String(open));
  ui.backdrop.hidden = !open;
  if (open) (ui.threadList.querySelector("[aria-current]") || ui.threadList.querySelector("button") || ui.newThread).focus();
}

ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  submit();
});
ui.input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    submit();
  }
});
ui.input.addEventListener("input", autoGrow);
ui.attach.addEventListener("change", () => {
  attachmentsAdd([...ui.attach.files]);
  ui.attach.value = "";
});
ui.stop.addEventListener("click", stop);
ui.loadEarlier.addEventListener("click", loadEarlier);
ui.moreThreads.addEventListener("click", () => threadsLoad({ more: true }));
ui.newThread.addEventListener("click", () => {
  if (state.run) return;
  state.loadToken++;
  state.threadId = null;
  threadsMarkCurrent();
  conversationClear();
  drawer(false);
  ui.input.focus();
});
ui.drawerToggle.addEventListener("click", () => drawer(!document.body.classList.contains("drawer-open")));
ui.backdrop.addEventListener("click", () => drawer(false));
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && document.body.classList.contains("drawer-open")) {
    drawer(false);
    ui.drawerToggle.focus();
  }
});

(async function start() {
  await threadsLoad();
  await approvalsInbox.refresh();
  await spendRefresh();
  const first = ui.threadList.querySelector(".thread-button");
  if (first) first.click();
  root.dataset.ready = "true";
})();
