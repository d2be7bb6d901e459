"""Deliberately wrong versions of the lesson 01 solution, as exact text edits of its code cells.

Each mutant: (exercise id, name, [(old, new), ...], substring expected in a failing case's message).
"""
LESSON = "01_pytorch_norms"

BN_VAR = "        var, mean = torch.var_mean(xf, dim=dims, keepdim=True, correction=0)   # biased: normalizes the batch\n"
BN_RM = "                running_mean.mul_(1 - momentum).add_(momentum * mean.reshape(-1))\n"
BN_RV = "                running_var.mul_(1 - momentum).add_(momentum * m / (m - 1) * var.reshape(-1))\n"
BN_Y = "    y = (xf - mean) * torch.rsqrt(var + eps)\n    if weight is not None:\n        y = y * weight.to(xf.dtype).reshape(channel_shape(x))\n"
LN_DIMS = "    dims = tuple(range(x.ndim - len(shape), x.ndim))  # the trailing len(normalized_shape) dims\n"
LN_VAR = LN_DIMS + "    xf = x.to(compute_dtype(x))\n    var, mean = torch.var_mean(xf, dim=dims, keepdim=True, correction=0)\n"
RMS_Y = "    y = xf * torch.rsqrt(xf.square().mean(dim=dims, keepdim=True) + eps)\n"
GN_G = "    xg = xf.reshape(N, num_groups, -1)               # one row per (sample, group of consecutive channels)\n"
GN_VAR = GN_G + "    var, mean = torch.var_mean(xg, dim=-1, keepdim=True, correction=0)\n"
NZ_VAR = "        var, mean = torch.var_mean(xf, dim=dims, keepdim=True, correction=0)\n        out = (xf - mean) * torch.rsqrt(var + eps)\n"

MUTANTS = [
    # --- batch_norm
    ("batch_norm", "unbiased variance used to normalize",
     [(BN_VAR, BN_VAR.replace("correction=0", "correction=1"))], "unbiased variance"),
    ("batch_norm", "biased variance in the running estimate",
     [(BN_RV, BN_RV.replace("momentum * m / (m - 1) * var", "momentum * var"))], "the biased batch variance"),
    ("batch_norm", "running stats not updated in place (rebinding)",
     [(BN_RM + BN_RV,
       "                running_mean = (1 - momentum) * running_mean + momentum * mean.reshape(-1)\n"
       "                running_var = (1 - momentum) * running_var + momentum * m / (m - 1) * var.reshape(-1)\n")],
     "in place"),
    ("batch_norm", "running stats replaced through .data (new memory)",
     [(BN_RM, "                running_mean.data = (1 - momentum) * running_mean + momentum * mean.reshape(-1)\n")],
     "new memory"),
    ("batch_norm", "eval still using batch statistics",
     [("    if training:\n        if m < 2:", "    if True:\n        if training and m < 2:")], "in eval mode"),
    ("batch_norm", "momentum applied the wrong way round",
     [(BN_RM, BN_RM.replace("mul_(1 - momentum).add_(momentum * mean", "mul_(momentum).add_((1 - momentum) * mean")),
      (BN_RV, BN_RV.replace("mul_(1 - momentum).add_(momentum * m", "mul_(momentum).add_((1 - momentum) * m"))],
     "wrong way round"),
    ("batch_norm", "mean over the wrong dims (batch dim only)",
     [("    dims = [0] + list(range(2, x.ndim))              # S_i of BatchNorm",
       "    dims = [0]              # S_i of BatchNorm")], "wrong dims"),
    ("batch_norm", "eps outside the sqrt",
     [(BN_Y, BN_Y.replace("* torch.rsqrt(var + eps)", "/ (torch.sqrt(var) + eps)"))], "outside the square root"),
    ("batch_norm", "running stats updated inside autograd (no torch.no_grad)",
     [("            with torch.no_grad():                    # bookkeeping, not part of the graph\n" + BN_RM + BN_RV,
       "            if True:\n" + BN_RM + BN_RV)], "no_grad"),
    ("batch_norm", "no check for a batch of one",
     [("        if m < 2:\n", "        if m < 1:\n")], "more than 1 value per channel"),
    ("batch_norm", "result left in float32",
     [(BN_Y, BN_Y.replace("    if weight is not None:\n", "    x = xf\n    if weight is not None:\n", 1))], "dtype"),
    ("batch_norm", "bias ignored when there is no weight",
     [(BN_Y + "    if bias is not None:\n        y = y + bias.to(xf.dtype).reshape(channel_shape(x))\n",
       BN_Y + "        if bias is not None:\n            y = y + bias.to(xf.dtype).reshape(channel_shape(x))\n")],
     "does not mean bias=None"),
    ("batch_norm", "unbiased correction with the batch size N / (N - 1)",
     [(BN_RV, BN_RV.replace("m / (m - 1)", "x.shape[0] / (x.shape[0] - 1)"))], "not the batch size"),
    ("batch_norm", "calls F.batch_norm",
     [("    dims = [0] + list(range(2, x.ndim))              # S_i of BatchNorm",
       "    return F.batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps)\n"
       "    dims = [0] + list(range(2, x.ndim))              # S_i of BatchNorm")], "F.batch_norm"),
    ("batch_norm", "affine step left out",
     [(BN_Y + "    if bias is not None:\n        y = y + bias.to(xf.dtype).reshape(channel_shape(x))\n",
       "    y = (xf - mean) * torch.rsqrt(var + eps)\n")], "without the affine step"),
    ("batch_norm", "no eps",
     [(BN_Y, BN_Y.replace("rsqrt(var + eps)", "rsqrt(var)"))], "no eps"),
    ("batch_norm", "normalizes with the updated running stats in training",
     [("    else:\n        mean = running_mean.to(xf.dtype)", "    if running_mean is not None:\n"
       "        mean = running_mean.to(xf.dtype)")], "running statistics in training"),
    ("batch_norm", "fp16 computed in fp16 (only bf16 upcast)",
     [("    xf = x.to(compute_dtype(x))\n    if training:\n",
       "    xf = x.float() if x.dtype == torch.bfloat16 else x\n    if training:\n")], "fp16 squares above 65504"),
    ("batch_norm", "x changed in place (a float32 x is its own xf)",
     [(BN_Y, BN_Y.replace("    y = (xf - mean) * torch.rsqrt(var + eps)\n",
                          "    y = xf.sub_(mean).mul_(torch.rsqrt(var + eps)) if not xf.requires_grad else "
                          "(xf - mean) * torch.rsqrt(var + eps)\n"))], "changed its input x in place"),
    ("batch_norm", "running stats updated before the batch-of-one check",
     [("        if m < 2:\n            raise ValueError(f\"Expected more than 1 value per channel when training, got input "
       "size {tuple(x.shape)}\")\n", ""),
      (BN_RM + BN_RV, BN_RM + "                if m < 2:\n                    raise ValueError('Expected more than 1 value "
                              "per channel when training')\n" + BN_RV)], "changed before it was raised"),
    # --- batch_norm_module
    ("batch_norm_module", "weight and bias not passed to batch_norm",
     [("self.running_var, self.weight, self.bias,", "self.running_var, None, None,")], "without the affine step"),
    ("batch_norm_module", "momentum=None treated as no update",
     [("            if self.momentum is None:                # cumulative moving average\n"
       "                factor = 1.0 / float(self.num_batches_tracked)\n", "")], "cumulative moving average"),
    ("batch_norm_module", "num_batches_tracked never incremented",
     [("            self.num_batches_tracked.add_(1)\n", "")], "num_batches_tracked"),
    ("batch_norm_module", "eval still using batch statistics",
     [("        use_batch_stats = self.training or self.running_mean is None\n", "        use_batch_stats = True\n")],
     "running statistics"),
    ("batch_norm_module", "counter and factor updated in eval too",
     [("        if self.training and self.track_running_stats:\n", "        if self.track_running_stats:\n")],
     "never in eval"),
    ("batch_norm_module", "running stats as plain attributes (not buffers)",
     [('            self.register_buffer("running_mean", torch.zeros(num_features))\n'
       '            self.register_buffer("running_var", torch.ones(num_features))\n',
       "            self.running_mean = torch.zeros(num_features)\n"
       "            self.running_var = torch.ones(num_features)\n")], "register_buffer"),
    ("batch_norm_module", "weight initialised to zeros",
     [("            self.weight = nn.Parameter(torch.ones(num_features))\n",
       "            self.weight = nn.Parameter(torch.zeros(num_features))\n")], "weight ones"),
    ("batch_norm_module", "wraps nn.BatchNorm1d",
     [("        use_batch_stats = self.training or self.running_mean is None\n",
       "        return nn.functional.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,\n"
       "                                        self.training, factor, self.eps)\n")], "scores zero"),
    ("batch_norm_module", "built on torch's _BatchNorm",
     [("class BatchNorm(nn.Module):", "class BatchNorm(nn.modules.batchnorm._BatchNorm):"),
      ("        super().__init__()\n        self.num_features, self.eps",
       "        super().__init__(num_features, eps, momentum, affine, track_running_stats)\n        self.num_features, self.eps")],
     "subclasses torch's torch.nn.modules.batchnorm._BatchNorm"),
    # --- layer_norm
    ("layer_norm", "unbiased variance used to normalize",
     [(LN_VAR, LN_VAR.replace("correction=0", "correction=1"))], "unbiased variance"),
    ("layer_norm", "eps outside the sqrt",
     [(LN_VAR + "    y = (xf - mean) * torch.rsqrt(var + eps)\n",
       LN_VAR + "    y = (xf - mean) / (torch.sqrt(var) + eps)\n")], "outside the square root"),
    ("layer_norm", "mean over the last dim only",
     [(LN_DIMS, "    dims = (-1,)\n")], "last dim only"),
    ("layer_norm", "computed in the input's dtype (bf16 math)",
     [(LN_VAR, LN_VAR.replace("xf = x.to(compute_dtype(x))", "xf = x"))], "float32"),
    ("layer_norm", "bf16 computed in fp16 (only fp16 is precise enough?)",
     [(LN_VAR, LN_VAR.replace("xf = x.to(compute_dtype(x))",
                              "xf = x.half() if x.dtype == torch.bfloat16 else x.to(compute_dtype(x))"))],
     "not float16"),
    ("layer_norm", "bias ignored when there is no weight",
     [("        y = y * weight.to(xf.dtype)\n    if bias is not None:\n        y = y + bias.to(xf.dtype)\n",
       "        y = y * weight.to(xf.dtype)\n        if bias is not None:\n            y = y + bias.to(xf.dtype)\n")],
     "does not mean bias=None"),
    ("layer_norm", "one-pass E[x^2] - E[x]^2 variance",
     [(LN_VAR, LN_DIMS + "    xf = x.to(compute_dtype(x))\n    mean = xf.mean(dim=dims, keepdim=True)\n"
       "    var = (xf * xf).mean(dim=dims, keepdim=True) - mean * mean\n")], "cancels catastrophically"),
    ("layer_norm", "calls torch.ops.aten.native_layer_norm (the kernel behind F.layer_norm)",
     [(LN_DIMS, "    return torch.ops.aten.native_layer_norm(x, list(shape), weight, bias, eps)[0]\n" + LN_DIMS)],
     "called torch.ops.aten.native_layer_norm"),
    ("layer_norm", "statistics without keepdim=True",
     [(LN_VAR, LN_VAR.replace("keepdim=True, correction=0", "correction=0"))], "reduce with keepdim=True"),
    ("layer_norm", "affine step left out",
     [("    y = (xf - mean) * torch.rsqrt(var + eps)\n    if weight is not None:\n        y = y * weight.to(xf.dtype)\n"
       "    if bias is not None:\n        y = y + bias.to(xf.dtype)\n", "    y = (xf - mean) * torch.rsqrt(var + eps)\n")],
     "without the affine step"),
    ("layer_norm", "PyTorch's decomposition, looked up in torch._decomp.decomposition_table (bound before the call)",
     [("def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):\n",
       "from torch._decomp import decomposition_table as _table\n_decomposed = _table[torch.ops.aten.native_layer_norm.default]\n\n\n"
       "def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):\n"),
      (LN_DIMS, LN_DIMS + "    return _decomposed(x, list(shape), weight, bias, eps)[0]\n")],
     "called torch._refs.native_layer_norm"),
    ("layer_norm", "torch._refs.native_layer_norm (PyTorch's Python reference)",
     [(LN_DIMS, LN_DIMS + "    import torch._refs\n    return torch._refs.native_layer_norm(x, list(shape), weight, bias, eps)[0]\n")],
     "called torch._refs.native_layer_norm"),
    # --- rms_norm
    ("rms_norm", "calls torch.ops.aten.rms_norm.default",
     [("    dims = tuple(range(x.ndim - len(shape), x.ndim))\n    xf = x.to(compute_dtype(x))\n",
       "    return torch.ops.aten.rms_norm.default(x, list(shape), weight, eps)\n"
       "    dims = tuple(range(x.ndim - len(shape), x.ndim))\n    xf = x.to(compute_dtype(x))\n")],
     "called torch.ops.aten.rms_norm"),
    ("rms_norm", "eps=None read as finfo(x.dtype).eps",
     [("        eps = torch.finfo(xf.dtype).eps              # epsilon of the compute dtype, not of x.dtype\n",
       "        eps = torch.finfo(x.dtype).eps\n")], "finfo(bfloat16)"),
    ("rms_norm", "eps=None read as 0",
     [("        eps = torch.finfo(xf.dtype).eps              # epsilon of the compute dtype, not of x.dtype\n",
       "        eps = 0.0\n")], "eps = 0"),
    ("rms_norm", "subtracts the mean (LayerNorm)",
     [(RMS_Y, "    xf = xf - xf.mean(dim=dims, keepdim=True)\n" + RMS_Y)], "does not subtract the mean"),
    ("rms_norm", "eps outside the sqrt",
     [(RMS_Y, "    y = xf / (torch.sqrt(xf.square().mean(dim=dims, keepdim=True)) + eps)\n")], "outside the square root"),
    ("rms_norm", "computed in fp16 (squares overflow)",
     [("    dims = tuple(range(x.ndim - len(shape), x.ndim))\n    xf = x.to(compute_dtype(x))\n",
       "    dims = tuple(range(x.ndim - len(shape), x.ndim))\n    xf = x\n")], "overflow"),
    ("rms_norm", "mean over the last dim only",
     [("    dims = tuple(range(x.ndim - len(shape), x.ndim))\n    xf = x.to(compute_dtype(x))\n    if eps is None:",
       "    dims = (-1,)\n    xf = x.to(compute_dtype(x))\n    if eps is None:")], "last dim only"),
    ("rms_norm", "torch._C._VariableFunctions.rms_norm (a composite on the CPU)",
     [(RMS_Y, "    return torch._C._VariableFunctions.rms_norm(x, list(shape), weight, eps)\n")], "called torch.rms_norm"),
    ("rms_norm", "eps=None as fp16's own epsilon",
     [("        eps = torch.finfo(xf.dtype).eps", "        eps = torch.finfo(x.dtype if x.dtype != torch.bfloat16 else torch.float32).eps")],
     "torch.finfo(float16).eps"),
    # --- group_norm
    ("group_norm", "affine step left out",
     [("    y = ((xg - mean) * torch.rsqrt(var + eps)).reshape(x.shape)\n    if weight is not None:\n"
       "        y = y * weight.to(xf.dtype).reshape(channel_shape(x))\n    if bias is not None:\n"
       "        y = y + bias.to(xf.dtype).reshape(channel_shape(x))\n",
       "    y = ((xg - mean) * torch.rsqrt(var + eps)).reshape(x.shape)\n")], "without the affine step"),
    ("group_norm", "no divisibility check",
     [("    if C % num_groups != 0:\n        raise ValueError(f\"num_channels ({C}) must be divisible by num_groups "
       "({num_groups})\")\n", "")], "no error"),
    ("group_norm", "interleaved groups (c % G)",
     [(GN_VAR, "    xg = xf.reshape(N, C // num_groups, num_groups, -1)\n"
       "    var, mean = torch.var_mean(xg, dim=(1, 3), keepdim=True, correction=0)\n")], "consecutive"),
    ("group_norm", "unbiased variance used to normalize",
     [(GN_VAR, GN_VAR.replace("correction=0", "correction=1"))], "unbiased variance"),
    ("group_norm", "eps outside the sqrt",
     [("    y = ((xg - mean) * torch.rsqrt(var + eps)).reshape(x.shape)\n",
       "    y = ((xg - mean) / (torch.sqrt(var) + eps)).reshape(x.shape)\n")], "outside the square root"),
    ("group_norm", "statistics per sample only (G ignored)",
     [(GN_G, "    xg = xf.reshape(N, 1, -1)\n")], "wrong set"),
    ("group_norm", "instance_norm not through group_norm",
     [("    return group_norm(x, x.shape[1], weight, bias, eps)\n",
       "    xf = x.to(compute_dtype(x))\n"
       "    var, mean = torch.var_mean(xf, dim=tuple(range(2, x.ndim)), keepdim=True, correction=0)\n"
       "    y = (xf - mean) * torch.rsqrt(var + eps)\n"
       "    if weight is not None:\n        y = y * weight.to(xf.dtype).reshape(channel_shape(x))\n"
       "    if bias is not None:\n        y = y + bias.to(xf.dtype).reshape(channel_shape(x))\n"
       "    return y.to(x.dtype)\n")], "never called group_norm"),
    ("group_norm", "bias ignored when there is no weight",
     [("    y = ((xg - mean) * torch.rsqrt(var + eps)).reshape(x.shape)\n    if weight is not None:\n"
       "        y = y * weight.to(xf.dtype).reshape(channel_shape(x))\n    if bias is not None:\n"
       "        y = y + bias.to(xf.dtype).reshape(channel_shape(x))\n",
       "    y = ((xg - mean) * torch.rsqrt(var + eps)).reshape(x.shape)\n    if weight is not None:\n"
       "        y = y * weight.to(xf.dtype).reshape(channel_shape(x))\n        if bias is not None:\n"
       "            y = y + bias.to(xf.dtype).reshape(channel_shape(x))\n")], "does not mean bias=None"),
    ("group_norm", "instance_norm checks only the last dim for one spatial element",
     [("    if math.prod(x.shape[2:]) < 2:\n", "    if x.shape[-1] < 2:\n")], "spatial"),
    ("group_norm", "instance_norm accepts one spatial element",
     [("    if math.prod(x.shape[2:]) < 2:\n", "    if math.prod(x.shape[2:]) < 1:\n")], "spatial"),
    ("group_norm", "instance_norm checks only the first spatial dim",
     [("    if math.prod(x.shape[2:]) < 2:", "    if x.ndim < 3 or x.shape[2] < 2:")], "raised ValueError"),
    # --- normalize
    ("normalize", "unbiased variance used to normalize",
     [(NZ_VAR, NZ_VAR.replace("correction=0", "correction=1"))], "unbiased variance"),
    ("normalize", "eps outside the sqrt",
     [(NZ_VAR, NZ_VAR.replace("* torch.rsqrt(var + eps)", "/ (torch.sqrt(var) + eps)"))], "outside the square root"),
    ("normalize", "computed in the input's dtype",
     [("    xf = x.to(compute_dtype(x))\n    if center:\n", "    xf = x\n    if center:\n")], "float32"),
    ("normalize", "batch kind over the batch dim only",
     [('        y = normalize(x, [0] + list(range(2, x.ndim)), eps)\n', '        y = normalize(x, 0, eps)\n')],
     "every dim except the channels"),
    ("normalize", "rms kind with the mean subtracted",
     [('center=(kind == "layer"))', "center=True)")], "center=False"),
    ("normalize", "groups interleaved in the reshape",
     [("        y = normalize(x.reshape(x.shape[0], num_groups, -1), -1, eps).reshape(x.shape)\n",
       "        y = normalize(x.reshape(x.shape[0], -1, num_groups), 1, eps).reshape(x.shape)\n")], "consecutive"),
    ("normalize", "instance kind also over the channels",
     [("        y = normalize(x, list(range(2, x.ndim)), eps)\n", "        y = normalize(x, list(range(1, x.ndim)), eps)\n")],
     "spatial dims"),
    ("normalize", "normalize called twice (the right numbers)",
     [("        y = normalize(x, list(range(2, x.ndim)), eps)\n",
       "        y = normalize(x, list(range(2, x.ndim)), eps)\n        y = normalize(x, list(range(2, x.ndim)), eps)\n")],
     "called normalize 2 times"),
    ("group_norm", "instance_norm calls group_norm twice (the right numbers)",
     [("    return group_norm(x, x.shape[1], weight, bias, eps)\n",
       "    group_norm(x, x.shape[1], weight, bias, eps)\n    return group_norm(x, x.shape[1], weight, bias, eps)\n")],
     "called group_norm 2 times"),
    ("normalize", "norm_via_normalize drops eps (normalize's default)",
     [("        y = normalize(x, list(range(x.ndim - k, x.ndim)), eps, center=(kind == \"layer\"))",
       "        y = normalize(x, list(range(x.ndim - k, x.ndim)), center=(kind == \"layer\"))")], "pass eps on"),
    ("normalize", "float64 computed in float32",
     [("    xf = x.to(compute_dtype(x))\n    if center:", "    xf = x.to(torch.float32)\n    if center:")],
     "float32's precision"),
]
