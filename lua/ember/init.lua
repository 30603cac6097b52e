-- ember/init.lua: `local ember = require "ember"`.
--
-- The table is the C module ember.core (tensors, ops, autograd, plugins)
-- with the pure-Lua packages added lazily: the first use of ember.nn runs
-- require "ember.nn", and so on for any ember/<name>.lua or
-- ember/<name>/init.lua on package.path. Nothing else is loaded up front,
-- so `require "ember"` stays cheap.

local core = require "ember.core"
local ember = core
require "ember._helpers" -- triu, sort, cumsum, ... and t[{i, {a, b}}] (adds to core)
require "ember._einsum" -- ember.einsum (adds to core)
require "ember._functional" -- softplus, leaky_relu, the binary cross-entropies (adds to core)
require "ember._listing" -- listing functions return lists that print readably
require "ember._compat" -- multinomial, median, meshgrid, index_add, ...: more of torch's (adds to core)
require "ember._grad_modes" -- no_grad / enable_grad / inference_mode scopes, ember.grad
require "ember._everyday" -- diagonal, take_along_dim, nansum, logaddexp, Torch7's nDimension, ... (adds to core)
require "ember._special" -- atan2, logcumsumexp (adds to core)
require "ember._tensor_more" -- masked_scatter, nanmedian, quantile, mode, histc, scatter_reduce (adds to core)
require "ember._indexing" -- t[{i, {a, b}}], t[{{}, idx}], t[{rows, cols}] and index_put (adds to core)
require "ember._inplace" -- masked_fill_, clamp_, relu_, ...: PyTorch's in-place twins (adds to core)
local dtypes = require "ember._dtypes" -- ember.float32, ember.double, ...; finfo, iinfo (adds to core)
require("ember.variant").install(ember) -- ember.attention_variant: variants written in Lua
-- help(x) prints x's reference entry (the doc comments, read on first use)
function ember.help(...) return require("ember._doc").help(...) end
-- ember.profile(fn, ...) runs fn under the profiler (lua/ember/profiler.lua)
function ember.profile(...) return require("ember.profiler").profile(...) end
-- ember.scaled_dot_product_attention(q, k, v [, opts]) or PyTorch's positional (q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa), as PyTorch's
-- F.scaled_dot_product_attention, on the fused kernel (lua/ember/_sdpa.lua)
function ember.scaled_dot_product_attention(...) return require("ember._sdpa")(...) end
-- ember.flex_attention / ember.create_block_mask: PyTorch's FlexAttention API (lua/ember/flex.lua)
for _, n in ipairs { "flex_attention", "create_block_mask" } do ember[n] = function(...) return require("ember.flex")[n](...) end end
-- ember.save(obj, path) / ember.load(path), as torch.save / torch.load, for a
-- tensor, a state dict or a module's (lua/ember/checkpoint.lua)
function ember.save(...) return require("ember.checkpoint").save_object(...) end
function ember.load(...) return require("ember.checkpoint").load_object(...) end
-- torch's top-level linear algebra (ember.inverse, det, logdet, slogdet,
-- cholesky, qr, svd, matrix_exp, matrix_power, pinverse, cholesky_solve,
-- cholesky_inverse): lua/ember/linalg.lua
-- (also tensor methods, A:det(), as torch's)
for _, n in ipairs { "inverse", "det", "logdet", "slogdet", "cholesky", "qr", "svd", "matrix_exp", "matrix_power",
  "pinverse", "cholesky_solve", "cholesky_inverse" } do
  ember[n] = function(...) return require("ember.linalg")._top[n](...) end
  core.Tensor[n] = ember[n]
end

-- Submodules the REPL offers when completing `ember.`; lazy loading itself
-- works for any module file, listed here or not.
local known = { "nn", "optim", "data", "checkpoint", "generate", "models", "progress", "metrics", "profiler", "autograd", "linalg", "distributions", "special", "cuda" }

local function module_exists(name)
  return package.searchpath(name, package.path) ~= nil
      or package.searchpath(name, package.cpath) ~= nil
end

local submodules = {}
for _, k in ipairs(known) do
  if module_exists("ember." .. k) then submodules[#submodules + 1] = k end
end

-- Classes of ember.nn that ember also offers by name (as the C module did
-- before they were written in Lua): ember.Attention{...}, ember.MultiHeadAttention{...}.
local aliases = { Attention = "ember.nn.Attention", MultiHeadAttention = "ember.nn.MultiHeadAttention" }

-- Not cached in ember (rawset): a module unloaded from package.loaded and
-- required again (busted's insulation does it between spec files) would
-- leave ember.nn naming the old copy, so that ember.Attention.forward was
-- not nn.Attention.forward any more (doc_conventions_spec failed after
-- docs_spec in one process). require's own cache keeps this cheap.
-- k -> "ember." .. k for the names that resolved to a module: the next
-- lookup is two table reads (a layer's forward reads ember.autocast on every
-- call; the pattern match and the concatenation were a tenth of a decoding
-- step's Lua time). package.loaded stays the cache, so an unloaded module
-- is required again.
local resolved = {}

setmetatable(ember, {
  __index = function(_, k)
    local name = resolved[k]
    if name then
      local m = package.loaded[name]
      if m ~= nil then return m end
    end
    if aliases[k] then return require(aliases[k]) end
    local no_dtype = dtypes.missing(k) -- ember.int32, ember.half: torch's, not ember's
    if no_dtype then error(no_dtype, 2) end
    -- only plain names; "init", "core" and _private files are not submodules
    if type(k) ~= "string" or not k:match("^%a[%w_]*$") or k == "init" or k == "core" then
      return nil
    end
    name = "ember." .. k
    if package.loaded[name] == nil and not module_exists(name) then return nil end
    resolved[k] = name
    return require(name)
  end,
  __properties = submodules, -- read by the REPL's tab completion
})

return ember
