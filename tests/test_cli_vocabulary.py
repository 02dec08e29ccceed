"""One spelling per concept (issue #63): every subcommand's parser, walked here, shows only the vocabulary's
spellings, dashed; every option has help, every default is a value, switches render as switches and list
flags take commas; old spellings still work with a one-line notice; ``glue-sparse --version`` answers."""

from __future__ import annotations

import argparse
import re

import pytest

from glue_sparse.cli.commands import SUBCOMMANDS
from glue_sparse.cli.flags import CommaList, Switch
from glue_sparse.cli.main import build_parser, main
from glue_sparse.cli.vocabulary import VOCABULARY, deprecated_spellings, normalise

COMMANDS = sorted(SUBCOMMANDS)  # eval passes lm-eval's own flags through and says so in its help
#: environment variables help may name (they are settings a user sets, not defaults)
ENVIRONMENT = {"CUDA_VISIBLE_DEVICES", "GLUE_SPARSE_DATA_DIR", "GLUE_SPARSE_CACHE", "HF_HUB_OFFLINE"}
SYNONYMS = {synonym: canonical for canonical, (_, synonyms) in VOCABULARY.items() for synonym in synonyms}


def _sub(command: str) -> argparse.ArgumentParser:
    parser = build_parser([command])
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_speaks_the_vocabulary(command):
    sub = _sub(command)
    problems = []
    for action in sub._actions:
        if isinstance(action, argparse._HelpAction) or not action.option_strings:
            continue
        shown = action.option_strings
        for flag in shown:
            if "_" in flag:
                problems.append(f"{flag}: shown with an underscore (the dashed spelling is shown)")
            if flag in SYNONYMS:
                problems.append(f"{flag}: say {SYNONYMS[flag]}")
        if not (action.help or "").strip():
            problems.append(f"{shown[0]}: no help")
        if action.nargs in ("+", "*") and not isinstance(action, CommaList):
            problems.append(f"{shown[0]}: a list flag that does not take comma-separated values")
        if isinstance(action.default, bool) and action.option_strings[0] != "--version" and not isinstance(
                action, (Switch, argparse._StoreTrueAction, argparse._StoreFalseAction)):
            problems.append(f"{shown[0]}: a true/false flag that is no switch")
    assert not problems, f"glue-sparse {command}: " + "; ".join(problems)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_tells_the_truth(command):
    text = _sub(command).format_help()
    assert "(default )" not in text and "%%" not in text
    assert not re.search(r"--[a-z-]+ \[[A-Z_]+\]", text), "a switch rendered as taking a value"
    names = {a.dest.upper() for a in _sub(command)._actions} | {a.metavar for a in _sub(command)._actions if a.metavar}
    constants = [c for c in re.findall(r"(?<![$\w])[A-Z][A-Z0-9]*_[A-Z0-9_]+\b", text)
                 if c not in names and c not in ENVIRONMENT]
    assert not constants, f"defaults named by constants instead of values: {constants}"
    for action in _sub(command)._actions:
        if action.default not in (None, False, True, [], argparse.SUPPRESS) and action.help and \
                "default" not in action.help:
            pytest.fail(f"glue-sparse {command} {action.option_strings[0]}: its default {action.default!r} is not said")


def test_version(capsys):
    import glue_sparse_tasks

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"glue-sparse {glue_sparse_tasks.__version__}"


@pytest.mark.parametrize("command, old, new", [
    ("report", ["--out", "x", "--results", "r"], ["--output", "x", "--results", "r"]),
    ("pretrain-report", ["--out", "x", "--runs", "a"], ["--output", "x", "--runs", "a"]),
    ("posttrain", ["--out_dir", "x"], ["--output", "x"]),
    ("pretrain", ["--out-dir", "x"], ["--output", "x"]),
    ("speed", ["--removed", "0.4", "--dtype", "bfloat16"], ["--target-removal", "0.4", "--precision", "bf16"]),
    ("finetune", ["--tasks", "rte", "--output", "o", "--learning-rate", "0.01", "--data_dir", "d"],
     ["--tasks", "rte", "--output", "o", "--lr", "0.01", "--data-dir", "d"]),
    ("bench", ["--output", "o", "--max_steps", "3", "--data_dir", "d"], ["--output", "o", "--max-steps", "3",
                                                                        "--data-dir", "d"]),
])
def test_old_spellings_still_work_with_a_one_line_notice(command, old, new, capsys):
    parser = build_parser([command])
    read_old = normalise([command, *old], parser, command)
    notices = capsys.readouterr().err.strip().splitlines()
    assert read_old == [command, *new]
    renamed = [o for o in old if o.startswith("--") and o.replace("_", "-") not in new]
    assert len(notices) == len(renamed) and all("goes in glue-sparse" in n for n in notices)
    assert vars(parser.parse_args(read_old)) == vars(parser.parse_args([command, *new]))


def test_every_old_spelling_is_today_a_flag_of_its_command():
    for command in COMMANDS:
        sub = _sub(command)
        shown = {s for a in sub._actions for s in a.option_strings}
        for old, (new, _) in deprecated_spellings(sub).items():
            assert new in shown and old not in shown, (command, old, new)


def test_list_flags_take_commas():
    parser = build_parser(["report"])
    args = parser.parse_args(["report", "--results", "a.jsonl,b.jsonl", "c.jsonl", "--output", "o"])
    assert args.results == ["a.jsonl", "b.jsonl", "c.jsonl"]
    args = build_parser(["speed"]).parse_args(["speed", "--adapter", "x,y"])
    assert args.adapter == ["x", "y"]


def test_the_main_job_stops_before_installing_when_no_glue_data_answers(tmp_path):
    """A clone with no ../shared, no $GLUE_SPARSE_DATA_DIR and no Hub stops in one line naming the three, before
    the install (its set-up step is replaced by one that would leave a mark)."""
    import os
    import shutil
    import subprocess
    from pathlib import Path

    clone = tmp_path / "nowhere" / "clone"
    (clone / "scripts").mkdir(parents=True)
    shutil.copy(Path(__file__).resolve().parents[1] / "scripts" / "main.sh", clone / "scripts" / "main.sh")
    (clone / "scripts" / "setup.sh").write_text(f"touch {tmp_path / 'installed'}\n")
    env = {k: v for k, v in os.environ.items() if k != "GLUE_SPARSE_DATA_DIR"}
    env["https_proxy"] = env["HTTPS_PROXY"] = "http://127.0.0.1:9"  # no Hub here, whatever this machine reaches
    done = subprocess.run(["bash", str(clone / "scripts" / "main.sh")], capture_output=True, text=True, env=env,
                          timeout=60)
    assert done.returncode == 2 and not (tmp_path / "installed").exists()
    line = done.stderr.strip()
    assert "\n" not in line and all(w in line for w in ("GLUE_SPARSE_DATA_DIR", "../shared/data/glue", "Hub"))
    env["GLUE_SPARSE_DATA_DIR"] = str(tmp_path / "missing")
    done = subprocess.run(["bash", str(clone / "scripts" / "main.sh")], capture_output=True, text=True, env=env,
                          timeout=60)
    assert done.returncode == 2 and "is not a folder" in done.stderr and not (tmp_path / "installed").exists()


def test_progress_bars_show_on_a_terminal_and_hide_under_quiet_or_a_pipe(monkeypatch):
    import sys

    from glue_sparse_tasks.console import QUIET_BARS_ENV, configure_console, progress

    class Terminal:
        def isatty(self) -> bool:
            return True

        def write(self, text: str) -> int:
            return len(text)

        def flush(self) -> None:
            pass

    monkeypatch.setattr(sys, "stderr", Terminal())
    monkeypatch.setenv(QUIET_BARS_ENV, "0")
    assert not progress(range(3)).disable  # a terminal: shown
    configure_console(quiet=True)
    assert progress(range(3)).disable  # --quiet
    monkeypatch.setenv(QUIET_BARS_ENV, "0")
    monkeypatch.setattr(sys, "stderr", open(__file__))  # not a terminal
    assert progress(range(3)).disable
