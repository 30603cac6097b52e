/*
** l_init.c -- luaopen_ember_core: builds the module table, the tensor
** metatable and methods table, and lets each binding file register its
** functions.
*/
#include "lember.h"

typedef void (*opener)(lua_State *L, int module, int methods, int mt);

static const opener openers[] = {
  lember_open_tensor, /* first: it stores the metatable the others use */
  lember_open_convert, lember_open_create, lember_open_elementwise, lember_open_views,
  lember_open_reduce, lember_open_nn, lember_open_autograd, lember_open_plugins,
  lember_open_library, lember_open_sort, lember_open_size, lember_open_function,
};

EM_API int luaopen_ember_core(lua_State *L) {
  em_init(); /* loads the plugins; failures are listed, not raised */
  /* Generational: tensors die young beside a heap that lives for ever;
  ** their memory is paced through LUA_GCSTEP (lember_account, l_tensor.c). */
  lua_gc(L, LUA_GCGEN, 0, 0);
  lua_newtable(L);
  int module = lua_gettop(L);
  lua_newtable(L);
  int methods = lua_gettop(L);
  luaL_newmetatable(L, LEMBER_TENSOR); /* also sets __name */
  int mt = lua_gettop(L);
  for (size_t i = 0; i < sizeof openers / sizeof openers[0]; i++) openers[i](L, module, methods, mt);
  /* Files other helpers own register themselves when they are built in. */
  if (lember_open_attention) lember_open_attention(L, module);
  if (lember_open_data) lember_open_data(L, module);
  if (lember_open_checkpoint) lember_open_checkpoint(L, module);
  if (lember_open_json) lember_open_json(L, module);
  if (lember_open_optim) lember_open_optim(L, module);
  if (lember_open_plot) lember_open_plot(L, module);
  if (lember_open_linalg) lember_open_linalg(L, module);
  lua_settop(L, module);
  return 1;
}
