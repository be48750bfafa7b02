"""Nothing under ``artifacts_app/`` reaches another library's private names (DESIGN.md §13).

What a library does not offer publicly lives in one adapter module per library under
``agent_site/`` (listed at its top, pinned by ``tests/adapters/test_*_pin.py``). This reads every
module of the app and fails on an attribute whose name begins with an underscore — ``x._name``,
``getattr(x, "_name")``, ``setattr``, ``hasattr`` — unless it is reached from ``self`` or
``cls`` or from a name the module imported from the app itself (our own private names).
"""

from __future__ import annotations

import ast
from pathlib import Path

import artifacts_app

APP = Path(artifacts_app.__file__).parent
ROOT = APP.parent

# Names that begin with an underscore and are documented public API all the same.
DOCUMENTED = {
    # Django: "Model _meta API" (docs/ref/models/meta.txt); Model._default_manager and
    # _base_manager (docs/topics/db/managers.txt).
    "_meta",
    "_default_manager",
    "_base_manager",
    # Python's named tuples (the collections docs: the underscore avoids field names).
    "_replace",
    "_asdict",
    "_fields",
    "_make",
}
REFLECTION = {"getattr", "setattr", "hasattr", "delattr"}


def private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__") and name not in DOCUMENTED


def own_names(tree: ast.Module) -> set[str]:
    """The names this module binds to something imported from the app."""
    names = {"self", "cls"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (
            node.level > 0 or (node.module or "").split(".")[0] == "artifacts_app"
        ):
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "artifacts_app":
                    names.add(alias.asname or alias.name.split(".")[0])
    return names


def reaches(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, what) for each private name reached on an object that is not ours."""
    ours = own_names(tree)
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            target, name = node.value, node.attr
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in REFLECTION
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and private(node.args[1].value)
        ):
            target, name = node.args[0], node.args[1].value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in ours:
            continue
        found.append((node.lineno, node.col_offset, f"{ast.unparse(target)}.{name}"))
    return [(line, what) for line, _, what in sorted(found)]


def test_nothing_under_the_app_reaches_another_librarys_private_names():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in sorted(APP.rglob("*.py"))
        for line, what in reaches(ast.parse(path.read_text(), str(path)))
    ]
    assert found == [], (
        "another library's private names reached from the app; take its public door, or move "
        "the use into that library's adapter under agent_site/ (docs/architecture.md):\n"
        + "\n".join(found)
    )


def test_the_scan_finds_each_way_of_reaching_a_private_name():
    source = (
        "from artifacts_app import media\n"
        "import artifacts_app.blobs as blobs\n"
        "def f(self, request, response):\n"
        "    self._mine, media._QUOTED, blobs._lock, row._replace(a=1)\n"
        "    request._request.read()\n"
        "    getattr(response, '_resource_closers')\n"
        "    setattr(request.post, '_mutable', False)\n"
        "    super()._commit()\n"
    )
    assert [what for _, what in reaches(ast.parse(source))] == [
        "request._request",
        "response._resource_closers",
        "request.post._mutable",
        "super()._commit",
    ]
