"""The contract (assignments/course.toml and each assignment.toml) is the single source: its
pages are generated from it, and the stubs, the reference and the mistake tables agree with it."""

from __future__ import annotations

import ast
import shutil
from importlib import import_module

import pytest

from grader.core.assignment import Assignment, AssignmentError, Part
from grader.core.hints import Mistake
from grader.course.pages import Course, stale_pages
from reference import as_submission, module_for
from tests.conftest import ROOT

COURSE = Course.load(ROOT)


@pytest.fixture(params=COURSE.assignments, ids=lambda assignment: f"a{assignment.id}")
def assignment(request) -> Assignment:
    return request.param


def parameters(arguments: ast.arguments, *, method: bool = False) -> str:
    """Names, kinds and defaults as Python writes them, annotations left out ("x, dim=-1")."""
    arguments = ast.arguments(
        posonlyargs=[ast.arg(a.arg) for a in arguments.posonlyargs],
        args=[ast.arg(a.arg) for a in arguments.args][1 if method else 0:],
        vararg=arguments.vararg and ast.arg(arguments.vararg.arg),
        kwonlyargs=[ast.arg(a.arg) for a in arguments.kwonlyargs], kw_defaults=arguments.kw_defaults,
        kwarg=arguments.kwarg and ast.arg(arguments.kwarg.arg), defaults=arguments.defaults)
    return ast.unparse(arguments)


def contract_parameters(signature: str) -> str:
    return parameters(ast.parse(f"def {signature}: pass").body[0].args)


def signatures_in(source: str) -> dict[str, str]:
    """Each top-level function's parameters, and each class's __init__ and methods' (self left
    out) as "Class.method"; the last definition of a name wins, as when the module runs."""
    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = parameters(node.args)
        elif isinstance(node, ast.ClassDef):
            for method in (n for n in node.body if isinstance(n, ast.FunctionDef)):
                name = node.name if method.name == "__init__" else f"{node.name}.{method.name}"
                found[name] = parameters(method.args, method=True)
    return found


def contract_signatures(part: Part) -> dict[str, str]:
    wanted = {part.name: contract_parameters(part.signature)}
    for method in part.methods:
        wanted[f"{part.name}.{method.partition('(')[0]}"] = contract_parameters(method)
    return wanted


def test_the_pages_are_generated_from_the_contract():
    assert stale_pages(COURSE) == [], "run: python -m grader.course"


def test_every_assignment_has_a_contract(assignment):
    assert assignment.contract and all(part.contract for part in assignment.contract)
    assert len(set(assignment.parts)) == len(assignment.parts)


@pytest.mark.parametrize("side", ["stub", "reference"])
def test_each_part_has_the_contract_signature(assignment, side):
    source = (assignment.module_path.read_text(encoding="utf-8") if side == "stub"
              else as_submission(module_for(assignment.id)))
    found = signatures_in(source)
    for part in assignment.contract:
        if part.signature is None:
            continue
        for name, wanted in contract_signatures(part).items():
            assert found.get(name) == wanted, f"{side}: {name}({found.get(name)}) is not the contract's {name}({wanted})"


def test_each_contract_mistake_is_made_by_a_mutant(assignment):
    mutants = import_module(f"reference.hidden.a{assignment.id}.mutants")
    assert set(mutants.CONTRACT_MISTAKES) == set(assignment.mistakes)
    for mistake, name in mutants.CONTRACT_MISTAKES.items():
        assert name in mutants.MUTANTS, f"{mistake!r}: no mutant {name!r}"



def names_in(tree: ast.AST) -> set[str]:
    """The names and string constants in ``tree``: what it can call a part by."""
    return {node.id if isinstance(node, ast.Name) else node.value for node in ast.walk(tree)
            if isinstance(node, ast.Name) or isinstance(node, ast.Constant) and isinstance(node.value, str)}


def test_each_part_uses_what_it_says(assignment):
    """A part's ``uses`` are parts of its assignment listed before it that its reference calls
    (a part with no stub: that its hidden tests call)."""
    definitions = {node.name: node for node in ast.parse(as_submission(module_for(assignment.id))).body
                   if isinstance(node, ast.FunctionDef | ast.ClassDef)}
    for index, part in enumerate(assignment.contract):
        assert set(part.uses) <= set(assignment.parts[:index]), f"{part.name} uses {part.uses}: not parts before it"
        if part.signature is not None:
            called = names_in(definitions[part.name])
        else:
            sources = [path.read_text(encoding="utf-8") for path in assignment.hidden_suite.glob("test_*.py")]
            called = set().union(*(names_in(ast.parse(source)) for source in sources if f'"{part.name}"' in source))
        for used in part.uses:
            assert used in called, f"{part.name} says it uses {used}, but its reference never calls it"


def test_each_priced_mistake_is_one_the_suite_names_by_the_contracts_words(assignment):
    # The rubric prices a mistake only on the evidence of a check that matched its value: the
    # suite's hint for it is a Mistake carrying the contract's words, word for word.
    named = {value.contract for value in vars(import_module(f"reference.hidden.a{assignment.id}.variants")).values()
             if isinstance(value, Mistake)}
    assert {mistake for mistake, _ in assignment.deductions} <= named


@pytest.mark.parametrize("rubric, complaint", [
    ('[rubric.deductions]\n"scores not scaled" = 3\n', "not one of the contract's mistakes"),
    ('[rubric.deductions]\n"a" = -1\n', "0 or more"),
    ('[rubric.deductions]\n"a" = true\n', "0 or more"),
    ('[rubric]\nenabled = "no"\n', "true or false"),
])
def test_a_malformed_rubric_is_refused_with_what_to_do(tmp_path, rubric, complaint):
    folder = tmp_path / "09"
    folder.mkdir()
    (folder / "assignment.toml").write_text(f'id = "09"\ntitle = "t"\nmodule = "m.py"\nmistakes = ["a"]\n{rubric}\n'
                                            '[[parts]]\nsignature = "f(x)"\ncontract = "x"\n')
    with pytest.raises(AssignmentError, match=complaint):
        Assignment.load(folder)


def test_the_rubric_is_the_assignments_own_switch_else_the_courses(tmp_path):
    def load(course: str, own: str) -> Assignment:
        (tmp_path / "course.toml").write_text(course)
        folder = tmp_path / "09"
        folder.mkdir(exist_ok=True)
        (folder / "assignment.toml").write_text(f'id = "09"\ntitle = "t"\nmodule = "m.py"\nmistakes = ["a"]\n'
                                                f'[rubric]\n{own}\n[rubric.deductions]\n"a" = 2\n'
                                                '[[parts]]\nsignature = "f(x)"\ncontract = "x"\n')
        return Assignment.load(folder)

    assert load("", "").rubric == {"a": 2.0}
    assert load("[rubric]\nenabled = false\n", "").rubric == {}
    assert load("[rubric]\nenabled = false\n", "enabled = true").rubric == {"a": 2.0}
    assert load("[rubric]\nenabled = true\n", "enabled = false").rubric == {}


def test_each_used_part_has_a_stock_part_to_stand_in_for_it(assignment):
    # Without one, a used part can never be shown to be a failing part's cause: its own mistake leads.
    used = {name for part in assignment.contract for name in part.uses}
    if not used:
        return
    assert assignment.stand_ins is not None and assignment.stand_ins.is_file(), assignment.id
    body = ast.parse(assignment.stand_ins.read_text(encoding="utf-8")).body
    defined = {node.name for node in body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    defined |= {name.id for node in body if isinstance(node, ast.Assign) for target in node.targets
                for name in (target.elts if isinstance(target, ast.Tuple) else [target]) if isinstance(name, ast.Name)}
    assert used <= defined, used - defined


def test_turning_the_rubric_off_changes_the_contracts_fingerprint(tmp_path):
    # A stored report is reused only while its fingerprint holds: the course's switch decides scores.
    from grader.core.fingerprint import Fingerprint
    from grader.engine.options import DEFAULT

    # Any of the course's assignments: this test runs in a new course's copy too (tests/test_scaffold.py).
    assignment = sorted((ROOT / "assignments").glob("[0-9][0-9]"))[0]
    shutil.copytree(assignment, tmp_path / assignment.name)
    course = tmp_path / "course.toml"
    course.write_text("[rubric]\nenabled = true\n")
    on = Fingerprint.of(Assignment.load(tmp_path / assignment.name), DEFAULT)
    course.write_text("[rubric]\nenabled = false\n")
    off = Fingerprint.of(Assignment.load(tmp_path / assignment.name), DEFAULT)
    assert off.changed(on.to_dict()) == ["contract changed"]


def test_a_stand_in_brings_no_answer_of_the_part_that_uses_it(assignment):
    # A test that passes with the stock pieces in place is charged to them: the child they are
    # sent to must not find the stock answer of the part under test beside them (01's stock
    # softmax sent with the stock scaled_dot_product_attention would let a submission's sdpa
    # hand that one's output back in the rerun and keep its points).
    from grader.core.ingest import Cell, Program
    from grader.engine.plugin import StandIns
    from grader.engine.runner import _stand_ins
    from grader.source.parsed import ParsedSource

    stand_ins = _stand_ins(assignment)
    if stand_ins is None:
        return
    for part, used in stand_ins.uses.items():
        source = stand_ins.source_for(used)
        bound = ParsedSource(Program("module", (Cell(source, "stock"),))).bound
        assert set(used) <= bound, (part, used)
        assert not {part, f"Stock{part}"} & bound, (assignment.id, part, sorted(bound))
    whole = StandIns(stand_ins.source, stand_ins.uses)
    assert len(whole.source_for(list(stand_ins.uses.values())[0])) < len(stand_ins.source)
