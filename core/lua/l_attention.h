/*
** l_attention.h -- what the two attention binding files share, internal to
** the Lua module: l_attention.c (MultiHeadAttention, and the definitions
** of everything declared here) and l_attention_fn.c (ember.Attention and
** ember.attention_variants). lattn_ is the prefix of these internal names.
*/
#ifndef LEMBER_L_ATTENTION_H
#define LEMBER_L_ATTENTION_H

#include "ember_attention.h"
#include "lember.h"

#define TRY(expr)                   \
  do {                              \
    em_status try_s_ = (expr);      \
    if (try_s_ != EM_OK) return try_s_; \
  } while (0)

#define MHA_MT "ember.MultiHeadAttention"
#define ATTN_MT "ember.Attention"

/* ---- a variant instance: variant + checked options + its parameters ---- */

typedef struct attn_core {
  const em_attention_variant *variant;
  em_attn_options *opts;
  int n_params;
  em_attn_param params[EM_ATTN_MAX_PARAMS];
} attn_core;

/* Variant options read from a Lua table, borrowed from the stack. */
typedef struct opt_list {
  int n;
  const char *names[EM_ATTN_MAX_OPTIONS + 1];
  em_attn_value values[EM_ATTN_MAX_OPTIONS + 1];
} opt_list;

void lattn_core_free(attn_core *c);
/* Collects the keys of the table at idx that are not in `own` (only Lua
** work: may raise). The strings stay valid while the table is alive. */
void lattn_collect_options(lua_State *L, int idx, const char *op, const char *const *own,
                           opt_list *o);
/* Builds a variant instance. On failure sets the core error and returns
** the status, with *c untouched. */
em_status lattn_core_make(attn_core *c, const char *variant, const opt_list *o,
                          const em_attn_dims *dims, em_dtype dt, em_device dev);
/* Pushes the capability flags as a table of booleans. */
void lattn_push_caps(lua_State *L, uint32_t caps);
/* Pushes the checked option values as a table. */
void lattn_push_option_values(lua_State *L, const em_attn_options *o);

/* ---- constructor table fields (Lua only; may raise) ---- */

int64_t lattn_opt_int(lua_State *L, int t, const char *key, int64_t def, const char *op);
int lattn_opt_bool(lua_State *L, int t, const char *key, int def, const char *op);
double lattn_opt_num(lua_State *L, int t, const char *key, double def, const char *op);

/* ---- parameter walks ---- */

/* Calls fn(name, tensor, learned) for each tensor of the module, in order. */
typedef void (*each_fn)(lua_State *L, const char *prefix, const char *name, em_tensor *t, int learned);
void lattn_each_core(lua_State *L, attn_core *c, each_fn fn);
/* "prefix.name", or "name" without a prefix. */
void lattn_full_name(char *buf, size_t n, const char *prefix, const char *name);
/* Callbacks for each_fn; the result table is at -1. */
void lattn_cb_list(lua_State *L, const char *p, const char *n, em_tensor *t, int learned);
void lattn_cb_named(lua_State *L, const char *p, const char *n, em_tensor *t, int learned);
void lattn_cb_state(lua_State *L, const char *p, const char *n, em_tensor *t, int learned);
void lattn_cb_zero_grad(lua_State *L, const char *p, const char *n, em_tensor *t, int learned);

/* All tensor slots of a module, for to() and load_state_dict(). */
typedef struct slot {
  char name[160];
  em_tensor **t;
  int learned;
} slot;
/* Copies matching tensors of the table at idx into the slots (strict:
** every slot present and no unknown key). */
int lattn_load_slots(lua_State *L, const char *op, slot *sl, int n, int idx, int strict);

/* ---- registration ---- */

/* A metatable `mt` whose __index looks up `methods` (upvalue: the module
** table) before index(). */
void lattn_new_class(lua_State *L, int module, const char *mt, const luaL_Reg *methods,
                     lua_CFunction gc, lua_CFunction index, lua_CFunction call, lua_CFunction tostr);
/* ember.Attention and ember.attention_variants (l_attention_fn.c). */
void lattn_open_functional(lua_State *L, int module);

#endif
