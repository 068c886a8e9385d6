"""Make the libraries we depend on work with no network before anything imports them."""

import os
from importlib.util import find_spec
from pathlib import Path


def configure_offline_environment() -> None:
    """Point tiktoken at the encodings bundled with litellm and keep litellm's price map local.

    tiktoken downloads its encodings on first use, and litellm fetches its model price map at import;
    both fail (slowly) on a machine without internet. A user's own settings win: we only set defaults.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LANCEDB_LOG", "error")  # lancedb warns on stderr each time it creates a table
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return
    spec = find_spec("litellm")  # locate without importing: importing litellm costs seconds
    if spec is None or not spec.submodule_search_locations:
        return
    tokenizers = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    if tokenizers.is_dir():
        os.environ["TIKTOKEN_CACHE_DIR"] = str(tokenizers)
