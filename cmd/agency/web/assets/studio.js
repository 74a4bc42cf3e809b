// Studio's page: the agents of the space with a form per action, the
// timeline of messages and the conversations, live over server-sent events.
(function () {
  "use strict";

  const $ = (sel, root) => (root || document).querySelector(sel);
  const el = (tag, attrs, ...children) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  };

  const state = {
    me: "",
    agents: {},        // id → action → help
    known: new Set(),  // ids not to survey again for
    events: [],        // newest last
    maxEvents: 1000,
    conversations: new Map(),
  };

  async function getJSON(path) {
    const r = await fetch(path, { headers: { Accept: "application/json" } });
    const body = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(body.error || r.status + " " + r.statusText);
    return body;
  }

  // ---- the space ---------------------------------------------------------

  async function loadSpace() {
    const sp = await getJSON("studio/api/space");
    state.me = sp.agent;
    $("#where").textContent = sp.where + " · as " + sp.agent;
    const plans = $("#plans");
    plans.replaceChildren();
    if (sp.plans) {
      plans.append(el("iframe", { src: "plans/", title: "plans and approvals" }));
    } else {
      plans.append(el("p", { class: "note", text: "Start Studio with --coordinator ID (a plan coordinator of package actions/plan) to see its plans here and approve or reject their steps." }));
    }
  }

  // ---- agents and their forms ----------------------------------------------

  let surveying = null;
  async function loadAgents() {
    if (surveying) return surveying;
    $("#agents-note").textContent = "Asking the agents for help…";
    surveying = getJSON("studio/api/agents").then((agents) => {
      state.agents = agents;
      for (const id of Object.keys(agents)) state.known.add(id);
      renderAgents();
    }).catch((e) => {
      $("#agents-note").textContent = "Could not list the agents: " + e.message;
    }).finally(() => { surveying = null; });
    return surveying;
  }

  function renderAgents() {
    const box = $("#agents");
    // An action whose help has not changed keeps its element, and with it
    // what the user has typed, opened or been answered: a survey (every
    // 30 s, or when a new agent shows up) must not wipe a form being
    // filled in.
    const prev = new Map([...box.querySelectorAll("details.action")].map((d) => [d.dataset.key, d]));
    box.replaceChildren();
    const ids = Object.keys(state.agents).sort();
    $("#agents-note").textContent = ids.length ? "" : "No agent answered. Start one, then refresh.";
    for (const id of ids) {
      const actions = state.agents[id] || {};
      const names = Object.keys(actions).sort();
      const art = el("article", { class: "agent", "data-agent": id },
        el("h3", {}, id, " ", el("span", { class: "n", text: names.length + (names.length === 1 ? " action" : " actions") })));
      for (const name of names) {
        const key = id + "." + name;
        const h = actions[name] || {};
        const sig = JSON.stringify(h);
        const had = prev.get(key);
        if (had && had.dataset.sig === sig) {
          art.append(had);
          continue;
        }
        const d = el("details", { class: "action", "data-key": key, "data-action": name, open: had ? had.open : false },
          el("summary", {}, el("b", { text: name }), " ",
            el("span", { class: "desc", text: (h.description || "").split("\n")[0] }),
            h.access && h.access !== "permitted" ? el("span", { class: "access", text: h.access }) : null),
          actionForm(id, name, h));
        d.dataset.sig = sig;
        art.append(d);
      }
      box.append(art);
    }
  }

  // fields returns the properties of an args schema, in order, with
  // whether each is required.
  function fields(schema) {
    const props = (schema && schema.properties) || {};
    const req = new Set((schema && schema.required) || []);
    return Object.keys(props).map((name) => ({ name, schema: props[name] || {}, required: req.has(name) }));
  }

  function typeOf(s) {
    if (Array.isArray(s.type)) return s.type.filter((t) => t !== "null")[0] || "any";
    return s.type || (s.properties ? "object" : "any");
  }

  function hint(f) {
    const s = f.schema, parts = [typeOf(s)];
    if (f.required) parts.push("required");
    for (const k of ["minimum", "maximum", "minLength", "maxLength", "format", "pattern"]) {
      if (s[k] !== undefined) parts.push(k + " " + s[k]);
    }
    return parts.join(", ") + (s.description ? " — " + s.description : "");
  }

  function input(f) {
    const s = f.schema, t = typeOf(s), name = f.name;
    if (Array.isArray(s.enum)) {
      const sel = el("select", { name, "data-type": "enum" }, el("option", { value: "", text: f.required ? "choose…" : "(none)" }));
      s.enum.forEach((v, i) => sel.append(el("option", { value: String(i), text: JSON.stringify(v) })));
      return sel;
    }
    switch (t) {
      case "number": case "integer":
        return el("input", { type: "number", name, step: t === "integer" ? "1" : "any", "data-type": t });
      case "boolean":
        return el("input", { type: "checkbox", name, "data-type": t });
      case "string":
        return el("input", { type: "text", name, "data-type": t, autocomplete: "off" });
      default:
        return el("textarea", { name, "data-type": "json", placeholder: t === "array" ? "[ … ] as JSON" : "JSON" });
    }
  }

  function actionForm(agent, action, h) {
    const fs = fields(h.args);
    const form = el("form", { class: "call", "data-agent": agent, "data-action": action });
    for (const f of fs) {
      form.append(el("label", {}, el("span", {}, el("span", { class: "name", text: f.name }), " ", el("span", { class: "hint", text: hint(f) })), input(f)));
    }
    const raw = el("textarea", { name: "__raw__", hidden: true, placeholder: "the arguments as one JSON object" });
    const toggle = el("label", { class: "row hint" }, el("input", { type: "checkbox", class: "as-json" }), "edit as JSON");
    toggle.querySelector("input").addEventListener("change", (e) => {
      raw.hidden = !e.target.checked;
      if (e.target.checked) raw.value = JSON.stringify(collect(form, fs), null, 1);
    });
    const result = el("pre", { class: "result", "aria-live": "polite" });
    form.append(toggle, raw, el("div", { class: "row" }, el("button", { type: "submit", text: "Call " + action })), result);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      let args;
      try {
        args = raw.hidden ? collect(form, fs) : JSON.parse(raw.value || "{}");
      } catch (err) {
        show(result, "error", "not JSON: " + err.message);
        return;
      }
      show(result, "pending", "calling " + agent + "." + action + "…");
      try {
        const r = await fetch("studio/api/call", {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ agent, action, args }),
        });
        const body = await r.json();
        if (!r.ok) show(result, "error", body.error || r.statusText);
        else if (body.ok) show(result, "ok", JSON.stringify(body.value, null, 2), body.elapsed_ms);
        else show(result, "error", body.error_type + ": " + body.error, body.elapsed_ms, body.error_type);
      } catch (err) {
        show(result, "error", "the call did not reach Studio: " + err.message);
      }
    });
    return form;
  }

  function collect(form, fs) {
    const args = {};
    for (const f of fs) {
      const inp = form.querySelector('[name="' + CSS.escape(f.name) + '"]');
      if (!inp) continue;
      switch (inp.dataset.type) {
        case "boolean": if (inp.checked || f.required) args[f.name] = inp.checked; break;
        case "number": case "integer":
          if (inp.value !== "") args[f.name] = Number(inp.value);
          break;
        case "enum": if (inp.value !== "") args[f.name] = f.schema.enum[Number(inp.value)]; break;
        case "json":
          if (inp.value.trim() !== "") {
            try { args[f.name] = JSON.parse(inp.value); } catch (e) { throw new Error(f.name + ": " + e.message); }
          }
          break;
        default: if (inp.value !== "" || f.required) args[f.name] = inp.value;
      }
    }
    return args;
  }

  function show(box, kind, text, ms, type) {
    box.dataset.state = kind;
    if (type) box.dataset.errorType = type; else delete box.dataset.errorType;
    box.textContent = text + (ms !== undefined ? "\n(" + ms.toFixed(1) + " ms)" : "");
  }

  // ---- the timeline -----------------------------------------------------------

  const filters = { agent: "", action: "", kind: "", help: false };
  const actionOf = (ev) => (ev.kind === "request" ? ev.action : ev.answers || "");

  function visible(ev) {
    if (!filters.help && actionOf(ev) === "help") return false;
    if (filters.agent && ev.from !== filters.agent && ev.to !== filters.agent) return false;
    if (filters.action && actionOf(ev) !== filters.action) return false;
    if (filters.kind && ev.kind !== filters.kind) return false;
    return true;
  }

  function clip(s, n) { s = s || ""; return s.length > n ? s.slice(0, n) + "…" : s; }

  function row(ev) {
    const t = new Date(ev.at);
    const time = t.toLocaleTimeString([], { hour12: false }) + "." + String(t.getMilliseconds()).padStart(3, "0");
    let msg;
    switch (ev.kind) {
      case "request": msg = [el("b", { text: ev.action }), " " + clip(JSON.stringify(ev.args), 300)]; break;
      case "response": msg = ["↩ " + (ev.answers ? ev.answers + ": " : "") + clip(JSON.stringify(ev.args), 300)]; break;
      case "error": msg = ["✖ " + (ev.answers ? ev.answers + ": " : ""), el("b", { text: ev.error_type }), " " + clip(ev.error, 400)]; break;
      default: msg = ["not a message: " + ev.error];
    }
    const tr = el("tr", {
      "data-seq": ev.seq, "data-kind": ev.kind, "data-action": actionOf(ev),
      "data-from": ev.from, "data-to": ev.to, title: "click for the message as it travelled",
    },
      el("td", { class: "t", text: time }),
      el("td", { class: "who", text: (ev.from || "?") + " → " + (ev.to === "*" ? "everyone" : ev.to || "?") }),
      el("td", { class: "msg" }, ...msg, ev.conversation ? el("span", { class: "hint", text: "  · " + ev.conversation }) : null),
      el("td", { class: "num", text: ev.elapsed_ms !== undefined ? ev.elapsed_ms.toFixed(1) : "" }));
    tr.addEventListener("click", () => {
      const next = tr.nextElementSibling;
      if (next && next.classList.contains("wire")) { next.remove(); return; }
      tr.after(el("tr", { class: "wire" }, el("td", { colspan: 4, text: JSON.stringify(ev.wire, null, 2) })));
    });
    return tr;
  }

  function addEvent(ev) {
    state.events.push(ev);
    if (state.events.length > state.maxEvents) state.events.shift();
    $("#count-timeline").textContent = state.events.length;
    if (visible(ev)) {
      const body = $("#timeline tbody");
      body.prepend(row(ev));
      while (body.children.length > state.maxEvents) body.lastElementChild.remove();
      $("#timeline-note").hidden = true;
    }
    for (const id of [ev.from, ev.to]) {
      if (id && id !== "*" && id !== state.me && !id.startsWith("agency-cli.") && !state.known.has(id)) {
        state.known.add(id);
        scheduleSurvey();
      }
    }
  }

  function renderTimeline() {
    const body = $("#timeline tbody");
    body.replaceChildren();
    for (let i = state.events.length - 1; i >= 0; i--) {
      if (visible(state.events[i])) body.append(row(state.events[i]));
    }
    $("#timeline-note").hidden = body.children.length > 0;
  }

  let surveyTimer = null;
  function scheduleSurvey() {
    clearTimeout(surveyTimer);
    surveyTimer = setTimeout(loadAgents, 1500);
  }

  // ---- conversations ------------------------------------------------------------

  function renderConversations() {
    const box = $("#conversations");
    box.replaceChildren();
    const list = [...state.conversations.values()].sort((a, b) => (a.updated < b.updated ? 1 : -1));
    $("#count-conversations").textContent = list.length;
    $("#conversations-note").hidden = list.length > 0;
    for (const c of list) {
      const ol = el("ol");
      for (const t of c.turns || []) {
        let text;
        switch (t.kind) {
          case "handoff": text = t.from + " handed over to " + t.to + (t.text ? ": " + t.text : ""); break;
          case "say": text = t.from + ": " + t.text; break;
          case "error": text = t.from + " → " + t.to + " ✖ " + t.text; break;
          default: text = t.from + " → " + t.to + ": " + t.text;
        }
        ol.append(el("li", { "data-kind": t.kind, text }));
      }
      const holder = c.stored ? c.stored.holder : c.holder;
      let meta = "held by " + (holder || "?") + (c.user ? " · user " + c.user : "") +
        " · " + c.handoffs + " handoff" + (c.handoffs === 1 ? "" : "s");
      let stored = null;
      if (c.stored) {
        const s = c.stored;
        stored = el("div", { class: "stored", "data-holder": s.holder, text:
          "store: held by " + s.holder + ", " + (s.status || "?") + ", version " + s.version +
          (s.path && s.path.length ? ", path " + s.path.join(" → ") : "") +
          (s.vars && Object.keys(s.vars).length ? ", variables " + JSON.stringify(s.vars) : "") });
      }
      box.append(el("article", { class: "conversation", "data-conversation": c.id, "data-holder": holder || "" },
        el("h3", { text: c.id }),
        el("div", { class: "meta", text: meta }),
        stored,
        (c.turns || []).length ? ol : el("p", { class: "note", text: "Its messages passed before Studio started." })));
    }
  }

  let convTimer = null;
  async function loadConversations() {
    try {
      for (const c of await getJSON("studio/api/conversations")) state.conversations.set(c.id, c);
      renderConversations();
    } catch (e) { /* the stream brings them */ }
  }

  // ---- live updates ---------------------------------------------------------------

  function connect() {
    const es = new EventSource("studio/api/events");
    const status = $("#status");
    es.onopen = () => { status.dataset.state = "live"; status.textContent = "live"; loadConversations(); };
    es.onerror = () => { status.dataset.state = "down"; status.textContent = "reconnecting"; };
    es.addEventListener("message", (e) => addEvent(JSON.parse(e.data)));
    es.addEventListener("conversation", (e) => {
      const c = JSON.parse(e.data);
      const had = state.conversations.get(c.id);
      if (had && had.stored) c.stored = had.stored;
      state.conversations.set(c.id, c);
      renderConversations();
      clearTimeout(convTimer); // then what a store holds of it, once things settle
      convTimer = setTimeout(loadConversations, 300);
    });
  }

  // ---- wiring ---------------------------------------------------------------------------

  for (const b of document.querySelectorAll(".tabs button")) {
    b.addEventListener("click", () => {
      for (const o of document.querySelectorAll(".tabs button")) {
        o.setAttribute("aria-selected", String(o === b));
        $("#tab-" + o.dataset.tab).hidden = o !== b;
      }
    });
  }
  const onFilter = () => {
    filters.agent = $("#f-agent").value.trim();
    filters.action = $("#f-action").value.trim();
    filters.kind = $("#f-kind").value;
    filters.help = $("#f-help").checked;
    renderTimeline();
  };
  for (const id of ["#f-agent", "#f-action", "#f-kind", "#f-help"]) $(id).addEventListener("input", onFilter);
  $("#clear").addEventListener("click", () => { state.events = []; renderTimeline(); $("#count-timeline").textContent = "0"; });
  $("#refresh").addEventListener("click", loadAgents);
  setInterval(loadAgents, 30000);

  loadSpace().catch((e) => { $("#where").textContent = "Studio is not answering: " + e.message; });
  loadAgents();
  connect();
})();
