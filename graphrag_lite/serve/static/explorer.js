/* graphrag-lite explorer: search an entity, browse its neighbourhood, read entities and communities, ask
   questions and see the rows an answer cites.

   Plain JavaScript with no build step, so the page runs from the files the package ships. The only library is
   cytoscape (static/vendor/), for the graph. Text from the index is always put in the page with textContent,
   never innerHTML: descriptions and answers come from documents and a model, and must not become markup. */
"use strict";

(function () {
  // Distinct colours for communities, readable on white and as node fills (Tableau 10 and a few more).
  const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#86bcb6", "#d37295", "#8cd17d", "#499894", "#f1ce63", "#a0cbe8", "#ffbe7d"];
  const NO_COMMUNITY = "#a7b0bd";
  const CITED_KINDS = ["Entities", "Relationships", "Reports", "Claims", "Sources"]; // query/citations.py KINDS

  const state = {
    cy: null,
    centre: null,
    titles: new Map(), // entity id -> title, from every listing seen: relationships carry only ids
    citedEntityIds: new Set(),
    citedRelationshipIds: new Set(),
    searchSerial: 0, // answers to superseded searches are dropped, so typing fast never shows stale results
    apiKey: sessionStorage.getItem("graphrag-lite-api-key"),
  };

  const $ = (id) => document.getElementById(id);

  /* ---------------------------------------------------------------- helpers */

  // el("p", {class: "x"}, "text", child): an element built without innerHTML (see the note at the top).
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key === "text") node.textContent = value;
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  // replaceChildren would print a skipped (null) section as the text "null": drop those first.
  function fill(container, ...children) {
    container.replaceChildren(...children.flat().filter((child) => child !== null && child !== undefined));
  }

  function communityColour(community) {
    if (community === null || community === undefined || community < 0) return NO_COMMUNITY;
    return PALETTE[community % PALETTE.length];
  }

  function swatch(community) {
    return el("span", { class: "swatch", style: `background:${communityColour(community)}`, "aria-hidden": "true" });
  }

  function linkButton(label, onclick, attrs) {
    return el("button", Object.assign({ type: "button", class: "link", onclick }, attrs || {}), label);
  }

  // Long descriptions are cut to a few lines with a toggle, so one entity does not push the rest off screen.
  function description(text) {
    const body = el("p", { class: "description" }, text || "(no description)");
    if (!text || text.length < 500) return body;
    body.classList.add("clamp");
    const toggle = linkButton("Show all", () => {
      const open = body.classList.toggle("open");
      toggle.textContent = open ? "Show less" : "Show all";
      toggle.setAttribute("aria-expanded", String(open));
    }, { "aria-expanded": "false", class: "link small" });
    return el("div", {}, body, toggle);
  }

  function rememberTitles(rows) {
    for (const row of rows || []) if (row && row.id && row.title) state.titles.set(row.id, row.title);
  }

  function titleOf(id) {
    return state.titles.get(id) || id;
  }

  function setStatus(text, isError) {
    const status = $("server-status");
    status.textContent = text;
    status.classList.toggle("error", Boolean(isError));
  }

  /* ---------------------------------------------------------------- HTTP */

  // Paths stay relative so the page also works when the server sits behind a path prefix.
  async function api(path, body) {
    const headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (state.apiKey) headers["X-API-Key"] = state.apiKey;
    const options = body === undefined ? { headers } : { method: "POST", headers, body: JSON.stringify(body) };
    const response = await fetch(path.replace(/^\//, ""), options);
    if (response.status === 401 && askForKey()) return api(path, body);
    if (response.status === 401) setStatus("The server needs its API key: reload the page to enter it", true);
    const data = await response.json().catch(() => ({}));
    if (!response.ok) {
      const detail = typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail || data);
      throw new Error(`${response.status}: ${detail || response.statusText}`);
    }
    return data;
  }

  // A server bound beyond this machine wants an API key; ask once and keep it for this tab only.
  function askForKey() {
    const key = window.prompt("This server needs an API key (graphrag-lite serve --api-key):");
    if (!key) return false;
    state.apiKey = key;
    sessionStorage.setItem("graphrag-lite-api-key", key);
    return true;
  }

  function showError(container, error) {
    container.replaceChildren(el("p", { class: "error", role: "alert" }, String(error.message || error)));
  }

  /* ---------------------------------------------------------------- search */

  function initSearch() {
    const input = $("search-input");
    let timer = null;
    input.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => runSearch(input.value.trim()), 200);
    });
    input.addEventListener("keydown", (event) => {
      if (event.key === "ArrowDown") {
        event.preventDefault();
        const first = $("search-results").querySelector("button");
        if (first) first.focus();
      }
    });
    $("search-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      clearTimeout(timer);
      // Enter opens the best match at once: the quickest way from the keyboard to a graph
      const entities = await runSearch(input.value.trim());
      if (entities && entities.length) openEntity(entities[0].id, true);
    });
    $("search-results").addEventListener("keydown", moveInResults);
  }

  async function runSearch(query) {
    const serial = ++state.searchSerial;
    if (!query) {
      renderResults([], "");
      return [];
    }
    try {
      const data = await api(`entities?q=${encodeURIComponent(query)}&limit=20`);
      if (serial !== state.searchSerial) return null;
      rememberTitles(data.entities);
      renderResults(data.entities, query);
      return data.entities;
    } catch (error) {
      showError($("search-results"), error);
      return null;
    }
  }

  function renderResults(entities, query) {
    $("search-count").textContent = query ? `${entities.length} match${entities.length === 1 ? "" : "es"}` : "";
    $("search-results").replaceChildren(...entities.map((entity) => el("li", {},
      el("button", {
        type: "button", class: "result", "data-entity-id": entity.id, "data-testid": "search-result",
        onclick: () => openEntity(entity.id, true),
      }, swatch(entity.community), el("span", { class: "title", title: entity.title }, entity.title),
      el("span", { class: "meta" }, `${entity.type || ""} · ${entity.degree ?? 0} links`)))));
  }

  // Up and down move between results (Up from the first goes back to the box), as in a combobox.
  function moveInResults(event) {
    if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return;
    const buttons = [...$("search-results").querySelectorAll("button")];
    const index = buttons.indexOf(document.activeElement);
    if (index < 0) return;
    event.preventDefault();
    const next = index + (event.key === "ArrowDown" ? 1 : -1);
    if (next < 0) $("search-input").focus();
    else if (next < buttons.length) buttons[next].focus();
  }

  /* ---------------------------------------------------------------- graph */

  function initGraph() {
    state.cy = cytoscape({
      container: $("graph"),
      style: graphStyle(),
      minZoom: 0.2,
      maxZoom: 3,
    });
    window.cy = state.cy; // for tests and for poking at the graph from the browser console
    state.cy.on("tap", "node", (event) => openEntity(event.target.id(), false));
    state.cy.on("dbltap", "node", (event) => openEntity(event.target.id(), true));
    state.cy.on("tap", "edge", (event) => showRelationship(event.target.data()));
    $("fit-button").addEventListener("click", () => state.cy.fit(undefined, 30));
    $("hops-select").addEventListener("change", () => state.centre && loadNeighbourhood(state.centre));
  }

  function graphStyle() {
    return [
      { selector: "node", style: {
        "background-color": "data(colour)", width: "data(size)", height: "data(size)", label: "data(title)",
        "font-size": 10, "text-valign": "bottom", "text-margin-y": 3, "text-wrap": "ellipsis",
        "text-max-width": 110, "text-outline-color": "#fff", "text-outline-width": 2, color: "#1d2430",
        "border-width": 1, "border-color": "#ffffff" } },
      { selector: "node.centre", style: { "border-width": 3, "border-color": "#1d2430", "font-weight": "bold" } },
      { selector: "node:selected", style: { "border-width": 4, "border-color": "#1f5fbf" } },
      { selector: "node.cited", style: {
        "border-width": 4, "border-color": "#d99a00", "underlay-color": "#ffd24d", "underlay-padding": 6,
        "underlay-opacity": 0.6, "underlay-shape": "ellipse" } },
      { selector: "edge", style: {
        width: "data(width)", "line-color": "#b8c0cc", "curve-style": "bezier", opacity: 0.8 } },
      { selector: "edge:selected", style: { "line-color": "#1f5fbf", opacity: 1 } },
      { selector: "edge.cited", style: { "line-color": "#d99a00", opacity: 1 } },
    ];
  }

  async function loadNeighbourhood(id) {
    const hops = $("hops-select").value;
    const data = await api(`graph/neighbourhood/${encodeURIComponent(id)}?hops=${hops}&limit=150`);
    rememberTitles(data.nodes);
    renderGraph(data);
    return data;
  }

  function renderGraph(data) {
    const maxDegree = Math.max(1, ...data.nodes.map((n) => n.degree || 0));
    const maxWeight = Math.max(1, ...data.edges.map((e) => e.weight || 0));
    const nodes = data.nodes.map((n) => ({ group: "nodes", data: Object.assign({}, n, {
      colour: communityColour(n.community), size: 18 + 38 * Math.sqrt((n.degree || 0) / maxDegree) }) }));
    const ids = new Set(data.nodes.map((n) => n.id));
    // edges to nodes cut by the server's limit would make cytoscape throw: keep those with both ends
    const edges = data.edges.filter((e) => ids.has(e.source) && ids.has(e.target)).map((e) => ({
      group: "edges", data: Object.assign({}, e, { width: 1 + 5 * ((e.weight || 0) / maxWeight) }) }));
    state.centre = data.center;
    state.cy.elements().remove();
    state.cy.add([...nodes, ...edges]);
    state.cy.getElementById(data.center).addClass("centre");
    state.cy.layout({ name: "cose", animate: false, randomize: false, nodeDimensionsIncludeLabels: true,
      padding: 30, idealEdgeLength: () => 90, nodeRepulsion: () => 9000 }).run();
    markCitedInGraph();
    // keep the entity in the details panel selected when the graph is redrawn (another hop count)
    const shownEntity = $("details-panel").dataset.entityId;
    if (shownEntity) state.cy.getElementById(shownEntity).select();
    const count = $("graph-count");
    count.dataset.nodes = String(nodes.length);
    count.dataset.edges = String(edges.length);
    count.textContent = `${nodes.length} nodes, ${edges.length} edges around ${titleOf(data.center)}`;
    $("graph").setAttribute("aria-label", `Neighbourhood of ${titleOf(data.center)}: ${nodes.length} entities; ` +
      "the details panel lists the same relationships as links");
    renderLegend(data.nodes);
  }

  // One button per community in view: the way into a community's report without hunting for a node.
  function renderLegend(nodes) {
    const counts = new Map();
    for (const node of nodes) {
      if (node.community === null || node.community === undefined || node.community < 0) continue;
      counts.set(node.community, (counts.get(node.community) || 0) + 1);
    }
    const communities = [...counts.keys()].sort((a, b) => a - b);
    $("legend").replaceChildren(...communities.map((community) => el("button", {
      type: "button", "data-community": community, "data-testid": "legend-community",
      onclick: () => openCommunity(community),
    }, swatch(community), `Community ${community} (${counts.get(community)})`)));
  }

  function markCitedInGraph() {
    state.cy.nodes().forEach((node) => node.toggleClass("cited", state.citedEntityIds.has(node.id())));
    state.cy.edges().forEach((edge) => edge.toggleClass("cited", state.citedRelationshipIds.has(edge.id())));
    const note = $("graph-cited");
    const cited = state.citedEntityIds.size;
    if (note) {
      note.textContent = cited ? `${state.cy.nodes(".cited").length} of the ${cited} cited entities are in the ` +
        "graph, ringed in yellow." : "";
    }
  }

  /* ---------------------------------------------------------------- tabs */

  function initTabs() {
    const tabs = [$("tab-details"), $("tab-answer")];
    tabs.forEach((tab, index) => {
      tab.addEventListener("click", () => selectTab(tab.id === "tab-answer" ? "answer" : "details"));
      // arrow keys move between tabs, as the ARIA tabs pattern expects
      tab.addEventListener("keydown", (event) => {
        if (event.key !== "ArrowRight" && event.key !== "ArrowLeft") return;
        const other = tabs[(index + 1) % tabs.length];
        other.focus();
        other.click();
      });
    });
  }

  function selectTab(name) {
    for (const [tab, panel, which] of [["tab-details", "details-panel", "details"], ["tab-answer", "answer-panel", "answer"]]) {
      const selected = which === name;
      $(tab).setAttribute("aria-selected", String(selected));
      $(tab).tabIndex = selected ? 0 : -1;
      $(panel).hidden = !selected;
    }
  }

  /* ---------------------------------------------------------------- entity details */

  // `recentre`: also redraw the graph around the entity (a search result, a link) rather than keep the current one.
  async function openEntity(id, recentre) {
    const panel = $("details-panel");
    selectTab("details");
    panel.setAttribute("aria-busy", "true");
    try {
      const graph = recentre ? loadNeighbourhood(id)
        : api(`graph/neighbourhood/${encodeURIComponent(id)}?hops=1&limit=150`).then((d) => rememberTitles(d.nodes));
      const [entity] = await Promise.all([api(`entities/${encodeURIComponent(id)}`), graph]);
      state.titles.set(entity.id, entity.title);
      renderEntity(entity);
      state.cy.elements().unselect();
      state.cy.getElementById(entity.id).select();
    } catch (error) {
      showError(panel, error);
    } finally {
      panel.removeAttribute("aria-busy");
    }
  }

  function renderEntity(entity) {
    const panel = $("details-panel");
    fill(panel,
      el("p", { class: "kind" }, `Entity · ${entity.type || "no type"} · ${entity.degree ?? 0} relationships`),
      el("h3", { id: "details-title", "data-testid": "details-title" }, entity.title),
      el("div", { id: "entity-description", "data-testid": "entity-description" }, description(entity.description)),
      state.centre === entity.id ? null
        : linkButton("Centre the graph here", () => openEntity(entity.id, true), { class: "link small" }),
      communitySection(entity.communities || []),
      relationshipSection(entity),
      claimSection(entity.claims || []),
      textUnitSection(entity.text_units || []),
    );
    panel.dataset.entityId = entity.id;
    delete panel.dataset.community;
    panel.scrollTop = 0;
  }

  function communitySection(communities) {
    if (!communities.length) return el("p", { class: "hint" }, "In no community.");
    return el("section", { "aria-label": "Communities" }, el("h4", {}, "Communities"),
      el("div", { class: "chips" }, communities.map((c) => el("button", {
        type: "button", class: "chip", "data-community": c.community, "data-testid": "entity-community",
        onclick: () => openCommunity(c.community),
      }, swatch(c.community), `Community ${c.community} · level ${c.level}`, c.title ? ` · ${c.title}` : ""))));
  }

  function relationshipSection(entity) {
    const relationships = [...(entity.relationships || [])].sort((a, b) => (b.weight || 0) - (a.weight || 0));
    if (!relationships.length) return el("p", { class: "hint" }, "No relationships.");
    return el("section", { "aria-label": "Relationships" },
      el("h4", {}, `Relationships (${relationships.length})`),
      el("ul", { class: "list", "data-testid": "entity-relationships" }, relationships.map((rel) => {
        // the server gives the other end's id; source and target are titles, as in the relationships table
        const farEnd = rel.source === entity.title ? rel.target : rel.source;
        return el("li", { "data-relationship-id": rel.id },
          linkButton(state.titles.get(rel.other_id) || farEnd, () => openEntity(rel.other_id, true)),
          el("span", { class: "hint" }, ` · weight ${formatNumber(rel.weight)}`),
          description(rel.description));
      })));
  }

  function claimSection(claims) {
    if (!claims.length) return null;
    return el("section", { "aria-label": "Claims" }, el("h4", {}, `Claims (${claims.length})`),
      el("ul", { class: "list", "data-testid": "entity-claims" }, claims.map((claim) => el("li", {},
        ...claimParts(claim)))));
  }

  // A claim: its kind and truth, what it says, about what and when, and the sentence it was read from.
  // The extractor writes "NONE" for a missing object or date.
  function claimParts(claim) {
    const given = (value) => value && value !== "NONE";
    const about = [given(claim.object_id) ? `about ${claim.object_id}` : null,
      given(claim.start_date) ? `from ${claim.start_date}` : null, given(claim.end_date) ? `to ${claim.end_date}` : null];
    return [el("span", { class: "kind" }, [claim.type, claim.status].filter(given).join(" · ")),
      description(claim.description),
      about.some(Boolean) ? el("p", { class: "hint" }, about.filter(Boolean).join(", ")) : null,
      given(claim.source_text) ? el("blockquote", { class: "quote" }, claim.source_text) : null];
  }

  function textUnitSection(units) {
    if (!units.length) return null;
    return el("section", { "aria-label": "Source text" }, el("h4", {}, `Source text (${units.length} chunks)`),
      el("ul", { class: "list", "data-testid": "entity-sources" }, units.map((unit) => el("li", {},
        el("details", {},
          el("summary", {}, `Chunk ${unit.human_readable_id ?? ""} · ${unit.document_title || "document"}`),
          el("p", { class: "source-text" }, unit.text))))));
  }

  function showRelationship(rel) {
    selectTab("details");
    delete $("details-panel").dataset.entityId;
    delete $("details-panel").dataset.community;
    fill($("details-panel"),
      el("p", { class: "kind" }, `Relationship · weight ${formatNumber(rel.weight)}`),
      el("h3", { "data-testid": "details-title" },
        linkButton(titleOf(rel.source), () => openEntity(rel.source, false)), " — ",
        linkButton(titleOf(rel.target), () => openEntity(rel.target, false))),
      description(rel.description));
  }

  function formatNumber(value) {
    return typeof value === "number" ? String(Math.round(value * 100) / 100) : String(value ?? "");
  }

  /* ---------------------------------------------------------------- community details */

  async function openCommunity(community) {
    const panel = $("details-panel");
    selectTab("details");
    try {
      const data = await api(`communities/${encodeURIComponent(community)}`);
      rememberTitles(data.members);
      renderCommunity(data);
    } catch (error) {
      showError(panel, error);
    }
  }

  function renderCommunity(data) {
    const report = data.report;
    const panel = $("details-panel");
    fill(panel,
      el("p", { class: "kind" }, swatch(data.community),
        ` Community ${data.community} · level ${data.level} · ${data.size ?? data.members.length} entities`),
      el("h3", { id: "community-title", "data-testid": "community-title" }, report ? report.title : data.title),
      report ? reportSection(report) : el("p", { class: "hint" }, "This community has no report."),
      communityLinks(data),
      el("h4", {}, `Members (${data.members.length})`),
      el("ul", { class: "list", "data-testid": "community-members" }, data.members.map((m) => el("li", {},
        linkButton(m.title, () => openEntity(m.id, true)),
        el("span", { class: "hint" }, ` · ${m.type || ""} · ${m.degree ?? 0} links`)))),
    );
    panel.dataset.community = String(data.community);
    delete panel.dataset.entityId;
    panel.scrollTop = 0;
  }

  function reportSection(report) {
    return el("section", { "aria-label": "Community report", "data-testid": "community-report" },
      el("p", { class: "hint" }, `Rank ${formatNumber(report.rank)}`),
      el("p", {}, report.summary),
      (report.findings || []).length ? el("h4", {}, "Findings") : null,
      (report.findings || []).map((f) => el("div", { class: "finding" },
        el("strong", {}, f.summary), description(f.explanation))));
  }

  // Parent and child communities: the hierarchy is walked one click at a time.
  function communityLinks(data) {
    const links = (data.children || []).map((child) =>
      linkButton(`Child: community ${child}`, () => openCommunity(child)));
    if (data.parent != null && data.parent >= 0) {
      links.unshift(linkButton(`Parent: community ${data.parent}`, () => openCommunity(data.parent)));
    }
    return links.length ? el("div", { class: "chips" }, links) : null;
  }

  /* ---------------------------------------------------------------- questions and answers */

  function initAsk() {
    const form = $("ask-form");
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const question = $("question-input").value.trim();
      if (question) ask(question, form.elements.method.value, $("no-model").checked);
    });
    $("question-input").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
    });
  }

  async function ask(question, method, noModel) {
    const panel = $("answer-panel");
    const button = $("ask-button");
    selectTab("answer");
    button.disabled = true;
    panel.setAttribute("aria-busy", "true");
    panel.replaceChildren(el("p", { class: "hint" }, `Searching (${method})…`));
    try {
      const body = { question };
      if (noModel) body.no_model = true;
      const result = await api(`query/${method}`, body);
      renderAnswer(result);
      await showCitedInGraph();
    } catch (error) {
      showError(panel, error);
    } finally {
      button.disabled = false;
      panel.removeAttribute("aria-busy");
    }
  }

  function renderAnswer(result) {
    const citations = result.citations || {};
    state.citedEntityIds = new Set((citations.Entities || []).map((row) => row.id).filter(Boolean));
    state.citedRelationshipIds = new Set((citations.Relationships || []).map((row) => row.id).filter(Boolean));
    rememberTitles(citations.Entities);
    fill($("answer-panel"),
      el("p", { class: "kind" }, `${result.method} search`),
      el("h3", { "data-testid": "answer-question" }, result.question),
      problemList(result.problems || []),
      el("div", { id: "answer-text", class: "answer", "data-testid": "answer-text" }, answerBlocks(result.answer || "")),
      el("p", { id: "graph-cited", class: "hint", "data-testid": "graph-cited" }),
      citedRows(citations),
      contextNote(result.context || {}, result.usage),
    );
    $("answer-panel").scrollTop = 0;
    markCitedInGraph();
  }

  // With an empty graph the cited entities would have nowhere to show: draw the first one's neighbourhood.
  async function showCitedInGraph() {
    const first = [...state.citedEntityIds][0];
    if (state.cy.nodes().length === 0 && first) await loadNeighbourhood(first).catch(() => null);
  }

  function problemList(problems) {
    if (!problems.length) return null;
    return el("div", { class: "problems", role: "alert", "data-testid": "answer-problems" },
      el("strong", {}, "Problems"), el("ul", {}, problems.map((p) => el("li", {}, String(p)))));
  }

  function contextNote(context, usage) {
    const tables = Object.entries(context).filter(([, rows]) => Array.isArray(rows) && rows.length)
      .map(([name, rows]) => `${name} ${rows.length}`);
    const parts = [tables.length ? `Context sent: ${tables.join(", ")} rows.` : "No context rows."];
    if (usage && usage.calls !== undefined) {
      const tokens = (usage.prompt_tokens || 0) + (usage.completion_tokens || 0);
      parts.push(`${usage.calls} model calls, ${tokens.toLocaleString()} tokens, $${(usage.cost_usd || 0).toFixed(4)}.`);
    }
    return el("p", { class: "usage" }, parts.join(" "));
  }

  // Markdown, lightly: headings, bullets and paragraphs, which is what answers use; the rest stays plain text.
  function answerBlocks(text) {
    const blocks = [];
    let list = null;
    for (const line of text.split(/\n/)) {
      const heading = line.match(/^(#{1,6})\s+(.*)$/);
      const bullet = line.match(/^\s*[-*]\s+(.*)$/);
      if (bullet) {
        if (!list) blocks.push((list = el("ul", {})));
        list.append(el("li", {}, inline(bullet[1])));
        continue;
      }
      list = null;
      if (heading) blocks.push(el(heading[1].length <= 2 ? "h3" : "h4", {}, inline(heading[2])));
      else if (line.trim()) blocks.push(el("p", {}, inline(line)));
    }
    return blocks;
  }

  // **bold** and the citation markers "[Data: Entities (3, 5); Sources (2)]", which become links to the rows.
  function inline(text) {
    return text.split(/(\*\*[^*]+\*\*|\[Data:[^\]]*\])/g).filter(Boolean).map((part) => {
      if (part.startsWith("**") && part.endsWith("**") && part.length > 4) return el("strong", {}, part.slice(2, -2));
      if (part.startsWith("[Data:")) return citationRefs(part);
      return part;
    });
  }

  function citationRefs(marker) {
    const refs = [];
    for (const match of marker.matchAll(/([A-Za-z]+)\s*\(([^)]*)\)/g)) {
      for (const id of match[2].split(",").map((s) => s.trim()).filter((s) => /^\d+$/.test(s))) {
        refs.push(el("a", {
          class: "cite-ref", href: `#cite-${match[1]}-${id}`, "data-cite-kind": match[1], "data-cite-id": id,
          onclick: (event) => { event.preventDefault(); focusCitedRow(match[1], id); },
        }, `${match[1]} ${id}`));
      }
    }
    return refs.length ? el("span", { class: "cite-refs" }, refs) : marker;
  }

  function focusCitedRow(kind, id) {
    const row = $(`cite-${kind}-${id}`);
    if (!row) return;
    row.scrollIntoView({ block: "nearest", behavior: "smooth" });
    row.focus({ preventScroll: true });
    row.classList.remove("flash");
    void row.offsetWidth; // restart the animation when the same row is asked for twice
    row.classList.add("flash");
  }

  function citedRows(citations) {
    const sections = CITED_KINDS.filter((kind) => (citations[kind] || []).length).map((kind) =>
      el("section", { "aria-label": `Cited ${kind}` }, el("h4", {}, `Cited ${kind} (${citations[kind].length})`),
        el("ul", { class: "list" }, citations[kind].map((row) => citedRow(kind, row)))));
    return el("div", { id: "cited-rows", "data-testid": "cited-rows" },
      sections.length ? sections : el("p", { class: "hint" }, "The answer cites no rows."));
  }

  function citedRow(kind, row) {
    const id = row.short_id ?? row.id;
    const item = el("li", {
      class: row.missing ? "cited missing" : "cited", id: `cite-${kind}-${id}`, tabindex: "-1",
      "data-cite-kind": kind, "data-cite-id": id, "data-testid": "cited-row",
    });
    const render = { Entities: citedEntity, Relationships: citedRelationship, Reports: citedReport,
      Sources: citedSource, Claims: claimParts }[kind];
    item.append(...render(row, id).filter(Boolean));
    if (row.missing) item.append(el("p", { class: "hint" }, "Not in the context sent to the model."));
    return item;
  }

  function citedEntity(row, id) {
    return [el("span", { class: "kind" }, `Entity ${id} · ${row.type || ""} `),
      row.id ? linkButton(row.title || row.id, () => openEntity(row.id, true)) : el("strong", {}, row.title || ""),
      description(row.description)];
  }

  function citedRelationship(row, id) {
    return [el("span", { class: "kind" }, `Relationship ${id} · weight ${formatNumber(row.weight)} `),
      el("strong", {}, `${titleOf(row.source)} — ${titleOf(row.target)}`), description(row.description)];
  }

  function citedReport(row, id) {
    const community = row.community ?? id;
    return [el("span", { class: "kind" }, `Report of community ${community} · level ${row.level ?? "?"} `),
      linkButton(row.title || `Community ${community}`, () => openCommunity(community)),
      el("p", {}, row.summary || "")];
  }

  function citedSource(row, id) {
    return [el("span", { class: "kind" }, `Source ${id} · ${row.document_title || ""}`),
      el("details", {}, el("summary", {}, (row.text || "").slice(0, 120) + "…"),
        el("p", { class: "source-text" }, row.text || ""))];
  }

  /* ---------------------------------------------------------------- start */

  async function checkHealth() {
    try {
      const health = await api("health");
      setStatus(health.status === "ok" ? "Connected" : `Server: ${health.status}`, health.status !== "ok");
      if (health.status === "ok") await showBestConnected();
    } catch (error) {
      setStatus(`Server unreachable: ${error.message}`, true);
    }
  }

  // Something to look at before the first search: the neighbourhood of the best-connected entity.
  async function showBestConnected() {
    const found = await api("entities?limit=1");
    if (found.entities && found.entities.length) await loadNeighbourhood(found.entities[0].id);
  }

  function start() {
    if (typeof cytoscape !== "function") {
      setStatus("The graph library (static/vendor/cytoscape.min.js) did not load.", true);
      return;
    }
    initTabs();
    initSearch();
    initGraph();
    initAsk();
    checkHealth();
    $("search-input").focus();
  }

  document.addEventListener("DOMContentLoaded", start);
})();
