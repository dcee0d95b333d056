"""A probe's examples as batches of padded rows, and where each choice's log-prob is read.

Rows: when the choices of every example are "one shared prefix + one distinct last token"
(always so for single-token choices, e.g. " 42" with a GPT-2-style BPE, and for " ", "42" with
Llama-3's tokenizer) one row per example suffices: the row is prompt + shared prefix, and all
C choices are read off the logits of that one row. Otherwise a choice needs the row prompt +
continuation[:-1], as lm-eval builds it, and choices share rows: a causal model's logits at a
position see only the tokens up to it, so a choice whose row is a prefix of another's is read off
that longer row (a digit-splitting tokenizer's " 4", " 42" and " 47" take two rows: " 4" inside
" 42"). One row per choice whose row no other choice's extends; a batch holds whole examples.

Packed rows (``EncodedProbe.packed``): one row per example all the same. The prompt runs once and
every distinct continuation prefix follows it in the row as a branch of a tree: a branch token
attends to the prompt and to its own earlier tokens only (a 4-D attention mask, ``tree_mask``) at
the position it would have alone (``position_ids``). The log-probs are those of the separate rows
up to float rounding, and the prompt's tokens go through the model once instead of once per row (on
the KV probe with a digit-splitting tokenizer, ~7 rows of ~100 tokens an example become one of
~107). For attention models whose attention takes a 4-D mask only: a recurrence (SSM) cannot skip
a branch.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Iterator

import torch

from ..errors import ProbeError
from .encoded import EncodedProbe


@dataclass
class ProbeBatch:
    """Right-padded rows of some examples, and where their scores sit in the logits.

    Scoring reads the next-token distribution at P (row, position) pairs and K entries gather
    one token's log-prob from one of those P distributions and add it to one (example, choice)
    slot. Tokens of a shared prefix are added to every choice of their example.
    """
    input_ids: torch.Tensor       # (B, T) long, right-padded
    attention_mask: torch.Tensor  # (B, T) long, 1 = real token
    examples: torch.Tensor        # (E,) indices of this batch's examples in the EncodedProbe
    n_choices: int                # C
    score_rows: torch.Tensor      # (P,) row of each distribution read
    score_pos: torch.Tensor       # (P,) position in that row (predicts the token at pos + 1)
    keep_pos: torch.Tensor        # (U,) sorted distinct score positions (for logits_to_keep)
    row_example: torch.Tensor     # (B,) the example (0..E-1 in this batch) each row belongs to
    score_kept: torch.Tensor      # (P,) index of score_pos in keep_pos
    target_index: torch.Tensor    # (K,) which of the P distributions
    target_token: torch.Tensor    # (K,) which token's log-prob
    target_slot: torch.Tensor     # (K,) flat (example in batch) * C + choice to add it to
    position_ids: torch.Tensor | None = None  # (B, T) packed rows: each token's position as if alone
    tree_mask: torch.Tensor | None = None     # (B, T, T) bool packed rows: query may attend to key

    def to(self, device) -> "ProbeBatch":
        return dataclasses.replace(self, **{f.name: getattr(self, f.name).to(device)
                                            for f in dataclasses.fields(self)
                                            if isinstance(getattr(self, f.name), torch.Tensor)})

    def model_inputs(self, model, copies: int = 1) -> dict[str, torch.Tensor]:
        """The model's keyword inputs for ``copies`` copies of the rows (A * B rows): ``input_ids``
        and ``attention_mask``, and for packed rows ``position_ids`` with the tree as an additive
        4-D mask ``(A * B, 1, T, T)`` in the model's dtype (as eager and sdpa attention both add it)."""
        ids = self.input_ids.repeat(copies, 1)
        if self.tree_mask is None:
            return dict(input_ids=ids, attention_mask=self.attention_mask.repeat(copies, 1))
        dtype = model.get_input_embeddings().weight.dtype
        mask = torch.zeros(self.tree_mask.shape, dtype=dtype, device=self.tree_mask.device)
        mask.masked_fill_(~self.tree_mask, torch.finfo(dtype).min)
        return dict(input_ids=ids, attention_mask=mask[:, None].repeat(copies, 1, 1, 1),
                    position_ids=self.position_ids.repeat(copies, 1))


def examples_per_batch(encoded: EncodedProbe, batch_size: int) -> int:
    """Rows are examples in the one-row and packed cases, (example, choice) pairs otherwise; a
    batch holds whole examples, at least one (so up to C rows even if batch_size < C)."""
    if batch_size < 1:
        raise ProbeError(f"batch_size={batch_size} must be >= 1")
    return batch_size if encoded.one_row or encoded.packed else max(1, batch_size // encoded.n_choices)


@dataclass
class _Rows:
    """A batch's rows as they are laid out: the token rows, each scored position (its row, its position),
    each choice token's scored position (``t_idx``), the token and its (example, choice) slot, each
    row's example, and the packed rows' trees."""
    rows: list = field(default_factory=list)
    s_rows: list = field(default_factory=list)
    s_pos: list = field(default_factory=list)
    t_idx: list = field(default_factory=list)
    t_tok: list = field(default_factory=list)
    t_slot: list = field(default_factory=list)
    row_ex: list = field(default_factory=list)
    trees: list = field(default_factory=list)   # packed rows: (positions, branch token -> the token it follows)


def _packed(out: _Rows, e: int, C: int, prompt: list[int], conts: list[list[int]]) -> None:
    """Example ``e`` as one row: the prompt, then its choices' tokens as a tree."""
    r, seen = len(out.rows), {}
    row, positions, follows, node = _tree_row(prompt, conts)
    out.rows.append(row)
    out.trees.append((positions, follows))
    for c, cont in enumerate(conts):
        for j in range(len(cont)):  # the distribution after cont[:j] predicts token j
            key = node[tuple(cont[:j])]
            if key not in seen:
                seen[key] = len(out.s_pos)
                out.s_rows.append(r)
                out.s_pos.append(key)
            out.t_idx.append(seen[key])
        out.t_tok += cont
        out.t_slot += [e * C + c] * len(cont)


def _one_row(out: _Rows, e: int, C: int, prompt: list[int], conts: list[list[int]]) -> None:
    """Example ``e`` as one row, prompt + the choices' shared prefix: all choices read off it."""
    L, prefix = len(prompt), conts[0][:-1]
    r, p0 = len(out.rows), len(out.s_pos)
    out.rows.append(prompt + prefix)
    out.s_rows += [r] * (len(prefix) + 1)
    out.s_pos += range(L - 1, L + len(prefix))
    for c, cont in enumerate(conts):  # prefix tokens add to every choice
        out.t_idx += range(p0, p0 + len(cont))
        out.t_tok += cont
        out.t_slot += [e * C + c] * len(cont)


def _choice_rows(out: _Rows, e: int, C: int, prompt: list[int], conts: list[list[int]]) -> None:
    """Example ``e`` as a row per choice, prompt + continuation[:-1]; a choice whose row another's
    extends reads off that one."""
    L = len(prompt)
    tails, seen = [tuple(c[:-1]) for c in conts], {}
    longest = [t for t in dict.fromkeys(tails) if not any(u != t and u[:len(t)] == t for u in tails)]
    hosts = {t: len(out.rows) + i for i, t in enumerate(longest)}
    out.rows += [prompt + list(t) for t in longest]
    for c, cont in enumerate(conts):  # the first longest row that begins with the choice's own
        r = hosts[next(u for u in longest if u[:len(tails[c])] == tails[c])]
        for j in range(len(cont)):   # the distribution at L-1+j predicts the choice's token j
            key = (r, L - 1 + j)
            if key not in seen:
                seen[key] = len(out.s_pos)
                out.s_rows.append(r)
                out.s_pos.append(L - 1 + j)
            out.t_idx.append(seen[key])
        out.t_tok += cont
        out.t_slot += [e * C + c] * len(cont)


def iter_batches(encoded: EncodedProbe, batch_size: int) -> Iterator[ProbeBatch]:
    """Batches of whole examples, in order. Padding is on the RIGHT on purpose: every supported
    model is causal, so real positions never see the pads and scores are exact for attention
    and SSMs alike. Left padding would run the pads through the SSM recurrence and the conv
    before the prompt and change its state."""
    C, per = encoded.n_choices, examples_per_batch(encoded, batch_size)
    lay_out = _packed if encoded.packed else _one_row if encoded.one_row else _choice_rows
    for start in range(0, len(encoded), per):
        out = _Rows()
        ex_idx = list(range(start, min(start + per, len(encoded))))
        for e, n in enumerate(ex_idx):
            lay_out(out, e, C, encoded.prompt_ids[n], encoded.choice_ids[n])
            out.row_ex += [e] * (len(out.rows) - len(out.row_ex))
        T = max(map(len, out.rows))
        input_ids = torch.full((len(out.rows), T), encoded.pad_id, dtype=torch.long)
        mask = torch.zeros((len(out.rows), T), dtype=torch.long)
        for r, row in enumerate(out.rows):
            input_ids[r, :len(row)] = torch.tensor(row)
            mask[r, :len(row)] = 1
        pos = torch.tensor(out.s_pos)
        keep = torch.unique(pos)  # sorted
        tree = _tree_tensors(out.trees, T) if encoded.packed else {}
        yield ProbeBatch(input_ids=input_ids, attention_mask=mask, examples=torch.tensor(ex_idx), n_choices=C, **tree,
                         score_rows=torch.tensor(out.s_rows), score_pos=pos, keep_pos=keep,
                         row_example=torch.tensor(out.row_ex),
                         score_kept=torch.searchsorted(keep, pos), target_index=torch.tensor(out.t_idx),
                         target_token=torch.tensor(out.t_tok), target_slot=torch.tensor(out.t_slot))




def _tree_row(prompt: list[int], conts: list[list[int]]) -> tuple[list[int], list[int], dict[int, int], dict]:
    """One example as a packed row: the prompt, then one token per distinct proper prefix of a
    continuation. Returns the row's tokens, their positions as if each branch ran alone, which row
    index each branch token follows (the prompt's last for a branch's first token), and ``node``:
    prefix tuple -> the row index whose next-token distribution follows it (``()``: the prompt's last)."""
    L = len(prompt)
    row, positions, follows, node = list(prompt), list(range(L)), {}, {(): L - 1}
    for cont in conts:
        for j in range(1, len(cont)):
            prefix = tuple(cont[:j])
            if prefix not in node:
                node[prefix] = len(row)
                follows[len(row)] = node[prefix[:-1]]
                row.append(cont[j - 1])
                positions.append(L - 1 + j)
    return row, positions, follows, node


def _tree_tensors(trees: list[tuple[list[int], dict[int, int]]], T: int) -> dict[str, torch.Tensor]:
    """``position_ids`` (B, T) and ``tree_mask`` (B, T, T) of packed rows padded to ``T``: the
    prompt causal, a branch token on the prompt and its own chain, a pad on itself alone (a query
    that sees nothing would make NaNs that reach real positions through a zero weight)."""
    B = len(trees)
    position_ids = torch.arange(T).repeat(B, 1)
    tree_mask = torch.eye(T, dtype=torch.bool).repeat(B, 1, 1)
    for r, (positions, follows) in enumerate(trees):
        position_ids[r, :len(positions)] = torch.tensor(positions)
        L = len(positions) - len(follows)
        tree_mask[r, :L, :L] = torch.ones(L, L, dtype=torch.bool).tril()
        for i, parent in follows.items():
            tree_mask[r, i, :L] = True
            while parent >= L:
                tree_mask[r, i, parent] = True
                parent = follows[parent]
    return dict(position_ids=position_ids, tree_mask=tree_mask)
