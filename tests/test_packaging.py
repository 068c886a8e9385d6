"""The wheel carries the prompt and pipeline files, and they are found from any working directory."""

import subprocess
import sys
import zipfile

from tests.conftest import REPO


def test_wheel_ships_prompts_and_pipelines(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path), str(REPO)], check=True, timeout=300, capture_output=True)
    wheel = next(tmp_path.glob("graphrag_lite-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for pipeline in (REPO / "pipelines").glob("*.yaml"):
        assert f"graphrag_lite/_data/pipelines/{pipeline.name}" in names
    for prompt in (REPO / "prompts").iterdir():
        assert f"graphrag_lite/_data/prompts/{prompt.name}" in names
    assert "graphrag_lite/cli/__init__.py" in names
    # the offline fake model reaches the model-calling floor as a plug-in provider (an entry point)
    points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "[graphrag_lite.providers]" in zipfile.ZipFile(wheel).read(points).decode()

    # Installed from the wheel (not the checkout), the data folders resolve inside the package.
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    code = ("from graphrag_lite.resources import data_dir; "
            "from graphrag_lite.pipeline.definition import available_pipelines; "
            "print(data_dir('pipelines')); print(available_pipelines())")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={"PYTHONPATH": str(target)},
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert str(target / "graphrag_lite" / "_data" / "pipelines") in out
    assert "'fast'" in out and "'standard'" in out
