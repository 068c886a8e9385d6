"""Every indexing stage, in the order a pipeline runs them. Open this file to see the whole index build.

Each stage module has a small I/O wrapper (`run`, reading and returning tables) around a pure core
function over tables, and declares what it reads, writes and which config sections it depends on.

1. load_documents  input folder          -> input_documents
2. chunk_text      input_documents       -> text_units, documents
"""

from graphrag_lite.pipeline import Stage
from graphrag_lite.stages import chunk_text, load_documents

STAGES: dict[str, Stage] = {stage.name: stage for stage in (
    load_documents.STAGE,
    chunk_text.STAGE,
)}
