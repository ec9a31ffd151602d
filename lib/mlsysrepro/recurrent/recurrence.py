"""The sequential half of an LSTM layer, with a hand-written back-propagation through time.

Given the input projection of every step, ``P_t = x_t W_ih^T + b`` (computed beforehand for the whole
sequence, see :mod:`.lstm`), one layer runs (gate order of ``torch.nn.LSTM``)::

    [i, f, g, o] = P_t + h_{t-1} W_hh^T          a = [sigmoid(i), sigmoid(f), tanh(g), sigmoid(o)]
    c_t = a_f c_{t-1} + a_i a_g                  h_t = a_o tanh(c_t)

Left to autograd, every step records a dozen operations and, in the backward pass, a weight gradient
``dG_t^T h_{t-1}`` of the full size of ``W_hh`` that is then added into the running sum: 35 such
GEMMs and additions per layer and window. :class:`Recurrence` does what cuDNN and oneDNN do instead:
the backward loop only carries ``dh`` and ``dc`` back through time (one (B, 4H) @ (4H, H) GEMM a step)
and stores the gate gradients ``dG``; the recurrent weight's gradient is then a single GEMM over all
steps, ``[h_0 .. h_{T-1}]^T dG``. Per step, with ``tc = tanh(c_t)`` and ``dh_t`` the gradient
reaching ``h_t`` from above and from step t+1::

    dc = dh_t a_o (1 - tc^2) + dc_{t+1}            dc_t-1 gets  dc a_f
    dG = [dc a_g a_i(1-a_i), dc c_{t-1} a_f(1-a_f), dc a_i (1-a_g^2), dh_t tc a_o(1-a_o)]
    dh_{t-1} = dG W_hh                              (dP_t = dG)

The same time loop serves every dropout mode: dropout acts on the projections, never inside it.
"""

from __future__ import annotations

import torch


class Recurrence(torch.autograd.Function):
    """``hs, c_T = Recurrence.apply(projected, w_hh_t, h0, c0)``: projected (T, B, 4H), ``w_hh_t = W_hh^T`` (H, 4H)."""

    @staticmethod
    def forward(ctx, projected, w_hh_t, h0, c0):
        steps, batch, four_h = projected.shape
        hidden = four_h // 4
        acts = torch.empty_like(projected)  # the activated gates a, kept for the backward pass
        hs = projected.new_empty(steps, batch, hidden)
        cs = projected.new_empty(steps, batch, hidden)
        h, c = h0, c0
        for t in range(steps):
            a = torch.addmm(projected[t], h, w_hh_t, out=acts[t])
            a[:, : 2 * hidden].sigmoid_()
            a[:, 2 * hidden: 3 * hidden].tanh_()
            a[:, 3 * hidden:].sigmoid_()
            i, f, g, o = a.chunk(4, 1)
            c = torch.addcmul(f * c, i, g, out=cs[t])
            h = torch.mul(o, c.tanh(), out=hs[t])
        ctx.save_for_backward(w_hh_t, h0, c0, acts, hs, cs)
        return hs, c

    @staticmethod
    def backward(ctx, grad_hs, grad_c):
        w_hh_t, h0, c0, acts, hs, cs = ctx.saved_tensors
        steps, batch, hidden = hs.shape
        grad_gates = torch.empty_like(acts)
        dh = torch.zeros_like(h0)
        dc = torch.zeros_like(c0) if grad_c is None else grad_c.clone()
        for t in reversed(range(steps)):
            if grad_hs is not None:
                dh = dh + grad_hs[t]
            i, f, g, o = acts[t].chunk(4, 1)
            c_prev = cs[t - 1] if t > 0 else c0
            tc = cs[t].tanh()
            dc = dc + dh * o * (1 - tc * tc)
            di, df, dg, do = grad_gates[t].chunk(4, 1)
            torch.mul(dc * g, i * (1 - i), out=di)
            torch.mul(dc * c_prev, f * (1 - f), out=df)
            torch.mul(dc * i, 1 - g * g, out=dg)
            torch.mul(dh * tc, o * (1 - o), out=do)
            dc = dc * f
            dh = grad_gates[t] @ w_hh_t.t()
        previous = torch.cat([h0[None], hs[:-1]]).reshape(-1, hidden)
        grad_w = previous.t() @ grad_gates.reshape(-1, 4 * hidden)  # one GEMM for all steps
        return grad_gates, grad_w, dh, dc
