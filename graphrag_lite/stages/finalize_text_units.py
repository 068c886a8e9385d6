"""Stage finalize_text_units: `text_units` gain the ids of their entities, relationships and claims, and the
claims become the `covariates` table (subjects and objects resolved to entity titles where they are one)."""

from __future__ import annotations

from collections import defaultdict

import pandas as pd

from graphrag_lite.ids import kept_numbers, stable_id
from graphrag_lite.names import normalize_name
from graphrag_lite.pipeline.contract import Stage, StageContext, StageResult
from graphrag_lite.tables import INDEX_TABLES

COVARIATE_COLUMNS = list(INDEX_TABLES["covariates"])


def run(ctx: StageContext) -> StageResult:
    text_units, covariates = finalize(ctx.read("base_text_units"), ctx.read("entities"), ctx.read("relationships"),
                                      ctx.read("raw_claims"), ctx.read("entity_aliases"))
    covariates["human_readable_id"] = claim_numbers(covariates, ctx.previous("covariates", ["id", "human_readable_id",
                                                                                         *CLAIM_FACTS]))
    linked = int((text_units["entity_ids"].map(len) > 0).sum())
    return StageResult(
        tables={"text_units": text_units, "covariates": covariates},
        summary=f"{linked} of {len(text_units)} text units mention an entity; {len(covariates)} claims",
    )


def finalize(units: pd.DataFrame, entities: pd.DataFrame, relationships: pd.DataFrame, claims: pd.DataFrame,
             aliases: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    by_unit: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for table, key in ((entities, "entity_ids"), (relationships, "relationship_ids")):
        for row_id, unit_ids in zip(table["id"], table["text_unit_ids"], strict=True):
            for unit_id in unit_ids:
                by_unit[unit_id][key].append(row_id)
    covariates = covariate_table(claims, entities, aliases)
    for row_id, unit_id in zip(covariates["id"], covariates["text_unit_id"], strict=True):
        by_unit[unit_id]["covariate_ids"].append(row_id)
    units = units.copy()
    for key in ("entity_ids", "relationship_ids", "covariate_ids"):
        units[key] = [by_unit[u][key] for u in units["id"]]
    return units, covariates


def covariate_table(claims: pd.DataFrame, entities: pd.DataFrame, aliases: pd.DataFrame) -> pd.DataFrame:
    titles = {normalize_name(t): t for t in entities["title"]}
    titles.update({normalize_name(a): t for a, t in zip(aliases["alias"], aliases["title"], strict=True)})

    def resolve(name: str) -> str:
        return titles.get(normalize_name(name), name)

    rows: list[tuple[object, ...]] = []
    for claim in claims.itertuples(index=False):
        subject = resolve(str(claim.subject))
        target = resolve(str(claim.object)) if claim.object != "NONE" else "NONE"
        rows.append((stable_id("claim", claim.text_unit_id, subject, target, claim.type, claim.description),
                     len(rows), "claim", claim.type, claim.description, subject, target, claim.status,
                     claim.start_date, claim.end_date, claim.source_text, claim.text_unit_id))
    table = pd.DataFrame(rows, columns=COVARIATE_COLUMNS)
    return table.drop_duplicates("id").reset_index(drop=True).assign(human_readable_id=lambda t: range(len(t)))


CLAIM_FACTS = ["subject_id", "object_id", "type", "status", "description", "source_text"]


def claim_numbers(claims: pd.DataFrame, previous: pd.DataFrame | None) -> list[int]:
    """Claims keep their numbers as entities do: by id, else by what they say (an edited document gives its
    text units, and so its claims, new ids), so a kept report's "Claims (n)" still points at the same claim."""
    if previous is None:
        return kept_numbers(claims["id"], None)
    numbers = dict(zip(previous["id"], previous["human_readable_id"], strict=True))
    current = set(claims["id"])
    vanished: dict[tuple[object, ...], list[int]] = defaultdict(list)
    for row_id, number, *facts in previous[["id", "human_readable_id", *CLAIM_FACTS]].itertuples(index=False):
        if row_id not in current:
            vanished[tuple(facts)].append(int(number))
    for row_id, *facts in claims[["id", *CLAIM_FACTS]].itertuples(index=False):
        if row_id not in numbers and vanished[tuple(facts)]:
            numbers[row_id] = vanished[tuple(facts)].pop(0)
    return kept_numbers(claims["id"], numbers)


STAGE = Stage(
    name="finalize_text_units",
    description="text units with their entity, relationship and claim ids; claims as covariates",
    reads=("base_text_units", "entities", "relationships", "raw_claims", "entity_aliases"),
    writes=("text_units", "covariates"),
    config_sections=(),
    run=run,
)
