-- A half-copied plugin must be rejected with its reason, never crash the
-- process inside dlopen (issue 11, repro 1). Copies of a real plugin are
-- cut inside the ELF header, inside the program headers, inside each
-- loadable segment and in the tail past the segments (debug sections,
-- section headers), then loaded explicitly and from a plugin folder.
local ember = require "ember"

local build = os.getenv("EMBER_BUILD_DIR") or "build"
local src = build .. "/plugins/ember_attn_standard.so"

local files = require "tests.lua.helpers.files"
local slurp, write = files.read, files.write

-- The cut points: offsets into the file, each with what it cuts.
local function cut_points(bytes)
  local cuts = { { 0, "empty file" }, { 10, "inside e_ident" }, { 40, "inside the ELF header" } }
  local phoff = string.unpack("<I8", bytes, 0x20 + 1)
  local phentsize, phnum = string.unpack("<I2I2", bytes, 0x36 + 1)
  cuts[#cuts + 1] = { phoff + phentsize // 2, "inside the program headers" }
  local last_end = 0
  for i = 0, phnum - 1 do
    local at = phoff + i * phentsize + 1
    local ptype = string.unpack("<I4", bytes, at)
    local off, _, _, filesz = string.unpack("<I8I8I8I8", bytes, at + 8)
    if ptype == 1 and filesz > 0 then -- PT_LOAD
      cuts[#cuts + 1] = { off + filesz // 2, ("inside loadable segment %d"):format(i + 1) }
      cuts[#cuts + 1] = { off + filesz - 1, ("one byte short of loadable segment %d's end"):format(i + 1) }
      if off + filesz > last_end then last_end = off + filesz end
    end
  end
  assert(last_end < #bytes, "the plugin has a tail past its segments")
  cuts[#cuts + 1] = { last_end + (#bytes - last_end) // 2, "in the debug tail" }
  cuts[#cuts + 1] = { #bytes - 1, "one byte short of the whole file" }
  return cuts
end

describe("truncated plugins", function()
  local bytes = slurp(src)
  local dir = require("tests.lua.helpers.tmpdir")()
  local cuts = cut_points(bytes)

  teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

  it("has cut points in every part of the file", function()
    assert.is_true(#cuts >= 9)
  end)

  it("load_plugin rejects each cut copy with a reason, and ember goes on", function()
    for i, c in ipairs(cuts) do
      local path = ("%s/ember_attn_cut%d.so"):format(dir, i)
      write(path, bytes:sub(1, c[1]))
      local ok, err = pcall(ember.load_plugin, path)
      assert.is_false(ok, c[2] .. ": a truncated copy loaded")
      assert.truthy(err:find("ember.load_plugin", 1, true), err)
      assert.truthy(err:find(path, 1, true), err)
      assert.truthy(err:find("truncated?", 1, true), c[2] .. ": " .. err)
      os.remove(path)
    end
    assert.are.equal(6, ember.ones(2, 3):sum():item())
  end)

  it("a cut copy in a folder on EMBER_PLUGIN_PATH is listed as rejected", function()
    local folder = dir .. "/folder"
    os.execute("mkdir -p '" .. folder .. "'")
    for i, c in ipairs(cuts) do
      write(("%s/ember_attn_cut%02d.so"):format(folder, i), bytes:sub(1, c[1]))
    end
    local cmd = ("EMBER_PLUGIN_PATH='%s:%s/plugins' EMBER_PLUGIN_PATH_ONLY=1 '%s/bin/ember' -e '"
      .. "local n = 0; for _, p in ipairs(ember.plugins()) do "
      .. "if p.path:find(\"cut\") and not p.loaded and p.reason:find(\"truncated\") then n = n + 1 end end; "
      .. "print(\"rejected\", n); print(\"sum\", ember.ones(2, 2):sum():item())' 2>&1"):format(folder, build, build)
    local p = assert(io.popen(cmd))
    local out = p:read("a")
    local ok = p:close()
    assert.is_true(ok, out)
    assert.truthy(out:find("rejected\t" .. #cuts, 1, true), out)
    assert.truthy(out:find("sum\t4.0", 1, true), out)
  end)

  it("the banner names what did not load (ember -v), beside the count of what did", function()
    local folder = dir .. "/banner"
    os.execute("mkdir -p '" .. folder .. "'")
    write(folder .. "/ember_attn_halfway.so", bytes:sub(1, cuts[#cuts][1]))
    local cmd = ("EMBER_PLUGIN_PATH='%s:%s/plugins' EMBER_PLUGIN_PATH_ONLY=1 '%s/bin/ember' -v 2>&1"):format(folder, build, build)
    local p = assert(io.popen(cmd))
    local out = p:read("a")
    p:close()
    assert.truthy(out:find("plugins loaded, not loaded: [^\n]*ember_attn_halfway"), out)
  end)
end)
