/*
** lember.h -- internal header of the Lua binding (ember/core.so).
**
** A tensor is a full userdata holding one pointer, an em_tensor reference
** owned by the userdata. __gc releases it; __close releases it early and
** leaves NULL behind, so later use raises "tensor was closed".
**
** Rules for binding code (every .c file in core/lua):
** - Check and convert all Lua arguments BEFORE taking any core reference:
**   luaL_error longjmps, and a reference held in a C variable would leak.
** - When a core call fails, release what you own, then
**   `return lember_error(L, "op", s);`.
** - Everything a user gives as an index is 1-based (dims, positions,
**   index tensors); convert with the helpers below.
*/
#ifndef LEMBER_H
#define LEMBER_H

#include <lauxlib.h>
#include <lua.h>

#include "ember.h"

#define LEMBER_TENSOR "ember.Tensor" /* the metatable's __name */

/* ---- tensors (l_tensor.c) ---- */

/* The tensor at idx; raises "ember.<fn>: bad argument..." if it is not a
** tensor and "tensor was closed" if it was closed. Borrowed. */
em_tensor *lember_checktensor(lua_State *L, int idx);
/* The tensor at idx, or NULL when the value is not a tensor (a closed
** tensor still raises). Borrowed. */
em_tensor *lember_testtensor(lua_State *L, int idx);
/* A tensor from a tensor, a number or a boolean. A number becomes a 0-d
** tensor of dtype `like` on `dev`, and REPLACES the value at idx, so that
** the stack keeps it alive. The result is borrowed in both cases. */
em_tensor *lember_totensor(lua_State *L, int idx, em_dtype like, em_device dev);
/* Pushes a userdata for t, taking ownership of the reference. */
void lember_pushtensor(lua_State *L, em_tensor *t);
/* Pushes a userdata holding NULL and returns its slot, so a core call can
** write its result straight into memory the GC owns:
**   em_tensor **out = lember_newslot(L);
**   em_status s = em_relu(out, x);   // on failure *out stays NULL
**   if (s) return lember_error(L, "relu", s);
**   lember_account(L, *out);
*/
em_tensor **lember_newslot(lua_State *L);
/* Tells the Lua GC about the memory behind a new tensor (lember_pushtensor
** does it). Steps the collector once enough has piled up. */
void lember_account(lua_State *L, const em_tensor *t);
/* Is the value at idx a tensor (open or closed)? */
int lember_istensor(lua_State *L, int idx);

/* ---- errors and arguments (l_util.c) ---- */

/* Raises "ember.<op>: <em_error_message()>". Free temporaries first. */
int lember_error(lua_State *L, const char *op, em_status s);
/* A 1-based dim (negative counts from the end) as a C dim. Raises on 0 or
** a non-integer. */
int lember_checkdim(lua_State *L, int idx, const char *op);
/* A 1-based dim checked against a tensor of `ndim` dims, as a C dim in
** [0, ndim); the message speaks 1-based. */
int lember_checkdim_n(lua_State *L, int idx, const char *op, int ndim);
/* Where a new dim goes in a tensor of `ndim` dims (unsqueeze, stack): a C
** dim in [0, ndim]; the message names ndim and the ndim + 1 places. */
int lember_checkdim_new(lua_State *L, int idx, const char *op, int ndim);
/* The dim of an op on a 0-d tensor that takes torch's dim 0 or -1 there
** (reductions, softmax): 1 or -1; anything else raises naming op. The op
** then runs on the tensor viewed as [1] over dim 0 and gives a 0-d result. */
void lember_checkdim_scalar(lua_State *L, int idx, const char *op);
/* Like lember_checkdim, `def` (a C dim) when the argument is absent/nil. */
int lember_optdim(lua_State *L, int idx, const char *op, int def);
/* A 1-based position in a dim of `size` as a 0-based one in [0, size);
** negative counts from the end. Raises (naming op and what) when out of
** range. */
int64_t lember_checkpos(lua_State *L, int idx, int64_t size, const char *op, const char *what);
/* An integer argument (floats with an integral value are accepted). */
int64_t lember_checkint(lua_State *L, int idx, const char *op, const char *what);
/* Raises "ember.op: takes ..." when arguments follow index n (trailing
** nils do not count): x:exp(2), x:t(1) are errors, as PyTorch's TypeError,
** not arguments silently dropped. what names the arguments op takes after
** the tensor ("dim, keepdim"), NULL for none. */
void lember_noextra(lua_State *L, int n, const char *op, const char *what);
/* That message, the one wording of it (Lua's errors.no_extra formats
** through it as core._noextra_message): who ("ember.exp", "nn.Tanh")
** takes `nnames` arguments `what` (NULL: none) besides `besides` ("" or
** " besides the tensor"), and got `got`, argument `at` being a `kind`. */
void lember_noextra_message(char *buf, size_t n, const char *who, const char *besides, int nnames,
                            const char *what, int got, int at, const char *kind);
/* The same after a shape or dims list that ended before `next` (see
** lember_checkshape): "ember.view: expected the shape as numbers or one
** table, got a string after it (argument 4)"; what is "the shape". */
void lember_noextra_after(lua_State *L, int next, const char *op, const char *what);
/* A shape from either numbers at idx.. or one table at idx; returns ndim.
** Stops at the first non-number (so an options table may follow). Raises
** "<op>: shape must be ..." on anything else. `allow_neg1` lets -1 through
** (view, reshape, expand). *next gets the index after the shape. */
int lember_checkshape(lua_State *L, int idx, const char *op, int64_t *shape, int allow_neg1,
                      int *next);
/* A list of dims (numbers from idx on, or one table) converted to C dims. */
int lember_checkdims(lua_State *L, int idx, const char *op, int *dims, int *next);
/* Device from a string ("cpu", "cuda:1"); raises on a bad string. */
em_device lember_checkdevice(lua_State *L, int idx, const char *op);
em_dtype lember_checkdtype(lua_State *L, int idx, const char *op);
/* After em_device_parse failed on str: raises a message with the core's
** reason, the loaded device types and (with_dtypes) the dtype names. */
int lember_device_error(lua_State *L, const char *op, const char *str, int with_dtypes);
em_device lember_cpu(lua_State *L);
/* Checks that every key of the options table at idx is one of the
** NULL-terminated `names`; raises "ember.<op>: unknown option 'x'". */
void lember_checkoptions(lua_State *L, int idx, const char *op, const char *const *names);
/* Creation options {dtype=, device=, requires_grad=} from the table at idx
** (absent/nil: the defaults). */
typedef struct lember_opts {
  em_dtype dtype;
  em_device device;
  int requires_grad;
  int has_dtype;
} lember_opts;
void lember_checkopts(lua_State *L, int idx, const char *op, lember_opts *o);

/* ---- index tensors ---- */

/* A user's 1-based int64 index tensor turned 0-based for the core: a new
** reference in *out (other dtypes pass through so the core names them).
** Returns a status; the caller owns *out on success. */
em_status lember_index_to_c(em_tensor **out, em_tensor *idx);
/* After a core call failed with `s` on a user's (1-based) index tensor:
** when s is EM_ERR_INDEX, finds the first entry outside 1..size (skipping
** `ignore`) and raises a message in 1-based terms; otherwise raises the
** core's message. Call it after releasing temporaries, like lember_error. */
int lember_index_error(lua_State *L, const char *op, em_status s, em_tensor *idx, int64_t size,
                       const char *what, int64_t ignore);
/* Adds 1 to a 0-based index tensor the core returned, replacing *t. */
em_status lember_index_to_lua(em_tensor **t);

/* ---- registration ---- */

/* The metatable of tensors, created once per state; pushes it. */
void lember_pushmetatable(lua_State *L);
/* Each file registers its functions: `methods` is the tensor methods
** table, `module` the ember.core table, `mt` the tensor metatable
** (absolute indices). */
void lember_open_tensor(lua_State *L, int module, int methods, int mt);
void lember_open_convert(lua_State *L, int module, int methods, int mt);
void lember_open_create(lua_State *L, int module, int methods, int mt);
void lember_open_elementwise(lua_State *L, int module, int methods, int mt);
void lember_open_views(lua_State *L, int module, int methods, int mt);
void lember_open_reduce(lua_State *L, int module, int methods, int mt);
void lember_open_nn(lua_State *L, int module, int methods, int mt);
void lember_open_autograd(lua_State *L, int module, int methods, int mt);
void lember_open_plugins(lua_State *L, int module, int methods, int mt);
void lember_open_library(lua_State *L, int module, int methods, int mt);
void lember_open_sort(lua_State *L, int module, int methods, int mt); /* l_sort.c */
void lember_open_size(lua_State *L, int module, int methods, int mt); /* l_size.c */
void lember_open_function(lua_State *L, int module, int methods, int mt); /* l_function.c */
/* l_autograd.c: the thread that called t:backward() (NULL outside one), where Lua backwards run. */
lua_State *lember_backward_thread(void);
/* The attention helper's file (core/lua/l_attention.c) defines it; weak
** so the module builds and loads without that file. */
void lember_open_attention(lua_State *L, int module) __attribute__((weak));
/* Likewise for the data helpers (l_data.c) and checkpoints (l_checkpoint.c). */
void lember_open_data(lua_State *L, int module) __attribute__((weak));
void lember_open_checkpoint(lua_State *L, int module) __attribute__((weak));
void lember_open_json(lua_State *L, int module) __attribute__((weak));
void lember_open_optim(lua_State *L, int module) __attribute__((weak)); /* l_optim.c */
/* PNG charts with cairo (core/lua/l_plot.c). */
void lember_open_plot(lua_State *L, int module) __attribute__((weak));
void lember_open_linalg(lua_State *L, int module) __attribute__((weak)); /* l_linalg.c */

/* ---- shapes (l_size.c) ---- */

/* Pushes an ember.Size (a sequence of integers that prints and compares). */
void lember_pushsize(lua_State *L, int ndim, const int64_t *shape);

/* ---- printing (l_print.c) ---- */

/* Pushes the PyTorch-like string of t. */
void lember_pushtostring(lua_State *L, em_tensor *t);
/* ember.set_printoptions{...} (l_print.c). */
int lember_set_printoptions(lua_State *L);

/* ---- autograd (l_autograd.c) ---- */

/* Runs em_backward so that Lua backward functions run on this thread. */
em_status lember_backward(lua_State *L, em_tensor *root, em_tensor *grad, int retain, em_tensor *const *only,
                          int n_only); /* n_only < 0: every leaf; else em_backward_only */
/* The hooks registered on leaf `from` through the userdata at idx
** (gradient-ready and gradient hooks, found from the tensor's address)
** follow it to `to`: t:_assign swaps the tensor a Lua value wraps, and the
** old address may be reused once it is freed. Call it before the swap. */
void lember_rekey_hooks(lua_State *L, int idx, em_tensor *from, em_tensor *to);

#endif
