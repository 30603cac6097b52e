-- nn/_module_hooks.lua (internal): nn.Module's forward hooks, the
-- mechanism under register_forward_pre_hook, register_forward_hook and
-- register_full_backward_hook (their documentation is Module.lua's): each
-- module keeps its hooks in `_forward_hooks` ({pre =, post =, backward =},
-- absent while there are none, so that Module:__call stays one rawget),
-- and a call with hooks runs them around forward. The full backward hooks'
-- identity Functions are nn/_backward_hooks.lua's.
-- `require(this)(Module)` gives {call =, add =}.
local ember = require "ember.nn._ember"
local errors = require "ember._errors"
local backward_hooks = require "ember.nn._backward_hooks"

return function(Module)
  local H = {}

  -- The call of a module with forward hooks: the pre-hooks may replace the
  -- arguments (a table of them, or one value), the hooks the output. Full
  -- backward hooks wrap the arguments after the pre-hooks and the results
  -- after the hooks, as PyTorch's (nn/_backward_hooks.lua).
  function H.call(self, hooks, ...)
    local args = table.pack(...)
    for _, h in ipairs(hooks.pre) do
      local r = h(self, args)
      if r ~= nil then
        if type(r) == "table" and not Module.is_tensor(r) and not Module.is_module(r) then
          args = table.pack(table.unpack(r, 1, r.n or #r))
        else
          args = table.pack(r)
        end
      end
    end
    local bstate
    if #hooks.backward > 0 and ember.is_grad_enabled() then
      args, bstate = backward_hooks.wrap_inputs(self, hooks.backward, args)
    end
    local out = table.pack(Module.raw_forward(self)(self, table.unpack(args, 1, args.n)))
    for _, h in ipairs(hooks.post) do
      local r = h(self, args, table.unpack(out, 1, out.n))
      if r ~= nil then out = table.pack(r) end
    end
    if bstate then out = backward_hooks.wrap_outputs(bstate, out) end
    return table.unpack(out, 1, out.n)
  end

  -- Adds fn to the hooks of that kind ("pre", "post", "backward"); the handle's
  -- remove() takes it out (and the table, once empty: the plain call again).
  -- Options after fn (torch 2's prepend, with_kwargs, always_call) are
  -- refused: with_kwargs ignored would call fn with the output as kwargs.
  function H.add(self, kind, fn, what, ...)
    if type(fn) ~= "function" then
      errors.raise("%s.%s: expected a function, got %s", self.__name, what, type(fn))
    end
    if select("#", ...) > 0 then
      errors.raise("%s.%s: takes one argument, the hook (torch 1.13's); options such as prepend, with_kwargs "
        .. "and always_call are not supported, got a %s after it", self.__name, what, type((...)))
    end
    local hooks = rawget(self, "_forward_hooks")
    if not hooks then
      hooks = { pre = {}, post = {}, backward = {} }
      rawset(self, "_forward_hooks", hooks)
    end
    table.insert(hooks[kind], fn)
    return {
      remove = function()
        for i, h in ipairs(hooks[kind]) do
          if h == fn then
            table.remove(hooks[kind], i)
            break
          end
        end
        local empty = #hooks.pre == 0 and #hooks.post == 0 and #hooks.backward == 0
        if empty and rawget(self, "_forward_hooks") == hooks then
          rawset(self, "_forward_hooks", nil)
        end
      end,
    }
  end

  return H
end
