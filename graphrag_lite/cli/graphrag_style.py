"""Microsoft GraphRAG's command lines, read as graphrag-lite's."""

from __future__ import annotations

import difflib

from graphrag_lite.errors import ConfigError
from graphrag_lite.query import SEARCH_METHODS


def graphrag_style(args: list[str]) -> list[str]:
    """Microsoft GraphRAG's command lines as graphrag-lite's: `query "Q" --method local` is `query local "Q"`,
    `--dynamic-community-selection` the setting of that name, `index --method standard-update` the standard
    method (an index re-runs only what changed), and so for `update`. Other arguments pass unchanged."""
    if args[:1] in (["index"], ["update"]):
        return [a.removesuffix("-update") if a in ("standard-update", "fast-update") else a for a in args]
    if args[:1] != ["query"] or (args[1:2] and args[1] in SEARCH_METHODS):
        return args
    method_given = bool({"--method", "-m"} & set(args))
    if not method_given and (len(args) < 2 or args[1].startswith("-")):
        return args  # `query`, `query --help`: graphrag-lite's own
    # a mistyped method (locl, globl, basc) would be asked as a question by global search; a one-word question
    # (goal, vocal, total, logical) stays below the 0.85 similarity
    if not method_given and (near := difflib.get_close_matches(args[1].lower(), SEARCH_METHODS, 1, cutoff=0.85)):
        raise ConfigError(f"query {args[1]}: not a search method; did you mean `graphrag-lite query {near[0]}`? "
                          f"(To ask it as a question, add --method global.)")
    rest, method = list(args[1:]), "global"  # GraphRAG's default method
    for flag in ("--method", "-m"):
        while flag in rest:
            at = rest.index(flag)
            method = rest[at + 1] if at + 1 < len(rest) else ""
            del rest[at:at + 2]
    if method not in SEARCH_METHODS:
        raise ConfigError(f"query --method {method}: not a search method here (local, global, basic); for DRIFT's "
                          "follow-up questions, try `graphrag-lite query local --hops 2`")
    if "--dynamic-community-selection" in rest:
        rest.remove("--dynamic-community-selection")
        rest += ["--set", "global_search.dynamic_community_selection=true"]
    return ["query", method, *[a for a in rest if a != "--no-dynamic-selection"]]
