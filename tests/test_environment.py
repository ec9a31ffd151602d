"""pyproject.toml is the single list of dependencies; environment.yml only defers to it."""

try:
    import tomllib
except ImportError:  # Python 3.10: pytest depends on tomli there
    import tomli as tomllib

import yaml

from mlsysrepro.core import paths


def test_environment_yml_defers_to_pyproject():
    env = yaml.safe_load((paths.REPO_ROOT / "environment.yml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pip = [d for d in env["dependencies"] if isinstance(d, dict)]
    assert {c.split("=")[0] for c in conda} == {"python", "pip"}
    assert pip == [{"pip": ["-e .[dev]"]}]


def test_torch_is_pinned_and_no_compiled_graph_extensions_are_required():
    project = tomllib.loads((paths.REPO_ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + sum(project["optional-dependencies"].values(), [])
    assert "torch==2.13.0" in deps
    names = {d.split(";")[0].split("=")[0].split(">")[0].split("<")[0].strip() for d in deps}
    assert not names & {"torch-sparse", "torch-scatter", "pyg-lib", "torch-cluster"}
    for core in ("jupyterlab", "papermill", "torch-geometric", "pandas", "seaborn", "ipykernel", "ipywidgets"):
        assert core in names, core
    assert "pytest" in {d.split(">")[0] for d in project["optional-dependencies"]["dev"]}
