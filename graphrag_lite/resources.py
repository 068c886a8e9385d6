"""Find the default prompt and pipeline files, installed (inside the wheel) or in a source checkout."""

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """The folder `prompts` or `pipelines`: inside the wheel at graphrag_lite/_data/NAME, in a checkout
    (editable install) at the repository top level."""
    for candidate in (_PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"the packaged '{name}' folder is missing; reinstall graphrag-lite")


def default_prompt(filename: str) -> Path:
    return data_dir("prompts") / filename
