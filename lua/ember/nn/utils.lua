--- nn.utils: torch.nn.utils' gradient clipping, parameters as one vector,
-- and `nn.utils.rnn`'s pad_sequence, pack_padded_sequence and
-- pad_packed_sequence (nn/_packed.lua: what ember's PackedSequence holds).
-- The reparametrizations: `nn.utils.parametrize` (register_parametrization,
-- remove_parametrizations, is_parametrized, cached), `nn.utils.parametrizations`
-- (weight_norm, spectral_norm) and the hook-based `weight_norm`,
-- `remove_weight_norm`, `spectral_norm`, `remove_spectral_norm`
-- (nn/_norm_hooks.lua), with PyTorch's state-dict names.
--
-- `clip_grad_norm_` and `clip_grad_value_` call `optim.clip_grad_norm` and
-- `optim.clip_grad_value` (one rule, two names); `clip_grad_norm_` returns
-- the total norm as a number (torch: a 0-d tensor). Wherever torch takes
-- `parameters`, ember takes a list of tensors, one tensor, or a module.
-- @module nn.utils
local raise = require("ember._errors").raise -- at the user's line
local ember = require "ember.nn._ember"
local core = require "ember.core"
local clip_grad_norm = require "ember.optim.clip_grad_norm"
local clip_grad_value = require "ember.optim.clip_grad_value"

local M = {}

-- The parameters as a list of tensors: a list, one tensor, or a module's.
local function param_list(op, parameters)
  if core.is_tensor(parameters) then return { parameters } end
  if type(parameters) ~= "table" then
    raise("nn.utils.%s: parameters must be a list of tensors, a tensor or a module, got %s", op, type(parameters))
  end
  if type(parameters.parameters) == "function" and getmetatable(parameters) then parameters = parameters:parameters() end
  for i, p in ipairs(parameters) do
    if not core.is_tensor(p) then raise("nn.utils.%s: parameter %d is a %s, not a tensor", op, i, type(p)) end
  end
  return parameters
end

--- torch.nn.utils.clip_grad_norm_(parameters, max_norm [, norm_type=2 [, error_if_nonfinite=false]]):
-- `optim.clip_grad_norm` (see there: the norm of all gradients together,
-- each scaled in place by max_norm / (norm + 1e-6) when it exceeds
-- max_norm; returns the norm, a number). Torch's keywords may come as a
-- table after max_norm or after norm_type, `{norm_type =,
-- error_if_nonfinite = false, foreach =}`: with error_if_nonfinite a NaN
-- or infinite norm is an error, before any gradient is touched (foreach is
-- accepted and unused).
-- @param parameters a list of tensors, a tensor or a module
-- @tparam number max_norm
-- @usage local nn = require "ember.nn"
-- local m = nn.Linear(3, 2)
-- m.weight.grad, m.bias.grad = ember.full({2, 3}, 1), ember.full({2}, 1)
-- print(nn.utils.clip_grad_norm_(m, 1.0, {norm_type = 1}), m.bias.grad:totable()[1] < 0.2)   --> 8.0 true
function M.clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)
  return clip_grad_norm(param_list("clip_grad_norm_", parameters), max_norm, norm_type, error_if_nonfinite, foreach,
    "nn.utils.clip_grad_norm_")
end

--- torch.nn.utils.clip_grad_value_(parameters, clip_value): `optim.clip_grad_value`
-- (every gradient clamped in place to [-clip_value, clip_value]).
-- @param parameters a list of tensors, a tensor or a module
-- @tparam number clip_value
-- @usage local nn = require "ember.nn"
-- local w = ember.zeros(3):requires_grad_()
-- w.grad = ember.tensor({-2, 0.5, 3})
-- nn.utils.clip_grad_value_(w, 1)
-- print(w.grad:totable()[1], w.grad:totable()[3])   --> -1.0 1.0
function M.clip_grad_value_(parameters, clip_value)
  return clip_grad_value(param_list("clip_grad_value_", parameters), clip_value)
end

--- torch.nn.utils.parameters_to_vector: the parameters flattened and
-- concatenated in their order (a module's `parameters()` order, which is
-- torch's), as one 1-d tensor; differentiable (a new tensor, not a view).
-- @param parameters a list of tensors, a tensor or a module
-- @usage local nn = require "ember.nn"
-- local m = nn.Linear(3, 2)
-- local v = nn.utils.parameters_to_vector(m)
-- print(v.shape)   --> ember.Size{8}
function M.parameters_to_vector(parameters)
  local ps = param_list("parameters_to_vector", parameters)
  if #ps == 0 then raise("nn.utils.parameters_to_vector: no parameters") end
  local flat = {}
  for i, p in ipairs(ps) do
    if p.device ~= ps[1].device then
      raise("nn.utils.parameters_to_vector: parameter %d is on %s, parameter 1 on %s (all must share a device)",
        i, p.device, ps[1].device)
    end
    flat[i] = p:reshape(-1)
  end
  return ember.cat(flat, 1)
end

--- torch.nn.utils.vector_to_parameters: copies the 1-d vec into the
-- parameters, slice by slice in their order (the inverse of
-- parameters_to_vector), without recording gradients. vec must have
-- exactly as many elements as the parameters together.
-- @param vec a 1-d tensor
-- @param parameters a list of tensors, a tensor or a module
-- @usage local nn = require "ember.nn"
-- local m = nn.Linear(3, 2)
-- nn.utils.vector_to_parameters(ember.zeros(8), m)
-- print(m.weight:abs():sum():item(), m.bias:abs():sum():item())   --> 0.0 0.0
function M.vector_to_parameters(vec, parameters)
  if not core.is_tensor(vec) then
    raise("nn.utils.vector_to_parameters: expected vec to be a tensor, got %s", type(vec))
  end
  if vec:dim() ~= 1 then
    raise("nn.utils.vector_to_parameters: vec must be 1-d, got shape [%s]", table.concat(vec.shape, ", "))
  end
  local ps = param_list("vector_to_parameters", parameters)
  local total = 0
  for _, p in ipairs(ps) do total = total + p:numel() end
  if vec:numel() ~= total then
    raise("nn.utils.vector_to_parameters: vec has %d elements, the parameters have %d", vec:numel(), total)
  end
  ember.no_grad(function()
    local at = 1
    for _, p in ipairs(ps) do
      local n = p:numel()
      p:copy_(vec:narrow(1, at, n):view(p.shape))
      at = at + n
    end
  end)
end

--- nn.utils.rnn: torch.nn.utils.rnn's pad_sequence, pack_padded_sequence,
-- pad_packed_sequence, pack_sequence, unpack_sequence and unpad_sequence
-- (nn.RNN, nn.LSTM and nn.GRU take a PackedSequence).
M.rnn = {}
local packed = require "ember.nn._packed"
M.rnn.PackedSequence = packed.PackedSequence

--- torch.nn.utils.rnn.pad_sequence(sequences [, opts]): the tensors
-- [L_i, *] padded at the end of dim 1 to the longest L and stacked:
-- [L, B, *], or [B, L, *] with `batch_first = true`; the pad value is
-- `padding_value` (0). The dtype is the first sequence's; differentiable.
-- Trailing dims must match. (For Lua lists of ids use `data.pad`, which
-- also gives the mask and the lengths.)
-- @tparam table sequences a list of tensors
-- @tparam[opt] table opts `{batch_first = false, padding_value = 0}`
-- @usage local nn = require "ember.nn"
-- local p = nn.utils.rnn.pad_sequence({ember.tensor({1, 2, 3}), ember.tensor({4})}, {batch_first = true})
-- print(p:totable()[2][1], p:totable()[2][3], p.shape)   --> 4.0 0.0 ember.Size{2, 3}
function M.rnn.pad_sequence(sequences, opts, padding_value)
  local op = "nn.utils.rnn.pad_sequence"
  if type(opts) == "boolean" then opts = { batch_first = opts, padding_value = padding_value } end -- torch's positional order
  opts = opts or {}
  if type(opts) ~= "table" then raise("%s: options must be a table {batch_first =, padding_value =}, got %s", op, type(opts)) end
  for k in pairs(opts) do
    if k ~= "batch_first" and k ~= "padding_value" then
      raise("%s: unknown option '%s' (options are batch_first, padding_value)", op, tostring(k))
    end
  end
  if opts.padding_value ~= nil and type(opts.padding_value) ~= "number" and type(opts.padding_value) ~= "boolean" then
    raise("%s: padding_value must be a number, got %s", op, type(opts.padding_value))
  end
  if core.is_tensor(sequences) or type(sequences) ~= "table" then
    raise("%s: sequences must be a list of tensors, got %s", op, core.is_tensor(sequences) and "a tensor" or type(sequences))
  end
  if #sequences == 0 then raise("%s: received an empty list of sequences", op) end
  local first = sequences[1]
  local longest = 0
  for i, s in ipairs(sequences) do
    if not core.is_tensor(s) then raise("%s: sequence %d is a %s, not a tensor", op, i, type(s)) end
    if s:dim() == 0 then raise("%s: sequence %d is 0-d; sequences are [L, *]", op, i) end
    if core.is_tensor(first) and first:dim() >= 1 then
      local same = s:dim() == first:dim()
      for d = 2, s:dim() do same = same and s:size(d) == first:size(d) end
      if not same then
        raise("%s: sequence %d has shape [%s], sequence 1 [%s]: the dims after the first must match", op, i,
          table.concat(s.shape, ", "), table.concat(first.shape, ", "))
      end
    end
    if s:size(1) > longest then longest = s:size(1) end
  end
  local value = opts.padding_value or 0
  if type(value) == "boolean" then value = value and 1 or 0 end
  local rows = {}
  for i, s in ipairs(sequences) do
    s = s:to(first.dtype)
    local L = s:size(1)
    if L < longest then
      local shape = { longest - L }
      for d = 2, s:dim() do shape[d] = s:size(d) end
      s = ember.cat({ s, core.full(shape, value, { dtype = s.dtype, device = s.device }) }, 1)
    end
    rows[i] = s
  end
  return ember.stack(rows, opts.batch_first and 1 or 2)
end

--- nn.utils.rnn.pack_padded_sequence(input, lengths [, {batch_first = false, enforce_sorted = true}]):
-- torch.nn.utils.rnn.pack_padded_sequence. input [L, N, *] ([N, L, *] with batch_first), lengths a
-- tensor or list of N integers (1 <= length <= L). With enforce_sorted the lengths must not increase
-- (PyTorch's rule); enforce_sorted = false takes them in any order. nn.RNN, nn.LSTM and nn.GRU take
-- the result and give a PackedSequence out (and h_n of each sequence's last valid step);
-- pad_packed_sequence unpacks it. torch's positional batch_first, enforce_sorted work too.
-- @tparam Tensor input the padded batch
-- @param lengths each sequence's length
-- @tparam[opt] table opts
-- @treturn PackedSequence
-- @usage local nn = require "ember.nn"
-- local x = ember.randn(3, 4, 2)                    -- [N, L, *]
-- local p = nn.utils.rnn.pack_padded_sequence(x, {2, 4, 1}, {batch_first = true, enforce_sorted = false})
-- print(p.data.shape, table.concat(p.batch_sizes:totable(), " "))   --> ember.Size{7, 2}	3 2 1 1
function M.rnn.pack_padded_sequence(input, lengths, opts, enforce_sorted)
  return packed.pack_padded_sequence(input, lengths, opts, enforce_sorted)
end

--- nn.utils.rnn.pad_packed_sequence(sequence [, {batch_first = false, padding_value = 0, total_length =}]):
-- torch.nn.utils.rnn.pad_packed_sequence: the padded batch [L, N, *] ([N, L, *] with batch_first; L the
-- longest length, or total_length) in the batch's original order, the steps past each length set to
-- padding_value, and the lengths (int64). Differentiable.
-- @tparam PackedSequence sequence from pack_padded_sequence or an RNN
-- @tparam[opt] table opts
-- @treturn Tensor padded
-- @treturn Tensor lengths
-- @usage local nn = require "ember.nn"
-- local p = nn.utils.rnn.pack_padded_sequence(ember.ones(2, 3, 1), {3, 1}, {batch_first = true})
-- local x, len = nn.utils.rnn.pad_packed_sequence(p, {batch_first = true, padding_value = -1})
-- print(x:view(2, 3):totable()[2][2], len:totable()[2])   --> -1.0 1
function M.rnn.pad_packed_sequence(sequence, opts, padding_value, total_length)
  return packed.pad_packed_sequence(sequence, opts, padding_value, total_length)
end

--- nn.utils.rnn.pack_sequence(sequences [, {enforce_sorted = true}]): torch.nn.utils.rnn.pack_sequence,
-- the tensors [L_i, *] packed as pack_padded_sequence(pad_sequence(sequences), their lengths).
-- With enforce_sorted the lengths must not increase; torch's positional enforce_sorted works too.
-- @tparam table sequences a list of tensors
-- @tparam[opt] table opts
-- @treturn PackedSequence
-- @usage local nn = require "ember.nn"
-- local p = nn.utils.rnn.pack_sequence({ember.ones(1, 2), ember.ones(3, 2)}, {enforce_sorted = false})
-- print(table.concat(p.batch_sizes:totable(), " "))   --> 2 1 1
function M.rnn.pack_sequence(sequences, opts)
  local op = "nn.utils.rnn.pack_sequence"
  if type(opts) == "boolean" then opts = { enforce_sorted = opts } end
  if opts ~= nil and type(opts) ~= "table" then raise("%s: options must be a table {enforce_sorted =}, got %s", op, type(opts)) end
  for k in pairs(opts or {}) do
    if k ~= "enforce_sorted" then raise("%s: unknown option '%s' (the option is enforce_sorted)", op, tostring(k)) end
  end
  local padded = M.rnn.pad_sequence(sequences)
  local lengths, sorted = {}, not opts or opts.enforce_sorted ~= false
  for i, sq in ipairs(sequences) do
    lengths[i] = sq:size(1)
    if sorted and i > 1 and lengths[i] > lengths[i - 1] then
      raise("%s: the sequences must be sorted by decreasing length when enforce_sorted is true (sequence %d has %d "
        .. "steps after %d); pass {enforce_sorted = false} for any order", op, i, lengths[i], lengths[i - 1])
    end
  end
  return packed.pack_padded_sequence(padded, lengths, { enforce_sorted = sorted })
end

--- nn.utils.rnn.unpad_sequence(padded, lengths [, batch_first = false]): torch.nn.utils.rnn.unpad_sequence,
-- the list of the sequences [L_i, *] cut from the padded batch [L, N, *] ([N, L, *] with batch_first).
-- @tparam Tensor padded
-- @param lengths a tensor or list of N integers
-- @tparam[opt] bool|table batch_first (or `{batch_first =}`)
-- @treturn table the sequences (views)
function M.rnn.unpad_sequence(padded, lengths, batch_first)
  local op = "nn.utils.rnn.unpad_sequence"
  if type(batch_first) == "table" then batch_first = batch_first.batch_first end
  if not core.is_tensor(padded) or padded:dim() < 2 then
    raise("%s: padded must be a tensor of at least 2 dims ([L, N, *], or [N, L, *] with batch_first), got %s", op,
      core.is_tensor(padded) and (padded:dim() .. "-d") or type(padded))
  end
  local x = batch_first and padded:transpose(1, 2) or padded
  if core.is_tensor(lengths) then lengths = lengths:totable() end
  if type(lengths) ~= "table" or #lengths ~= x:size(2) then
    raise("%s: lengths must give one length per sequence (%d)", op, x:size(2))
  end
  local out = {}
  for i, n in ipairs(lengths) do
    if math.type(n) ~= "integer" or n < 0 or n > x:size(1) then
      raise("%s: length %d is %s, outside 0..%d", op, i, tostring(n), x:size(1))
    end
    out[i] = x:select(2, i):narrow(1, 1, n)
  end
  return out
end

--- nn.utils.rnn.unpack_sequence(packed_sequences): torch.nn.utils.rnn.unpack_sequence, the list of
-- the sequences [L_i, *] of a PackedSequence, in the batch's original order.
-- @tparam PackedSequence packed_sequences
-- @treturn table the sequences
function M.rnn.unpack_sequence(packed_sequences)
  local padded, lengths = packed.pad_packed_sequence(packed_sequences)
  return M.rnn.unpad_sequence(padded, lengths)
end

M.parametrize = require "ember.nn.parametrize"
M.parametrizations = require "ember.nn.parametrizations"
local norm_hooks = require "ember.nn._norm_hooks"

--- torch.nn.utils.weight_norm(module, name="weight", dim=0), the hook-based
-- weight normalisation: `module[name]` is replaced by the parameters
-- `name .. "_g"` (the norms over every dim but dim) and `name .. "_v"`
-- (the tensor), and recomputed as g * v / ||v|| before every forward.
-- dim is 1-based (the default 1 is PyTorch's 0); false is PyTorch's None
-- (one norm over the whole tensor).
-- @tparam Module module
-- @string[opt="weight"] name (or an options table `{name =, dim =}`)
-- @tparam[opt=1] int|false dim
-- @treturn Module module
-- @usage local nn = require "ember.nn"
-- local m = nn.utils.weight_norm(nn.Linear(20, 40), "weight")
-- print(m.weight_g.shape, m.weight_v.shape)   --> ember.Size{40, 1}	ember.Size{40, 20}
function M.weight_norm(module, name, dim) return norm_hooks.weight_norm(module, name, dim) end

--- torch.nn.utils.remove_weight_norm: the weight computed once more becomes
-- the parameter `name` again; `name_g` and `name_v` and the hook go.
-- @tparam Module module
-- @string[opt="weight"] name
-- @treturn Module module
-- @usage local nn = require "ember.nn"
-- local m = nn.utils.remove_weight_norm(nn.utils.weight_norm(nn.Linear(2, 2)))
-- print(m:parameter_names())   --> {"bias", "weight"}
function M.remove_weight_norm(module, name) return norm_hooks.remove_weight_norm(module, name) end

--- torch.nn.utils.spectral_norm(module, name="weight", n_power_iterations=1,
-- eps=1e-12, dim=None), the hook-based spectral normalisation: the
-- parameter becomes `name .. "_orig"`, the buffers `name .. "_u"` and
-- `name .. "_v"` hold the power iteration's vectors (random at the start),
-- and before every forward `module[name]` is recomputed as W / sigma,
-- iterating `n_power_iterations` times in training mode only. dim is
-- 1-based (default 1, or 2 for the ConvTranspose modules).
-- @tparam Module module
-- @string[opt="weight"] name (or an options table `{name =, n_power_iterations =, eps =, dim =}`)
-- @int[opt=1] n_power_iterations
-- @number[opt=1e-12] eps
-- @int[opt] dim
-- @treturn Module module
-- @usage local nn = require "ember.nn"
-- local m = nn.utils.spectral_norm(nn.Linear(20, 40))
-- print(m.weight_u.shape, m.weight_v.shape, m.weight_orig.shape)
-- --> ember.Size{40}	ember.Size{20}	ember.Size{40, 20}
function M.spectral_norm(module, name, n_power_iterations, eps, dim) return norm_hooks.spectral_norm(module, name, n_power_iterations, eps, dim) end

--- torch.nn.utils.remove_spectral_norm: the weight computed once more
-- (without iterating) becomes the parameter `name` again; `name_orig`,
-- `name_u`, `name_v` and the hook go.
-- @tparam Module module
-- @string[opt="weight"] name
-- @treturn Module module
-- @usage local nn = require "ember.nn"
-- local m = nn.utils.remove_spectral_norm(nn.utils.spectral_norm(nn.Linear(2, 2)))
-- print(m:parameter_names())   --> {"bias", "weight"}
function M.remove_spectral_norm(module, name) return norm_hooks.remove_spectral_norm(module, name) end

return M
