"""The public tests compare with data, never with code that computes the answer: the data files
beside them are generated from the reference and the hidden suites' mutants (grader.engine.public_data),
current, and read as the tests say (grader.core.public_cases)."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save, save_file

from grader.cli import EXIT_GRADER_ERROR, EXIT_OK, main
from grader.core.assignment import Assignment
from grader.core.public_cases import Cases, StaleData
from grader.engine.public_data import (
    CURRENT_ATOL,
    CURRENT_RTOL,
    PublicDataError,
    public_data,
    stale_files,
    write_public_data,
)
from tests.conftest import ASSIGNMENT_03, ASSIGNMENTS

COURSE = sorted(path.parent for path in ASSIGNMENTS.glob("*/assignment.toml"))
# What the reference computes its answers with. A public test that calls one of them carries
# code a student can copy: 03's once held the whole attention computation, 06's the loss.
COMPUTATIONS = {"softmax", "log_softmax", "cross_entropy", "kl_div", "nll_loss", "gelu", "relu", "sin", "cos", "exp",
                "sqrt", "masked_fill", "matmul", "bmm", "einsum", "linear", "layer_norm", "topk", "multinomial",
                "argmax"}


def computations(path: Path) -> list[str]:
    """Where the Python file at ``path`` computes with :data:`COMPUTATIONS` or ``@``: "line 59: softmax"."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            found.append(f"line {node.lineno}: @")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in COMPUTATIONS:
            found.append(f"line {node.lineno}: {node.func.attr}")
    return sorted(found)


@pytest.fixture
def copy_of_03(tmp_path) -> Assignment:
    """Assignment 03's folder elsewhere: its data is generated from the same reference and mutants."""
    return Assignment.load(shutil.copytree(ASSIGNMENT_03, tmp_path / "03"))


# ---- the public tests ------------------------------------------------------------------------


@pytest.mark.parametrize("folder", COURSE, ids=lambda folder: folder.name)
def test_no_public_test_computes_the_answer_it_checks(folder):
    for path in folder.glob("test_*.py"):
        assert computations(path) == [], path


def test_the_scan_finds_the_attention_computation_03s_public_tests_once_held(tmp_path):
    held = tmp_path / "test_mha.py"
    held.write_text("def attend(scale):\n"
                    "    scores = (q @ k.transpose(-2, -1) / scale).masked_fill(blocked, fill)\n"
                    "    return mha.W_o((torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(2, 5, 32))\n",
                    encoding="utf-8")
    assert computations(held) == ["line 2: @", "line 2: masked_fill", "line 3: @", "line 3: softmax"]


@pytest.mark.parametrize("folder", COURSE, ids=lambda folder: folder.name)
def test_public_data_is_current(folder):
    assert stale_files(Assignment.load(folder)) == [], f"run: grade public-data {folder}"


def test_public_data_is_small():
    sizes = {path.name: path.stat().st_size for path in ASSIGNMENTS.glob("*/test_*.safetensors")}
    assert len(sizes) >= 5 and max(sizes.values()) < 32 * 1024, sizes


# ---- generating it ---------------------------------------------------------------------------


def test_generation_gives_the_same_bytes_each_time():
    assignment = Assignment.load(ASSIGNMENT_03)
    first, second = public_data(assignment), public_data(assignment)
    assert first.keys() == {ASSIGNMENT_03 / "test_mha.safetensors"}
    assert {path: save(tensors) for path, tensors in first.items()} == \
           {path: save(tensors) for path, tensors in second.items()}


def test_inputs_are_exact_and_every_named_mistake_has_its_output():
    stored = load_file(ASSIGNMENT_03 / "test_mha.safetensors")
    x = stored["multi_head_attention/input/x"]
    assert torch.equal(x * 1024, (x * 1024).round()) and x.abs().max() <= 1  # k / 1024: the same bits everywhere
    mistakes = {name.rpartition("/")[2] for name in stored if name.startswith("multi_head_attention/mistake/")}
    assert mistakes == {"scores not scaled", "scores scaled by `d_k` instead of `sqrt(d_k)`",
                        "scores scaled by `sqrt(d_model)` instead of the head dimension",
                        "softmax over the wrong dimension", 'mask inverted (True read as "blocked")',
                        "masked scores filled with a value that is not very negative (0, `1e-15`)"}


def test_a_changed_or_unread_data_file_is_stale_and_written_again(copy_of_03):
    path = copy_of_03.directory / "test_mha.safetensors"
    original = path.read_bytes()
    tensors = load_file(path)
    # The last bits of an output may differ on another machine: that is still current.
    expected = tensors["split_heads/expected"]
    save_file({**tensors, "split_heads/expected": torch.nextafter(expected, expected + 1)}, path)
    assert stale_files(copy_of_03) == []
    save_file({**tensors, "split_heads/expected": expected + 1e-3}, path)
    orphan = copy_of_03.directory / "test_gone.safetensors"
    orphan.write_bytes(original)
    assert stale_files(copy_of_03) == [path, orphan]
    assert main(["public-data", str(copy_of_03.directory), "--check"]) == EXIT_GRADER_ERROR
    assert write_public_data(copy_of_03) == [path, orphan]
    assert not orphan.exists() and stale_files(copy_of_03) == []
    # The committed tensors again, the changed output included, but for the last bits this
    # machine's arithmetic may give its outputs (not byte for byte: the file is written here).
    rewritten = load_file(path)
    assert rewritten.keys() == tensors.keys()
    assert all(torch.allclose(rewritten[name], tensor, rtol=CURRENT_RTOL, atol=CURRENT_ATOL, equal_nan=True)
               for name, tensor in tensors.items())
    assert main(["public-data", str(copy_of_03.directory), "--check"]) == EXIT_OK


def rewrite_test(assignment: Assignment, old: str, new: str) -> None:
    test = assignment.directory / "test_mha.py"
    source = test.read_text(encoding="utf-8")
    assert source.count(old) == 1
    test.write_text(source.replace(old, new), encoding="utf-8")


def test_a_case_must_tell_each_mistake_it_names_from_the_right_output(copy_of_03):
    # The mutant that scales by sqrt(d_model) leaves split_heads as it is: the data could not tell them apart.
    rewrite_test(copy_of_03, 'mistakes=("heads split with', 'mistakes=("scores scaled by `sqrt(d_model)` instead of '
                                                            'the head dimension", "heads split with')
    with pytest.raises(PublicDataError, match="cannot tell 'scores scaled by `sqrt\\(d_model\\)`.* from the right"):
        public_data(copy_of_03)


def test_a_case_names_only_mistakes_a_mutant_makes(copy_of_03):
    rewrite_test(copy_of_03, '"scores not scaled",', '"scores not scaled", "a mistake of my own",')
    with pytest.raises(PublicDataError, match="'a mistake of my own', which no mutant makes"):
        public_data(copy_of_03)


def test_a_public_test_that_fails_on_the_reference_makes_no_data(copy_of_03):
    rewrite_test(copy_of_03, 'case.tensor("x", 2, 4, 6), 2)', 'case.tensor("x", 2, 4, 6), 4)')
    with pytest.raises(PublicDataError, match="test_split_heads_gives_each_head_its_own_features fails on the ref"):
        public_data(copy_of_03)


# ---- reading it, as a public test does ---------------------------------------------------------


@pytest.fixture
def cases(tmp_path) -> Cases:
    expected = torch.tensor([1.0, 2.0, 3.0])
    save_file({"c/input/x": torch.tensor([0.5, 0.25, 0.125]), "c/parameter/weight": torch.ones(2, 3),
               "c/expected": expected, "c/mistake/doubled": 2 * expected, "c/mistake/negated": -expected,
               "c/mistake/all nan": torch.full((3,), float("nan"))}, tmp_path / "test_x.safetensors")
    return Cases(tmp_path / "test_x.py")


MISTAKES = ("doubled", "negated", "all nan")


def test_an_output_a_mistake_gives_is_named(cases):
    case = cases["c"]
    case.expect(torch.tensor([1.0, 2.0, 3.0 + 1e-6]), mistakes=MISTAKES)  # close enough
    for output, named in ((torch.tensor([2.0, 4.0, 6.0]), "doubled"), (torch.tensor([-1.0, -2.0, -3.0]), "negated"),
                          (torch.full((3,), float("nan")), "all nan")):
        with pytest.raises(AssertionError, match=f"^mistake: {named}$"):
            case.expect(output, mistakes=MISTAKES)


def test_an_output_no_mistake_gives_fails_without_a_name(cases):
    with pytest.raises(AssertionError, match="not the expected output") as raised:
        cases["c"].expect(torch.tensor([1.0, 2.0, 4.0]), mistakes=MISTAKES)
    assert "mistake" not in str(raised.value)
    with pytest.raises(AssertionError, match=r"shape \(2,\), expected \(3,\)"):
        cases["c"].expect(torch.tensor([1.0, 2.0]), mistakes=MISTAKES)
    with pytest.raises(AssertionError, match="expected a tensor, got tuple"):
        cases["c"].expect((torch.tensor([1.0, 2.0, 3.0]),), mistakes=MISTAKES)


def test_inputs_are_copies_and_parameters_load_by_the_contracts_names(cases):
    case = cases["c"]
    x = case.tensor("x", 3)
    x.zero_()  # the student's code may change its input in place
    assert torch.equal(case.tensor("x", 3), torch.tensor([0.5, 0.25, 0.125]))
    assert torch.equal(case.load(torch.nn.Linear(3, 2, bias=False)).weight, torch.ones(2, 3))
    with pytest.raises(AssertionError, match="Linear's parameters are bias, weight; the contract's are weight"):
        case.load(torch.nn.Linear(3, 2))


def test_data_older_than_the_test_says_so(cases, tmp_path):
    with pytest.raises(StaleData, match="outputs of other mistakes"):
        cases["c"].expect(torch.tensor([1.0, 2.0, 3.0]), mistakes=("doubled",))
    with pytest.raises(StaleData, match="shape"):
        cases["c"].tensor("x", 4)
    with pytest.raises(StaleData, match="no 'other/expected'"):
        cases["other"].expect(torch.tensor([1.0]))
    with pytest.raises(StaleData, match="test_y.safetensors is missing"):
        Cases(tmp_path / "test_y.py")["c"]
