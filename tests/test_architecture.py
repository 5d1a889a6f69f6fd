"""Package boundaries: imports across workspace packages go through declared, top-level, exported names."""

import ast
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from workspace import PACKAGES

STANDALONE = {"amd_isa", "navi_flash"}


@dataclass(frozen=True)
class Package:
    module: str
    dist: str
    declared: frozenset[str]  # distribution names it depends on
    src: Path

    @property
    def exports(self) -> frozenset[str]:
        return exported_names(self.src / "__init__.py")


def exported_names(init: Path) -> frozenset[str]:
    """The names in a package's `__all__` (read statically; a package without `__all__` exports nothing)."""
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return frozenset(ast.literal_eval(node.value))
    return frozenset()


def load_packages(packages_dir: Path) -> dict[str, Package]:
    found = {}
    for pyproject_path in sorted(packages_dir.glob("*/pyproject.toml")):
        pyproject = tomllib.loads(pyproject_path.read_text())
        dist = pyproject["project"]["name"]
        module = pyproject.get("tool", {}).get("uv", {}).get("build-backend", {}).get("module-name", dist.replace("-", "_"))
        declared = frozenset(re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower() for r in pyproject["project"].get("dependencies", []))
        found[module] = Package(module, dist, declared, pyproject_path.parent / "src" / module)
    return found


def violations(packages_dir: Path) -> list[str]:
    """Every cross-package import that breaks the rules, as 'file:line: why'."""
    packages = load_packages(packages_dir)
    problems = []
    for pkg in packages.values():
        for path in sorted(pkg.src.rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    imported = [(alias.name, None) for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    imported = [(node.module, [alias.name for alias in node.names])]
                else:
                    continue
                for module, names in imported:
                    top = module.split(".")[0]
                    if top == pkg.module or top not in packages:
                        continue
                    other = packages[top]
                    where = f"{path.relative_to(packages_dir)}:{node.lineno}"
                    if pkg.module in STANDALONE:
                        problems.append(f"{where}: {pkg.dist} must import no workspace package, imports {top}")
                    if other.dist not in pkg.declared:
                        problems.append(f"{where}: imports {top} but {pkg.dist}'s pyproject does not declare {other.dist}")
                    if module != top:
                        problems.append(f"{where}: imports internals {module}; use `from {top} import ...`")
                    elif names is None:
                        continue  # `import uopir` then attribute access: checked by the exports of the names used at runtime
                    else:
                        for name in names:
                            if name == "*" or name not in other.exports:
                                problems.append(f"{where}: {name} is not exported by {top} (not in its __all__)")
    return problems


def test_workspace_packages_respect_boundaries():
    assert violations(PACKAGES) == []


def write_package(root: Path, folder: str, dist: str, deps: list[str], files: dict[str, str]) -> None:
    module = dist.replace("-", "_")
    (root / folder / "src" / module).mkdir(parents=True)
    deps_toml = ", ".join(f'"{d}"' for d in deps)
    (root / folder / "pyproject.toml").write_text(f'[project]\nname = "{dist}"\nversion = "0.1.0"\ndependencies = [{deps_toml}]\n')
    for name, text in files.items():
        (root / folder / "src" / module / name).write_text(text)


def test_checker_catches_each_kind_of_violation(tmp_path):
    write_package(tmp_path, "uopir", "uopir", [], {"__init__.py": '__all__ = ["UOp"]\nUOp = 1\n', "ops.py": "X = 2\n"})
    write_package(tmp_path, "amd-isa", "amd-isa", ["uopir"], {"__init__.py": "import uopir\n"})
    write_package(tmp_path, "good", "good", ["uopir"], {"__init__.py": "from uopir import UOp\n"})
    write_package(tmp_path, "bad", "bad", [], {
        "__init__.py": "from uopir import UOp\n",  # undeclared
        "deep.py": "from uopir.ops import X\n",  # internals and undeclared
    })
    write_package(tmp_path, "hidden", "hidden", ["uopir"], {"__init__.py": "from uopir import ops\n"})  # not exported
    found = violations(tmp_path)
    assert any("amd-isa must import no workspace package" in v for v in found)
    assert any("bad/src/bad/__init__.py:1: imports uopir but bad's pyproject does not declare uopir" in v for v in found)
    assert any("deep.py:1: imports internals uopir.ops" in v for v in found)
    assert any("hidden/src/hidden/__init__.py:1: ops is not exported by uopir" in v for v in found)
    assert not any(v.startswith("good/") for v in found)
    assert len(found) == 5
