"""Special values against PyTorch 1.13: NaN and +-inf through reductions,
comparisons and sorting; empty tensors (a 0-length dim) through every
reduction, matmul, cat/stack and indexing; 0-d tensors and promotion;
integer division, remainder and overflow; pow, log and sqrt off their
domains; bfloat16 rounding, overflow, promotion and accumulation; and the
numerically stable forms (log_softmax, cross entropy, logsumexp, BCE's
clamped log, the activations at their extremes, gradients at ties and
kinks). Writes tests/fixtures/special_values.lua, read by
tests/lua/special_values_spec.lua.

    /usr/bin/python3 tests/gen_special_values_fixtures.py

Each line of CASES is `name ;; ember expression ;; torch expression`, with
an optional `;; anyzero` where the sign of a zero result is an accident of
either side's formula (the spec then ignores it; elsewhere -0 and 0 must
match). The ember side is Lua, evaluated by the spec with T (float32), I
(int64), B (bfloat16), D (float64), E (zeros), nan, inf, ember and F
(ember.nn.functional); ember's indices are 1-based, so the torch side adds
1 to each index it returns (vi: values and indices + 1). The fixture holds
torch's result per case: its outputs (dtype, shape, values), a Lua number
or boolean, or its error (the spec asks ember for an error too).

Where ember differs from torch on purpose the case is not here but in the
spec's own checks, with the reason: cross_entropy's "mean" of no counted
target (0, documented), layer_norm's two-pass variance (torch 1.13 loses
digits on [1e4, 1e4 + 1, 1e4 + 2]), bfloat16 prod (torch 1.13 has none)
and matmul (torch 1.13's CPU kernel accumulates in bfloat16: ones(3000) .
ones(3000) = 256), binary_cross_entropy of a NaN probability (torch raises:
NaN is not in [0, 1]; ember gives NaN), floor_divide(INT64_MIN, -1) (torch
1.13 dies with SIGFPE; ember wraps), torch.mode's index among NaNs.
"""
import math

import torch
import torch.nn.functional as Fn

from fixture_writer import lua_float

nan, inf = float("nan"), float("inf")


def T(v): return torch.tensor(v, dtype=torch.float32)
def I(v): return torch.tensor(v, dtype=torch.int64)
def B(v): return torch.tensor(v, dtype=torch.bfloat16)
def D(v): return torch.tensor(v, dtype=torch.float64)
def E(*s): return torch.zeros(*s)
def vi(r): return (r[0], r[1] + 1)


CASES = r"""
max_full ;; ember.max(T{1,nan,3}) ;; torch.max(T([1,nan,3]))
min_full ;; ember.min(T{1,nan,3}) ;; torch.min(T([1,nan,3]))
max_dim ;; T{{1,nan,3},{4,5,6}}:max(2) ;; vi(T([[1,nan,3],[4,5,6]]).max(1))
min_dim ;; T{{1,nan,3},{4,5,6}}:min(2) ;; vi(T([[1,nan,3],[4,5,6]]).min(1))
max_dim_inf ;; T{{-inf,-inf},{inf,1}}:max(2) ;; vi(T([[-inf,-inf],[inf,1]]).max(1))
amax ;; ember.amax(T{{1,nan,3},{4,5,6}}, 2) ;; torch.amax(T([[1,nan,3],[4,5,6]]), 1)
amin ;; ember.amin(T{{1,nan,3},{4,5,6}}, 2) ;; torch.amin(T([[1,nan,3],[4,5,6]]), 1)
amax_full ;; ember.amax(T{1,nan,3}) ;; torch.amax(T([1,nan,3]))
argmax_full ;; ember.argmax(T{1,nan,3}) ;; torch.argmax(T([1,nan,3]))+1
argmin_full ;; ember.argmin(T{1,nan,3}) ;; torch.argmin(T([1,nan,3]))+1
argmax_dim ;; ember.argmax(T{{1,nan,3},{4,6,6}}, 2) ;; torch.argmax(T([[1,nan,3],[4,6,6]]), 1)+1
argmax_ties ;; ember.argmax(T{2,5,5,1}) ;; torch.argmax(T([2,5,5,1]))+1
argmin_ties ;; ember.argmin(T{2,1,1,5}) ;; torch.argmin(T([2,1,1,5]))+1
maximum ;; ember.maximum(T{1,nan,3}, T{nan,2,1}) ;; torch.maximum(T([1,nan,3]), T([nan,2,1]))
minimum ;; ember.minimum(T{1,nan,3}, T{nan,2,1}) ;; torch.minimum(T([1,nan,3]), T([nan,2,1]))
maximum_zero ;; ember.maximum(T{0,-0.0}, T{-0.0,0}) ;; torch.maximum(T([0,-0.0]), T([-0.0,0])) ;; anyzero
fmax ;; ember.fmax(T{1,nan,3,nan}, T{nan,2,1,nan}) ;; torch.fmax(T([1,nan,3,nan]), T([nan,2,1,nan]))
fmin ;; ember.fmin(T{1,nan,3,nan}, T{nan,2,1,nan}) ;; torch.fmin(T([1,nan,3,nan]), T([nan,2,1,nan]))
clamp ;; ember.clamp(T{nan,-5,5,0.5}, -1, 1) ;; torch.clamp(T([nan,-5,5,0.5]), -1, 1)
clamp_min ;; T{nan,-5,5}:clamp(0) ;; T([nan,-5,5]).clamp(0)
clamp_inf ;; T{-inf,inf}:clamp(-1,1) ;; T([-inf,inf]).clamp(-1,1)
clamp_min_gt_max ;; T{0,5,10}:clamp(6,2) ;; T([0,5,10]).clamp(6,2)
sort ;; T{3,nan,1,-inf,inf}:sort() ;; vi(T([3,nan,1,-inf,inf]).sort())
sort_desc ;; T{3,nan,1,-inf,inf}:sort(1, true) ;; vi(T([3,nan,1,-inf,inf]).sort(descending=True))
argsort ;; T{3,nan,1,nan,0}:argsort() ;; T([3,nan,1,nan,0]).argsort()+1
topk ;; T{3,nan,1,inf}:topk(2) ;; vi(T([3,nan,1,inf]).topk(2))
topk_small ;; T{3,nan,1,inf}:topk(2, 1, false) ;; vi(T([3,nan,1,inf]).topk(2, largest=False))
median ;; ember.median(T{1,nan,3}) ;; torch.median(T([1,nan,3]))
median_even ;; ember.median(T{4,1,3,2}) ;; torch.median(T([4,1,3,2]))
median_dim ;; T{{1,nan,3},{4,1,2}}:median(2) ;; vi(T([[1,nan,3],[4,1,2]]).median(1))
nanmedian ;; ember.nanmedian(T{1,nan,3,4}) ;; torch.nanmedian(T([1,nan,3,4]))
nanmedian_allnan ;; ember.nanmedian(T{nan,nan}) ;; torch.nanmedian(T([nan,nan]))
quantile ;; ember.quantile(T{1,nan,3}, 0.5) ;; torch.quantile(T([1,nan,3]), 0.5)
nanquantile ;; ember.nanquantile(T{1,nan,3}, 0.5) ;; torch.nanquantile(T([1,nan,3]), 0.5)
quantile_inf ;; ember.quantile(T{-inf,inf}, 0.5) ;; torch.quantile(T([-inf,inf]), 0.5)
cummax ;; ember.cummax(T{1,nan,3,2}, 1) ;; vi(torch.cummax(T([1,nan,3,2]), 0))
cummin ;; ember.cummin(T{1,nan,3,0}, 1) ;; vi(torch.cummin(T([1,nan,3,0]), 0))
cummax_ties ;; ember.cummax(T{1,3,3,2}, 1) ;; vi(torch.cummax(T([1,3,3,2]), 0))
cumsum ;; T{1,nan,2}:cumsum(1) ;; T([1,nan,2]).cumsum(0)
cumsum_inf ;; T{inf,-inf,1}:cumsum(1) ;; T([inf,-inf,1]).cumsum(0)
cumprod_zero ;; T{2,0,inf}:cumprod(1) ;; T([2,0,inf]).cumprod(0)
logsumexp_nan ;; T{1,nan}:logsumexp(1) ;; T([1,nan]).logsumexp(0)
logsumexp_neginf ;; T{-inf,-inf}:logsumexp(1) ;; T([-inf,-inf]).logsumexp(0)
logsumexp_inf ;; T{inf,1}:logsumexp(1) ;; T([inf,1]).logsumexp(0)
logsumexp_infinf ;; T{inf,inf}:logsumexp(1) ;; T([inf,inf]).logsumexp(0)
logsumexp_big ;; T{1e4,1e4}:logsumexp(1) ;; T([1e4,1e4]).logsumexp(0)
softmax_nan ;; T{1,nan,2}:softmax(1) ;; T([1,nan,2]).softmax(0)
softmax_neginf ;; T{-inf,-inf}:softmax(1) ;; T([-inf,-inf]).softmax(0)
softmax_inf ;; T{inf,1}:softmax(1) ;; T([inf,1]).softmax(0)
softmax_partneginf ;; T{-inf,0,-inf}:softmax(1) ;; T([-inf,0,-inf]).softmax(0)
log_softmax_nan ;; T{1,nan,2}:log_softmax(1) ;; T([1,nan,2]).log_softmax(0)
log_softmax_neginf ;; T{-inf,-inf}:log_softmax(1) ;; T([-inf,-inf]).log_softmax(0)
log_softmax_partneginf ;; T{-inf,0}:log_softmax(1) ;; T([-inf,0]).log_softmax(0)
log_softmax_far ;; T{0,1e4}:log_softmax(1) ;; T([0,1e4]).log_softmax(0)
F_softmax_neginf ;; F.softmax(T{{-inf,-inf},{0,0}}, 2) ;; Fn.softmax(T([[-inf,-inf],[0,0]]), 1)
mean_nan ;; T{1,nan}:mean() ;; T([1,nan]).mean()
mean_infs ;; T{inf,-inf}:mean() ;; T([inf,-inf]).mean()
var_nan ;; T{1,nan,2}:var() ;; T([1,nan,2]).var()
var_inf ;; T{1,inf}:var() ;; T([1,inf]).var()
std_nan ;; T{1,nan}:std() ;; T([1,nan]).std()
var_one ;; T{5}:var() ;; T([5]).var()
std_one ;; T{5}:std() ;; T([5]).std()
var_one_biased ;; T{5}:var(false) ;; T([5]).var(unbiased=False)
var_one_dim ;; T{{5},{6}}:var(2) ;; T([[5],[6]]).var(1)
norm_nan ;; T{1,nan}:norm() ;; T([1,nan]).norm()
norm_infnan ;; T{inf,nan}:norm() ;; T([inf,nan]).norm()
norm_inf ;; T{-inf,1}:norm() ;; T([-inf,1]).norm()
norm_pinf_nan ;; T{1,nan}:norm(math.huge) ;; T([1,nan]).norm(float('inf'))
norm_big ;; T{3e30,4e30}:norm() ;; T([3e30,4e30]).norm()
norm_tiny ;; T{3e-30,4e-30}:norm() ;; T([3e-30,4e-30]).norm()
prod_zeroinf ;; T{0,inf}:prod() ;; T([0,inf]).prod()
prod_nan ;; T{nan,0}:prod() ;; T([nan,0]).prod()
all_nan ;; T{nan,1}:all() ;; T([nan,1]).all()
any_nan ;; T{nan,0}:any() ;; T([nan,0]).any()
all_float0 ;; T{-0.0,1}:all() ;; T([-0.0,1]).all()
unique_nan ;; ember.unique(T{nan,1,nan,1}) ;; torch.unique(T([nan,1,nan,1]))
isclose ;; ember.isclose(T{nan,1,inf,inf}, T{nan,1,inf,-inf}) ;; torch.isclose(T([nan,1,inf,inf]), T([nan,1,inf,-inf]))
isclose_eqnan ;; ember.isclose(T{nan,1}, T{nan,1}, {equal_nan=true}) ;; torch.isclose(T([nan,1]), T([nan,1]), equal_nan=True)
isclose_int ;; ember.isclose(I{1,2}, I{1,3}) ;; torch.isclose(I([1,2]), I([1,3]))
allclose_nan ;; ember.allclose(T{nan}, T{nan}) ;; torch.allclose(T([nan]), T([nan]))
allclose_nan_eq ;; ember.allclose(T{nan}, T{nan}, {equal_nan=true}) ;; torch.allclose(T([nan]), T([nan]), equal_nan=True)
allclose_inf ;; ember.allclose(T{inf}, T{inf}) ;; torch.allclose(T([inf]), T([inf]))
equal_nan ;; ember.equal(T{nan}, T{nan}) ;; torch.equal(T([nan]), T([nan]))
equal_zero ;; ember.equal(T{0}, T{-0.0}) ;; torch.equal(T([0]), T([-0.0]))
equal_shape ;; ember.equal(T{1}, T{1,1}) ;; torch.equal(T([1]), T([1,1]))
eq_nan ;; T{nan,1}:eq(T{nan,1}) ;; T([nan,1]).eq(T([nan,1]))
ne_nan ;; T{nan,1}:ne(T{nan,1}) ;; T([nan,1]).ne(T([nan,1]))
lt_nan ;; T{nan,1,-inf}:lt(T{1,nan,inf}) ;; T([nan,1,-inf]).lt(T([1,nan,inf]))
ge_nan_scalar ;; T{nan,1}:ge(nan) ;; T([nan,1]).ge(nan)
eq_zero_signed ;; T{0}:eq(T{-0.0}) ;; T([0]).eq(T([-0.0]))
nan_to_num ;; ember.nan_to_num(T{nan,inf,-inf,1}) ;; torch.nan_to_num(T([nan,inf,-inf,1]))
nansum ;; ember.nansum(T{nan,1,2}) ;; torch.nansum(T([nan,1,2]))
nanmean ;; ember.nanmean(T{nan,1,2}) ;; torch.nanmean(T([nan,1,2]))
nanmean_all ;; ember.nanmean(T{nan,nan}) ;; torch.nanmean(T([nan,nan]))
sign_nan ;; T{nan,-0.0,0,-2}:sign() ;; T([nan,-0.0,0,-2]).sign()
abs_negzero ;; T{-0.0,-inf,nan}:abs() ;; T([-0.0,-inf,nan]).abs()
relu_nan ;; T{nan,-1,-0.0}:relu() ;; T([nan,-1,-0.0]).relu()
# empty tensors
e_sum ;; E(0):sum() ;; E(0).sum()
e_prod ;; E(0):prod() ;; E(0).prod()
e_mean ;; E(0):mean() ;; E(0).mean()
e_max ;; E(0):max() ;; E(0).max()
e_min ;; E(0):min() ;; E(0).min()
e_amax ;; ember.amax(E(0)) ;; torch.amax(E(0))
e_argmax ;; ember.argmax(E(0)) ;; torch.argmax(E(0))
e_var ;; E(0):var() ;; E(0).var()
e_std ;; E(0):std() ;; E(0).std()
e_norm ;; E(0):norm() ;; E(0).norm()
e_all ;; E(0):all() ;; E(0).all()
e_any ;; E(0):any() ;; E(0).any()
e_logsumexp ;; E(0):logsumexp(1) ;; E(0).logsumexp(0)
e_median ;; E(0):median() ;; E(0).median()
e_nanmedian ;; ember.nanmedian(E(0)) ;; torch.nanmedian(E(0))
e_quantile ;; ember.quantile(E(0), 0.5) ;; torch.quantile(E(0), 0.5)
e_cumsum ;; E(0):cumsum(1) ;; E(0).cumsum(0)
e_cumprod ;; E(0):cumprod(1) ;; E(0).cumprod(0)
e_cummax ;; ember.cummax(E(0), 1) ;; vi(torch.cummax(E(0), 0))
e_sort ;; E(0):sort() ;; vi(E(0).sort())
e_topk0 ;; E(0):topk(0) ;; vi(E(0).topk(0))
e_unique ;; ember.unique(E(0)) ;; torch.unique(E(0))
e_softmax ;; E(0):softmax(1) ;; E(0).softmax(0)
e_log_softmax ;; E(0):log_softmax(1) ;; E(0).log_softmax(0)
e_nansum ;; ember.nansum(E(0)) ;; torch.nansum(E(0))
e2_sum_d2 ;; E(2,0):sum(2) ;; E(2,0).sum(1)
e2_sum_d1 ;; E(2,0):sum(1) ;; E(2,0).sum(0)
e2_prod_d2 ;; E(2,0):prod(2) ;; E(2,0).prod(1)
e2_mean_d2 ;; E(2,0):mean(2) ;; E(2,0).mean(1)
e2_max_d2 ;; E(2,0):max(2) ;; vi(E(2,0).max(1))
e2_max_d1 ;; E(2,0):max(1) ;; vi(E(2,0).max(0))
e2_amax_d2 ;; ember.amax(E(2,0), 2) ;; torch.amax(E(2,0), 1)
e2_amax_d1 ;; ember.amax(E(2,0), 1) ;; torch.amax(E(2,0), 0)
e2_argmax_d1 ;; ember.argmax(E(2,0), 1) ;; torch.argmax(E(2,0), 0)+1
e2_var_d2 ;; E(2,0):var(2) ;; E(2,0).var(1)
e2_norm_d2 ;; E(2,0):norm(2, 2) ;; E(2,0).norm(2, 1)
e2_logsumexp_d2 ;; E(2,0):logsumexp(2) ;; E(2,0).logsumexp(1)
e2_softmax_d2 ;; E(2,0):softmax(2) ;; E(2,0).softmax(1)
e2_softmax_d1 ;; E(0,3):softmax(2) ;; E(0,3).softmax(1)
e2_all_d2 ;; E(2,0):all(2) ;; E(2,0).all(1)
e2_any_d2 ;; E(2,0):any(2) ;; E(2,0).any(1)
e2_cumsum_d2 ;; E(2,0):cumsum(2) ;; E(2,0).cumsum(1)
e2_sort_d1 ;; E(0,3):sort(1) ;; vi(E(0,3).sort(0))
e_matmul_k0 ;; E(2,0):matmul(E(0,3)) ;; E(2,0).matmul(E(0,3))
e_matmul_k0_bf16 ;; E(2,0):bfloat16():matmul(E(0,3):bfloat16()) ;; E(2,0).bfloat16().matmul(E(0,3).bfloat16())
e_matmul_m0 ;; E(0,4):matmul(E(4,3)) ;; E(0,4).matmul(E(4,3))
e_bmm_k0 ;; E(2,3,0):matmul(E(2,0,4)) ;; E(2,3,0).matmul(E(2,0,4))
e_dot ;; E(0):dot(E(0)) ;; E(0).dot(E(0))
e_mv ;; E(2,0):mv(E(0)) ;; E(2,0).mv(E(0))
e_linear_k0 ;; F.linear(E(2,0), E(3,0), T{1,2,3}) ;; Fn.linear(E(2,0), E(3,0), T([1,2,3]))
e_cat1d ;; ember.cat({E(0), T{1,2}}) ;; torch.cat([E(0), T([1,2])])
e_cat_d2 ;; ember.cat({E(2,0), T{{1},{2}}}, 2) ;; torch.cat([E(2,0), T([[1],[2]])], 1)
e_cat_d1 ;; ember.cat({E(0,2), T{{1,2}}}, 1) ;; torch.cat([E(0,2), T([[1,2]])], 0)
e_cat_all ;; ember.cat({E(0), E(0)}) ;; torch.cat([E(0), E(0)])
e_stack ;; ember.stack({E(0), E(0)}) ;; torch.stack([E(0), E(0)])
e_stack_d2 ;; ember.stack({E(0,3), E(0,3)}, 2) ;; torch.stack([E(0,3), E(0,3)], 1)
e_index_select ;; T{1,2,3}:index_select(1, I{}) ;; T([1,2,3]).index_select(0, I([]))
e_index_select2 ;; T{{1,2},{3,4}}:index_select(1, I{}) ;; T([[1,2],[3,4]]).index_select(0, I([]))
e_gather ;; T{{1,2},{3,4}}:gather(2, ember.zeros({2,0},{dtype="int64"})) ;; T([[1,2],[3,4]]).gather(1, torch.zeros(2,0,dtype=torch.int64))
e_masked_select ;; T{1,2}:masked_select(T{0,0}:bool()) ;; T([1,2]).masked_select(T([0,0]).bool())
e_index_tensor ;; T{1,2,3}[I{}] ;; T([1,2,3])[I([])]
e_nonzero ;; ember.nonzero(T{0,0}) ;; torch.nonzero(T([0,0]))+1
e_index_put ;; T{1,2,3}:index_fill(1, I{}, 9) ;; T([1,2,3]).index_fill(0, I([]), 9)
e_embedding ;; F.embedding(I{}, T{{1,2},{3,4}}) ;; Fn.embedding(I([]), T([[1,2],[3,4]]))
e_layer_norm ;; ember.layer_norm(E(0,3), 1) ;; Fn.layer_norm(E(0,3), [3])
e_mse ;; F.mse_loss(E(0), E(0)) ;; Fn.mse_loss(E(0), E(0))
# 0-d, broadcasting, promotion
z_bcast ;; ember.tensor(3.0) + T{{1,2}} ;; torch.tensor(3.0) + T([[1,2]])
z_int0d_float ;; ember.tensor(3, {dtype="int64"}) + T{1,2} ;; torch.tensor(3) + T([1,2])
z_f64_0d_f32 ;; ember.tensor(3.5, {dtype="float64"}) + T{1,2} ;; torch.tensor(3.5, dtype=torch.float64) + T([1,2])
z_f32_int1d ;; ember.tensor(0.5) + I{1,2} ;; torch.tensor(0.5) + I([1,2])
z_f64_0d_int1d ;; ember.tensor(0.5, {dtype="float64"}) + I{1,2} ;; torch.tensor(0.5, dtype=torch.float64) + I([1,2])
z_0d_0d ;; ember.tensor(2, {dtype="int64"}) * ember.tensor(1.5, {dtype="float64"}) ;; torch.tensor(2) * torch.tensor(1.5, dtype=torch.float64)
z_int_luafloat ;; I{1,2} * 1.5 ;; I([1,2]) * 1.5
z_int_luaint ;; I{1,2} * 3 ;; I([1,2]) * 3
z_bool_int ;; T{1,0}:bool() + 1 ;; T([1,0]).bool() + 1
z_bool_bool ;; T{1,0}:bool() + T{1,1}:bool() ;; T([1,0]).bool() + T([1,1]).bool()
z_int_div ;; I{1,2} / I{2,2} ;; I([1,2]) / I([2,2])
z_0d_sum ;; ember.tensor(3.0):sum() ;; torch.tensor(3.0).sum()
z_0d_max_dim ;; ember.tensor(3.0):max(1) ;; vi(torch.tensor(3.0).max(0))
z_0d_softmax ;; ember.tensor(3.0):softmax(1) ;; torch.tensor(3.0).softmax(0)
z_0d_cat ;; ember.cat({ember.tensor(1.0), ember.tensor(2.0)}) ;; torch.cat([torch.tensor(1.0), torch.tensor(2.0)])
z_0d_stack ;; ember.stack({ember.tensor(1.0), ember.tensor(2.0)}) ;; torch.stack([torch.tensor(1.0), torch.tensor(2.0)])
z_0d_matmul ;; ember.tensor(2.0):matmul(ember.tensor(3.0)) ;; torch.tensor(2.0).matmul(torch.tensor(3.0))
z_0d_item ;; ember.tensor(2.5):item() ;; torch.tensor(2.5).item()
z_0d_index ;; T{1,2,3}[ember.tensor(2, {dtype="int64"})] ;; T([1,2,3])[torch.tensor(1)]
# integer arithmetic
i_floordiv ;; ember.floor_divide(I{-7,7,-7,7}, I{2,2,-2,-2}) ;; torch.floor_divide(I([-7,7,-7,7]), I([2,2,-2,-2]))
i_remainder ;; ember.remainder(I{-7,7,-7,7}, I{2,2,-2,-2}) ;; torch.remainder(I([-7,7,-7,7]), I([2,2,-2,-2]))
i_fmod ;; ember.fmod(I{-7,7,-7,7}, I{2,2,-2,-2}) ;; torch.fmod(I([-7,7,-7,7]), I([2,2,-2,-2]))
i_div_trunc ;; ember.div(I{-7,7,-7,7}, I{2,2,-2,-2}, {rounding_mode="trunc"}) ;; torch.div(I([-7,7,-7,7]), I([2,2,-2,-2]), rounding_mode="trunc")
i_div_floor ;; ember.div(I{-7,7,-7,7}, I{2,2,-2,-2}, {rounding_mode="floor"}) ;; torch.div(I([-7,7,-7,7]), I([2,2,-2,-2]), rounding_mode="floor")
i_div_true ;; ember.div(I{-7,7}, I{2,-2}) ;; torch.div(I([-7,7]), I([2,-2]))
i_idiv_op ;; I{-7,7} // 2 ;; I([-7,7]) // 2
i_mod_op ;; I{-7,7} % 3 ;; I([-7,7]) % 3
i_mod_op_neg ;; I{-7,7} % -3 ;; I([-7,7]) % -3
f_remainder ;; ember.remainder(T{-7.5,7.5,-0.0}, T{2,-2,2}) ;; torch.remainder(T([-7.5,7.5,-0.0]), T([2,-2,2]))
f_fmod ;; ember.fmod(T{-7.5,7.5,5}, T{2,-2,0}) ;; torch.fmod(T([-7.5,7.5,5]), T([2,-2,0]))
f_remainder_zero ;; ember.remainder(T{5,-5}, T{0,0}) ;; torch.remainder(T([5,-5]), T([0,0]))
f_remainder_inf ;; ember.remainder(T{5,-5}, T{inf,inf}) ;; torch.remainder(T([5,-5]), T([inf,inf]))
f_floordiv ;; ember.floor_divide(T{-7.5,7.5,1}, T{2,2,0}) ;; torch.floor_divide(T([-7.5,7.5,1]), T([2,2,0]))
f_mod_op ;; T{-7.5,7.5} % 2 ;; T([-7.5,7.5]) % 2
f_idiv_op ;; T{-7.5,7.5} // 2 ;; T([-7.5,7.5]) // 2
i_overflow_mul ;; I{4611686018427387904} * 4 ;; I([4611686018427387904]) * 4
i_overflow_add ;; I{9223372036854775807} + 1 ;; I([9223372036854775807]) + 1
i_overflow_neg ;; -I{math.mininteger} ;; -I([-9223372036854775808])
i_abs_min ;; I{math.mininteger}:abs() ;; I([-9223372036854775808]).abs()
i_sum_overflow ;; I{9223372036854775807, 1}:sum() ;; I([9223372036854775807, 1]).sum()
i_floordiv_zero ;; ember.floor_divide(I{1}, I{0}) ;; torch.floor_divide(I([1]), I([0]))
i_remainder_zero ;; ember.remainder(I{1}, I{0}) ;; torch.remainder(I([1]), I([0]))
i_fmod_zero ;; ember.fmod(I{1}, I{0}) ;; torch.fmod(I([1]), I([0]))
i_div_trunc_zero ;; ember.div(I{1}, I{0}, {rounding_mode="trunc"}) ;; torch.div(I([1]), I([0]), rounding_mode="trunc")
i_div_zero ;; I{1,-1,0} / I{0,0,0} ;; I([1,-1,0]) / I([0,0,0])
i_idiv_op_zero ;; I{1} // 0 ;; I([1]) // 0
i_mod_op_zero ;; I{1} % 0 ;; I([1]) % 0
i_pow_neg ;; I{2} ^ I{-1} ;; I([2]) ** I([-1])
i_pow_neg_scalar ;; ember.pow(I{2}, -1) ;; torch.pow(I([2]), -1)
i_pow_negbase ;; ember.pow(I{-2}, 3) ;; torch.pow(I([-2]), 3)
i_pow_float ;; ember.pow(I{2}, 0.5) ;; torch.pow(I([2]), 0.5)
i_pow_one_neg ;; ember.pow(I{1,-1}, I{-1,-1}) ;; torch.pow(I([1,-1]), I([-1,-1]))
f_pow_negfrac ;; ember.pow(T{-8,-2,-2}, T{1/3,0.5,2}) ;; torch.pow(T([-8,-2,-2]), T([1/3,0.5,2]))
f_pow_zero ;; ember.pow(T{0,0,0,-0.0}, T{-1,0,0.5,-1}) ;; torch.pow(T([0,0,0,-0.0]), T([-1,0,0.5,-1]))
f_pow_nan0 ;; ember.pow(T{nan,1}, T{0,nan}) ;; torch.pow(T([nan,1]), T([0,nan]))
f_pow_scalar_base ;; ember.pow(-2, T{0.5,2}) ;; torch.pow(-2, T([0.5,2]))
f_pow_neg_inf ;; ember.pow(T{-inf,-inf,-1}, T{3,2,inf}) ;; torch.pow(T([-inf,-inf,-1]), T([3,2,inf]))
f_log_neg ;; T{-1,0,-0.0,inf}:log() ;; T([-1,0,-0.0,inf]).log()
f_sqrt_neg ;; T{-1,-0.0,inf}:sqrt() ;; T([-1,-0.0,inf]).sqrt()
f_rsqrt ;; T{0,-1,inf}:rsqrt() ;; T([0,-1,inf]).rsqrt()
f_zero_inf ;; T{0,-0.0} * inf ;; T([0,-0.0]) * inf
f_div_zero ;; T{1,-1,0,-0.0} / 0 ;; T([1,-1,0,-0.0]) / 0
f_div_negzero ;; T{1,-1} / T{-0.0,-0.0} ;; T([1,-1]) / T([-0.0,-0.0])
f_neg_zero ;; -T{0} ;; -T([0])
f_inf_minus_inf ;; T{inf} - inf ;; T([inf]) - inf
f_exp_big ;; T{89,-104,nan}:exp() ;; T([89,-104,nan]).exp()
f_reciprocal ;; T{0,-0.0}:reciprocal() ;; T([0,-0.0]).reciprocal()
f_atan2 ;; ember.atan2(T{0,-0.0,0}, T{-1,-1,0}) ;; torch.atan2(T([0,-0.0,0]), T([-1,-1,0]))
f_round_half ;; T{0.5,1.5,2.5,-0.5}:round() ;; T([0.5,1.5,2.5,-0.5]).round()
f_floor_negzero ;; T{-0.5,0.5}:ceil() ;; T([-0.5,0.5]).ceil()
f_trunc ;; T{-0.5,-1.5}:trunc() ;; T([-0.5,-1.5]).trunc()
f_int_cast_nan ;; T{1.7,-1.7,-0.5}:long() ;; T([1.7,-1.7,-0.5]).long()
f_xlogy ;; ember.xlogy(T{0,0,1}, T{0,nan,0}) ;; torch.xlogy(T([0,0,1]), T([0,nan,0]))
f_logaddexp_neginf ;; ember.logaddexp(T{-inf,inf}, T{-inf,inf}) ;; torch.logaddexp(T([-inf,inf]), T([-inf,inf]))
# bf16
b_tie_low ;; B{1.00390625, 1.01171875, -1.00390625} ;; B([1.00390625, 1.01171875, -1.00390625])
b_tie_cast ;; T{1.00390625, 1.01171875, 257, 259}:bfloat16() ;; T([1.00390625, 1.01171875, 257, 259]).bfloat16()
b_overflow ;; T{3.4e38, -3.4e38, 3.38e38}:bfloat16() ;; T([3.4e38, -3.4e38, 3.38e38]).bfloat16()
b_overflow_mul ;; B{3e38} * 2 ;; B([3e38]) * 2
b_nan_cast ;; T{nan,inf,-0.0}:bfloat16() ;; T([nan,inf,-0.0]).bfloat16()
b_subnormal ;; T{1e-39, 1e-41}:bfloat16() ;; T([1e-39, 1e-41]).bfloat16()
b_plus_f32 ;; B{1.5} + T{1.00390625} ;; B([1.5]) + T([1.00390625])
b_plus_lua ;; B{1} + 1.00390625 ;; B([1]) + 1.00390625
b_plus_f64_0d ;; B{1} + ember.tensor(1.00390625, {dtype="float64"}) ;; B([1]) + torch.tensor(1.00390625, dtype=torch.float64)
b_plus_f32_0d ;; B{1} + ember.tensor(1.00390625) ;; B([1]) + torch.tensor(1.00390625)
b_plus_int ;; B{1} + I{300} ;; B([1]) + I([300])
b_sum_many ;; ember.ones(3000, {dtype="bfloat16"}):sum() ;; torch.ones(3000, dtype=torch.bfloat16).sum()
b_sum_many2 ;; (ember.ones(5000, {dtype="bfloat16"}) * 0.1):sum() ;; (torch.ones(5000, dtype=torch.bfloat16) * 0.1).sum()
b_mean_many ;; (ember.ones(5000, {dtype="bfloat16"}) * 0.1):mean() ;; (torch.ones(5000, dtype=torch.bfloat16) * 0.1).mean()
b_cumsum ;; ember.ones(300, {dtype="bfloat16"}):cumsum(1)[300] ;; torch.ones(300, dtype=torch.bfloat16).cumsum(0)[299]
b_eq_lua ;; B{1.00390625}:eq(1.00390625) ;; B([1.00390625]).eq(1.00390625)
b_gt_lua ;; B{1}:gt(1.001) ;; B([1]).gt(1.001)
b_lt_lua ;; B{1}:lt(1.001) ;; B([1]).lt(1.001)
b_eq_f32 ;; B{1}:eq(T{1.00390625}) ;; B([1]).eq(T([1.00390625]))
b_max_nan ;; B{1,nan}:max() ;; B([1,nan]).max()
b_sort_nan ;; B{3,nan,1}:sort() ;; vi(B([3,nan,1]).sort())
b_softmax ;; B{1,2,3}:softmax(1) ;; B([1,2,3]).softmax(0)
b_matmul ;; B{{1.00390625, 1}}:matmul(B{{1},{1}}) ;; B([[1.00390625, 1]]).matmul(B([[1],[1]]))
b_div ;; B{1} / 3 ;; B([1]) / 3
b_var ;; B{1,2,3,4}:var() ;; B([1,2,3,4]).var()
b_to_int ;; B{257.5, -1.5}:long() ;; B([257.5, -1.5]).long()
b_int_to_bf16 ;; I{257, 16777217}:bfloat16() ;; I([257, 16777217]).bfloat16()
b_item ;; B{1.00390625}:item() ;; B([1.00390625]).item()
# stable forms
s_ce_far ;; F.cross_entropy(T{{0,1e4},{0,1e4}}, I{2,1}, {reduction="none"}) ;; Fn.cross_entropy(T([[0,1e4],[0,1e4]]), I([1,0]), reduction="none") ;; anyzero
s_ce_neginf ;; F.cross_entropy(T{{-inf,0}}, I{1}) ;; Fn.cross_entropy(T([[-inf,0]]), I([0]))
s_ce_neginf_ok ;; F.cross_entropy(T{{-inf,0}}, I{2}) ;; Fn.cross_entropy(T([[-inf,0]]), I([1]))
s_ce_smooth_neginf ;; F.cross_entropy(T{{-inf,0}}, I{2}, {label_smoothing=0.1}) ;; Fn.cross_entropy(T([[-inf,0]]), I([1]), label_smoothing=0.1)
s_nll_far ;; F.nll_loss(T{{0,1e4}}:log_softmax(2), I{1}) ;; Fn.nll_loss(T([[0,1e4]]).log_softmax(1), I([0]))
s_layer_norm_const ;; ember.layer_norm(T{{5,5,5}}, 1) ;; Fn.layer_norm(T([[5,5,5]]), [3])
s_rms_norm_zero ;; F.rms_norm(T{{0,0,0}}, {3}) ;; T([[0,0,0]]) * torch.rsqrt(T([[0,0,0]]).pow(2).mean(-1, keepdim=True) + 1e-6)
s_sigmoid ;; T{-100,100,-1e4,nan}:sigmoid() ;; T([-100,100,-1e4,nan]).sigmoid()
s_tanh ;; T{-100,100,nan,-0.0}:tanh() ;; T([-100,100,nan,-0.0]).tanh() ;; anyzero
s_softplus ;; F.softplus(T{-100,100,1e4,-1e4,0}) ;; Fn.softplus(T([-100,100,1e4,-1e4,0]))
s_softplus_beta ;; F.softplus(T{-100,30,100}, 2, 20) ;; Fn.softplus(T([-100,30,100]), 2, 20)
s_logsigmoid ;; F.logsigmoid(T{-1e4,1e4,0}) ;; Fn.logsigmoid(T([-1e4,1e4,0])) ;; anyzero
s_log1p ;; T{-1,1e-10,-2,-0.0}:log1p() ;; T([-1,1e-10,-2,-0.0]).log1p()
s_expm1 ;; T{1e-10,100,-100,-0.0}:expm1() ;; T([1e-10,100,-100,-0.0]).expm1()
s_gelu ;; F.gelu(T{-1e4,1e4,nan}) ;; Fn.gelu(T([-1e4,1e4,nan])) ;; anyzero
s_silu ;; F.silu(T{-1e4,1e4,-inf}) ;; Fn.silu(T([-1e4,1e4,-inf]))
s_elu ;; F.elu(T{-1e4,-inf}) ;; Fn.elu(T([-1e4,-inf]))
s_bce_clamp ;; F.binary_cross_entropy(T{0,1}, T{1,0}, {reduction="none"}) ;; Fn.binary_cross_entropy(T([0,1]), T([1,0]), reduction="none")
s_bce_exact ;; F.binary_cross_entropy(T{0,1}, T{0,1}, {reduction="none"}) ;; Fn.binary_cross_entropy(T([0,1]), T([0,1]), reduction="none") ;; anyzero
s_bce_half ;; F.binary_cross_entropy(T{0,1}, T{0.5,0.5}, {reduction="none"}) ;; Fn.binary_cross_entropy(T([0,1]), T([0.5,0.5]), reduction="none")
s_bce_out_of_range ;; F.binary_cross_entropy(T{1.5}, T{1}) ;; Fn.binary_cross_entropy(T([1.5]), T([1]))
s_bce_logits_far ;; F.binary_cross_entropy_with_logits(T{1e4,-1e4,1e4}, T{0,1,1}, {reduction="none"}) ;; Fn.binary_cross_entropy_with_logits(T([1e4,-1e4,1e4]), T([0,1,1]), reduction="none")
s_kl_zero ;; F.kl_div(T{-inf,0}, T{0,1}, {reduction="none"}) ;; Fn.kl_div(T([-inf,0]), T([0,1]), reduction="none")
s_mse_inf ;; F.mse_loss(T{inf}, T{inf}) ;; Fn.mse_loss(T([inf]), T([inf]))
s_huber_inf ;; F.huber_loss(T{inf,1}, T{0,1}, {reduction="none"}) ;; Fn.huber_loss(T([inf,1]), T([0,1]), reduction="none")
s_cos_sim_zero ;; F.cosine_similarity(T{{0,0}}, T{{1,0}}) ;; Fn.cosine_similarity(T([[0,0]]), T([[1,0]]))
s_normalize_zero ;; F.normalize(T{{0,0}}) ;; Fn.normalize(T([[0,0]]))
s_logit ;; ember.logit(T{0,1,0.5}) ;; torch.logit(T([0,1,0.5]))
s_erfinv ;; ember.erfinv(T{1,-1,2}) ;; torch.erfinv(T([1,-1,2]))
s_lgamma ;; ember.lgamma(T{0,-1,inf}) ;; torch.lgamma(T([0,-1,inf]))
s_digamma ;; ember.digamma(T{0,-1,-0.0}) ;; torch.digamma(T([0,-1,-0.0]))
max_dim_nanfirst ;; T{{nan,nan,3}}:max(2) ;; vi(T([[nan,nan,3]]).max(1))
min_dim_nan2 ;; T{{2,nan,nan}}:min(2) ;; vi(T([[2,nan,nan]]).min(1))
topk_2nan ;; T{nan,1,nan,3}:topk(3) ;; vi(T([nan,1,nan,3]).topk(3))
sort2d_nan ;; T{{nan,1},{2,nan}}:sort(1) ;; vi(T([[nan,1],[2,nan]]).sort(0))
sort_stable ;; T{1,0,1,0,1}:sort() ;; vi(T([1,0,1,0,1]).sort(stable=True))
sort_negzero ;; T{0,-0.0,0,-0.0}:sort() ;; vi(T([0,-0.0,0,-0.0]).sort(stable=True))
kthvalue_nan ;; ember.kthvalue(T{3,nan,1}, 3) ;; vi(torch.kthvalue(T([3,nan,1]), 3))
kthvalue ;; ember.kthvalue(T{3,nan,1}, 1) ;; vi(torch.kthvalue(T([3,nan,1]), 1))
median_allnan_dim ;; T{{nan,nan}}:median(2) ;; vi(T([[nan,nan]]).median(1))
nanmedian_dim ;; ember.nanmedian(T{{1,nan,3},{nan,nan,nan}}, 2) ;; vi(torch.nanmedian(T([[1,nan,3],[nan,nan,nan]]), 1))
i_max ;; I{3,-7,5}:max() ;; I([3,-7,5]).max()
i_argmax ;; ember.argmax(I{3,5,5}) ;; torch.argmax(I([3,5,5]))+1
i_mean ;; I{1,2}:mean() ;; I([1,2]).mean()
i_var ;; I{1,2}:var() ;; I([1,2]).var()
i_prod_overflow ;; I{4294967296,4294967296}:prod() ;; I([4294967296,4294967296]).prod()
i_cumsum_overflow ;; I{9223372036854775807,1}:cumsum(1) ;; I([9223372036854775807,1]).cumsum(0)
i_softmax ;; I{1,2}:softmax(1) ;; I([1,2]).softmax(0)
i_norm ;; I{3,4}:norm() ;; I([3,4]).norm()
bool_sum ;; T{1,0,1}:bool():sum() ;; T([1,0,1]).bool().sum()
bool_cumsum ;; T{1,0,1}:bool():cumsum(1) ;; T([1,0,1]).bool().cumsum(0)
bool_max ;; T{1,0,1}:bool():max() ;; T([1,0,1]).bool().max()
bool_prod ;; T{1,0,1}:bool():prod() ;; T([1,0,1]).bool().prod()
i_div_luazero ;; I{1,0} / 0 ;; I([1,0]) / 0
i_eq_float ;; I{1,2}:eq(1.5) ;; I([1,2]).eq(1.5)
i_eq_big_f32 ;; I{9007199254740993}:eq(T{9007199254740992}) ;; I([9007199254740993]).eq(T([9007199254740992]))
i_lt_lua_float ;; I{1,2}:lt(1.5) ;; I([1,2]).lt(1.5)
i_plus_big_luaint ;; T{1} + 16777217 ;; T([1]) + 16777217
i_to_f32 ;; I{16777217}:float() ;; I([16777217]).float()
var_corr2 ;; T{1,2}:var({correction=2}) ;; T([1,2]).var(dim=0, correction=2)
var_corr3 ;; T{1,2}:var({correction=3}) ;; T([1,2]).var(dim=0, correction=3)
std_corr0_one ;; T{4}:std({correction=0}) ;; T([4]).std(dim=0, correction=0)
quantile_q_out ;; ember.quantile(T{1,2}, 1.5) ;; torch.quantile(T([1,2]), 1.5)
quantile_q_nan ;; ember.quantile(T{1,2}, nan) ;; torch.quantile(T([1,2]), nan)
quantile_lower ;; ember.quantile(T{1,2,3,4}, 0.5, {interpolation="lower"}) ;; torch.quantile(T([1,2,3,4]), 0.5, interpolation="lower")
D_max_nan ;; D{1,nan}:max() ;; D([1,nan]).max()
D_sort_nan ;; D{nan,1}:sort() ;; vi(D([nan,1]).sort())
D_log_softmax_far ;; D{0,1e300}:log_softmax(1) ;; D([0,1e300]).log_softmax(0)
D_softmax_neginf ;; D{-inf,-inf}:softmax(1) ;; D([-inf,-inf]).softmax(0)
D_amax ;; ember.amax(D{{nan,1}}, 2) ;; torch.amax(D([[nan,1]]), 1)
D_cummax ;; ember.cummax(D{nan,1}, 1) ;; vi(torch.cummax(D([nan,1]), 0))
b_amax_nan ;; ember.amax(B{{1,nan}}, 2) ;; torch.amax(B([[1,nan]]), 1)
b_logsumexp_neginf ;; B{-inf,-inf}:logsumexp(1) ;; B([-inf,-inf]).logsumexp(0)
b_softmax_neginf ;; B{-inf,-inf}:softmax(1) ;; B([-inf,-inf]).softmax(0)
b_log_softmax_far ;; B{0,1e4}:log_softmax(1) ;; B([0,1e4]).log_softmax(0)
b_softmax_long ;; ember.ones(1000, {dtype="bfloat16"}):softmax(1)[1] ;; torch.ones(1000, dtype=torch.bfloat16).softmax(0)[0]
b_norm ;; ember.ones(1000, {dtype="bfloat16"}):norm() ;; torch.ones(1000, dtype=torch.bfloat16).norm()
b_cumsum_long ;; ember.ones(3000, {dtype="bfloat16"}):cumsum(1)[3000] ;; torch.ones(3000, dtype=torch.bfloat16).cumsum(0)[2999]
b_layer_norm ;; ember.layer_norm(B{{1,2,3,4}}, 1) ;; Fn.layer_norm(B([[1,2,3,4]]), [4])
b_var_many ;; (ember.arange(0, 1000):bfloat16()):var() ;; torch.arange(0, 1000).bfloat16().var()
b_mean_int_range ;; (ember.arange(0, 1000):bfloat16()):mean() ;; torch.arange(0, 1000).bfloat16().mean()
b_f64_promote ;; B{1} + D{1} ;; B([1]) + D([1])
b_f64_0d ;; B{1} * ember.tensor(1e300, {dtype="float64"}) ;; B([1]) * torch.tensor(1e300, dtype=torch.float64)
b_lua_big ;; B{1} * 1e300 ;; B([1]) * 1e300
b_eq_int ;; B{257}:eq(257) ;; B([257]).eq(257)
b_eq_int_t ;; B{256}:eq(I{257}) ;; B([256]).eq(I([257]))
b_mul_roundtrip ;; B{1.00390625} * 1 ;; B([1.00390625]) * 1
b_sigmoid_big ;; B{-100,100}:sigmoid() ;; B([-100,100]).sigmoid()
b_exp_overflow ;; B{89}:exp() ;; B([89]).exp()
b_div_zero ;; B{1,-1,0} / 0 ;; B([1,-1,0]) / 0
b_max_dim ;; B{{1,nan,3}}:max(2) ;; vi(B([[1,nan,3]]).max(1))
b_clamp_nan ;; B{nan,5}:clamp(0,1) ;; B([nan,5]).clamp(0,1)
s_nll_ignore_all ;; F.nll_loss(T{{-1,-2}}, I{-100}) ;; Fn.nll_loss(T([[-1,-2]]), I([-100]))
s_ce_ignore_all_sum ;; F.cross_entropy(T{{1,2}}, I{-100}, {reduction="sum"}) ;; Fn.cross_entropy(T([[1,2]]), I([-100]), reduction="sum")
s_ce_nan ;; F.cross_entropy(T{{nan,2}}, I{2}) ;; Fn.cross_entropy(T([[nan,2]]), I([1]))
s_ce_probs_zero ;; F.cross_entropy(T{{-inf,0}}, T{{0,1}}) ;; Fn.cross_entropy(T([[-inf,0]]), T([[0,1]]))
s_bce_logits_inf ;; F.binary_cross_entropy_with_logits(T{inf,-inf}, T{1,0}, {reduction="none"}) ;; Fn.binary_cross_entropy_with_logits(T([inf,-inf]), T([1,0]), reduction="none")
s_bce_logits_nan ;; F.binary_cross_entropy_with_logits(T{nan}, T{1}) ;; Fn.binary_cross_entropy_with_logits(T([nan]), T([1]))
s_softmax_masked ;; T{{1,2},{3,4}}:masked_fill(T{{1,1},{0,1}}:bool(), -inf):softmax(2) ;; T([[1,2],[3,4]]).masked_fill(T([[1,1],[0,1]]).bool(), -inf).softmax(1)
s_log_softmax_big ;; T{3e38,3e38}:log_softmax(1) ;; T([3e38,3e38]).log_softmax(0)
s_logsumexp_big ;; T{3e38,3e38}:logsumexp(1) ;; T([3e38,3e38]).logsumexp(0)
s_layer_norm_inf ;; ember.layer_norm(T{{1,inf,3}}, 1) ;; Fn.layer_norm(T([[1,inf,3]]), [3])
s_layer_norm_one ;; ember.layer_norm(T{{5}}, 1) ;; Fn.layer_norm(T([[5]]), [1])
s_group_norm_const ;; F.group_norm(T{{{5,5},{5,5}}}, 1) ;; Fn.group_norm(T([[[5,5],[5,5]]]), 1)
s_batch_norm_one ;; F.batch_norm(T{{5,6}}, nil, nil, nil, nil, true) ;; Fn.batch_norm(T([[5,6]]), None, None, training=True)
s_softplus_nan ;; F.softplus(T{nan,-inf,inf}) ;; Fn.softplus(T([nan,-inf,inf]))
s_log1p_tiny ;; T{1e-30, -1e-30}:log1p() ;; T([1e-30, -1e-30]).log1p()
s_sigmoid_tiny ;; T{-88,-104,-110}:sigmoid() ;; T([-88,-104,-110]).sigmoid()
s_logsigmoid_inf ;; F.logsigmoid(T{-inf,inf,nan}) ;; Fn.logsigmoid(T([-inf,inf,nan])) ;; anyzero
s_tanh_inf ;; T{-inf,inf,1e-30}:tanh() ;; T([-inf,inf,1e-30]).tanh()
s_exp_negzero ;; T{-0.0}:exp() ;; T([-0.0]).exp()
s_sin_negzero ;; T{-0.0}:sin() ;; T([-0.0]).sin()
s_sqrt_negzero ;; T{-0.0}:sqrt() ;; T([-0.0]).sqrt()
s_sigmoid_negzero ;; T{-0.0, 0}:sigmoid() ;; T([-0.0, 0]).sigmoid()
s_erf ;; ember.erf(T{-0.0,inf,-inf}) ;; torch.erf(T([-0.0,inf,-inf]))
s_mish ;; F.mish(T{-1e4,1e4,-inf}) ;; Fn.mish(T([-1e4,1e4,-inf]))
s_hardswish ;; F.hardswish(T{-0.0,nan}) ;; Fn.hardswish(T([-0.0,nan]))
s_leaky_nan ;; F.leaky_relu(T{nan,-inf}) ;; Fn.leaky_relu(T([nan,-inf]))
s_clamp_grad ;; (function() local x = T{nan,5,0.5}:requires_grad_(); x:clamp(0,1):sum():backward(); return x.grad end)() ;; (lambda x: (x.clamp(0,1).sum().backward(), x.grad)[1])(T([nan,5,0.5]).requires_grad_())
s_max_grad_tie ;; (function() local x = T{2,2,1}:requires_grad_(); x:max():backward(); return x.grad end)() ;; (lambda x: (x.max().backward(), x.grad)[1])(T([2,2,1]).requires_grad_())
s_amax_grad_tie ;; (function() local x = T{2,2,1}:requires_grad_(); ember.amax(x, 1):backward(); return x.grad end)() ;; (lambda x: (torch.amax(x, 0).backward(), x.grad)[1])(T([2,2,1]).requires_grad_())
s_maximum_grad_tie ;; (function() local x = T{2,1}:requires_grad_(); ember.maximum(x, T{2,2}):sum():backward(); return x.grad end)() ;; (lambda x: (torch.maximum(x, T([2,2])).sum().backward(), x.grad)[1])(T([2,1]).requires_grad_())
s_max_dim_grad_tie ;; (function() local x = T{{2,2,1}}:requires_grad_(); x:max(2):sum():backward(); return x.grad end)() ;; (lambda x: (x.max(1)[0].sum().backward(), x.grad)[1])(T([[2,2,1]]).requires_grad_())
s_sqrt_grad_zero ;; (function() local x = T{0}:requires_grad_(); x:sqrt():sum():backward(); return x.grad end)() ;; (lambda x: (x.sqrt().sum().backward(), x.grad)[1])(T([0]).requires_grad_())
s_norm_grad_zero ;; (function() local x = T{0,0}:requires_grad_(); x:norm():backward(); return x.grad end)() ;; (lambda x: (x.norm().backward(), x.grad)[1])(T([0,0]).requires_grad_())
s_abs_grad_zero ;; (function() local x = T{0}:requires_grad_(); x:abs():sum():backward(); return x.grad end)() ;; (lambda x: (x.abs().sum().backward(), x.grad)[1])(T([0]).requires_grad_())
s_relu_grad_zero ;; (function() local x = T{0}:requires_grad_(); x:relu():sum():backward(); return x.grad end)() ;; (lambda x: (x.relu().sum().backward(), x.grad)[1])(T([0]).requires_grad_())
s_logsumexp_grad_neginf ;; (function() local x = T{-inf,-inf}:requires_grad_(); x:logsumexp(1):backward(); return x.grad end)() ;; (lambda x: (x.logsumexp(0).backward(), x.grad)[1])(T([-inf,-inf]).requires_grad_())
s_pow_grad_zero ;; (function() local x = T{0}:requires_grad_(); x:pow(0.5):sum():backward(); return x.grad end)() ;; (lambda x: (x.pow(0.5).sum().backward(), x.grad)[1])(T([0]).requires_grad_())
s_pow0_grad ;; (function() local x = T{0}:requires_grad_(); x:pow(0):sum():backward(); return x.grad end)() ;; (lambda x: (x.pow(0).sum().backward(), x.grad)[1])(T([0]).requires_grad_())
s_prod_grad_zero ;; (function() local x = T{0,2,3}:requires_grad_(); x:prod():backward(); return x.grad end)() ;; (lambda x: (x.prod().backward(), x.grad)[1])(T([0,2,3]).requires_grad_())
s_prod_grad_2zero ;; (function() local x = T{0,0,3}:requires_grad_(); x:prod():backward(); return x.grad end)() ;; (lambda x: (x.prod().backward(), x.grad)[1])(T([0,0,3]).requires_grad_())
s_std_grad_one ;; (function() local x = T{1,1}:requires_grad_(); x:std():backward(); return x.grad end)() ;; (lambda x: (x.std().backward(), x.grad)[1])(T([1,1]).requires_grad_())
s_sort_grad_nan ;; (function() local x = T{3,nan,1}:requires_grad_(); local v = x:sort(); (v * T{1,2,3}):sum():backward(); return x.grad end)() ;; (lambda x: ((x.sort()[0] * T([1,2,3])).sum().backward(), x.grad)[1])(T([3,nan,1]).requires_grad_())
s_median_grad ;; (function() local x = T{1,2,2,3}:requires_grad_(); x:median():backward(); return x.grad end)() ;; (lambda x: (x.median().backward(), x.grad)[1])(T([1,2,2,3]).requires_grad_())
s_where_nan_grad ;; (function() local x = T{-1,4}:requires_grad_(); ember.where(x:gt(0), x:sqrt(), T{0,0}):sum():backward(); return x.grad end)() ;; (lambda x: (torch.where(x > 0, x.sqrt(), T([0,0])).sum().backward(), x.grad)[1])(T([-1,4]).requires_grad_())
s_clamp_grad_bound ;; (function() local x = T{0,1}:requires_grad_(); x:clamp(0,1):sum():backward(); return x.grad end)() ;; (lambda x: (x.clamp(0,1).sum().backward(), x.grad)[1])(T([0,1]).requires_grad_())
s_masked_softmax_grad ;; (function() local x = T{-inf,-inf,1}:requires_grad_(); (x:softmax(1) * T{1,2,3}):sum():backward(); return x.grad end)() ;; (lambda x: ((x.softmax(0) * T([1,2,3])).sum().backward(), x.grad)[1])(T([-inf,-inf,1]).requires_grad_())
"""


def lnum(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return "math.mininteger" if v == -2 ** 63 else str(v)
    if v == 0 and math.copysign(1.0, v) < 0:
        return "-0.0"
    return lua_float(v)


DTYPES = {torch.float32: "float32", torch.float64: "float64", torch.bfloat16: "bfloat16",
          torch.int64: "int64", torch.bool: "bool"}


def outputs(r):
    if isinstance(r, (tuple, list)):
        return [o for x in r for o in outputs(x)]
    if isinstance(r, torch.Tensor):
        r = r.detach()
        return ['{dtype = "%s", shape = {%s}, data = {%s}}' % (
            DTYPES[r.dtype], ", ".join(str(s) for s in r.shape),
            ", ".join(lnum(v) for v in r.reshape(-1).tolist()))]
    if isinstance(r, bool):
        return ["{bool = %s}" % lnum(r)]
    if isinstance(r, (int, float)):
        return ["{num = %s}" % lnum(r)]
    raise TypeError("%s: %r" % (type(r), r))


def main():
    env = dict(globals())
    lines = ["-- Generated by tests/gen_special_values_fixtures.py (PyTorch %s); do not edit." % torch.__version__,
             "return {"]
    for line in CASES.strip().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(";;")]
        name, lua, py = parts[:3]
        flags = parts[3:]
        assert "]==]" not in lua, name
        head = '  {name = "%s", lua = [==[%s]==]%s' % (name, lua, ", anyzero = true" if "anyzero" in flags else "")
        try:
            res = eval(py, env)
        except Exception as e:  # noqa: BLE001 -- torch's error is the expectation
            msg = (type(e).__name__ + ": " + str(e).split("\n")[0])[:120].replace("\\", "/").replace('"', "'")
            lines.append('%s, torch_error = "%s"},' % (head, msg))
            continue
        lines.append("%s, out = {%s}}," % (head, ", ".join(outputs(res))))
    lines.append("}")
    with open("tests/fixtures/special_values.lua", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
