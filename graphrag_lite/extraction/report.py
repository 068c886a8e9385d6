"""What an extraction stage reports of its text units: failed and partly extracted units, records dropped as
unusable or not found in their text unit, entities added from relationship ends."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from graphrag_lite.extraction.gleaning import UnitOutcome


@dataclass
class ExtractionReport:
    summary: str  # one line for the terminal
    problems: list[str]  # a line per failed or partly extracted unit
    details: dict[str, Any]  # figures for stats.json
    complete: bool  # False when a unit failed or was partly extracted: the stage runs again next time


def extraction_report(outcomes: list[UnitOutcome], units: pd.DataFrame, records: int, what: str) -> ExtractionReport:
    """What an extraction says of its units (`records` kept, described as `what`): problems for the terminal
    and stats.json, figures for the details; incomplete when a unit failed or was partly extracted."""
    readable = dict(zip(units["id"], units["human_readable_id"], strict=True))
    problems, dropped, ungrounded, created = [], [], [], []
    for outcome in outcomes:
        unit = f"text unit {readable[outcome.text_unit_id]}"
        if outcome.parsed is None:
            problems.append(f"{unit}: extraction failed: {outcome.error}")
            continue
        problems += [f"{unit}: {p}" for p in outcome.partial]
        dropped += [f"{unit}: {d}" for d in outcome.parsed.dropped]
        ungrounded += [f"{unit}: {d}" for d in outcome.grounding.ungrounded]
        created += [f"{unit}: {name}" for name in outcome.grounding.created]
    failed = sum(o.parsed is None for o in outcomes)
    partly = sum(bool(o.partial) for o in outcomes if o.parsed is not None)
    total = max(1, len(outcomes))
    line = f"{len(outcomes) - failed} of {len(outcomes)} text units -> {what}"
    if failed or partly:
        line += f"; {failed} text units FAILED ({failed / total:.0%}), {partly} partly extracted"
    unusable = len(dropped) + len(ungrounded)
    if unusable:
        line += (f"; {unusable} records dropped ({unusable / max(1, unusable + records):.0%}: "
                 f"{len(dropped)} unusable, {len(ungrounded)} not in their text unit)")
    if created:
        line += f"; {len(created)} entities added from relationship ends"
    details = {"text_units": len(outcomes), "failed_text_units": failed, "partly_extracted_text_units": partly,
               "failed_share": round(failed / total, 4), "dropped_records": dropped, "ungrounded_records": ungrounded,
               "entities_from_relationship_ends": created,
               "calls_per_unit": round(sum(o.calls for o in outcomes) / total, 3)}
    return ExtractionReport(line, problems, details, complete=not failed and not partly)
