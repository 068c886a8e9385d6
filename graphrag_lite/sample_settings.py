"""The repository's settings.yaml, for the bundled sample corpus, generated from the config model.

Regenerate with `python -m graphrag_lite.sample_settings > settings.yaml` (make settings); a test checks
that the file in the repository is current.
"""

from graphrag_lite.config import GraphRagConfig, ModelConfig, render_settings_yaml
from graphrag_lite.project import SETTINGS_HEADER

SAMPLE_HEADER = SETTINGS_HEADER + """\
#
# This file indexes the sample corpus in input/ (The Diary of Samuel Pepys, June-August 1661) with the
# offline fake model, so it runs with no API key. For a real model, see docs/configuration.md.
"""


def sample_settings_yaml() -> str:
    return render_settings_yaml(GraphRagConfig(models={
        "default_chat_model": ModelConfig(model="fake/default"),
        "default_embedding_model": ModelConfig(model="fake/embedding"),
    }), SAMPLE_HEADER)


if __name__ == "__main__":
    print(sample_settings_yaml(), end="")
