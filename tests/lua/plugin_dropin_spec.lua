-- A new user's drop-in experience (plugins/README.md, "Build, drop in,
-- check"): the guide's commands run verbatim; C variants compiled here with
-- the guide's command (cc -shared -fPIC $(pkg-config --cflags --libs ember),
-- the build folder on PKG_CONFIG_PATH) into a temporary folder on
-- EMBER_PLUGIN_PATH, then used by name; broken ones refused at load naming
-- the file and the fault, or failing their call only, the process going on.
-- Each case runs in its own `ember` process (plugins load once a process).
local ember = require "ember"

local build = os.getenv("EMBER_BUILD_DIR") or "build"
local ember_bin = build .. "/bin/ember"

local shell = require "tests.lua.helpers.shell"
local sh, q = shell.run, shell.quote
local write = require("tests.lua.helpers.files").write

local have_cc = shell.have("cc", "pkg-config")

-- A variant of the guide's shape, with knobs for the faults a user makes.
local SOURCE = [[
#include <ember_attention.h>
#ifndef VNAME
#define VNAME NAME
#endif
#ifndef CAPS
#define CAPS EM_ATTN_CAP_ALL
#endif
#ifndef LEFT
#define LEFT 3
#endif
#ifndef OPT_DEFAULT
#define OPT_DEFAULT 2
#endif
static const em_attn_option_spec OPTIONS[] = {
  {.name = "K", .type = EM_ATTN_OPT_INT, .default_num = OPT_DEFAULT, .bounded = true, .min = 0, .max = 100,
   .help = "clip"},
#ifdef BAD_CHOICE
  {.name = "mode", .type = EM_ATTN_OPT_STRING, .default_str = "c", .choices = "a|b", .help = "m"},
#else
  {.name = OPT2, .type = EM_ATTN_OPT_STRING, .default_str = "a", .choices = "a|b", .help = "m"},
#endif
};
static em_status init_params(const em_attn_options *o, const em_attn_dims *d, em_dtype dt,
                             em_device dev, int *n, em_attn_param *p) {
#ifdef INIT_FAILS
  (void)o, (void)d, (void)dt, (void)dev, (void)n, (void)p;
  return em_error(EM_ERR_ARG, "no tables today");
#endif
  int64_t shape[2] = {2 * em_attn_opt_int(o, "K") + 1, d->heads};
  p[0] = (em_attn_param){.name = "relbias", .learned = true};
  *n = 1;
  return em_normal(&p[0].tensor, 2, shape, 0.0, 0.5, dt, dev);
}
#ifndef FORWARD_FAILS
static em_status declare(const em_attn_options *o, const em_attn_dims *d, em_attn_decl *decl) {
  (void)d;
#ifdef DECLARE_FAILS
  return em_error(EM_ERR_ARG, "the declaration refuses on purpose");
#endif
  decl->bias = EM_ATTN_BIAS_TABLE, decl->rel = EM_ATTN_REL_CLIP, decl->table_param = 0;
  decl->max_distance = em_attn_opt_int(o, "K");
  decl->mask.kind = EM_ATTN_MASK_WINDOW, decl->mask.left = LEFT, decl->mask.right = 0;
  return EM_OK;
}
#endif
#ifdef FORWARD_FAILS
static em_status fwd(const em_attn_call *c, em_tensor **out, em_tensor **w, void **saved) {
  (void)out, (void)w, (void)saved;
  return em_error(EM_ERR_ARG, "my kernel refuses Lq=%lld", (long long)c->Lq);
}
static em_status bwd(void *s, em_tensor *d, const bool *n, em_tensor **g) {
  (void)s, (void)d, (void)n, (void)g;
  return EM_OK;
}
#endif
static const em_attention_variant V = {
  .abi_version = EM_ATTENTION_ABI_VERSION, .struct_size = sizeof(em_attention_variant),
  .name = VNAME, .version = "0.1", .description = "drop-in probe",
  .caps = CAPS, .n_options = 2, .options = OPTIONS, .init_params = init_params,
#ifdef FORWARD_FAILS
  .forward = fwd, .backward = bwd,
#else
  .declare = declare,
#endif
};
EM_PLUGIN_EXPORT const em_plugin_info ember_plugin_info = {
  EM_ATTENTION_ABI_VERSION, EM_PLUGIN_ATTENTION, NAME, "0.1", "drop-in probe"};
EM_PLUGIN_EXPORT const void *ember_plugin_init(char *err, size_t errlen) {
  (void)err, (void)errlen;
  return &V;
}
]]

describe("dropping an attention variant into a folder", function()
  if not have_cc then
    pending("no C compiler or pkg-config")
    return
  end
  local dir = require("tests.lua.helpers.tmpdir")()
  assert(os.execute("mkdir -p " .. q(dir .. "/good") .. " " .. q(dir .. "/bad") .. " " .. q(dir .. "/home")))
  write(dir .. "/probe.c", SOURCE)
  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  -- the guide's compile command, against this build tree
  local function compile(out, defs)
    local cmd = ("PKG_CONFIG_PATH=%s cc -std=c11 -shared -fPIC -Wall -Werror %s -o %s %s "
      .. "$(PKG_CONFIG_PATH=%s pkg-config --cflags --libs ember)"):format(q(build), defs, q(out),
      q(dir .. "/probe.c"), q(build))
    local log, rc = sh(cmd)
    assert(rc == 0, "cc failed: " .. log)
  end
  -- ember with the folders on EMBER_PLUGIN_PATH, the build's own plugins after
  local function run(folders, chunk)
    local path = table.concat(folders, ":") .. ":" .. build .. "/plugins"
    return sh(("EMBER_PLUGIN_PATH=%s %s -e %s"):format(q(path), q(ember_bin), q(chunk)))
  end

  compile(dir .. "/good/ember_attn_mywin.so", [[-DNAME='"mywin"' -DOPT2='"mode"']])

  -- the guide builds against the clone's build/ (an ASan tree in another
  -- folder runs the same commands against build/ when there is one)
  local exe = io.open("build/bin/ember")
  if exe then exe:close() end
  local guide = exe and it or pending
  guide("the guide's commands work verbatim (against the clone's build/)", function()
    local f = assert(io.open("plugins/README.md"))
    local text = f:read("a")
    f:close()
    local a, b = text:find("### Build, drop in, check", 1, true), text:find("## The conformance checker", 1, true)
    assert.truthy(a and b, "plugins/README.md has no 'Build, drop in, check' section")
    local script = { "set -e" }
    for block in text:sub(a, b):gmatch("```sh\n(.-)```") do script[#script + 1] = block end
    assert.is_true(#script >= 3, "the section has its two sh blocks")
    write(dir .. "/guide.sh", table.concat(script, "\n"))
    -- a user's environment: a HOME of their own, no test-only loader switch
    local out, rc = sh(("env -u EMBER_PLUGIN_PATH -u EMBER_PLUGIN_PATH_ONLY HOME=%s bash %s"):format(
      q(dir .. "/home"), q(dir .. "/guide.sh")))
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("myattn%s+attention%s+2%.0%s+loaded"), out)
    assert.truthy(out:find("ember.Size{2, 5, 16}", 1, true), out)
    local _, passed = out:gsub("%d+ passed, 0 failed", "")
    assert.are.equal(2, passed, out)
  end)

  it("the guide's Lua blocks run as a script does (no REPL globals such as nn)", function()
    local f = assert(io.open("plugins/README.md"))
    local text = f:read("a")
    f:close()
    local n = 0
    for block in text:gmatch("```lua\n(.-)```") do
      n = n + 1
      local path = ("%s/block%d.lua"):format(dir, n)
      write(path, block)
      local out, rc = sh(("%s %s"):format(q(ember_bin), q(path)))
      assert(rc == 0, "plugins/README.md's Lua block " .. n .. " fails as a script:\n" .. block .. "\n" .. out)
    end
    assert.is_true(n >= 1)
  end)

  it("a dropped-in C variant is used by name and trains, equal to a dense reference", function()
    local out, rc = run({ dir .. "/good" }, [[
      local att = ember.Attention{attention = "mywin", heads = 2, head_dim = 3, dtype = "float64", K = 2}
      local tbl = att:parameters()[1]
      local q, k, v = ember.randn(1, 2, 6, 3, {dtype = "float64"}), ember.randn(1, 2, 6, 3, {dtype = "float64"}),
        ember.randn(1, 2, 6, 3, {dtype = "float64"})
      local bias = ember.zeros(2, 6, 6, {dtype = "float64"})
      for h = 1, 2 do for i = 1, 6 do for j = 1, 6 do
        local r = j - i
        bias[h][i][j] = (r >= -3 and r <= 0) and tbl[math.max(-2, math.min(2, r)) + 3][h]:item() or -math.huge
      end end end
      local std = ember.Attention{attention = "standard", heads = 2, head_dim = 3, dtype = "float64"}
      assert((att(q, k, v) - std(q, k, v, {attn_mask = bias})):abs():max():item() < 1e-12)
      local layer = ember.nn.TransformerEncoderLayer(16, 2, {dim_feedforward = 32, attention = "mywin",
                                                            attention_options = {K = 3}})
      local opt = ember.optim.AdamW(layer:parameters(), {lr = 1e-2})
      local x = ember.randn(4, 10, 16)
      local first, last
      for _ = 1, 15 do
        opt:zero_grad()
        local loss = (layer(x) - x):pow(2):mean()
        loss:backward()
        opt:step()
        first, last = first or loss:item(), loss:item()
      end
      assert(last < first, first .. " -> " .. last)
      print("trained")]])
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("trained", 1, true), out)
  end)

  it("the checker passes a variant that declares a table and a window (zero tables keep the window)", function()
    local out, rc = sh(("EMBER_PLUGIN_PATH=%s %s scripts/check_plugin.lua mywin --quick"):format(
      q(dir .. "/good:" .. build .. "/plugins"), q(ember_bin)))
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("ok %d+ %- zero tables equal standard with the declared window mask"), out)
  end)

  -- faults found at load: each listed as rejected with its file and reason
  local faults = {
    { "names", [[-DNAME='"names"' -DVNAME='"other"' -DOPT2='"mode"']],
      "the vtable's name 'other' differs from the plugin info's name 'names'" },
    { "caps", [[-DNAME='"caps"' -DCAPS=0x1000u -DOPT2='"mode"']], "unknown capability bits 0x1000" },
    { "range", [[-DNAME='"range"' -DOPT_DEFAULT=500 -DOPT2='"mode"']],
      "refuses its own option defaults: attention 'range': option 'K' must be in [0, 100], got 500" },
    { "choice", [[-DNAME='"choice"' -DBAD_CHOICE]], "option 'mode' must be one of a|b, got \"c\"" },
    { "twice", [[-DNAME='"twice"' -DOPT2='"K"']], "declares option 'K' twice" },
  }
  for _, f in ipairs(faults) do compile(("%s/bad/ember_attn_%s.so"):format(dir, f[1]), f[2]) end
  compile(dir .. "/bad/ember_attn_negwin.so", [[-DNAME='"negwin"' -DLEFT=-2 -DOPT2='"mode"']])
  compile(dir .. "/bad/ember_attn_declfails.so", [[-DNAME='"declfails"' -DDECLARE_FAILS -DOPT2='"mode"']])
  compile(dir .. "/bad/ember_attn_fwdfails.so", [[-DNAME='"fwdfails"' -DFORWARD_FAILS -DOPT2='"mode"']])
  compile(dir .. "/bad/ember_attn_initfails.so", [[-DNAME='"initfails"' -DINIT_FAILS -DOPT2='"mode"']])
  compile(dir .. "/bad/ember_attn_mywin_again.so", [[-DNAME='"mywin"' -DOPT2='"mode"']])
  write(dir .. "/bad/broken.lua", "return {\n  name = 'broken',\n  score = function(s) return s + end,\n}\n")

  it("refuses, at load, a plugin whose vtable or option table is wrong, naming the file and the fault", function()
    local chunk = { "local rows = {}",
      "for _, r in ipairs(ember.plugins()) do rows[r.path:match('[^/]+$')] = r end" }
    for _, f in ipairs(faults) do
      chunk[#chunk + 1] = ([[
        do local r = assert(rows["ember_attn_%s.so"], "%s is not listed")
          assert(not r.loaded, "%s loaded")
          assert(r.reason:find(%q, 1, true), "%s: " .. r.reason) end]]):format(f[1], f[1], f[1], f[3], f[1])
    end
    chunk[#chunk + 1] = [[
      local r = rows["broken.lua"]
      assert(r and not r.loaded and r.reason:find("broken.lua:3:", 1, true), "broken.lua: " .. tostring(r and r.reason))
      r = rows["ember_attn_mywin_again.so"]
      assert(r and not r.loaded and r.reason:find("shadowed by", 1, true) and r.reason:find("ember_attn_mywin.so", 1, true))
      -- the process goes on: the good ones work
      assert(ember.Attention{attention = "mywin", heads = 2, head_dim = 4}(ember.randn(1, 2, 5, 4),
        ember.randn(1, 2, 5, 4), ember.randn(1, 2, 5, 4)).shape[3] == 5)
      print("all refused")]]
    local out, rc = run({ dir .. "/good", dir .. "/bad" }, table.concat(chunk, "\n"))
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("all refused", 1, true), out)
  end)

  it("ember.attention_variants() prints the rejected files with their reasons after the variants", function()
    local out, rc = run({ dir .. "/good", dir .. "/bad" }, "print(ember.attention_variants())")
    assert.are.equal(0, rc, out)
    local variants, rejected = out:match("^(.-)\n(  rejected: .*)$")
    assert.truthy(variants and variants:find("mywin", 1, true), out)
    for _, f in ipairs(faults) do
      assert.truthy(rejected:find(("  rejected: %s/bad/ember_attn_%s.so: "):format(dir, f[1]), 1, true), f[1] .. ": " .. out)
    end
    -- a .lua file's reason already starts with its path: said once
    assert.truthy(rejected:find("\n  rejected: " .. dir .. "/bad/broken.lua:3:", 1, true), out)
  end)

  it("a plugin whose init_params, declare or kernel fails, or declares a negative window, fails that call only, named once", function()
    local out, rc = run({ dir .. "/bad" }, [[
      local q = ember.randn(1, 2, 5, 4)
      for name, want in pairs{declfails = "the declaration refuses on purpose", fwdfails = "my kernel refuses Lq=5",
                              negwin = "declared block mask has negative sizes", initfails = "no tables today"} do
        local ok, err = pcall(function()
          local a = ember.Attention{attention = name, heads = 2, head_dim = 4}
          return a(q, q, q)
        end)
        -- the variant named once, then its reason
        assert(not ok and err:find("attention '" .. name .. "': " .. want, 1, true), name .. ": " .. tostring(err))
        local _, times = err:gsub("attention '" .. name .. "'", "")
        assert(times == 1, name .. " named " .. times .. " times: " .. err)
      end
      assert(ember.Attention{attention = "standard", heads = 2, head_dim = 4}(q, q, q):sum():item() == ember.Attention{attention = "standard", heads = 2, head_dim = 4}(q, q, q):sum():item())
      print("process alive")]])
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("process alive", 1, true), out)
  end)

  it("a name not found names the folders that cannot be read and the rejected file of that name first", function()
    local out, rc = run({ dir .. "/no/such/folder", dir .. "/good/ember_attn_mywin.so", dir .. "/bad" }, [[
      local ok, err = pcall(ember.Attention, {attention = "names", heads = 2, head_dim = 4})
      assert(not ok)
      print(err)]])
    assert.are.equal(0, rc, out)
    assert.truthy(out:find(dir .. "/no/such/folder: No such file or directory", 1, true), out)
    assert.truthy(out:find(dir .. "/good/ember_attn_mywin.so: a file, not a folder (EMBER_PLUGIN_PATH lists folders; "
      .. "ember.load_plugin(path) loads one file)", 1, true), out)
    local first = out:match("rejected: ([^:]+):")
    assert.are.equal(dir .. "/bad/ember_attn_names.so", first, out)
  end)

  it("a folder named twice (relative, through '..', a symlink) is searched once: nothing is shadowed by itself", function()
    os.execute(("ln -sfn %s %s"):format(q(dir .. "/good"), q(dir .. "/link")))
    local out, rc = run({ dir .. "/good", dir .. "/good/../good", dir .. "/link", build .. "/plugins/." }, [[
      for _, r in ipairs(ember.plugins()) do
        assert(r.loaded or r.kind == "backend", r.path .. ": " .. r.reason)
      end
      local seen = {}
      for _, d in ipairs(ember.plugin_search_path()) do assert(not seen[d], d .. " twice"); seen[d] = true end
      print("once")]])
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("once", 1, true), out)
  end)

  it("a variant dropped in while ember runs is used by name after ember.rescan_plugins()", function()
    local late = dir .. "/late"
    os.execute("mkdir -p " .. q(late))
    local out, rc = run({ late }, ([[
      local ok, err = pcall(ember.Attention, {attention = "mywin", heads = 2, head_dim = 4})
      assert(not ok and err:find("ember.rescan_plugins()", 1, true), err)
      assert(os.execute("cp %s %s/ && printf %%s 'return {name = \"late_lua\", score = function(s) return s * 0.5 end}' > %s/late_lua.lua"))
      local list = ember.rescan_plugins()
      local seen = {}
      for _, r in ipairs(list) do if r.loaded then seen[r.name] = r.path end end
      assert(seen.mywin and seen.late_lua, tostring(list))
      assert(#ember.rescan_plugins() == #list, "a second rescan adds nothing")
      for _, name in ipairs{"mywin", "late_lua"} do
        local a = ember.Attention{attention = name, heads = 2, head_dim = 4}
        assert(a(ember.randn(1, 2, 5, 4), ember.randn(1, 2, 5, 4), ember.randn(1, 2, 5, 4)).shape[3] == 5)
      end
      print("rescanned")]]):format(dir .. "/good/ember_attn_mywin.so", late, late))
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("rescanned", 1, true), out)
  end)

  it("the checker reports a plugin that does not load as one failure, without a traceback", function()
    local out, rc = sh(("EMBER_PLUGIN_PATH=%s %s scripts/check_plugin.lua %s"):format(
      q(build .. "/plugins"), q(ember_bin), q(dir .. "/bad/ember_attn_caps.so")))
    assert.are.equal(1, rc, out)
    assert.truthy(out:find("not ok 1 - " .. dir .. "/bad/ember_attn_caps.so loads: ", 1, true), out)
    assert.truthy(out:find("unknown capability bits", 1, true), out)
    assert.truthy(out:find("0 passed, 1 failed", 1, true), out)
    assert.falsy(out:find("stack traceback", 1, true), out)
  end)

  it("help() has the reference entry of each plugin function (load_plugin is a wrapper)", function()
    local doc = require "ember._doc"
    for _, name in ipairs { "plugins", "load_plugin", "rescan_plugins", "plugin_search_path", "attention_variants",
                            "attention_variant", "where" } do
      local text, as = doc.lookup(ember[name])
      assert.truthy(text, "help(ember." .. name .. ") has no entry")
      assert.are.equal("ember." .. name, as)
    end
  end)

  it("leaves the process that runs this spec alone", function()
    assert.are.equal(6, ember.ones(2, 3):sum():item())
  end)
end)
