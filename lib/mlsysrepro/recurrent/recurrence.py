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

Only ``dh`` and ``dc`` are recurrent: every factor that reads the forward pass alone (``a_o (1 - tc^2)``,
``a_g a_i(1-a_i)``, ``c_{t-1} a_f(1-a_f)``, ``a_i (1-a_g^2)``, ``tc a_o(1-a_o)``) is computed for all steps at once
before the loop, so a backward step is five elementwise kernels and one GEMM, and a forward step four and one
(``tanh(c_t)`` is kept from the forward pass). The same time loop serves every dropout mode: dropout acts on the
projections, never inside it.
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
        tcs = projected.new_empty(steps, batch, hidden)  # tanh(c_t)
        h, c = h0, c0
        for t in range(steps):
            a = torch.addmm(projected[t], h, w_hh_t, out=acts[t])
            a[:, : 2 * hidden].sigmoid_()
            a[:, 2 * hidden: 3 * hidden].tanh_()
            a[:, 3 * hidden:].sigmoid_()
            i, f, g, o = a.chunk(4, 1)
            c = torch.addcmul(f * c, i, g, out=cs[t])
            h = torch.mul(o, torch.tanh(c, out=tcs[t]), out=hs[t])
        ctx.save_for_backward(w_hh_t, h0, c0, acts, hs, cs, tcs)
        return hs, c

    @staticmethod
    def backward(ctx, grad_hs, grad_c):
        w_hh_t, h0, c0, acts, hs, cs, tcs = ctx.saved_tensors
        steps, batch, hidden = hs.shape
        i, f, g, o = acts.chunk(4, 2)  # (T, B, H) each
        c_prev = torch.cat([c0[None], cs[:-1]])
        # the factors that need no recurrence, for every step at once
        to_dc = o * (1 - tcs * tcs)  # dc += dh * to_dc
        to_gates = torch.stack([g * i * (1 - i), c_prev * f * (1 - f), i * (1 - g * g)], 2)  # (T, B, 3, H)
        to_do = tcs * o * (1 - o)
        grad_gates = torch.empty_like(acts)
        ifg = grad_gates[..., : 3 * hidden].unflatten(2, (3, hidden))  # views into grad_gates
        do = grad_gates[..., 3 * hidden:]
        dh = torch.zeros_like(h0) if grad_hs is None else grad_hs[-1].clone()
        dc = torch.zeros_like(c0) if grad_c is None else grad_c.clone()
        for t in reversed(range(steps)):
            dc.addcmul_(dh, to_dc[t])
            torch.mul(to_gates[t], dc[:, None], out=ifg[t])
            torch.mul(dh, to_do[t], out=do[t])
            dc.mul_(f[t])
            if t:
                dh = torch.mm(grad_gates[t], w_hh_t.t())
                if grad_hs is not None:
                    dh += grad_hs[t - 1]
        dh = grad_gates[0] @ w_hh_t.t()
        previous = torch.cat([h0[None], hs[:-1]]).reshape(-1, hidden)
        grad_w = previous.t() @ grad_gates.reshape(-1, 4 * hidden)  # one GEMM for all steps
        return grad_gates, grad_w, dh, dc
