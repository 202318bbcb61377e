"""The output projection and weighted cross-entropy of a packed row, in chunks.

Every position of a row gets a prediction and a weight (0 where nothing is learned:
code, padding, an example's last token), so no boolean gather picks the trace
positions and no shape depends on the batch. The vocabulary is the largest dimension a
step touches: `(N, V)` logits in float32 for a 48 k-token row of a 16 k vocabulary
are 3 GB, and autograd would keep them for the backward pass. `weighted_ce` projects
`chunk` positions at a time and computes the gradient of each chunk while its logits
exist (softmax minus the one-hot label, times the weight), so only one chunk's logits
are ever alive; the backward pass only scales the stored gradients.

In fp16 (a V100's DeepSpeed run) the output layer's weight gradient is a sum over up to
`chunk` positions, weighted up to 10, made in the forward before any loss scale: it
would overflow fp16 whatever the scale, and DeepSpeed would skip every step. It is made
and kept in float32 there; only the backward's scaling by the loss scale meets fp16's
range, where the loss scaler looks for overflow.
"""

from __future__ import annotations

import torch

CHUNK = 4096  # positions projected at once: (4096, V) float32 logits at most


class _WeightedCE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, labels, weights, chunk: int):
        # hidden (N, H), weight (V, H) the tied output projection, labels (N,), weights (N,).
        # Returns sum(weights * cross-entropy) as a float32 scalar.
        N = hidden.shape[0]
        W = weight.to(hidden.dtype)
        need = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        grad_h = torch.empty_like(hidden) if need else None
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if need else None
        for s in range(0, N, chunk):
            h, y, w = hidden[s : s + chunk], labels[s : s + chunk], weights[s : s + chunk].float()
            logp = torch.log_softmax((h @ W.t()).float(), dim=-1)  # (c, V): this chunk's only
            total = total - (logp.gather(1, y[:, None])[:, 0] * w).sum()
            if need:
                g = logp.exp_()  # the softmax, in place
                g.scatter_add_(1, y[:, None], torch.full_like(w[:, None], -1.0))  # minus the one-hot label
                g = g.mul_(w[:, None])  # (c, V) float32
                gh = g.to(hidden.dtype)
                grad_h[s : s + chunk] = gh @ W
                if hidden.dtype == torch.float16:  # a sum over c positions of weights up to 10 passes fp16's 65,504
                    grad_w.addmm_(g.t(), h.float())  # before any loss scale applies: it is kept in float32
                else:
                    grad_w += (gh.t() @ h).float()
        if need:
            ctx.save_for_backward(grad_h, grad_w)
        ctx.weight_dtype = weight.dtype
        return total

    @staticmethod
    def backward(ctx, grad_out):
        grad_h, grad_w = ctx.saved_tensors
        # grad_out (the loss scale over the row's weight) is scaled in float32: in fp16 it can be subnormal
        scaled_h = grad_h * grad_out if grad_h.dtype == torch.float32 else (grad_h.float() * grad_out).to(grad_h.dtype)
        return (scaled_h, (grad_w * grad_out).to(ctx.weight_dtype), None, None, None)


def weighted_ce(
    hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor, chunk: int = CHUNK
) -> torch.Tensor:
    """sum over positions of weights x cross-entropy(hidden @ weight.T, labels): hidden
    (N, H), weight (V, H), labels and weights (N,). Differentiable in hidden and weight."""
    return _WeightedCE.apply(hidden, weight, labels, weights, chunk)
