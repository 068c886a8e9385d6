"""The query API: local, global and basic search over a built index.

    from graphrag_lite import GraphRAG
    rag = GraphRAG.from_config("my-project")
    result = rag.local_search("Who is Agent Alex Mercer?")
    print(result.answer, result.citations())

Each method has an async twin (`alocal_search`, ...). A result carries the answer, the context tables that
were sent (with the short ids the answer cites), the resolved citations and the model usage.
"""

from __future__ import annotations

import asyncio
import copy
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from graphrag_lite.answer_parsing import ParseError, json_parser, strip_reasoning
from graphrag_lite.config import BasicSearchConfig, GraphRagConfig, LocalSearchConfig, read_settings, resolve_config
from graphrag_lite.context_tables import ContextTable, pack, render
from graphrag_lite.errors import ConfigError, IndexDamaged, MissingIndex, index_command
from graphrag_lite.llm.errors import LLMCallError
from graphrag_lite.llm.gateway import Gateway
from graphrag_lite.llm.per_item import for_each
from graphrag_lite.nlp.extractor import sentences
from graphrag_lite.prompts import fill, section_prompt
from graphrag_lite.query.citations import resolve_citations
from graphrag_lite.query.global_search import (
    Coverage,
    MapAnswer,
    Point,
    ReportSelection,
    community_themes,
    dynamic_selection,
    map_batches,
    measure_coverage,
    no_answer,
    parse_rating,
    reduce_context,
    select_reports,
)
from graphrag_lite.query.hops import HopRound, follow_up_query, hop_context, merged_seeds
from graphrag_lite.query.index import IndexTables
from graphrag_lite.query.local import LEFT_OUT, LocalContext, build_local_context, name_matches, pack_sources
from graphrag_lite.query.retrieval import by_keywords, by_vector, fuse_scores
from graphrag_lite.tables import CommunityReportRow, plain_json, typed_records
from graphrag_lite.tokens import count_with
from graphrag_lite.vector_store import TABLES, PinnedDatabase, check_embedding_model, checked_damage

DEFAULT_RESPONSE_TYPE = "Multiple Paragraphs"
OnPiece = Callable[[str], None]


def answer_text(text: str) -> str:
    """A final answer without the reasoning block a reasoning model puts first; an empty one is asked again."""
    answer = strip_reasoning(text).strip()
    if not answer:
        raise ParseError("the answer is empty")
    return answer


@dataclass
class SearchResult:
    method: str
    question: str
    answer: str
    context_text: str
    context: dict[str, list[dict[str, Any]]]
    usage: dict[str, Any] | None
    problems: list[str] = field(default_factory=list)
    budgets: dict[str, int] = field(default_factory=dict)
    coverage: Coverage | None = None  # global search: what part of the corpus reached the answer
    _index: IndexTables | None = field(default=None, repr=False)
    sections: list[dict[str, Any]] = field(default_factory=list)  # local search: tokens per section, and why
    rounds: list[dict[str, Any]] = field(default_factory=list)  # local search: each retrieval round

    def citations(self) -> dict[str, list[dict[str, Any]]]:
        """Every id the answer cites, resolved to its row (sources to document title and chunk text)."""
        assert self._index is not None
        return resolve_citations(self.answer, self._index)

    def to_dict(self) -> dict[str, Any]:
        """As JSON takes it: NaN (a failed report's rank) as null, numpy values unwrapped."""
        return plain_json({"method": self.method, "question": self.question, "answer": self.answer,
                "context": self.context, "citations": self.citations(), "usage": self.usage,
                "problems": self.problems, "budgets": self.budgets, "sections": self.sections,
                "rounds": self.rounds, "coverage": asdict(self.coverage) if self.coverage else None,
                "index": self._index.committed.describe() if self._index else None})


class GraphRAG:
    def __init__(self, config: GraphRagConfig, use_cache: bool = True) -> None:
        self.config = config
        self.index = IndexTables(config)
        self.use_cache = use_cache
        self._gateway: Gateway | None = None

    @classmethod
    def from_config(cls, root: str | Path = ".", config: str | Path | None = None, overrides: Iterable[str] = (),
                    use_cache: bool = True) -> GraphRAG:
        """Settings from the project's settings file, under the query settings the method that built the
        index recommends (pipelines/fast.yaml's, for a fast index), under `overrides`."""
        from graphrag_lite.pipeline.definition import recommended_query_settings

        path, data = read_settings(Path(root), Path(config) if config else None)  # the file read once
        loaded = resolve_config(path, copy.deepcopy(data), overrides)
        recommended = recommended_query_settings(loaded.output.base_dir)
        if recommended:
            loaded = resolve_config(path, data, overrides, pipeline_settings=recommended)
        return cls(loaded, use_cache=use_cache)

    def _count_tokens_as_indexed(self) -> None:
        """Budgets counted with the encoding the text units were cut with (set per search: another engine in
        the process may count with another)."""
        count_with(self.config.chunking.encoding_model)

    def with_config(self, config: GraphRagConfig) -> GraphRAG:
        """The same index and model gateway (one cache, one ledger, one budget) under other query settings."""
        other = GraphRAG(config, use_cache=self.use_cache)
        other.index = self.index
        other._gateway = self.gateway
        return other

    @property
    def gateway(self) -> Gateway:
        if self._gateway is None:
            self._gateway = Gateway(self.config, use_cache=self.use_cache)
        return self._gateway

    async def asearch(self, method: str, question: str, **options: Any) -> SearchResult:
        """Local, global or basic search, chosen by name (`method`), with that search's options."""
        searches: dict[str, Callable[..., Awaitable[SearchResult]]] = {
            "local": self.alocal_search, "global": self.aglobal_search, "basic": self.abasic_search}
        return await searches[method](question, **options)

    # ------------------------------------------------------------ local

    def local_search(self, question: str, **options: Any) -> SearchResult:
        return asyncio.run(self.alocal_search(question, **options))

    async def alocal_search(self, question: str, response_type: str = DEFAULT_RESPONSE_TYPE,
                            community_level: int = 2, on_piece: OnPiece | None = None,
                            hops: int | None = None) -> SearchResult:
        """`hops` (default `local_search.hops`): retrieval rounds; from 2, the model names what the context
        still lacks after each round, and the next round follows that lead."""
        cfg = self.config.local_search
        context, rounds = await self.alocal_rounds(question, community_level, hops or cfg.hops)
        result = await self._answer("local", question, cfg, context.tables, response_type, on_piece, context.budgets)
        result.sections = [asdict(s) for s in context.sections]
        result.rounds = [asdict(r) for r in rounds]
        result.problems += [p for r in rounds for p in r.problems]
        result.problems += self._keyword_only(cfg.embedding_model_id, ("entity_description", "text_unit_text"))
        return result

    async def alocal_context(self, question: str, community_level: int = 2) -> LocalContext:
        """The context local search sends with the question (one retrieval round)."""
        return (await self.alocal_rounds(question, community_level, hops=1))[0]

    async def _link(self, text: str) -> tuple[dict[str, float], dict[str, float]]:
        """Entities the text is about (names in it, keyword and vector matches of entity descriptions) and
        text units found for it directly, each with its fused score, best first."""
        cfg = self.config.local_search
        pool = cfg.top_k_entities * 3
        rankings = [name_matches(self.index, text), by_keywords(self._database, "entity_description", text, pool)]
        unit_rankings = [by_keywords(self._database, "text_unit_text", text, cfg.retrieved_text_units)]
        if cfg.embedding_model_id and {"entity_description", "text_unit_text"} & self._vectors():
            vector = await self.embed_question(cfg.embedding_model_id, text)
            rankings.append(self._nearest("entity_description", vector, pool))
            unit_rankings.append(self._nearest("text_unit_text", vector, cfg.retrieved_text_units))
        units = fuse_scores(unit_rankings, cfg.retrieved_text_units) if cfg.retrieved_text_units else {}
        return fuse_scores(rankings, cfg.top_k_entities), units

    async def alocal_rounds(self, question: str, level: int, hops: int) -> tuple[LocalContext, list[HopRound]]:
        """Local search's context after up to `hops` retrieval rounds, and what each round did."""
        checked_level(level)
        self._count_tokens_as_indexed()
        cfg = self.config.local_search
        entities, units = await self._link(question)
        seeds, unit_seeds = [entities], [units]
        context = build_local_context(self.index, cfg, entities, level, units)
        rounds = [HopRound(question, self._titles(context.entity_ids), _source_ids(context.tables))]
        if hops > 1 and cfg.chat_model_id is None:
            rounds[0].problems.append(f"{hops} hops need a chat model (local_search.chat_model_id); one round ran")
            return context, rounds
        while len(rounds) < hops:
            hop = await self._next_hop(question, context, [r.query for r in rounds[1:]])
            if hop.query.casefold() in (r.query.casefold() for r in rounds[1:]):
                hop.problems.append(f"the model asked again for '{hop.query}', already searched: rounds end here")
                hop.query = ""
            if hop.query == "":  # the model found the context enough, or named no new lead
                rounds.append(hop)
                break
            entities, units = await self._link(hop.query)
            seeds.append(entities)
            unit_seeds.append(units)
            before = set(_source_ids(context.tables))
            context = build_local_context(self.index, cfg, merged_seeds(seeds), level, merged_seeds(unit_seeds),
                                          entity_limit=cfg.top_k_entities * len(seeds),
                                          earlier_order=context.source_order[:len(context.sources.rows)])
            hop.linked_entities = self._titles(list(entities))
            hop.new_sources = [i for i in _source_ids(context.tables) if i not in before]
            rounds.append(hop)
        final = set(_source_ids(context.tables))
        for done in rounds:
            done.kept_sources = [i for i in done.new_sources if i in final]
        return context, rounds

    async def _next_hop(self, question: str, context: LocalContext, searched: list[str]) -> HopRound:
        """Ask the model what the context still lacks: a search query, or "" when it says it is enough."""
        cfg = self.config.local_search
        assert cfg.chat_model_id is not None
        template = section_prompt(cfg, "hop_prompt", required=("context_data", "question", "searched"))
        prompt = fill(template, question=question, searched="\n".join(searched) or "(nothing yet)",
                      context_data=render(hop_context(context.tables, cfg.hop_context_tokens)))
        before = self.gateway.ledger.totals("query_local_hop")
        try:
            reply = await self.gateway.chat(cfg.chat_model_id, [{"role": "user", "content": prompt}],
                                            stage="query_local_hop", step="next_hop",
                                            parse=follow_up_query)
            query, problems = reply.value or "", []
        except LLMCallError as err:
            query, problems = "", [f"the model named no next hop, so the answer uses the rounds so far: {err}"]
        after = self.gateway.ledger.totals("query_local_hop")
        tokens = sum(after[k] - before[k] for k in ("prompt_tokens", "completion_tokens"))
        cached = after["cache_hits"] > before["cache_hits"]
        return HopRound(query, [], [], after["calls"] - before["calls"], tokens, cached, problems)

    def _titles(self, entity_ids: list[str]) -> list[str]:
        titles = self.index.title_of
        return [titles[e] for e in entity_ids if e in titles]

    # ------------------------------------------------------------ basic

    def basic_search(self, question: str, **options: Any) -> SearchResult:
        return asyncio.run(self.abasic_search(question, **options))

    async def abasic_search(self, question: str, response_type: str = DEFAULT_RESPONSE_TYPE,
                            on_piece: OnPiece | None = None) -> SearchResult:
        cfg = self.config.basic_search
        result = await self._answer("basic", question, cfg, [await self.abasic_context(question)], response_type,
                                    on_piece, {"Sources": cfg.max_context_tokens})
        result.problems += self._keyword_only(cfg.embedding_model_id, ("text_unit_text",))
        return result

    async def abasic_context(self, question: str) -> ContextTable:
        """The `basic_search.k` text units most similar to the question (vector and keyword search fused),
        packed to `basic_search.max_context_tokens`."""
        self._count_tokens_as_indexed()
        cfg = self.config.basic_search
        rankings = [by_keywords(self._database, "text_unit_text", question, cfg.k)]
        if cfg.embedding_model_id and "text_unit_text" in self._vectors():
            vector = await self.embed_question(cfg.embedding_model_id, question)
            rankings.insert(0, self._nearest("text_unit_text", vector, cfg.k))
        return pack_sources(self.index, list(fuse_scores(rankings, cfg.k)), cfg.max_context_tokens)

    # ------------------------------------------------------------ global

    def global_search(self, question: str, **options: Any) -> SearchResult:
        return asyncio.run(self.aglobal_search(question, **options))

    async def aglobal_search(self, question: str, response_type: str = DEFAULT_RESPONSE_TYPE,
                             community_level: int = 2, on_piece: OnPiece | None = None) -> SearchResult:
        checked_level(community_level)
        self._count_tokens_as_indexed()
        cfg = self.config.global_search
        if cfg.chat_model_id is None:
            return self._global_evidence(question, community_level, on_piece)
        problems: list[str] = []
        if cfg.dynamic_community_selection:
            selection, rated = await self._select_dynamically(question, problems)
            problems.append(f"dynamic community selection rated {rated} reports and kept {len(selection.reports)}")
        else:
            selection = select_reports(self.index, community_level, cfg.min_community_rank)
        problems[:0] = selection.missing
        themes = community_themes(self.index.communities)
        batches = map_batches(selection.reports, cfg.max_context_tokens, themes)
        points = await self._map(question, batches, problems)
        mapped = [row for batch in batches for row in batch.rows]
        report_themes = {row["id"]: themes[row["id"]] for row in mapped}
        reduce = reduce_context(points, cfg.data_max_tokens, report_themes)
        level = cfg.dynamic_max_level if cfg.dynamic_community_selection else community_level
        coverage = measure_coverage(self.index, selection, level, batches, points, reduce.points, report_themes)
        context = {"Reports": mapped, "Points": [p.model_dump() for p in sorted(points, key=lambda p: -p.score)]}
        if reduce.points:
            reduce_prompt = fill(section_prompt(cfg, "reduce_prompt", required=("report_data",)),
                                 report_data=reduce.text, response_type=response_type,
                                 max_length=cfg.reduce_max_length)
            answer = await self._generate(cfg.chat_model_id, reduce_prompt, question, "query_global_reduce", on_piece)
        else:
            answer = no_answer(question, selection, community_level)
            if on_piece:
                on_piece(answer)
        return SearchResult("global", question, answer, reduce.text, context, self._usage(), problems,
                            {"map": cfg.max_context_tokens, "reduce": cfg.data_max_tokens}, coverage, self.index)

    async def _map(self, question: str, batches: list[ContextTable], problems: list[str]) -> list[Point]:
        """One map call per batch of reports; a failed call is named in `problems` and gives no points; when
        every call failed, LLMCallError."""
        cfg = self.config.global_search
        map_prompt = fill(section_prompt(cfg, "map_prompt", required=("context_data",)), max_length=cfg.map_max_length)
        chat_model_id = cfg.chat_model_id
        assert chat_model_id is not None  # global search without a chat model answers with evidence before this

        async def map_one(batch: ContextTable) -> list[Point]:
            messages = [{"role": "system", "content": fill(map_prompt, context_data=batch.render())},
                        {"role": "user", "content": question}]
            result = await self.gateway.chat(chat_model_id, messages, stage="query_global_map",
                                             step="map", parse=json_parser(MapAnswer), json_mode=True)
            return result.value.points

        done = await for_each(batches, map_one)
        failures = [f"map call over reports {', '.join(str(r['id']) for r in batch.rows)} failed: {d.error}"
                    for batch, d in zip(batches, done, strict=True) if d.error is not None]
        problems += failures
        if batches and len(failures) == len(batches):  # not "nothing relevant": nothing was read
            raise LLMCallError(f"every map call of global search failed ({len(batches)}); the first: {failures[0]}")
        return [point for d in done if d.value for point in d.value]

    async def _select_dynamically(self, question: str, problems: list[str]) -> tuple[ReportSelection, int]:
        cfg = self.config.global_search
        template = section_prompt(cfg, "dynamic_rate_prompt", required=("report",))
        model_id = cfg.dynamic_model_id or cfg.chat_model_id
        assert model_id is not None  # global search without a chat model answers with evidence before this

        async def rate(report: str) -> int | None:
            prompt = fill(template, question=question, report=report)
            try:
                result = await self.gateway.chat(model_id, [{"role": "user", "content": prompt}],
                                                 stage="query_global_rate", step="rate",
                                                 parse=parse_rating, json_mode=True)
            except LLMCallError as err:
                problems.append(f"rating a report failed, it was kept: {err}")
                return None
            return result.value.rating

        return await dynamic_selection(self.index, rate, cfg.dynamic_threshold, cfg.dynamic_max_level,
                                       cfg.min_community_rank)

    # ------------------------------------------------------------ shared

    async def _answer(self, method: str, question: str, cfg: LocalSearchConfig | BasicSearchConfig,
                      tables: list[ContextTable], response_type: str, on_piece: OnPiece | None, budgets: dict[str, int]
                      ) -> SearchResult:
        context_text = render(tables)
        system = fill(section_prompt(cfg, required=("context_data",)), context_data=context_text,
                      response_type=response_type)
        answer = await self._generate(cfg.chat_model_id, system, question, f"query_{method}", on_piece, tables)
        return SearchResult(method, question, answer, context_text, {t.name: t.column_rows() for t in tables},
                            self._usage(), budgets=budgets, _index=self.index)

    def _global_evidence(self, question: str, level: int, on_piece: OnPiece | None) -> SearchResult:
        """With no chat model: the reports of the level that match the question's words best."""
        cfg = self.config.global_search
        selection = select_reports(self.index, level, cfg.min_community_rank)
        matched = by_keywords(self._database, "community_full_content", question, 50)
        by_id = {r["id"]: r for r in typed_records(selection.reports, CommunityReportRow)}
        ranked = [r for r in matched if r in by_id] or list(by_id)[:5]
        rows = [{"id": int(by_id[r]["community"]), "title": by_id[r]["title"], "content": by_id[r]["summary"],
                 "rank": by_id[r]["rank"]} for r in ranked]
        table = pack("Reports", ["id", "title", "content", "rank"], rows, cfg.max_context_tokens)
        answer = evidence_answer([table], question) if rows else no_answer(question, selection, level)
        if on_piece:
            on_piece(answer)
        return SearchResult("global", question, answer, render([table]), {"Reports": table.rows}, self._usage(),
                            list(selection.missing), {"reports": cfg.max_context_tokens}, _index=self.index)

    async def _generate(self, model_id: str | None, system: str, question: str, stage: str,
                        on_piece: OnPiece | None, tables: list[ContextTable] | None = None) -> str:
        if model_id is None:  # no chat model: the ranked evidence is the answer, labelled as such
            answer = evidence_answer(tables or [], question)
            if on_piece:
                on_piece(answer)
            return answer
        messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
        if on_piece is None:
            return (await self.gateway.chat(model_id, messages, stage=stage, step="answer", parse=answer_text)).value
        pieces = []
        async for piece in self.gateway.stream(model_id, messages, stage=stage):
            pieces.append(piece)
            on_piece(piece)
        return "".join(pieces)

    @cached_property
    def _manifest(self) -> dict[str, Any]:
        """The committed embeddings manifest, read once per GraphRAG object, like the index tables."""
        manifest = self.index.committed.embeddings
        if manifest is None:
            self.index.table("text_units")  # no index at all: say that first
            raise MissingIndex(f"the index in {self.config.output.base_dir} has no LanceDB tables; build them with "
                               f"`{index_command(self.config.root_dir)}` (stage embed_text)")
        return manifest

    @cached_property
    def _database(self) -> Any:
        """LanceDB at the table versions the commit pinned, after checking their files against its digests."""
        self._manifest  # noqa: B018 - a missing index fails here, with the command that builds it
        committed = self.index.committed
        uri = self.config.lancedb_uri
        if committed.commit is not None and committed.commit.lancedb is not None:
            try:
                checked_damage(uri, committed.commit.lancedb)
            except IndexDamaged as err:
                raise IndexDamaged(f"{err}. The index is not served while it is damaged: "
                                   f"`{index_command(self.config.root_dir)}` repairs it") from None
        return PinnedDatabase(uri, committed.lancedb_versions)

    def _vectors(self) -> set[str]:
        """The LanceDB tables with vectors (embed_text.names; an index from before that setting has them in all)."""
        return set(self._manifest.get("vectors", TABLES)) if self._manifest.get("model") else set()

    def _keyword_only(self, embedding_model_id: str | None, tables: tuple[str, ...]) -> list[str]:
        """A search meant to match by meaning too, on tables of an index that has no vectors for them: say so."""
        plain = [t for t in tables if t not in self._vectors()]
        if not embedding_model_id or not plain or not self._manifest.get("model"):
            return []
        return [f"{', '.join(plain)}: no vectors in this index (embed_text.names), searched by keywords only; add "
                f"{'it' if len(plain) == 1 else 'them'} to embed_text.names and run `graphrag-lite index` to search "
                "by meaning too"]

    def _nearest(self, table: str, vector: list[float], limit: int) -> list[str]:
        return by_vector(self._database, table, vector, limit) if table in self._vectors() else []

    async def embed_question(self, model_id: str, text: str) -> list[float]:
        """The question's vector, after checking the index was embedded with the same model and dimension."""
        [vector] = await self.gateway.embed(model_id, [text], stage="query_embed",
                                            dimension=self._manifest.get("dimension"))
        check_embedding_model(self.config, model_id, self._manifest, dimension=len(vector))
        return vector

    def _usage(self) -> dict[str, Any] | None:
        if self._gateway is None or not self._gateway.ledger.visible():
            return None
        return {**self._gateway.ledger.totals(), "by_stage": self._gateway.ledger.by_stage()}


def _source_ids(tables: list[ContextTable]) -> list[int]:
    return [int(row["id"]) for t in tables if t.name == "Sources" for row in t.rows]


EVIDENCE_HEADER = ("Retrieved evidence (answered without a chat model, so this is the ranked context, not a generated "
                   "answer):")


def evidence_answer(tables: list[ContextTable], question: str, per_section: int = 5) -> str:
    """The top rows of each context section, with the citations an answer would carry; a long text is
    quoted at the sentence that shares the most words with the question."""
    lines = [EVIDENCE_HEADER]
    for table in tables:
        if not table.rows:
            continue
        shown = table.rows[:per_section]
        cut = len(table.rows) > per_section
        more = f" the first {len(shown)} of {len(table.rows)} (--json lists all)" if cut else ""
        lines.append(f"\n{table.name}:{more}")
        for row in shown:
            label = row.get("entity") or row.get("title") or (f"{row['source']} - {row['target']}"
                                                             if "source" in row else "")
            text = " ".join(str(row.get("description") or row.get("content") or row.get("text") or "").split())
            text = text or ("(its passages are among the sources)" if LEFT_OUT in row else "")
            if len(text) > 300:
                text = _best_sentence(text, question)
            text = text if len(text) <= 300 else text[:299] + "…"
            lines.append(f"- {label + ': ' if label else ''}{text} [Data: {table.name} ({row['id']})]")
    if len(lines) == 1:
        lines.append("nothing in the index matches the question.")
    return "\n".join(lines)


def _best_sentence(text: str, question: str) -> str:
    words = {w for w in re.findall(r"\w+", question.lower()) if len(w) > 2}
    return max(sentences(text), key=lambda s: len(words & set(re.findall(r"\w+", s.lower()))), default=text)


def checked_level(level: int) -> None:
    """A community level as every search takes it (CLI, HTTP, MCP, Python): 0 or more. A negative one would
    select no report and answer from nothing."""
    if level < 0:
        raise ConfigError(f"community level {level}: levels start at 0, the largest communities")
