"""The kernel library: torch-facing operations written with opus's public language (each module
says its design; docs/ops.md lists them). Import it as ``opus.ops``."""
from . import gemm_hopper, _gemm_args
from .gemm_hopper import relu, gelu_tanh, silu
from .norm_quant import rmsnorm, rmsnorm_quant, per_token_quant, per_group_quant
from .rowsoftmax import softmax
from .rowtopk import topk

__all__ = ["gemm", "scaled_gemm", "relu", "gelu_tanh", "silu", "rmsnorm", "rmsnorm_quant", "per_token_quant",
           "per_group_quant", "softmax", "topk"]


def gemm(a, b, out=None, *, bias=None, activation=None, residual=None, blocks=None,
         block_n=None, stages=None, block_m=None, split_k=None, body=None):
    """``a @ b`` for bf16/f16 matrices with the current target's kernel: NVIDIA sm_90a
    (ops/gemm_hopper.py: TMA, warp-specialized wgmma) or AMD gfx942/gfx950 (ops/gemm_amd.py:
    tiled MFMA). Torch tensors run on the GPU, numpy arrays in the interpreter.

    :param a: M x K, bf16 or f16, row-major
    :param b: K x N of a's dtype: row-major, or the transpose of a row-major N x K tensor
    :param out: M x N of a's dtype, row-major (made when None)
    :param bias: N values of the output's type added to every row
    :param activation: a Python function of one f32 value (``opus.ops.relu``, ``gelu_tanh``,
        ``silu`` or your own, written with opus operations), applied after the bias in the
        kernel (the same function on both vendors)
    :param residual: M x N of the output's type added last
    :param blocks: sm_90a: persistent blocks to launch
    :param block_n: the block tile's width (each kernel lists its choices)
    :param stages: sm_90a: shared-memory stages in flight
    :param split_k: sm_90a: K splits per output tile (split-K; default: the plan's rule)
    :param block_m: the block tile's height: AMD 128 or 256, sm_90a 128 or 64
    :param body: sm_90a: the kernel's rendering, "ptx" (a PTX body: half the compile time) or
        "cuda" (C++); default: the plan's choice (docs/ops.md)
    :returns: out
    :targets: sm_90a, gfx942, gfx950
    """
    done = gemm_hopper.fast(a, b, out, None, None, None, bias, activation, residual,
                            (blocks, block_n, stages, split_k, block_m, body), False)
    if done is not None:     # torch tensors of layouts planned before (sm_90a)
        return done
    from ..frontend.targeting import current_target
    if current_target().target.vendor == "amd":
        if split_k is not None:
            _gemm_args.err("split_k= is an sm_90a option (the AMD kernel does not split K)")
        if body is not None:
            _gemm_args.err("body= is an sm_90a option (the AMD kernel is HIP C++)")
        for name, value in (("blocks", blocks), ("stages", stages)):
            if value is not None:
                _gemm_args.err(f"{name}= is an sm_90a option (the AMD kernel is not "
                                 f"persistent and keeps two LDS stages); the AMD kernel takes "
                                 f"block_m and block_n")
        from .gemm_amd import gemm as gemm_amd
        return gemm_amd(a, b, out, bias=bias, activation=activation, residual=residual,
                        block_m=block_m, block_n=block_n)
    return gemm_hopper.gemm(a, b, out, bias=bias, activation=activation, residual=residual,
                            blocks=blocks, block_n=block_n, stages=stages, split_k=split_k,
                            block_m=block_m, body=body)


def scaled_gemm(a, b, scale_a, scale_b, out=None, *, out_dtype=None, fast_accum=False,
                bias=None, activation=None, residual=None, blocks=None, block_n=None,
                stages=None, split_k=None, block_m=None, body=None):
    """``(a @ b) * scale_a * scale_b`` for fp8 matrices (as ``torch._scaled_mm``), then the
    epilogue, with the current target's kernel: NVIDIA sm_90a (``gemm_hopper.scaled_gemm``:
    e4m3/e5m2, its options ``fast_accum``, ``blocks``, ``stages``, ``split_k``, ``body``) or AMD
    gfx942/gfx950 (``gemm_amd.scaled_gemm``: the chip's fp8, FNUZ on gfx942 and OCP on gfx950,
    ``block_m``). Arguments as ``gemm``'s, plus f32 scales (one value, or one per row of a /
    column of b) and ``out_dtype`` (bf16 by default, f16, f32); b is the transpose of a
    row-major N x K tensor.

    :targets: sm_90a, gfx942, gfx950
    """
    if block_m is None:
        done = gemm_hopper.fast(a, b, out, scale_a, scale_b, out_dtype, bias, activation,
                                residual, (blocks, block_n, stages, split_k, None, body),
                                not fast_accum)
        if done is not None:
            return done
    from ..frontend.targeting import current_target
    if current_target().target.vendor == "amd":
        for name, value in (("blocks", blocks), ("stages", stages), ("split_k", split_k),
                            ("body", body)):
            if value is not None:
                _gemm_args.err(f"{name}= is an sm_90a option; the AMD kernel takes block_m "
                                 f"and block_n")
        from .gemm_amd import scaled_gemm as scaled_gemm_amd
        return scaled_gemm_amd(a, b, scale_a, scale_b, out, out_dtype=out_dtype,
                               fast_accum=fast_accum, bias=bias, activation=activation,
                               residual=residual, block_m=block_m, block_n=block_n)
    if block_m is not None:
        _gemm_args.err("block_m= is an AMD option; the sm_90a kernel's tile is 128 rows")
    return gemm_hopper.scaled_gemm(a, b, scale_a, scale_b, out, out_dtype=out_dtype,
                                   fast_accum=fast_accum, bias=bias, activation=activation,
                                   residual=residual, blocks=blocks, block_n=block_n,
                                   stages=stages, split_k=split_k, body=body)


def _define_torch_ops():
    """torch.ops.opus.* defined with opus.ops where torch is installed: a first call inside a
    torch.compile'd region cannot define them (Dynamo does not trace torch.library's
    definitions), so they must exist before it."""
    import importlib.util
    if importlib.util.find_spec("torch") is None:
        return
    from . import norm_quant, rowsoftmax, rowtopk
    norm_quant._define_torch_ops()
    rowsoftmax._torch_ops()
    rowtopk._torch_ops()


_define_torch_ops()
