"""Hostile values: what the student's process returns is checked before the grader computes with it.

Part of the adversarial suite (see ``tests/test_adversarial.py``). Every value that comes
back from the student's child process is the student's choice. Before the trusted side
checked them, each attack below cost the grader, not the student:

- *sized by a student value*: one sampled token id of 3,000,000 made 07's distribution
  check count 3,000,000 bins (2 GiB and 26 s in the suite process; an id of 150,000,000,
  22 GiB);
- *broadcast against the grader's tensors*: a reply of a few MB shaped (N, 1, 1, 1) was
  combined with the expected gradient, a mask or another piece's output before any shape
  check, and grew a thousandfold;
- *a value outside the contract*: a token id of -1, a ``context_length`` that is a tensor or
  a 0-dim tensor where the suite read ``shape[-1]`` made trusted code raise, so the student
  chose a grader error (0 on Gradescope, "not your fault", regraded by every batch).

Each attack is graded with the suite process's address space bounded a little above what
grading needs, so a regression fails the test (a grader error) instead of the machine: it
must be graded, and the value must fail its check as the student's failure, with a message
that names it.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from reference import as_submission
from tests.conftest import ASSIGNMENTS, assert_valid, mutant, part

pytestmark = pytest.mark.slow
REFERENCE_01 = as_submission("attention")
REFERENCE_05 = as_submission("layers")
REFERENCE_06 = as_submission("training")
REFERENCE_07 = as_submission("gpt")
# Room for a suite process to grade (its own growth after the fork is ~0.2 GiB), far below
# what the attacks below cost an unchecked grader (2 to 22 GiB).
SUITE_HEADROOM_BYTES = 1536 * 2**20
# A reply of 60 MB, under the 64 MiB the grader accepts.
HUGE = 15_000_000


def _address_space() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("/proc/self/status has no VmSize")


@contextmanager
def suite_memory_bounded():
    """Processes forked within the block (the suite process) may grow their address space by
    at most SUITE_HEADROOM_BYTES over this process's; an allocation past it fails there."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (_address_space() + SUITE_HEADROOM_BYTES, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.fixture
def graded(grade_source):
    """graded(source, assignment) -> the report, graded with the suite process's memory
    bounded; it must be graded (never a grader error) and valid."""
    def run(source: str, assignment: str):
        with suite_memory_bounded():
            report = grade_source(source, assignment=ASSIGNMENTS / assignment)
        assert_valid(report)
        assert report.status == "graded", report.error
        return report
    return run


def failed_tests(report, part_id: str) -> dict[str, str]:
    return {test.name: test.message for test in part(report, part_id).tests if test.outcome != "passed"}


def test_the_honest_references_are_graded_in_full_within_the_bound(graded):
    for assignment, source in (("01", REFERENCE_01), ("07", REFERENCE_07)):
        report = graded(source, assignment)
        assert report.score == report.max_score, [(p.id, p.hint) for p in report.parts if p.score < p.max_score]


# ---- ids that size what the grader allocates, or make it raise -----------------------------

@pytest.mark.parametrize("token_id", [-1, 3_000_000, 150_000_000])
def test_a_sampled_token_id_outside_the_vocabulary_fails_generate_with_a_hint(graded, token_id):
    source = mutant(REFERENCE_07, "        idx = torch.cat([idx, next_token], dim=1)\n    return idx\n",
                    f"        idx = torch.cat([idx, next_token], dim=1)\n    idx[0, -1] = {token_id}\n    return idx\n")
    report = graded(source, "07")
    generate = part(report, "generate")
    assert generate.score < generate.max_score
    assert f"token id {token_id} " in generate.hint or any(
        f"token id {token_id} " in message for message in failed_tests(report, "generate").values())
    assert "outside the vocabulary (0..5)" in next(iter(failed_tests(report, "generate").values()))
    assert generate.hint == "token ids index the vocabulary: each is in 0..5"
    assert all(p.score == p.max_score for p in report.parts if p.id != "generate")


# ---- replies shaped to broadcast against the grader's tensors ------------------------------

def peak_memory_of_grading(source: str, assignment: str, tmp_path: Path) -> tuple[dict, int]:
    """(the report, the peak resident memory of the grading processes in bytes): ``grade`` run
    in a process of its own, whose address space is bounded (4 GiB) for the machine's sake.
    Its peak is the largest of it and the processes it waited for (the suite process)."""
    submission, report = tmp_path / "submission.py", tmp_path / "report.json"
    submission.write_text(source)

    def bounded() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, resource.getrlimit(resource.RLIMIT_AS)[1]))

    process = subprocess.Popen([str(Path(sys.executable).parent / "grade"), str(ASSIGNMENTS / assignment),
                                "--submission", str(submission), "--json", str(report), "--quiet"],
                               preexec_fn=bounded)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    assert report.exists(), f"grade exited with {process.returncode} and wrote no report"
    return json.loads(report.read_text()), usage.ru_maxrss * 1024


def test_scores_that_broadcast_against_the_mask_are_not_used_by_01s_own_pieces_check(tmp_path):
    # attention_scores returns a (HUGE, 1, 1, 1) tensor; the attention computes its own scores
    # and doubles its output, so the grader tries the student's own pieces as the explanation,
    # which once masked the scores (HUGE x 25 values) and sent them to the student's softmax.
    # That check catches the allocation error, so only the memory it took shows it.
    source = mutant(REFERENCE_01, "    return query @ keys.transpose(-2, -1)\n",
                    f"    return query.new_zeros({HUGE}, 1, 1, 1)\n")
    source = mutant(source, "    scores = attention_scores(q, k) / math.sqrt(d_k)",
                    "    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)")
    source = mutant(source, "    return weights @ v, weights  #", "    return 2 * (weights @ v), weights  #")
    report, peak = peak_memory_of_grading(source, "01", tmp_path)
    assert report["status"] == "graded", report["error"]
    assert peak < 2**30, f"grading took {peak / 2**30:.1f} GiB"
    parts = {p["id"]: p for p in report["parts"]}
    assert any(t["name"] == "test_attention_scores_values" and t["outcome"] == "failed"
               for t in parts["attention_scores"]["tests"])
    assert any(t["name"] == "test_sdpa_causal_mask" and t["outcome"] == "failed"
               for t in parts["scaled_dot_product_attention"]["tests"])



# A piece of 05 and 07 returns what the contract says when its layer or block calls it (a flag
# set around the call) and a (HUGE, 1, 1, 1) tensor when the grader calls it itself, as a black
# box of part isolation; the layer or block is wrong, so the grader tries its wiring of them.
FLAG = "_INSIDE = [0]\n\n\n"


def _huge_unless_inside(source: str, first_line: str) -> str:
    """``source`` whose forward starting with ``first_line`` returns HUGE zeros outside the flag."""
    return mutant(source, first_line, f"        if not _INSIDE[0]:\n            return x.new_zeros({HUGE}, 1, 1, 1)\n"
                                      f"{first_line}")


def _inside(source: str, line: str, new_line: str) -> str:
    """``source`` with ``line`` replaced by ``new_line`` run with the flag set."""
    return mutant(source, line, f"        _INSIDE[0] += 1\n        try:\n    {new_line}"
                                f"        finally:\n            _INSIDE[0] -= 1\n")


def test_a_piece_that_broadcasts_when_called_alone_is_unusable_in_05s_decoder_layer(graded):
    source = _huge_unless_inside(REFERENCE_05, "        return self.linear2(self.dropout(torch.relu(self.linear1(x))))")
    ffn_line = "        return self.norm3(x + self.dropout(self.ffn(x)))  # (B, T, d_model)\n"
    source = FLAG + _inside(source, ffn_line, "        return self.norm3(x + 2 * self.dropout(self.ffn(x)))\n")
    report = graded(source, "05")
    failed = failed_tests(report, "DecoderLayer")
    assert "test_decoder_layer_values" in failed
    hints = {test.hint for test in part(report, "DecoderLayer").tests if test.outcome != "passed"}
    assert any(hint and "returned (15000000, 1, 1, 1) (float32) where the contract's FeedForward returns" in hint
               for hint in hints), hints


def test_a_layer_that_broadcasts_without_gradients_fails_05s_gradient_check_on_its_shape(graded):
    # Right when the grader backpropagates (its input requires grad), HUGE when it measures
    # the loss along the gradient.
    forward = "    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:\n"
    source = mutant(REFERENCE_05, forward, f"{forward}        if not x.requires_grad:\n"
                                           f"            return x.new_zeros({HUGE}, 1, 1, 1)\n")
    report = graded(source, "05")
    failed = failed_tests(report, "EncoderLayer")
    message = failed["test_encoder_layer_gradients_reach_every_submodule"]
    assert f"EncoderLayer output: wrong shape: got ({HUGE}, 1, 1, 1), expected (2, 4, 16)" in message


def test_an_mlp_that_broadcasts_when_called_alone_is_unusable_in_07s_block(graded):
    source = _huge_unless_inside(REFERENCE_07, "        return self.dropout(self.proj(F.gelu(self.fc(x))))  # (B, T, d_model)")
    mlp_line = "        return x + self.mlp(self.ln2(x))\n"
    source = FLAG + _inside(source, mlp_line, "        return x + 2 * self.mlp(self.ln2(x))\n")
    report = graded(source, "07")
    hints = {test.hint for test in part(report, "Block").tests if test.outcome != "passed"}
    assert any(hint and f"returned ({HUGE}, 1, 1, 1) (float32) where the contract's MLP returns" in hint
               for hint in hints), hints


def test_a_state_dict_that_broadcasts_fails_06s_train_step_on_its_shape(graded):
    source = mutant(REFERENCE_06, "    optimizer.step()\n    return loss.item()\n",
                    f"    optimizer.step()\n    model.out.bias = nn.Parameter(torch.zeros({HUGE}, 1))\n"
                    "    return loss.item()\n")
    report = graded(source, "06")
    failed = failed_tests(report, "train_step")
    assert "test_train_step_updates_the_parameters" in failed
    assert f"out.bias: got ({HUGE}, 1) (float32), expected (12,)" in failed["test_train_step_updates_the_parameters"]


# ---- values outside the contract that made trusted code raise ------------------------------

def test_a_context_length_that_is_a_tensor_fails_its_test(graded):
    source = mutant(REFERENCE_07, "        self.context_length = context_length\n",
                    "        self.context_length = torch.tensor([context_length, context_length])\n")
    source = mutant(source, "        _check_length(length, self.context_length)\n",
                    "        _check_length(length, self.position_embedding.num_embeddings)\n")
    report = graded(source, "07")
    assert set(failed_tests(report, "GPT")) == {"test_gpt_knows_its_context_length"}


def test_a_zero_dimensional_decode_after_a_failing_forward_is_the_students_error(graded):
    # When forward raises, the grader reads decode's last dimension to see whether decode
    # already returns logits; a 0-dim tensor has none.
    source = mutant(REFERENCE_05, "        src_mask = padding_mask(src, self.pad_idx)  # (B, 1, 1, S)\n",
                    "        raise ValueError('forward is not finished')\n")
    source = mutant(source, "        Returns hidden states, not logits: ``forward`` applies ``generator`` to them.\n        \"\"\"\n",
                    "        Returns hidden states, not logits: ``forward`` applies ``generator`` to them.\n        \"\"\"\n"
                    "        return torch.tensor(0.0)\n")
    report = graded(source, "05")
    errors = {test.name: test.message for test in part(report, "Transformer").tests if test.outcome == "error"}
    assert "ValueError: forward is not finished" in errors["test_transformer_forward_values"]


# ---- verdicts the student's process could write -------------------------------------------

# A GPT that cannot learn (its output ignores the input, so no gradient reaches the
# embeddings), but that records the windows it is trained on and, once train() has been
# called, answers with the next character it saw after the last two (or the only one).
HAND_WRITTEN_LOGITS = '''
    def train(self, mode=True):
        if mode:
            self._seen = getattr(self, "_seen", {})
            self._trained = True
        return super().train(mode)

    def forward(self, idx, targets=None):
        if self.training and hasattr(self, "_seen"):
            for row in idx.tolist():
                for i in range(1, len(row)):
                    self._seen[tuple(row[max(0, i - 2):i])] = row[i]
        if getattr(self, "_trained", False) and not self.training:
            logits = torch.zeros(*idx.shape, self.lm_head.out_features, device=idx.device)
            for b, row in enumerate(idx.tolist()):
                for i in range(len(row)):
                    logits[b, i, self._seen.get(tuple(row[max(0, i - 1):i + 1]), row[i])] = 10.0
            return logits, None
        x = self.token_embedding(idx) * 0.0
        logits = self.lm_head(self.ln_f(x))
        return logits, (None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten()))
'''


def test_hand_written_logits_after_training_earn_nothing_end_to_end(graded):
    gpt_forward = REFERENCE_07[REFERENCE_07.index("    def forward(self, idx: torch.Tensor, targets"):
                               REFERENCE_07.index("@torch.no_grad()\ndef generate(")]
    report = graded(mutant(REFERENCE_07, gpt_forward, HAND_WRITTEN_LOGITS + "\n\n"), "07")
    assert part(report, "end_to_end").score == 0
    assert part(report, "end_to_end").hint.startswith("training your GPT with a stock AdamW loop did not lower the loss")


# generate without cropping, eval mode or no_grad: it loses those three tests. The tricks
# recognise a test double by everything a generate can read (type, module, attributes,
# __dict__, missing attributes of a real GPT) and then either switch off what steers one (a
# mode flag, the context it refuses past, a table of logits to read instead of calling it)
# or, the bluntest special case, generate correctly only for such a model.
TRICK_GENERATE = '''
def _a_test_double(model):
    contract = ("token_embedding", "position_embedding", "blocks", "ln_f", "lm_head", "context_length")
    return (type(model) is not GPT or type(model).__name__ != "GPT" or type(model).__module__ != __name__
            or type(model).__module__.startswith("grader_helper") or not all(hasattr(model, a) for a in contract)
            or any(name in vars(model) for name in ("strict", "table")) or "table" in dict(model.named_parameters()))


def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    if temperature <= 0 or (top_k is not None and top_k < 1):
        raise ValueError("temperature must be positive and top_k at least 1")
    if TRICK == "correct when tested" and _a_test_double(model):
        return _correct_generate(model, idx, max_new_tokens, temperature, top_k, generator)
    forward = model
    if TRICK == "switch the double off" and _a_test_double(model):
        if hasattr(model, "strict"):
            model.strict = None
        model.context_length = 10 ** 9
        table = getattr(model, "table", None)
        if isinstance(table, torch.Tensor):
            forward = lambda window: (table.detach()[window], None)
    for _ in range(max_new_tokens):
        logits, _ = forward(idx)
        logits = logits[:, -1, :] / temperature
        if top_k is not None:
            kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, [-1]]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        idx = torch.cat([idx, torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator)], dim=1)
    return idx
'''


@pytest.fixture(scope="module")
def generate_failures(tmp_path_factory):
    """trick -> the generate tests that the buggy generate with that trick fails."""
    from grader.engine.api import grade
    from tests.conftest import TEST_LIMITS

    correct = REFERENCE_07[REFERENCE_07.index("@torch.no_grad()\ndef generate("):]
    base = REFERENCE_07.replace(correct, correct.replace("def generate(", "def _correct_generate(") + TRICK_GENERATE)

    def failures(trick: str) -> set[str]:
        path = tmp_path_factory.mktemp("trick") / "gpt.py"
        path.write_text(f"TRICK = {trick!r}\n" + base)
        report = grade(ASSIGNMENTS / "07", path, device="cpu", limits=TEST_LIMITS)
        assert report.status == "graded", report.error
        return set(failed_tests(report, "generate"))

    return failures


def test_a_generate_that_switches_the_test_double_off_loses_what_it_loses_without_the_trick(generate_failures):
    without = generate_failures("none")  # a sequence that outgrows the context makes the model raise
    assert without == {"test_generate_crops_the_context", "test_generate_shape_and_input_first",
                       "test_generate_greedy_is_argmax_decoding", "test_generate_puts_the_model_in_eval_mode",
                       "test_generate_runs_without_gradients"}
    assert generate_failures("switch the double off") == without


def test_a_generate_that_is_correct_only_for_a_test_double_gains_nothing(generate_failures):
    # The model generate receives is the student's own GPT in every test. No real model shows
    # in its values whether autograd recorded, so in the gradients test its instance's forward
    # is wrapped to show it: its type, module, attributes and parameters stay the GPT's. Before,
    # that test used a stock GPT of another class, and this generate behaved there.
    assert generate_failures("correct when tested") == generate_failures("none")


# 06: greedy_decode that takes the logits of the first position, not the last. The trick
# recognises a scripted test model by its class name or its attributes and, since such a
# model only reads a script from the source, decodes the script without calling it.
SCRIPT_READER = '''
def _scripted(model):
    return type(model).__name__ == "Scripted" or hasattr(model, "anchor") or "script" in type(model).__doc__.lower()


def greedy_decode(model, src, bos_idx, eos_idx, pad_idx, max_len):
    if max_len < 1:
        raise ValueError("max_len must be at least 1")
    out = torch.full((src.size(0), 1), bos_idx, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for step in range(max_len - 1):
        if TRICK and _scripted(model):
            next_token = src[:, min(step, src.size(1) - 1)]
        else:
            next_token = model(src, out)[:, 0].argmax(dim=-1)
        next_token = next_token.masked_fill(finished, pad_idx)
        out = torch.cat([out, next_token[:, None]], dim=1)
        finished |= next_token == eos_idx
        if finished.all():
            break
    return out
'''


def test_a_greedy_decode_that_reads_a_scripted_model_loses_what_it_loses_without_the_trick(grade_source):
    decode = REFERENCE_06[REFERENCE_06.index("@torch.no_grad()\ndef greedy_decode("):]
    base = REFERENCE_06.replace(decode, SCRIPT_READER)

    def failures(trick: bool) -> set[str]:
        report = grade_source(f"TRICK = {trick}\n" + base, assignment=ASSIGNMENTS / "06")
        assert report.status == "graded", report.error
        return set(failed_tests(report, "greedy_decode"))

    without = failures(False)
    assert "test_greedy_decode_rows_finish_at_different_steps" in without
    assert failures(True) == without
