"""`graphrag-lite query local | global | basic`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from graphrag_lite.cli.common import (
    ConfigOption,
    DataOption,
    ExplainOption,
    JsonOption,
    LevelOption,
    NoCacheOption,
    NoModelOption,
    ResponseTypeOption,
    RootOption,
    SetOption,
    StreamingOption,
    VerboseOption,
    console,
    errors,
    guarded,
)


def _query(method: str, question: str, root: Path, config: Path | None, set_: list[str] | None, response_type: str,
           community_level: int | None, streaming: bool, as_json: bool, explain: bool, no_cache: bool,
           no_model: bool = False, data: Path | None = None) -> None:
    import json

    from graphrag_lite.config import no_model_overrides
    from graphrag_lite.pipeline.checks import print_compat_notes
    from graphrag_lite.pipeline.display import describe_llm_totals
    from graphrag_lite.query.engine import GraphRAG
    from graphrag_lite.query.hops import describe_round

    data = data.resolve() if data else None  # where the shell is, as GraphRAG's --data: not under --root
    overrides = [*(set_ or []), *(no_model_overrides(method) if no_model else []),
                 *([f"output.base_dir={data}", f"vector_store.db_uri={data / 'lancedb'}"] if data else [])]
    rag = GraphRAG.from_config(root, config, overrides, use_cache=not no_cache)
    print_compat_notes(rag.config, errors, brief=True)
    options: dict[str, Any] = {"response_type": response_type}
    if community_level is not None:
        options["community_level"] = community_level
    if streaming and not as_json:
        options["on_piece"] = lambda piece: console.print(piece, end="", markup=False, highlight=False)
    result = asyncio.run(rag.asearch(method, question, **options))
    if pending := rag.index.committed.pending:  # said on stderr, also beside --json (whose "index" says it too)
        errors.print(f"[yellow]note:[/yellow] {escape(pending)}", highlight=False)
    if as_json:
        console.print_json(json.dumps(result.to_dict(), default=str, ensure_ascii=False))
        return
    if streaming:
        console.print()
    else:
        console.print(result.answer, markup=False, highlight=False)
    for problem in result.problems:
        errors.print(f"[yellow]! {problem}[/yellow]", highlight=False)
    if explain:
        console.rule("context sent")
        console.print(result.context_text, markup=False, highlight=False)
        console.rule("usage")
        console.print(describe_llm_totals(result.usage) if result.usage else "no model calls", highlight=False)
        console.print(f"context budgets (tokens): {result.budgets}", highlight=False)
        for number, hop in enumerate(result.rounds if len(result.rounds) > 1 else [], start=1):
            console.print(describe_round(number, hop), markup=False, highlight=False)
        for section in result.sections:
            console.print(f"  {section['name']}: {section['used']:,} of {section['cap']:,} tokens, "
                          f"{section['rows']} of {section['candidates']} rows ({section['why']})",
                          markup=False, highlight=False)
        if result.coverage:
            console.print(result.coverage.describe(), highlight=False)


@guarded
def query_local(
    question: Annotated[str, typer.Argument(help="the question")],
    root: RootOption = Path("."), config: ConfigOption = None, set_: SetOption = None,
    response_type: ResponseTypeOption = "Multiple Paragraphs", community_level: LevelOption = 2,
    hops: Annotated[int | None, typer.Option("--hops", min=1, max=5, help="retrieval rounds; from 2 the model "
                                             "names what the context still lacks and the next round follows "
                                             "it (default: local_search.hops)")] = None,
    streaming: StreamingOption = False, as_json: JsonOption = False, explain: ExplainOption = False,
    no_cache: NoCacheOption = False, no_model: NoModelOption = False, data: DataOption = None,
    verbose: VerboseOption = False,
) -> None:
    """Answer from the neighbourhood of the entities the question is about (entities, relationships, claims,
    their communities' reports and the source text)."""
    overrides = [*(set_ or []), *([f"local_search.hops={hops}"] if hops else [])]
    _query("local", question, root, config, overrides, response_type, community_level, streaming, as_json, explain,
           no_cache, no_model, data)


@guarded
def query_global(
    question: Annotated[str, typer.Argument(help="the question")],
    root: RootOption = Path("."), config: ConfigOption = None, set_: SetOption = None,
    response_type: ResponseTypeOption = "Multiple Paragraphs", community_level: LevelOption = 2,
    streaming: StreamingOption = False, as_json: JsonOption = False, explain: ExplainOption = False,
    no_cache: NoCacheOption = False, no_model: NoModelOption = False, data: DataOption = None,
    verbose: VerboseOption = False,
) -> None:
    """Answer questions about the whole corpus: map-reduce over the community reports of one level."""
    _query("global", question, root, config, set_, response_type, community_level, streaming, as_json, explain,
           no_cache, no_model, data)


@guarded
def query_basic(
    question: Annotated[str, typer.Argument(help="the question")],
    root: RootOption = Path("."), config: ConfigOption = None, set_: SetOption = None,
    response_type: ResponseTypeOption = "Multiple Paragraphs",
    streaming: StreamingOption = False, as_json: JsonOption = False, explain: ExplainOption = False,
    no_cache: NoCacheOption = False, no_model: NoModelOption = False, data: DataOption = None,
    community_level: Annotated[int | None, typer.Option("--community-level", hidden=True)] = None,
    verbose: VerboseOption = False,
) -> None:
    """Answer from the text units most similar to the question (vector and keyword search): plain RAG, the
    baseline to compare graph search against."""
    if community_level is not None:  # GraphRAG's scripts pass the same flags to every method
        errors.print("[yellow]note:[/yellow] --community-level is not used by basic search (it reads text units, "
                     "not community reports); ignored", highlight=False)
    _query("basic", question, root, config, set_, response_type, None, streaming, as_json, explain, no_cache,
           no_model, data)
