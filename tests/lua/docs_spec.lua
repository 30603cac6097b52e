-- The reference is complete: every public Lua function has a doc comment,
-- every function and method of the C-written API (ember.*, Tensor methods)
-- has an entry in lua/ember/doc/*.luadoc, and every EM_API declaration in
-- core/include has a comment. help() prints the entries, and LDoc builds
-- the HTML reference from config.ld.
--
-- What counts as a doc comment (lua/ember/_doc.lua reads them, LDoc too):
--   * a block of comment lines whose first line starts with "---" and has
--     text (the summary), directly above `function A.b(`, `function A:b(`
--     or `A.b = function(` -- no blank line between;
--   * every file of lua/ember/ (and nn/, optim/, data/) other than init.lua
--     and _private files starts with such a block: it documents what the
--     file exports (nn.Linear, ember.checkpoint, ...);
--   * public means the last part of the name does not start with "_"
--     (`__init`, `_group` are private); nothing else is skipped.
-- C API: an EM_API line needs a comment on the line itself, right above it,
-- or above the run of declarations it is part of (no blank line between).
local ember = require "ember"
local doc = require "ember._doc"

local SRC = os.getenv("EMBER_SOURCE_DIR") or "."

local function short(path) return (path:gsub("^.*/lua/ember/", "lua/ember/")) end

describe("every public Lua function has a doc comment", function()
  for _, f in ipairs(doc.files()) do
    if f.public then
      it(short(f.path), function()
        local missing = {}
        if not f.parsed.header_is_doc then missing[#missing + 1] = "the file's first comment block (it must start with ---)" end
        for _, d in ipairs(f.parsed.defs) do
          local last = d.name:match("([%w_]+)$")
          if last:sub(1, 1) ~= "_" then
            local text = d.doc and f.parsed.entries[d.name]
            if not d.doc then
              missing[#missing + 1] = ("line %d: %s"):format(d.line, d.name)
            elseif not (text and text:match("^%s*%S")) then
              missing[#missing + 1] = ("line %d: %s (empty summary)"):format(d.line, d.name)
            end
          end
        end
        assert(#missing == 0, ("%s: no doc comment for\n  %s"):format(short(f.path), table.concat(missing, "\n  ")))
      end)
    end
  end
end)

describe("the C-written API has reference entries", function()
  local idx = doc.index()

  it("every ember.* function (and ember.Size, ember.Tensor)", function()
    local missing = {}
    for k, v in pairs(ember) do
      if type(k) == "string" and k:sub(1, 1) ~= "_" and (type(v) == "function" or k == "Size" or k == "Tensor")
          and not idx["ember." .. k] then
        missing[#missing + 1] = "ember." .. k
      end
    end
    table.sort(missing)
    assert(#missing == 0, "no entry for " .. table.concat(missing, ", "))
  end)

  it("every tensor method", function()
    local missing = {}
    for k, v in pairs(ember.Tensor) do
      if type(v) == "function" and k:sub(1, 1) ~= "_" and not idx["Tensor:" .. k] then missing[#missing + 1] = "Tensor:" .. k end
    end
    table.sort(missing)
    assert(#missing == 0, "no entry for " .. table.concat(missing, ", "))
  end)

  it("the check can fail: a function without an entry is found", function()
    ember.Tensor.undocumented_probe = function() end
    local found = false
    for k in pairs(ember.Tensor) do found = found or (k == "undocumented_probe" and not idx["Tensor:" .. k]) end
    ember.Tensor.undocumented_probe = nil
    assert.is_true(found)
    local p = doc.parse { "-- a plain comment", "function M.f() end", "--- documented", "function M.g() end" }
    assert.is_false(p.defs[1].doc)
    assert.is_true(p.defs[2].doc)
  end)
end)

describe("the C API in core/include has doc comments", function()
  local p = assert(io.popen(("ls %s/core/include/*.h"):format(SRC)))
  for h in p:lines() do
    it(h:match("[^/]+$"), function()
      local lines = {}
      for l in io.lines(h) do lines[#lines + 1] = l end
      local bad = {}
      for i, l in ipairs(lines) do
        if l:match("^%s*EM_API") then
          local ok = l:find("/%*") ~= nil
          local j = i - 1
          while not ok and j >= 1 do
            local q = lines[j]
            if q:match("^%s*$") then break end
            if q:match("%*/%s*$") or q:match("^%s*/%*") or q:match("^%s*%*") then ok = true end
            j = j - 1
          end
          if not ok then bad[#bad + 1] = ("line %d: %s"):format(i, l) end
        end
      end
      assert(#bad == 0, "no comment for\n  " .. table.concat(bad, "\n  "))
    end)
  end
  p:close()
end)

describe("help() prints the reference entry", function()
  local function captured(f) return f() end -- help returns what it prints

  it("of ember.matmul, a tensor method, an nn class and its method, a name", function()
    local nn = require "ember.nn"
    local s = captured(function() return ember.help(ember.matmul) end)
    assert(s:find("^ember.matmul\n") and s:find("Matrix product", 1, true), s)
    s = captured(function() return ember.help(ember.zeros(1).sum) end)
    assert(s:find("Tensor:sum", 1, true), s)
    s = captured(function() return ember.help(nn.Linear) end)
    assert(s:find("nn.Linear", 1, true) and s:find("in_features", 1, true), s)
    s = captured(function() return ember.help(nn.MultiHeadAttention) end)
    assert(s:find("nn.MultiHeadAttention", 1, true) and s:find("heads", 1, true), s)
    s = captured(function() return ember.help(nn.Linear.forward) end)
    assert(s:find("nn.Linear:forward", 1, true), s)
    s = captured(function() return ember.help("Tensor:topk") end)
    assert(s:find("k largest", 1, true), s)
    s = captured(function() return ember.help(function() end) end)
    assert(s:find("help(x)", 1, true), s)
  end)

  -- help(ember.special.erfc) printed help's usage: the modules it searched were
  -- a list that lacked ember.special
  it("of every module of lua/ember/ and each of its documented functions, by value", function()
    local s = captured(function() return ember.help(ember.special.erfc) end)
    assert(s:find("^special.erfc\n"), s)
    local checked, wrong = 0, {}
    for _, f in ipairs(doc.files()) do
      local name = f.public and f.prefix and not f.prefix:find(".", 1, true) and f.prefix
      local ok, mod = false, nil
      if name then ok, mod = pcall(require, "ember." .. name) end
      if ok and type(mod) == "table" then
        for k, v in pairs(mod) do
          local text = type(k) == "string" and type(v) == "function" and doc.index()[name .. "." .. k]
          if text then
            checked = checked + 1
            if not doc.lookup(v) then wrong[#wrong + 1] = name .. "." .. k end -- (or ember's name for it)
          end
        end
      end
    end
    assert(checked > 50, "only " .. checked .. " functions")
    table.sort(wrong)
    assert(#wrong == 0, "help finds no entry for " .. table.concat(wrong, ", "))
  end)

  -- help("softcap") had no entry: an attention variant is named by a string too
  it("of an attention variant: description, options with defaults and help, per-call inputs (Lua and C)", function()
    local s = captured(function() return ember.help("softcap") end)
    assert(s:find("^attention variant softcap %(written in Lua") and s:find("logit soft-capping", 1, true), s)
    assert(s:find("  cap (float, default 50.0, 1e-06..1000000000): the cap: scores stay inside (-cap, cap)", 1, true), s)
    s = captured(function() return ember.help("document") end)
    assert(s:find("Options: none", 1, true) and s:find("  doc: 2-d, int64 (or bool, read as 0/1)", 1, true), s)
    assert(s:find("ember.data.pack makes them", 1, true), s) -- the file's own comment
    s = captured(function() return ember.help("linear") end)
    -- "linear" is also ember.linear (torch.nn.functional.linear): both entries
    assert(s:find("^ember.linear\n") and s:find("\nattention variant linear %(a C plugin") and s:find("O(L) memory", 1, true), s)
    assert(s:find("  feature_map (string, default elu, one of elu, favor): ", 1, true), s)
    assert(s:find("Supports: key_padding, causal, weights, cross", 1, true) and not s:find("Per-call", 1, true), s)
    -- a variant defined in the session, and a name that is none
    ember.attention_variant { name = "docs_spec_variant", description = "a test variant",
      options = { { name = "t", type = "float", default = 2, help = "the t" } }, inputs = { w = { ndim = 1, dtype = "float" } },
      score = function(sc, b, h, q, k, ctx) return sc * ctx.options.t + ctx.w[k] end }
    s = captured(function() return ember.help("docs_spec_variant") end)
    assert(s:find("^attention variant docs_spec_variant %(written in Lua%)") and s:find("  t (float, default 2.0", 1, true) and s:find("  w: 1-d, float", 1, true), s)
    s = captured(function() return ember.help("no_such_variant_here") end)
    assert(s:find("no reference entry for no_such_variant_here", 1, true), s)
  end)
end)

describe("LDoc builds the reference", function()
  local has_ldoc = os.execute("command -v ldoc >/dev/null 2>&1")
  -- The reference built by ldoc from config.ld into a new folder: the folder, and ldoc's log.
  local function build_reference()
    local out = os.tmpname()
    os.remove(out)
    local p = assert(io.popen(("cd '%s' && ldoc -d '%s' . 2>&1"):format(SRC, out)))
    local log = p:read("a")
    local ok = p:close()
    assert(ok, log)
    return out, log
  end
  it("from config.ld, with a page per module", function()
    if not has_ldoc then pending("ldoc is not installed (apt-get install lua-ldoc)") return end
    local out, log = build_reference()
    local f = assert(io.open(out .. "/index.html"), "no index.html: " .. log)
    local index = f:read("a")
    f:close()
    for _, m in ipairs { "ember", "nn.Linear", "optim.AdamW", "checkpoint", "generate", "data.Dataset" } do
      assert(index:find(m, 1, true), "the index lacks " .. m)
    end
    os.execute("rm -rf '" .. out .. "'")
  end)

  -- lua/README.md's table of modules names each one's page: the page is built
  -- (ember.special, profiler and autocast had none, not being in config.ld;
  -- linalg's is ember.linalg.html)
  it("with every page lua/README.md names", function()
    if not has_ldoc then pending("ldoc is not installed (apt-get install lua-ldoc)") return end
    local out = build_reference()
    local f = assert(io.open(SRC .. "/lua/README.md"))
    local readme = f:read("a")
    f:close()
    local pages, missing = 0, {}
    for page in readme:gmatch("`((%a+)/[%w_.]+%.html)`") do
      pages = pages + 1
      local h = io.open(out .. "/" .. page)
      if h then h:close() else missing[#missing + 1] = page end
    end
    for _, page in ipairs { "modules/ember.special.html", "modules/profiler.html", "modules/autocast.html",
                            "modules/ember.flex.html" } do
      local h = io.open(out .. "/" .. page)
      if h then h:close() else missing[#missing + 1] = page end
    end
    os.execute("rm -rf '" .. out .. "'")
    assert(pages >= 8, "lua/README.md names no pages")
    assert(#missing == 0, "not built: " .. table.concat(missing, ", "))
  end)
end)
