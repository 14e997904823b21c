// syncheck's live page: sends the form as POST /v1/chat/completions with "stream": true and draws the server-sent
// events as they come (the same stream any client gets). Plain JavaScript, no dependencies, nothing fetched from
// elsewhere. Model text is only ever set as text (textContent), never parsed as HTML.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const state = {
    model: null, // the served model id (GET /health)
    text: "", // the answer so far
    sentences: new Map(), // sentence index -> its event (score, features, ...)
    repairs: [], // FOD's taken-back sentences: from each sentence event's "repair" as it comes, else the summary's trace
    summary: null, // the final syncheck block
    usage: null,
    controller: null, // aborts the request in flight
  };

  // ------------------------------------------------------------------ the form
  function addDocument(text = "") {
    const node = $("document-template").content.firstElementChild.cloneNode(true);
    node.querySelector("textarea").value = text;
    node.querySelector(".remove").addEventListener("click", () => node.remove());
    $("documents").appendChild(node);
    return node;
  }

  function documents() {
    return [...$("documents").querySelectorAll("textarea")].map((t) => t.value).filter((d) => d.trim());
  }

  async function upload(event) {
    for (const file of event.target.files) {
      const text = await file.text();
      const empty = [...$("documents").querySelectorAll("textarea")].find((t) => !t.value.trim());
      if (empty) empty.value = text;
      else addDocument(text);
    }
    event.target.value = "";
  }

  function number(id) {
    const raw = $(id).value.trim();
    return raw === "" ? null : Number(raw);
  }

  function requestBody() {
    const method = document.querySelector("input[name=method]:checked").value;
    const syncheck = { method, final_check: $("final-check").checked };
    for (const name of ["tau1", "tau2"]) {
      const value = number(name);
      if (value !== null) syncheck[name] = value;
    }
    const body = {
      model: state.model,
      messages: [{ role: "user", content: $("question").value }],
      documents: documents(),
      stream: true,
      stream_options: { include_usage: true },
      syncheck,
    };
    const maxTokens = number("max-tokens");
    if (maxTokens !== null) body.max_tokens = maxTokens;
    return body;
  }

  function headers() {
    const out = { "Content-Type": "application/json" };
    const key = $("api-key").value.trim();
    if (key) out.Authorization = `Bearer ${key}`;
    return out;
  }

  // the form as a link: ?question=...&document=...&document=...&method=fod&tau1=0.5&run=1 fills it (and asks)
  function fillFromAddress() {
    const params = new URLSearchParams(window.location.search);
    if (params.has("question")) $("question").value = params.get("question");
    const docs = params.getAll("document");
    for (const d of docs) addDocument(d);
    if (!docs.length) addDocument();
    const method = document.querySelector(`input[name=method][value="${CSS.escape(params.get("method") || "")}"]`);
    if (method) method.checked = true;
    for (const [param, id] of [["tau1", "tau1"], ["tau2", "tau2"], ["max_tokens", "max-tokens"]]) {
      if (params.has(param)) $(id).value = params.get(param);
    }
    if (params.has("final_check")) $("final-check").checked = params.get("final_check") !== "0";
    return params.get("run") === "1";
  }

  // ------------------------------------------------------------------ the request
  async function loadModel() {
    try {
      const health = await (await fetch("/health")).json();
      state.model = health.model;
      $("model").textContent = `Model: ${health.model}; aggregator: ${health.aggregator}.`;
    } catch (err) {
      setStatus(`the server did not answer /health (${err})`, "error");
    }
  }

  function setStatus(text, kind = "") {
    $("status").textContent = text;
    $("status").className = kind || "muted";
    document.body.dataset.state = kind || "busy"; // "done" or "error" once the request has ended
  }

  function reset() {
    Object.assign(state, { text: "", sentences: new Map(), repairs: [], summary: null, usage: null });
    $("details").hidden = true;
    $("summary").replaceChildren();
    $("warnings").replaceChildren();
    render();
  }

  async function ask(event) {
    if (event) event.preventDefault();
    if (state.controller) return;
    if (!state.model) await loadModel();
    reset();
    const controller = new AbortController();
    state.controller = controller;
    $("run").disabled = true;
    $("stop").disabled = false;
    setStatus("waiting for the model ...");
    try {
      const response = await fetch("/v1/chat/completions", {
        method: "POST", headers: headers(), body: JSON.stringify(requestBody()), signal: controller.signal,
      });
      if (!response.ok) {
        showError(response.status, await response.text());
        return;
      }
      setStatus("streaming ...");
      await readEvents(response.body, onChunk);
      if (state.summary) setStatus(`done (${state.summary.trace?.stop ?? "finished"})`, "done");
      else if ($("status").className !== "error") setStatus("the stream ended without a summary", "error");
    } catch (err) {
      if (err.name === "AbortError") setStatus("stopped", "muted");
      else setStatus(`the request failed: ${err.message}`, "error");
    } finally {
      state.controller = null;
      $("run").disabled = false;
      $("stop").disabled = true;
    }
  }

  function showError(status, raw) {
    let message = raw;
    try {
      message = JSON.parse(raw).error.message;
    } catch (_) { /* not an error object: show it as it came */ }
    const hint = status === 401 ? " (enter the server's API key)" : "";
    setStatus(`${status}: ${message}${hint}`, "error");
  }

  // server-sent events: "data: {...}" blocks separated by a blank line, ending with "data: [DONE]"
  async function readEvents(body, onData) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value.replace(/\r\n/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart())
          .join("\n");
        if (!data) continue;
        if (data === "[DONE]") return;
        onData(JSON.parse(data));
      }
    }
  }

  function onChunk(chunk) {
    if (chunk.error) {
      setStatus(`error: ${chunk.error.message}`, "error");
      return;
    }
    if (chunk.usage) state.usage = chunk.usage;
    const delta = chunk.choices?.[0]?.delta;
    if (delta?.content) state.text += delta.content;
    const extra = chunk.syncheck;
    if (extra?.sentence) {
      state.sentences.set(extra.sentence.index, extra.sentence);
      if (extra.sentence.repair) addRepairs([extra.sentence.repair]);
    } else if (extra) {
      state.summary = extra;
      (extra.final_scores || []).forEach((score, i) => {
        const s = state.sentences.get(i);
        if (s && score !== null) s.final_score = score;
      });
      addRepairs(repairsOf(extra.trace || {})); // a runner that reports its repairs only at the end
    }
    render();
    if (state.summary) showSummary();
  }

  // a repair is shown once, however many times it is reported (the sentence event's, then the summary's trace)
  function addRepairs(repairs) {
    for (const r of repairs) {
      if (!state.repairs.some((seen) => seen.index === r.index && seen.text === r.text)) state.repairs.push(r);
    }
  }

  // FOD's trace: every flagged sentence (backtracks) and, in order, what replaced it (steps); a sentence kept as it
  // was (chosen_by "kept", "kept:max_repairs") is no repair. A replacement has the taken-back sentence's index.
  function repairsOf(trace) {
    const steps = trace.steps || [];
    return (trace.backtracks || [])
      .map((b, k) => ({ index: b.sentence_index, text: b.text, score: b.score,
        kept: String(steps[k]?.chosen_by ?? "").startsWith("kept") }))
      .filter((r) => !r.kept);
  }

  // ------------------------------------------------------------------ drawing
  function fmt(value, digits = 3) {
    return typeof value === "number" ? value.toFixed(digits) : "n/a";
  }

  function struck(repair, dropped) {
    const del = document.createElement("del");
    del.className = "repaired";
    del.textContent = repair.text;
    del.title = `taken back by FOD (score ${fmt(repair.score)})${dropped ? "; nothing replaced it" : ""}`;
    return del;
  }

  function sentenceSpan(s, text) {
    const span = document.createElement("span");
    span.className = "sentence";
    span.dataset.index = s.index;
    span.tabIndex = 0;
    if (typeof s.score === "number") {
      span.dataset.score = s.score;
      span.style.setProperty("--score", Math.max(0, Math.min(1, s.score)));
    } else {
      span.classList.add("unscored");
    }
    if (s.flagged) span.classList.add("flagged");
    if (state.repairs.some((r) => r.index === s.index)) span.classList.add("replacement");
    span.textContent = text;
    span.title = `score ${fmt(s.score)}${s.flagged ? " (below tau1)" : ""}`;
    return span;
  }

  function render() {
    const answer = $("answer");
    const parts = [];
    const sentences = [...state.sentences.values()].sort((a, b) => a.start - b.start);
    let pos = 0;
    for (const s of sentences) {
      if (s.start > pos) parts.push(document.createTextNode(state.text.slice(pos, s.start)));
      for (const r of state.repairs.filter((r) => r.index === s.index)) parts.push(struck(r, false), " ");
      parts.push(sentenceSpan(s, state.text.slice(s.start, s.end) || s.text));
      pos = Math.max(pos, s.end);
    }
    if (pos < state.text.length) {
      const pending = document.createElement("span");
      pending.className = "pending";
      pending.textContent = state.text.slice(pos);
      parts.push(pending);
    }
    const shown = new Set(sentences.map((s) => s.index));
    for (const r of state.repairs.filter((r) => !shown.has(r.index))) parts.push(" ", struck(r, true));
    answer.replaceChildren(...parts);
  }

  function showDetails(span) {
    const s = state.sentences.get(Number(span.dataset.index));
    if (!s) return;
    const box = $("details");
    const title = document.createElement("h2");
    title.textContent = `Sentence ${s.index + 1}: score ${fmt(s.score)}`
      + (s.final_score !== undefined ? `, whole-answer ${fmt(s.final_score)}` : "")
      + (s.flagged ? ", below tau1" : "") + (s.degenerate ? `, ${s.degenerate}` : "");
    const table = document.createElement("table");
    for (const [name, value] of Object.entries(s.features || {})) {
      const row = table.insertRow();
      row.insertCell().textContent = name;
      row.insertCell().textContent = typeof value === "number" ? value.toPrecision(4) : String(value);
    }
    const note = document.createElement("p");
    note.className = "muted";
    note.textContent = s.features ? "Features" : "No features sent (syncheck.features is off).";
    box.replaceChildren(title, note, table);
    box.hidden = false;
  }

  function item(term, value, id) {
    const dt = document.createElement("dt");
    dt.textContent = term;
    const dd = document.createElement("dd");
    if (value instanceof Node) dd.appendChild(value);
    else dd.textContent = value;
    if (id) dd.id = id;
    $("summary").append(dt, dd);
    return dd;
  }

  function showSummary() {
    const s = state.summary;
    $("summary").replaceChildren();
    const score = item("Response score", fmt(s.response_score), "response-score");
    if (typeof s.response_score === "number") {
      score.dataset.value = s.response_score;
      score.classList.add("scored");
      score.style.setProperty("--score", Math.max(0, Math.min(1, s.response_score)));
    }
    const t = s.thresholds || {};
    item("Thresholds", `tau1 ${fmt(t.tau1)}, tau2 ${fmt(t.tau2)} (from ${t.from ?? "n/a"})`);
    item("Method", `${s.method}; stopped: ${s.trace?.stop ?? "n/a"}`
      + (s.method === "fod" ? `; repairs: ${s.trace?.repairs ?? 0}` : ""));
    const check = s.final_check;
    if (!check) {
      item("Provenance check", "not run", "final-check-result");
    } else if (check.error) {
      item("Provenance check", `not checked: ${check.error}`, "final-check-result");
    } else {
      const dd = item("Provenance check", `factuality ${fmt(check.factuality)}`
        + (check.best_source !== null ? `; best source: document ${check.best_source + 1}` : ""),
      "final-check-result");
      dd.dataset.value = check.factuality;
      for (const src of check.sources || []) {
        const line = document.createElement("div");
        line.className = "muted";
        line.textContent = `document ${src.index + 1}: weight ${fmt(src.weight)}, support ${fmt(src.support)}`;
        dd.appendChild(line);
      }
    }
    if (state.usage) {
      item("Tokens", `${state.usage.prompt_tokens} prompt, ${state.usage.completion_tokens} answer`);
    }
    $("warnings").replaceChildren(...(s.warnings || []).map((w) => {
      const li = document.createElement("li");
      li.textContent = w;
      return li;
    }));
  }

  // ------------------------------------------------------------------ wiring
  function start() {
    for (const swatch of document.querySelectorAll(".swatch")) swatch.style.setProperty("--score", swatch.dataset.score);
    $("add-document").addEventListener("click", () => addDocument().querySelector("textarea").focus());
    $("upload").addEventListener("change", upload);
    $("ask").addEventListener("submit", ask);
    $("stop").addEventListener("click", () => state.controller?.abort());
    const answer = $("answer");
    for (const kind of ["mouseover", "focusin", "click"]) {
      answer.addEventListener(kind, (e) => {
        const span = e.target.closest?.(".sentence");
        if (span) showDetails(span);
      });
    }
    const run = fillFromAddress();
    loadModel().then(() => { if (run) ask(); });
  }

  start();
})();
