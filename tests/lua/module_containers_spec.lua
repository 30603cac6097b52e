-- Module trees and containers as a PyTorch 1.13 user walks and edits them:
-- a module registered twice is walked once (PyTorch's memo); nn.Sequential's
-- list methods (append, insert, extend, pop); ModuleDict / ParameterDict
-- items() and clear(); nn.ModuleList from another list; `for name, p in
-- m:named_parameters()` as PyTorch's loops; Module:state_dict(destination,
-- prefix, keep_vars).
local ember = require "ember"
local nn = require "ember.nn"
local parity = require "tests.lua.helpers.parity"
local raises_here = parity.raises_here

local function names_of(pairs_list)
  local out = {}
  for name in pairs_list do out[#out + 1] = name end
  return out
end

describe("a module registered twice is walked once, as PyTorch's memo", function()
  it("Sequential(l, relu, l): named_modules, named_children, modules, children", function()
    local l = nn.Linear(2, 2)
    local m = nn.Sequential(l, nn.ReLU(), l)
    -- torch: ['', '0', '1'] and ['0', '1'] (ember's Sequential names from 1)
    assert.are.same({ "", "1", "2" }, names_of(m:named_modules()))
    assert.are.same({ "1", "2" }, names_of(m:named_children()))
    assert.are.equal(3, #m:modules())
    assert.are.equal(2, #m:children())
    assert.are.equal(2, #m:parameters())
  end)

  it("one child under two names: listed under its first, apply calls fn once per module", function()
    local m = nn.Module()
    m.a = nn.Linear(2, 2)
    m.b = m.a
    assert.are.same({ "", "a" }, names_of(m:named_modules()))
    assert.are.same({ "a" }, names_of(m:named_children()))
    local calls = 0
    m:apply(function() calls = calls + 1 end)
    assert.are.equal(2, calls) -- torch: a, then m
    -- the callback form too
    local seen = {}
    m:named_modules(function(prefix) seen[#seen + 1] = prefix end)
    assert.are.same({ "", "a." }, seen)
    -- the state dict keeps both names (torch's state_dict does not dedup)
    local sd = m:state_dict()
    assert.is_not_nil(sd["a.weight"])
    assert.is_not_nil(sd["b.weight"])
  end)

  it("a module shared by two containers: each container lists it, the root once (torch's apply: 5 calls)", function()
    local inner = nn.Linear(2, 2)
    local o = nn.Module()
    o.x = nn.Sequential(inner)
    o.y = nn.Sequential(inner)
    assert.are.same({ "", "x", "x.1", "y" }, names_of(o:named_modules()))
    local calls = 0
    o:apply(function() calls = calls + 1 end)
    assert.are.equal(5, calls)
  end)

  it("ModuleDict:values() keeps every value, as torch's values()", function()
    local l = nn.Linear(2, 2)
    local md = nn.ModuleDict { p = l, q = l }
    assert.are.equal(2, #md:values())
    assert.are.equal(1, #md:children())
  end)
end)

describe("nn.Sequential's list methods (PyTorch 1.13's append, insert, extend, pop)", function()
  local function names(s)
    local t = {}
    for i = 1, #s do t[i] = s[i].__name end
    return t
  end

  -- were: seq:append / insert / pop 'attempt to call a nil value'; seq:extend{...} made a class (Module.extend)
  -- and left seq unchanged
  it("append, extend and insert change the list and rename the children 1..n", function()
    local s = nn.Sequential(nn.Linear(1, 2))
    assert.are.equal(s, s:append(nn.ReLU()))
    assert.are.equal(s, s:extend { nn.Linear(2, 3), nn.Tanh() })
    assert.are.same({ "Linear", "ReLU", "Linear", "Tanh" }, names(s))
    s:insert(1, nn.Identity())
    assert.are.same({ "Identity", "Linear", "ReLU", "Linear", "Tanh" }, names(s))
    assert.are.same({ "2.bias", "2.weight", "4.bias", "4.weight" }, parity.sorted_keys(s:state_dict()))
    assert.are.same({ 3, 3 }, { s(ember.ones(3, 1)).shape[1], s(ember.ones(3, 1)).shape[2] })
    s:extend(nn.Sequential(nn.Sigmoid()))
    assert.are.equal("Sigmoid", s[-1].__name)
  end)

  -- was (ModuleList): insert(-1, m) appended
  it("insert(-1, m) puts m before the last module, as PyTorch's seq.insert and Python's list.insert", function()
    local s = nn.Sequential(nn.ReLU(), nn.Tanh())
    s:insert(-1, nn.Sigmoid())
    assert.are.same({ "ReLU", "Sigmoid", "Tanh" }, names(s))
    s:insert(-3, nn.Identity())
    assert.are.same({ "Identity", "ReLU", "Sigmoid", "Tanh" }, names(s))
    local l = nn.ModuleList { nn.ReLU(), nn.Tanh() }
    l:insert(-1, nn.Sigmoid())
    assert.are.same({ "ReLU", "Sigmoid", "Tanh" }, names(l))
    assert.are.same({ "Sigmoid" }, { l[2].__name })
    raises_here(function() s:insert(-5, nn.ReLU()) end, "Sequential.insert: index -5 is out of range 1..5 (or -4..-1)")
    raises_here(function() l:insert(0, nn.ReLU()) end, "ModuleList.insert: index 0 is out of range 1..4 (or -3..-1)")
  end)

  it("pop removes the last or the i-th module and returns it", function()
    local s = nn.Sequential(nn.Linear(1, 2), nn.ReLU(), nn.Linear(2, 3))
    assert.are.equal("Linear", s:pop().__name)
    assert.are.equal("Linear", s:pop(1).__name)
    assert.are.same({ "ReLU" }, names(s))
    raises_here(function() s:pop(3) end, "Sequential.pop: index 3 is out of range for a Sequential of 1 modules")
  end)

  it("the class's extend still makes a subclass", function()
    local Stack = nn.Sequential:extend("Stack")
    assert.are.equal("Stack", Stack.__name)
    assert.are.equal(1, #Stack(nn.ReLU()))
    assert.are.equal("Pile", nn.ModuleList:extend("Pile").__name)
  end)

  -- was: an empty Sequential, the named modules dropped without a word
  it("refuses named modules (a Lua table has no order), at the user's line", function()
    raises_here(function() nn.Sequential { fc1 = nn.Linear(1, 1) } end, "Sequential: got a module named 'fc1'")
    raises_here(function() nn.Sequential(nn.ReLU()):extend { 1 } end, "Sequential.extend: entry 1 is a number")
  end)
end)

describe("ModuleDict and ParameterDict items() in a Python-style loop", function()
  -- was: 'attempt to call a table value (for iterator)'; ipairs over the pairs as before
  it("for name, v in d:items() gives the names and values in order", function()
    local d = nn.ModuleDict { a = nn.ReLU() }
    d:update { b = nn.Tanh() }
    local got = {}
    for name, m in d:items() do got[#got + 1] = name .. "=" .. m.__name end
    assert.are.same({ "a=ReLU", "b=Tanh" }, got)
    assert.are.same({ "a", "ReLU" }, { d:items()[1][1], d:items()[1][2].__name })
    local p = nn.ParameterDict { w = ember.ones(2) }
    p.b = ember.zeros(3)
    got = {}
    for name, t in p:items() do got[#got + 1] = name .. "=" .. t:numel() end
    assert.are.same({ "w=2", "b=3" }, got)
    for _, pair in ipairs(p:items()) do assert.is_true(pair[2].requires_grad) end
  end)

  -- was: 'attempt to call a nil value (method 'clear')'
  it("clear() removes every entry, from the state dict and the parameters too", function()
    local d = nn.ModuleDict { { "a", nn.Linear(1, 1) }, { "b", nn.Linear(1, 2) } }
    assert.are.equal(d, d:clear())
    assert.are.same({ 0, 0 }, { #d, #d:parameters() })
    assert.is_nil(next(d:state_dict()))
    d.c = nn.ReLU()
    assert.are.same({ "c" }, d:keys())
    local p = nn.ParameterDict { { "w", ember.ones(2) }, { "b", ember.ones(1) } }
    assert.are.equal(p, p:clear())
    assert.are.same({ 0, 0 }, { #p, #p:parameters() })
    assert.is_nil(p.w)
  end)
end)

-- nn.ModuleList(other): PyTorch's ModuleList takes any iterable of modules.
describe("nn.ModuleList from another list", function()
  it("takes a ModuleList's or a Sequential's modules (the same ones), named 0, 1, ...", function()
    local a, b = nn.Linear(2, 3), nn.ReLU()
    local from_list = nn.ModuleList(nn.ModuleList { a, b })
    assert.are.equal(2, #from_list)
    assert.are.equal(a, from_list[1])
    assert.are.equal(b, from_list[2])
    local names = {}
    for k in pairs(from_list:state_dict()) do names[#names + 1] = k end
    table.sort(names)
    assert.are.same({ "0.bias", "0.weight" }, names)
    local from_seq = nn.ModuleList(nn.Sequential(a, b))
    assert.are.equal(2, #from_seq)
    assert.are.equal(a, from_seq[1])
  end)

  it("refuses another module, naming it", function()
    local ok, err = pcall(function() local _ = nn.ModuleList(nn.ModuleDict { { "a", nn.ReLU() } }) end)
    assert.is_false(ok)
    assert.truthy(err:find("got a module (ModuleDict)", 1, true))
  end)
end)

-- PyTorch's loop `for name, p in model.named_parameters():` written in Lua
-- called the returned map: "attempt to call a ember.List value".
describe("named_* as PyTorch's loops", function()
  local function model()
    return nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3), nn.Sequential(nn.ReLU(), nn.Linear(3, 1)))
  end

  it("for name, p in m:named_parameters() walks the parameters in registration order", function()
    local m = model()
    local names, shapes = {}, {}
    for name, p in m:named_parameters() do names[#names + 1], shapes[#shapes + 1] = name, p.shape[1] end
    assert.are.same({ "1.weight", "1.bias", "2.weight", "2.bias", "3.2.weight", "3.2.bias" }, names)
    assert.are.same({ 3, 3, 3, 3, 1, 1 }, shapes)
    assert.are.equal(m[1].weight, m:named_parameters()["1.weight"]) -- still the map
    local again = {}
    for name in pairs(m:named_parameters()) do again[#again + 1] = name end
    assert.are.same(names, again)
  end)

  it("named_buffers, named_children and named_modules too; ipairs on the lists as before", function()
    local m = model()
    local got = {}
    for name in m:named_buffers() do got[#got + 1] = name end
    assert.are.same({ "2.running_mean", "2.running_var", "2.num_batches_tracked" }, got)
    got = {}
    for name, child in m:named_children() do got[#got + 1] = name .. "=" .. child.__name end
    assert.are.same({ "1=Linear", "2=BatchNorm1d", "3=Sequential" }, got)
    got = {}
    for name, mod in m:named_modules() do got[#got + 1] = name .. "=" .. mod.__name end
    assert.are.same({ "=Sequential", "1=Linear", "2=BatchNorm1d", "3=Sequential", "3.1=ReLU", "3.2=Linear" }, got)
    local nc = m:named_children()
    assert.are.equal(3, #nc)
    assert.are.equal("BatchNorm1d", nc[2][2].__name)
    -- one result walked twice starts over
    local np, n = m:named_parameters(), 0
    for _ in np do n = n + 1 end
    for _ in np do n = n + 1 end
    assert.are.equal(12, n)
  end)
end)

describe("Module:state_dict(destination, prefix, keep_vars), as torch's", function()
  local m = nn.Sequential(nn.Linear(2, 3), nn.LayerNorm(3))
  local function keys(sd)
    local out = {}
    for k in pairs(sd) do out[#out + 1] = k end
    return out
  end
  it("puts the prefix in front of every name, in registration order", function()
    assert.are.same({ "enc.1.weight", "enc.1.bias", "enc.2.weight", "enc.2.bias" }, keys(m:state_dict(nil, "enc.")))
    assert.are.same({ "x.1.weight", "x.1.bias", "x.2.weight", "x.2.bias" }, keys(m:state_dict { prefix = "x." }))
    assert.is_false(m:state_dict(nil, "enc.")["enc.1.weight"].requires_grad)
  end)
  it("fills and returns the destination; keep_vars keeps the parameters themselves", function()
    local dest = { ["other.w"] = ember.zeros(1) }
    local r = m:state_dict(dest, "a.", true)
    assert.are.equal(dest, r)
    assert.are.same({ "other.w", "a.1.weight", "a.1.bias", "a.2.weight", "a.2.bias" }, keys(r))
    assert.are.equal(m:parameters()[1], r["a.1.weight"])
    assert.is_true(r["a.1.weight"].requires_grad)
  end)
  it("checks its arguments", function()
    raises_here(function() m:state_dict(nil, 3) end, "Sequential.state_dict: prefix must be a string, got number")
    raises_here(function() m:state_dict(nil, "", "yes") end, "Sequential.state_dict: keep_vars must be a boolean")
    raises_here(function() m:state_dict(5) end, "Sequential.state_dict: destination must be a table or nil, got number")
  end)
  it("a prefixed state dict loads into the prefixed model; strict reports missing and unexpected names", function()
    local outer = nn.Sequential(nn.Sequential(nn.Linear(2, 3), nn.LayerNorm(3)))
    outer:load_state_dict(m:state_dict(nil, "1."))
    assert(ember.equal(outer[1][1].weight, m[1].weight))
    local l = nn.Linear(2, 3)
    local sd = l:state_dict()
    sd.foo, sd.bias = ember.zeros(1), nil
    raises_here(function() l:load_state_dict(sd) end,
      "Linear.load_state_dict: names do not match the module: missing bias; unexpected foo")
    local _, missing, unexpected = l:load_state_dict(sd, false)
    assert.are.same({ "bias" }, missing)
    assert.are.same({ "foo" }, unexpected)
  end)
end)
