"""The package's layering, read from the source (``ast``): every import of one of our modules goes to
the same or a lower layer, no import cycle exists, function-level imports of our own modules are the
listed exceptions (each avoids a heavy optional import at start-up), and the workflow rooms keep to
their own room, the shared room and the edges ``docs/architecture.md`` lists.

Layers, bottom to top: GLUE evaluation (``glue_sparse_tasks``, the ``glue_average`` metric), method
core (``sparse_models``), lm-eval model (``glue_sparse.lm_eval_model``), workflows (the shared room
``glue_sparse.common`` and one room per workflow, ``glue_sparse/<room>/``), CLI (``glue_sparse.cli`` and
every room's ``command``).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("glue_sparse_tasks", "sparse_models", "glue_sparse", "metrics")
#: the workflow rooms: each has options.py (no ML library) and command.py (its subcommand)
ROOMS = ("bench", "cache", "data", "demo", "eval", "export", "finetune", "perplexity", "posttrain", "predict", "pretrain", "speed")
#: room -> the rooms it is built on (it may import them); every other room-to-room import fails
BUILT_ON = {
    "bench": {"finetune"},  # a bench cell is a fine-tuning run, evaluated and timed
    "demo": {"bench", "finetune"},  # the main job is a small bench grid (the bench's engine, grid.py)
    "posttrain": {"perplexity"},  # scored by the perplexity protocols (protocols.py)
    "pretrain": {"perplexity"},  # validation perplexity (protocols.py)
    "speed": {"finetune"},  # the tokens per example of fine-tuning
}
LAYERS = (  # (module prefix, layer), most specific first
    ("glue_sparse.cli", 5),
    *((f"glue_sparse.{room}.command", 5) for room in ROOMS),
    *((f"glue_sparse.{room}.report_command", 5) for room in ROOMS),
    *((f"glue_sparse.{room}", 4) for room in ROOMS),
    ("glue_sparse.common", 4),
    ("glue_sparse.lm_eval_model", 3),
    ("glue_sparse", 3),  # the package docstring and version only
    ("sparse_models", 2),
    ("glue_sparse_tasks", 1),
    ("metrics", 1),
)
LAYER_NAMES = {1: "GLUE evaluation", 2: "method core", 3: "lm-eval model", 4: "workflows", 5: "CLI"}

#: (importing module, imported module): function-level imports of our own modules that keep a heavy
#: optional dependency out of start-up. Anything else must be a top-level import.
DEFERRED = {
    # the lm-eval model imports lm_eval (slow, pulls datasets/evaluate): only evaluation needs it
    ("glue_sparse.bench.grid", "glue_sparse.lm_eval_model"): "lm_eval",
    # Ray is an optional extra, needed only by --executor ray
    ("glue_sparse.bench.grid", "glue_sparse.bench.ray_executor"): "ray",
    # report plots import matplotlib; the bench imports the report only to write it
    ("glue_sparse.bench.command", "glue_sparse.bench.report"): "matplotlib",
    # the start-up hook (imported in every Python process) defers everything until lm_eval is imported
    ("glue_sparse_tasks.lm_eval_hook", "glue_sparse_tasks"): "lm_eval",
    # fine-tuning options read the method's numbers when a config resolves, so `finetune --help` loads no torch
    ("glue_sparse.finetune.options", "sparse_models"): "torch",
    # ONNX Runtime is an optional extra (glue-sparse[onnx]): only an exported ONNX folder loads it
    ("sparse_models.checkpoints", "sparse_models.deploy.onnx_classifier"): "onnxruntime",
    # predict from lm-eval samples needs neither torch nor a model; only --run loads the classifiers
    ("glue_sparse.predict.run", "glue_sparse.predict.classifier"): "torch",
    # each command module builds its flags from its room's light options module and imports the room's
    # work in run() (for `eval`, lm-eval's CLI)
    **{(f"glue_sparse.{room}.{command}", f"glue_sparse.{room}"): "torch"
       for room in ROOMS for command in ("command", "report_command")},
}


def module_files() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def layer_of(module: str) -> int:
    return next(layer for prefix, layer in LAYERS if module == prefix or module.startswith(prefix + "."))


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, bool, int, bool]]:
    """(imported module, at top level, line, named in the statement) for every import of one of our
    modules. ``from a import b`` counts as importing ``a.b`` when that is a module. Importing ``a.b.c``
    from outside package ``a.b`` also runs ``a.b``'s ``__init__``, so that counts as an import of
    ``a.b`` too."""
    tree = ast.parse(path.read_text(), str(path))
    top_level = {id(node) for node in tree.body}
    for node in tree.body:  # imports guarded by `if TYPE_CHECKING:` / try at module level are top level too
        if isinstance(node, (ast.If, ast.Try)):
            top_level.update(id(child) for child in ast.walk(node))
    package = _package_of(module, path)
    found = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if not target or target == module:
                continue
            found.append((target, id(node) in top_level, node.lineno, True))
            chain = target.split(".")
            for i in range(1, len(chain)):  # enclosing packages whose __init__ runs first
                prefix = ".".join(chain[:i])
                if prefix in modules and prefix != module and not module.startswith(prefix + "."):
                    found.append((prefix, id(node) in top_level, node.lineno, False))
    return found


def import_graph() -> tuple[dict[str, set[str]], list[str]]:
    modules = module_files()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    problems = []
    for module, path in modules.items():
        for target, top, line, named in imports_of(module, path, modules):
            graph[module].add(target)
            where = f"{path.relative_to(ROOT)}:{line}"
            if layer_of(target) > layer_of(module):
                problems.append(f"upward import: {module} ({LAYER_NAMES[layer_of(module)]}) imports {target} "
                                f"({LAYER_NAMES[layer_of(target)]}) at {where}")
            if named and not top and layer_of(target) <= layer_of(module):
                if not any(module == m and (target == t or target.startswith(t + ".")) for m, t in DEFERRED):
                    problems.append(f"function-level import of our own module: {module} imports {target} at "
                                    f"{where}; import it at the top (or list it in DEFERRED with the heavy "
                                    "dependency it avoids)")
    return graph, problems


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_imports_go_downward_and_are_top_level():
    _, problems = import_graph()
    assert not problems, "\n".join(problems)


def test_no_import_cycle():
    graph, _ = import_graph()
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_checker_catches_an_upward_import_and_a_cycle(tmp_path, monkeypatch):
    """The checks above can fail: an upward import and a two-module cycle planted in a copy are named."""
    import shutil

    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package)
    scoring = tmp_path / "glue_sparse_tasks" / "scoring.py"
    scoring.write_text(scoring.read_text() + "\nfrom sparse_models.gates import keep_penalty  # planted\n")
    gates = tmp_path / "sparse_models" / "gates.py"
    gates.write_text(gates.read_text() + "\nfrom glue_sparse_tasks.scoring import primary_metric  # planted\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    graph, problems = import_graph()
    assert any("upward import: glue_sparse_tasks.scoring (GLUE evaluation) imports sparse_models.gates"
               in p for p in problems), problems
    cycle = find_cycle(graph)
    assert cycle is not None and "sparse_models.gates" in cycle and "glue_sparse_tasks.scoring" in cycle


def test_glue_evaluation_layer_imports_nothing_from_the_method():
    """`import glue_sparse_tasks` (and its scoring and data modules) loads no module of the layers above."""
    code = ("import sys, glue_sparse_tasks, glue_sparse_tasks.scoring, glue_sparse_tasks.data; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sparse_models', 'glue_sparse')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stdout


@pytest.mark.parametrize("package", ["glue_sparse_tasks", "sparse_models", "glue_sparse", "glue_sparse.lm_eval_model",
                                     "glue_sparse.common", "glue_sparse.cli", "sparse_models.sparse_gates",
                                     *(f"glue_sparse.{room}" for room in ROOMS)])
def test_every_package_says_which_layer_it_is(package):
    path = ROOT / package.replace(".", "/") / "__init__.py"
    doc = ast.get_docstring(ast.parse(path.read_text()))
    assert doc and any(word in doc.lower() for word in ("layer", "peft method")), f"{path}: no layer docstring"


def room_of(module: str) -> str | None:
    """The workflow room a module of ``glue_sparse`` lives in (``common`` for the shared room), else None."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "glue_sparse" and parts[1] in (*ROOMS, "common") else None


def room_problems(graph: dict[str, set[str]]) -> list[str]:
    """Imports that cross rooms other than along ``BUILT_ON``, a shared room that imports a workflow, an
    ``options`` module that imports beyond options, and an import of a room's command module from outside
    the CLI."""
    problems = []
    for module, targets in graph.items():
        room = room_of(module)
        for target in targets:
            other = room_of(target)
            if target == f"glue_sparse.{other}":  # a room package's __init__: a docstring only
                continue
            if target.rsplit(".", 1)[-1] in ("command", "report_command") and not module.startswith("glue_sparse.cli"):
                problems.append(f"{module} imports the command module {target}: only the CLI registry names it")
            if target.rsplit(".", 1)[-1] == "run" and other is not None and other != room:
                problems.append(f"{module} imports {target}, another workflow's run.py: a command's work is no "
                                "library; move what is shared to a named module (glue_sparse/common, the method "
                                "core, or a library module of that room)")
            if room is None or other is None or other == room:
                if room and other == room and module.endswith(".options") and not target.endswith(".options"):
                    problems.append(f"{module} imports {target}: options import only options (options <- run <- "
                                    "command)")
                continue
            if room == "common":
                problems.append(f"the shared room's {module} imports the workflow module {target}")
            elif other != "common" and other not in BUILT_ON.get(room, ()):
                problems.append(f"room {room} imports room {other} ({module} -> {target}); add the edge to BUILT_ON "
                                "and docs/architecture.md if {room} is built on {other}, else move the shared part "
                                "to glue_sparse/common or the method core")
            elif module.endswith(".options") and other != "common" and not target.endswith(".options"):
                problems.append(f"{module} imports {target}: options import only options")
    return problems


def test_rooms_import_only_their_own_the_shared_room_and_what_they_are_built_on():
    graph, _ = import_graph()
    assert not (problems := room_problems(graph)), "\n".join(problems)


def test_room_checker_catches_a_crossing_and_an_options_module_importing_run():
    graph, _ = import_graph()
    planted = {k: set(v) for k, v in graph.items()}
    planted["glue_sparse.finetune.run"].add("glue_sparse.speed.run")
    planted["glue_sparse.speed.options"].add("glue_sparse.speed.run")
    planted["glue_sparse.common.packaged"].add("glue_sparse.finetune.options")
    planted["glue_sparse.demo.run"].add("glue_sparse.bench.run")
    problems = "\n".join(room_problems(planted))
    assert "glue_sparse.demo.run imports glue_sparse.bench.run, another workflow's run.py" in problems
    assert "room finetune imports room speed" in problems
    assert "glue_sparse.speed.options imports glue_sparse.speed.run" in problems
    assert "shared room's glue_sparse.common.packaged imports" in problems


@pytest.mark.parametrize("room", ROOMS)
def test_every_room_has_the_same_files_for_the_same_jobs(room):
    """Issue #52: options.py (the dataclasses) and command.py (the subcommand) in every room, as transformers
    has configuration_*.py and modeling_*.py in every model folder; ROOMS lists every folder there is."""
    folder = ROOT / "glue_sparse" / room
    assert (folder / "options.py").is_file() and (folder / "command.py").is_file(), f"{folder}: options/command?"
    known = {*ROOMS, "common", "cli", "lm_eval_model"}
    folders = {p.name for p in (ROOT / "glue_sparse").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == known, f"folders {sorted(folders - known)} are not listed in ROOMS; {sorted(known - folders)} gone"


def test_options_modules_import_no_ml_library():
    """Every room's options imports none of torch, transformers, lm_eval, datasets (so `--help` is instant)."""
    modules = [f"glue_sparse.{room}.options" for room in ROOMS]
    code = (f"import sys; import {', '.join(modules)}; "
            "print(sorted(m for m in ('torch', 'transformers', 'lm_eval', 'datasets', 'evaluate') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stdout


def test_no_folder_over_15_modules_and_no_module_over_400_lines():
    """Issue #52: each folder of the package holds at most 15 modules, each at most 400 lines, and (#39) no
    function over 80 lines."""
    for package in ("glue_sparse", "sparse_models", "glue_sparse_tasks"):
        for folder in [ROOT / package, *(p for p in (ROOT / package).rglob("*") if p.is_dir())]:
            modules = sorted(folder.glob("*.py"))
            assert len(modules) <= 15, f"{folder.relative_to(ROOT)}: {len(modules)} modules"
            for path in modules:
                text = path.read_text()
                assert len(text.splitlines()) <= 400, f"{path.relative_to(ROOT)}: {len(text.splitlines())} lines"
                if package != "glue_sparse":
                    continue
                for node in ast.walk(ast.parse(text)):
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        length = node.end_lineno - node.lineno + 1
                        assert length <= 80, f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length} lines"


def _defined_names(path: Path) -> set[str]:
    """What a module itself defines at top level (functions, classes, assigned names, also under if/try)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        scope = ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else [node]
        for item in scope:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(item.name)
            elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                names |= {x.id for t in targets for x in ast.walk(t) if isinstance(x, ast.Name)}
    return names


def test_every_import_names_the_module_that_defines_it():
    """Issue #52: no internal 'old home' re-exports. ``from a.b import name`` must name the module that
    defines ``name`` (a package's ``__init__`` may re-export: that is its job), in the package, the tests
    and the benchmarks alike."""
    modules = {m: p for m, p in module_files().items() if p.name != "__init__.py"}
    problems = []
    sources = [*modules.values(), *(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]
    defined: dict[str, set[str]] = {}
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in modules:
                names = defined.setdefault(node.module, _defined_names(modules[node.module]))
                missing = [a.name for a in node.names if a.name not in names
                           and f"{node.module}.{a.name}" not in module_files()]
                if missing:
                    problems.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.module} does not define {missing}")
    assert not problems, "\n".join(problems)
