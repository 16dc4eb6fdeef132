"""Issue 27, fair grades: wrong code earns no points, a mistake costs once, in the part where it
is made, and an honest student loses nothing. Submissions written as students and tutorials
write them (einsum, a loop over heads, nn.Sequential, F.scaled_dot_product_attention,
tutorial names), each a reference with one piece replaced. The one-edit mistakes are in the
mutant tables (reference/hidden/aNN/mutants.py, tests/test_mistakes.py); these need more.
"""

from __future__ import annotations

import pytest

from grader.core import cells, hints
from grader.core.assignment import Assignment
from reference import as_submission, module_for
from reference.hidden.a05 import variants as variants_05
from reference.hidden.a06 import variants as variants_06
from reference.hidden.a07 import variants as variants_07
from tests.conftest import ROOT, TEST_LIMITS, mutant

pytestmark = pytest.mark.slow


def graded(grade_source, assignment_id: str, *edits: tuple[str, str]):
    source = as_submission(module_for(assignment_id))
    for old, new in edits:
        source = mutant(source, old, new)
    report = grade_source(source, assignment=Assignment.load(ROOT / "assignments" / assignment_id).directory)
    assert report.status == "graded", report.error
    return {part.id: part for part in report.parts}


def lost(parts) -> dict[str, float]:
    return {name: part.max_score - part.score for name, part in parts.items() if part.score < part.max_score}


# ---- honest code keeps every point -----------------------------------------------------------

CSA_TAIL = ("        _, weights = scaled_dot_product_attention(q, k, v, self.mask[:T, :T])  # (B, T, T)\n"
            "        weights = dropout(weights, self.dropout_p, self.training)\n"
            "        return weights @ v  # (B, T, d_out)")
MHA_ATTENTION = ("        # scaled_dot_product_attention divides by sqrt(d_k), the head dimension.\n"
                 "        _, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T_q, T_k)\n"
                 "        heads = self.dropout(weights) @ v  # (B, H, T_q, d_k)")
ENCODER_INIT = ("        self.norm2 = nn.LayerNorm(d_model)\n        self.dropout = nn.Dropout(dropout)\n\n"
                "    def forward(self, x: torch.Tensor, src_mask")
ENCODER_FORWARD = ("        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, src_mask)))  # (B, S, d_model)\n"
                   "        return self.norm2(x + self.dropout(self.ffn(x)))  # (B, S, d_model)\n")
HEAD_FORWARD = ("        scores = q @ k.transpose(-2, -1) * k.size(-1) ** -0.5  # (B, T, T)\n"
                "        scores = scores.masked_fill(~self.tril[:length, :length], float(\"-inf\"))\n"
                "        weights = self.dropout(F.softmax(scores, dim=-1))  # (B, T, T)\n"
                "        return weights @ v  # (B, T, hs)")

HONEST = {
    "02 CausalSelfAttention as Raschka's book writes it: einsum, F.dropout": ("02", [(CSA_TAIL, (
        "        attn_scores = torch.einsum('btd,bsd->bts', q, k)\n"
        "        attn_scores = attn_scores.masked_fill(~self.mask[:T, :T], -torch.inf)\n"
        "        attn_weights = torch.softmax(attn_scores / k.shape[-1] ** 0.5, dim=-1)\n"
        "        attn_weights = torch.nn.functional.dropout(attn_weights, self.dropout_p, self.training)\n"
        "        context_vec = torch.einsum('bts,bsd->btd', attn_weights, v)\n"
        "        return context_vec"))]),
    "02 CausalSelfAttention with an nn.Dropout and a bernoulli dropout": ("02", [
        ("        self.dropout_p = dropout\n",
         "        self.dropout_p = dropout\n        self.drop = nn.Dropout(dropout)\n"),
        ("weights = dropout(weights, self.dropout_p, self.training)", "weights = self.drop(weights)"),
        ("    keep = torch.rand(x.shape, generator=generator, device=x.device, dtype=dtype) >= p\n",
         "    keep = torch.bernoulli(torch.full(x.shape, 1 - p, device=x.device, dtype=dtype),\n"
         "                           generator=generator)\n")]),
    "02 padding_mask that checks its values first (it cannot run on the meta device)": ("02", [(
        "    return (tokens != pad_idx)[:, None, None, :]  # (B, 1, 1, T)",
        "    if bool((tokens < 0).any()):\n        raise ValueError('token ids are never negative')\n"
        "    return (tokens != pad_idx)[:, None, None, :]  # (B, 1, 1, T)")]),
    "03 MultiHeadAttention with F.scaled_dot_product_attention and its dropout_p": ("03", [(MHA_ATTENTION, (
        "        p = self.dropout.p if self.training else 0.0\n"
        "        heads = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)"))]),
    "03 MultiHeadAttention looping over heads with einsum, scaled by a CPU scalar": ("03", [(MHA_ATTENTION, (
        "        outs = []\n"
        "        for h in range(self.num_heads):\n"
        "            s = torch.einsum('bqd,bkd->bqk', q[:, h], k[:, h]) / torch.sqrt(torch.tensor(q.size(-1)))\n"
        "            if mask is not None:\n"
        "                s = s.masked_fill(~mask.expand(q.size(0), self.num_heads, -1, -1)[:, h], float('-inf'))\n"
        "            w = torch.nn.functional.dropout(s.softmax(-1), self.dropout.p, self.training)\n"
        "            outs.append(torch.einsum('bqk,bkd->bqd', w, v[:, h]))\n"
        "        heads = torch.stack(outs, dim=1)"))]),
    "04 PositionalEncoding that builds its table inline, as the annotated transformer does": ("04", [(
        '        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))  # (max_len, d_model)',
        "        position = torch.arange(max_len).unsqueeze(1)\n"
        "        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))\n"
        "        pe = torch.zeros(max_len, d_model)\n"
        "        pe[:, 0::2] = torch.sin(position * div_term)\n"
        "        pe[:, 1::2] = torch.cos(position * div_term)\n"
        '        self.register_buffer("pe", pe)')]),
    "05 layers with a dropout module per sublayer and F.dropout": ("05", [
        (ENCODER_INIT, ENCODER_INIT.replace("self.dropout = nn.Dropout(dropout)",
                                            "self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)")),
        (ENCODER_FORWARD, "        attn_output = self.self_attn(x, x, x, src_mask)\n"
                          "        x = self.norm1(x + self.dropout1(attn_output))\n"
                          "        ff_output = self.ffn(x)\n"
                          "        ff_output = nn.functional.dropout(ff_output, self.dropout2.p, self.training)\n"
                          "        return self.norm2(x + ff_output)\n"),
    ]),
    "07 Head with F.scaled_dot_product_attention, is_causal and dropout_p": ("07", [(HEAD_FORWARD, (
        "        p = self.dropout.p if self.training else 0.0\n"
        "        return F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p)"))]),
    # Dropout drawn by hand, new units on every call: from torch's generator on the input's
    # device, or from a generator of the module's own, made once and drawing on.
    "07 Head with a generator of its own and an MLP that draws its mask with torch.rand_like": ("07", [
        (HEAD_FORWARD, HEAD_FORWARD.replace(
            "        weights = self.dropout(F.softmax(scores, dim=-1))  # (B, T, T)\n",
            "        weights = F.softmax(scores, dim=-1)\n"
            "        if self.training and self.dropout.p > 0:\n"
            "            if not hasattr(self, 'g'):\n"
            "                self.g = torch.Generator(device=x.device).manual_seed(1337)\n"
            "            keep = torch.rand(weights.shape, generator=self.g, device=x.device) > self.dropout.p\n"
            "            weights = weights * keep / (1 - self.dropout.p)\n")),
        ("        return self.dropout(self.proj(F.gelu(self.fc(x))))",
         "        h = self.proj(F.gelu(self.fc(x)))\n"
         "        if not self.training or self.dropout.p == 0:\n"
         "            return h\n"
         "        return h * (torch.rand_like(h) >= self.dropout.p) / (1 - self.dropout.p)")]),
    "01 softmax as exp(x - logsumexp(x)), the log-sum-exp trick": ("01", [(
        "    row_max = x.amax(dim=dim, keepdim=True)\n"
        "    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))\n"
        "    exp = torch.exp(x - row_max)\n"
        "    return exp / exp.sum(dim=dim, keepdim=True)",
        "    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))")]),
    # TorchScript reads the function's source, as in Jupyter: the grader lets Python find it.
    "01 softmax compiled with @torch.jit.script": ("01", [(
        "def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:",
        "@torch.jit.script\ndef softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:")]),
    # The contracts of 02 and 04 ask for "a registered buffer"; one kept out of the state dict is one.
    "02 CausalSelfAttention whose mask is a non-persistent buffer": ("02", [(
        '        self.register_buffer("mask", causal_mask(context_length))',
        '        self.register_buffer("mask", causal_mask(context_length), persistent=False)')]),
    "04 PositionalEncoding whose pe is a non-persistent buffer": ("04", [(
        '        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))',
        '        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)')]),
    "04 PositionalEncoding with F.dropout": ("04", [(
        "        self.dropout = nn.Dropout(dropout)", "        self.p = dropout"), (
        "        return self.dropout(x + self.pe[:T].to(x.dtype))",
        "        return torch.nn.functional.dropout(x + self.pe[:T].to(x.dtype), self.p, self.training)")]),
}


@pytest.mark.parametrize("name", HONEST)
def test_honest_code_keeps_every_point(grade_source, name):
    assignment_id, edits = HONEST[name]
    parts = graded(grade_source, assignment_id, *edits)
    assert lost(parts) == {}, [(part.id, part.hints) for part in parts.values() if part.score < part.max_score]


def test_a_softmax_written_with_in_place_operators_raises_no_flag(grade_source):
    # The grader's recorder saw each write before autograd counted it: every in-place step looked
    # like a change no recorded operator made, "evasive-looking code" for the instructor.
    source = mutant(as_submission(module_for("01")),
                    "    exp = torch.exp(x - row_max)\n    return exp / exp.sum(dim=dim, keepdim=True)",
                    "    z = x.clone()\n    z -= row_max\n    z.exp_()\n    return z / z.sum(dim=dim, keepdim=True)")
    report = grade_source(source, assignment=ROOT / "assignments" / "01")
    assert report.score == report.max_score and report.flags == [], report.flags


def test_a_module_whose_top_level_trains_past_the_cell_limit_keeps_its_classes(grade_source):
    # As Karpathy's scripts do: the classes, then a training loop that is not under __main__.
    training = ("\nmha = MultiHeadAttention(16, 4)\noptimizer = torch.optim.SGD(mha.parameters(), lr=0.1)\n"
                "for step in range(10**9):\n    x = torch.randn(2, 5, 16)\n"
                "    loss = mha(x, x, x).pow(2).mean()\n    optimizer.zero_grad()\n    loss.backward()\n"
                "    optimizer.step()\n")
    report = grade_source(as_submission(module_for("03")) + training)
    assert report.score == report.max_score, [(part.id, part.hints) for part in report.parts]
    assert report.notes == [cells.stopped("your module (submission.py)", TEST_LIMITS.cell_timeout_s)]


def test_a_long_loop_before_the_last_class_of_a_module_keeps_that_class(grade_source):
    # A notebook exported as a .py, its benchmark cell before the MultiHeadAttention cell: a
    # module's top-level statements are its cells, each with the cell's time limit.
    source = mutant(as_submission(module_for("03")), "class MultiHeadAttention(",
                    "for step in range(10**9):\n    torch.randn(4, 4).sum()\n\n\nclass MultiHeadAttention(")
    report = grade_source(source)
    assert report.score == report.max_score, [(part.id, part.hints) for part in report.parts]
    assert report.notes == [cells.stopped("your module (submission.py)", TEST_LIMITS.cell_timeout_s)]


def test_a_script_that_reads_its_data_file_first_keeps_the_classes_after_it(grade_source):
    # Karpathy's gpt.py opens input.txt at its top; the grader has no such file.
    data = "with open('input.txt') as f:\n    text = f.read()\nchars = sorted(set(text))\n"
    report = grade_source(data + as_submission(module_for("03")))
    assert report.score == report.max_score, [(part.id, part.hints) for part in report.parts]
    assert report.notes == [cells.raised("your module (submission.py)", "FileNotFoundError",
                                         "[Errno 2] No such file or directory: 'input.txt'", went_on=1)]


def test_a_part_whose_definition_never_ran_is_told_so_not_that_it_is_missing(grade_source):
    source = mutant(as_submission(module_for("03")), "def combine_heads(",
                    "@torch.jit.not_a_decorator\ndef combine_heads(")
    parts = graded(grade_source, "03", ("def combine_heads(", "@torch.jit.not_a_decorator\ndef combine_heads("))
    assert parts["combine_heads"].hint == hints.NOT_DEFINED_WHEN_LOADED
    line = source.splitlines().index("@torch.jit.not_a_decorator") + 2  # the def's own line
    assert all(f"submission.py line {line} defines it" in test.message for test in parts["combine_heads"].tests)
    renamed = graded(grade_source, "03", ("def combine_heads(", "def combine_heads_v2("))
    assert renamed["combine_heads"].hint == hints.NOT_FOUND


def test_a_notebook_downloaded_as_a_py_grades_as_the_notebook(grade_source):
    # nbconvert turns each magic into a call of get_ipython(); a %%time cell's body is a string.
    exported = ("get_ipython().system('pip install -q einops')\n"
                "get_ipython().run_line_magic('matplotlib', 'inline')\n"
                "files = get_ipython().getoutput('ls')\n"
                f"get_ipython().run_cell_magic('time', '', {as_submission(module_for('03'))!r})\n"
                "get_ipython().run_cell_magic('bash', '', 'nvidia-smi\\n')\n"
                "display(MultiHeadAttention(16, 4))\n")
    report = grade_source(exported)
    assert report.score == report.max_score and not report.notes, ([(p.id, p.hints) for p in report.parts],
                                                                   report.notes)


# ---- one mistake, one cost, in its own part ---------------------------------------------------


# The fill is the student's choice: -1e9, as the Annotated Transformer writes it, leaves a row
# whose every key is masked finite where -inf makes it nan, and the mistake is still this one.
@pytest.mark.parametrize("assignment_id, part_id", [("01", "scaled_dot_product_attention"),
                                                    ("03", "MultiHeadAttention")])
def test_a_mask_inverted_with_a_finite_fill_is_named_and_costs_the_rubrics_points(grade_source, assignment_id,
                                                                                  part_id):
    parts = graded(grade_source, assignment_id,
                   ('scores = scores.masked_fill(~mask, float("-inf"))', "scores = scores.masked_fill(mask, -1e9)"))
    assert lost(parts) == {part_id: 3}, [(part.id, part.hints) for part in parts.values()]
    assert parts[part_id].hint.startswith("mask inverted"), parts[part_id].hint

def test_pieces_that_hard_code_their_dropout_cost_points_in_each_piece_and_not_in_the_block(grade_source):
    # Values are compared in eval mode: the block's exact wiring keeps its points.
    inits = ("torch.tril(torch.ones(context_length, context_length, dtype=torch.bool)))",
             "        self.proj = nn.Linear(d_model, d_model)", "        self.proj = nn.Linear(4 * d_model, d_model)")
    parts = graded(grade_source, "07", *[(f"{init}\n        self.dropout = nn.Dropout(dropout)",
                                          f"{init}\n        self.dropout = nn.Dropout(0.2)") for init in inits])
    assert lost(parts) == {"Head": 1, "MultiHead": 1, "MLP": 1}
    assert all(parts[name].hint == variants_07.DROPOUT_RATE_IGNORED for name in ("Head", "MultiHead", "MLP"))


REFERENCE_05 = as_submission(module_for("05"))
FEED_FORWARD_05 = REFERENCE_05[REFERENCE_05.index("class FeedForward"):REFERENCE_05.index("class EncoderLayer")]
STUB = ('class FeedForward(nn.Module):\n    def __init__(self, d_model, d_ff, dropout=0.0):\n'
        '        super().__init__()\n'
        '        raise NotImplementedError("FeedForward.__init__: see assignments/05/README.md")\n\n'
        '    def forward(self, x):\n'
        '        raise NotImplementedError("FeedForward.forward: see assignments/05/README.md")\n\n\n')
INLINE_FFN = ("        self.ffn = FeedForward(d_model, d_ff, dropout)\n        self.norm1 = nn.LayerNorm(d_model)\n"
              "        self.norm2 = nn.LayerNorm(d_model)\n        self.dropout = nn.Dropout(dropout)\n\n"
              "    def forward(self, x: torch.Tensor, src_mask")


def test_a_layer_pays_for_an_inline_feed_forward_whose_class_is_not_written(grade_source):
    inline = INLINE_FFN.replace("FeedForward(d_model, d_ff, dropout)",
                                "nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(dropout), "
                                "nn.Linear(d_ff, d_model))")
    parts = graded(grade_source, "05", (FEED_FORWARD_05, STUB), (INLINE_FFN, inline))
    assert parts["FeedForward"].score == 0  # not written: it pays for nothing of the layer's
    assert parts["EncoderLayer"].max_score - parts["EncoderLayer"].score == 1
    assert "ffn stands for your FeedForward, which is not written yet" in parts["EncoderLayer"].hint
    assert variants_05.PRE_NORM not in parts["EncoderLayer"].hint


# ---- checks that used to pass when they checked nothing ---------------------------------------

def test_a_causal_self_attention_that_returns_a_tuple_earns_no_causality_or_buffer_points(grade_source):
    parts = graded(grade_source, "02",
                   ("        return weights @ v  # (B, T, d_out)", "        return weights @ v, weights"))
    failed = {test.name for test in parts["CausalSelfAttention"].tests if test.outcome != "passed"}
    assert {"test_csa_no_position_sees_a_later_one", "test_csa_mask_is_a_registered_buffer",
            "test_csa_follows_the_input_device"} <= failed


@pytest.mark.parametrize("assignment_id, edit, part_id", [
    # The mask moved to the CPU before it fills the scores (the device test passes a mask).
    ("03", ('scores.masked_fill(~mask, float("-inf"))', 'scores.masked_fill(~mask.cpu(), float("-inf"))'),
     "MultiHeadAttention"),
    # The positions' table moved to the CPU, as code written for a CPU does.
    ("04", ("x + self.pe[:T].to(x.dtype)", "x + self.pe[:T].cpu().to(x.dtype)"), "PositionalEncoding"),
    ("07", ("        return weights @ v  # (B, T, hs)", "        return (weights @ v).cpu()  # (B, T, hs)"), "Head"),
])
def test_code_that_moves_tensors_to_the_cpu_loses_the_device_point(grade_source, assignment_id, edit, part_id):
    # On a GPU it returns a CPU tensor, or mixes devices and raises: the device test's point, and no more.
    parts = graded(grade_source, assignment_id, edit)
    assert parts[part_id].max_score - parts[part_id].score == 1
    assert parts[part_id].hint == hints.FIXED_DEVICE


@pytest.mark.parametrize("assignment_id, edit, part_id, users", [
    # A Head that masks with a table made on the CPU: MultiHead, Block and GPT hold that Head and
    # fail their device tests too, and pass them with the stock pieces. Before: -1 in all four.
    ("07", ("scores.masked_fill(~self.tril[:length, :length],",
            "scores.masked_fill(torch.tril(torch.ones(length, length)) == 0,"), "Head", ("MultiHead", "Block", "GPT")),
    # An EncoderLayer whose output goes to the CPU: the Transformer holds it. Before: -1 in both.
    ("05", ("return self.norm2(x + self.dropout(self.ffn(x)))  # (B, S, d_model)",
            "return self.norm2(x + self.dropout(self.ffn(x))).cpu()  # (B, S, d_model)"), "EncoderLayer", ("Transformer",)),
])
def test_a_piece_s_device_mistake_costs_the_piece_alone(grade_source, assignment_id, edit, part_id, users):
    parts = graded(grade_source, assignment_id, edit)
    assert lost(parts) == {part_id: 1}
    assert parts[part_id].hint == hints.FIXED_DEVICE
    for user in users:  # each says where to look, and why it kept its point
        assert parts[user].hint.startswith("fix ") and parts[user].scored_by.charged_to


def test_greedy_decoding_that_feeds_bos_over_and_over_earns_no_value_points(grade_source):
    # The model's predictions depend on what it is fed: a decoder that sees only the length fails.
    parts = graded(grade_source, "06", ("logits = model(src, out)  # (B, t, V)",
                                        "logits = model(src, torch.full_like(out, bos_idx))  # (B, t, V)"))
    assert lost(parts) == {"greedy_decode": 8}
    assert variants_06.PREFIX_NOT_FED in parts["greedy_decode"].hints
