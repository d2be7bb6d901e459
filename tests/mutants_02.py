"""Deliberately wrong versions of the lesson 02 solution, as exact text edits of its code cells.

Each mutant: (exercise id, name, [(old, new), ...], substring expected in a failing case's message).
"""
LESSON = "02_stable_reductions"

SM_SUB = "    z = z - z.amax(dim=dim, keepdim=True)\n"
SM_RET = "    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)\n"
MERGE_L = "    l = l_a * torch.exp(m_a - m_safe) + l_b * torch.exp(m_b - m_safe)\n"
MERGE_SAFE = "    m_safe = torch.where(m == -math.inf, 0.0, m)       # both -inf: exp(-inf - 0) = 0, not exp(nan)\n"
STREAM_LOOP = "    for start in range(0, N, chunk):\n        c = x[..., start:start + chunk].to(acc)\n        m_c = "
STREAM_OUT = "    return (torch.exp(x.to(acc) - m.unsqueeze(-1)) / l.unsqueeze(-1)).to(x.dtype)\n"
CHUNK_SAFE = "        m_c_safe = torch.where(m_c == -math.inf, 0.0, m_c)   # an all -inf chunk is the identity\n"
UPD_MEAN = "    mean = mean + delta / count\n"
UPD_M2 = "    m2 = m2 + delta * (x - mean)\n"
CHAN_W = "    w_b = n_b / n.clamp_min(1)                  # n_b / n, and 0 (not 0/0) when both are empty\n"
CHAN_M2 = "    m2 = m2_a + m2_b + delta * delta * n_a * w_b\n"
VAR_LOOP = "        c = x[..., start:start + chunk].to(acc)\n        mean_c = c.mean(dim=-1)\n"
VAR_M2C = "        m2_c = ((c - mean_c.unsqueeze(-1)) ** 2).sum(dim=-1)\n"
VAR_RET = "    return (m2 / (n - correction)).to(x.dtype), mean.to(x.dtype)\n"
BF_ROUND = ("        partner = lane ^ offset\n        theirs = lanes_map(lambda t: t[partner], state)\n"
            "        state = merge(state, theirs)\n")

MUTANTS = [
    # --- stable_softmax
    ("stable_softmax", "no max subtraction", [(SM_SUB, "")], "subtract the max"),
    ("stable_softmax", "one max for the whole tensor", [(SM_SUB, "    z = z - z.max()\n")], "amax(dim, keepdim=True)"),
    ("stable_softmax", "exp and sum in the input dtype (fp16)",
     [("    z = x.to(acc_dtype(x.dtype))\n", "    z = x\n")], "in fp32"),
    ("stable_softmax", "returns fp32 for fp16 input", [(SM_RET, "    return e / e.sum(dim=dim, keepdim=True)\n")],
     "dtype torch.float32, expected torch.float16"),
    ("stable_softmax", "ignores dim (always the last)",
     [(SM_SUB, "    z = z - z.amax(dim=-1, keepdim=True)\n"),
      (SM_RET, "    return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)\n")], "dim=0"),
    ("stable_softmax", "calls torch.softmax",
     [(SM_SUB, "    return torch.softmax(z, dim=dim).to(x.dtype)\n")], "called torch.softmax"),
    ("stable_softmax", "calls torch.ops.aten._softmax (the kernel behind torch.softmax)",
     [(SM_SUB, "    return torch.ops.aten._softmax(z, dim, False).to(x.dtype)\n")],
     "called torch.ops.aten._softmax: that is the function this exercise rebuilds; write exp(x - max)"),
    ("stable_softmax", "always fp32, even for fp64 input",
     [("    z = x.to(acc_dtype(x.dtype))\n", "    z = x.to(torch.float32)\n")], "computed in float64"),
    ("stable_softmax", "calls torch.special.softmax",
     [(SM_SUB, "    return torch.special.softmax(z, dim=dim).to(x.dtype)\n")], "called torch.special.softmax"),
    ("stable_softmax", "exp(x - logsumexp) with a per-row max, in fp32",
     [(SM_SUB + "    e = torch.exp(z)\n" + SM_RET,
       "    m = z.amax(dim=dim, keepdim=True)\n"
       "    lse = m + torch.log(torch.exp(z - m).sum(dim=dim, keepdim=True))\n"
       "    return torch.exp(z - lse).to(x.dtype)\n")], "exp(x - logsumexp) carries that"),
    ("stable_softmax", "calls torch._softmax (a private binding)",
     [(SM_SUB, "    return torch._softmax(z, dim, False).to(x.dtype)\n")],
     "called torch._softmax: that is the function this exercise rebuilds; write exp(x - max)"),
    ("stable_softmax", "calls Tensor.logsumexp (told this exercise's advice, not online softmax's)",
     [(SM_SUB + "    e = torch.exp(z)\n" + SM_RET,
       "    return torch.exp(z - z.logsumexp(dim=dim, keepdim=True)).to(x.dtype)\n")],
     "called Tensor.logsumexp: that is the function this exercise rebuilds; write exp(x - max)"),
    ("stable_softmax", "naive exp, overflow hidden by nan_to_num",
     [(SM_SUB + "    e = torch.exp(z)\n" + SM_RET,
       "    e = torch.exp(z)\n    return torch.nan_to_num(e / e.sum(dim=dim, keepdim=True), nan=0.0).to(x.dtype)\n")],
     "NaN/Inf was replaced (nan_to_num"),
    # --- online_softmax
    ("online_softmax", "merge forgets to rescale l", [(MERGE_L, "    l = l_a + l_b\n")], "rescaled to the new max"),
    ("online_softmax", "merge rescales only a",
     [(MERGE_L, "    l = l_a * torch.exp(m_a - m_safe) + l_b\n")], "l = l_a*exp(m_a - m)"),
    ("online_softmax", "merge: exp(-inf - (-inf)) = nan on the identity",
     [(MERGE_SAFE, "    m_safe = m\n")], "exp(-inf - (-inf))"),
    ("online_softmax", "stream drops the partial last chunk",
     [("    for start in range(0, N, chunk):\n        c = x[..., start:start + chunk].to(acc)\n        m_c = ",
       "    for start in range(0, N - chunk + 1, chunk):\n        c = x[..., start:start + chunk].to(acc)\n"
       "        m_c = ")], "sum to"),
    ("online_softmax", "chunks one column short: x[..., s:s+chunk-1] leaves a column of every chunk out",
     [(STREAM_LOOP, "    for start in range(0, N, chunk):\n        c = x[..., start:start + chunk - 1].to(acc)\n"
                    "        m_c = ")], "did any chunk hold this column?"),
    ("online_softmax", "output without the max (exp(x) / l)",
     [(STREAM_OUT, "    return (torch.exp(x.to(acc)) / l.unsqueeze(-1)).to(x.dtype)\n")], "subtract the max"),
    ("online_softmax", "all -inf chunk not guarded (causal mask)", [(CHUNK_SAFE, "        m_c_safe = m_c\n")],
     "causal mask"),
    ("online_softmax", "two passes instead of a stream (no merges)",
     [(STREAM_LOOP, "    for start in range(0, 0, chunk):\n        c = x[..., start:start + chunk].to(acc)\n"
                    "        m_c = "),
      ("    m, l = state\n    return (torch.exp",
       "    m = x.to(acc).amax(-1)\n    l = torch.exp(x.to(acc) - m.unsqueeze(-1)).sum(-1)\n    return (torch.exp")],
     "online_softmax_merge was called 0 times"),
    ("online_softmax", "calls torch.logsumexp in the stream",
     [("        l_c = torch.exp(c - m_c_safe.unsqueeze(-1)).sum(dim=-1)\n",
       "        l_c = torch.exp(torch.logsumexp(c, dim=-1) - m_c_safe)\n")], "called torch.logsumexp"),
    ("online_softmax", "chunk states in the input dtype (no upcast)",
     [(STREAM_LOOP, "    for start in range(0, N, chunk):\n        c = x[..., start:start + chunk]\n        m_c = ")],
     "fold chunk states in fp32"),
    ("online_softmax", "output as exp(x - (m + log l)) in fp32",
     [(STREAM_OUT, "    return torch.exp(x.to(acc) - (m + torch.log(l)).unsqueeze(-1)).to(x.dtype)\n")],
     "exp(x - logsumexp) carries that"),
    ("online_softmax", "stream starts from (0, 0), not the identity",
     [("    state = softmax_identity(x.shape[:-1], acc, x.device)\n",
       "    state = (torch.zeros(x.shape[:-1], dtype=acc), torch.zeros(x.shape[:-1], dtype=acc))\n")],
     "Start from the identity (-inf, 0)"),
    ("online_softmax", "stream state built with x.shape (one entry per element)",
     [("    state = softmax_identity(x.shape[:-1], acc, x.device)\n",
       "    state = softmax_identity(x.shape, acc, x.device)\n")], "a state has one entry per row"),
    ("online_softmax", "chunk sum through torch.logcumsumexp",
     [("        l_c = torch.exp(c - m_c_safe.unsqueeze(-1)).sum(dim=-1)\n",
       "        l_c = torch.exp(torch.logcumsumexp(c - m_c_safe.unsqueeze(-1), dim=-1)[..., -1])\n")],
     "called torch.logcumsumexp"),
    # --- welford
    ("welford", "update divides by the old count",
     [("    count = count + 1\n    delta = x - mean\n    mean = mean + delta / count\n",
       "    delta = x - mean\n    mean = mean + delta / count\n    count = count + 1\n")], "the NEW count"),
    ("welford", "update: M2 += delta^2 (both factors before the mean moves)",
     [(UPD_M2, "    m2 = m2 + delta * delta\n")], "one factor measured before the mean moves"),
    ("welford", "update in place (mean += ...)",
     [(UPD_MEAN, "    mean += delta / count\n")], "modified its input in place"),
    ("welford", "Chan: wrong weight for the mean (n_a / n)",
     [("    mean = mean_a + delta * w_b\n", "    mean = mean_a + delta * n_a / n.clamp_min(1)\n")], "n_b / n"),
    ("welford", "Chan: no cross term delta^2 n_a n_b / n", [(CHAN_M2, "    m2 = m2_a + m2_b\n")],
     "delta^2 * n_a * n_b / n"),
    ("welford", "Chan: cross term weighted by n instead of n_a n_b / n",
     [(CHAN_M2, "    m2 = m2_a + m2_b + delta * delta * n\n")], "the spread between the two means"),
    ("welford", "Chan: 0/0 on two empty states", [(CHAN_W, "    w_b = n_b / n\n")], "An empty state (count 0)"),
    # --- var_mean_welford
    ("var_mean_welford", "welford_merge's cross term over n^2 (var_mean itself right): named inside the stream",
     [(CHAN_M2, "    m2 = m2_a + m2_b + delta * delta * n_a * w_b * w_b\n")], "your welford_merge returned a wrong"),
    ("var_mean_welford", "merges the chunks, then returns a separate two-pass result",
     [("    n, mean, m2 = state\n    return (m2 / (n - correction)).to(x.dtype), mean.to(x.dtype)\n",
       "    xf = x.to(acc)\n    mean = xf.mean(dim=-1)\n    m2 = ((xf - mean.unsqueeze(-1)) ** 2).sum(dim=-1)\n"
       "    return (m2 / (N - correction)).to(x.dtype), mean.to(x.dtype)\n")],
     "does not come from its states"),
    ("var_mean_welford", "one-pass variance E[x^2] - E[x]^2",
     [(VAR_M2C, "        m2_c = (c * c).sum(dim=-1) - c.shape[-1] * mean_c * mean_c\n")],
     "catastrophic cancellation"),
    ("var_mean_welford", "always unbiased (ignores correction)",
     [(VAR_RET, "    return (m2 / (n - 1)).to(x.dtype), mean.to(x.dtype)\n")], "biased/unbiased mixed up"),
    ("var_mean_welford", "biased and unbiased swapped",
     [(VAR_RET, "    return (m2 / (n - (1 - correction))).to(x.dtype), mean.to(x.dtype)\n")],
     "biased/unbiased mixed up"),
    ("var_mean_welford", "drops the partial last chunk",
     [("    for start in range(0, N, chunk):\n        c = x[..., start:start + chunk].to(acc)\n        mean_c",
       "    for start in range(0, N - chunk + 1, chunk):\n        c = x[..., start:start + chunk].to(acc)\n"
       "        mean_c")], "last partial chunk"),
    ("var_mean_welford", "returns (mean, var)",
     [(VAR_RET, "    return mean.to(x.dtype), (m2 / (n - correction)).to(x.dtype)\n")], "returns (var, mean)"),
    ("var_mean_welford", "chunks merged by summing M2 (no Chan cross term)",
     [("        state = welford_merge(state, (torch.full_like(mean_c, c.shape[-1]), mean_c, m2_c))\n",
       "        n0, mean0, m20 = state\n        nc = torch.full_like(mean_c, c.shape[-1])\n"
       "        state = (n0 + nc, (n0 * mean0 + nc * mean_c) / (n0 + nc), m20 + m2_c)\n")], "Chan's cross term"),
    ("var_mean_welford", "calls torch.var_mean",
     [(VAR_RET, "    return torch.var_mean(x, dim=-1, correction=correction)\n")], "called torch.var_mean"),
    ("var_mean_welford", "calls torch.ops.aten.var_mean",
     [(VAR_RET, "    return torch.ops.aten.var_mean(x, [-1], correction=correction)\n")],
     "called torch.ops.aten.var_mean: that is the function this exercise rebuilds; compute (count, mean, M2)"),
    ("var_mean_welford", "returns fp32 for fp16 input",
     [(VAR_RET, "    return m2 / (n - correction), mean\n")], "dtype torch.float32, expected torch.float16"),
    ("var_mean_welford", "plain two-pass: no chunks, no welford_merge",
     [("    for start in range(0, N, chunk):\n        c = x[..., start:start + chunk].to(acc)\n        mean_c",
       "    for start in range(0, 0, chunk):\n        c = x[..., start:start + chunk].to(acc)\n        mean_c"),
      (VAR_RET, "    xa = x.to(acc)\n    mean = xa.mean(dim=-1)\n"
                "    return (((xa - mean.unsqueeze(-1)) ** 2).sum(dim=-1) / (N - correction)).to(x.dtype), "
                "mean.to(x.dtype)\n")], "welford_merge was called 0 times"),
    ("var_mean_welford", "computes in the input dtype (fp16, bf16)",
     [("    state = welford_empty(x.shape[:-1], acc, x.device)\n",
       "    state = welford_empty(x.shape[:-1], x.dtype, x.device)\n"),
      (VAR_LOOP, "        c = x[..., start:start + chunk]\n        mean_c = c.mean(dim=-1)\n")],
     "convert each chunk to fp32 before its statistics"),
    ("var_mean_welford", "always fp32, even for fp64 input",
     [("    acc = acc_dtype(x.dtype)\n    state = welford_empty",
       "    acc = torch.float32\n    state = welford_empty")], "convert each chunk to fp64"),
    ("var_mean_welford", "merges for the mean, then var from a second pass over x",
     [(VAR_RET, "    d = x.to(acc) - mean.unsqueeze(-1)\n"
                "    return ((d * d).sum(dim=-1) / (N - correction)).to(x.dtype), mean.to(x.dtype)\n")],
     "var returned does not come from the merged M2"),
    ("var_mean_welford", "the last, shorter chunk merged with count chunk",
     [("torch.full_like(mean_c, c.shape[-1])", "torch.full_like(mean_c, chunk)")],
     "its count is c.shape[-1], not chunk"),
    # --- butterfly_reduce
    ("butterfly_reduce", "partner = lane + offset without wrap (shfl_down)",
     [(BF_ROUND, "        partner = torch.where(lane + offset < WARP, lane + offset, lane)\n"
                 "        theirs = lanes_map(lambda t: t[partner], state)\n        state = merge(state, theirs)\n")],
     "lane ^ offset"),
    ("butterfly_reduce", "partner = (lane + offset) % 32 (a rotation)",
     [(BF_ROUND, "        partner = (lane + offset) % WARP\n        theirs = lanes_map(lambda t: t[partner], state)\n"
                 "        state = merge(state, theirs)\n")], "partner = (lane + offset) % 32"),
    ("butterfly_reduce", "merge(partner's, mine)",
     [(BF_ROUND, BF_ROUND.replace("merge(state, theirs)", "merge(theirs, state)"))], "merge(mine, partner's)"),
    ("butterfly_reduce", "four rounds (offset 1 missing)",
     [("    for offset in (16, 8, 4, 2, 1):\n        partner", "    for offset in (16, 8, 4, 2):\n        partner")],
     "combined 16 of the 32 lanes"),
    ("butterfly_reduce", "partner = lane ^ (2 * offset), wrapped",
     [(BF_ROUND, "        partner = (lane ^ (2 * offset)) % WARP\n        theirs = lanes_map(lambda t: t[partner], state)\n"
                 "        state = merge(state, theirs)\n")], "of the 32 lanes"),
    ("butterfly_reduce", "lanes updated one at a time, in place (a race)",
     [(BF_ROUND, "        for i in range(WARP):\n"
                 "            mine = lanes_map(lambda t: t[i:i + 1], state)\n"
                 "            theirs = lanes_map(lambda t: t[i ^ offset:(i ^ offset) + 1], state)\n"
                 "            new = merge(mine, theirs)\n"
                 "            state = lanes_map(lambda t: t.clone(), state)\n"
                 "            for t, u in zip(state if isinstance(state, tuple) else (state,),\n"
                 "                            new if isinstance(new, tuple) else (new,)):\n"
                 "                t[i] = u[0]\n")], "from before the round"),
    ("butterfly_reduce", "offsets ascending (1, 2, 4, 8, 16)",
     [("    for offset in (16, 8, 4, 2, 1):\n        partner", "    for offset in (1, 2, 4, 8, 16):\n        partner")],
     "16, 8, 4, 2, 1 (descending)"),
    ("butterfly_reduce", "returns lane 0 only",
     [("    return state\n    ### END SOLUTION", "    return lanes_map(lambda t: t[0], state)\n    ### END SOLUTION")],
     "all 32 lanes"),
    # --- from review 02c: states that do not come from the chunks, libraries' variances, precision
    ('online_softmax', 'stream always in fp32, also for fp64 input (acc = torch.float32)',
     [('    acc = acc_dtype(x.dtype)\n    state = softmax_identity(x.shape[:-1], acc, x.device)\n', '    acc = torch.float32\n    state = softmax_identity(x.shape[:-1], acc, x.device)\n')],
     'fold chunk states in fp64'),
    ('online_softmax', 'merges every chunk, then ignores the state: output from a separate two-pass softmax',
     [('    return (torch.exp(x.to(acc) - m.unsqueeze(-1)) / l.unsqueeze(-1)).to(x.dtype)\n', '    xa = x.to(acc)\n    m = xa.amax(-1, keepdim=True)\n    e = torch.exp(xa - m)\n    return (e / e.sum(-1, keepdim=True)).to(x.dtype)\n')],
     'does not come from its final state'),
    ('online_softmax', 'two-pass disguised: every chunk state uses the GLOBAL row max (x.amax first), merged',
     [('        m_c = c.amax(dim=-1)\n', '        m_c = x.to(acc).amax(dim=-1)\n')],
     "first chunk's own max"),
    ('stable_softmax', 'bf16 computed in bf16 (fp32 only for fp16: `acc = float32 if fp16 else x.dtype`)',
     [('    z = x.to(acc_dtype(x.dtype))\n', '    acc = torch.float32 if x.dtype == torch.float16 else x.dtype\n    z = x.to(acc)\n')],
     'bf16 keeps 8 significant bits'),
    ('var_mean_welford', "two-pass disguised: each chunk's M2 around the GLOBAL mean, chunk mean = global mean",
     [('        mean_c = c.mean(dim=-1)\n', '        mean_c = x.to(acc).mean(dim=-1)\n')],
     "first chunk's own mean"),
    ('var_mean_welford', 'merges, then a second pass for var (as mutant) but returns a list [var, mean]',
     [('    return (m2 / (n - correction)).to(x.dtype), mean.to(x.dtype)\n', '    d = x.to(acc) - mean.unsqueeze(-1)\n    return [((d * d).sum(dim=-1) / (N - correction)).to(x.dtype), mean.to(x.dtype)]\n')],
     'does not come from the merged M2'),
    ('var_mean_welford', 'returns the std (sqrt) instead of the variance',
     [('    return (m2 / (n - correction)).to(x.dtype), mean.to(x.dtype)\n', '    return (m2 / (n - correction)).sqrt().to(x.dtype), mean.to(x.dtype)\n')],
     'that is the standard deviation'),
    ('var_mean_welford', "forbidden by another library: chunk M2 from numpy's var (np.var * n)",
     [('        m2_c = ((c - mean_c.unsqueeze(-1)) ** 2).sum(dim=-1)\n', '        import numpy as np\n        m2_c = torch.from_numpy(np.var(c.numpy(), axis=-1) * c.shape[-1]).to(acc)\n')],
     'called numpy.var'),
    ('var_mean_welford', 'forbidden by another name: chunk M2 from torch.cov (a variance)',
     [('        m2_c = ((c - mean_c.unsqueeze(-1)) ** 2).sum(dim=-1)\n', '        rows = c.reshape(-1, c.shape[-1])\n        m2_c = torch.stack([torch.cov(r, correction=0) for r in rows]).reshape(mean_c.shape) * c.shape[-1]\n')],
     'called torch.cov'),
    ('var_mean_welford', "forbidden by another library: statistics.pvariance on each row's chunk",
     [('        m2_c = ((c - mean_c.unsqueeze(-1)) ** 2).sum(dim=-1)\n', '        import statistics\n        rows = c.reshape(-1, c.shape[-1]).tolist()\n        m2_c = torch.tensor([statistics.pvariance(r) * len(r) for r in rows], dtype=acc).reshape(mean_c.shape)\n')],
     'called statistics.pvariance'),
    ('stable_softmax', 'subtracts the row MIN instead of the max',
     [('    z = z - z.amax(dim=dim, keepdim=True)\n', '    z = z - z.amin(dim=dim, keepdim=True)\n')],
     'no row is all -inf'),
    ('online_softmax', "merge: l always relative to a's max (l = l_a + l_b*exp(m_b - m_a)), m = max",
     [('    m_safe = torch.where(m == -math.inf, 0.0, m)       # both -inf: exp(-inf - 0) = 0, not exp(nan)\n    l = l_a * torch.exp(m_a - m_safe) + l_b * torch.exp(m_b - m_safe)\n', '    ms = torch.where(m_a == -math.inf, 0.0, m_a)\n    l = l_a + l_b * torch.exp(m_b - ms)\n')],
     'returned a wrong (m, l) inside the stream'),
]
