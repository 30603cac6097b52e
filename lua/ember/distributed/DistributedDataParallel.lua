-- DistributedDataParallel(module [, opts]): the same model on every rank,
-- gradients averaged over the ranks during backward (Li et al., VLDB 2020).
--
--   local dist = require "ember.distributed"     -- under `mpirun -np 2 build/bin/ember x.lua`
--   dist.init()
--   local model, criterion = nn.Linear(4, 2), nn.MSELoss()
--   local opt = optim.SGD(model:parameters(), {lr = 0.1})
--   local ddp = dist.DistributedDataParallel(model, {bucket_cap_mb = 25})
--   local x, y = ember.randn(8, 4) + dist.rank(), ember.randn(8, 2)   -- each rank its own batch
--   local loss = criterion(ddp(x), y)      -- ddp(...) is model(...)
--   opt:zero_grad(); loss:backward()       -- p.grad is the average over ranks here
--   opt:step()
--   local w = dist.all_gather(model.weight)   -- so every rank took the same step
--   print((w[1] - w[2]):abs():max():item())   --> 0.0
--   ddp:no_sync(function() criterion(ddp(x), y):backward() end) -- accumulate locally, no communication
--
-- At construction every rank checks that it has the same parameter and
-- buffer names, shapes and dtypes as rank 0 (the first difference is an
-- error on every rank), then takes rank 0's values. Parameters are put in
-- buckets of about bucket_cap_mb MiB, in reverse registration order (the
-- order backward tends to finish them). A gradient-ready hook on each
-- parameter copies its gradient into its bucket as soon as backward has
-- finished it; a full bucket is all-reduced at once, on the communication
-- thread, while backward goes on. Buckets start strictly in order, so every
-- rank issues the same collectives in the same order whatever its timing.
-- At the end of backward the remaining buckets start (a parameter that got
-- no gradient in this backward contributes the one it holds, or zeros), all
-- are waited for, and each gradient becomes the mean over ranks. A parameter
-- that no rank holds a gradient of keeps none (p.grad stays nil, as one
-- process on the whole batch leaves it: an optimizer skips it). Parameters
-- that do not require grad (frozen) take rank 0's values and are not
-- synchronised after that, as PyTorch's.
--
-- Only the public Module API is used (parameter_names, named_parameters,
-- state_dict), so any module works, C userdata modules included.
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember"
local dist = require "ember.distributed"

local DDP = {}
DDP.__name = "DistributedDataParallel"

local OPTIONS = {bucket_cap_mb = true, broadcast = true, check = true, overlap = true}
local ELEMENT_SIZE = {float32 = 4, float64 = 8, bfloat16 = 2, int64 = 8, bool = 1}

local shape_str = require("ember._errors").shape_str

-- "name shape dtype" per tensor, parameters in registration order, then
-- the other state tensors (buffers) by name.
local function signature(module, names, params)
  local lines, is_param = {}, {}
  for i, n in ipairs(names) do
    lines[#lines + 1] = ("param %s %s %s%s"):format(n, shape_str(params[i]), params[i].dtype,
                                                     params[i].requires_grad and "" or " frozen")
    is_param[n] = true
  end
  local sd, others = module:state_dict(), {}
  for n in pairs(sd) do if not is_param[n] then others[#others + 1] = n end end
  table.sort(others)
  for _, n in ipairs(others) do
    lines[#lines + 1] = ("buffer %s %s %s"):format(n, shape_str(sd[n]), sd[n].dtype)
  end
  return lines, sd, others
end

local function split_lines(s)
  local t = {}
  for line in (s .. "\n"):gmatch("(.-)\n") do if line ~= "" then t[#t + 1] = line end end
  return t
end

-- Every rank gathers every rank's signature and raises the same error at
-- the first difference from rank 0: no rank waits on a collective the
-- others will never call.
local function check_same(lines)
  local all = dist.all_gather_string(table.concat(lines, "\n"))
  local ref = split_lines(all[1])
  for r = 2, #all do
    local mine = split_lines(all[r])
    for i = 1, math.max(#ref, #mine) do
      if ref[i] ~= mine[i] then
        local function say(x) return x and ("'%s'"):format(x) or "nothing (the list ended)" end
        error(("DistributedDataParallel: the model differs across ranks: tensor %d is %s on rank 0 but %s on "
               .. "rank %d (rank 0 has %d parameter/buffer tensors, rank %d has %d)"):format(
               i, say(ref[i]), say(mine[i]), r - 1, #ref, r - 1, #mine), 0)
      end
    end
  end
end

local function new_bucket(dtype, device)
  return {params = {}, index = {}, offset = {}, numel = 0, dtype = dtype, device = device}
end

function DDP.new(module, opts)
  opts = opts or {}
  if type(module) ~= "table" and type(module) ~= "userdata" or not module.parameter_names then
    error("DistributedDataParallel: expected an nn module, got " .. type(module), 2)
  end
  for k in pairs(opts) do
    if not OPTIONS[k] then error(("DistributedDataParallel: unknown option '%s'"):format(tostring(k)), 2) end
  end
  if not dist.is_initialized() then dist.init() end
  local cap_mb = opts.bucket_cap_mb or 25
  if type(cap_mb) ~= "number" or cap_mb <= 0 then
    error("DistributedDataParallel: bucket_cap_mb must be a positive number", 2)
  end
  local self = setmetatable({module = module, world = dist.world_size(), rank = dist.rank(),
                             bucket_cap_mb = cap_mb, overlap = opts.overlap ~= false,
                             require_sync = true, hooks = {}}, DDP)
  local names, named = module:parameter_names(), module:named_parameters()
  local params = {}
  for i, n in ipairs(names) do params[i] = named[n] end
  self.names, self.params = names, params
  local lines, sd, others = signature(module, names, params)
  if opts.check ~= false then check_same(lines) end
  -- rank 0's values everywhere
  if opts.broadcast ~= false then
    ember.no_grad(function()
      for _, p in ipairs(params) do dist.broadcast(p, 0) end
      for _, n in ipairs(others) do dist.broadcast(sd[n], 0) end
    end)
  end
  -- buckets, last parameter first; a new bucket when full or when the dtype or device changes.
  -- Frozen parameters get no gradient: they stay out.
  local cap = cap_mb * 1024 * 1024
  local buckets, b = {}, nil
  self.bucket_of = {}
  for i = #params, 1, -1 do
    local p = params[i]
    if not p.requires_grad then goto frozen end
    local bytes = p:numel() * ELEMENT_SIZE[p.dtype]
    if not b or b.dtype ~= p.dtype or b.device ~= p.device or (b.numel > 0 and b.bytes + bytes > cap) then
      b = new_bucket(p.dtype, p.device)
      b.bytes = 0
      buckets[#buckets + 1] = b
    end
    b.params[#b.params + 1] = i
    b.offset[#b.params] = b.numel
    b.numel = b.numel + p:numel()
    b.bytes = b.bytes + bytes
    self.bucket_of[i] = #buckets
    ::frozen::
  end
  -- each parameter's slice of its bucket, made once (views of the flat buffer);
  -- after them one flag per parameter: 1 where this rank holds a gradient of
  -- it, so the mean is above 0 where some rank does
  self.slice_of = {}
  for _, bk in ipairs(buckets) do
    bk.flat = ember.zeros({bk.numel + #bk.params}, {dtype = bk.dtype, device = bk.device})
    bk.flags = bk.flat:narrow(1, bk.numel + 1, #bk.params)
    bk.slices = {}
    for pos, i in ipairs(bk.params) do
      local p = params[i]
      bk.slices[pos] = bk.flat:narrow(1, bk.offset[pos] + 1, p:numel()):view(p.shape)
      self.slice_of[i] = bk.slices[pos]
    end
  end
  self.buckets = buckets
  self:_reset()
  for i, p in ipairs(params) do
    if self.bucket_of[i] then
      self.hooks[#self.hooks + 1] = p:register_grad_ready_hook(function() self:_ready(i) end)
    end
  end
  self.hooks[#self.hooks + 1] = ember.register_backward_end_hook(function() self:_finish() end)
  return self
end

function DDP:_reset()
  self.ready, self.n_ready_in = {}, {}
  for k = 1, #self.buckets do self.n_ready_in[k] = 0 end
  self.next_launch, self.works, self.active = 1, {}, false
end

function DDP:_launch_ready(all)
  while self.next_launch <= #self.buckets do
    local k = self.next_launch
    local bk = self.buckets[k]
    if not all and self.n_ready_in[k] < #bk.params then return end
    local flags = {}
    for pos, i in ipairs(bk.params) do -- unused parameters contribute the gradient they hold, or zeros
      if not self.ready[i] then
        local g = self.params[i].grad
        if g then bk.slices[pos]:copy_(g) else bk.slices[pos]:zero_() end
        flags[pos] = g and 1 or 0
      else
        flags[pos] = 1
      end
    end
    bk.flags:copy_(ember.tensor(flags, {dtype = bk.dtype}))
    self.works[k] = dist.all_reduce(bk.flat, "mean", {async = true})
    self.next_launch = k + 1
  end
end

-- Parameter i's gradient is final for this backward.
function DDP:_ready(i)
  if not self.require_sync or self.ready[i] then return end
  self.active = true
  local k = self.bucket_of[i]
  local g = self.params[i].grad
  if g then self.slice_of[i]:copy_(g) else self.slice_of[i]:zero_() end
  self.ready[i] = true
  self.n_ready_in[k] = self.n_ready_in[k] + 1
  if self.overlap then self:_launch_ready(false) end
end

-- The backward is over: start what is left, wait, write the means back.
function DDP:_finish()
  if not self.active then return end
  local t0 = ember.clock()
  local ok, err = pcall(function()
    self:_launch_ready(true)
    for k, bk in ipairs(self.buckets) do
      self.works[k]:wait_unpositioned() -- errors: ember.backward names the user's line
      local held = bk.flags:double():totable()
      for pos, i in ipairs(bk.params) do
        if held[pos] > 0 then -- some rank holds a gradient
          local p = self.params[i]
          local mean = bk.slices[pos]
          local g = p.grad
          if g then g:copy_(mean) else p.grad = mean:clone() end
        end
      end
    end
  end)
  self.last_wait_s = ember.clock() - t0
  self:_reset()
  if not ok then error(err, 0) end
end

-- Runs fn(...) with gradient averaging off (gradients accumulate locally,
-- as torch's `with ddp.no_sync()`); the first backward after it averages
-- the accumulated gradients.
function DDP:no_sync(fn, ...)
  local prev = self.require_sync
  self.require_sync = false
  local r = table.pack(pcall(fn, ...))
  self.require_sync = prev
  if not r[1] then error(r[2], 0) end
  return table.unpack(r, 2, r.n)
end

-- Takes the hooks away (the module trains alone again).
function DDP:remove_hooks()
  for _, h in ipairs(self.hooks) do h:remove() end
  self.hooks = {}
end

-- Bucket sizes in elements, in launch order (for tests and benchmarks).
function DDP:bucket_sizes()
  local t = {}
  for k, bk in ipairs(self.buckets) do t[k] = bk.numel end
  return t
end

function DDP:forward(...) return self.module(...) end
function DDP:__call(...) return self.module(...) end

-- Everything else is the wrapped module's: ddp:parameters(), ddp:train(),
-- ddp:state_dict() (without a "module." prefix, unlike PyTorch), ...
DDP.__index = function(self, k)
  local v = rawget(DDP, k)
  if v ~= nil then return v end
  local m = rawget(self, "module")
  local mv = m[k]
  if type(mv) == "function" then
    return function(s, ...)
      if s == self then return mv(m, ...) end
      return mv(s, ...)
    end
  end
  return mv
end

function DDP:__tostring()
  return ("DistributedDataParallel(world_size=%d, buckets=%d, bucket_cap_mb=%g)\n  (module): %s")
      :format(self.world, #self.buckets, self.bucket_cap_mb, tostring(self.module):gsub("\n", "\n  "))
end

return setmetatable(DDP, {__call = function(_, module, opts) return DDP.new(module, opts) end})
