"""The lazy start-up hook, the tasks_dir helper and what the built wheel ships."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import REPO

from glue_sparse_tasks import TASKS_DIR


def _python(code: str, **env) -> str:
    full_env = {k: v for k, v in os.environ.items() if k != "GLUE_SPARSE_NO_HOOK"}
    full_env.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env=full_env, cwd="/").stdout.strip()


def test_hook_is_installed_and_imports_nothing_heavy():
    out = _python("import sys; print(any(type(f).__name__ == '_Finder' for f in sys.meta_path),"
                  " 'lm_eval' in sys.modules, 'torch' in sys.modules, 'datasets' in sys.modules)")
    assert out == "True False False False"


def test_hook_can_be_switched_off():
    out = _python("import sys; print('glue_sparse_tasks' in sys.modules)", GLUE_SPARSE_NO_HOOK="1")
    assert out == "False"


def test_task_manager_indexes_our_folder_and_keeps_builtin_models():
    code = (
        "from lm_eval.tasks.manager import TaskManager\n"
        "tm = TaskManager(include_defaults=False)\n"
        "print('glue_sparse' in tm.all_groups, 'glue_sparse_stsb' in tm.all_subtasks)\n"
        "from lm_eval.api.registry import get_model\n"
        "print(get_model('hf').__name__)\n"
    )
    assert _python(code).splitlines() == ["True True", "HFLM"]


def test_tasks_dir_module_prints_folder():
    out = _python("import runpy; runpy.run_module('glue_sparse_tasks.tasks_dir', run_name='__main__')")
    assert out == TASKS_DIR and Path(out, "glue_sparse.yaml").is_file()


def test_wheel_ships_metric_hook_and_tasks(tmp_path):
    pytest.importorskip("hatchling")
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                    str(tmp_path), str(REPO)], check=True, capture_output=True)
    wheel = next(tmp_path.glob("glue_sparse-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in ("glue_sparse_lm_eval_hook.pth",
                     "glue_sparse_tasks/_metrics/glue_average/glue_average.py",
                     "glue_sparse_tasks/_metrics/glue_average/README.md",
                     "glue_sparse_tasks/tasks/glue_sparse.yaml",
                     "glue_sparse_tasks/tasks/_glue_sparse_template_yaml",
                     "sparse_models/__init__.py"):
        assert required in names, required
    entry_points = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "[lm_eval.models]" in entry_points and "glue-sparse = glue_sparse.cli.main:main" in entry_points
    # The installed layout resolves the metric inside the package and loads it offline.
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = ("import glue_sparse_tasks, evaluate\n"
            "m = evaluate.load(glue_sparse_tasks.GLUE_AVERAGE_METRIC)\n"
            "print(glue_sparse_tasks.GLUE_AVERAGE_METRIC)\n"
            "print(m.compute(predictions=[1], references=[1], tasks=['rte'])['rte_accuracy'])")
    out = _python(code, PYTHONPATH=str(site), GLUE_SPARSE_NO_HOOK="1", HF_HUB_OFFLINE="1").splitlines()
    assert out == [str(site / "glue_sparse_tasks" / "_metrics" / "glue_average"), "1.0"]


@pytest.mark.parametrize("leftover", [False, True], ids=["no-package", "deleted-editable-source"])
def test_hook_line_is_silent_where_the_package_is_not_importable(tmp_path, leftover):
    """pip's isolated build interpreters and half-uninstalled sites read our ``.pth`` without the
    package on their path; the line must then do nothing instead of printing a traceback. An editable
    install whose source tree was deleted leaves the wheel's force-included metric folder in
    site-packages, so ``glue_sparse_tasks`` is still found, as a namespace package without the hook."""
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    if leftover:
        (site_dir / "glue_sparse_tasks" / "_metrics" / "glue_average").mkdir(parents=True)
    (site_dir / "hook.pth").write_text((REPO / "glue_sparse_lm_eval_hook.pth").read_text())
    code = (f"import site, importlib.util; site.addsitedir({str(site_dir)!r}); "
            "print(importlib.util.find_spec('glue_sparse_tasks') is None)")
    done = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, check=True)
    assert done.stdout.strip() == str(not leftover) and done.stderr == ""
