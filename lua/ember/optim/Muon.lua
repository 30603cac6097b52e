--- optim.Muon(params, {lr=1e-3, weight_decay=0.1, momentum=0.95,
-- nesterov=true, ns_coefficients={3.4445, -4.7750, 2.0315}, eps=1e-7,
-- ns_steps=5, adjust_lr_fn="original", ns_dtype="bfloat16"}): MomentUm
-- Orthogonalized by Newton-Schulz (Keller Jordan, 2024), with the names,
-- defaults and arithmetic of torch.optim.Muon (PyTorch 2.9, a port of
-- github.com/KellerJordan/Muon muon.py; its own defaults are lr=0.02,
-- weight_decay=0: give them for its runs). For the 2-D weight matrices of
-- hidden layers only: a parameter of any other shape is refused when the
-- optimizer is made. Give biases, norm gains, embeddings and the output
-- layer to optim.AdamW in a second optimizer and step both (the @usage).
--   buf = momentum * buf + (1 - momentum) * g        (buf:lerp_(g, 1 - momentum))
--   u = nesterov and g + momentum * (buf - g) or buf (g:lerp(buf, momentum))
--   X = u in ns_dtype, transposed when it has more rows than columns
--   X = X / max(||X||_F, eps); then ns_steps times:
--       G = X X^T;  X = a X + (b G + c G G) X
--   p = p * (1 - lr * weight_decay) - lr * ratio * X
-- ratio: sqrt(max(1, rows / cols)) ("original", Keller Jordan's) or
-- 0.2 * sqrt(max(rows, cols)) ("match_rms_adamw", Moonshot's: reuses an
-- AdamW lr and weight decay). ns_dtype: the dtype of the Newton-Schulz
-- iteration, ember's option: "bfloat16" as both references run it, or
-- "float32" / "float64" (tests/lua/optim_new_spec.lua checks float64
-- against torch to 1e-12). The gradient is not modified (muon.py's
-- nesterov lerps it in place). A parameter without a gradient is skipped
-- (torch.optim.Muon's way). use_addmm is taken and ignored (the same
-- products). State: momentum_buffer (torch's name).
-- @classmod optim.Muon
local ember = require "ember.nn._ember"
local Optimizer = require "ember.optim.Optimizer"
local shape_str = require("ember._errors").shape_str

local Muon = Optimizer:extend("Muon", {
  lr = 1e-3, weight_decay = 0.1, momentum = 0.95, nesterov = true,
  ns_coefficients = { 3.4445, -4.7750, 2.0315 }, eps = 1e-7, ns_steps = 5,
  adjust_lr_fn = "original", ns_dtype = "bfloat16",
}, { "use_addmm" })
Muon.POSITIONAL = { "weight_decay", "momentum", "nesterov", "ns_coefficients", "eps", "ns_steps", "adjust_lr_fn",
  "use_addmm" }

local NS_DTYPES = { bfloat16 = true, float32 = true, float64 = true }
local ADJUST = { original = true, match_rms_adamw = true }

--- Checks a parameter group's options and that every parameter is a 2-D matrix; raises naming the bad one.
-- @usage local w = ember.randn(8, 4):requires_grad_()
-- print(pcall(optim.Muon, {w}, {momentum = 1.5}))   --> false ...Muon: momentum must be a number in [0, 1), got 1.5
-- print(pcall(optim.Muon, {ember.zeros(4):requires_grad_()}))   --> false ...Muon: group 1, parameter 1 has shape [4] (1-D): ...
function Muon:check_group(g)
  Optimizer.check_group(self, g)
  if not Optimizer.in_range(g.momentum, 0, 1) then
    self:_error("momentum must be a number in [0, 1), got %s", tostring(g.momentum))
  end
  for _, k in ipairs { "weight_decay", "eps" } do
    if not Optimizer.in_range(g[k], 0) then self:_error("%s must be a number >= 0, got %s", k, tostring(g[k])) end
  end
  if type(g.nesterov) ~= "boolean" then self:_error("nesterov must be a boolean, got %s", tostring(g.nesterov)) end
  local c = g.ns_coefficients
  if type(c) ~= "table" or #c ~= 3 or type(c[1]) ~= "number" or type(c[2]) ~= "number" or type(c[3]) ~= "number" then
    self:_error("ns_coefficients must be {a, b, c}, three numbers, got %s",
      type(c) == "table" and ("{" .. table.concat(c, ", ") .. "}") or tostring(c))
  end
  if math.type(g.ns_steps) ~= "integer" or g.ns_steps < 0 or g.ns_steps >= 100 then
    self:_error("ns_steps must be an integer in [0, 100), got %s", tostring(g.ns_steps))
  end
  if not ADJUST[g.adjust_lr_fn] then
    self:_error("adjust_lr_fn must be \"original\" or \"match_rms_adamw\", got %s", tostring(g.adjust_lr_fn))
  end
  if not NS_DTYPES[g.ns_dtype] then
    self:_error("ns_dtype must be \"bfloat16\", \"float32\" or \"float64\", got %s", tostring(g.ns_dtype))
  end
  for i, p in ipairs(g.params or {}) do
    if p:dim() ~= 2 then
      self:_error("group %d, parameter %d has shape %s (%d-D): Muon takes only the 2-D weight matrices of hidden "
        .. "layers; give biases, norm weights, embeddings and the output layer to another optimizer "
        .. "(optim.AdamW) and step both", #self.param_groups + 1, i, shape_str(p), p:dim())
    end
  end
end

-- The quintic Newton-Schulz iteration of torch.optim.Muon's
-- _zeropower_via_newtonschulz, in `dtype` (X / max(||X||_F, eps) first).
local function newton_schulz(G, coeffs, steps, eps, dtype)
  local a, b, c = coeffs[1], coeffs[2], coeffs[3]
  local X = G:to(dtype)
  local tall = G.shape[1] > G.shape[2]
  if tall then X = X:t() end
  X = X / math.max(X:norm():item(), eps)
  for _ = 1, steps do
    local gram = X:matmul(X:t())
    local upd = gram * b + (gram * c):matmul(gram)
    X = X * a + upd:matmul(X)
  end
  if tall then X = X:t() end
  return X
end

--- One Muon update of the 2-D parameter p in place.
-- @usage -- Muon for the hidden matrix, AdamW for the rest; both step
-- ember.manual_seed(0)
-- local model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1))
-- local muon = optim.Muon({model[3].weight}, {lr = 0.02, weight_decay = 0})
-- local adamw = optim.AdamW({model[1].weight, model[1].bias, model[3].bias, model[5].weight, model[5].bias},
--   {lr = 1e-2})
-- local x = ember.randn(64, 4)
-- local y = (x:narrow(2, 1, 1) * x:narrow(2, 2, 1)):tanh()
-- local first, loss
-- for step = 1, 100 do
--   muon:zero_grad(); adamw:zero_grad()
--   loss = nn.functional.mse_loss(model(x), y)
--   loss:backward()
--   muon:step(); adamw:step()
--   first = first or loss:item()
-- end
-- print(loss:item() < first / 4)   --> true
function Muon:update(p, grad, st, g)
  ember.no_grad(function()
    if not st.momentum_buffer then st.momentum_buffer = self.zeros_like(p) end
    local buf = st.momentum_buffer
    buf:lerp_(grad, 1 - g.momentum)
    local u = g.nesterov and grad:lerp(buf, g.momentum) or buf
    local O = newton_schulz(u, g.ns_coefficients, g.ns_steps, g.eps, g.ns_dtype)
    local rows, cols = p.shape[1], p.shape[2]
    local ratio
    if g.adjust_lr_fn == "match_rms_adamw" then
      ratio = 0.2 * math.sqrt(math.max(rows, cols))
    else
      ratio = math.sqrt(math.max(1, rows / cols))
    end
    p:mul_(1 - g.lr * g.weight_decay)
    p:add_(O:to(p.dtype) * (-g.lr * ratio))
  end)
end

return Muon
