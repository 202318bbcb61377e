"""Zero-shot code-to-code search (docs/metrics.md, downstream).

Queries and candidates are real contest programs (inlined with their first sample
input); two programs are relevant to each other when they solve the same problem. The
score of a candidate is the cosine similarity of mean-pooled encoder embeddings of the
code, plus 0.2 x the edit similarity of the two programs' *predicted* outputs (as the
release did). Reported: MAP with embeddings alone and with the predicted outputs.
"""

from __future__ import annotations

import random
from collections import defaultdict

import torch

from codeexecutor.generation.decoding import Decoding
from eval.rerank import similarity


def build_set(codenet: str, problems: int = 20, per_problem: int = 4, seed: int = 0) -> list[dict]:
    """Programs of `problems` problems (each with >= 2 programs), inlined; [{id, problem_id, code}]."""
    from codeexecutor.execution.inline import InlineError, inline_stdin
    from curricula.codenet import read_layout, read_source

    subs, inputs = read_layout(codenet)
    by_problem = defaultdict(list)
    for s in subs:
        by_problem[s.problem_id].append(s)
    rng = random.Random(seed)
    chosen = sorted(p for p, v in by_problem.items() if len(v) >= 2)
    rng.shuffle(chosen)
    out = []
    for pid in chosen:
        if len({r["problem_id"] for r in out}) >= problems:
            break
        group = []
        for sub in by_problem[pid][:per_problem]:
            src = read_source(sub.path)
            files = inputs.get(pid) or []
            if src is None:
                continue
            try:
                code = inline_stdin(src, open(files[0]).read() if files else "").source
            except InlineError:
                continue
            if len(code.splitlines()) <= 200:
                group.append({"id": sub.submission_id, "problem_id": pid, "code": code})
        if len(group) >= 2:
            out += group
    return out


@torch.no_grad()
def embed(gen, codes: list[str], batch_size: int = 16) -> torch.Tensor:
    from codeexecutor.modeling.model import POSITION_OFFSET, additive
    from codeexecutor.modeling.tokenizer import pad

    m, enc = gen.model, gen.encoder
    vecs = []
    for i in range(0, len(codes), batch_size):
        b = pad([enc.code(gen.code_input(c)) for c in codes[i : i + batch_size]], enc.pad, "code")
        ids, mask = b["code_ids"].to(gen.device), b["code_mask"].to(gen.device)
        B, S = ids.shape
        att = mask.bool()[:, None, :].expand(B, S, S) | torch.eye(S, dtype=torch.bool, device=ids.device)[None]
        pos = torch.arange(S, device=ids.device)[None].expand(B, S) + POSITION_OFFSET
        h = m.roberta(
            input_ids=ids, attention_mask=additive(att, m.dtype), position_ids=pos, use_cache=False
        ).last_hidden_state
        v = (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)  # mean over real tokens
        vecs.append(torch.nn.functional.normalize(v.float(), dim=-1).cpu())
    return torch.cat(vecs)


def mean_average_precision(scores: torch.Tensor, groups: list[str]) -> float:
    aps = []
    n = len(groups)
    for q in range(n):
        order = [c for c in scores[q].argsort(descending=True).tolist() if c != q]
        hits, total = 0, 0.0
        for rank, c in enumerate(order, 1):
            if groups[c] == groups[q]:
                hits += 1
                total += hits / rank
        if hits:
            aps.append(total / hits)
    return 100 * sum(aps) / len(aps) if aps else 0.0


def code_search(model: str, programs: list[dict], beam: int = 2, max_length: int = 256, weight: float = 0.2) -> dict:
    from codeexecutor.generation.api import cached_generator

    gen = cached_generator(model)  # loaded once per process: `search` loads it before reading the corpus
    emb = embed(gen, [p["code"] for p in programs])
    cos = emb @ emb.T
    outs = [
        gen.parse(g.text).output
        for g in gen.generate(
            [gen.code_input(p["code"]) for p in programs],
            Decoding(beam=beam, max_length=max_length, names=False, values=False),
        )
    ]
    out_sim = torch.tensor([[similarity(a, b) for b in outs] for a in outs])
    groups = [p["problem_id"] for p in programs]
    return {
        "model": model,
        "programs": len(programs),
        "problems": len(set(groups)),
        "map_embeddings": mean_average_precision(cos, groups),
        "map_embeddings_plus_outputs": mean_average_precision(cos + weight * out_sim, groups),
        "output_weight": weight,
    }
