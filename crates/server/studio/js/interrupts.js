// Pending interrupts and how a human answers them: a tool call to approve, edit or reject (the
// `action_requests` of a human-approval interrupt), or any JSON value; a breakpoint to continue from.

import { h, pretty } from "./dom.js";
import { tree } from "./tree.js";

/** The interrupts of a thread (`thread.interrupts` maps task ids to lists). */
export function pending(thread) {
  return Object.values(thread?.interrupts || {}).flat();
}

/**
 * The answer form for `interrupts`; `resume(command)` gets the run's `command`. With no interrupt but a
 * thread paused before `next` nodes (a breakpoint), a button continues the run.
 */
export function answerForm(interrupts, next, resume) {
  if (!interrupts.length) {
    if (!next?.length) return null;
    return h("section", { class: "interrupt card", "aria-label": "breakpoint" },
      h("h3", {}, `Paused before ${next.join(", ")}`),
      h("button", { type: "button", class: "primary", id: "continue", onclick: () => resume(null) }, "Continue"));
  }
  return h("section", { class: "interrupt card", "aria-label": "pending interrupts" },
    h("h3", {}, interrupts.length === 1 ? "Waiting for you" : `${interrupts.length} interrupts waiting for you`),
    interrupts.map((it, i) => one(it, i, interrupts.length, resume)));
}

function one(it, index, count, resume) {
  const requests = it?.value?.action_requests;
  const send = (value) => {
    // One interrupt: resume with its value; several: by interrupt id.
    resume(count > 1 && it.id ? { resume: { [it.id]: value } } : { resume: value });
  };
  if (Array.isArray(requests) && requests.length) return approvals(it, requests, send);
  const area = h("textarea", { id: `resume-json-${index}`, rows: 3, spellcheck: "false" }, '"yes"');
  const error = h("p", { class: "error-text", role: "alert" });
  return h("div", { class: "interrupt-item" },
    tree(it.value, 2, "value"),
    h("label", { for: `resume-json-${index}` }, "Answer (JSON)"),
    area, error,
    h("button", { type: "button", class: "primary", onclick: () => {
      try { send(JSON.parse(area.value)); } catch (e) { error.textContent = `Not JSON: ${e.message}`; }
    } }, "Resume"));
}

function approvals(it, requests, send) {
  const decisions = requests.map(() => null);
  const submit = () => { if (decisions.every(Boolean)) send(decisions); };
  return h("div", { class: "interrupt-item" }, requests.map((req, i) => {
    const args = h("textarea", { id: `edit-args-${i}`, rows: 4, spellcheck: "false" }, pretty(req.args ?? {}));
    const why = h("input", { id: `reject-why-${i}`, type: "text", placeholder: "why (optional)" });
    const error = h("p", { class: "error-text", role: "alert" });
    const decide = (decision) => { decisions[i] = decision; submit(); };
    return h("div", { class: "approval", "data-tool": req.name },
      h("p", {}, h("strong", {}, req.name), ` ${req.description || ""}`),
      h("code", { class: "block" }, JSON.stringify(req.args ?? {})),
      h("div", { class: "row" },
        h("button", { type: "button", class: "primary approve", onclick: () => decide({ type: "approve" }) }, "Approve"),
        h("button", { type: "button", class: "reject", onclick: () => decide(why.value ? { type: "reject", message: why.value } : { type: "reject" }) }, "Reject")),
      h("details", {},
        h("summary", {}, "Edit the call or give a reason"),
        h("label", { for: `edit-args-${i}` }, "Arguments (JSON)"), args,
        h("button", { type: "button", class: "edit", onclick: () => {
          try { decide({ type: "edit", args: JSON.parse(args.value) }); } catch (e) { error.textContent = `Not JSON: ${e.message}`; }
        } }, "Run with these arguments"),
        h("label", { for: `reject-why-${i}` }, "Reason to reject"), why),
      error);
  }));
}
