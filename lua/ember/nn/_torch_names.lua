--- PyTorch's state-dict names and layouts next to ember's: the pieces the
-- modules' own `upgrade_state_dict` hooks (PyTorch -> ember, on load) and
-- `to_torch_names` hooks (ember -> PyTorch, `Module:torch_state_dict`) share.
-- Every function takes and returns a table name -> tensor whose names are
-- relative to one module (Module.upgrade_state_dict hands each child its
-- own part, the prefix taken off), and never changes its argument.
--
-- The differences these cover:
--   nn.Sequential's children are "1", "2", ... (Torch7's), PyTorch's "0", "1", ...;
--   nn.MultiHeadAttention has q_proj, k_proj, v_proj (nn.Linear), PyTorch's
--     one in_proj_weight [3 d, d] / in_proj_bias [3 d] (or q_proj_weight,
--     k_proj_weight, v_proj_weight when kdim or vdim differ from d);
--   the Transformer layers keep the feed-forward in "ff" (ff.linear1,
--     ff.linear2) and the decoder's cross-attention in "cross_attn",
--     PyTorch's linear1, linear2 and multihead_attn;
--   a normalisation layer's state without num_batches_tracked (older
--     PyTorch) gets it as 0, as PyTorch does.
-- models.ViT maps torchvision's names in its own file.
-- @module nn._torch_names
local Module = require "ember.nn.Module"
local errors = require "ember._errors"

local names = {}

local function copy(sd)
  local out = {}
  for k, v in pairs(sd) do out[k] = v end
  return out
end

--- Renames the names under the paths of `map` (old -> new, whole path
-- components: "linear1" covers "linear1.weight" and "linear1.bias", not
-- "linear10.weight"; "ff.linear1" covers "ff.linear1.weight"). A name whose
-- new form is already in `sd` stays as it is.
-- @tparam table sd
-- @tparam table map old path -> new path
-- @treturn table
function names.rename(sd, map)
  local out = copy(sd)
  for k, v in pairs(sd) do
    if type(k) == "string" then
      for old, new in pairs(map) do
        if k:sub(1, #old + 1) == old .. "." then
          local name = new .. k:sub(#old + 1)
          if sd[name] == nil then out[name], out[k] = v, nil end
          break
        end
      end
    end
  end
  return out
end

--- `fn` applied to the names under `path` ("encoder.layers": the part of sd
-- under "encoder.layers.", the prefix taken off and put back).
-- @tparam table sd
-- @string path
-- @tparam function fn table -> table
-- @treturn table
function names.under(sd, path, fn)
  local out, sub, any = {}, {}, false
  for k, v in pairs(sd) do
    if type(k) == "string" and k:sub(1, #path + 1) == path .. "." then
      sub[k:sub(#path + 2)], any = v, true
    else
      out[k] = v
    end
  end
  if not any then return sd end
  for k, v in pairs(fn(sub)) do out[path .. "." .. k] = v end
  return out
end

--- `fn` applied to each numbered child's part of sd ("1.x" -> fn({x = ...}) under "1.").
-- @tparam table sd
-- @tparam function fn table -> table
-- @treturn table
function names.each_numbered(sd, fn)
  local seen = {}
  for k in pairs(sd) do
    local i = type(k) == "string" and k:match("^(%d+)%.")
    if i then seen[i] = true end
  end
  for i in pairs(seen) do sd = names.under(sd, i, fn) end
  return sd
end

--- `map` turned around (new -> old), for the way back to PyTorch.
-- @tparam table map
-- @treturn table
function names.inverse(map)
  local out = {}
  for k, v in pairs(map) do out[v] = k end
  return out
end

-- How many names of sd, read with child numbers shifted by `shift`, land in
-- a child that has a tensor or child of their next component ("1.weight"
-- read 0-based lands in child "2": has it a "weight"?).
local function fits(module, sd, shift)
  local n = 0
  for k in pairs(sd) do
    local i, head = tostring(k):match("^(%d+)%.([^.]+)")
    local child = i and module._reg[tostring(tonumber(i) + shift)]
    -- a numbered head may be a nested Sequential's 0-based number
    if Module.is_module(child) and (child._reg[head] ~= nil
        or (head:match("^%d+$") and child._reg[tostring(tonumber(head) + 1)] ~= nil)) then
      n = n + 1
    end
  end
  return n
end

--- PyTorch's 0-based child numbers ("0.weight") made 1-based ("1.weight")
-- when `sd` has PyTorch's numbering: when more of its names land on a child
-- that has them read 0-based than read 1-based. A name "0." decides it
-- (nn.Sequential's children are "1", "2", ...), but a PyTorch Sequential
-- whose first module has no state (Dropout, Flatten: torchvision's
-- classifiers) starts at "1.", so the fit decides. Otherwise `sd` as it is.
-- @tparam Module module the container
-- @tparam table sd
-- @treturn table
function names.one_based(module, sd)
  if module._reg["0"] ~= nil then return sd end
  local zero = false
  for k in pairs(sd) do if type(k) == "string" and k:sub(1, 2) == "0." then zero = true; break end end
  if not zero and fits(module, sd, 1) <= fits(module, sd, 0) then return sd end
  local out = {}
  for k, v in pairs(sd) do
    local i, rest = tostring(k):match("^(%d+)(%..+)$")
    if i then out[tostring(tonumber(i) + 1) .. rest] = v else out[k] = v end
  end
  return out
end

--- The inverse of `one_based`: "1.weight" -> "0.weight", for PyTorch.
-- @tparam table sd
-- @treturn table
function names.zero_based(sd)
  local out = {}
  for k, v in pairs(sd) do
    local i, rest = tostring(k):match("^(%d+)(%..+)$")
    if i then out[tostring(tonumber(i) - 1) .. rest] = v else out[k] = v end
  end
  return out
end

--- PyTorch's rule for a normalisation layer's state without
-- num_batches_tracked (PyTorch before 0.4.1, and files written without
-- it): running_mean there and num_batches_tracked not -> 0, as torch's
-- _NormBase._load_from_state_dict does for a plain dict (what
-- safetensors.torch.load_file returns).
-- @tparam Module module a BatchNorm or InstanceNorm layer
-- @tparam table sd
-- @treturn table
function names.num_batches_tracked(module, sd)
  if not module.track_running_stats or sd.running_mean == nil or sd.num_batches_tracked ~= nil then return sd end
  local out = copy(sd)
  out.num_batches_tracked = module.num_batches_tracked:new_zeros({})
  return out
end

local QKV = { "q", "k", "v" }

--- PyTorch's MultiheadAttention input projections under ember's names:
-- in_proj_weight [rq + rk + rv, d] split by rows into q_proj.weight [rq, d],
-- k_proj.weight [rk, d], v_proj.weight [rv, d] (views), in_proj_bias likewise,
-- and q_proj_weight, k_proj_weight, v_proj_weight (PyTorch's layout when
-- kdim or vdim differ from d) renamed. `rows` {rq, rk, rv} are the module's
-- output sizes; an in_proj_* of other rows is an error naming the key and
-- both shapes.
-- @tparam table sd
-- @tparam {int,int,int} rows
-- @string who the module, for errors
-- @string[opt=""] prefix the module's place in the model, for errors
-- @treturn table
function names.split_in_proj(sd, rows, who, prefix)
  local out = copy(sd)
  for _, kind in ipairs { "weight", "bias" } do
    local v = sd["in_proj_" .. kind]
    if v ~= nil and Module.is_tensor(v) then
      local total = rows[1] + rows[2] + rows[3]
      if v.shape[1] ~= total or v.ndim ~= (kind == "weight" and 2 or 1) then
        errors.raise("%s: '%sin_proj_%s' has shape %s in the state dict, the module expects %s (q, k and v "
          .. "projections of %d, %d and %d rows, stacked)", who, prefix or "", kind, errors.shape_str(v),
          kind == "weight" and ("[%d, in]"):format(total) or ("[%d]"):format(total), rows[1], rows[2], rows[3])
      end
      out["in_proj_" .. kind] = nil
      local at = 1
      for i, p in ipairs(QKV) do
        local name = p .. "_proj." .. kind
        if sd[name] == nil then out[name] = v:narrow(1, at, rows[i]) end
        at = at + rows[i]
      end
    end
  end
  for _, p in ipairs(QKV) do
    local old, new = p .. "_proj_weight", p .. "_proj.weight"
    if sd[old] ~= nil and sd[new] == nil then out[new], out[old] = sd[old], nil end
  end
  return out
end

--- The inverse of `split_in_proj`, for PyTorch: q/k/v_proj.weight stacked into
-- in_proj_weight when the three take inputs of one width (else PyTorch's
-- q_proj_weight, k_proj_weight, v_proj_weight), the biases into in_proj_bias.
-- Projections of different output sizes (grouped-query attention, which
-- torch.nn.MultiheadAttention does not have) keep ember's names.
-- @tparam table sd
-- @treturn table
function names.join_in_proj(sd)
  local w = { sd["q_proj.weight"], sd["k_proj.weight"], sd["v_proj.weight"] }
  if not (w[1] and w[2] and w[3]) or w[1].shape[1] ~= w[2].shape[1] or w[1].shape[1] ~= w[3].shape[1] then
    return sd
  end
  local cat = require("ember.nn._ember").cat
  local out = copy(sd)
  local same = w[1].shape[2] == w[2].shape[2] and w[1].shape[2] == w[3].shape[2]
  for i, p in ipairs(QKV) do
    out[p .. "_proj.weight"] = nil
    if not same then out[p .. "_proj_weight"] = w[i] end
  end
  if same then out.in_proj_weight = cat(w, 1) end
  local b = { sd["q_proj.bias"], sd["k_proj.bias"], sd["v_proj.bias"] }
  if b[1] and b[2] and b[3] then
    for _, p in ipairs(QKV) do out[p .. "_proj.bias"] = nil end
    out.in_proj_bias = cat(b, 1)
  end
  return out
end

return names
