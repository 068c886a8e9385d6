"""The configuration: the single source of every default (model.py, sections.py, search.py), the loader for
settings.yaml (loading.py), the reading of a user's YAML (yaml_reading.py: aliases within a budget, no key
twice, UTF-8), messages that name the key of a problem (messages.py), and settings.yaml written from the model
(rendering.py).

Section and key names follow Microsoft GraphRAG's settings.yaml where it has one, so users can carry their
configuration over. The names below are the configuration's public face: the rest of the package imports
them from here.
"""

from graphrag_lite.config.loading import (
    CONFIG_FILENAMES,
    Overrides,
    OverrideSources,
    apply_overrides,
    config_from_data,
    find_config_file,
    load_config,
    override_items,
    place_working_copies,
    project_folder,
    read_settings,
    resolve_config,
    yaml_mapping,
)
from graphrag_lite.config.messages import unwrap_optional
from graphrag_lite.config.model import GraphRagConfig
from graphrag_lite.config.rendering import render_settings_yaml
from graphrag_lite.config.search import BasicSearchConfig, GlobalSearchConfig, LocalSearchConfig, no_model_overrides
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
    Located,
    ModelConfig,
    ObjectStorageConfig,
    OutputConfig,
    SummarizeDescriptionsConfig,
    VectorStoreConfig,
)

__all__ = [
    "CONFIG_FILENAMES", "BasicSearchConfig", "BatchConfig", "BudgetConfig", "CacheConfig", "ChunkingConfig",
    "ClusterGraphConfig", "CommunityReportsConfig", "EmbedTextConfig", "EntityResolutionConfig", "ExtractClaimsConfig",
    "ExtractGraphConfig", "ExtractGraphNlpConfig", "GlobalSearchConfig", "GraphRagConfig", "InputConfig",
    "LocalSearchConfig", "Located", "ModelConfig", "ObjectStorageConfig", "OutputConfig", "OverrideSources",
    "Overrides", "SummarizeDescriptionsConfig", "VectorStoreConfig", "apply_overrides", "config_from_data",
    "find_config_file", "load_config", "no_model_overrides", "override_items", "place_working_copies", "project_folder",
    "read_settings", "render_settings_yaml", "resolve_config", "unwrap_optional", "yaml_mapping",
]
