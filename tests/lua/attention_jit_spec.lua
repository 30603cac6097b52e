-- Traced variants' programs compiled to C (backends/cpu/cpu_expr_jit.c):
-- the compiled tile gives what the interpreter gives, bit for bit, forward
-- and backward; with no compiler, with compiling turned off, and over a
-- corrupt cache entry ember falls back or rebuilds and says which path ran
-- (ember.cpu_info()); a compiled tile that meets a bad index or a NaN
-- hands the row to the interpreter, whose error names the variant's data.
-- Each case runs in a fresh process: the environment picks the path.
local build = os.getenv("EMBER_BUILD_DIR") or "build"

local tmpdir = require "tests.lua.helpers.tmpdir"
local child = require "tests.lua.helpers.child"

-- Runs `body` (Lua) in a fresh ember with `env` ("K=V K=V"); returns its output.
local function run(env, body)
  return (child.output([[
local ember = require "ember"
local function info() return ember.cpu_info().float32:match("traced programs: ([^;]*; [^;]*)") end
-- Every element of out and of every gradient, exactly (hex floats): a sum
-- hid softcap's one-ulp differences in dq and dk (probe 24).
local function case(name, dtype, opts, L)
  ember.manual_seed(7)
  local spec = { heads = 2, head_dim = 8, attention = name, dtype = dtype }
  for k, v in pairs(opts or {}) do spec[k] = v end
  local att = ember.Attention(spec)
  for _, p in ipairs(att:parameters()) do p:detach():copy_(ember.randn(p.shape, { dtype = p.dtype })) end
  local mk = function() return ember.randn({ 2, 2, L or 40, 8 }, { dtype = dtype }):requires_grad_() end
  local q, k, v = mk(), mk(), mk()
  local y = att(q, k, v, { causal = true })
  y:double():pow(2):sum():backward() -- a gradient of out that varies by element
  local parts = { y, q.grad, k.grad, v.grad }
  for _, p in ipairs(att:parameters()) do if p.grad then parts[#parts + 1] = p.grad end end
  local bits = {}
  for i, t in ipairs(parts) do
    local e = {}
    for j, x in ipairs(t:double():reshape(-1):totable()) do e[j] = ("%a"):format(x) end
    bits[i] = table.concat(e, " ")
  end
  return table.concat(bits, ",")
end
]] .. body, { env = env, plugins = true }))
end

local CASES = [[
for _, c in ipairs { { "softcap", "float32" }, { "softcap", "float64" }, { "alibi_lua", "float32" },
                     { "t5_lua", "float64" }, { "window_lua", "float32" }, { "sinks", "float64" },
                     { "sliding_sinks", "float32" }, { "example_lua", "float32" },
                     { "softcap", "float32", { cap = 2 }, 70, "softcap2" }, { "softcap", "float64", { cap = 2 }, 70, "softcap2" },
                     { "t5_lua", "float32", nil, 70, "t5_lua70" } } do
  local ok, r = pcall(case, c[1], c[2], c[3], c[4])
  print((c[5] or c[1]) .. "/" .. c[2] .. "=" .. (ok and r or ("error: " .. tostring(r))))
end
print("path=" .. info())
]]

-- name/dtype=sums lines of an output
local function results(out)
  local t = {}
  for name, v in out:gmatch("([%w_]+/%w+)=([^\n]*)") do t[name] = v end
  return t
end

describe("compiled traced programs", function()
  local cache = tmpdir()

  it("give the interpreter's outputs and gradients, bit for bit, and cpu_info says which ran", function()
    local compiled = run("EMBER_JIT_CACHE=" .. cache, CASES)
    local interpreted = run("EMBER_JIT=0", CASES)
    assert.truthy(compiled:find("path=compiled", 1, true), compiled)
    assert.truthy(compiled:find("0 interpreted", 1, true), compiled)
    assert.truthy(interpreted:find("path=interpreted (EMBER_JIT=0); 0 calls compiled", 1, true), interpreted)
    local a, b = results(compiled), results(interpreted)
    local n = 0
    for name, v in pairs(b) do
      if name ~= "path" then
        n = n + 1
        assert.is_nil(v:find("error", 1, true), name .. ": " .. v)
        assert.are.equal(v, a[name], name)
      end
    end
    assert.is_true(n >= 11, compiled)
  end)

  it("fall back to the interpreter, with the reason, when there is no compiler", function()
    local out = run("EMBER_JIT_CACHE=" .. tmpdir() .. " EMBER_CC=/nonexistent/cc", CASES)
    assert.truthy(out:find("path=interpreted (compiling with /nonexistent/cc failed", 1, true), out)
    local ref = results(run("EMBER_JIT=0", CASES))
    for name, v in pairs(results(out)) do
      if name ~= "path" then assert.are.equal(ref[name], v, name) end
    end
  end)

  it("say how a compiler failed: not found, an exit status with no output, no output file, a signal", function()
    local dir = tmpdir()
    local function script(name, body)
      local path = dir .. "/" .. name
      local f = assert(io.open(path, "w"))
      f:write("#!/bin/sh\n" .. body .. "\n")
      f:close()
      assert(os.execute("chmod +x '" .. path .. "'"))
      return path
    end
    local probe = [[
local att = ember.Attention({ heads = 2, head_dim = 8, attention = "softcap" })
local q = ember.randn(1, 2, 4, 8)
att(q, q, q)
print("path=" .. info())
]]
    for cc, want in pairs {
      ["/nonexistent/cc"] = "cannot start it: No such file or directory",
      [script("fail.sh", "exit 3")] = "it exited with status 3 and printed nothing",
      [script("says.sh", "echo 'cc: error: no input'; exit 1")] = "cc: error: no input",
      [script("none.sh", "exit 0")] = "it exited with status 0 but wrote no shared object",
      [script("killed.sh", "kill -9 $$")] = "it was killed by signal 9",
    } do
      local out = run("EMBER_JIT_CACHE=" .. tmpdir() .. " EMBER_CC=" .. cc, probe)
      assert.truthy(out:find("path=interpreted (compiling with " .. cc .. " failed: " .. want, 1, true), out)
    end
  end)

  it("compile safely when processes share a cache: both compile at once and both load", function()
    local dir = tmpdir()
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write([[
local ember = require "ember"
local att = ember.Attention({ heads = 2, head_dim = 8, attention = "softcap" })
local x = ember.randn(1, 2, 16, 8)
att(x, x, x)
print("path=" .. ember.cpu_info().float32:match("traced programs: ([^;]*)"))
]])
    f:close()
    local cmd = ("EMBER_PLUGIN_PATH='%s/plugins' EMBER_PLUGIN_PATH_ONLY=1 OMP_NUM_THREADS=1 EMBER_JIT_CACHE='%s' '%s/bin/ember' '%s'")
      :format(build, dir, build, script)
    local p = assert(io.popen(("(%s > '%s/a.out' 2>&1 & %s > '%s/b.out' 2>&1 & wait)"):format(cmd, dir, cmd, dir)))
    p:close()
    os.remove(script)
    for _, name in ipairs { "a.out", "b.out" } do
      local h = assert(io.open(dir .. "/" .. name))
      local out = h:read("a")
      h:close()
      assert.truthy(out:find("path=compiled", 1, true), out)
    end
    local ls = assert(io.popen("ls '" .. dir .. "'"))
    local names = ls:read("a")
    ls:close()
    assert.is_nil(names:find("tmp-", 1, true), names) -- no temporary file left behind
    assert.truthy(names:find("%x+%.so"), names)
  end)

  it("rebuild a corrupt or truncated cache entry instead of failing", function()
    run("EMBER_JIT_CACHE=" .. cache, CASES) -- fills the cache
    local p = assert(io.popen("ls '" .. cache .. "'"))
    local n = 0
    for name in p:lines() do
      if name:match("%.so$") then
        local f = assert(io.open(cache .. "/" .. name, "w"))
        f:write("not an ELF file")
        f:close()
        n = n + 1
      end
    end
    p:close()
    assert.is_true(n > 0)
    local out = run("EMBER_JIT_CACHE=" .. cache, CASES)
    assert.truthy(out:find("path=compiled", 1, true), out)
    local ref = results(run("EMBER_JIT=0", CASES))
    for name, v in pairs(results(out)) do
      if name ~= "path" then assert.are.equal(ref[name], v, name) end
    end
  end)

  it("keep the cache folder to EMBER_JIT_CACHE_MAX entries, the ones used last", function()
    local dir = tmpdir()
    local function entries()
      local p = assert(io.popen("ls '" .. dir .. "'"))
      local t = {}
      for name in p:lines() do if name:match("%.so$") then t[#t + 1] = name end end
      p:close()
      return t
    end
    -- a stale temporary file of a crashed compile goes too
    local tmp = dir .. "/tmp-0000000000000000-1.c"
    assert(io.open(tmp, "w")):close()
    os.execute("touch -d '2 hours ago' '" .. tmp .. "'")
    local ref = results(run("EMBER_JIT=0", CASES))
    local out = run("EMBER_JIT_CACHE=" .. dir .. " EMBER_JIT_CACHE_MAX=2", CASES)
    assert.truthy(out:find("path=compiled", 1, true), out)
    assert.truthy(out:find("0 interpreted", 1, true), out)
    for name, v in pairs(results(out)) do
      if name ~= "path" then assert.are.equal(ref[name], v, name) end
    end
    assert.are.equal(2, #entries())
    assert.is_nil(io.open(tmp, "r"), "the stale temporary file is removed")
    -- without the limit the same cases leave one entry per variant and dtype
    local all = run("EMBER_JIT_CACHE=" .. dir, CASES)
    assert.truthy(all:find("path=compiled", 1, true), all)
    assert.is_true(#entries() >= 5, table.concat(entries(), " "))
  end)

  it("leave a row with a bad index, a NaN or +inf to the interpreter, whose error names it", function()
    for _, env in ipairs { "EMBER_JIT_CACHE=" .. cache, "EMBER_JIT=0" } do
    local out = run(env, [[
ember.attention_variant { name = "bad_table_jit",
  params = function(o, d) return { { name = "t", tensor = ember.zeros(4, d.heads) } } end,
  score = function(s, b, h, q, k, ctx) return s + ctx.t[ember.abs(q - k) + 1][h] end }
local att = ember.Attention({ heads = 2, head_dim = 8, attention = "bad_table_jit" })
local x = ember.randn(1, 2, 6, 8)
local ok, err = pcall(att, x, x, x)
print("index=" .. tostring(ok) .. " " .. tostring(err))
print("small=" .. tostring((pcall(att, x:narrow(3, 1, 3), x:narrow(3, 1, 3), x:narrow(3, 1, 3)))))
ember.attention_variant { name = "nan_jit", score = function(s) return ember.log(s - 1e9) end }
att = ember.Attention({ heads = 1, head_dim = 8, attention = "nan_jit" })
x = ember.randn(1, 1, 6, 8)
ok, err = pcall(att, x, x, x)
print("nan=" .. tostring(ok) .. " " .. tostring(err))
ember.attention_variant { name = "inf_jit", score = function(s) return s * 0 + math.huge end }
att = ember.Attention({ heads = 1, head_dim = 8, attention = "inf_jit" })
ok, err = pcall(att, x, x, x)
print("inf=" .. tostring(ok) .. " " .. tostring(err))
-- an exp that overflows float32 is +inf (as ember.exp), reported, not saturated to a finite score
ember.attention_variant { name = "exp_jit", score = function(s, b, h, q, k) return s + ember.exp(k * 1000) end }
att = ember.Attention({ heads = 1, head_dim = 8, attention = "exp_jit" })
ok, err = pcall(att, x, x, x)
print("exp=" .. tostring(ok) .. " " .. tostring(err))
print("path=" .. info())
]])
    assert.truthy(out:find("index=false", 1, true), out)
    assert.truthy(out:find("index 5 out of range for dim 1 of captured tensor 't' (size 4) at b=1 h=1 q=1 k=5", 1, true), out)
    assert.truthy(out:find("small=true", 1, true), out)
    assert.truthy(out:find("nan=false", 1, true), out)
    assert.truthy(out:find("gave NaN at b=1 h=1 q=1 k=1", 1, true), out)
    assert.truthy(out:find("inf=false", 1, true), out)
    assert.truthy(out:find("gave +inf at b=1 h=1 q=1 k=1", 1, true), out)
    assert.truthy(out:find("exp=false", 1, true), out)
    assert.truthy(out:find("exp=false[^\n]*gave %+inf at b=1 h=1 q=1 k=1"), out)
    assert.truthy(out:find(env == "EMBER_JIT=0" and "path=interpreted (EMBER_JIT=0)" or "path=compiled", 1, true), out)
    end
  end)
end)
