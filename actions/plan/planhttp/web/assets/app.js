// The page of actions/plan/planhttp: it talks to the same API as MACAE's
// page (the user comes from the proxy in front, or the server's DevUser),
// and polls it once a second to show statuses as they change. While the
// selected plan runs, it reads the plan's event stream
// (/plans/{id}/events) to show the answer of a running step as its agent
// makes it.
(() => {
  "use strict";
  const $ = (id) => document.getElementById(id);
  let selected = localStorage.getItem("plans.session") || null;
  const drafts = {}; // comments typed per step id, kept across renders
  let last = {};
  const live = {}; // the parts of running steps' answers, per step id: {seq, text}
  let source = null, sourcePlan = null, retryAt = 0;

  async function api(method, path, body) {
    const init = { method, headers: {} };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const r = await fetch(path, init);
    const data = await r.json().catch(() => ({}));
    if (!r.ok) {
      const d = data.detail;
      throw new Error(Array.isArray(d) ? d.map((e) => e.loc.join(".") + ": " + e.msg).join("; ") : d || r.statusText);
    }
    return data;
  }

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else if (v !== null && v !== undefined) e.setAttribute(k, v);
    }
    for (const c of children) e.append(c === null || c === undefined ? "" : c);
    return e;
  }

  function badge(status) {
    return el("span", { class: "badge s-" + status }, status.replace(/_/g, " "));
  }

  function note(text, isError) {
    $("conn").textContent = text;
    $("conn").className = isError ? "error" : "muted";
  }

  function changed(key, value) {
    const s = JSON.stringify(value);
    if (last[key] === s) return false;
    last[key] = s;
    return true;
  }

  function renderPlans(plans) {
    if (!changed("plans", [plans, selected])) return;
    const ul = $("plans");
    ul.replaceChildren(...plans.map((p) =>
      el("li", { class: p.session_id === selected ? "selected" : "", "data-session": p.session_id,
        onclick: () => { select(p.session_id); } },
        p.initial_goal, " ", badge(p.status))));
  }

  function renderPlan(p, messages) {
    $("plan").hidden = false;
    if (changed("plan", p)) {
      $("plan-goal").textContent = p.initial_goal;
      const st = $("plan-status");
      st.textContent = p.status.replace(/_/g, " ");
      st.className = "badge s-" + p.status;
      $("plan-summary").textContent = p.summary || (p.steps.length ? "" : "The planner is working on it…");
      $("plan-reason").hidden = !p.reason;
      $("plan-reason").textContent = p.reason || "";
      const asking = p.human_clarification_request !== null && p.human_clarification_response === null;
      $("clarification").hidden = !asking;
      $("clarification-question").textContent = p.human_clarification_request || "";
      const open = p.steps.filter((s) => s.human_approval_status === "requested");
      $("approve-all").hidden = open.length === 0 || asking;
      const tbody = $("steps").querySelector("tbody");
      tbody.replaceChildren(...p.steps.map((s) => stepRow(p, s, asking)));
    }
    if (changed("messages", messages)) {
      $("messages").replaceChildren(...messages.map((m) =>
        el("li", { "data-source": m.source }, el("span", { class: "src" }, m.source), ": ", m.content)));
    }
  }

  function stepRow(p, s, asking) {
    const info = [];
    if (s.auto_approved) info.push(el("div", { class: "muted auto" }, "Approved automatically (no person was asked)"));
    if (s.agent_reply !== null) info.push(el("div", {}, s.agent_reply));
    if (s.status === "action_requested") info.push(el("div", { class: "live" }, live[s.id] ? live[s.id].text : ""));
    if (s.human_feedback !== null) info.push(el("div", { class: "muted" }, "Feedback: " + s.human_feedback));
    let actions = "";
    if (s.human_approval_status === "requested" && !asking) {
      const comment = el("input", { class: "comment", placeholder: "Comment (for a rejection: what to change)",
        oninput: (e) => { drafts[s.id] = e.target.value; } });
      comment.value = drafts[s.id] || "";
      actions = el("div", {}, comment,
        el("button", { class: "approve", type: "button", onclick: () => decide(p, s, true) }, "Approve"), " ",
        el("button", { class: "reject", type: "button", onclick: () => decide(p, s, false) }, "Reject"));
    }
    return el("tr", { class: s.status, "data-seq": s.seq, "data-status": s.status, "data-step": s.id,
      "data-auto": s.auto_approved ? "true" : null },
      el("td", {}, String(s.seq)), el("td", {}, s.action), el("td", {}, s.agent), el("td", {}, badge(s.status)),
      el("td", {}, ...info), el("td", { class: "actions" }, actions));
  }

  // watch reads the event stream of plan p while it runs (none for a
  // finished plan, or none selected), one at a time.
  function watch(p) {
    const want = p && p.status !== "completed" && p.status !== "failed" ? p.id : null;
    if (source && sourcePlan === want) return;
    if (source) source.close();
    source = null;
    sourcePlan = null;
    if (!want || Date.now() < retryAt) return;
    const es = new EventSource("/plans/" + encodeURIComponent(want) + "/events");
    source = es;
    sourcePlan = want;
    es.addEventListener("part", (e) => {
      const d = JSON.parse(e.data);
      const l = live[d.step_id] || (live[d.step_id] = { seq: 0, text: "" });
      if (d.seq <= l.seq) return; // had it: a stream opened again sends the kept parts again
      if (d.seq > l.seq + 1) l.text += "…"; // older parts are no longer kept
      l.seq = d.seq;
      l.text += d.text;
      const div = document.querySelector('#steps tr[data-step="' + CSS.escape(d.step_id) + '"] .live');
      if (div) div.textContent = l.text;
    });
    // The stream (opened again) starts with the parts kept of the running steps.
    es.addEventListener("open", () => { for (const id of Object.keys(live)) delete live[id]; });
    es.addEventListener("step_end", (e) => {
      delete live[JSON.parse(e.data).step_id]; // a step sent again starts a new stream
      refresh();
    });
    es.addEventListener("end", () => {
      es.close();
      if (source === es) source = null;
      refresh();
    });
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED && source === es) {
        source = null; // refused (204 when finished, 404, 503): try again later
        retryAt = Date.now() + 5000;
      }
    };
  }

  async function decide(p, s, approved) {
    const body = { step_id: s.id, plan_id: p.id, session_id: p.session_id, approved };
    if (drafts[s.id]) body.human_feedback = drafts[s.id];
    try {
      await api("POST", "/human_feedback", body);
      delete drafts[s.id];
      note(approved ? "Step " + s.seq + " approved" : "Step " + s.seq + " rejected");
    } catch (e) { note(e.message, true); }
    refresh();
  }

  async function select(session) {
    selected = session;
    localStorage.setItem("plans.session", session);
    last = {};
    refresh();
  }

  async function refresh() {
    try {
      renderPlans(await api("GET", "/plans?limit=20"));
      if (selected) {
        const [plans, messages] = await Promise.all([
          api("GET", "/plans?session_id=" + encodeURIComponent(selected)),
          api("GET", "/agent_messages/" + encodeURIComponent(selected)),
        ]);
        renderPlan(plans[0], messages);
        watch(plans[0]);
      } else {
        watch(null);
      }
      if ($("conn").className === "error") note("");
    } catch (e) {
      if (selected && /not found/i.test(e.message)) { selected = null; $("plan").hidden = true; }
      note(e.message, true);
    }
  }

  $("task").addEventListener("submit", async (e) => {
    e.preventDefault();
    const description = $("task-description").value.trim();
    if (!description) return;
    $("task-create").disabled = true;
    try {
      const r = await api("POST", "/input_task", { description });
      $("task-description").value = "";
      note("Plan requested");
      await select(r.session_id);
    } catch (err) { note(err.message, true); }
    $("task-create").disabled = false;
  });

  $("approve-all").addEventListener("click", async () => {
    const p = JSON.parse(last.plan || "null");
    if (!p) return;
    try {
      await api("POST", "/approve_step_or_steps", { plan_id: p.id, session_id: p.session_id, approved: true });
      note("All steps approved");
    } catch (e) { note(e.message, true); }
    refresh();
  });

  $("clarification-send").addEventListener("click", async () => {
    const p = JSON.parse(last.plan || "null");
    const text = $("clarification-answer").value.trim();
    if (!p || !text) return;
    try {
      await api("POST", "/human_clarification_on_plan", { plan_id: p.id, session_id: p.session_id, human_clarification: text });
      $("clarification-answer").value = "";
      note("Answer sent");
    } catch (e) { note(e.message, true); }
    refresh();
  });

  refresh();
  setInterval(refresh, 1000);
})();
