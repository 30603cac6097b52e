--- nn.FeedForward(d_model, d_ff [, {activation="relu"|"gelu"|"silu"|"swiglu"|"geglu"|function|module,
-- gated=, dropout=0, bias=true, dtype=, device=}]): the position-wise MLP of a Transformer.
-- Lua's table of names works too: nn.FeedForward{d_model = 64, d_ff = 256, gated = true}
-- (d_ff also as dim_feedforward, the Transformer layers' name).
--
-- With "relu", "gelu" or "silu" it is linear2(dropout(act(linear1(x)))), as inside
-- torch.nn.TransformerEncoderLayer. With a gated activation it is the
-- gated linear unit of Shazeer's "GLU Variants Improve Transformer" (2020),
-- as in Llama:
--
--    linear2(dropout(act(linear1(x)) * linear3(x)))
--
-- where act is SiLU for "swiglu" and the exact GELU for "geglu". `gated =
-- true` gates the activation it is given: {activation = "silu", gated =
-- true} is "swiglu", "gelu" is "geglu", "relu" ReGLU, a function or module
-- act(linear1(x)) * linear3(x); `gated = false` with "swiglu" or "geglu"
-- is an error (they are gated). The three
-- projections map to the usual names: linear1 = Meta's `w1` = Hugging
-- Face's `gate_proj`; linear3 = `w3` = `up_proj`; linear2 = `w2` =
-- `down_proj` (so `feed_forward.w1.weight` or `mlp.gate_proj.weight`
-- loads into `linear1.weight`). Llama has no biases: pass `bias = false`.
-- A gated FFN has 3 * d_model * d_ff weights instead of 2: Llama keeps the
-- count of a plain FFN with d_ff = 2/3 of the usual 4 * d_model.
-- Errors name nn.FeedForward: an unknown activation, bad sizes (nn.Linear's messages).
-- @usage local ffn = nn.FeedForward(64, 256, {activation = "gelu"})
-- local llama_mlp = nn.FeedForward(64, 172, {activation = "swiglu", bias = false})
-- local same = nn.FeedForward(64, 172, {activation = "silu", gated = true, bias = false})
-- print(llama_mlp(ember.randn(2, 5, 64)).shape)   --> ember.Size{2, 5, 64}
-- @classmod nn.FeedForward
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"
local Linear = require "ember.nn.Linear"
local Dropout = require "ember.nn.Dropout"
local ReLU = require "ember.nn.ReLU"
local GELU = require "ember.nn.GELU"
local SiLU = require "ember.nn.SiLU"
local ember = require "ember.nn._ember"

local FeedForward = Module:extend("FeedForward")
-- Lua's table of names, nn.FeedForward{d_model = 64, d_ff = 256, gated = true}, and the
-- options after the sizes in the order above (nn.Module's construct: nn/_module_args.lua);
-- dim_feedforward is the Transformer layers' (PyTorch's) name of d_ff
FeedForward.SIGNATURE = { sizes = { "d_model", "d_ff" }, options = { "activation", "gated", "dropout", "bias" },
  aliases = { dim_feedforward = "d_ff" } }

-- activation name -> {module maker, gated?}
local ACTIVATIONS = {
  relu = { ReLU, false },
  gelu = { GELU, false },
  silu = { SiLU, false },
  swiglu = { SiLU, true },
  geglu = { GELU, true },
}
-- the gated name of a plain activation (gated = true)
local GATED = { relu = "reglu", gelu = "geglu", silu = "swiglu" }

function FeedForward:__init(d_model, d_ff, opts)
  opts = Module.check_options("nn.FeedForward", opts, { "activation", "gated", "dropout", "bias", "dtype", "device" })
  for _, s in ipairs { { "d_model", d_model }, { "d_ff", d_ff } } do
    if math.type(s[2]) ~= "integer" or s[2] < 1 then
      error(("FeedForward: %s must be a positive integer, got %s (nn.FeedForward(d_model, d_ff [, opts]) or "
        .. "nn.FeedForward{d_model = , d_ff = , ...})"):format(s[1], tostring(s[2])), 2)
    end
  end
  local act = opts.activation or "relu"
  -- PyTorch's layers also take a unary callable: a function (F.gelu) or a module (nn.GELU())
  local custom = type(act) == "function" or Module.is_module(act)
  local kind = not custom and ACTIVATIONS[act]
  if not custom and not kind then
    error("FeedForward: activation must be \"relu\", \"gelu\", \"silu\", \"swiglu\" or \"geglu\", got "
      .. tostring(act) .. " (or a function or module of one tensor)", 2)
  end
  if opts.gated ~= nil and type(opts.gated) ~= "boolean" then
    error("FeedForward: gated must be true or false, got " .. tostring(opts.gated), 2)
  end
  if opts.gated == false and kind and kind[2] then
    error(("FeedForward: activation \"%s\" is gated, but gated = false (give \"%s\" for the plain one)")
      :format(act, act == "swiglu" and "silu" or "gelu"), 2)
  end
  self.activation_name = custom and (Module.is_module(act) and act.__name or "function") or act
  self.gated = kind and kind[2] or false
  if opts.gated then
    self.gated = true
    if kind and GATED[act] then self.activation_name = GATED[act] end
  end
  local lopts = { bias = opts.bias, dtype = opts.dtype, device = opts.device }
  self:add_module("linear1", Linear(d_model, d_ff, lopts))
  if self.gated then self:add_module("linear3", Linear(d_model, d_ff, lopts)) end
  if type(act) == "function" then
    rawset(self, "_activation_fn", act)
  else
    self:add_module("activation", custom and act or kind[1]())
  end
  self:add_module("dropout", Dropout(opts.dropout or 0))
  self:add_module("linear2", Linear(d_ff, d_model, lopts))
end

--- linear2(dropout(activation(linear1(x)))), or with a gated activation
-- linear2(dropout(activation(linear1(x)) * linear3(x))).
-- @tparam Tensor x [..., d_model]
-- @treturn Tensor [..., d_model]
function FeedForward:forward(x)
  local fn = rawget(self, "_activation_fn")
  local fused = self.gated and not fn and FeedForward.fused_activation(self.activation)
  local h
  if fused then
    h = ember._gated(fused, self.linear1(x), self.linear3(x))
  else
    h = fn and fn(self.linear1(x)) or self.activation(self.linear1(x))
    if self.gated then h = h * self.linear3(x) end
  end
  return self.linear2(self.dropout(h))
end

--- The activation module's name for the fused act(gate) * up
-- (`ember._gated`: one pass each way, the same values as the module then a
-- product, to the bit in float32 and float64), or nil where the module
-- must run itself: another activation, the tanh GELU, or one with forward
-- hooks (they would not see a call).
-- @param m the activation module
-- @treturn ?string "silu" or "gelu"
function FeedForward.fused_activation(m)
  if rawget(m, "_forward_hooks") then return nil end
  local cls = getmetatable(m)
  if cls == SiLU then return "silu" end
  if cls == GELU and m.approximate == "none" then return "gelu" end
  return nil
end

-- The gated projections' other names: Hugging Face's (Llama's MLP) and Meta's.
local GATED_NAMES = { gate_proj = "linear1", up_proj = "linear3", down_proj = "linear2",
                      w1 = "linear1", w3 = "linear3", w2 = "linear2" }

--- A gated FFN loads Hugging Face's (gate_proj, up_proj, down_proj) and
-- Meta's (w1, w3, w2) names as linear1, linear3 and linear2; then
-- Module.upgrade_state_dict.
-- @tparam table sd name -> tensor (relative to this module)
-- @string[opt] prefix as Module.upgrade_state_dict's
-- @treturn table
-- @treturn integer how many earlier-ember names were mapped
function FeedForward:upgrade_state_dict(sd, prefix)
  local out = {}
  for k, v in pairs(sd) do out[k] = v end
  if self.linear3 then
    for k, v in pairs(sd) do
      local head, rest
      if type(k) == "string" then head, rest = k:match("^([^.]+)%.(.+)$") end
      local to = head and GATED_NAMES[head]
      if to and sd[to .. "." .. rest] == nil then
        out[to .. "." .. rest], out[k] = v, nil
      end
    end
  end
  return Module.upgrade_state_dict(self, out, prefix)
end

--- The activation, for printing ("activation=swiglu" when gated).
function FeedForward:extra_repr()
  return self.gated and ("activation=" .. self.activation_name) or ""
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
FeedForward.forward = require("ember._errors").wrap(FeedForward.forward)

return FeedForward
