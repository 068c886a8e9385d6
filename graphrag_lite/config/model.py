"""The whole configuration (GraphRagConfig): every section, and what belongs to no section."""

from __future__ import annotations

import hashlib
import typing
from pathlib import Path
from typing import Any

from pydantic import Field

from graphrag_lite.config.search import BasicSearchConfig, GlobalSearchConfig, LocalSearchConfig
from graphrag_lite.config.sections import (
    BatchConfig,
    BudgetConfig,
    CacheConfig,
    ChunkingConfig,
    ClusterGraphConfig,
    CommunityReportsConfig,
    EmbedTextConfig,
    EntityResolutionConfig,
    ExtractClaimsConfig,
    ExtractGraphConfig,
    ExtractGraphNlpConfig,
    InputConfig,
    ModelConfig,
    ObjectStorageConfig,
    OutputConfig,
    Section,
    SummarizeDescriptionsConfig,
    VectorStoreConfig,
    default_models,
)


class GraphRagConfig(Section):
    """Everything graphrag-lite reads from settings.yaml."""

    pipeline: str = Field("standard", description="pipeline to run: a name in pipelines/ "
                          "(standard, fast) or the path of a pipeline file")
    models: dict[str, ModelConfig] = Field(default_factory=default_models,
                                           description="models by id; sections refer to them by model_id")
    input: InputConfig = Field(default_factory=InputConfig)
    chunking: ChunkingConfig = Field(default_factory=ChunkingConfig)
    extract_graph: ExtractGraphConfig = Field(default_factory=ExtractGraphConfig)
    extract_graph_nlp: ExtractGraphNlpConfig = Field(default_factory=ExtractGraphNlpConfig)
    entity_resolution: EntityResolutionConfig = Field(default_factory=EntityResolutionConfig)
    summarize_descriptions: SummarizeDescriptionsConfig = Field(default_factory=SummarizeDescriptionsConfig)
    extract_claims: ExtractClaimsConfig = Field(default_factory=ExtractClaimsConfig)
    cluster_graph: ClusterGraphConfig = Field(default_factory=ClusterGraphConfig)
    community_reports: CommunityReportsConfig = Field(default_factory=CommunityReportsConfig)
    embed_text: EmbedTextConfig = Field(default_factory=EmbedTextConfig)
    vector_store: VectorStoreConfig = Field(default_factory=VectorStoreConfig)
    local_search: LocalSearchConfig = Field(default_factory=LocalSearchConfig)
    global_search: GlobalSearchConfig = Field(default_factory=GlobalSearchConfig)
    basic_search: BasicSearchConfig = Field(default_factory=BasicSearchConfig)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)
    object_storage: ObjectStorageConfig = Field(default_factory=ObjectStorageConfig)
    # a run option of index and update (--batch) more than a setting: left out of the settings.yaml `init` writes
    batch: BatchConfig = Field(default_factory=BatchConfig, exclude=True)

    root_dir: Path = Field(Path("."), exclude=True, description="the project's folder (set by the loader)")
    settings_file: Path | None = Field(None, exclude=True, description="the settings file (set by the loader)")
    compat_notes: list[str] = Field(default_factory=list, exclude=True, description="keys of a Microsoft GraphRAG "
                                    "settings file accepted but ignored, with why (set by the loader)")

    @property
    def lancedb_uri(self) -> str:
        """Where the index's LanceDB is: vector_store.db_uri, or `lancedb` inside output.base_dir."""
        return self.vector_store.db_uri or str(self.output.base_dir / "lancedb")

    def section_fingerprint(self, names: typing.Iterable[str]) -> dict[str, Any]:
        """What a stage's result depends on in some sections, as plain data: their values, the contents of
        the files they name (prompts), and the model string and call arguments of the models they use
        (not concurrency or limits, which change how fast, not what). Keys never reach fingerprints."""
        result: dict[str, Any] = {}
        for name in names:
            section = getattr(self, name)
            data = section.model_dump(mode="json")
            for key, value in section:
                if isinstance(value, Path) and value.is_file():
                    data[key] = hashlib.blake2b(value.read_bytes(), digest_size=16).hexdigest()
                if key.endswith("model_id") and value in self.models:
                    model = self.models[value]
                    data[key] = {"model": model.model, "call_args": model.call_args}
            result[name] = data
        return result
