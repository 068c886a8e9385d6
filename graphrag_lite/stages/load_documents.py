"""Stage load_documents: read the input folder into the `input_documents` table (documents/reading.py says
what each kind of file gives and what is skipped, and why).

Anything that cannot be used is reported with its file and reason and skipped; the run goes on. Every file
that gives no document (a file over a limit of the input section too, documents/limits.py) is named in the
stage's summary and first in its problems, then every link or special file not read (documents/listing.py),
so the terminal never hides a dropped file. Documents keep their numbers across runs; the summary says what
changed since the last.
"""

from __future__ import annotations

from graphrag_lite.documents.changes import describe_changes, document_changes, document_numbers, texts_if_ids_given
from graphrag_lite.documents.reading import input_digest, read_documents
from graphrag_lite.ids import kept_numbers
from graphrag_lite.pipeline.contract import Stage, StageContext, StageResult


def run(ctx: StageContext) -> StageResult:
    cfg = ctx.config.input
    # the last run's documents by id, number and title only (and texts when ids are given, to tell an edit):
    # their texts are not needed to tell what changed
    previous = ctx.previous("input_documents", ["id", "human_readable_id", "title", *texts_if_ids_given(cfg)])
    loaded = read_documents(cfg, lambda files: ctx.track(files, total=len(files), what="files"),
                            known=frozenset(previous["title"]) if previous is not None else frozenset())
    table, files, dropped, problems = loaded.table, loaded.files, loaded.dropped, loaded.problems
    summary = f"{len(files)} files -> {len(table)} documents"
    if dropped:
        summary += f"; {len(dropped)} files dropped: {', '.join(dropped)} (why below and in stats.json)"
    if loaded.not_read:
        summary += (f"; {len(loaded.not_read)} links or special files not read: "
                    f"{', '.join(p.source for p in loaded.not_read)} (why below and in stats.json)")
    if skipped := len(problems) - len(dropped) - len(loaded.not_read):
        summary += f"; {skipped} rows skipped (listed in stats.json)"
    if loaded.unmatched:
        summary += f"; {loaded.unmatched} files ignored (not matching input.file_pattern)"
    if previous is not None:
        table["human_readable_id"] = kept_numbers(table["id"], document_numbers(previous, table))
        table = table.sort_values("human_readable_id", kind="stable").reset_index(drop=True)
    changes = document_changes(previous, table)
    if changes:
        summary += "; since the last run: " + describe_changes(changes)
    return StageResult(tables={"input_documents": table}, summary=summary,
                       problems=[str(p) for p in problems],
                       details={"files": len(files), "files_dropped": len(dropped),
                                "files_over_limits": loaded.over_limits, "entries_not_read": len(loaded.not_read),
                                "files_not_matching_pattern": loaded.unmatched, "documents_since_last_run": changes})


STAGE = Stage(
    name="load_documents",
    description="read the input folder into documents, reporting and skipping what cannot be used",
    reads=(),
    writes=("input_documents",),
    config_sections=("input",),
    run=run,
    external_digest=input_digest,
)
