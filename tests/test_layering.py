"""The package's one dependency rule (docs/ARCHITECTURE.md): a paper module may import themes and core; a theme may
import core and the themes below it; nothing in the library imports a paper module."""

import ast
from pathlib import Path

import mlsysrepro

LIBRARY = Path(mlsysrepro.__file__).parent
#: The themes by layer: a theme may import core and the themes of lower layers.
LAYERS = [{"core"}, {"vision", "text", "sparsity", "gnn", "recsys"}, {"transformer", "cluster", "ddl", "recurrent", "serving"},
          {"kvcache"}]
LAYER = {theme: i for i, themes in enumerate(LAYERS) for theme in themes}
TOP_LEVEL = {"catalog", "reproduction", "runner", "collection_map", "reading_guide", "book"}  # they import core, and each other


def imported_packages(path: Path) -> set[str]:
    """The first-level packages of mlsysrepro a module imports (``from ..gnn import x`` -> ``gnn``)."""
    package = path.relative_to(LIBRARY).parts[0] if path.parent != LIBRARY else None
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("mlsysrepro.")}
        elif isinstance(node, ast.ImportFrom):
            module = (node.module or "").split(".")
            if node.level == 0 and module[0] == "mlsysrepro" and len(module) > 1:
                found.add(module[1])
            elif node.level == 1 and package is not None:
                found.add(package)
            elif node.level == 1 and node.module:
                found.add(module[0])
            elif node.level == 1:
                found |= {a.name for a in node.names}
            elif node.level == 2 and node.module:
                found.add(module[0])
            elif node.level == 2:
                found |= {a.name for a in node.names}
    return found - {package}


def modules():
    return sorted(p for p in LIBRARY.rglob("*.py"))


def test_every_theme_is_placed_in_a_layer():
    packages = {p.name for p in LIBRARY.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages == set(LAYER) | {"papers"}


def test_themes_import_only_core_and_the_themes_below_them():
    for path in modules():
        parts = path.relative_to(LIBRARY).parts
        if len(parts) == 1 or parts[0] == "papers":
            continue
        theme = parts[0]
        for target in imported_packages(path):
            assert target in LAYER and LAYER[target] < LAYER[theme], (
                f"{path.relative_to(LIBRARY)} imports {target}: a {theme} module may import "
                f"{sorted(t for t in LAYER if LAYER[t] < LAYER[theme])}")


def test_nothing_in_the_library_imports_a_paper_module():
    for path in modules():
        if path.relative_to(LIBRARY).parts[0] == "papers":
            continue
        assert "papers" not in imported_packages(path), f"{path.relative_to(LIBRARY)} imports a paper module"


def test_the_top_level_modules_import_core_and_each_other_only():
    for name in TOP_LEVEL:
        assert imported_packages(LIBRARY / f"{name}.py") <= {"core"} | TOP_LEVEL


def test_only_the_report_imports_the_drawing_modules_whose_edits_keep_the_caches():
    from mlsysrepro.core.cache import DRAWING_MODULES, _imports

    # the map of the collection draws from the committed results.json alone: only reproduction (never cached)
    # imports it
    allowed = {"mlsysrepro.core", "mlsysrepro.core.claims", "mlsysrepro.collection_map"}
    for path in modules():
        name = ".".join(("mlsysrepro",) + path.relative_to(LIBRARY).with_suffix("").parts).removesuffix(".__init__")
        if name != "mlsysrepro.reproduction":
            assert "mlsysrepro.collection_map" not in _imports(name, path), f"{name} imports the collection map"
        if name not in allowed:
            assert not _imports(name, path) & DRAWING_MODULES, (
                f"{path.relative_to(LIBRARY)} imports a drawing module, which the cache key leaves out")


def test_no_cached_computation_names_its_code_by_hand():
    """A cache key hashes the module of the function that computes the entry, with everything it imports; a
    ``source=`` naming another module by hand would leave the closure that actually runs out of the key (an edit to
    it would be served the old entry). Only TaskRunner.cached_map passes it, with the task function's own module."""
    import ast

    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "cached":
                named = [k for k in node.keywords if k.arg == "source"]
                ok = all(isinstance(k.value, ast.Attribute) and k.value.attr == "__module__" for k in named)
                assert ok, f"{path.relative_to(LIBRARY)}:{node.lineno} names the cached code by hand"
