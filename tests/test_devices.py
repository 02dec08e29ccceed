"""``--device`` and ``--precision`` mean the same in every command (issue #49, item 3): one resolver,
``sparse_models.runtime.devices``, one declaration, ``DeviceOptions``, and one-line refusals before a model loads."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from glue_sparse.cli.main import build_parser, main
from glue_sparse.common.option_fields import DeviceOptions
from glue_sparse_tasks.errors import UserInputError
from sparse_models.runtime.devices import autocast, resolve_device, resolve_precision, trainer_arguments

NO_GPU = not torch.cuda.is_available()


def test_every_command_declares_device_and_precision_alike():
    assert {f.name: f.default for f in dataclasses.fields(DeviceOptions)} == {"device": "auto", "precision": "auto"}


@pytest.mark.skipif(not NO_GPU, reason="checks the CPU-only answers")
def test_auto_is_the_cpu_in_fp32_without_a_gpu_and_cuda_is_refused_in_one_line():
    assert resolve_device("auto") == torch.device("cpu") == resolve_device("cpu")
    assert resolve_precision("auto", torch.device("cpu")) == "fp32"
    assert resolve_precision("bf16", torch.device("cpu")) == "bf16"
    assert trainer_arguments("auto", "auto") == {"use_cpu": True, "bf16": False, "fp16": False,
                                                 "dataloader_pin_memory": False}
    with pytest.raises(UserInputError, match="no such CUDA device here"):
        resolve_device("cuda")
    with pytest.raises(UserInputError, match="needs a CUDA device"):
        resolve_precision("fp16", torch.device("cpu"))


@pytest.mark.parametrize("name", ["tpu", "cuda:x", ""])
def test_a_device_that_is_not_one_is_refused(name):
    with pytest.raises(UserInputError, match="expected auto, cpu, cuda or cuda:N"):
        resolve_device(name)


def test_an_unknown_precision_is_refused():
    with pytest.raises(UserInputError, match="expected one of auto, fp32, bf16, fp16"):
        resolve_precision("int8", torch.device("cpu"))


def test_bf16_autocast_changes_the_matmul_type_and_fp32_does_not():
    a = torch.randn(4, 4)
    with autocast(torch.device("cpu"), "bf16"):
        assert (a @ a).dtype == torch.bfloat16
    with autocast(torch.device("cpu"), "fp32"):
        assert (a @ a).dtype == torch.float32


@pytest.mark.parametrize("command", ["finetune", "perplexity", "posttrain", "pretrain", "speed"])
def test_every_command_that_trains_or_scores_has_both_flags_or_device(command):
    parser = build_parser([command])
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    flags = {s for a in sub._actions for s in a.option_strings}
    assert "--device" in flags
    if command != "speed":  # speed casts the weights instead: --dtype
        assert "--precision" in flags


@pytest.mark.skipif(not NO_GPU, reason="a GPU would accept the device")
@pytest.mark.parametrize("argv, message", [
    (["perplexity", "--device", "cuda", "--model", "nowhere"], "--device cuda: no such CUDA device here"),
    (["finetune", "--tasks", "rte", "--output", "OUT", "--precision", "fp16", "--model", "nowhere"],
     "--precision fp16 needs a CUDA device"),
    (["pretrain", "--out_dir", "OUT", "--device", "cuda:1"], "--device cuda:1: no such CUDA device here"),
    (["speed", "--device", "tpu"], "--device 'tpu': expected auto, cpu, cuda or cuda:N"),
    (["posttrain", "--out_dir", "OUT", "--precision", "fp16"], "--precision fp16 needs a CUDA device"),
    (["posttrain", "--out_dir", "OUT", "--method", "flap", "--device", "cuda"], "--device cuda: no such CUDA"),
])
def test_a_device_the_machine_lacks_is_one_line_and_exit_2_before_a_model_loads(argv, message, tmp_path,
                                                                                  glue_fixture_dir, capsys):
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    if argv[0] == "finetune":
        argv += ["--data-dir", str(glue_fixture_dir)]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
