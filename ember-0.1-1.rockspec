-- LuaRocks package of ember: `luarocks make` in a clone builds libember,
-- the backends, the attention plugins and the Lua binding with CMake and
-- installs them into a Lua tree; then `require "ember"` works there
-- (eval "$(luarocks path)" for a user tree). tests/test_luarocks.sh does
-- this into a temporary tree.
--
-- Layout inside the rock: Lua files go to LuaRocks' lua/ and ember/core.so
-- to its lib/ (both deployed on the tree's paths); libember.so and the
-- plugins stay in the rock's own folder (ember/lib), where core.so's rpath
-- and libember's plugin search point.
rockspec_format = "3.0"
package = "ember"
version = "0.1-1"
source = {
  url = "git+https://example.invalid/ember.git", -- `luarocks make` builds the clone it runs in
}
description = {
  summary = "A deep-learning framework for attention models: a C core scripted from Lua 5.4",
  detailed = [[
ember: N-d tensors with reverse-mode autograd in C (libember), compute
backends (CPU with OpenBLAS/OpenMP, CUDA) and attention variants as dlopen
plugins, and a Torch7-style Lua API (ember.nn, ember.optim, ember.data, ...).
Needs the Debian packages listed in scripts/install_deps.sh.]],
  license = "MIT",
  labels = { "deep-learning", "attention", "tensor", "autograd" },
}
dependencies = { "lua >= 5.4, < 5.5" }
build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    CMAKE_INSTALL_LIBDIR = "ember/lib",
    CMAKE_INSTALL_BINDIR = "bin",
    EMBER_INSTALL_LUA_RELDIR = "lua",
    EMBER_INSTALL_LUA_CRELDIR = "lib",
    EMBER_TESTS = "OFF",
  },
}
